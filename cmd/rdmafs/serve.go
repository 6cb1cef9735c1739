package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/rdmafs/rdmafs/cmd/rdmafs/serveopts"
	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/server"
	"github.com/rdmafs/rdmafs/nfs3/server/lockd"
	"github.com/rdmafs/rdmafs/svcrdma"
)

// parseServeOptions applies one -o list of rdmafs serve to o; a bad
// option is bad usage.
func parseServeOptions(list string, o *serveopts.Options) error {
	if err := serveopts.Parse(list, o); err != nil {
		return &usageError{err.Error()}
	}
	return nil
}

// serve exports a directory until SIGTERM or SIGINT.
func serve(args []string) error {
	o := serveopts.Default()
	var dirs []string
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; {
		case arg == "-h" || arg == "--help":
			return errHelp
		case arg == "-o" && i+1 < len(args):
			i++
			if err := parseServeOptions(args[i], &o); err != nil {
				return err
			}
		case strings.HasPrefix(arg, "-o") && len(arg) > 2:
			if err := parseServeOptions(arg[2:], &o); err != nil {
				return err
			}
		case strings.HasPrefix(arg, "-"):
			return &usageError{fmt.Sprintf("serve: unknown flag %s", arg)}
		default:
			dirs = append(dirs, arg)
		}
	}
	if len(dirs) != 1 {
		return &usageError{"usage: rdmafs serve [-o OPTIONS] DIR"}
	}
	defer startProfile(".serve")()
	logger := log.New(os.Stderr, "rdmafs serve: ", log.LstdFlags)
	srv, err := server.New(server.Options{Root: dirs[0], ReadOnly: o.ReadOnly, Workers: o.Workers, Export: o.Export,
		MaxConns: o.MaxConns, IdleTimeout: o.IdleTimeout, Logf: logger.Printf})
	if err != nil {
		return err
	}
	var locks *lockd.Server
	var hostStatd bool
	if !o.NoLock {
		// Where the host's statd holds NSM, serve hears of its clients'
		// reboots through it.
		hostStatd = lockd.HostStatdRuns(context.Background())
		if locks, err = lockd.New(lockd.Config{StateDir: o.StateDir, GraceTime: o.GraceTime, Name: lockName(o.Addr),
			HostStatd: hostStatd, MayLock: srv.MayLock, Logf: logger.Printf}); err != nil {
			srv.Close()
			return fmt.Errorf("serve: %w", err)
		}
		defer locks.Close()
		locks.Register(srv.RPC())
	}
	l, err := net.Listen("tcp", hostPort(o.Addr, o.Port))
	if err != nil {
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// The garbage collector keeps the heap near what clients can
		// make the server hold, rather than letting it reach twice that.
		debug.SetMemoryLimit(srv.RPC().HeapBound())
	}
	port := l.Addr().(*net.TCPAddr).Port
	fmt.Printf("rdmafs serve: exporting %s as %s:/ on port %d (NFSv3 and MOUNT)\n", dirs[0], o.Addr, port)
	fmt.Printf("rdmafs serve: export options %s,clients=%s\n", &o.Export, clientList(&o))
	// A kernel client of another host mounts without nolock; one on this
	// host must keep it, as its lockd would take the host's NLM
	// registration from serve (docs/locking.md).
	nolock := ",nolock"
	if locks != nil {
		if ip := net.ParseIP(o.Addr); ip != nil && !ip.IsLoopback() {
			nolock = ""
		}
		nsm := "its own NSM"
		if hostStatd {
			nsm = "the host's statd"
		}
		fmt.Printf("rdmafs serve: file locks (NLM v4, with %s) on port %d%s\n", nsm, port, graceNote(&o, locks))
	}
	var rdmaSrv *svcrdma.Server
	if o.Proto == mountopts.ProtoRDMA {
		if rdmaSrv, err = serveRDMA(srv, &o, logger.Printf); err != nil {
			l.Close()
			srv.Close()
			return err
		}
		defer rdmaSrv.Close()
		rport := rdmaPortOf(rdmaSrv.Addr())
		fmt.Printf("rdmafs serve: NFSv3 over RDMA (provider=%v) on port %d\n", o.Provider, rport)
		fmt.Printf("mount it with: rdmafs %s:/ MOUNTPOINT -o proto=rdma,provider=%v,port=%d,mountport=%d\n", hostForURL(o.Addr), o.Provider, rport, port)
		if o.Provider == mountopts.ProviderIBVerbs {
			fmt.Printf("    or with:   mount -t nfs -o vers=3,proto=rdma,port=%d,mountport=%d,mountproto=tcp%s %s:/ MOUNTPOINT\n", rport, port, nolock, hostForURL(o.Addr))
		}
	} else {
		fmt.Printf("mount it with: rdmafs %s:/ MOUNTPOINT -o port=%d,mountport=%d\n", hostForURL(o.Addr), port, port)
		fmt.Printf("    or with:   mount -t nfs -o vers=3,proto=tcp,port=%d,mountport=%d,mountproto=tcp%s %s:/ MOUNTPOINT\n", port, port, nolock, hostForURL(o.Addr))
	}

	// As mountd and nfsd do, so that showmount -e and mount.nfs without
	// port options find it, and a kernel client finds the lock manager;
	// nothing when no rpcbind runs.
	var lockPrograms [][3]uint32
	if locks != nil {
		lockPrograms = lockd.Programs
		// A client's sm-notify tells of its reboot over UDP only, and
		// the host's statd calls back over UDP only.
		if udp, err := net.ListenPacket("udp", hostPort(o.Addr, port)); err != nil {
			logger.Printf("NSM over UDP on port %d: %v: a client's reboot notice will not reach serve", port, err)
			lockPrograms = slices.DeleteFunc(slices.Clone(lockPrograms), func(m [3]uint32) bool { return m[2] != nfs3.IPProtoTCP })
		} else {
			defer udp.Close()
			go locks.ServeUDP(udp)
		}
	}
	defer server.RegisterRPCBind(context.Background(), port, logger.Printf, lockPrograms...)()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case sig := <-signals:
		logger.Printf("%v: stopping", sig)
		srv.Close()
		<-done
		return nil
	case err := <-done:
		srv.Close()
		return err
	}
}

// lockName is how the lock manager names its host to clients after a
// restart: the address it serves on, which the clients mounted, or the
// host's name when it serves on every address.
func lockName(addr string) string {
	if ip := net.ParseIP(addr); ip == nil || ip.IsUnspecified() {
		return ""
	}
	return addr
}

// graceNote says whether serve starts in a grace period.
func graceNote(o *serveopts.Options, locks *lockd.Server) string {
	switch {
	case o.StateDir == "":
		return " (no statedir: no grace period after a restart)"
	case locks.InGrace():
		return fmt.Sprintf(" (grace period of %v: reclaims only)", o.GraceTime)
	}
	return ""
}

// hostForURL brackets an IPv6 address for SERVER:/EXPORT.
func hostForURL(ip string) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]"
	}
	return ip
}

// serveRDMA starts the RPC-over-RDMA listener in front of srv. MOUNT stays
// on TCP.
func serveRDMA(srv *server.Server, o *serveopts.Options, logf func(string, ...any)) (*svcrdma.Server, error) {
	p, err := provider(o.Provider)
	if err != nil {
		return nil, err
	}
	listen := hostPort(o.Addr, o.RDMAPort)
	rs, err := svcrdma.Listen(context.Background(), svcrdma.Config{
		Provider: p,
		Addr:     listen,
		// RDMA connections count as secure (as in knfsd's svcrdma);
		// the client list applies to them as to TCP.
		Admit: func(remote string) bool { return srv.AllowsClient(remote, listen) },
		// Each connection is a session of the RPC service TCP serves,
		// and its buffers beyond its first come out of the memory
		// budget TCP call records do.
		Service: srv.RPC(),
		Logf:    logf,
	})
	if err != nil {
		return nil, fmt.Errorf("serve: RDMA listener: %w", err)
	}
	go func() {
		if err := rs.Serve(); err != nil {
			logf("RDMA listener: %v", err)
		}
	}()
	return rs, nil
}

// clientList is the clients option as serve applies it.
func clientList(o *serveopts.Options) string {
	if len(o.Export.Clients) == 0 {
		return o.Addr + " (this host)"
	}
	var names []string
	for _, p := range o.Export.Clients {
		switch {
		case p.Bits() == 0:
			if !slices.Contains(names, "*") {
				names = append(names, "*")
			}
		case p.IsSingleIP():
			names = append(names, p.Addr().String())
		default:
			names = append(names, p.String())
		}
	}
	return strings.Join(names, "+")
}

// rdmaPortOf returns the port of a host:port address.
func rdmaPortOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}
