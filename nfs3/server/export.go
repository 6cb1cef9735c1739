package server

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/rdmafs/rdmafs/sunrpc"
)

// Export options, after knfsd's (exports(5)). The zero value is knfsd's
// default: secure, root_squash, anonymous uid and gid DefaultAnonID, and
// (this server's choice, knfsd has no default client) only clients on the
// server's own address.
type Export struct {
	// Insecure lets calls come from any source port (knfsd: insecure).
	// By default a call over TCP must come from a port below 1024, which
	// only root can bind (knfsd: secure). RPC-over-RDMA connections count
	// as secure, as in knfsd's svcrdma: the Linux NFS/RDMA client
	// connects from an ordinary rdma_cm port.
	Insecure bool
	// NoRootSquash serves uid 0 and gid 0 as themselves (knfsd:
	// no_root_squash). By default they become AnonUID and AnonGID.
	NoRootSquash bool
	// AllSquash serves every caller as AnonUID and AnonGID, without
	// supplementary groups (knfsd: all_squash).
	AllSquash bool
	// AnonUID and AnonGID are who squashed callers and AUTH_NONE calls
	// are served as (knfsd: anonuid, anongid); nil means DefaultAnonID.
	AnonUID, AnonGID *uint32
	// Clients are the addresses and networks allowed to use the export
	// (knfsd: the client list of the export line). Empty means the
	// server's own address: a connection is allowed when it comes from
	// the address it reached (the same host).
	Clients []netip.Prefix
}

// DefaultAnonID is knfsd's default anonuid and anongid: nobody.
const DefaultAnonID = nobody

// anon is the identity squashed and AUTH_NONE calls get.
func (e *Export) anon() (uid, gid uint32) {
	uid, gid = nobody, nobody
	if e.AnonUID != nil {
		uid = *e.AnonUID
	}
	if e.AnonGID != nil {
		gid = *e.AnonGID
	}
	return uid, gid
}

// squash maps a caller's AUTH_SYS identity (or AUTH_NONE's, sunrpc.NoID)
// as knfsd's nfsd_setuser does: all_squash makes everyone anonymous
// without groups; root_squash makes uid 0, gid 0 and group 0 anonymous. An
// id of -1 (which setfsuid would read as "unchanged") is always anonymous.
func (e *Export) squash(c sunrpc.Cred) cred {
	auid, agid := e.anon()
	if e.AllSquash {
		return cred{uid: auid, gid: agid}
	}
	const invalid = sunrpc.NoID
	out := cred{uid: c.UID, gid: c.GID}
	rootSquash := !e.NoRootSquash
	if out.uid == invalid || rootSquash && out.uid == 0 {
		out.uid = auid
	}
	if out.gid == invalid || rootSquash && out.gid == 0 {
		out.gid = agid
	}
	if len(c.Groups) > 0 {
		out.groups = make([]int, len(c.Groups))
		for i, g := range c.Groups {
			if g == invalid || rootSquash && g == 0 {
				g = agid
			}
			out.groups[i] = int(g)
		}
	}
	return out
}

// allows reports whether a client at remote may use the export over a
// connection that reached the server at local.
func (e *Export) allows(remote, local netip.Addr) bool {
	remote, local = remote.Unmap(), local.Unmap()
	if len(e.Clients) == 0 {
		return remote == local || remote.IsLoopback() && local.IsLoopback() ||
			local.IsUnspecified() && isLocalAddr(remote)
	}
	for _, p := range e.Clients {
		if p.Contains(remote) {
			return true
		}
	}
	return false
}

// isLocalAddr reports whether ip is an address of this host (for a listener
// on the unspecified address, which cannot say which address it was
// reached at).
func isLocalAddr(ip netip.Addr) bool {
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok && x.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// clientNames are the clients as MOUNT EXPORT lists them (showmount -e):
// the networks and addresses, or local's address for the default.
func (e *Export) clientNames(local netip.Addr) []string {
	if len(e.Clients) == 0 {
		if !local.IsValid() || local.IsUnspecified() {
			return []string{"localhost"}
		}
		return []string{local.Unmap().String()}
	}
	names := make([]string, 0, len(e.Clients))
	for _, p := range e.Clients {
		switch {
		case p.Bits() == 0:
			if !slices.Contains(names, "*") { // "*" is 0.0.0.0/0 and ::/0
				names = append(names, "*")
			}
		case p.IsSingleIP():
			names = append(names, p.Addr().String())
		default:
			names = append(names, p.String())
		}
	}
	return names
}

// ParseClients parses a client list: addresses and networks (CIDR) joined by
// "+", or "*" for every client.
func ParseClients(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(list, "+") {
		switch {
		case item == "*":
			out = append(out, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("client %q: not an address or network (CIDR): %w", item, err)
			}
			out = append(out, p.Masked())
		default:
			a, err := netip.ParseAddr(item)
			if err != nil {
				return nil, fmt.Errorf("client %q: not an address or network (CIDR): %w", item, err)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	return out, nil
}

// String is the export's options as exports(5) would write them.
func (e *Export) String() string {
	var o []string
	if e.Insecure {
		o = append(o, "insecure")
	} else {
		o = append(o, "secure")
	}
	switch {
	case e.AllSquash:
		o = append(o, "all_squash")
	case e.NoRootSquash:
		o = append(o, "no_root_squash")
	default:
		o = append(o, "root_squash")
	}
	uid, gid := e.anon()
	o = append(o, fmt.Sprintf("anonuid=%d", uid), fmt.Sprintf("anongid=%d", gid))
	return strings.Join(o, ",")
}

// portSecure reports whether a TCP peer's source port is a reserved one.
func portSecure(port uint16) bool { return port < 1024 }
