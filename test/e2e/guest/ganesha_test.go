package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/test/ganesha"
)

// The kernel client and rdmafs side by side on NFS-Ganesha, the other
// widely deployed open-source NFS server, as on knfsd: the kernel client
// is the oracle. Ganesha runs in a network namespace of its own (package
// ganesha), reached over a veth pair from another where the test runs,
// with a lock manager and statd of its own for the kernel client.

// ganeshaEnv marks the copy of the test binary that runs in the test's
// namespace.
const ganeshaEnv = "RDMAFS_GUEST_GANESHA"

// ganeshaLab runs the calling test again in a namespace where Ganesha
// serves, and returns false; inside, it returns true and the test system
// with Ganesha's export as the server's.
func ganeshaLab(t *testing.T) (labEnv, bool) {
	t.Helper()
	e := lab(t)
	if !ganesha.Rerun(t, ganeshaEnv, ganesha.Config{}) {
		return e, false
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ganesha.nfsd's log:\n%s", ganesha.Log())
		}
	})
	e.Addr, e.Export = ganesha.Addr, ganesha.Export
	return e, true
}

// ganeshaSeed is the seed of TestDifferentialGanesha's random scripts in
// `make e2e`, drawn once and seen to pass.
const ganeshaSeed = 1796665020135709001

// TestDifferentialGanesha runs the differential test's scripts on the
// kernel client's mount of Ganesha's export and on rdmafs's, both over
// TCP, and compares every result.
func TestDifferentialGanesha(t *testing.T) {
	e, ok := ganeshaLab(t)
	if !ok {
		return
	}
	ref := mountKernel(t, e, "tcp")
	under := map[string]string{"rdmafs over tcp": mountRdmafs(t, e, "proto=tcp,vers=3")}
	differential(t, ref, under, knownDifferences, ganeshaSeed)
}

// TestGaneshaACLKernelAndRdmafs: Ganesha 4.3 as Debian builds it keeps no
// POSIX ACLs (its VFS back end is built without ENABLE_VFS_POSIX_ACL):
// through either client getfacl shows the mode alone, even of a file that
// has an ACL on the server, and setfacl of a file fails alike. The test
// records the SETACL of each client through a proxy and checks that
// rdmafs's arguments are the kernel client's, byte for byte: the refusal
// is Ganesha's (its decoder refuses the empty default ACL that every
// client's SETACL of a file carries).
func TestGaneshaACLKernelAndRdmafs(t *testing.T) {
	e, ok := ganeshaLab(t)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mountd, err := nfs3.GetPort(ctx, nfs3.DialConfig{Host: e.Addr, Timeout: 5 * time.Second}, nfs3.MountProgram, nfs3.MountVersion)
	if err != nil {
		t.Fatal(err)
	}
	nfsRec := startRecorder(t, net.JoinHostPort(e.Addr, "2049"))
	mountRec := startRecorder(t, net.JoinHostPort(e.Addr, strconv.Itoa(mountd)))
	via := e
	via.Addr = "127.0.0.1"
	kernel := mountThrough(t, via, nfsRec.port(), mountRec.port())
	rdmafs := mountRdmafs(t, via, fmt.Sprintf("proto=tcp,vers=3,port=%d,mountport=%d,nolock", nfsRec.port(), mountRec.port()))

	// An ACL on the server shows through neither.
	named := acl.ACL{
		{Tag: acl.TagUserObj, ID: acl.UndefinedID, Perm: 6},
		{Tag: acl.TagUser, ID: 65534, Perm: 6},
		{Tag: acl.TagGroupObj, ID: acl.UndefinedID, Perm: 4},
		{Tag: acl.TagMask, ID: acl.UndefinedID, Perm: 6},
		{Tag: acl.TagOther, ID: acl.UndefinedID, Perm: 4},
	}
	if err := os.WriteFile(filepath.Join(e.Export, "has-acl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(e.Export, "has-acl"), acl.XattrAccess, named.Xattr(), 0); err != nil {
		t.Fatal(err)
	}
	get := func(mnt string) string {
		buf := make([]byte, 4096)
		n, err := unix.Getxattr(filepath.Join(mnt, "has-acl"), acl.XattrAccess, buf)
		if err != nil {
			return err.Error()
		}
		a, err := acl.FromXattr(buf[:n])
		return fmt.Sprint(a, err)
	}
	if k, r := get(kernel), get(rdmafs); k != r {
		t.Errorf("getxattr of an ACL set on the server: kernel client %q, rdmafs %q", k, r)
	} else {
		t.Logf("getxattr of an ACL set on the server, through both: %s", k)
	}

	// setfacl -m u:65534:rw of a file, through each in turn.
	set := func(mnt, name string) error {
		p := filepath.Join(mnt, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return unix.Setxattr(p, acl.XattrAccess, named.Xattr(), 0)
	}
	errK := set(kernel, "set-by-kernel")
	byKernel := nfsRec.calls(acl.Program, acl.ProcSetACL)
	errR := set(rdmafs, "set-by-rdmafs")
	byRdmafs := nfsRec.calls(acl.Program, acl.ProcSetACL)[len(byKernel):]
	var enK, enR syscall.Errno
	errors.As(errK, &enK)
	errors.As(errR, &enR)
	t.Logf("setfacl of a file: kernel client %v, rdmafs %v", errK, errR)
	if enK != enR {
		t.Errorf("setfacl of a file: kernel client %v, rdmafs %v", errK, errR)
	}
	if len(byKernel) == 0 || len(byRdmafs) == 0 {
		t.Fatalf("SETACL calls seen: %d of the kernel client, %d of rdmafs", len(byKernel), len(byRdmafs))
	}
	// The arguments but for the handle, which names another file: the
	// mask and both ACLs.
	k, r := skipOpaque(byKernel[0]), skipOpaque(byRdmafs[0])
	if !bytes.Equal(k, r) {
		t.Errorf("SETACL arguments after the handle:\nkernel client %x\nrdmafs        %x", k, r)
	} else {
		t.Logf("SETACL arguments after the handle, the same from both clients: %x", k)
	}
}

// mountThrough mounts e's export with the kernel client over TCP through
// the given NFS and MOUNT ports, without locks, until the test ends.
func mountThrough(t *testing.T, e labEnv, nfsPort, mountPort int) string {
	t.Helper()
	mnt := mountPoint(t, "knfs-through")
	opts := fmt.Sprintf("vers=3,proto=tcp,port=%d,mountport=%d,mountproto=tcp,nolock", nfsPort, mountPort)
	run(t, 2*time.Minute, "mount", "-t", "nfs", "-o", opts, e.Addr+":"+e.Export, mnt)
	t.Cleanup(func() { run(t, time.Minute, "umount", mnt); os.Remove(mnt) })
	return mnt
}

// skipOpaque returns b after the XDR opaque it starts with.
func skipOpaque(b []byte) []byte {
	if len(b) < 4 {
		return nil
	}
	n := (int(binary.BigEndian.Uint32(b)) + 3) &^ 3
	if 4+n > len(b) {
		return nil
	}
	return b[4+n:]
}

// TestGaneshaGetlkKernelAndRdmafs: a process holds a write lock through
// one client's mount of Ganesha's export, and another asks F_GETLK through
// the same mount and through the other client's: on the same mount both
// clients name the holder (they look in their own locks first); through
// the other, rdmafs gets the server's answer, which names no process.
func TestGaneshaGetlkKernelAndRdmafs(t *testing.T) {
	e, ok := ganeshaLab(t)
	if !ok {
		return
	}
	if err := os.WriteFile(filepath.Join(e.Export, "locked"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	mounts := map[string]string{"kernel": mountKernel(t, e, "tcp"), "rdmafs": mountRdmafs(t, e, "proto=tcp,vers=3,lock")}
	for _, holder := range []string{"kernel", "rdmafs"} {
		h := startLockScript(t, "holder through "+holder, filepath.Join(mounts[holder], "locked"))
		if r := h.do(t, "set w 10 20", time.Minute); r != "ok" {
			t.Fatalf("F_SETLK through the %s mount: %s", holder, r)
		}
		for _, asker := range []string{"kernel", "rdmafs"} {
			a := startLockScript(t, "asker through "+asker, filepath.Join(mounts[asker], "locked"))
			got := a.do(t, "get w 0 0", time.Minute)
			a.stop(t)
			t.Logf("held through the %s mount, F_GETLK through the %s mount: %s", holder, asker, got)
			switch {
			case asker == holder && got != fmt.Sprintf("lock w 10 20 %d", h.cmd.Process.Pid):
				t.Errorf("F_GETLK through the holder's %s mount: %s, want the holder's pid, %d", asker, got, h.cmd.Process.Pid)
			case asker == "rdmafs" && holder != asker && got != "lock w 10 20 0":
				t.Errorf("F_GETLK through rdmafs of the kernel client's lock: %s, want pid 0", got)
			}
		}
		h.stop(t)
	}
}

// rpcRecorder forwards the TCP connections made to it to a server, and
// keeps every RPC call record that the clients send.
type rpcRecorder struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	seen   [][]byte
}

func startRecorder(t *testing.T, target string) *rpcRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rpcRecorder{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.forward(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return r
}

func (r *rpcRecorder) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// forward copies c's records to the server, keeping each, and the
// server's bytes back, until either side closes.
func (r *rpcRecorder) forward(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer s.Close()
	go io.Copy(c, s)
	in := bufio.NewReader(c)
	var record []byte
	for {
		var mark [4]byte
		if _, err := io.ReadFull(in, mark[:]); err != nil {
			return
		}
		m := binary.BigEndian.Uint32(mark[:])
		frag := make([]byte, m&^(1<<31))
		if _, err := io.ReadFull(in, frag); err != nil {
			return
		}
		if _, err := s.Write(append(mark[:], frag...)); err != nil {
			return
		}
		record = append(record, frag...)
		if m&(1<<31) != 0 {
			r.mu.Lock()
			r.seen = append(r.seen, record)
			r.mu.Unlock()
			record = nil
		}
	}
}

// calls returns the arguments of the calls of program prog, procedure
// proc recorded so far, in order.
func (r *rpcRecorder) calls(prog, proc uint32) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, rec := range r.seen {
		// xid, CALL, RPC version, program, version, procedure, then
		// the credential and the verifier.
		if len(rec) < 32 || binary.BigEndian.Uint32(rec[12:]) != prog || binary.BigEndian.Uint32(rec[20:]) != proc {
			continue
		}
		args := skipOpaque(rec[28:]) // the credential's body
		if len(args) < 4 {
			continue
		}
		if args = skipOpaque(args[4:]); args != nil { // the verifier's
			out = append(out, args)
		}
	}
	return out
}
