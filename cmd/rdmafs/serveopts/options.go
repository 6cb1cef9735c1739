// Package serveopts is the -o options of rdmafs serve. One table (table.go)
// declares every option once: its names, the values it takes, its
// default, what it does and how it sets Options. From that table come the
// parser (Parse), the option lists of rdmafs -h and of the rdmafs(8) man
// page (Sections), and the list in the error for an unknown option.
//
//	options.go  Options and Default: what the options set, and the defaults
//	table.go    the table and the kinds of option it is made of
//	parse.go    Parse
//	doc.go      Sections: the table as documentation
//
// The defaults that are the server's or the protocol's (workers,
// max_connections, idle_timeout, anonuid, the ports) are their constants,
// read by Default; the documentation shows what Default sets.
package serveopts

import (
	"time"

	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/server"
	"github.com/rdmafs/rdmafs/nfs3/server/lockd"
)

// Options are the -o options of rdmafs serve.
type Options struct {
	Addr        string             // addr=: the address to listen on
	Port        int                // port=: the TCP port of MOUNT and NFS; 0 picks a free one
	ReadOnly    bool               // ro, rw
	Workers     int                // workers=: calls served at once per connection
	Proto       mountopts.Proto    // proto=: rdma serves NFS over RPC-over-RDMA as well
	RDMAPort    int                // rdmaport=: where, for proto=rdma; 0 picks a free one
	Provider    mountopts.Provider // provider=: the verbs provider for proto=rdma
	Export      server.Export      // knfsd's export options
	MaxConns    int                // max_connections=: connections at once, TCP and RDMA
	IdleTimeout time.Duration      // idle_timeout=: < 0 never
	NoLock      bool               // nolock: serve no NLM nor NSM
	GraceTime   time.Duration      // grace_time=: < 0 none
	StateDir    string             // statedir=: "" keeps no lock state
}

// Default returns the options rdmafs serve has before any -o: the only
// place their defaults are set. Export's zero value is knfsd's defaults
// (server.Export says which).
func Default() Options {
	return Options{
		Addr:        "127.0.0.1",
		Port:        nfs3.Port,
		Workers:     server.DefaultWorkers,
		Proto:       mountopts.ProtoTCP,
		RDMAPort:    nfs3.RDMAPort,
		Provider:    mountopts.ProviderIBVerbs,
		MaxConns:    server.DefaultMaxConns,
		IdleTimeout: server.DefaultIdleTimeout,
		GraceTime:   lockd.DefaultGraceTime,
	}
}
