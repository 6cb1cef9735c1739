package difftest

import (
	"fmt"
	"math/rand/v2"

	"golang.org/x/sys/unix"
)

// Case is a named script.
type Case struct {
	Name string
	Ops  []Op
}

// The scripts are written with these helpers: u.open(...) and so on make
// one Op of user u.
type as string

func (u as) op(c Call, path string) Op {
	return Op{User: string(u), Call: c, Path: path, UID: -1, GID: -1}
}

func (u as) open(path string, flags int, mode uint32, fd string) Op {
	o := u.op(Open, path)
	o.Flags, o.Mode, o.FD = flags, mode, fd
	return o
}
func (u as) create(path string, mode uint32, fd string) Op {
	return u.open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC, mode, fd)
}
func (u as) fdOp(c Call, fd string) Op { o := u.op(c, ""); o.FD = fd; return o }
func (u as) close(fd string) Op        { return u.fdOp(Close, fd) }
func (u as) fstat(fd string) Op        { return u.fdOp(Fstat, fd) }
func (u as) fsync(fd string) Op        { return u.fdOp(Fsync, fd) }
func (u as) pwrite(fd string, off, n int64, seed uint64) Op {
	o := u.fdOp(Pwrite, fd)
	o.Off, o.Len, o.Seed = off, n, seed
	return o
}
func (u as) pread(fd string, off, n int64) Op {
	o := u.fdOp(Pread, fd)
	o.Off, o.Len = off, n
	return o
}
func (u as) ftruncate(fd string, size int64) Op { o := u.fdOp(Ftruncate, fd); o.Len = size; return o }
func (u as) truncate(path string, size int64) Op {
	o := u.op(Truncate, path)
	o.Len = size
	return o
}
func (u as) stat(path string) Op     { return u.op(Stat, path) }
func (u as) lstat(path string) Op    { return u.op(Lstat, path) }
func (u as) readfile(path string) Op { return u.op(ReadFile, path) }
func (u as) readdir(path string) Op  { return u.op(Readdir, path) }
func (u as) unlink(path string) Op   { return u.op(Unlink, path) }
func (u as) rmdir(path string) Op    { return u.op(Rmdir, path) }
func (u as) readlink(path string) Op { return u.op(Readlink, path) }
func (u as) chdir(path string) Op    { return u.op(Chdir, path) }
func (u as) chmod(path string, mode uint32) Op {
	o := u.op(Chmod, path)
	o.Mode = mode
	return o
}
func (u as) mkdir(path string, mode uint32) Op  { o := u.op(Mkdir, path); o.Mode = mode; return o }
func (u as) mkfifo(path string, mode uint32) Op { o := u.op(Mkfifo, path); o.Mode = mode; return o }
func (u as) chown(path string, uid, gid int) Op {
	o := u.op(Chown, path)
	o.UID, o.GID = uid, gid
	return o
}
func (u as) utimes(path string, atime, mtime int64) Op {
	o := u.op(Utimes, path)
	o.Atime, o.Mtime = atime, mtime
	return o
}
func (u as) touch(path string) Op { o := u.op(Utimes, path); o.Now = true; return o }
func (u as) rename(from, to string) Op {
	o := u.op(Rename, from)
	o.Path2 = to
	return o
}
func (u as) link(from, to string) Op { o := u.op(Link, from); o.Path2 = to; return o }
func (u as) symlink(path, target string) Op {
	o := u.op(Symlink, path)
	o.Path2 = target
	return o
}
func (u as) access(path string, mode int) Op { o := u.op(Access, path); o.Flags = mode; return o }

const (
	root  as = "root"
	alice as = "alice"
	bob   as = "bob"
)

// Cases are the scripted cases: one for each behaviour the client must get
// right, then a general one, then those of POSIX ACLs (acl.go).
func Cases() []Case {
	return append([]Case{
		{"hole below a queued write", []Op{
			alice.create("f", 0o644, "w"),
			alice.pwrite("w", 0xbb90, 0x15bb, 1),
			alice.pread("w", 0, 0xd14b),
			alice.fstat("w"),
			alice.fsync("w"),
			alice.close("w"),
			alice.stat("f"),
			alice.readfile("f"),
			alice.create("g", 0o644, "w"),
			alice.pwrite("w", 1<<20, 100, 2),
			alice.pread("w", 4096, 8192),
			alice.ftruncate("w", 3<<20),
			alice.pread("w", 2<<20, 4096),
			alice.close("w"),
			alice.readfile("g"),
		}},
		{"access cache after chmod and chown", []Op{
			alice.create("f", 0o666, "w"),
			alice.close("w"),
			alice.open("f", unix.O_WRONLY, 0, "w"),
			alice.close("w"),
			alice.chmod("f", 0o477),
			alice.open("f", unix.O_WRONLY, 0, "w"),
			alice.open("f", unix.O_RDONLY, 0, "r"),
			alice.close("r"),
			alice.chmod("f", 0o677),
			alice.open("f", unix.O_WRONLY, 0, "w"),
			alice.close("w"),
			bob.open("f", unix.O_WRONLY, 0, "b"),
			bob.close("b"),
			alice.chmod("f", 0o604),
			bob.open("f", unix.O_WRONLY, 0, "b"),
			alice.chown("f", -1, 3000),
			alice.chmod("f", 0o460),
			bob.open("f", unix.O_WRONLY, 0, "b"),
			bob.close("b"),
			bob.access("f", unix.W_OK),
			bob.access("f", unix.R_OK),
			alice.access("f", unix.W_OK),
			alice.stat("f"),
		}},
		{"truncate without write permission", []Op{
			alice.create("f", 0o644, "w"),
			alice.pwrite("w", 0, 5000, 3),
			alice.close("w"),
			alice.chmod("f", 0o444),
			alice.truncate("f", 0),
			alice.stat("f"),
			alice.chmod("f", 0o477),
			alice.open("f", unix.O_RDONLY|unix.O_TRUNC, 0, "r"),
			alice.stat("f"),
			alice.open("f", unix.O_RDONLY, 0, "r"),
			alice.ftruncate("r", 0),
			alice.close("r"),
			bob.truncate("f", 0),
			alice.chmod("f", 0o644),
			alice.truncate("f", 10),
			alice.stat("f"),
			root.chmod("f", 0o400),
			root.truncate("f", 1),
			root.stat("f"),
			alice.readfile("f"),
		}},
		{"write by a non-owner to a setuid file", []Op{
			root.create("f", 0o755, "w"),
			root.close("w"),
			root.chmod("f", 0o6777),
			root.stat("f"),
			alice.open("f", unix.O_WRONLY, 0, "w"),
			alice.pwrite("w", 0, 10, 4),
			alice.close("w"),
			alice.stat("f"),
			root.chmod("f", 0o6777),
			root.pwrite("w", 0, 1, 5), // EBADF: closed
			root.open("f", unix.O_WRONLY, 0, "w"),
			root.pwrite("w", 0, 10, 5),
			root.close("w"),
			root.stat("f"),
			alice.create("g", 0o755, "w"),
			alice.close("w"),
			alice.chmod("g", 0o4755),
			alice.open("g", unix.O_WRONLY, 0, "w"),
			alice.pwrite("w", 0, 10, 6),
			alice.close("w"),
			alice.stat("g"),
		}},
		{"links after rename and unlink", []Op{
			alice.create("a", 0o644, "w"),
			alice.close("w"),
			alice.link("a", "b"),
			alice.stat("a"),
			alice.create("c", 0o644, "w"),
			alice.close("w"),
			alice.rename("c", "b"),
			alice.stat("a"),
			alice.link("a", "d"),
			alice.stat("a"),
			alice.unlink("d"),
			alice.stat("a"),
			alice.mkdir("sub", 0o755),
			alice.link("a", "sub/x"),
			alice.stat("sub/x"),
			alice.unlink("sub/x"),
			alice.stat("a"),
			alice.link("a", "sub/y"),
			alice.stat("sub/y"),
			alice.rename("b", "sub/y"),
			alice.stat("a"),
			alice.stat("sub/y"),
		}},
		{"times beyond 32 bits", []Op{
			alice.create("f", 0o644, "w"),
			alice.close("w"),
			alice.utimes("f", 1<<32, 1<<32),
			alice.stat("f"),
			alice.utimes("f", 1<<40, 1<<33+5),
			alice.stat("f"),
			alice.utimes("f", -1, -100),
			alice.stat("f"),
			alice.utimes("f", 1000000000, 1234567890),
			alice.stat("f"),
			alice.utimes("f", 4294967295, 4294967294),
			alice.stat("f"),
		}},
		{"search permission on every directory of a path", SearchPermission()},
		{"special files check permissions", []Op{
			alice.mkfifo("p", 0o600),
			bob.open("p", unix.O_RDWR, 0, "b"),
			bob.open("p", unix.O_RDONLY|unix.O_NONBLOCK, 0, "b"),
			alice.open("p", unix.O_RDONLY|unix.O_NONBLOCK, 0, "a"),
			alice.close("a"),
			alice.open("p", unix.O_RDWR, 0, "a"),
			alice.close("a"),
			alice.mkfifo("q", 0o666),
			bob.open("q", unix.O_RDONLY|unix.O_NONBLOCK, 0, "b"),
			bob.close("b"),
			alice.chmod("q", 0o640),
			bob.open("q", unix.O_RDWR, 0, "b"),
			root.open("p", unix.O_RDWR, 0, "r"),
			root.close("r"),
			alice.stat("p"),
		}},
		{"ordinary operations", []Op{
			alice.mkdir("d", 0o755),
			alice.mkdir("d", 0o755),
			alice.create("d/f", 0o640, "w"),
			alice.pwrite("w", 0, 3000, 7),
			alice.close("w"),
			alice.rmdir("d"),
			alice.rename("d", "e"),
			alice.stat("e/f"),
			alice.symlink("l", "e/f"),
			alice.readlink("l"),
			alice.lstat("l"),
			alice.readfile("l"),
			alice.readdir("."),
			alice.readdir("e"),
			bob.readfile("e/f"),
			bob.unlink("e/f"),
			bob.create("e/g", 0o644, "b"),
			alice.chown("e/f", 2002, -1),
			alice.chown("e/f", -1, 3000),
			alice.chown("e/f", -1, 2002),
			root.chown("e/f", 2002, 2002),
			bob.stat("e/f"),
			alice.touch("e/f"),
			bob.touch("e/f"),
			alice.chmod(".", 0o1777),
			bob.create("bobs", 0o644, "b"),
			bob.close("b"),
			alice.unlink("bobs"),
			alice.rename("e", "bobs"),
			bob.unlink("bobs"),
			alice.stat("e"),
			alice.unlink("e/f"),
			alice.rmdir("e"),
			alice.readdir("."),
		}},
	}, aclCases()...)
}

// SearchPermission is the script of a directory whose owner takes away
// search (execute) permission while names under it are cached: every call
// by alice and bob that walks a path through it must fail, until she gives
// it back.
func SearchPermission() []Op {
	ops := []Op{
		alice.mkdir("d", 0o755),
		alice.create("d/f", 0o666, "w"),
		alice.pwrite("w", 0, 100, 8),
		alice.close("w"),
		alice.symlink("d/l", "f"),
		alice.mkdir("d/s", 0o777),
		alice.stat("d/f"),
		bob.stat("d/f"),
		alice.readfile("d/f"),
		bob.readfile("d/f"),
		alice.chmod("d", 0o644),
	}
	for _, u := range []as{alice, bob} {
		ops = append(ops,
			u.stat("d/f"),
			u.chmod("d/f", 0o600),
			u.open("d/f", unix.O_RDONLY, 0, "r"),
			u.close("r"),
			u.truncate("d/f", 0),
			u.touch("d/f"),
			u.access("d/f", unix.R_OK),
			u.readlink("d/l"),
			u.chdir("d/s"),
			u.create("d/s/new", 0o644, "n"),
			u.close("n"),
			u.link("d/f", "h"),
			u.rename("d/f", "d/g"),
			u.unlink("d/f"),
			u.readdir("d"),
		)
	}
	// Root's capabilities pass where the others are stopped.
	ops = append(ops,
		root.stat("d/f"),
		root.open("d/f", unix.O_RDONLY, 0, "r"),
		root.close("r"),
		root.readlink("d/l"),
		root.chdir("d/s"),
	)
	return append(ops,
		alice.chmod("d", 0o755),
		alice.stat("d/f"),
		alice.readfile("d/f"),
		alice.readdir("d/s"),
	)
}

// Random returns a script of n operations of random users on a few names,
// decided by seed.
func Random(seed uint64, n int) Case {
	rng := rand.New(rand.NewPCG(seed, 0x6a09e667f3bcc909))
	users := []as{root, alice, bob}
	names := []string{"a", "b", "c", "d", "d/x", "d/y", "e"}
	modes := []uint32{0o600, 0o644, 0o666, 0o755, 0o700, 0o444, 0o477, 0o604, 0o640, 0o660, 0o711, 0o4755}
	name := func() string { return names[rng.IntN(len(names))] }
	var ops []Op
	for range n {
		u := users[rng.IntN(len(users))]
		fd := "fd-" + string(u)
		var op Op
		switch k := rng.IntN(100); {
		case k < 10:
			flags := []int{unix.O_RDONLY, unix.O_WRONLY, unix.O_RDWR, unix.O_RDWR | unix.O_CREAT, unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC, unix.O_RDWR | unix.O_CREAT | unix.O_EXCL}[rng.IntN(6)]
			op = u.open(name(), flags, modes[rng.IntN(len(modes))], fd)
		case k < 20:
			op = u.pwrite(fd, rng.Int64N(1<<20), 1+rng.Int64N(64<<10), rng.Uint64())
		case k < 30:
			op = u.pread(fd, rng.Int64N(1<<20), 1+rng.Int64N(128<<10))
		case k < 35:
			op = u.close(fd)
		case k < 38:
			op = u.fsync(fd)
		case k < 41:
			op = u.ftruncate(fd, rng.Int64N(2<<20))
		case k < 44:
			op = u.fstat(fd)
		case k < 54:
			op = u.stat(name())
		case k < 60:
			op = u.chmod(name(), modes[rng.IntN(len(modes))])
		case k < 63:
			op = u.truncate(name(), rng.Int64N(1<<20))
		case k < 67:
			op = u.rename(name(), name())
		case k < 70:
			op = u.link(name(), name())
		case k < 74:
			op = u.unlink(name())
		case k < 77:
			op = u.mkdir(name(), modes[rng.IntN(len(modes))]|0o100)
		case k < 79:
			op = u.rmdir(name())
		case k < 83:
			op = u.readdir([]string{".", "d"}[rng.IntN(2)])
		case k < 86:
			op = u.touch(name())
		case k < 89:
			op = u.access(name(), []int{unix.R_OK, unix.W_OK, unix.X_OK}[rng.IntN(3)])
		case k < 92:
			op = u.readfile(name())
		case k < 94:
			op = u.chown(name(), []int{-1, 0, 2001, 2002}[rng.IntN(4)], []int{-1, 2001, 2002, 3000}[rng.IntN(4)])
		case k < 96:
			op = u.symlink(name(), name())
		default:
			op = u.lstat(name())
		}
		ops = append(ops, op)
	}
	return Case{Name: fmt.Sprintf("random seed %d", seed), Ops: ops}
}
