package tasks

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const tree = `{"id":"A","title":"auth","status":"pending","leaf":false}
{"id":"A.1","title":"store","status":"pending","leaf":false,"owner":"kim"}
{"id":"A.1.1","title":"choose","status":"active","leaf":true}
{"id":"A.1.2","title":"middleware","status":"pending","leaf":true}
{"id":"A.2","title":"login","status":"pending","leaf":true}
{"id":"B","title":"tests","status":"pending","leaf":true}
`

// settled writes the tree through the store so the file carries ralph's
// valid mark, as after any ralph write.
func settled(t *testing.T) *Store {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "tasks.jsonl")
	os.WriteFile(p, []byte(tree), 0o644)
	s := Open(p)
	if err := s.Update(func(set *Set) error { _, err := set.Add("", "extra", "B"); return err }); err != nil {
		t.Fatal(err)
	}
	return s
}

// fullComplete completes id through the full update and returns what it
// archived, to compare an in-place completion with.
func fullComplete(t *testing.T, s *Store, id string, now time.Time) []*Task {
	t.Helper()
	var done []*Task
	if err := s.Update(func(set *Set) (err error) { done, err = set.Complete(id, "abc", now); return err }); err != nil {
		t.Fatal(err)
	}
	return done
}

func TestCompleteFastMatchesUpdate(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC)
	fast, slow := settled(t), settled(t)
	for _, id := range []string{"A.1.1", "A.1.2", "A.2"} {
		got, ok, err := fast.CompleteFast(id, "abc", now)
		if err != nil || !ok {
			t.Fatalf("%s: ok=%v err=%v", id, ok, err)
		}
		want := fullComplete(t, slow, id, now)
		if len(got) != len(want) {
			t.Fatalf("%s: fast archived %d, full %d", id, len(got), len(want))
		}
		for i := range got {
			if string(got[i].Encode()) != string(want[i].Encode()) {
				t.Fatalf("%s: fast %s, full %s", id, got[i].Encode(), want[i].Encode())
			}
		}
	}
	// Same archive, same model; the active file differs only by blanks.
	fd, _ := os.ReadFile(fast.DonePath)
	sd, _ := os.ReadFile(slow.DonePath)
	if string(fd) != string(sd) {
		t.Fatalf("archives differ:\n%s\n---\n%s", fd, sd)
	}
	if !strings.Contains(string(fd), `"id":"A","title":"auth"`) {
		t.Fatal("the parent completed implicitly")
	}
	fs, err := fast.Load()
	if err != nil {
		t.Fatal(err)
	}
	ss, _ := slow.Load()
	if fs.Tree() != ss.Tree() {
		t.Fatalf("trees differ:\n%s\n%s", fs.Tree(), ss.Tree())
	}
	if n := fast.mustNext(t); n != "B.1" {
		t.Fatalf("next after fast completes: %s", n)
	}
	// The next full write drops the blank lines.
	if err := fast.Update(func(set *Set) error { return set.Block("B.1", "waiting") }); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(fast.ActivePath)
	if strings.Contains(string(a), "   ") {
		t.Fatalf("blank lines kept:\n%q", a)
	}
}

func (s *Store) mustNext(t *testing.T) string {
	t.Helper()
	n, err := s.Next()
	if err != nil || n == nil {
		t.Fatal(n, err)
	}
	return n.ID
}

func TestCompleteFastFallsBack(t *testing.T) {
	now := time.Now()
	s := settled(t)
	// Not a leaf, unknown, already complete: the full path words the error.
	for _, id := range []string{"A", "Z", "A.1"} {
		if _, ok, err := s.CompleteFast(id, "", now); ok || err != nil {
			t.Fatalf("%s: ok=%v err=%v, want a silent fallback", id, ok, err)
		}
	}
	// A file someone else wrote carries no valid mark: one a full write
	// would change (here a line without "leaf") goes the full way.
	f, _ := os.OpenFile(s.ActivePath, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"C","title":"by hand","status":"pending"}` + "\n")
	f.Close()
	if _, ok, _ := s.CompleteFast("B.1", "", now); ok {
		t.Fatal("a hand-edited file that needs rewriting must go through the full update")
	}
	// A held claim in flight also goes the full way.
	s2 := settled(t)
	s2.SetHold("B.1")
	if _, ok, _ := s2.CompleteFast("A.2", "", now); ok {
		t.Fatal("held claims must go through the full update")
	}
}

// The loop's claim and archive in place leave the same model as the full
// updates: a pending leaf claimed, then (held by the loop, with the
// agent's claim in the file) archived with its commit.
func TestClaimAndArchiveFastMatchUpdate(t *testing.T) {
	now := time.Date(2026, 11, 23, 1, 2, 3, 0, time.UTC)
	fast, slow := settled(t), settled(t)
	for _, id := range []string{"A.1.2", "A.2"} {
		ok, err := fast.ClaimFast(id)
		if err != nil || !ok {
			t.Fatalf("claim %s: ok=%v err=%v", id, ok, err)
		}
		if err := slow.Update(func(set *Set) error { _, err := set.Claim(id); return err }); err != nil {
			t.Fatal(err)
		}
		fs, err := fast.Load()
		if err != nil {
			t.Fatal(err)
		}
		ss, _ := slow.Load()
		if ft, _ := fs.Get(id); ft.Status != StatusActive || fs.Tree() != ss.Tree() {
			t.Fatalf("after claiming %s: %s\n%s", id, fs.Tree(), ss.Tree())
		}
		// The agent claims it done; the loop holds it and archives it.
		for _, s := range []*Store{fast, slow} {
			s.SetHold(id)
			if err := s.Update(func(set *Set) error { t, _ := set.Get(id); t.Status = StatusComplete; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		got, ok, err := fast.ArchiveFast(id, "abc", now)
		if err != nil || !ok {
			t.Fatalf("archive %s: ok=%v err=%v", id, ok, err)
		}
		want := fullComplete(t, slow, id, now)
		if len(got) != len(want) || string(got[0].Encode()) != string(want[0].Encode()) {
			t.Fatalf("archive %s: fast %v, full %v", id, got, want)
		}
		fast.SetHold()
		slow.SetHold()
	}
	fs, err := fast.Load()
	if err != nil {
		t.Fatal(err)
	}
	ss, _ := slow.Load()
	if fs.Tree() != ss.Tree() {
		t.Fatalf("trees differ:\n%s\n%s", fs.Tree(), ss.Tree())
	}
	fd, _ := os.ReadFile(fast.DonePath)
	sd, _ := os.ReadFile(slow.DonePath)
	if string(fd) != string(sd) {
		t.Fatalf("archives differ:\n%s\n---\n%s", fd, sd)
	}
	// Not pending, not a leaf, unknown, a hand-edited file: the full path.
	for _, id := range []string{"A.1.1", "A", "Z"} {
		if ok, err := fast.ClaimFast(id); ok || err != nil {
			t.Fatalf("claim %s: ok=%v err=%v, want a silent fallback", id, ok, err)
		}
	}
	f, _ := os.OpenFile(fast.ActivePath, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"0","title":"by hand, out of order","status":"pending","leaf":true}` + "\n")
	f.Close()
	if ok, _ := fast.ClaimFast("B.1"); ok {
		t.Fatal("a hand-edited file that needs rewriting must go through the full update")
	}
	// Another task held: the archive goes the full way.
	s2 := settled(t)
	s2.SetHold("A.2", "B.1")
	if _, ok, _ := s2.ArchiveFast("A.1.1", "abc", now); ok {
		t.Fatal("another held claim must go through the full update")
	}
}

// After an in-place claim or archive, the next Load hands out a snapshot
// moved on from the last one — no parse — that equals a parse of the
// files; a Load of files changed by someone else parses as before.
func TestInPlaceEditsKeepTheSnapshot(t *testing.T) {
	now := time.Date(2026, 11, 23, 1, 2, 3, 0, time.UTC)
	s := settled(t)
	same := func(step string) {
		t.Helper()
		s.cacheMu.Lock()
		cached := s.cache // as the edit left it
		s.cacheMu.Unlock()
		got, err := s.Load()
		if err != nil {
			t.Fatal(err)
		}
		if cached == nil || cached.set != got {
			t.Fatalf("%s: Load parsed the files again", step)
		}
		want, err := Open(s.ActivePath).Load()
		if err != nil {
			t.Fatal(err)
		}
		for _, status := range []string{"", StatusComplete} {
			g, w := got.List(status), want.List(status)
			if len(g) != len(w) {
				t.Fatalf("%s: %d tasks listed %q, a parse lists %d", step, len(g), status, len(w))
			}
			for i := range g {
				if string(g[i].Encode()) != string(w[i].Encode()) {
					t.Fatalf("%s: %s, a parse reads %s", step, g[i].Encode(), w[i].Encode())
				}
			}
		}
		if got.Tree() != want.Tree() {
			t.Fatalf("%s:\n%s\na parse:\n%s", step, got.Tree(), want.Tree())
		}
		if d := diffSets(got, want); d != "" {
			t.Fatalf("%s: the snapshot differs from a parse: %s", step, d)
		}
	}
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"A.1.2", "A.2"} {
		if ok, err := s.ClaimFast(id); err != nil || !ok {
			t.Fatalf("claim %s: %v %v", id, ok, err)
		}
		same("claim " + id)
		s.SetHold(id)
		if _, ok, err := s.ArchiveFast(id, "abc", now); err != nil || !ok {
			t.Fatalf("archive %s: %v %v", id, ok, err)
		}
		s.SetHold()
		same("archive " + id)
	}
	// A.1.1 was active: archiving it completes A.1, then A (B remains).
	s.SetHold("A.1.1")
	if _, ok, err := s.ArchiveFast("A.1.1", "def", now); err != nil || !ok {
		t.Fatalf("archive A.1.1: %v %v", ok, err)
	}
	s.SetHold()
	same("archive A.1.1 and its parents")
	// Someone else's write: parsed again, and right.
	f, _ := os.OpenFile(s.ActivePath, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"C","title":"by hand","status":"pending","leaf":true}` + "\n")
	f.Close()
	before := s.cache
	set, err := s.Load()
	if err != nil || before != nil && before.set == set {
		t.Fatalf("a foreign write: %v (same snapshot: %v)", err, before != nil && before.set == set)
	}
	if _, ok := set.Get("C"); !ok {
		t.Fatal("the foreign write's task is missing")
	}
}

// patchCache moves the snapshot on only when the edit's writes are the
// change apply made: a write to a line apply did not change, or a changed
// line that is not its task's encoding, leaves the cache empty.
func TestPatchCacheChecksTheWrites(t *testing.T) {
	s := settled(t)
	set, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	claim := func(set *Set) error { _, err := set.Claim("A.2"); return err }
	i, _ := set.find("A.2")
	e := set.active[i]
	line := appendTask(nil, &Task{ID: "A.2", Title: set.task(&e).Title, Status: StatusActive, Leaf: true})
	j, _ := set.find("B.1")
	other := set.active[j]
	for name, writes := range map[string][]written{
		"the claim":               {{int(e.off), append(line, bytes.Repeat([]byte{' '}, int(e.n)-len(line))...)}},
		"the claim and B.1 too":   {{int(e.off), append(line, bytes.Repeat([]byte{' '}, int(e.n)-len(line))...)}, {int(other.off), []byte("{")}},
		"not the task's new line": {{int(e.off), bytes.Repeat([]byte{' '}, int(e.n))}},
	} {
		s.forget()
		s.patchCache(&loadCache{active: set.data, done: set.doneData, set: set}, bytes.Clone(set.data), writes, claim)
		if got := s.cache != nil; got != (name == "the claim") {
			t.Errorf("%s: snapshot kept %v", name, got)
		}
	}
}

// A file someone else wrote that is valid and as a full write would write
// it is checked once by a one-off command, stamped, and then completed in
// place, with the same result as the full update.
func TestCompleteFastAfterAForeignWrite(t *testing.T) {
	now := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	fast, slow := settled(t), settled(t)
	for _, s := range []*Store{fast, slow} {
		f, _ := os.OpenFile(s.ActivePath, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`{"id":"C","title":"by hand","status":"pending","leaf":true}` + "\n")
		f.Close()
	}
	fi, _ := os.Stat(fast.ActivePath)
	// A loop's Store (it has read the files) rewrites the file instead.
	if _, ok, _ := fast.CompleteFast("A.2", "abc", now); ok {
		t.Fatal("a Store that read the files before completed in place after someone else's write")
	}
	oneOff := Open(fast.ActivePath) // a one-off command
	oneOff.Now = fast.Now
	done, ok, err := oneOff.CompleteFast("A.2", "abc", now)
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v: a valid file someone else wrote is completed in place", ok, err)
	}
	if after, _ := os.Stat(fast.ActivePath); !os.SameFile(fi, after) || after.Size() != fi.Size() {
		t.Fatal("the file was rewritten")
	}
	want := fullComplete(t, slow, "A.2", now)
	if len(done) != len(want) || string(done[0].Encode()) != string(want[0].Encode()) {
		t.Fatalf("in place %v, full %v", done, want)
	}
	a, _ := Open(fast.ActivePath).Load()
	b, _ := Open(slow.ActivePath).Load()
	if a.Tree() != b.Tree() {
		t.Fatalf("in place:\n%s\nfull:\n%s", a.Tree(), b.Tree())
	}
}

// A one-off completion reads the archive (to see that its task is not
// already there) only when the archive changed since the two files were
// last known to agree; an archive someone else appended to is read, and a
// task found in it is not completed in place.
func TestCompleteFastTrustsTheArchiveOnlyAsMarked(t *testing.T) {
	if archiveStamp("/") == "" {
		t.Skip("no archive mark on this system")
	}
	now := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	s := settled(t)
	if !archiveAsMarked(s.ActivePath, s.DonePath) {
		t.Fatal("a full write leaves the archive unmarked")
	}
	if _, ok, err := Open(s.ActivePath).CompleteFast("A.1.1", "abc", now); !ok || err != nil {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if !archiveAsMarked(s.ActivePath, s.DonePath) {
		t.Fatal("an in-place completion leaves the archive unmarked: the next one reads it")
	}
	// An interrupted completion by someone else: A.2 archived, its line still there.
	f, _ := os.OpenFile(s.DonePath, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"A.2","title":"login","status":"complete","leaf":true,"completed":"2026-11-24T01:02:03Z"}` + "\n")
	f.Close()
	if archiveAsMarked(s.ActivePath, s.DonePath) {
		t.Fatal("the mark matches an archive someone else appended to")
	}
	if _, ok, err := Open(s.ActivePath).CompleteFast("A.2", "abc", now); ok || err != nil {
		t.Fatalf("completed in place a task already in the archive: %v %v", ok, err)
	}
	// Nor does the completion of another task mark the archive as agreeing.
	if _, ok, err := Open(s.ActivePath).CompleteFast("B.1", "abc", now); !ok || err != nil {
		t.Fatalf("complete B.1: %v %v", ok, err)
	}
	if archiveAsMarked(s.ActivePath, s.DonePath) {
		t.Fatal("the archive was marked as agreeing though A.2 is in both files")
	}
}

// TestLineOfBisects checks the bisection against a plain search on sorted
// files with blanked lines (as in-place archiving leaves them), for every
// id in the file and for ids between, before and after them.
func TestLineOfBisects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 300; trial++ {
		var ids []string
		for p := 0; p < 1+rng.IntN(6); p++ {
			parent := fmt.Sprint(p + 1)
			ids = append(ids, parent)
			for l := 0; l < rng.IntN(12); l++ {
				ids = append(ids, fmt.Sprintf("%s.%d", parent, l+1))
			}
		}
		slices.SortFunc(ids, CompareIDs)
		var data []byte
		present := map[string]bool{}
		for _, id := range ids {
			line := appendTask(nil, &Task{ID: id, Title: "t " + id, Status: StatusPending, Leaf: true})
			if rng.IntN(3) == 0 { // archived in place
				line = bytes.Repeat([]byte{' '}, len(line))
			} else {
				present[id] = true
			}
			data = append(append(data, line...), '\n')
		}
		if rng.IntN(2) == 0 && len(data) > 0 {
			data = data[:len(data)-1] // no final newline
		}
		probes := append(slices.Clone(ids), "0", "9", "1.0", "1.99", "3.5.1", "A")
		for _, id := range probes {
			s, e, ok := lineOf(data, id)
			ws, we, wok := lineOfScan(data, id)
			if ok != present[id] || ok != wok || s != ws || e != we {
				t.Fatalf("trial %d: lineOf(%q) = %d,%d,%v; the scan finds %d,%d,%v; in the file: %v\n%s", trial, id, s, e, ok, ws, we, wok, present[id], data)
			}
		}
	}
}
