package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/ibverbs"
	"github.com/rdmafs/rdmafs/verbs/soft"
	"github.com/rdmafs/rdmafs/xprtrdma"
)

// defaultRDMAPort is where NFS over RDMA listens unless port= says
// otherwise.
const defaultRDMAPort = nfs3.RDMAPort

// provider returns the verbs provider the provider= option names.
func provider(p mountopts.Provider) (verbs.Provider, error) {
	switch p {
	case mountopts.ProviderSoft:
		return soft.New(), nil
	case mountopts.ProviderIBVerbs:
		return ibverbs.Provider{}, nil
	}
	return nil, fmt.Errorf("provider=%v is not built in", p)
}

// rdmaConnectError says why the mount's RDMA connection to addr failed,
// naming what answered there. It wraps err.
func rdmaConnectError(ctx context.Context, err error, addr string, prov mountopts.Provider) error {
	var rej *verbs.RejectError
	var why string
	switch {
	case errors.Is(err, verbs.ErrNoDevice) || errors.Is(err, verbs.ErrNoProvider):
		return fmt.Errorf("proto=rdma: %w", err)
	case errors.Is(err, xprtrdma.ErrMemLock):
		// The error names RLIMIT_MEMLOCK and the options that lower
		// what a mount pins.
		return fmt.Errorf("proto=rdma: %w", err)
	case errors.Is(err, soft.ErrNotSoftPeer):
		why = fmt.Sprintf("%s is a TCP service, not rdmafs's software RDMA (provider=soft talks only to "+
			"`rdmafs serve -o proto=rdma,provider=soft`; for NFS over TCP mount with proto=tcp)", addr)
	case errors.As(err, &rej) && rej.Reason == rejectNoListener && prov == mountopts.ProviderSoft:
		why = fmt.Sprintf("nothing listens on %s (connection refused)", addr)
	case errors.As(err, &rej) && rej.Reason == rejectNoListener:
		why = fmt.Sprintf("no RPC-over-RDMA listener at %s: the RDMA connection manager rejected the connection (no listener on that port)", addr)
		if tcpAnswers(ctx, addr) {
			why += "; a TCP service answers on that port: for NFS over TCP mount with proto=tcp"
		}
	case errors.As(err, &rej) && rej.Reason == rejectConsumer:
		why = fmt.Sprintf("the server at %s refused the RDMA connection: it does not admit this client "+
			"(`rdmafs serve` refuses a client outside its clients= list) or could not set the connection up; "+
			"the server's log says which (reject reason %d, consumer-defined)", addr, rej.Reason)
	case errors.As(err, &rej):
		why = fmt.Sprintf("the server at %s rejected the RDMA connection (reject reason %d)", addr, rej.Reason)
	case errors.Is(err, xprtrdma.ErrConfig):
		why = "the RDMA device refused the connection's configuration"
	default:
		why = fmt.Sprintf("cannot connect to %s", addr)
	}
	return fmt.Errorf("proto=rdma: %s: %w", why, err)
}

// rejectNoListener is the connection manager's reject reason when nothing
// listens on the port (InfiniBand CM: invalid service ID); the soft
// provider uses it for a refused TCP connect.
const rejectNoListener = 8

// rejectConsumer is the reject reason of a listener's own refusal
// (InfiniBand CM: consumer-defined): svcrdma's for a client the export
// does not admit, or when it cannot set a connection up.
const rejectConsumer = 28

// tcpAnswers reports whether a TCP connect to addr is taken.
func tcpAnswers(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
