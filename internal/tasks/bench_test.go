package tasks

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// write100k writes the benchmark tree: 1,000 parents × 99 leaves, all
// pending, in the seed's line format.
func write100k(tb testing.TB, path string) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for p := 1; p <= 1000; p++ {
		fmt.Fprintf(w, `{"id":"%d","title":"parent task number %d","status":"pending","leaf":false}`+"\n", p, p)
		for c := 1; c <= 99; c++ {
			fmt.Fprintf(w, `{"id":"%d.%d","title":"leaf task %d.%d do the thing","status":"pending","leaf":true}`+"\n", p, c, p, c)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	f.Close()
}

// BenchmarkNext100k is the usual case: the file was last written by this
// package (or already read once by Next), so it is known to be sorted and
// Next stops at the first pending leaf.
func BenchmarkNext100k(b *testing.B) {
	s := Open(filepath.Join(b.TempDir(), "tasks.jsonl"))
	write100k(b, s.ActivePath)
	if _, err := s.Next(); err != nil { // marks the file as sorted
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, err := s.Next()
		if err != nil || t == nil || t.ID != "1.1" {
			b.Fatal(t, err)
		}
	}
}

// BenchmarkNext100kUnmarked is a file written by someone else: Next reads
// it to the end to check the order.
func BenchmarkNext100kUnmarked(b *testing.B) {
	s := Open(filepath.Join(b.TempDir(), "tasks.jsonl"))
	write100k(b, s.ActivePath)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		unmarkSorted(s.ActivePath)
		t, err := s.Next()
		if err != nil || t == nil || t.ID != "1.1" {
			b.Fatal(t, err)
		}
	}
}

// BenchmarkLoad100k is the full parse and validation every Update pays.
func BenchmarkLoad100k(b *testing.B) {
	s := Open(filepath.Join(b.TempDir(), "tasks.jsonl"))
	write100k(b, s.ActivePath)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		set, err := s.Load()
		if err != nil || set.Len() != 100000 {
			b.Fatal(err)
		}
	}
}

func BenchmarkComplete100k(b *testing.B) {
	s := Open(filepath.Join(b.TempDir(), "tasks.jsonl"))
	write100k(b, s.ActivePath)
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("%d.%d", 1+i/99, 1+i%99) // the last leaf of a parent archives it too
		err := s.Update(func(set *Set) error {
			_, err := set.Complete(id, "abc123", now)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// The seed's shell recipes on the same file, for comparison.
func BenchmarkSeedNextShell100k(b *testing.B) {
	dir := b.TempDir()
	write100k(b, filepath.Join(dir, "tasks.jsonl"))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command("sh", "-c", `grep '"leaf":true' tasks.jsonl | grep '"status":"pending"' | head -1`)
		cmd.Dir = dir
		if out, err := cmd.Output(); err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

func BenchmarkSeedCompleteShell100k(b *testing.B) {
	if _, err := exec.LookPath("jq"); err != nil {
		b.Skip("jq not installed")
	}
	dir := b.TempDir()
	write100k(b, filepath.Join(dir, "tasks.jsonl"))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("%d.%d", 1+i/99, 1+i%99)
		cmd := exec.Command("sh", "-c", `set -e
TASK=$(grep "\"id\":\"$ID\"" tasks.jsonl)
DONE=$(echo "$TASK" | jq -c '. + {completed:"2024-01-21",commit:"abc123"}')
echo "$DONE" >> tasks-done.jsonl
grep -v "\"id\":\"$ID\"" tasks.jsonl > tmp && mv tmp tasks.jsonl`)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ID="+id)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatal(err, string(out))
		}
	}
}

// Peak memory of one command in a process of its own (like `ralph task
// complete` / `ralph task next`), as maximum resident set size.
func BenchmarkPeakRSS100k(b *testing.B) {
	orig := filepath.Join(b.TempDir(), "tasks.jsonl")
	write100k(b, orig)
	data, err := os.ReadFile(orig)
	if err != nil {
		b.Fatal(err)
	}
	for _, op := range []string{"noop", "next", "complete"} {
		b.Run(op, func(b *testing.B) {
			var peak int64
			for i := 0; i < b.N; i++ {
				path := filepath.Join(b.TempDir(), "tasks.jsonl")
				if err := os.WriteFile(path, data, 0o644); err != nil {
					b.Fatal(err)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
				cmd.Env = append(os.Environ(), "TASKS_HELPER="+op, "TASKS_FILE="+path, "TASKS_ID=1.1")
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatal(err, string(out))
				}
				var kb int64
				if i := bytes.Index(out, []byte("VmHWM:")); i >= 0 {
					fmt.Sscan(string(out[i+6:]), &kb)
				}
				if kb == 0 {
					b.Skip("no VmHWM in /proc/self/status")
				}
				peak = max(peak, kb)
			}
			b.ReportMetric(float64(peak)/1024, "peak-MB")
		})
	}
}

func TestHelperProcess(t *testing.T) {
	op := os.Getenv("TASKS_HELPER")
	if op == "" {
		t.Skip("helper for BenchmarkPeakRSS100k")
	}
	s := Open(os.Getenv("TASKS_FILE"))
	var err error
	switch op {
	case "noop":
	case "next":
		_, err = s.Next()
	case "complete":
		err = s.Update(func(set *Set) error {
			_, err := set.Complete(os.Getenv("TASKS_ID"), "abc123", time.Now())
			return err
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	// Peak resident set size of this process (Linux).
	if st, err := os.ReadFile("/proc/self/status"); err == nil {
		if i := bytes.Index(st, []byte("VmHWM:")); i >= 0 {
			line, _, _ := bytes.Cut(st[i:], []byte("\n"))
			fmt.Println(string(line))
		}
	}
}
