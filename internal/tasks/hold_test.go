package tasks

import (
	"os"
	"path/filepath"
	"testing"
)

// A task held by a running loop keeps its "complete" claim in tasks.jsonl
// through other updates until the loop archives it.
func TestHeldClaimIsNotArchived(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tasks.jsonl")
	os.WriteFile(p, []byte(`{"id":"A","title":"a","status":"complete","leaf":true}`+"\n"+`{"id":"B","title":"b","status":"pending","leaf":true}`+"\n"), 0o644)
	s := Open(p)
	if err := s.SetHold("A"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(set *Set) error { _, err := set.Add("C", "c", ""); return err }); err != nil {
		t.Fatal(err)
	}
	set, _ := s.Load()
	if a, _ := set.Get("A"); a.Archived() || a.Status != StatusComplete {
		t.Fatalf("held claim archived: %+v", a)
	}
	if err := s.SetHold(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.HoldPath); !os.IsNotExist(err) {
		t.Fatal("hold file left")
	}
	if err := s.Update(func(set *Set) error { return nil }); err != nil {
		t.Fatal(err)
	}
	set, _ = s.Load()
	if a, _ := set.Get("A"); !a.Archived() {
		t.Fatalf("released claim not archived: %+v", a)
	}
}
