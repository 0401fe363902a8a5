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

	"github.com/google/renameio/v2"
)

// WriteFile replaces path atomically: a reader (or a crash) sees the old
// content or the new, never half of it.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return renameio.WriteFile(path, data, perm)
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
	if err := os.Chmod(tmp.Name(), perm); err != nil {
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

// AppendJSONL appends one JSON line under an exclusive lock. A single
// write(2) of the whole line on an O_APPEND file keeps concurrent writers
// from interleaving. It does not fsync: logs tolerate a torn last line,
// and the state that must survive a crash is written with WriteFile.
func AppendJSONL(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return appendLine(path, b, false)
}

// AppendLine appends b plus a newline and fsyncs (records that must be on
// disk before the caller goes on, such as a task archive line). If the
// file ends in a torn line (a crash mid-write), a newline is added first so
// the new record stays whole.
func AppendLine(path string, b []byte) error { return appendLine(path, b, true) }

// AppendLog is AppendLine without the fsync, for human-readable logs.
func AppendLog(path string, b []byte) error { return appendLine(path, b, false) }

func appendLine(path string, b []byte, sync bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return err
	}
	defer unlockFile(f)
	buf := make([]byte, 0, len(b)+2)
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			buf = append(buf, '\n')
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

// ErrTornLine marks a last line that did not parse; ReadJSONL skips it.
var ErrTornLine = errors.New("torn last line")

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
	return ScanJSONL(path, f, fn)
}

// ScanJSONL is ReadJSONL over a reader.
func ScanJSONL(name string, r io.Reader, fn func(line int, raw []byte) error) error {
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
