package sunrpc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer stands for a server the Redialer dials: up or not, and
// whether it answers a probe.
type fakeServer struct {
	up, answers   atomic.Bool
	dials, probes atomic.Int32
}

func (s *fakeServer) redialer() *Redialer[int] {
	return &Redialer[int]{MinBackoff: 5 * time.Second, MaxBackoff: 30 * time.Second,
		Dial: func(ctx context.Context) (int, error) {
			n := int(s.dials.Add(1))
			if !s.up.Load() {
				return 0, fmt.Errorf("%w: refused", ErrConnect)
			}
			return n, nil
		},
		Alive:  func(int) bool { return true },
		Hangup: func(int) {},
		Probe: func(context.Context) bool {
			s.probes.Add(1)
			return s.answers.Load()
		},
		ProbeEvery: 20 * time.Millisecond,
	}
}

// TestRedialerProbeEndsBackoff: after a failed attempt against a server
// that was away, a caller waiting out the backoff dials as soon as the
// server answers again, not when the backoff ends.
func TestRedialerProbeEndsBackoff(t *testing.T) {
	var s fakeServer
	r := s.redialer()
	ctx := context.Background()
	if _, err := r.Get(ctx, time.Now().Add(time.Second)); !errors.Is(err, ErrConnect) {
		t.Fatalf("server away: %v, want ErrConnect", err)
	}
	if b := r.Backoff(); b < 4*time.Second {
		t.Fatalf("backoff %v after a failed attempt, want about 5 s", b)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		s.up.Store(true)
		s.answers.Store(true)
	}()
	start := time.Now()
	c, err := r.Get(ctx, time.Now().Add(2*time.Second))
	if err != nil {
		t.Fatalf("the server came back 0.2 s into a 5 s backoff; a caller with 2 s to go got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("connected after %v, want soon after the server came back (0.2 s)", d)
	}
	if c == 0 {
		t.Error("no connection")
	}
}

// TestRedialerBackoffWhenServerAnswers: a server that answers probes but
// whose connections fail gets the whole backoff: probing does not turn
// the backoff into a dial loop, nor a loop of probes (which, over TCP,
// are connections too).
func TestRedialerBackoffWhenServerAnswers(t *testing.T) {
	var s fakeServer
	s.answers.Store(true)
	r := s.redialer()
	ctx := context.Background()
	if _, err := r.Get(ctx, time.Now().Add(time.Second)); !errors.Is(err, ErrConnect) {
		t.Fatalf("failing server: %v, want ErrConnect", err)
	}
	if _, err := r.Get(ctx, time.Now().Add(time.Second)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("second caller within the backoff: %v, want ErrTimeout", err)
	}
	if n := s.dials.Load(); n != 1 {
		t.Errorf("%d dials within one backoff, want 1", n)
	}
	// One after the failed dial, one in the second caller's wait.
	if n := s.probes.Load(); n > 2 {
		t.Errorf("%d probes of a server that answers, in a wait of 1 s, want at most 2", n)
	}
}
