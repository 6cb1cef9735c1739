//go:build cgo && linux

package ibverbs_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/conformance"
	"github.com/rdmafs/rdmafs/verbs/ibverbs"
)

// rdmaEnv is the RDMA device and its IP address to test on, from
// RDMAFS_VERBS_DEVICE and RDMAFS_VERBS_ADDR (set by the project's e2e
// harness in its SoftRoCE guest: rxe0 and 10.11.0.1).
func rdmaEnv(t *testing.T) (device, addr string) {
	device, addr = os.Getenv("RDMAFS_VERBS_DEVICE"), os.Getenv("RDMAFS_VERBS_ADDR")
	if device == "" || addr == "" {
		t.Skip("no RDMA device to test on: set RDMAFS_VERBS_DEVICE and RDMAFS_VERBS_ADDR (e.g. rxe0 and its IP); make e2e runs these tests on SoftRoCE in a guest (test/e2e/README.md)")
	}
	return device, addr
}

// TestConformance runs the verbs conformance suite on the device.
func TestConformance(t *testing.T) {
	device, addr := rdmaEnv(t)
	conformance.Run(t, ibverbs.Provider{}, device, addr)
}

// TestOpenByAddress opens the device through which its address is reached.
func TestOpenByAddress(t *testing.T) {
	device, addr := rdmaEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range []string{addr, addr + ":20049"} {
		d, err := ibverbs.Provider{}.Open(ctx, "", a)
		if err != nil {
			t.Fatalf("open the device of %s: %v", a, err)
		}
		if d.Name() != device {
			t.Errorf("device of %s: %s, want %s", a, d.Name(), device)
		}
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
	// TEST-NET-1: no route (127.0.0.1 would do: the RDMA CM takes
	// loopback through the first device).
	if d, err := (ibverbs.Provider{}).Open(ctx, "", "192.0.2.1"); err == nil {
		t.Errorf("opened device %s for 192.0.2.1, which no RDMA device reaches", d.Name())
		d.Close()
	} else if !errors.Is(err, verbs.ErrNoDevice) {
		t.Errorf("open for 192.0.2.1: %v, want ErrNoDevice", err)
	} else {
		t.Logf("open for 192.0.2.1: %v", err)
	}
}

// TestNoDevice runs where there is no RDMA device (the development host):
// the error must say so and name provider=soft.
func TestNoDevice(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband"); err == nil {
		if ents, _ := os.ReadDir("/sys/class/infiniband"); len(ents) > 0 {
			t.Skip("this host has RDMA devices")
		}
	}
	_, err := ibverbs.Provider{}.Open(context.Background(), "", "")
	if !errors.Is(err, verbs.ErrNoDevice) || !strings.Contains(err.Error(), "provider=soft") {
		t.Fatalf("Open without an RDMA device: %v; want ErrNoDevice and a hint at provider=soft", err)
	}
	t.Logf("%v", err)
}
