package lockd

import (
	"net"
	"net/netip"

	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// ServeNSMUDP answers the NSM calls that come as UDP datagrams on conn,
// until conn fails or is closed: a client's sm-notify sends its SM_NOTIFY
// over UDP only, to the port the server host's rpcbind gives for NSM over
// UDP. Only NSM is served there; every procedure of it is answered at
// once, so one datagram is one call and one reply.
func (s *Server) ServeNSMUDP(conn net.PacketConn) error {
	rpc := sunrpc.NewServer(sunrpc.ServerConfig{Workers: 1, Logf: s.cfg.Logf})
	rpc.Register(nlm.NSMProgram, nlm.NSMVersion, s.nsmProcs())
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
		peer := sunrpc.Peer{Remote: netipUnmap(ap), Admitted: true}
		ss := rpc.NewSession(func(reply []byte, _ sunrpc.Placement) error {
			_, err := conn.WriteTo(reply, from)
			return err
		}, peer)
		if err := ss.Call(buf[:n]); err != nil {
			s.logf("lockd: NSM datagram from %v: %v", from, err)
		}
		ss.Close()
	}
}

func netipUnmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
