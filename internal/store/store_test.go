package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestWriteJSONAtomicRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "state.json")
	if err := WriteJSON(p, map[string]int{"x": 1}); err != nil {
		t.Fatal(err)
	}
	var m map[string]int
	if err := ReadJSON(p, &m); err != nil || m["x"] != 1 {
		t.Fatal(m, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

func TestJSONLTornLastLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	for i := 0; i < 3; i++ {
		if err := AppendJSONL(p, map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"i":9`) // crash mid-append
	f.Close()
	var got []int
	read := func() {
		got = nil
		err := ReadJSONL(p, func(_ int, raw []byte) error {
			var m map[string]int
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			got = append(got, m["i"])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	read()
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	// The next append repairs the torn line first (the unfinished record
	// is cut off): nothing glues onto it, and no bad line is left mid-file.
	if err := AppendJSONL(p, map[string]int{"i": 3}); err != nil {
		t.Fatal(err)
	}
	read()
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("got %v after the repair", got)
	}
}

func TestJSONLBadMiddleLineNamesLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.jsonl")
	os.WriteFile(p, []byte("{}\nnot json\n{}\n"), 0o644)
	err := ReadJSONL(p, func(int, []byte) error { return nil })
	if err == nil || err.Error() != p+":2: invalid JSON line" {
		t.Fatalf("got %v", err)
	}
}

func TestConcurrentAppend(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.jsonl")
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := AppendJSONL(p, map[string]string{"pad": string(make([]byte, 300))}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	if err := ReadJSONL(p, func(int, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 400 {
		t.Fatalf("got %d lines", n)
	}
}

func TestTryLockNamesHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.lock")
	l, err := TryLock(p)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks are per open file description, so a second TryLock in
	// the same process conflicts just as another process would.
	_, err = TryLock(p)
	var e *ErrLocked
	if !errors.As(err, &e) {
		t.Fatalf("want ErrLocked, got %v", err)
	}
	if e.Holder.PID != os.Getpid() || !strings.Contains(e.Error(), "another ralph holds "+p+": pid ") {
		t.Fatalf("holder %+v: %v", e.Holder, e)
	}
	l.Unlock()
	l2, err := TryLock(p)
	if err != nil {
		t.Fatal(err)
	}
	l2.Unlock()
}

// Held answers who holds a run lock without ever taking it: a run that
// starts while someone keeps asking always gets the lock.
func TestHeldNeverTakesTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.lock")
	if held, _ := Held(path); held {
		t.Fatal("no lock file, yet held")
	}
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	held, h := Held(path)
	if !held || h.PID != os.Getpid() || h.Command == "" {
		t.Fatalf("held %v by %+v, want this process", held, h)
	}
	l.Unlock()
	if held, _ := Held(path); held {
		t.Fatal("released, yet held")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				Held(path)
			}
		}
	}()
	for i := 0; i < 500; i++ {
		l, err := TryLock(path)
		if err != nil {
			close(stop)
			t.Fatalf("try %d: a reader took the lock: %v", i, err)
		}
		l.Unlock()
	}
	close(stop)
	<-done
}

// A lock file naming a holder that died (kill -9 leaves the file, not the
// flock) is not held.
func TestHeldIgnoresDeadHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.lock")
	if err := os.WriteFile(path, []byte(`{"pid": 999999999, "command": "ralph run"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if held, h := Held(path); held {
		t.Fatalf("held by %+v", h)
	}
}

// A torn last line is repaired before the next append: an unfinished
// record is cut off, a whole one gets its newline; the file then reads
// back with no bad line in the middle. Human-readable logs keep their text.
func TestAppendRepairsTornLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "events.jsonl")
	os.WriteFile(p, []byte("{\"n\":1}\n{\"n\":2,\"msg\":\"half"), 0o644)
	if err := AppendJSONL(p, map[string]int{"n": 3}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "{\"n\":1}\n{\"n\":3}\n" {
		t.Fatalf("file %q", b)
	}
	os.WriteFile(p, []byte("{\"n\":1}\n{\"n\":2}"), 0o644)
	if err := AppendLine(p, []byte(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := ReadJSONL(p, func(_ int, raw []byte) error { got = append(got, string(raw)); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "") != `{"n":1}{"n":2}{"n":3}` {
		t.Fatalf("read back %q", got)
	}
	// No newline at all: the whole file is one torn line.
	os.WriteFile(p, []byte(`{"n":`), 0o644)
	AppendJSONL(p, map[string]int{"n": 9})
	if b, _ := os.ReadFile(p); string(b) != "{\"n\":9}\n" {
		t.Fatalf("file %q", b)
	}
	log := filepath.Join(dir, "progress.md")
	os.WriteFile(log, []byte("## entry\n- half a line"), 0o644)
	AppendLog(log, []byte("## next"))
	if b, _ := os.ReadFile(log); string(b) != "## entry\n- half a line\n## next\n" {
		t.Fatalf("log %q", b)
	}
}

// Files ralph keeps in its own folder are its owner's only, whatever the
// caller asked; files elsewhere keep the mode asked for.
func TestOwnFolderIsOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, ".ralph", "runs", "r1", "state.json")
	other := filepath.Join(dir, "tasks.jsonl")
	for _, p := range []string{own, other} {
		if err := WriteFile(p, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, ".ralph", "progress.md")
	if err := AppendLog(log, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{own: 0o600, other: 0o644, log: 0o600} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
}
