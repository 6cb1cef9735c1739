package fs

import (
	"hash/fnv"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/rdmafs/rdmafs/nfs3"
)

// object is one file on the server, named by its file handle. go-fuse may
// hold several nodes for one file (a lookup racing another, a hard link
// found through another directory); they share one object, so its
// attributes, write-behind data and open count are one.
type object struct {
	fh     nfs3.FH
	fileID uint64
	typ    nfs3.FileType

	mu          sync.Mutex
	attr        nfs3.Fattr
	attrExpires time.Time     // attr is fresh until then
	attrTimeo   time.Duration // current adaptive timeout
	attrGen     uint64        // FS.attrGen when attr was last set
	// The attributes the kernel's cached data was valid for, to decide
	// at open whether to drop it (datacache.go).
	dataAttr  nfs3.Fattr
	dataValid bool
	dataStale bool // changed while open for writing: drop at the next first open
	access    accessCache
	acls      aclCache // acl.go; cleared with access
	// kernelSize is the size the kernel was last told.
	kernelSize int64
	opens      int           // open file handles
	writers    int           // of them, open for writing
	closed     int           // of them, closed by their program (FLUSH) with no I/O since
	lastClose  chan struct{} // closed when opens drops to 0, if someone waits
	silly      *silly        // set when unlinked while open
	wb         *writeback
	// plusNames counts the names READDIRPLUS gave the kernel for it
	// (dircache.go); its table's total drops them when it goes.
	plusNames *atomic.Int64
}

// objectTable finds the object of a handle while any node uses it.
type objectTable struct {
	mu sync.Mutex
	m  map[nfs3.FH]weak.Pointer[object]
	// plusNames is the names READDIRPLUS gave the kernel for the
	// table's objects, while they live.
	plusNames atomic.Int64
}

// get returns the object for fh, creating it with attr if there is none.
func (t *objectTable) get(fh nfs3.FH, attr *nfs3.Fattr) (obj *object, created bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[nfs3.FH]weak.Pointer[object])
	}
	if wp, ok := t.m[fh]; ok {
		if obj := wp.Value(); obj != nil {
			return obj, false
		}
	}
	obj = &object{fh: fh, fileID: attr.FileID, typ: attr.Type, plusNames: new(atomic.Int64)}
	wp := weak.Make(obj)
	t.m[fh] = wp
	runtime.AddCleanup(obj, t.forget, cleanupArg{fh, wp, obj.plusNames})
	return obj, true
}

// addPlusName records a name READDIRPLUS gave the kernel for obj.
func (t *objectTable) addPlusName(obj *object) {
	obj.plusNames.Add(1)
	t.plusNames.Add(1)
}

// count returns the number of objects in the table: those of live nodes,
// and of nodes gone whose memory the garbage collector has not yet freed.
func (t *objectTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

type cleanupArg struct {
	fh        nfs3.FH
	wp        weak.Pointer[object]
	plusNames *atomic.Int64
}

// forget drops the table entry of a collected object, unless the handle
// already names a newer one, and the names READDIRPLUS gave it: go-fuse
// drops an inode's names with it.
func (t *objectTable) forget(arg cleanupArg) {
	t.plusNames.Add(-arg.plusNames.Load())
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[arg.fh] == arg.wp {
		delete(t.m, arg.fh)
	}
}

// generation derives go-fuse's inode generation from the handle, so that a
// new file that got the file id of a deleted one is a new node.
func generation(fh *nfs3.FH) uint64 {
	h := fnv.New64a()
	h.Write(fh.Bytes())
	return h.Sum64()
}
