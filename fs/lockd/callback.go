package lockd

import (
	"context"
	"net"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// callback is the service the server calls when it grants a blocked lock:
// NLM version 4's GRANTED and GRANTED_MSG on a TCP port of its own.
type callback struct {
	srv        *sunrpc.Server
	ln         net.Listener
	port       int
	registered bool // with this host's portmapper, as NLM version 4
}

// ServeCallbacks starts the callback service. The server finds it through
// this host's portmapper, so it registers there as NLM version 4 over TCP,
// but only if no other lock manager is registered: the kernel's lockd (or
// another rdmafs) keeps its registration, and rdmafs then polls without
// asking the server to queue its waiting locks (see pollFirst), and says
// so once in the log. It returns whether the server can call back.
func (c *Client) ServeCallbacks(ctx context.Context) bool {
	cb, err := c.startCallbacks()
	if err != nil {
		c.logf("lockd: no callback service (%v): blocked locks are polled every %v", err, pollMaxNoCallback)
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	registered := false
	defer func() {
		if !registered {
			cb.close()
			c.mu.Lock()
			c.cb = nil
			c.mu.Unlock()
		}
	}()
	other, err := localPortmap(rctx, nfs3.PortmapProcGetport, nlm.Program, nlm.Version, 0)
	switch {
	case err != nil:
		c.logf("lockd: %v: the server cannot call back; blocked locks are polled every %v", err, pollMaxNoCallback)
		return false
	case other != 0:
		c.logf("lockd: another lock manager (port %d) is registered as NLM version 4 with this host's portmapper: "+
			"the server cannot call rdmafs back; blocked locks are polled every %v", other, pollMaxNoCallback)
		return false
	}
	ok, err := localPortmap(rctx, nfs3.PortmapProcSet, nlm.Program, nlm.Version, uint32(cb.port))
	if err != nil || ok == 0 {
		c.logf("lockd: cannot register the callback service with this host's portmapper (%v): blocked locks are polled every %v", err, pollMaxNoCallback)
		return false
	}
	cb.registered, registered = true, true
	c.mu.Lock()
	c.callbacks = true
	c.mu.Unlock()
	return true
}

// startCallbacks starts serving GRANTED and GRANTED_MSG on a TCP port of
// its own, on every address.
func (c *Client) startCallbacks() (*callback, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return nil, err
	}
	cb := &callback{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	cb.srv = sunrpc.NewServer(sunrpc.ServerConfig{Workers: 2, MaxRecord: 64 << 10, MaxConns: 16, IdleTimeout: 5 * time.Minute, Logf: c.cfg.Logf})
	procs := make([]sunrpc.Proc, nlm.ProcGrantedMsg+1)
	procs[nlm.ProcNull] = sunrpc.NullProc
	procs[nlm.ProcGranted] = sunrpc.Proc{Serve: c.serveGranted}
	procs[nlm.ProcGrantedMsg] = sunrpc.Proc{Serve: c.serveGrantedMsg}
	cb.srv.Register(nlm.Program, nlm.Version, procs)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_ = cb.srv.Serve(ln)
	}()
	c.mu.Lock()
	c.cb = cb
	c.mu.Unlock()
	return cb, nil
}

// close stops the service and takes its registration back.
func (cb *callback) close() {
	if cb.registered {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, _ = localPortmap(ctx, nfs3.PortmapProcUnset, nlm.Program, nlm.Version, uint32(cb.port))
	}
	cb.srv.Close()
}

// serveGranted answers GRANTED: NLM4_GRANTED if a blocked LOCK of ours
// waits for that lock, NLM4_DENIED if not (the server then drops it).
func (c *Client) serveGranted(r *sunrpc.Request) []byte {
	var args nlm.TestArgs
	if err := nlm.Unmarshal(r.Args, &args); err != nil {
		return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
	}
	res := nlm.Res{Cookie: args.Cookie, Stat: nlm.StatDenied}
	if c.granted(&args.Lock) {
		res.Stat = nlm.StatGranted
	}
	e := sunrpc.SuccessHeader(r.Xid)
	res.Encode(e)
	return e.Buf
}

// serveGrantedMsg takes GRANTED_MSG, the asynchronous GRANTED that Linux's
// lockd sends, and answers with GRANTED_RES on the server's lock manager.
func (c *Client) serveGrantedMsg(r *sunrpc.Request) []byte {
	var args nlm.TestArgs
	if err := nlm.Unmarshal(r.Args, &args); err != nil {
		return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
	}
	res := nlm.Res{Cookie: args.Cookie, Stat: nlm.StatDenied}
	if c.granted(&args.Lock) {
		res.Stat = nlm.StatGranted
	}
	select {
	case <-c.quit:
		return sunrpc.SuccessHeader(r.Xid).Buf
	default:
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.bg, 30*time.Second)
		defer cancel()
		if err := c.call(ctx, nil, nlm.ProcGrantedRes, &res, nil); err != nil {
			c.logf("lockd: GRANTED_RES: %v", err)
		}
	}()
	return sunrpc.SuccessHeader(r.Xid).Buf
}
