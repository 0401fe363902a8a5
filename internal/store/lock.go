package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
)

// Holder is who holds a run lock, written inside the lock file so a second
// process can say who is in the way.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Host    string    `json:"host"`
	Since   time.Time `json:"since"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d (%s) since %s", h.PID, h.Command, h.Since.Format(time.RFC3339))
}

// ErrLocked is returned by TryLock when another process holds the lock.
type ErrLocked struct {
	Path   string
	Holder Holder
}

func (e *ErrLocked) Error() string {
	if e.Holder.PID == 0 {
		return fmt.Sprintf("%s is locked by another process", e.Path)
	}
	return fmt.Sprintf("another ralph holds %s: %s", e.Path, e.Holder)
}

// RunLock is an exclusive, non-blocking lock (flock: released by the kernel
// when the process dies, so kill -9 never leaves a stale lock).
type RunLock struct {
	fl   *flock.Flock
	path string
}

// TryLock takes the lock at path or returns *ErrLocked naming the holder.
func TryLock(path string) (*RunLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	guard(path)
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		return nil, err
	}
	if !ok {
		var h Holder
		if b, err := os.ReadFile(path); err == nil {
			_ = json.Unmarshal(b, &h)
		}
		return nil, &ErrLocked{Path: path, Holder: h}
	}
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Command: strings.Join(os.Args, " "), Host: host, Since: time.Now().UTC()}
	b, _ := json.Marshal(h)
	// Write through the locked descriptor's path: truncating in place keeps
	// the inode (and so the lock) the same.
	if f, err := OpenOwn(path, os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
		_, _ = f.Write(b)
		_ = f.Close()
	}
	return &RunLock{fl: fl, path: path}, nil
}

// Unlock releases the lock.
func (l *RunLock) Unlock() error {
	if l == nil {
		return nil
	}
	if f, err := OpenOwn(l.path, os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
		_ = f.Close()
	}
	return l.fl.Unlock()
}

// WithLock runs fn while holding a blocking exclusive lock on path (for
// short read-modify-write cycles of shared files such as tasks.jsonl).
func WithLock(path string, fn func() error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	guard(path)
	fl := flock.New(path)
	if err := fl.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer fl.Unlock()
	return fn()
}

// Held reports whether some process holds the run lock at path, and who,
// without taking the lock: a read-only command asking must never make a
// `ralph run` that starts at the same moment find the lock taken. The
// holder's pid and command are read from the lock file. On Linux the
// kernel's lock table (/proc/locks) says whether a flock is really held on
// the file, and by which pid — the file may still name a holder that was
// killed with -9; elsewhere the named holder must be a live process.
func Held(path string) (bool, Holder) {
	var h Holder
	b, err := os.ReadFile(path)
	if err != nil {
		return false, h
	}
	_ = json.Unmarshal(b, &h)
	if pid, known := flockHolder(path); known {
		if pid == 0 {
			return false, Holder{}
		}
		if h.PID != pid {
			h = Holder{PID: pid}
		}
		return true, h
	}
	if h.PID <= 0 {
		return false, Holder{}
	}
	if err := syscall.Kill(h.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false, Holder{}
	}
	return true, h
}

// flockHolder looks path's inode up in /proc/locks: the pid holding a
// flock on it (0 for none), and whether the table could be read at all.
func flockHolder(path string) (int, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, false
	}
	table, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, false
	}
	// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF": the device as
	// hex major:minor, then the inode in decimal.
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	id := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != id {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err == nil {
			return pid, true
		}
	}
	return 0, true
}
