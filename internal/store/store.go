// Package store is the one place where ralph writes state to disk: atomic
// whole-file writes (temp + fsync + rename), append-only JSONL logs that
// tolerate a torn last line, and file locks that say who holds them.
package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/renameio/v2"
)

// WriteFile replaces path atomically: a reader (or a crash) sees the old
// content or the new, never half of it.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	guard(path)
	return renameio.WriteFile(path, data, ownPerm(path, perm))
}

// ownPerm is perm, except for files in ralph's own folder (.ralph):
// those are its owner's only (state, logs, transcripts hold what agents
// printed).
func ownPerm(path string, perm os.FileMode) os.FileMode {
	for dir := filepath.Dir(path); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if filepath.Base(dir) == ".ralph" {
			return perm &^ 0o077
		}
	}
	return perm
}

// WriteJSON marshals v with two-space indent and writes it atomically.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(path, append(b, '\n'), 0o644)
}

// WriteFileNoSync is WriteFile without the fsync: the rename still makes
// it atomic for readers and against a crash of the writing process.
func WriteFileNoSync(path string, data []byte, perm os.FileMode) error {
	guard(path)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), ownPerm(path, perm)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadJSON reads path into v. A missing file is reported with os.ErrNotExist
// so callers can treat it as "no state yet".
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// AppendJSONL appends one JSON line under an exclusive lock (a new file is
// owner-only: it is one of ralph's logs). A single
// write(2) of the whole line on an O_APPEND file keeps concurrent writers
// from interleaving. It does not fsync: logs tolerate a torn last line,
// and the state that must survive a crash is written with WriteFile. A
// torn last line is repaired first (see AppendLine).
func AppendJSONL(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return appendLine(path, b, false, true, 0o600)
}

// AppendLine appends JSON lines b plus a newline and fsyncs (records that
// must be on disk before the caller goes on, such as a task archive line).
// A file that ends in a torn line (a crash mid-write) is repaired first, so
// that no bad line is ever left in the middle of the file: a fragment that
// is whole JSON only lacked its newline and keeps it; any other fragment is
// an unfinished record and is cut off.
func AppendLine(path string, b []byte) error { return appendLine(path, b, true, true, 0o644) }

// AppendLog appends text without the fsync, for human-readable logs; a
// last line without its newline gets one first.
func AppendLog(path string, b []byte) error { return appendLine(path, b, false, false, 0o644) }

// appendLine appends under a lock; perm applies when the file is created
// (AppendJSONL writes ralph's own event logs: owner-only).
func appendLine(path string, b []byte, sync, jsonl bool, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := OpenOwn(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, ownPerm(path, perm))
	if err != nil {
		return err
	}
	defer f.Close()
	// Lock the descriptor just opened, not the path again: the path may be
	// swapped for a link meanwhile (flock(2), as gofrs/flock uses; closing
	// f releases it).
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	buf := make([]byte, 0, len(b)+2)
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			cut := int64(-1)
			if jsonl {
				if cut, err = tornFragment(f, st.Size()); err != nil {
					return err
				}
			}
			if cut >= 0 {
				if err := f.Truncate(cut); err != nil {
					return err
				}
			} else {
				buf = append(buf, '\n')
			}
		}
	}
	buf = append(buf, b...)
	buf = append(buf, '\n')
	if _, err := f.Write(buf); err != nil {
		return err
	}
	if sync {
		return f.Sync()
	}
	return nil
}

// tornFragment finds the last line of a file of size bytes that does not
// end in a newline: the offset it starts at when it is not whole JSON (to
// be cut off), or -1 when it is.
func tornFragment(f *os.File, size int64) (int64, error) {
	const chunk = 64 << 10
	start := int64(0)
	for end := size; end > 0; end -= chunk {
		off := max(0, end-chunk)
		b := make([]byte, end-off)
		if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			start = off + int64(i) + 1
			break
		}
	}
	frag := make([]byte, size-start)
	if _, err := f.ReadAt(frag, start); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if json.Valid(bytes.TrimSpace(frag)) {
		return -1, nil
	}
	return start, nil
}

// errTornLine marks a last line that did not parse; ReadJSONL skips it.
var errTornLine = errors.New("torn last line")

// ReadJSONL calls fn for every line of path. A last line that is not valid
// JSON (a crash mid-append) is skipped; a bad line elsewhere is an error
// naming file and line. A missing file reads as empty.
func ReadJSONL(path string, fn func(line int, raw []byte) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return scanJSONL(path, f, fn)
}

// scanJSONL is ReadJSONL over a reader.
func scanJSONL(name string, r io.Reader, fn func(line int, raw []byte) error) error {
	br := bufio.NewReaderSize(r, 64*1024)
	n := 0
	var pending []byte
	pendingLine := 0
	flush := func() error {
		if pending == nil {
			return nil
		}
		p := pending
		pending = nil
		if !json.Valid(p) {
			return fmt.Errorf("%s:%d: invalid JSON line", name, pendingLine)
		}
		return fn(pendingLine, p)
	}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			complete := line[len(line)-1] == '\n'
			line = bytes.TrimSpace(line)
			n++
			if len(line) > 0 {
				if err := flush(); err != nil {
					return err
				}
				if !complete {
					// last line without newline: valid JSON counts, a torn one is skipped
					if json.Valid(line) {
						return fn(n, line)
					}
					return nil
				}
				pending = append([]byte(nil), line...)
				pendingLine = n
			}
		}
		if err == io.EOF {
			if pending != nil && !json.Valid(pending) {
				return nil // torn last line that happened to end in \n
			}
			return flush()
		}
		if err != nil {
			return err
		}
	}
}

// ErrTooLarge is the error of ReadFileLimit for a file over its limit.
var ErrTooLarge = errors.New("larger than ralph reads")

// ReadFileLimit reads a file an agent or a gate wrote, at most max
// bytes: a larger one (a sparse file of terabytes costs its writer
// nothing) returns its first max bytes and an error wrapping
// ErrTooLarge that names the file and the limit.
func ReadFileLimit(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return b[:max], fmt.Errorf("%s: %w (%d bytes)", path, ErrTooLarge, max)
	}
	return b, nil
}
