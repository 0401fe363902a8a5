package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
)

func lockFile(f *os.File) error   { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

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
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
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
	if f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
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
	fl := flock.New(path)
	if err := fl.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer fl.Unlock()
	return fn()
}

// IsLocked reports whether err is a lock conflict.
func IsLocked(err error) bool {
	var e *ErrLocked
	return errors.As(err, &e)
}
