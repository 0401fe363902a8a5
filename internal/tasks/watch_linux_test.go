package tasks

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// With Watch, every write by someone else is seen by the next Load (in
// place, appended, renamed onto the file, truncated, to the archive),
// while the Store's own claims and archives keep its snapshot without
// reading the files: after each step Load equals a parse of the files.
func TestWatchSeesEveryWrite(t *testing.T) {
	now := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 9))
		s := settled(t)
		s.Watch()
		if s.watch == nil {
			t.Skip("no inotify watch on this file system")
		}
		defer s.Close()
		foreign := []func(){
			func() { // the same size, in place: a letter of a title
				data, _ := os.ReadFile(s.ActivePath)
				if i := bytes.Index(data, []byte(`"title":"`)); i >= 0 {
					f, _ := os.OpenFile(s.ActivePath, os.O_WRONLY, 0)
					f.WriteAt([]byte("x"), int64(i+len(`"title":"`)))
					f.Close()
				}
			},
			func() { // appended
				f, _ := os.OpenFile(s.ActivePath, os.O_APPEND|os.O_WRONLY, 0)
				fmt.Fprintf(f, "{\"id\":\"N%d\",\"title\":\"new\",\"status\":\"pending\",\"leaf\":true}\n", rng.IntN(1e6))
				f.Close()
			},
			func() { // renamed onto it, as an editor saves
				data, _ := os.ReadFile(s.ActivePath)
				os.WriteFile(s.ActivePath+".tmp", fmt.Appendf(data, "{\"id\":\"R%d\",\"title\":\"r\",\"status\":\"pending\",\"leaf\":true}\n", rng.IntN(1e6)), 0o644)
				os.Rename(s.ActivePath+".tmp", s.ActivePath)
			},
			func() { writeThroughLink(t, s.ActivePath, "y") },
			func() { // the archive
				f, _ := os.OpenFile(s.DonePath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				fmt.Fprintf(f, "{\"id\":\"Z%d\",\"title\":\"z\",\"status\":\"complete\",\"leaf\":true}\n", rng.IntN(1e6))
				f.Close()
			},
			func() { writeThroughLink(t, s.DonePath, "w") },
			func() { // the archive renamed onto, as an editor saves
				data, _ := os.ReadFile(s.DonePath)
				os.WriteFile(s.DonePath+".tmp", fmt.Appendf(data, "{\"id\":\"Y%d\",\"title\":\"y\",\"status\":\"complete\",\"leaf\":true}\n", rng.IntN(1e6)), 0o644)
				os.Rename(s.DonePath+".tmp", s.DonePath)
			},
		}
		for step := 0; step < 30; step++ {
			set, err := s.Load()
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			want, err := Open(s.ActivePath).Load()
			if err != nil {
				t.Fatal(err)
			}
			if d := diffSets(set, want); d != "" {
				t.Fatalf("seed %d step %d: Load differs from a parse: %s", seed, step, d)
			}
			switch rng.IntN(3) {
			case 0:
				foreign[rng.IntN(len(foreign))]()
			case 1:
				if t := set.Next(); t != nil {
					s.ClaimFast(t.ID)
				}
			case 2:
				if open := set.Open(StatusActive); len(open) > 0 && open[0].Leaf {
					s.SetHold(open[0].ID)
					s.ArchiveFast(open[0].ID, "c", now)
					s.SetHold()
				}
			}
		}
	}
}

// The watch is what keeps Load from reading: a write the kernel reports to
// no one (through a shared mapping) is not seen until something else
// touches the files. That blind spot is why only a loop's Store watches.
func TestWatchSparesTheReading(t *testing.T) {
	s := watched(t)
	before, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	// The Store's own claim leaves it as sure of the files as before.
	if ok, err := s.ClaimFast("A.2"); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	claimed, _, _ := s.Latest()
	if claimed == before {
		t.Fatal("the claim did not move the snapshot on")
	}
	f := writeUnreported(t, s.ActivePath, len(`{"id":"A","title":"`), "X")
	if got, _ := s.Load(); got != claimed {
		t.Fatal("Load read the files though nothing reported a write")
	}
	f.Close() // closing a file open for writing is reported
	if got, _ := s.Load(); got == claimed {
		t.Fatal("Load did not read the files after a reported write")
	}
}

// A write to tasks.jsonl alone (what an agent's `ralph task complete`
// does) leaves the archive as the snapshot read it: the next Load reads
// tasks.jsonl and not the archive (shown by a change to the archive that
// no one reports, through a shared mapping), and a reported write to the
// archive is read.
func TestWatchSparesTheArchive(t *testing.T) {
	s := watched(t)
	if err := os.WriteFile(s.DonePath, []byte(`{"id":"C","title":"c","status":"complete","leaf":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	f := writeUnreported(t, s.DonePath, len(`{"id":"`), "E") // C becomes E
	a, _ := os.OpenFile(s.ActivePath, os.O_APPEND|os.O_WRONLY, 0)
	a.WriteString(`{"id":"D","title":"d","status":"pending","leaf":true}` + "\n")
	a.Close()
	after, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after.Get("D"); !ok {
		t.Fatal("Load did not read tasks.jsonl after a reported write")
	}
	if _, ok := after.Get("E"); ok {
		t.Fatal("Load read the archive though only tasks.jsonl was written")
	}
	f.Close() // closing a file open for writing is reported
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Get("E"); !ok {
		t.Fatal("Load did not read the archive after a reported write")
	}
}

// watched is a settled Store that watches its files.
func watched(t *testing.T) *Store {
	t.Helper()
	s := settled(t)
	s.Watch()
	if s.watch == nil {
		t.Skip("no inotify watch on this file system")
	}
	t.Cleanup(s.Close)
	return s
}

// writeUnreported writes b at off in the file through a shared mapping,
// which the kernel reports to no watch; closing the file it returns (open
// for writing) is reported.
func writeUnreported(t *testing.T, path string, off int, b string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(m[off:], b)
	syscall.Munmap(m)
	return f
}

// writeThroughLink changes the last title's first letter in the file at
// path to b, in place, through a hard link in another folder.
func writeThroughLink(t *testing.T, path, b string) {
	other := filepath.Join(t.TempDir(), "link")
	data, _ := os.ReadFile(path)
	if i := bytes.LastIndex(data, []byte(`"title":"`)); i >= 0 && os.Link(path, other) == nil {
		f, _ := os.OpenFile(other, os.O_WRONLY, 0)
		f.WriteAt([]byte(b), int64(i+len(`"title":"`)))
		f.Close()
	}
}
