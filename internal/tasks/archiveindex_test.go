package tasks

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestArchiveIndexMatchesASearch completes tasks one by one, through the
// full update and in place, and checks after each that every snapshot and
// every Set changed from one (also two changed from the same snapshot,
// whose indexes share the layers below) finds each task in the archive,
// and each parent's archived children, as a search of the records does;
// and that the layers stay few.
func TestArchiveIndexMatchesASearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	dir := t.TempDir()
	var b strings.Builder
	var leaves, ids []string
	for p := 1; p <= 8; p++ {
		fmt.Fprintf(&b, `{"id":"%d","title":"p","status":"pending","leaf":false}`+"\n", p)
		ids = append(ids, fmt.Sprint(p))
		for l := 1; l <= 12; l++ {
			id := fmt.Sprintf("%d.%d", p, l)
			fmt.Fprintf(&b, `{"id":"%s","title":"l","status":"pending","leaf":true}`+"\n", id)
			leaves, ids = append(leaves, id), append(ids, id)
		}
	}
	path := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := Open(path)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	check := func(when string, set *Set) {
		t.Helper()
		for _, id := range append(ids, "9", "1.13") {
			var want *entry
			kid := false
			for i := range set.done {
				if want == nil && set.id(&set.done[i]) == id {
					want = &set.done[i]
				}
				kid = kid || ParentID(set.id(&set.done[i])) == id
			}
			if got := set.archived(id); got != want {
				t.Fatalf("%s: archived(%s) = %v, a search finds %v", when, id, got, want)
			}
			if got := set.hasArchivedChild(id); got != kid {
				t.Fatalf("%s: hasArchivedChild(%s) = %v, a search finds %v", when, id, got, kid)
			}
		}
		layers := 0
		for x := set.archIdx; x != nil; x = x.below {
			layers++
		}
		if max := bits.Len(uint(len(set.done))) + 1; layers > max {
			t.Fatalf("%s: %d layers over %d records", when, layers, len(set.done))
		}
	}
	rng.Shuffle(len(leaves), func(i, j int) { leaves[i], leaves[j] = leaves[j], leaves[i] })
	for k, id := range leaves {
		var err error
		if k%3 == 0 {
			err = s.Update(func(set *Set) error { _, err := set.Complete(id, "c", now); return err })
		} else {
			_, _, err = s.CompleteFast(id, "c", now)
		}
		if err != nil {
			t.Fatal(err)
		}
		snap, err := s.Load()
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("after %s, the snapshot", id), snap)
		if k+2 < len(leaves) {
			for _, other := range leaves[k+1 : k+3] {
				c := snap.forUpdate()
				if _, err := c.Complete(other, "c", now); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("after %s, a copy that completed %s", id, other), c)
			}
		}
	}
}
