package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// Registration with the host's rpcbind (portmapper), as mountd and nfsd
// register: with it, showmount -e and mount.nfs without port options find
// the server. rdmafs serve needs no portmapper itself (MOUNT and NFS share
// one port), so a host without one is fine.

// rpcbindAddr is where the host's rpcbind listens.
var rpcbindAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(nfs3.PortmapPort))

// RegisterRPCBind registers MOUNT v3 and NFS v3 over TCP, and more
// (program, version, protocol: serve's lock manager), at port with the
// rpcbind of this host, if one answers, and returns the function that
// takes the registrations back. A program rpcbind already knows over that
// protocol (the mountd, nfsd, lockd or statd of this host) is left alone,
// and never unregistered.
func RegisterRPCBind(ctx context.Context, port int, logf func(string, ...any), more ...[3]uint32) (unregister func()) {
	unregister = func() {}
	// Nothing listening: nothing to do, at once (the RPC client would
	// retry for its whole timeout).
	probe, err := net.DialTimeout("tcp", rpcbindAddr, time.Second)
	if err != nil {
		return unregister
	}
	probe.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rpc := portmapClient()
	defer rpc.Close()
	var mine [][3]uint32
	programs := append([][3]uint32{{nfs3.MountProgram, nfs3.MountVersion, nfs3.IPProtoTCP},
		{nfs3.Program, nfs3.Version, nfs3.IPProtoTCP}}, more...)
	for _, pv := range programs {
		if p, err := pmapCall(ctx, rpc, nfs3.PortmapProcGetport, pv, 0); err != nil {
			logf("rpcbind: %v", err)
			return unregister
		} else if p != 0 {
			logf("rpcbind: program %d version %d protocol %d is registered already (port %d): left alone", pv[0], pv[1], pv[2], p)
			continue
		}
		if ok, err := pmapCall(ctx, rpc, nfs3.PortmapProcSet, pv, port); err != nil || ok == 0 {
			logf("rpcbind: registering program %d version %d protocol %d: refused (%v)", pv[0], pv[1], pv[2], err)
			continue
		}
		mine = append(mine, pv)
	}
	if len(mine) > 0 {
		logf("rpcbind: registered (program, version, protocol) %v on port %d", mine, port)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rpc := portmapClient()
		defer rpc.Close()
		for _, pv := range mine {
			// Another service may have taken the program over since (a
			// kernel lockd starting on this host clears and takes NLM's):
			// its registration is not serve's to take back.
			// (UNSET drops a program version over every protocol, so an
			// earlier one may have dropped this one already.)
			if p, err := pmapCall(ctx, rpc, nfs3.PortmapProcGetport, pv, 0); err == nil && p != uint32(port) {
				if p != 0 {
					logf("rpcbind: program %d version %d protocol %d is now at port %d: left alone", pv[0], pv[1], pv[2], p)
				}
				continue
			}
			if _, err := pmapCall(ctx, rpc, nfs3.PortmapProcUnset, pv, 0); err != nil {
				logf("rpcbind: unregistering program %d version %d protocol %d: %v", pv[0], pv[1], pv[2], err)
			}
		}
	}
}

// portmapClient calls the local rpcbind from a reserved port, as rpcbind
// lets only privileged local callers change registrations.
func portmapClient() *sunrpc.Client {
	t := sunrpc.NewTCP(sunrpc.TCPConfig{Addr: rpcbindAddr, ReservedPort: true, MaxRecord: 64 << 10})
	return sunrpc.NewClient(t, sunrpc.Config{Prog: nfs3.PortmapProgram, Vers: nfs3.PortmapVersion,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "rdmafs-serve"}, Timeout: 2 * time.Second, Retrans: 1, Soft: true,
		Server: "rpcbind", ProcNames: nfs3.PortmapProcNames})
}

// pmapCall makes a PMAPPROC_SET, UNSET or GETPORT call with the mapping of
// program, version and protocol pv at port, and returns its one-word
// result.
func pmapCall(ctx context.Context, rpc *sunrpc.Client, proc uint32, pv [3]uint32, port int) (uint32, error) {
	call := rpc.NewCall(proc, &sunrpc.Cred{})
	defer call.Release()
	e := call.Args()
	e.Uint32(pv[0])
	e.Uint32(pv[1])
	e.Uint32(pv[2])
	e.Uint32(uint32(port))
	call.SetArgs(e)
	if err := rpc.Do(ctx, call); err != nil {
		return 0, fmt.Errorf("portmapper procedure %d: %w", proc, err)
	}
	d := xdr.NewDecoder(call.Reply.Body)
	v := d.Uint32()
	if err := d.Err(); err != nil {
		return 0, fmt.Errorf("portmapper procedure %d: bad reply: %w", proc, err)
	}
	return v, nil
}
