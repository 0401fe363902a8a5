package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/proc"
)

// A story marked passed in the file is passed only when a commit of
// ralph's on the branch names it and this file; any other mark is
// marked by hand, not verified, and offered as work.
func TestPRDMarksNeedRalphsCommitForThatFile(t *testing.T) {
	dir, repo := newRepo(t)
	ctx := context.Background()
	marked := strings.Replace(twoStories, `"priority": 1,`, `"priority": 1, "passes": true,`, 1)
	if err := os.WriteFile(filepath.Join(dir, "next.json"), []byte(marked), 0o644); err != nil {
		t.Fatal(err)
	}
	commit := func(msg string) {
		t.Helper()
		if err := repo.AddAll(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := repo.Commit(ctx, msg, true); err != nil {
			t.Fatal(err)
		}
	}
	sync := func() *engine.ItemState {
		t.Helper()
		src, err := OpenPRD(filepath.Join(dir, "next.json"), repo, gate.Runner{Proc: proc.Exec{}})
		if err != nil {
			t.Fatal(err)
		}
		st := &engine.State{Items: map[string]*engine.ItemState{}}
		if err := src.Sync(st, engine.SyncNewRun); err != nil {
			t.Fatal(err)
		}
		next, err := src.Next(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		is := st.Items["S-1"]
		if is.Status == engine.ItemMarked && (next == nil || next.ID != "S-1") {
			t.Fatalf("a story marked by hand is work: next is %+v", next)
		}
		return is
	}

	commit("the mark rides along\n")
	if is := sync(); is.Status != engine.ItemMarked || !strings.Contains(is.Reason, "passes: true in next.json, but no commit of ralph's on main records it") {
		t.Fatalf("no commit of ralph's: %+v", is)
	}
	// ralph's commit of S-1 of another PRD proves nothing here
	commit("feat(S-1): one\n\nRalph-Story: S-1\nRalph-Run: r1\nRalph-Source: prd.json\n")
	if is := sync(); is.Status != engine.ItemMarked {
		t.Fatalf("a commit of prd.json's S-1: %+v", is)
	}
	// nor does a commit without the file's name (older, or forged by hand
	// without it)
	commit("feat(S-1): one\n\nRalph-Story: S-1\nRalph-Run: r1\n")
	if is := sync(); is.Status != engine.ItemMarked {
		t.Fatalf("a commit naming no file: %+v", is)
	}
	commit("feat(S-1): one\n\nRalph-Story: S-1\nRalph-Run: r2\nRalph-Source: next.json\n")
	head, _ := repo.Head(ctx)
	if is := sync(); is.Status != engine.ItemPassed || !strings.Contains(is.Reason, "ralph's commit "+head[:8]) {
		t.Fatalf("ralph's commit of next.json's S-1: %+v (head %s)", is, head)
	}
}
