package git

import (
	"io/fs"
	"syscall"
	"time"
)

// ChangeTime is fi's inode change time: set by the kernel on every write,
// rename, link or chmod, never by a process (utimes sets only the others).
func ChangeTime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime()
}
