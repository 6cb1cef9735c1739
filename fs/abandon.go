package fs

import (
	"path"
	"sort"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// What a daemon whose mount is gone reports before it exits: the files
// whose written data the server has not committed, and how much of it.

// Unwritten is a file holding data written through the mount that the
// server has not made durable: not sent yet, or sent UNSTABLE and not
// committed.
type Unwritten struct {
	// Path is where the file was last seen, relative to the mount's
	// root ("" if the file system no longer knows a name of it).
	Path   string
	FileID uint64
	Bytes  int64
}

// Unwritten lists the files that hold data the server has not committed,
// largest first.
func (f *FS) Unwritten() []Unwritten {
	held := make(map[*object]int64)
	for wb, n := range f.dirty.holdings() {
		if n > 0 {
			held[wb.obj] += n
		}
	}
	if len(held) == 0 {
		return nil
	}
	names := f.pathsOf(held)
	list := make([]Unwritten, 0, len(held))
	for obj, n := range held {
		list = append(list, Unwritten{Path: names[obj], FileID: obj.fileID, Bytes: n})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Bytes != list[j].Bytes {
			return list[i].Bytes > list[j].Bytes
		}
		return list[i].FileID < list[j].FileID
	})
	return list
}

// pathsOf finds a name of each object of want in the tree of nodes the
// kernel knew, by a walk from the root.
func (f *FS) pathsOf(want map[*object]int64) map[*object]string {
	found := make(map[*object]string, len(want))
	type item struct {
		ino  *gofs.Inode
		path string
	}
	seen := map[*gofs.Inode]bool{}
	queue := []item{{&f.root.Inode, "/"}}
	for len(queue) > 0 && len(found) < len(want) {
		it := queue[0]
		queue = queue[1:]
		if seen[it.ino] {
			continue
		}
		seen[it.ino] = true
		if n, ok := it.ino.Operations().(*node); ok {
			if _, ok := want[n.obj]; ok {
				if _, done := found[n.obj]; !done {
					found[n.obj] = it.path
				}
			}
		}
		for name, child := range it.ino.Children() {
			queue = append(queue, item{child, path.Join(it.path, name)})
		}
	}
	return found
}
