package nfs3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// The MOUNT v3 procedures (RFC 1813 appendix I).
const (
	MountProcNull    = 0
	MountProcMnt     = 1
	MountProcDump    = 2
	MountProcUmnt    = 3
	MountProcUmntAll = 4
	MountProcExport  = 5
)

var mountProcNames = []string{"NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"}

// MOUNT protocol limits.
const (
	MountPathLen = 1024 // MNTPATHLEN: the longest path MNT and UMNT take
	maxFlavors   = 64
)

// MountStatus is mountstat3. Every status other than MNT3_OK is an error.
type MountStatus uint32

// The MOUNT v3 statuses.
const (
	MountOK             MountStatus = 0
	MountErrPerm        MountStatus = 1
	MountErrNoEnt       MountStatus = 2
	MountErrIO          MountStatus = 5
	MountErrAcces       MountStatus = 13
	MountErrNotDir      MountStatus = 20
	MountErrInval       MountStatus = 22
	MountErrNameTooLong MountStatus = 63
	MountErrNotSupp     MountStatus = 10004
	MountErrServerFault MountStatus = 10006
)

var mountStatusText = map[MountStatus]string{
	MountErrPerm:        "not owner (MNT3ERR_PERM)",
	MountErrNoEnt:       "no such export (MNT3ERR_NOENT)",
	MountErrIO:          "I/O error (MNT3ERR_IO)",
	MountErrAcces:       "access denied by server (MNT3ERR_ACCES)",
	MountErrNotDir:      "not a directory (MNT3ERR_NOTDIR)",
	MountErrInval:       "invalid argument (MNT3ERR_INVAL)",
	MountErrNameTooLong: "path name too long (MNT3ERR_NAMETOOLONG)",
	MountErrNotSupp:     "operation not supported (MNT3ERR_NOTSUPP)",
	MountErrServerFault: "server fault (MNT3ERR_SERVERFAULT)",
}

func (s MountStatus) Error() string {
	if t, ok := mountStatusText[s]; ok {
		return t
	}
	return fmt.Sprintf("mountstat3 %d", uint32(s))
}

// MountClient speaks the MOUNT protocol to one server's mountd over TCP.
type MountClient struct {
	rpc *sunrpc.Client
}

// DialConfig says how to reach a server's MOUNT or portmap service.
type DialConfig struct {
	Host string
	// Port of the service; 0 asks the portmapper on port 111.
	Port         int
	Auth         sunrpc.Auth
	ReservedPort bool
	// Timeout of one try; the call is tried twice before it fails.
	Timeout time.Duration
}

func (cfg *DialConfig) client(port int, prog, vers uint32, names []string) *sunrpc.Client {
	t := sunrpc.NewTCP(sunrpc.TCPConfig{
		Addr:         net.JoinHostPort(cfg.Host, strconv.Itoa(port)),
		ReservedPort: cfg.ReservedPort,
		MaxRecord:    1 << 20,
	})
	return sunrpc.NewClient(t, sunrpc.Config{
		Prog: prog, Vers: vers, Auth: cfg.Auth, Timeout: cfg.Timeout, Retrans: 1, Soft: true,
		Server: cfg.Host, ProcNames: names,
	})
}

// DialMount returns a client of the server's MOUNT v3 service, finding its
// port through the portmapper unless cfg.Port gives it.
func DialMount(ctx context.Context, cfg DialConfig) (*MountClient, error) {
	port := cfg.Port
	if port == 0 {
		var err error
		port, err = GetPort(ctx, cfg, MountProgram, MountVersion)
		if err != nil {
			return nil, err // it says it was finding mountd
		}
	}
	return &MountClient{rpc: cfg.client(port, MountProgram, MountVersion, mountProcNames)}, nil
}

// Close closes the connection to mountd.
func (m *MountClient) Close() error { return m.rpc.Close() }

// Mnt asks for the root file handle of the export at path, and returns it
// with the authentication flavors the server accepts for it.
func (m *MountClient) Mnt(ctx context.Context, cred *sunrpc.Cred, path string) (FH, []sunrpc.Flavor, error) {
	var fh FH
	if len(path) > MountPathLen {
		return fh, nil, MountErrNameTooLong
	}
	call := m.rpc.NewCall(MountProcMnt, cred)
	defer call.Release()
	e := call.Args()
	e.String(path)
	call.SetArgs(e)
	if err := m.rpc.Do(ctx, call); err != nil {
		return fh, nil, err
	}
	d := xdr.NewDecoder(call.Reply.Body)
	if st := MountStatus(d.Uint32()); d.Err() == nil && st != MountOK {
		return fh, nil, st
	}
	getFH(&d, &fh)
	n := d.Uint32()
	if d.Err() == nil && n > maxFlavors {
		d.Fail(fmt.Errorf("%d auth flavors", n))
	}
	var flavors []sunrpc.Flavor
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		flavors = append(flavors, sunrpc.Flavor(d.Uint32()))
	}
	if d.Err() == nil && fh.IsZero() {
		d.Fail(errEmptyHandle)
	}
	if err := d.Err(); err != nil {
		return fh, nil, fmt.Errorf("%w: MNT: %v", ErrBadReply, err)
	}
	return fh, flavors, nil
}

// Umnt tells mountd the client no longer uses the export at path.
func (m *MountClient) Umnt(ctx context.Context, cred *sunrpc.Cred, path string) error {
	call := m.rpc.NewCall(MountProcUmnt, cred)
	defer call.Release()
	e := call.Args()
	e.String(path)
	call.SetArgs(e)
	return m.rpc.Do(ctx, call)
}

// The portmapper (RFC 1833, version 2).
const (
	PortmapProgram     = 100000
	PortmapVersion     = 2
	PortmapPort        = 111
	PortmapProcSet     = 1
	PortmapProcUnset   = 2
	PortmapProcGetport = 3
	IPProtoTCP         = 6 // the protocol of a mapping for TCP
)

// PortmapProcNames names the portmapper's procedures up to GETPORT.
var PortmapProcNames = []string{"NULL", "SET", "UNSET", "GETPORT"}

// ErrNotRegistered is wrapped by GetPort's error when the portmapper
// answers that the program and version are not registered.
var ErrNotRegistered = errors.New("not registered with the portmapper")

// GetPort asks the portmapper of cfg.Host on which TCP port prog and vers
// listen.
func GetPort(ctx context.Context, cfg DialConfig, prog, vers uint32) (int, error) {
	rpc := cfg.client(PortmapPort, PortmapProgram, PortmapVersion, PortmapProcNames)
	defer rpc.Close()
	call := rpc.NewCall(PortmapProcGetport, nil)
	defer call.Release()
	e := call.Args()
	e.Uint32(prog)
	e.Uint32(vers)
	e.Uint32(IPProtoTCP)
	e.Uint32(0)
	call.SetArgs(e)
	if err := rpc.Do(ctx, call); err != nil {
		return 0, fmt.Errorf("nfs3: finding %s v%d through the portmapper of %s: %w", programName(prog), vers, cfg.Host, err)
	}
	d := xdr.NewDecoder(call.Reply.Body)
	port := d.Uint32()
	if err := d.Err(); err != nil {
		return 0, fmt.Errorf("%w: GETPORT of %s v%d: %v", ErrBadReply, programName(prog), vers, err)
	}
	if port == 0 || port > 65535 {
		return 0, fmt.Errorf("nfs3: %s v%d of %s: %w", programName(prog), vers, cfg.Host, ErrNotRegistered)
	}
	return int(port), nil
}

// Ping calls procedure NULL of program prog, version vers, on port: nil
// when the server serves that version there; a *sunrpc.AcceptError of
// PROG_MISMATCH names the versions it serves instead.
func Ping(ctx context.Context, cfg DialConfig, port int, prog, vers uint32) error {
	rpc := cfg.client(port, prog, vers, []string{"NULL"})
	defer rpc.Close()
	call := rpc.NewCall(0, nil)
	defer call.Release()
	if err := rpc.Do(ctx, call); err != nil {
		return fmt.Errorf("nfs3: NULL of %s v%d on %s port %d: %w", programName(prog), vers, cfg.Host, port, err)
	}
	return nil
}

// programName names prog as rpcinfo -p does.
func programName(prog uint32) string {
	switch prog {
	case Program:
		return "nfs"
	case MountProgram:
		return "mountd"
	}
	return fmt.Sprintf("program %d", prog)
}
