package lockd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// localPortmap calls this host's portmapper (version 2) over TCP, from a
// reserved port when running as root: rpcbind wants one for SET and UNSET.
func localPortmap(ctx context.Context, proc, prog, vers, port uint32) (uint32, error) {
	t := sunrpc.NewTCP(sunrpc.TCPConfig{Addr: "127.0.0.1:111", ReservedPort: os.Geteuid() == 0, MaxRecord: 4096})
	rpc := sunrpc.NewClient(t, sunrpc.Config{
		Prog: nfs3.PortmapProgram, Vers: nfs3.PortmapVersion, Timeout: 3 * time.Second, Retrans: 1, Soft: true,
		Server: "localhost", ProcNames: nfs3.PortmapProcNames,
	})
	defer rpc.Close()
	call := rpc.NewCall(proc, nil)
	defer call.Release()
	e := call.Args()
	e.Uint32(prog)
	e.Uint32(vers)
	e.Uint32(nfs3.IPProtoTCP)
	e.Uint32(port)
	call.SetArgs(e)
	if err := rpc.Do(ctx, call); err != nil {
		return 0, fmt.Errorf("this host's portmapper: %s: %w", nfs3.PortmapProcNames[proc], err)
	}
	if len(call.Reply.Body) < 4 {
		return 0, fmt.Errorf("this host's portmapper: %s: short reply", nfs3.PortmapProcNames[proc])
	}
	b := call.Reply.Body
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), nil
}
