package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func journalBox(t *testing.T, items int) (*stateBox, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.json")
	st := &State{RunID: "r", Source: "prd", Items: map[string]*ItemState{}}
	for i := 0; i < items; i++ {
		id := fmt.Sprintf("S-%d", i)
		st.Order = append(st.Order, id)
		st.Item(id).Title = "story " + id
	}
	b := newStateBox(st, path, time.Now)
	if err := b.update(func(*State) {}); err != nil { // the first write is the document
		t.Fatal(err)
	}
	return b, path
}

// equalState compares the state in memory with what a reader loads.
func equalState(t *testing.T, b *stateBox, path string) {
	t.Helper()
	got, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	want := b.snapshot()
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Fatalf("loaded state differs from the state in memory:\n got %s\nwant %s", gj, wj)
	}
}

// A change appends one line holding only what changed; the document is
// not rewritten; a reader sees document + journal as the state in memory;
// closing folds the journal into the document.
func TestJournalAppendsOnlyWhatChanged(t *testing.T) {
	b, path := journalBox(t, 1000)
	doc, _ := os.ReadFile(path)
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("S-%d", i)
		if err := b.update(func(st *State) {
			st.Item(id).Status = ItemPassed
			st.Iteration++
		}); err != nil {
			t.Fatal(err)
		}
	}
	if now, _ := os.ReadFile(path); string(now) != string(doc) {
		t.Fatal("the document was rewritten for a change of one item")
	}
	journal, _ := os.ReadFile(JournalPath(path))
	lines := strings.Split(strings.TrimSpace(string(journal)), "\n")
	if len(lines) != 20 {
		t.Fatalf("%d journal lines, want 20", len(lines))
	}
	for i, l := range lines {
		var e journalEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if len(e.Items) != 1 || e.Items[0].ID != fmt.Sprintf("S-%d", i) || e.Order != nil {
			t.Fatalf("line %d holds %d items and order %v, want S-%d alone", i+1, len(e.Items), e.Order, i)
		}
		if len(l) > 2000 {
			t.Fatalf("line %d is %d bytes: more than one record", i+1, len(l))
		}
	}
	equalState(t, b, path)
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(JournalPath(path)); err != nil || fi.Size() != 0 {
		t.Fatalf("journal after close: %v, %v", fi, err)
	}
	equalState(t, b, path)
}

// The journal is folded into the document once it outgrows it, so a long
// run's journal stays bounded.
func TestJournalCompactsWhenLarge(t *testing.T) {
	b, path := journalBox(t, 10)
	for i := 0; i < 2000; i++ {
		if err := b.update(func(st *State) { st.Item("S-1").Runs++; st.Item("S-1").LastResult = strings.Repeat("x", 200) }); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(JournalPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > journalCompactMin+4096 {
		t.Fatalf("journal is %d bytes after 2000 changes: never compacted", fi.Size())
	}
	equalState(t, b, path)
}

// A crash mid-append leaves a torn last line: it is ignored. A bad line
// before the last makes the state corrupt (rebuilt from the event log).
func TestJournalTornLine(t *testing.T) {
	b, path := journalBox(t, 3)
	if err := b.update(func(st *State) { st.Item("S-1").Status = ItemPassed }); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(JournalPath(path), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"run":{"run_id":"r","source":"prd","status":"torn"`)
	f.Close()
	st, err := LoadState(path)
	if err != nil || st.Items["S-1"].Status != ItemPassed || st.Status == "torn" {
		t.Fatalf("torn last line: %v, %+v", err, st)
	}
	f, _ = os.OpenFile(JournalPath(path), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\n{}\n")
	f.Close()
	if _, err := LoadState(path); err == nil {
		t.Fatal("a bad line in the middle of the journal was accepted")
	} else if _, ok := err.(*CorruptStateError); !ok || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error %v, want a CorruptStateError naming line 2", err)
	}
}

// Compaction writes the document, then replaces the journal. A crash (or
// a reader) between the two sees the new document beside the old journal:
// replaying it must give the new document, not older values.
func TestJournalCompactionCrashBetweenRenames(t *testing.T) {
	b, path := journalBox(t, 3)
	for _, s := range []string{ItemRunning, ItemPassed} {
		if err := b.update(func(st *State) { st.Item("S-1").Status = s }); err != nil {
			t.Fatal(err)
		}
	}
	// A change made just before compaction, then the compaction, which
	// "crashes" between its renames: the journal as it was then is kept.
	b.mutate(func(st *State) { st.Item("S-2").Status = ItemBlocked; st.Item("S-1").Runs = 9 })
	var crashed []byte
	betweenCompactionRenames = func(journal string) { crashed, _ = os.ReadFile(journal) }
	defer func() { betweenCompactionRenames = nil }()
	if err := b.compact(false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(JournalPath(path), crashed, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	// Replaying the old journal names S-1: its last line must hold S-1 as
	// the document has it, or the replay would undo Runs=9.
	if is := st.Items["S-1"]; is.Status != ItemPassed || is.Runs != 9 || st.Items["S-2"].Status != ItemBlocked {
		t.Fatalf("after a crash between the renames: S-1 %+v, S-2 %+v", st.Items["S-1"], st.Items["S-2"])
	}
}

// A resumed run reads document + journal, and its first write folds them.
func TestJournalResume(t *testing.T) {
	b, path := journalBox(t, 5)
	if err := b.update(func(st *State) { st.Item("S-3").Status = ItemPassed; st.Iteration = 4 }); err != nil {
		t.Fatal(err)
	}
	// kill -9: the box is dropped without close.
	st, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	b2 := newStateBox(st, path, time.Now)
	if err := b2.update(func(st *State) { st.Iteration++ }); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(JournalPath(path)); fi.Size() != 0 {
		t.Fatalf("the resumed run's first write left a %d-byte journal", fi.Size())
	}
	var doc State
	raw, _ := os.ReadFile(path)
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Iteration != 5 || doc.Items["S-3"].Status != ItemPassed {
		t.Fatalf("document after resume: %v %+v", err, doc)
	}
	if !reflect.DeepEqual(doc.Order, st.Order) {
		t.Fatalf("order %v, want %v", doc.Order, st.Order)
	}
}
