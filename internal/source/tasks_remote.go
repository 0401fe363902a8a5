package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/tasks"
)

// The task loop with its agent on another machine (ralph coordinator):
// the agent edits a copy of the task files there, which travels with the
// job, and its edits are merged back here before Verify reads them.

// SharedFiles are the task files as they are now, relative to the
// repository root (nil: the file does not exist yet); restore are the
// files a worker puts back as the commit it started from before it
// commits (the task files and the lock and hold files beside them);
// keepOut are the paths a commit of this tree must leave out.
func (s *Tasks) SharedFiles(ctx context.Context) (files map[string][]byte, restore, keepOut []string, err error) {
	rel := s.fileRel()
	if len(rel) != 2 {
		return nil, nil, nil, &InputError{fmt.Errorf("%s and %s must be inside the repository %s for ralph coordinator: workers get their copy with each job",
			s.File, s.Store.DonePath, s.Root)}
	}
	files = map[string][]byte{}
	for _, r := range rel {
		b, err := os.ReadFile(filepath.Join(s.Root, filepath.FromSlash(r)))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil, err
		}
		if err == nil && b == nil {
			b = []byte{}
		}
		files[r] = b
	}
	st := s.state
	if st == nil {
		st = &engine.State{}
	}
	return files, s.controlRel(), s.notWork(ctx, st), nil
}

// MergeShared brings a worker's edits of the task files (it was sent
// sent and left got) into them, under the store's lock: whatever was
// changed here meanwhile (`ralph task add` by a person) is kept, and a
// task changed on both sides keeps this side's line (the notes say so).
func (s *Tasks) MergeShared(sent, got map[string][]byte) (notes []string, err error) {
	err = store.WithLock(s.Store.LockPath, func() error {
		for rel, was := range sent {
			path := filepath.Join(s.Root, filepath.FromSlash(rel))
			cur, err := os.ReadFile(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			merged, conflicts := tasks.MergeEdits(was, got[rel], cur)
			if len(conflicts) > 0 {
				notes = append(notes, fmt.Sprintf("%s: changed here while the agent ran, and by the agent: %s (kept this machine's version)", rel, strings.Join(conflicts, ", ")))
			}
			if string(merged) == string(cur) || cur == nil && len(merged) == 0 {
				continue
			}
			if err := store.WriteFile(path, merged, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	return notes, err
}

// GatesFor are the gates every task's tree must pass.
func (s *Tasks) GatesFor(string) []gate.Gate { return s.GateList }
