package engine

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Concurrent updates are group-committed: every one returns after a write
// that holds it, and the file ends equal to the state in memory.
func TestStateBoxGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	b := newStateBox(&State{RunID: "r", Source: "prd", Items: map[string]*ItemState{}}, path, time.Now)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := fmt.Sprintf("w%d", w)
				update := b.update
				if i%3 == 0 {
					update = b.updateLight
				}
				if err := update(func(st *State) { st.Item(id).Runs++ }); err != nil {
					t.Error(err)
					return
				}
				// What this update changed is on disk once it returns.
				st, err := LoadState(path)
				if err != nil || st.Items[id] == nil || st.Items[id].Runs < i+1 {
					t.Errorf("after update %d of %s the file holds %+v (%v)", i+1, id, st.Items[id], err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	st, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	for w := 0; w < 8; w++ {
		if got := st.Items[fmt.Sprintf("w%d", w)].Runs; got != 25 {
			t.Fatalf("w%d: %d runs on disk, want 25", w, got)
		}
	}
	if b.synced > b.version || b.written != b.version {
		t.Fatalf("written %d synced %d version %d", b.written, b.synced, b.version)
	}
}

// The engine's tests check at every state write that the journal missed
// no changed record (RALPH_CHECK_JOURNAL does the same for the binary).
func init() { journalChecked = true }
