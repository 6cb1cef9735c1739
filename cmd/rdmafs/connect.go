package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/xprtrdma"
)

// defaultNFSPort is NFS's port over TCP: where the client goes when the
// server has no portmapper, and where serve listens unless told otherwise.
const defaultNFSPort = nfs3.Port

// mountTimeout bounds one try of a MOUNT-time call.
const mountTimeout = 10 * time.Second

// connection is a mounted export: the root handle the MOUNT protocol gave
// and the NFS client over the chosen transport.
type connection struct {
	mount        *nfs3.MountClient
	nfs          *nfs3.Client
	acl          *nfs3.ACLClient // nil: no ACLs (noacl, or the server has no NFSACL)
	export       string
	root         nfs3.FH
	rootAttr     nfs3.Fattr
	rsize, wsize int
	abandoned    bool // by abandon: the server is gone
}

// connect mounts the export: it asks mountd for the root handle, sets up
// the NFS transport and learns the server's limits. With retry=N it keeps
// trying an unreachable server for N minutes.
func connect(ctx context.Context, a *mountArgs, logf func(string, ...any)) (*connection, error) {
	deadline := time.Now().Add(time.Duration(a.opts.Retry) * time.Minute)
	for {
		c, err := connectOnce(ctx, a, logf)
		if err == nil || !unreachable(err) || time.Now().After(deadline) {
			return c, err
		}
		logf("%v; retrying until %s", err, deadline.Format(time.TimeOnly))
		time.Sleep(2 * time.Second)
	}
}

// mountdError says why the server's mountd could not be found. A server
// that offers NFS version 4 only (as several cloud NFS services do) has no
// MOUNT protocol, and rdmafs speaks NFS version 3: its NFS port answers a
// version 3 call with PROG_MISMATCH, which mount.nfs reports as "requested
// NFS version or transport protocol is not supported". Otherwise, when the
// portmapper answered, mountd is not registered there; when it did not,
// the server may have none, and mountport= reaches its mountd.
func mountdError(ctx context.Context, host string, dial nfs3.DialConfig, err error) error {
	if dial.Port != 0 {
		return err
	}
	if !errors.Is(err, sunrpc.ErrTimeout) {
		// The portmapper's answer may name a version that is not 3:
		// rpcbind gives the port of any version of a program asked for.
		port, perr := nfs3.GetPort(ctx, dial, nfs3.Program, nfs3.Version)
		if perr != nil {
			port = defaultNFSPort
		}
		var ae *sunrpc.AcceptError
		if perr := nfs3.Ping(ctx, dial, port, nfs3.Program, nfs3.Version); errors.As(perr, &ae) && ae.Stat == sunrpc.ProgMismatch && ae.Low > nfs3.Version {
			return fmt.Errorf("server %s offers NFS version %s only, and rdmafs speaks NFS version 3: "+
				"requested NFS version or transport protocol is not supported", host, versionRange(ae.Low, ae.High))
		}
	}
	if errors.Is(err, nfs3.ErrNotRegistered) {
		return err
	}
	return fmt.Errorf("%w (give mountport=N if the server has no portmapper)", err)
}

// versionRange names the versions from low to high.
func versionRange(low, high uint32) string {
	if low == high {
		return fmt.Sprint(low)
	}
	return fmt.Sprintf("%d to %d", low, high)
}

func unreachable(err error) bool {
	return errors.Is(err, sunrpc.ErrConnect) || errors.Is(err, sunrpc.ErrTimeout)
}

func connectOnce(ctx context.Context, a *mountArgs, logf func(string, ...any)) (*connection, error) {
	o := &a.opts
	machine, _ := os.Hostname()
	auth := sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: machine}
	if o.Sec == mountopts.SecNone {
		auth.Flavor = sunrpc.AuthNone
	}
	self := &sunrpc.Cred{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	dial := nfs3.DialConfig{
		Host: a.host, Port: o.MountPort, Auth: auth,
		ReservedPort: !o.NoResvPort && os.Geteuid() == 0,
		Timeout:      min(time.Duration(o.Timeo)*time.Second/10, mountTimeout),
	}

	mc, err := nfs3.DialMount(ctx, dial)
	if err != nil {
		return nil, mountdError(ctx, a.host, dial, err)
	}
	root, flavors, err := mc.Mnt(ctx, self, a.export)
	if err != nil {
		mc.Close()
		var ms nfs3.MountStatus
		if errors.As(err, &ms) {
			return nil, fmt.Errorf("server %s refused export %s: %w", a.host, a.export, err)
		}
		return nil, fmt.Errorf("MOUNT: %w", err)
	}
	c := &connection{mount: mc, export: a.export, root: root}
	if len(flavors) > 0 && !slices.Contains(flavors, auth.Flavor) {
		c.close(ctx)
		return nil, fmt.Errorf("server %s accepts export %s only with authentication flavors %v, not sec=%v", a.host, a.export, flavors, auth.Flavor)
	}

	t, err := nfsTransport(ctx, a, dial, logf)
	if err != nil {
		c.close(ctx)
		return nil, err
	}
	rpc := sunrpc.NewClient(t, sunrpc.Config{
		Prog: nfs3.Program, Vers: nfs3.Version, Auth: auth,
		Timeout: time.Duration(o.Timeo) * time.Second / 10, Retrans: o.Retrans, Soft: o.Soft,
		Server: a.host, ProcNames: nfs3.ProcNames, Logf: logf,
	})
	c.nfs = nfs3.NewClient(rpc, nfs3.ClientConfig{})

	// The mount must not hang on a server that took the MOUNT call but
	// does not answer NFS: these first calls are soft.
	cctx, cancel := context.WithTimeout(ctx, 3*dial.Timeout)
	defer cancel()
	if err := c.nfs.Getattr(cctx, self, &root, &c.rootAttr); err != nil {
		c.close(ctx)
		return nil, fmt.Errorf("server %s: GETATTR of the export's root: %w", a.host, err)
	}
	if c.rootAttr.Type != nfs3.TypeDir {
		c.close(ctx)
		return nil, fmt.Errorf("server %s: export %s is not a directory", a.host, a.export)
	}
	info, err := c.nfs.Fsinfo(cctx, self, &root)
	if err != nil {
		c.close(ctx)
		return nil, fmt.Errorf("server %s: FSINFO: %w", a.host, err)
	}
	c.rsize = transferSize(o.RSize, info.Rtmax)
	c.wsize = transferSize(o.WSize, info.Wtmax)
	if o.ACL != mountopts.ChoiceOff {
		c.acl = aclClient(cctx, rpc, auth, a, logf)
	}
	return c, nil
}

// aclClient returns the NFSACL client of the mount, on the NFS client's
// transport as the kernel client has it, if the server answers its NULL;
// nil if not. As with the kernel client, a server without NFSACL is
// mounted without ACLs, whether acl was asked for or not.
func aclClient(ctx context.Context, nfs *sunrpc.Client, auth sunrpc.Auth, a *mountArgs, logf func(string, ...any)) *nfs3.ACLClient {
	o := &a.opts
	rpc := nfs.Sibling(sunrpc.Config{
		Prog: acl.Program, Vers: acl.Version, Auth: auth,
		Timeout: time.Duration(o.Timeo) * time.Second / 10, Retrans: o.Retrans, Soft: o.Soft,
		Server: a.host, ProcNames: acl.ProcNames, Logf: logf,
	})
	c := nfs3.NewACLClient(rpc, nfs3.ClientConfig{})
	if err := c.Null(ctx); err != nil {
		if o.ACL == mountopts.ChoiceOn {
			logf("server %s: no NFSACL (%v): mounted without ACLs", a.host, err)
		}
		return nil
	}
	return c
}

// transferSize is the READ or WRITE size: what the options ask for (1 MiB
// if nothing), no more than the server's maximum, a multiple of 4 KiB.
func transferSize(asked int, serverMax uint32) int {
	n := asked
	if n == 0 {
		n = 1 << 20
	}
	if serverMax > 0 && uint64(serverMax) < uint64(n) {
		n = int(serverMax)
	}
	if n >= 4096 {
		n &^= 4095
	}
	return max(n, 512)
}

// nfsTransport sets up the transport of the NFS program.
func nfsTransport(ctx context.Context, a *mountArgs, dial nfs3.DialConfig, logf func(string, ...any)) (sunrpc.Transport, error) {
	o := &a.opts
	switch o.Proto {
	case mountopts.ProtoTCP:
		port := o.Port
		if port == 0 {
			var err error
			port, err = nfs3.GetPort(ctx, dial, nfs3.Program, nfs3.Version)
			if err != nil {
				port = defaultNFSPort
			}
		}
		conns := make([]sunrpc.Transport, o.NConnect)
		for i := range conns {
			conns[i] = sunrpc.NewTCP(sunrpc.TCPConfig{
				Addr:         hostPort(a.host, port),
				ReservedPort: dial.ReservedPort,
				MaxCalls:     o.SlotTableEntries,
				Logf:         logf,
			})
		}
		if len(conns) == 1 {
			return conns[0], nil
		}
		return sunrpc.NewMulti(conns...), nil
	case mountopts.ProtoRDMA:
		if o.NConnect > 1 {
			// One connection's credits already keep many calls in
			// flight, and each connection would register its own
			// chunk buffers.
			logf("nconnect=%d: proto=rdma uses one connection", o.NConnect)
		}
		port := o.Port
		if port == 0 {
			port = defaultRDMAPort
		}
		p, err := provider(o.Provider)
		if err != nil {
			return nil, err
		}
		addr := hostPort(a.host, port)
		t, err := xprtrdma.New(xprtrdma.Config{
			Provider:       p,
			Addr:           addr,
			Credits:        o.SlotTableEntries,
			MaxInlineRead:  o.MaxInlineRead,
			MaxInlineWrite: o.MaxInlineWrite,
			MemReg:         o.MemReg,
			MaxIO:          max(o.RSize, o.WSize, 1<<20),
			ChunkBuffers:   xprtrdma.DefaultChunkBuffers,
			Logf:           logf,
		})
		if err != nil {
			return nil, err
		}
		// Connect now, so that the mount says why it cannot rather
		// than retrying the first call until its time is up.
		if err := t.Connect(ctx); err != nil {
			t.Close()
			return nil, rdmaConnectError(ctx, err, addr, o.Provider)
		}
		return t, nil
	}
	return nil, fmt.Errorf("proto=%v is not supported", o.Proto)
}

// abandon closes the clients at once: every call under way ends. The
// server is not told (close then does nothing more).
func (c *connection) abandon() {
	c.abandoned = true
	c.mount.Close()
	if c.nfs != nil {
		c.nfs.RPC().Close()
	}
}

// close tells mountd the export is no longer used and closes the clients.
func (c *connection) close(ctx context.Context) {
	if c.abandoned {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, mountTimeout)
	defer cancel()
	_ = c.mount.Umnt(cctx, nil, c.export)
	c.mount.Close()
	if c.nfs != nil {
		c.nfs.RPC().Close()
	}
}
