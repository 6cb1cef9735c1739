package sunrpc

import (
	"context"
	"time"
)

// Wait blocks until a Transport signals the call's Done channel (nil), the
// connection's lost channel is closed (ErrDisconnected), ctx ends (its
// error) or the try's Timeout passes (ErrTimeout). A transport whose Wait
// did not return nil must take the call back from its reader; if the reader
// already has it, the reply is on its way and the transport must receive
// from Done before it uses the call again.
func (c *Call) Wait(ctx context.Context, lost <-chan struct{}) error {
	if c.timer == nil {
		c.timer = time.NewTimer(c.timeout)
	} else {
		c.timer.Reset(c.timeout)
	}
	defer c.timer.Stop()
	select {
	case <-c.done:
		return nil
	case <-lost:
		return ErrDisconnected
	case <-ctx.Done():
		return ctx.Err()
	case <-c.timer.C:
		return ErrTimeout
	}
}
