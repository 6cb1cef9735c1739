package nlm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// ErrSMFail is the error of an SM_STAT or SM_MON that statd answered with
// stat_fail: it cannot monitor the host (Linux's statd: the name does not
// resolve, or the call did not come from this host).
var ErrSMFail = errors.New("statd refused (stat_fail)")

// NSMClient calls a host's statd over TCP: a lock manager calls its own
// host's, which accepts SM_MON and SM_UNMON only from the same host.
type NSMClient struct {
	rpc *sunrpc.Client
}

// DialNSM returns a client of the statd of cfg.Host, finding its port
// through the portmapper unless cfg.Port gives it.
func DialNSM(ctx context.Context, cfg nfs3.DialConfig) (*NSMClient, error) {
	port := cfg.Port
	if port == 0 {
		var err error
		if port, err = nfs3.GetPort(ctx, cfg, NSMProgram, NSMVersion); err != nil {
			return nil, err
		}
	}
	t := sunrpc.NewTCP(sunrpc.TCPConfig{
		Addr:         net.JoinHostPort(cfg.Host, strconv.Itoa(port)),
		ReservedPort: cfg.ReservedPort,
		MaxRecord:    64 << 10,
	})
	return &NSMClient{rpc: sunrpc.NewClient(t, sunrpc.Config{
		Prog: NSMProgram, Vers: NSMVersion, Auth: cfg.Auth, Timeout: cfg.Timeout, Retrans: 1, Soft: true,
		Server: cfg.Host, ProcNames: NSMProcNames,
	})}, nil
}

// Close closes the connection to statd.
func (c *NSMClient) Close() error { return c.rpc.Close() }

// call makes procedure proc with args (nil: void) and decodes the reply
// into res (nil: void). res owns what it decoded: it may outlive the call.
func (c *NSMClient) call(ctx context.Context, proc uint32, args, res Message) error {
	call := c.rpc.NewCall(proc, nil)
	defer call.Release()
	if args != nil {
		e := call.Args()
		args.Encode(&e)
		call.SetArgs(e)
	}
	if err := c.rpc.Do(ctx, call); err != nil {
		return fmt.Errorf("nsm: %s: %w", NSMProcNames[proc], err)
	}
	if res == nil {
		return nil
	}
	if err := Unmarshal(call.Reply.Body, res); err != nil {
		return fmt.Errorf("nsm: %s reply: %w", NSMProcNames[proc], err)
	}
	return nil
}

// Stat returns the state number of statd's host (odd while it is up),
// the number a lock manager sends in LOCK's State. Linux's statd answers
// for itself whatever host is named.
func (c *NSMClient) Stat(ctx context.Context, host string) (int32, error) {
	var res SMStatRes
	if err := c.call(ctx, NSMProcStat, &SMName{MonName: []byte(host)}, &res); err != nil {
		return 0, err
	}
	if res.Result != SMSuccess {
		return res.State, fmt.Errorf("nsm: SM_STAT %s: %w", host, ErrSMFail)
	}
	return res.State, nil
}

// Mon asks statd to monitor m.MonID.MonName and, when that host restarts,
// to call m.MonID.MyID back with SMStatus and m.Priv. It returns statd's
// host's state number.
func (c *NSMClient) Mon(ctx context.Context, m *SMMon) (int32, error) {
	var res SMStatRes
	if err := c.call(ctx, NSMProcMon, m, &res); err != nil {
		return 0, err
	}
	if res.Result != SMSuccess {
		return res.State, fmt.Errorf("nsm: SM_MON %s: %w", m.MonID.MonName, ErrSMFail)
	}
	return res.State, nil
}

// Unmon stops the monitoring of id.MonName for id.MyID, and returns
// statd's host's state number.
func (c *NSMClient) Unmon(ctx context.Context, id *SMMonID) (int32, error) {
	var res SMStat
	err := c.call(ctx, NSMProcUnmon, id, &res)
	return res.State, err
}

// UnmonAll stops every monitoring asked for by id, as a lock manager does
// when it starts, and returns statd's host's state number.
func (c *NSMClient) UnmonAll(ctx context.Context, id *SMMyID) (int32, error) {
	var res SMStat
	err := c.call(ctx, NSMProcUnmonAll, id, &res)
	return res.State, err
}

// Notify tells statd that ch.MonName restarted and is now in state
// ch.State; statd calls back whoever monitors that host. (A host's
// sm-notify sends it to its peers after a restart.)
func (c *NSMClient) Notify(ctx context.Context, ch *SMStatChange) error {
	return c.call(ctx, NSMProcNotify, ch, nil)
}
