package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/nfs3/server"
	"github.com/rdmafs/rdmafs/svcrdma"
)

// serveOptions are the -o options of rdmafs serve.
type serveOptions struct {
	addr     string
	port     int
	readOnly bool
	workers  int
	rdma     bool               // proto=rdma: NFS over RPC-over-RDMA as well
	rdmaPort int                // where, default 20049
	provider mountopts.Provider // the verbs provider for rdma
	export   server.Export      // knfsd's export options
	maxConns int                // max_connections; 0: the server's default
	idle     time.Duration      // idle_timeout; 0: the server's default, < 0 never
}

// parseServeOptions parses the -o list of rdmafs serve; errors name the
// option and what is allowed, as the mount options' do.
func parseServeOptions(list string, o *serveOptions) error {
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, hasVal := strings.Cut(item, "=")
		bad := func(allowed string) error {
			return &usageError{fmt.Sprintf("option %s: %s", item, allowed)}
		}
		number := func(lo, hi int) (int, error) {
			n, err := strconv.Atoi(val)
			if !hasVal || err != nil || n < lo || n > hi {
				return 0, bad(fmt.Sprintf("must be a number from %d to %d", lo, hi))
			}
			return n, nil
		}
		var err error
		switch name {
		case "port":
			o.port, err = number(0, 65535)
		case "workers":
			o.workers, err = number(1, 1024)
		case "addr":
			if net.ParseIP(val) == nil {
				err = bad("must be an IP address")
			}
			o.addr = val
		case "ro", "rw":
			if hasVal {
				err = bad("takes no value")
			}
			o.readOnly = name == "ro"
		case "proto":
			switch val {
			case "tcp", "rdma":
				o.rdma = val == "rdma"
			default:
				err = bad("must be tcp or rdma")
			}
		case "rdmaport":
			o.rdmaPort, err = number(0, 65535)
		case "provider":
			if p, ok := mountopts.ParseProvider(val); ok {
				o.provider = p
			} else {
				err = bad("must be ibverbs or soft")
			}
		case "secure", "insecure", "root_squash", "no_root_squash", "all_squash", "no_all_squash":
			if hasVal {
				err = bad("takes no value")
			}
			switch name {
			case "secure", "insecure":
				o.export.Insecure = name == "insecure"
			case "root_squash", "no_root_squash":
				o.export.NoRootSquash = name == "no_root_squash"
			default:
				o.export.AllSquash = name == "all_squash"
			}
		case "anonuid", "anongid":
			var n int
			if n, err = number(0, 1<<32-2); err == nil {
				id := uint32(n)
				if name == "anonuid" {
					o.export.AnonUID = &id
				} else {
					o.export.AnonGID = &id
				}
			}
		case "clients":
			var ps []netip.Prefix
			if !hasVal {
				err = bad("addresses or networks (CIDR) joined by +, or *")
			} else if ps, err = server.ParseClients(val); err != nil {
				err = bad(err.Error())
			}
			o.export.Clients = append(o.export.Clients, ps...)
		case "max_connections":
			o.maxConns, err = number(1, 1<<16)
		case "idle_timeout":
			var n int
			if n, err = number(0, 1<<20); err == nil {
				o.idle = time.Duration(n) * time.Second
				if n == 0 {
					o.idle = -1
				}
			}
		default:
			err = &usageError{fmt.Sprintf("unknown serve option %q (port, addr, ro, rw, workers, proto, rdmaport, provider, "+
				"secure, insecure, root_squash, no_root_squash, all_squash, no_all_squash, anonuid, anongid, clients, "+
				"max_connections, idle_timeout)", item)}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// serve exports a directory until SIGTERM or SIGINT.
func serve(args []string) error {
	o := serveOptions{addr: "127.0.0.1", port: defaultNFSPort, rdmaPort: defaultRDMAPort}
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
	srv, err := server.New(server.Options{Root: dirs[0], ReadOnly: o.readOnly, Workers: o.workers, Export: o.export,
		MaxConns: o.maxConns, IdleTimeout: o.idle, Logf: logger.Printf})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", hostPort(o.addr, o.port))
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
	fmt.Printf("rdmafs serve: exporting %s as %s:/ on port %d (NFSv3 and MOUNT)\n", dirs[0], o.addr, port)
	fmt.Printf("rdmafs serve: export options %s,clients=%s\n", &o.export, clientList(&o))
	var rdmaSrv *svcrdma.Server
	if o.rdma {
		if rdmaSrv, err = serveRDMA(srv, &o, logger.Printf); err != nil {
			l.Close()
			srv.Close()
			return err
		}
		defer rdmaSrv.Close()
		rport := rdmaPortOf(rdmaSrv.Addr())
		fmt.Printf("rdmafs serve: NFSv3 over RDMA (provider=%v) on port %d\n", o.provider, rport)
		fmt.Printf("mount it with: rdmafs %s:/ MOUNTPOINT -o proto=rdma,provider=%v,port=%d,mountport=%d\n", hostForURL(o.addr), o.provider, rport, port)
		if o.provider == mountopts.ProviderIBVerbs {
			fmt.Printf("    or with:   mount -t nfs -o vers=3,proto=rdma,port=%d,mountport=%d,mountproto=tcp,nolock %s:/ MOUNTPOINT\n", rport, port, hostForURL(o.addr))
		}
	} else {
		fmt.Printf("mount it with: rdmafs %s:/ MOUNTPOINT -o port=%d,mountport=%d\n", hostForURL(o.addr), port, port)
		fmt.Printf("    or with:   mount -t nfs -o vers=3,proto=tcp,port=%d,mountport=%d,mountproto=tcp,nolock %s:/ MOUNTPOINT\n", port, port, hostForURL(o.addr))
	}

	// As mountd and nfsd do, so that showmount -e and mount.nfs without
	// port options find it; nothing when no rpcbind runs.
	defer server.RegisterRPCBind(context.Background(), port, logger.Printf)()

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

// hostForURL brackets an IPv6 address for SERVER:/EXPORT.
func hostForURL(ip string) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]"
	}
	return ip
}

// serveRDMA starts the RPC-over-RDMA listener in front of srv. MOUNT stays
// on TCP.
func serveRDMA(srv *server.Server, o *serveOptions, logf func(string, ...any)) (*svcrdma.Server, error) {
	p, err := provider(o.provider)
	if err != nil {
		return nil, err
	}
	listen := hostPort(o.addr, o.rdmaPort)
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
func clientList(o *serveOptions) string {
	if len(o.export.Clients) == 0 {
		return o.addr + " (this host)"
	}
	var names []string
	for _, p := range o.export.Clients {
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
