package tasks

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
)

// watcher tells whether anything touched the task files since it was last
// asked: an inotify watch on their folder (writes, renames onto them,
// removals, changes of attributes). The kernel queues the events of a
// write before the write returns, so a file the watch saw nothing touch is
// as it was. It is used only on local file systems, where every writer
// goes through this kernel; a writer through a shared memory mapping
// would not be seen, and none of the tools that edit these files is one.
type watcher struct {
	fd    int
	dir   int32           // the folder's watch: renames onto the files, removals
	names map[string]uint // the files' names in it: the file's bit
	paths []string
	files map[int32]uint // the files' own watches (a write through any link to them): the file's bit
	buf   []byte
}

const watchMask = syscall.IN_MODIFY | syscall.IN_ATTRIB | syscall.IN_CLOSE_WRITE | syscall.IN_CREATE |
	syscall.IN_DELETE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF

// Local file systems (statfs magic numbers): ext4, tmpfs, xfs, btrfs.
var watchable = map[int64]bool{0xEF53: true, 0x01021994: true, 0x58465342: true, 0x9123683E: true}

// newWatcher watches the files paths (in one folder); nil when it cannot
// (another file system, no inotify instance left).
func newWatcher(paths ...string) *watcher {
	dir := filepath.Dir(paths[0])
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil || !watchable[int64(st.Type)] {
		return nil
	}
	for _, p := range append([]string{dir}, paths...) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil // writes to the target would be reported elsewhere
		}
	}
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	wd, err := syscall.InotifyAddWatch(fd, dir, watchMask|syscall.IN_DONT_FOLLOW)
	if err != nil {
		syscall.Close(fd)
		return nil
	}
	w := &watcher{fd: fd, dir: int32(wd), names: map[string]uint{}, paths: paths, buf: make([]byte, 64<<10)}
	for i, p := range paths {
		w.names[filepath.Base(p)] |= 1 << i
	}
	w.watchFiles()
	return w
}

// watchFiles watches the files as they are now (a rename puts another
// file in their place): a write reaches a file's own watch through any
// link to it, the folder's only through the folder.
func (w *watcher) watchFiles() {
	w.files = map[int32]uint{}
	for i, p := range w.paths {
		if wd, err := syscall.InotifyAddWatch(w.fd, p, watchMask|syscall.IN_DONT_FOLLOW); err == nil {
			w.files[int32(wd)] |= 1 << i // one file under two names: both bits
		}
	}
}

// touched reads the events queued since the last call and reports which
// of the files they could have changed: bit i for paths[i]. An overflowed
// queue, a watch gone or a read error mark them all; so does a nil
// watcher, which has seen nothing.
func (w *watcher) touched() uint {
	if w == nil {
		return allFiles
	}
	var hit uint
	for {
		n, err := syscall.Read(w.fd, w.buf)
		if err == syscall.EAGAIN {
			return hit
		}
		if err != nil || n <= 0 {
			return allFiles
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(w.buf[off:]))
			mask := binary.NativeEndian.Uint32(w.buf[off+4:])
			size := int(binary.NativeEndian.Uint32(w.buf[off+12:]))
			name := w.buf[off+syscall.SizeofInotifyEvent : min(n, off+syscall.SizeofInotifyEvent+size)]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			switch {
			case mask&syscall.IN_Q_OVERFLOW != 0:
				hit = allFiles
			case w.files[wd] != 0:
				hit |= w.files[wd]
			case wd == w.dir:
				hit |= w.names[string(name)]
				if mask&(syscall.IN_IGNORED|syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF) != 0 {
					hit = allFiles
				}
			}
			off += syscall.SizeofInotifyEvent + size
		}
	}
}

func (w *watcher) close() {
	if w != nil {
		syscall.Close(w.fd)
	}
}
