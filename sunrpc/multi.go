package sunrpc

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
)

// Multi spreads calls over several transports to one server (the nconnect
// mount option): each call goes to the transport with the fewest calls in
// flight. A call that must be sent again may go out on another one.
type Multi struct {
	ts       []Transport
	inflight []atomic.Int64
}

// NewMulti returns a transport over ts.
func NewMulti(ts ...Transport) *Multi {
	return &Multi{ts: ts, inflight: make([]atomic.Int64, len(ts))}
}

// RoundTrip implements Transport.
func (m *Multi) RoundTrip(ctx context.Context, call *Call) error {
	best := 0
	for i := range m.ts {
		if m.inflight[i].Load() < m.inflight[best].Load() {
			best = i
		}
	}
	m.inflight[best].Add(1)
	defer m.inflight[best].Add(-1)
	return m.ts[best].RoundTrip(ctx, call)
}

// XprtStats implements Transport: one "xprt:" line per transport, as
// mountstats shows nconnect.
func (m *Multi) XprtStats() string {
	lines := make([]string, len(m.ts))
	for i, t := range m.ts {
		lines[i] = t.XprtStats()
	}
	return strings.Join(lines, "\n\txprt:\t")
}

// Close implements Transport.
func (m *Multi) Close() error {
	var errs []error
	for _, t := range m.ts {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}
