//go:build !linux

package git

import (
	"io/fs"
	"time"
)

// ChangeTime is fi's modification time where ralph does not read the
// inode change time: a process can set it back, so the set-aside check is
// weaker there (README, "The harness owns done").
func ChangeTime(fi fs.FileInfo) time.Time { return fi.ModTime() }
