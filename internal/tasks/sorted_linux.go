package tasks

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// A file this package wrote (or fully checked) is sorted by id, which lets
// Store.Next stop at the first pending leaf. The fact is kept in an
// extended attribute naming the file's size, mtime and inode, so any
// other writer (an append, sed -i, an editor) invalidates it. Where xattrs
// are not supported Next simply reads the whole file.
const sortedAttr = "user.ralph.sorted"

func sortedStamp(fi os.FileInfo) string {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("v1 %d %d %d", fi.Size(), fi.ModTime().UnixNano(), ino)
}

// markSorted records that path, as it is now, is sorted.
func markSorted(path string) {
	if fi, err := os.Stat(path); err == nil {
		markSortedAs(path, fi)
	}
}

// markSortedAs records that the file with info fi is sorted; if path has
// been replaced since, the stamp will not match it and is ignored.
func markSortedAs(path string, fi os.FileInfo) {
	_ = syscall.Setxattr(path, sortedAttr, []byte(sortedStamp(fi)), 0)
}

// knownSorted reports whether the open file f carries a matching stamp.
func knownSorted(path string, f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	buf := make([]byte, 96)
	n, err := syscall.Getxattr(path, sortedAttr, buf)
	if err != nil || n <= 0 || n > len(buf) {
		return false
	}
	return string(buf[:n]) == sortedStamp(fi)
}

// unmarkSorted removes the mark (for tests and benchmarks).
func unmarkSorted(path string) { _ = syscall.Removexattr(path, sortedAttr) }

// validAttr marks a file this package wrote after validating it (a sorted
// mark alone may come from Next, which checks order, not content).
const validAttr = "user.ralph.valid"

func markValid(path string) {
	if fi, err := os.Stat(path); err == nil {
		_ = syscall.Setxattr(path, validAttr, []byte(sortedStamp(fi)), 0)
	}
}

// knownValid reports whether the open file f is as this package wrote it.
func knownValid(path string, f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	buf := make([]byte, 96)
	n, err := syscall.Getxattr(path, validAttr, buf)
	if err != nil || n <= 0 || n > len(buf) {
		return false
	}
	return string(buf[:n]) == sortedStamp(fi)
}

// doneAttr, on tasks.jsonl, is the stamp of tasks-done.jsonl ("none" when
// it does not exist) from when the two files were last known to agree: no
// task of tasks.jsonl in the archive. While the archive still matches it
// and tasks.jsonl its valid mark, that still holds, and a one-off `ralph
// task complete` need not read an archive that grows through the whole
// run to see that its task is not in it.
const doneAttr = "user.ralph.done"

func archiveStamp(done string) string {
	fi, err := os.Stat(done)
	if errors.Is(err, os.ErrNotExist) {
		return "none"
	}
	if err != nil {
		return ""
	}
	return sortedStamp(fi)
}

// markArchive records that the archive at done, as it is now, agrees with
// tasks.jsonl at active.
func markArchive(active, done string) {
	if st := archiveStamp(done); st != "" {
		_ = syscall.Setxattr(active, doneAttr, []byte(st), 0)
	}
}

// archiveAsMarked reports whether the archive is as markArchive last saw it.
func archiveAsMarked(active, done string) bool {
	buf := make([]byte, 96)
	n, err := syscall.Getxattr(active, doneAttr, buf)
	if err != nil || n <= 0 || n > len(buf) {
		return false
	}
	st := archiveStamp(done)
	return st != "" && string(buf[:n]) == st
}

// mapFile maps f read-only (no copy of a large file into the heap); writes
// through f's descriptor stay coherent with the mapping.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	if size == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = syscall.Munmap(b) }, nil
}
