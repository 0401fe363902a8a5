//go:build linux

package judge

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
)

// changes notices writes under the folders given to the judge's
// checkouts (inotify): a watch on each of their directories reports a
// file written, closed after it was opened for writing, created, removed
// or moved there, and a change of an entry's mode, owner, times or
// links. A folder with no event since it was watched is as it was then,
// which a walk of it (manifest) would only confirm: judging costs no
// walk of a 50,000-file node_modules unless something touched it, and a
// folder touched is copied afresh, even where a walk would find nothing
// (a file written back to its size and time). Not seen: a write through a
// hard link made outside the folder (in the rest of the checkout, during
// the same judging), which a walk sees only when the write changed a
// size or time. One
// inotify instance per Env (a user has few of them); nil where there is
// none, and a folder that could not be watched whole (the user's limit
// of watches) is walked each time, as without.
type changes struct {
	mu      sync.Mutex
	fd      int
	wds     map[int32]string // a watch → the folder it is under
	armed   map[string]bool  // folders watched whole, with no event since
	touched map[string]bool  // folders watched whole, with an event since
}

// watchMask: everything that changes what a walk of the folder (or a
// read of its files) would find. Reads, opens for reading and access
// times are not in it.
const watchMask = syscall.IN_MODIFY | syscall.IN_ATTRIB | syscall.IN_CLOSE_WRITE | syscall.IN_CREATE |
	syscall.IN_DELETE | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF | syscall.IN_MOVED_FROM |
	syscall.IN_MOVED_TO | syscall.IN_DONT_FOLLOW | syscall.IN_ONLYDIR

func newChanges() *changes {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	c := &changes{fd: fd, wds: map[int32]string{}, armed: map[string]bool{}, touched: map[string]bool{}}
	runtime.SetFinalizer(c, (*changes).close)
	return c
}

// watch puts a watch on every directory under root (symbolic links not
// followed); it reports whether root is watched whole. Call it before the
// walk that confirms root's contents: a change after that is an event.
func (c *changes) watch(root string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(root)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		wd, err := syscall.InotifyAddWatch(c.fd, p, watchMask)
		if err != nil {
			return err
		}
		c.wds[int32(wd)] = root
		return nil
	})
	if err != nil {
		c.forgetLocked(root)
		return false
	}
	c.armed[root] = true
	return true
}

// state says whether root was watched whole since its last watch call,
// and whether anything happened under it since.
func (c *changes) state(root string) watchState {
	if c == nil {
		return unwatched
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drain()
	switch {
	case c.armed[root]:
		return untouched
	case c.touched[root]:
		return touched
	}
	return unwatched
}

// drain reads the events queued: each marks the folder it is under
// touched, and a lost event (the queue overflowed) every folder.
func (c *changes) drain() {
	var buf [64 << 10]byte
	for {
		n, err := syscall.Read(c.fd, buf[:])
		if err != nil || n <= 0 {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			size := binary.NativeEndian.Uint32(buf[off+12:])
			off += syscall.SizeofInotifyEvent + int(size)
			if mask&syscall.IN_Q_OVERFLOW != 0 {
				for root := range c.armed {
					c.touched[root] = true
				}
				clear(c.armed)
				continue
			}
			if root, ok := c.wds[wd]; ok && c.armed[root] {
				delete(c.armed, root)
				c.touched[root] = true
			}
		}
	}
}

// forget removes root's watches.
func (c *changes) forget(root string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(root)
}

func (c *changes) forgetLocked(root string) {
	for wd, r := range c.wds {
		if r == root {
			_, _ = syscall.InotifyRmWatch(c.fd, uint32(wd))
			delete(c.wds, wd)
		}
	}
	delete(c.armed, root)
	delete(c.touched, root)
}

// close ends the watching (every folder is walked again).
func (c *changes) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd >= 0 {
		_ = syscall.Close(c.fd)
		c.fd = -1
	}
	clear(c.wds)
	clear(c.armed)
	clear(c.touched)
}
