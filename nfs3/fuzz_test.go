package nfs3

import (
	"context"
	"testing"
	"time"
)

// FuzzReplies feeds arbitrary results to the decoder of every procedure,
// with the bytes as the reply body and, for RPC-over-RDMA, optionally also
// as a placed payload. No reply may panic a decoder, and what a decoder
// accepts must respect the limits the call set.
func FuzzReplies(f *testing.F) {
	f.Add(uint8(ProcRead), readReply(5, true, []byte("abcde")), false)
	f.Add(uint8(ProcRead), readReply(5, true, []byte("abcde")), true)
	f.Add(uint8(ProcGetattr), []byte{0, 0, 0, 0, 0, 0, 0, 1}, false)
	f.Add(uint8(ProcReaddirplus), []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1}, false)
	f.Add(uint8(ProcLookup), []byte{0, 0, 0, 0, 0, 0, 0, 2, 1, 2, 0, 0}, false)
	f.Fuzz(func(t *testing.T, proc uint8, body []byte, placed bool) {
		var payload []byte
		if placed {
			payload = body
		}
		c, _ := newCannedClientWith(ClientConfig{JukeboxDelay: time.Millisecond}, body, payload)
		// A server that answers NFS3ERR_JUKEBOX forever keeps a call
		// waiting until its context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		fh := testFH
		var a Fattr
		var w Wcc
		var cr CreateResult
		switch proc % 23 {
		case ProcNull:
			_ = c.Null(ctx)
		case ProcGetattr:
			_ = c.Getattr(ctx, nil, &fh, &a)
		case ProcSetattr:
			_ = c.Setattr(ctx, nil, &fh, &Sattr{}, nil, &w)
		case ProcLookup:
			var res LookupResult
			if err := c.Lookup(ctx, nil, &fh, "x", &res); err == nil && res.FH.IsZero() {
				t.Fatal("LOOKUP accepted an empty handle")
			}
		case ProcAccess:
			granted, _, err := c.Access(ctx, nil, &fh, AccessRead, &a)
			if err == nil && granted&^AccessRead != 0 {
				t.Fatalf("ACCESS granted bits not asked for: %#x", granted)
			}
		case ProcReadlink:
			if s, err := c.Readlink(ctx, nil, &fh); err == nil && len(s) > MaxPathLen {
				t.Fatalf("READLINK target of %d bytes", len(s))
			}
		case ProcRead:
			var res ReadResult
			if err := c.Read(ctx, nil, &fh, 0, 16, &res); err == nil && len(res.Data) > 16 {
				t.Fatalf("READ returned %d bytes for a count of 16", len(res.Data))
			}
			res.Release()
		case ProcWrite:
			var res WriteResult
			if err := c.Write(ctx, nil, &fh, 0, []byte("0123456789"), Unstable, &res); err == nil && res.Count > 10 {
				t.Fatalf("WRITE count %d", res.Count)
			}
		case ProcCreate:
			_ = c.Create(ctx, nil, &fh, "x", Guarded, &Sattr{}, Verf{}, &cr)
		case ProcMkdir:
			_ = c.Mkdir(ctx, nil, &fh, "x", &Sattr{}, &cr)
		case ProcSymlink:
			_ = c.Symlink(ctx, nil, &fh, "x", "y", &Sattr{}, &cr)
		case ProcMknod:
			_ = c.Mknod(ctx, nil, &fh, "x", TypeChr, &Sattr{}, [2]uint32{1, 2}, &cr)
		case ProcRemove:
			_ = c.Remove(ctx, nil, &fh, "x", &w)
		case ProcRmdir:
			_ = c.Rmdir(ctx, nil, &fh, "x", &w)
		case ProcRename:
			var w2 Wcc
			_ = c.Rename(ctx, nil, &fh, "x", &fh, "y", &w, &w2)
		case ProcLink:
			_, _ = c.Link(ctx, nil, &fh, &fh, "x", &a, &w)
		case ProcReaddir, ProcReaddirplus:
			check := func(e *DirEntry) {
				if len(e.Name) == 0 || len(e.Name) > MaxNameLen {
					t.Fatalf("entry name of %d bytes", len(e.Name))
				}
			}
			if proc%24 == ProcReaddir {
				_, _ = c.Readdir(ctx, nil, &fh, 0, Verf{}, 4096, check)
			} else {
				_, _ = c.Readdirplus(ctx, nil, &fh, 0, Verf{}, 4096, 32768, check)
			}
		case ProcFsstat:
			_, _ = c.Fsstat(ctx, nil, &fh)
		case ProcFsinfo:
			_, _ = c.Fsinfo(ctx, nil, &fh)
		case ProcPathconf:
			_, _ = c.Pathconf(ctx, nil, &fh)
		case ProcCommit:
			_, _ = c.Commit(ctx, nil, &fh, 0, 0, &w)
		case 22:
			m := &MountClient{rpc: c.rpc}
			_, _, _ = m.Mnt(ctx, nil, "/")
		}
	})
}
