package xprtrdma

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rdmafs/rdmafs/svcrdma"
	"github.com/rdmafs/rdmafs/verbs"
)

// TestFitCredits: the credits asked for are lowered to what the device's
// queues and completion queue hold, per strategy.
func TestFitCredits(t *testing.T) {
	soft := verbs.Caps{MaxQPWR: 16384, MaxCQE: 1 << 20}
	rxe := verbs.Caps{MaxQPWR: 1048575, MaxCQE: 32765} // rxe0 in the e2e guest, less the provider's markers
	for _, c := range []struct {
		caps verbs.Caps
		m    MemReg
		want int
		got  int
	}{
		{soft, MemRegMW, 128, 128},
		{soft, MemRegMW, 16384, 3275},
		{soft, MemRegRegister, 16384, 16376},
		{soft, MemRegPersistent, 8189, 8189},
		{rxe, MemRegMW, 16384, 5458},
		{rxe, MemRegRegister, 16384, 16374},
		{rxe, MemRegPersistent, 4, 4},
	} {
		got := fitCredits(c.want, c.m, c.caps)
		if got != c.got {
			t.Errorf("fitCredits(%d, %v, %+v) = %d, want %d", c.want, c.m, c.caps, got, c.got)
		}
		send, recv := queueDepths(got, c.m)
		if max(send, recv) > c.caps.MaxQPWR || send+recv > c.caps.MaxCQE {
			t.Errorf("%d credits with %v: queues %d and %d do not fit %+v", got, c.m, send, recv, c.caps)
		}
	}
}

// TestLargestSlotTable: slot_table_entries 16384, the option's largest
// value, mounts under each strategy: the transport asks for what the
// device holds and says so.
func TestLargestSlotTable(t *testing.T) {
	for _, m := range []MemReg{MemRegMW, MemRegRegister, MemRegPersistent} {
		t.Run(m.String(), func(t *testing.T) {
			b := newTestBed(t, svcrdma.Config{})
			var mu sync.Mutex
			var logged []string
			c, tr := b.client(t, Config{Credits: 16384, MemReg: m, Logf: func(f string, a ...any) {
				mu.Lock()
				logged = append(logged, fmt.Sprintf(f, a...))
				mu.Unlock()
			}})
			if err := tr.Connect(context.Background()); err != nil {
				t.Fatalf("connect with 16384 credits: %v", err)
			}
			if err := c.Null(context.Background()); err != nil {
				t.Fatal(err)
			}
			b.create(t, c, "f")
			mu.Lock()
			defer mu.Unlock()
			if m == MemRegMW && (len(logged) == 0 || !strings.Contains(logged[0], "asking for 3275 credits")) {
				t.Errorf("log %q: want the lowered credits said", logged)
			}
		})
	}
}
