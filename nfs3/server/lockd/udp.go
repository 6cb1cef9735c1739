package lockd

import (
	"net"
	"net/netip"

	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// ServeUDP answers, until conn fails or is closed, the calls that come as
// UDP datagrams on conn: NSM's (a client's sm-notify sends its SM_NOTIFY
// over UDP only, to the port the server host's rpcbind gives for NSM over
// UDP), and NLM version 3's SM_NOTIFY callback, which the host's rpc.statd
// makes over UDP when it monitors the clients (Config.HostStatd). Every
// procedure served there is answered at once, so one datagram is one call
// and one reply.
func (s *Server) ServeUDP(conn net.PacketConn) error {
	rpc := sunrpc.NewServer(sunrpc.ServerConfig{Workers: 1, Logf: s.cfg.Logf})
	rpc.Register(nlm.NSMProgram, nlm.NSMVersion, s.nsmProcs())
	rpc.Register(nlm.Program, 3, s.statdCallbackProcs())
	defer rpc.Close()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return err
		}
		ua, ok := from.(*net.UDPAddr)
		if !ok {
			continue
		}
		ap := ua.AddrPort()
		peer := sunrpc.Peer{Remote: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), Admitted: true,
			Secure: ap.Port() < 1024}
		ss := rpc.NewSession(func(reply []byte, _ sunrpc.Placement) error {
			_, err := conn.WriteTo(reply, from)
			return err
		}, peer)
		if err := ss.Call(buf[:n]); err != nil {
			s.logf("lockd: datagram from %v: %v", from, err)
		}
		ss.Close()
	}
}
