package store

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	// The next append must not glue itself onto the torn line.
	if err := AppendJSONL(p, map[string]int{"i": 3}); err != nil {
		t.Fatal(err)
	}
	err := ReadJSONL(p, func(int, []byte) error { return nil })
	if err == nil {
		t.Fatal("a torn line in the middle must be reported")
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
	if !IsLocked(err) {
		t.Fatalf("want ErrLocked, got %v", err)
	}
	if e := err.(*ErrLocked); e.Holder.PID != os.Getpid() {
		t.Fatalf("holder %+v", e.Holder)
	}
	l.Unlock()
	l2, err := TryLock(p)
	if err != nil {
		t.Fatal(err)
	}
	l2.Unlock()
}
