//go:build cgo && linux

package ibverbs

// #cgo LDFLAGS: -lrdmacm -libverbs
// #include <stdlib.h>
// #include "helpers.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmafs/rdmafs/verbs"
)

// Provider is the libibverbs/librdmacm provider. The zero value is ready.
type Provider struct{}

var _ verbs.Provider = Provider{}

// Name returns "ibverbs".
func (Provider) Name() string { return "ibverbs" }

// Open opens the device named name or, for name "", the device that
// reaches addr (an IP or host:port, local or remote).
func (Provider) Open(ctx context.Context, name, addr string) (verbs.Device, error) {
	var n C.int
	list, errno := C.rdma_get_devices(&n)
	if list == nil || n == 0 {
		if list != nil {
			C.rdma_free_devices(list)
		}
		why := "librdmacm finds none"
		if errno != nil && !errors.Is(errno, syscall.ENODEV) {
			why = fmt.Sprintf("librdmacm finds none: %v", errno)
		}
		return nil, fmt.Errorf("verbs/ibverbs: %w on this host (%s); load an RDMA driver (for SoftRoCE: rdma link add rxe0 type rxe netdev IFACE), "+
			"or use provider=soft to run rdmafs without RDMA hardware", verbs.ErrNoDevice, why)
	}
	ctxs := unsafe.Slice(list, int(n))
	var (
		target *C.struct_ibv_context
		names  []string
		err    error
	)
	for _, c := range ctxs {
		names = append(names, C.GoString(C.rdmafs_device_name(c)))
	}
	if name != "" {
		for i, c := range ctxs {
			if names[i] == name {
				target = c
			}
		}
		if target == nil {
			err = fmt.Errorf("verbs/ibverbs: %w named %q (there are: %s)", verbs.ErrNoDevice, name, strings.Join(names, ", "))
		}
	} else {
		target, err = routeDevice(ctx, addr)
	}
	if err != nil {
		C.rdma_free_devices(list)
		return nil, err
	}
	d := &device{ctx: target, list: list, name: C.GoString(C.rdmafs_device_name(target))}
	if err := d.queryCaps(); err != nil {
		C.rdma_free_devices(list)
		return nil, err
	}
	if d.watch, err = watchContext(target); err != nil {
		C.rdma_free_devices(list)
		return nil, err
	}
	return d, nil
}

// routeDevice finds the device through which addr is reached: bound to it
// when addr is local, resolved by the RDMA CM when it is not.
func routeDevice(ctx context.Context, addr string) (*C.struct_ibv_context, error) {
	ip, _, err := parseAddr(ctx, addr, true)
	if err != nil {
		return nil, err
	}
	for _, resolve := range []bool{false, true} {
		ech, id, err := newCMID()
		if err != nil {
			return nil, err
		}
		ctxDev, err := func() (*C.struct_ibv_context, error) {
			sa := newSockaddr(ip, 0)
			defer C.free(unsafe.Pointer(sa))
			if !resolve {
				if r := C.rdma_bind_addr(id, (*C.struct_sockaddr)(unsafe.Pointer(sa))); r != 0 {
					return nil, nil
				}
				return id.verbs, nil
			}
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if r, errno := C.rdma_resolve_addr(id, nil, (*C.struct_sockaddr)(unsafe.Pointer(sa)), C.int(timeoutMS(ctx))); r != 0 {
				return nil, &verbs.VerbError{Verb: "rdma_resolve_addr", Err: errno}
			}
			if _, err := ech.expect(ctx, C.RDMA_CM_EVENT_ADDR_RESOLVED); err != nil {
				return nil, err
			}
			return id.verbs, nil
		}()
		C.rdma_destroy_id(id)
		ech.destroy()
		if err != nil {
			return nil, fmt.Errorf("verbs/ibverbs: %w reaches %s: %v", verbs.ErrNoDevice, addr, err)
		}
		if ctxDev != nil {
			return ctxDev, nil
		}
	}
	return nil, fmt.Errorf("verbs/ibverbs: %w reaches %s (not an address of an RDMA interface, nor routed through one); use provider=soft to run rdmafs without RDMA hardware", verbs.ErrNoDevice, addr)
}

// timeoutMS is what is left of ctx's deadline, in milliseconds, for the
// RDMA CM's resolution timeouts.
func timeoutMS(ctx context.Context) int {
	dl, ok := ctx.Deadline()
	if !ok {
		return 10000
	}
	return max(int(time.Until(dl)/time.Millisecond), 1)
}

// parseAddr parses host[:port] (hostPortOptional) or host:port into an IP
// and a port, looking the host up if it is a name.
func parseAddr(ctx context.Context, addr string, hostPortOptional bool) (net.IP, uint16, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		if !hostPortOptional {
			return nil, 0, fmt.Errorf("verbs/ibverbs: address %q: %w", addr, err)
		}
		host, portStr = addr, "0"
	}
	port, err := net.LookupPort("tcp", portStr)
	if err != nil {
		return nil, 0, fmt.Errorf("verbs/ibverbs: address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		if host == "" {
			ip = net.IPv4zero
		} else {
			ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
			if err != nil || len(ips) == 0 {
				return nil, 0, fmt.Errorf("verbs/ibverbs: address %q: %v", addr, err)
			}
			ip = ips[0]
			for _, x := range ips {
				if x.To4() != nil {
					ip = x
					break
				}
			}
		}
	}
	return ip, uint16(port), nil
}

// newSockaddr returns a C sockaddr_storage for ip and port; the caller
// frees it.
func newSockaddr(ip net.IP, port uint16) *C.struct_sockaddr_storage {
	sa := (*C.struct_sockaddr_storage)(C.calloc(1, C.sizeof_struct_sockaddr_storage))
	if ip4 := ip.To4(); ip4 != nil {
		C.rdmafs_set_addr(sa, C.AF_INET, (*C.uint8_t)(unsafe.Pointer(&ip4[0])), C.uint16_t(port))
	} else {
		ip16 := ip.To16()
		C.rdmafs_set_addr(sa, C.AF_INET6, (*C.uint8_t)(unsafe.Pointer(&ip16[0])), C.uint16_t(port))
	}
	return sa
}

// sockaddrString formats a sockaddr as host:port.
func sockaddrString(sa *C.struct_sockaddr) string {
	var ip [16]byte
	var port C.uint16_t
	n := C.rdmafs_get_addr(sa, (*C.uint8_t)(unsafe.Pointer(&ip[0])), &port)
	if n == 0 {
		return ""
	}
	return net.JoinHostPort(net.IP(ip[:n]).String(), fmt.Sprint(port))
}

// rxeVendorID is the vendor id of SoftRoCE devices (RXE_VENDOR_ID).
const rxeVendorID = 0xffffff

// device is an open device: one of librdmacm's device contexts (the RDMA
// CM creates queue pairs on those, so a PD must be of the same context).
type device struct {
	ctx   *C.struct_ibv_context
	list  **C.struct_ibv_context // rdma_get_devices's list, freed by Close
	name  string
	caps  verbs.Caps
	watch *asyncWatch
	// rxe is SoftRoCE, whose completions carry the kernel's value of
	// the "with invalidate" flag (1<<2, IBV_WC_IP_CSUM_OK in user
	// space) rather than IBV_WC_WITH_INV (seen in Linux 6.1).
	rxe bool

	state verbs.DeviceState // its PDs, and whether it is closed
}

func (d *device) queryCaps() error {
	var attr C.struct_ibv_device_attr
	if r := C.ibv_query_device(d.ctx, &attr); r != 0 {
		return &verbs.VerbError{Verb: "ibv_query_device", Err: syscall.Errno(r)}
	}
	flags := uint64(attr.device_cap_flags)
	d.rxe = attr.vendor_id == rxeVendorID
	d.caps = verbs.Caps{
		// What a connection can ask for: each queue keeps room for
		// its drain marker, the CQ for both.
		MaxQPWR:         int(attr.max_qp_wr) - 1,
		MaxSGE:          min(int(attr.max_sge), C.RDMAFS_MAX_SGE),
		MaxCQE:          int(attr.max_cqe) - 2,
		MaxMRSize:       uint64(attr.max_mr_size),
		MaxQPRdAtom:     int(attr.max_qp_rd_atom),
		MaxQPInitRdAtom: int(attr.max_qp_init_rd_atom),
		MemoryWindows:   flags&(C.IBV_DEVICE_MEM_WINDOW_TYPE_2A|C.IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0,
	}
	return nil
}

func (d *device) Name() string     { return d.name }
func (d *device) Caps() verbs.Caps { return d.caps }

func (d *device) AllocPD() (verbs.PD, error) {
	return d.state.AllocPD("ibv_alloc_pd", func() (verbs.PD, error) {
		p, errno := C.ibv_alloc_pd(d.ctx)
		if p == nil {
			return nil, &verbs.VerbError{Verb: "ibv_alloc_pd", Err: errno}
		}
		return &pd{dev: d, pd: p}, nil
	})
}

func (d *device) Close() error {
	return d.state.Close("ibv_close_device", func() {
		d.watch.release()
		C.rdma_free_devices(d.list)
	})
}

// asyncWatch reads the async events of one device context for every
// Device open on it, and hands them to the connections they concern.
type asyncWatch struct {
	ctx  *C.struct_ibv_context
	fd   *pollFD
	ev   *C.struct_rdmafs_async_event
	done chan struct{}
	refs int // under watchMu

	mu    sync.Mutex
	qps   map[uint32]*conn
	cqs   map[*C.struct_ibv_cq]*conn
	ports map[int]string // the last event of each port
}

var (
	watchMu sync.Mutex
	watches = map[*C.struct_ibv_context]*asyncWatch{}
)

func watchContext(ctx *C.struct_ibv_context) (*asyncWatch, error) {
	watchMu.Lock()
	defer watchMu.Unlock()
	if w := watches[ctx]; w != nil {
		w.refs++
		return w, nil
	}
	fd, err := newPollFD(int(ctx.async_fd), "ibv async events")
	if err != nil {
		return nil, &verbs.VerbError{Verb: "async event fd", Err: err}
	}
	w := &asyncWatch{
		ctx: ctx, fd: fd, refs: 1, done: make(chan struct{}),
		ev:    (*C.struct_rdmafs_async_event)(C.calloc(1, C.sizeof_struct_rdmafs_async_event)),
		qps:   make(map[uint32]*conn),
		cqs:   make(map[*C.struct_ibv_cq]*conn),
		ports: make(map[int]string),
	}
	watches[ctx] = w
	go w.loop()
	return w, nil
}

func (w *asyncWatch) release() {
	watchMu.Lock()
	w.refs--
	last := w.refs == 0
	if last {
		delete(watches, w.ctx)
	}
	watchMu.Unlock()
	if last {
		w.fd.close()
		<-w.done
		C.free(unsafe.Pointer(w.ev))
	}
}

func (w *asyncWatch) add(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.qps[c.qpNum] = c
	w.cqs[c.cq] = c
}

func (w *asyncWatch) remove(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.qps[c.qpNum] == c {
		delete(w.qps, c.qpNum)
	}
	if w.cqs[c.cq] == c {
		delete(w.cqs, c.cq)
	}
}

type asyncEvent struct {
	typ   C.int
	qpNum uint32
	cq    *C.struct_ibv_cq
	port  int
}

func (w *asyncWatch) loop() {
	defer close(w.done)
	for {
		var ev asyncEvent
		var failed C.int
		err := w.fd.wait(context.Background(), func() bool {
			r := C.rdmafs_get_async_event(w.ctx, w.ev)
			if r == -C.EAGAIN {
				return false
			}
			failed = r
			ev = asyncEvent{typ: w.ev._type, qpNum: uint32(w.ev.qp_num), cq: w.ev.cq, port: int(w.ev.port)}
			return true
		})
		if err != nil || failed != 0 {
			return // closed (or the device is gone)
		}
		w.dispatch(ev)
	}
}

// dispatch surfaces an async event: errors end the connections they
// concern, COMM_EST goes to the RDMA CM.
func (w *asyncWatch) dispatch(ev asyncEvent) {
	name := C.GoString(C.ibv_event_type_str(C.enum_ibv_event_type(ev.typ)))
	w.mu.Lock()
	var targets []*conn
	switch ev.typ {
	case C.IBV_EVENT_QP_FATAL, C.IBV_EVENT_QP_REQ_ERR, C.IBV_EVENT_QP_ACCESS_ERR, C.IBV_EVENT_COMM_EST,
		C.IBV_EVENT_PATH_MIG_ERR:
		if c := w.qps[ev.qpNum]; c != nil {
			targets = append(targets, c)
		}
	case C.IBV_EVENT_CQ_ERR:
		if c := w.cqs[ev.cq]; c != nil {
			targets = append(targets, c)
		}
	case C.IBV_EVENT_DEVICE_FATAL, C.IBV_EVENT_PORT_ERR:
		for _, c := range w.qps {
			targets = append(targets, c)
		}
	}
	if ev.port != 0 {
		w.ports[ev.port] = name
	}
	w.mu.Unlock()
	for _, c := range targets {
		if ev.typ == C.IBV_EVENT_COMM_EST {
			// Data came before the CM's ready-to-use: tell the CM
			// the connection is established.
			c.notifyEstablished()
			continue
		}
		what := name
		if ev.port != 0 {
			what = fmt.Sprintf("%s on port %d", name, ev.port)
		}
		c.fail(fmt.Errorf("%w: async event %s", verbs.ErrDisconnected, what), true)
	}
}
