package sunrpc

import (
	"fmt"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// Flavor is an authentication flavor (RFC 5531 section 8.2).
type Flavor uint32

// The flavors rdmafs speaks.
const (
	AuthNone Flavor = 0
	AuthSys  Flavor = 1
)

func (f Flavor) String() string {
	switch f {
	case AuthNone:
		return "none"
	case AuthSys:
		return "sys"
	}
	return fmt.Sprintf("flavor(%d)", uint32(f))
}

// MaxGroups is the number of supplementary groups AUTH_SYS can carry; like
// the Linux client, a caller with more sends the first MaxGroups.
const MaxGroups = 16

// MaxMachineName is the AUTH_SYS limit on the machine name.
const MaxMachineName = 255

// Cred is the identity a call is made for. With AuthNone it is not sent.
type Cred struct {
	UID, GID uint32
	Groups   []uint32
}

// Auth is how a Client authenticates its calls.
type Auth struct {
	Flavor  Flavor
	Machine string // the AUTH_SYS machine name
}

// appendCred encodes the credential and the (null) verifier of a call.
func (a *Auth) appendCred(e *xdr.Encoder, c *Cred) {
	if a.Flavor != AuthSys || c == nil {
		e.Uint32(uint32(AuthNone))
		e.Uint32(0)
	} else {
		machine := a.Machine
		if len(machine) > MaxMachineName {
			machine = machine[:MaxMachineName]
		}
		groups := c.Groups
		if len(groups) > MaxGroups {
			groups = groups[:MaxGroups]
		}
		e.Uint32(uint32(AuthSys))
		e.Uint32(uint32(4 + 4 + len(machine) + xdr.Pad(len(machine)) + 4 + 4 + 4 + 4*len(groups)))
		e.Uint32(0) // stamp: servers do not use it
		e.String(machine)
		e.Uint32(c.UID)
		e.Uint32(c.GID)
		e.Uint32(uint32(len(groups)))
		for _, g := range groups {
			e.Uint32(g)
		}
	}
	e.Uint32(uint32(AuthNone)) // verifier
	e.Uint32(0)
}
