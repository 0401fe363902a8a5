package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// A snapshot shows every record as it is, whatever changed since the
// last one, and shares with it the copies of the records that did not
// change; neither is changed by what happens to the state after it.
func TestSnapshotsShareWhatDidNotChange(t *testing.T) {
	b, _ := journalBox(t, 200)
	rng := rand.New(rand.NewPCG(4, 2))
	var kept []*State
	var keptJSON []string
	for step := 0; step < 100; step++ {
		_ = b.update(func(st *State) {
			for k := rng.IntN(4); k > 0; k-- {
				id := fmt.Sprintf("S-%d", rng.IntN(220)) // some new
				is := st.Item(id)
				is.Attempts++
				is.Iterations = append(is.Iterations, step)
			}
		})
		prev := b.snapshot()
		snap := b.snapshot()
		var want, got []byte
		b.read(func(st *State) { want, _ = json.Marshal(st.Items) })
		got, _ = json.Marshal(snap.Items)
		if string(got) != string(want) {
			t.Fatalf("step %d: the snapshot differs from the state", step)
		}
		for id, is := range snap.Items {
			if prev.Items[id] != is {
				t.Fatalf("step %d: record %s copied again though it did not change", step, id)
			}
		}
		kept = append(kept, snap)
		j, _ := json.Marshal(snap.Items)
		keptJSON = append(keptJSON, string(j))
	}
	for i, s := range kept {
		if j, _ := json.Marshal(s.Items); string(j) != keptJSON[i] {
			t.Fatalf("snapshot %d changed after it was made", i)
		}
	}
}

// In ralph's tests a snapshot is read-only, and a record changed without
// a mark is caught at the next snapshot.
func TestSnapshotMisuseIsCaught(t *testing.T) {
	if !journalChecked {
		t.Skip("needs RALPH_CHECK_JOURNAL=1 (make check sets it)")
	}
	b, _ := journalBox(t, 3)
	catch := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "state snapshot") {
				t.Fatalf("%s: no panic (%v)", name, r)
			}
		}()
		fn()
	}
	catch("a snapshot changed", func() { b.snapshot().Item("S-1").Attempts = 9 })
	catch("a record changed without a mark", func() {
		b.read(func(st *State) { st.Items["S-2"].Attempts = 7 })
		b.snapshot()
	})
	_ = b.update(func(st *State) { st.Touch("S-2") })
	if c := b.snapshot().Clone(); c.Item("S-1") == nil { // a clone may change
		t.Fatal("no record in the clone")
	}
}
