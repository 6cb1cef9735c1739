//go:build !cgo || !linux

package ibverbs

import (
	"context"
	"fmt"
	"runtime"

	"github.com/rdmafs/rdmafs/verbs"
)

// Provider is the libibverbs provider; in this build (without cgo, or not
// on Linux) it cannot open anything.
type Provider struct{}

var _ verbs.Provider = Provider{}

// Name returns "ibverbs".
func (Provider) Name() string { return "ibverbs" }

// Open fails: the binary was built without cgo (or not for Linux).
func (Provider) Open(ctx context.Context, name, addr string) (verbs.Device, error) {
	return nil, fmt.Errorf("verbs/ibverbs: %w: this binary was built without cgo (CGO_ENABLED=0) or not for Linux (%s); "+
		"rebuild with cgo and rdma-core (libibverbs-dev, librdmacm-dev), or use provider=soft", verbs.ErrNoProvider, runtime.GOOS)
}
