// Package source adapts ralph's work formats (PRD, task tree, pipeline,
// plain loop) to the engine's Source interface: which item is next, which
// tree it runs in, how "done" is verified and recorded in git.
package source

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
)

// storyTrailer marks the commit that recorded a story.
const storyTrailer = "Ralph-Story"

// prdDoc is what the sequential and the parallel PRD sources share: the
// harness's own copy of the PRD (loaded at start) and the file in the tree
// that is rewritten from it, so an agent that flips "passes" or edits the
// gate commands is reverted.
type prdDoc struct {
	File   string // absolute path
	Doc    *prd.PRD
	Git    *git.Repo
	Gates  gate.Runner
	Branch string // feature branch

	mu       sync.Mutex // guards Doc (and, in the sequential source, the main tree)
	onBranch bool       // the main tree was seen on Branch this run
	// resumedTip is the newest passed story's commit a resumed state and
	// the repository agree on: the lander starts from it, not from
	// whatever the branch is (an agent may have rewritten it before the
	// crash).
	resumedTip string
	// written are the file's bytes as the harness last wrote them (or
	// found them equal to its model): an untouched file is recognised by
	// one comparison, with no parse and no rewrite. Under mu.
	written []byte
	// commands are the PRD's gate commands and its stories' checks, each
	// once (computed when opened; steering may not change the gates).
	commands []string
	// itemsDoc is the Doc itemsVersion was last counted for: Items change
	// only with the Doc (adopting a steering's PRD replaces it; nothing
	// edits a story's fields that Items copies in place). Under mu.
	itemsDoc     *prd.PRD
	itemsVersion uint64
	// mirror is a file rendered from the model (nil: none).
	mirror *Mirror
	// source names the PRD in its stories' commits (sourceName): a mark
	// in it is proved by a commit that names it.
	source string
	// filed are the stories the file marked passed when it was opened:
	// one the run works on after all (ralph retry) is not the agent's
	// claim for being marked there.
	filed map[string]bool
}

// Mirror is a file of the user's that the harness renders from the PRD's
// verdicts: a markdown plan whose boxes ralph ticks (internal/plan). It
// is written with the PRD (so the item's commit carries it) and put back
// like the PRD when an agent edits it.
type Mirror struct {
	Path   string // absolute
	Render func(passed func(id string) bool) []byte
}

// SetMirror makes m a file the PRD's write-back renders too.
func (s *prdDoc) SetMirror(m *Mirror) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mirror = m
}

// writeMirror renders the mirror from the model; changed reports that
// the file differed (an agent's edit, or a new verdict). Called with
// s.mu held.
func (s *prdDoc) writeMirror() (changed bool, err error) {
	if s.mirror == nil {
		return false, nil
	}
	b := s.mirror.Render(func(id string) bool {
		st := s.Doc.Story(id)
		return st != nil && st.Passes
	})
	if cur, err := os.ReadFile(s.mirror.Path); err == nil && bytes.Equal(cur, b) {
		return false, nil
	}
	return true, store.WriteFile(s.mirror.Path, b, 0o644)
}

// committed are the files the write-back changes that go into an item's
// commit: the PRD (not one in ralph's own .ralph folder, which git
// ignores) and the mirror.
func (s *prdDoc) committed() []string {
	var out []string
	if rel, err := filepath.Rel(s.Git.Dir, s.File); err != nil || !strings.HasPrefix(filepath.ToSlash(rel), ".ralph/") {
		out = append(out, s.File)
	}
	if s.mirror != nil {
		out = append(out, s.mirror.Path)
	}
	return out
}

// openPRDDoc loads and validates path.
func openPRDDoc(path string, repo *git.Repo, gates gate.Runner) (*prdDoc, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	doc, err := prd.Load(abs)
	if err != nil {
		return nil, err
	}
	branch := doc.BranchName
	if branch == "" {
		name := doc.Feature
		if name == "" {
			name = doc.Project
		}
		branch = "ralph/" + git.Slug(name, 50)
	}
	var commands []string
	for _, g := range doc.QualityChecks.Gates() {
		commands = append(commands, g.Command)
	}
	for i := range doc.Stories {
		for _, c := range doc.Stories[i].Checks {
			if !slices.Contains(commands, c) {
				commands = append(commands, c)
			}
		}
	}
	return &prdDoc{File: abs, Doc: doc, Git: repo, Gates: gates, Branch: branch, commands: commands,
		source: sourceName(repo.Dir, abs), filed: doc.PassedInFile()}, nil
}

func (s *prdDoc) Info() engine.SourceInfo {
	return engine.SourceInfo{Kind: "prd", Path: s.File, ItemKind: "story", PRDPath: s.File, Gated: len(s.commands) > 0 || s.reviewed(), Commands: s.commands}
}

func (s *prdDoc) Items() []engine.Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]engine.Item, 0, len(s.Doc.Stories))
	for _, st := range s.Doc.Stories {
		out = append(out, s.item(st))
	}
	return out
}

// ItemsVersion is engine.ItemsVersioned: it moves on when the Doc is
// replaced.
func (s *prdDoc) ItemsVersion() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Doc != s.itemsDoc {
		s.itemsDoc = s.Doc
		s.itemsVersion++
	}
	return s.itemsVersion
}

func (s *prdDoc) item(st prd.Story) engine.Item {
	return engine.Item{ID: st.ID, Title: st.Title, Description: st.Description, Criteria: st.AcceptanceCriteria, Kind: "story", Branch: s.Branch,
		Agent: st.Agent, Model: st.Model, Critical: st.Critical, Review: st.Review}
}

// reviewed: some story's evidence is a role's approval (its review),
// which can fail a claim as a check does.
func (s *prdDoc) reviewed() bool {
	return slices.ContainsFunc(s.Doc.Stories, func(st prd.Story) bool { return st.Review != "" })
}

// seededReason is how older versions of ralph marked a story a person
// passed before the run started (a state file they left is read).
const seededReason = "passes:true in the PRD before the run started"

// Sync reads, when a run starts, the stories the file already marks
// passed: a story whose commit of ralph's (with its trailer and this
// PRD's) is on the feature branch — or on the branch it is to be cut
// from — passed before the run; any other was marked by hand, and is
// engine.ItemMarked: neither run nor counted passed. When a run
// resumes, the saved state is believed only where the repository agrees:
// a story recorded as passed with a commit must have that commit on the
// feature branch with its trailer and this run's (a recorded commit the
// repository does not have — the state was saved ahead of git, as a power
// cut leaves it — gives way to the commit the branch records the story
// with); one recorded without a commit, and a marked one, is judged
// again as a mark (the file must still mark it). Any other is pending
// again (the engine reports it). A story's recorded base that the
// repository lacks is forgotten (forgetLostBases). The model follows the
// state; nothing is written.
func (s *prdDoc) Sync(st *engine.State, why engine.SyncReason) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := context.Background()
	switch why {
	case engine.SyncNewRun:
		inFile := s.Doc.PassedInFile()
		if len(inFile) == 0 {
			return nil
		}
		marks, err := s.marks(ctx)
		if err != nil {
			return err
		}
		for _, story := range s.Doc.Stories {
			if inFile[story.ID] {
				marks.judge(st.Item(story.ID), story.ID)
			}
		}
	case engine.SyncResume:
		var idx map[string]string
		if s.Git.BranchExists(ctx, s.Branch) {
			var err error
			idx, err = s.Git.TrailerIndex(ctx, s.Branch, storyTrailer, runTrailer, st.RunID)
			if err != nil {
				return fmt.Errorf("reading the commits of %s: %w", s.Branch, err)
			}
		}
		inFile := s.Doc.PassedInFile()
		var marks *markProof
		judgeMark := func(is *engine.ItemState, id string) error {
			if marks == nil {
				var err error
				if marks, err = s.marks(ctx); err != nil {
					return err
				}
			}
			marks.judge(is, id)
			return nil
		}
		for _, story := range s.Doc.Stories {
			is := st.Items[story.ID]
			if is == nil || !is.Done() {
				continue
			}
			if is.Status == engine.ItemMarked {
				if !inFile[story.ID] {
					// A person unticked it: work to do.
					is.Status, is.Reason = engine.ItemPending, ""
				} else if err := judgeMark(is, story.ID); err != nil {
					return err
				}
				continue
			}
			switch sha := idx[oneLine(story.ID)]; {
			case sha != "" && (is.Commit == "" || is.Commit == sha || lostCommit(ctx, s.Git, is.Commit)):
				is.Commit = sha
			case sha == "" && is.Commit != "" && committedIn(ctx, s.Git, is.Commit, storyTrailer, story.ID, st.RunID) == is.Commit:
				// The commit exists with the story's and this run's trailers
				// but the branch lost it (rewritten): the story stays
				// passed, and the guard restores the branch at the next
				// verification.
			case is.Commit == "" && seeded(is.Reason) && inFile[story.ID]:
				if err := judgeMark(is, story.ID); err != nil {
					return err
				}
			default:
				is.Status, is.Reason = engine.ItemPending, fmt.Sprintf("the saved state said passed (commit %q), but no commit on %s records it; verified again", is.Commit, s.Branch)
				is.Commit, is.PassedAt = "", nil
			}
		}
		forgetLostBases(ctx, s.Git, st)
		var newest time.Time
		for i := range s.Doc.Stories {
			story := &s.Doc.Stories[i]
			is := st.Items[story.ID]
			story.Passes = is.Done()
			if is != nil && is.Status == engine.ItemPassed && is.Commit != "" && is.PassedAt != nil && !is.PassedAt.Before(newest) {
				newest, s.resumedTip = *is.PassedAt, is.Commit
			}
		}
	}
	return nil
}

// markProof is what proves the marks of a PRD: the stories ralph's
// commits on rev record.
type markProof struct {
	rev    string            // the branch, as people name it
	proved map[string]string // story id (as a trailer has it) → commit
	how    string            // how the file marks a story
}

// marks reads which of the PRD's stories ralph's commits record on the
// feature branch, or on the branch it is to be cut from. Called with s.mu
// held.
func (s *prdDoc) marks(ctx context.Context) (*markProof, error) {
	m := &markProof{rev: s.Branch, how: "passes: true in " + filepath.Base(s.File)}
	if s.mirror != nil {
		m.how = "its box is ticked in " + filepath.Base(s.mirror.Path)
	}
	rev := s.Branch
	if !s.Git.BranchExists(ctx, rev) {
		if !s.Git.HasCommits(ctx) {
			return m, nil
		}
		rev, m.rev = "HEAD", "HEAD"
		if cur, err := s.Git.CurrentBranch(ctx); err == nil && cur != "" {
			m.rev = cur
		}
	}
	var err error
	if m.proved, err = provedMarks(ctx, s.Git, rev, storyTrailer, s.source); err != nil {
		return nil, fmt.Errorf("reading the commits of %s: %w", m.rev, err)
	}
	return m, nil
}

// judge makes the record of story id, which the file marks passed,
// passed when a commit of ralph's proves it, else marked by hand.
func (m *markProof) judge(is *engine.ItemState, id string) {
	if sha := m.proved[oneLine(id)]; sha != "" {
		is.Status, is.Reason = engine.ItemPassed, provedReason(m.rev, sha)
		return
	}
	is.Status, is.Reason = engine.ItemMarked, markedReason(m.how, m.rev)
}

// seeded reports whether a story's reason says it was passed before the
// run by its mark (proved, or trusted), not by a commit of this run.
func seeded(reason string) bool {
	return reason == seededReason || reason == engine.TrustedReason || strings.HasPrefix(reason, provedPrefix)
}

// excluded are the stories Next must not offer: blocked ones and busy ones.
func excluded(st *engine.State, busy map[string]bool) map[string]bool {
	out := map[string]bool{}
	for id, is := range st.Items {
		if is.Status == engine.ItemBlocked || busy[id] {
			out[id] = true
		}
	}
	return out
}

// gatesFor are the PRD's quality gates followed by the story's own checks.
// Called with s.mu held.
func (s *prdDoc) gatesFor(id string) []gate.Gate {
	var out []gate.Gate
	for _, g := range s.Doc.QualityChecks.Gates() {
		out = append(out, gate.Gate{Name: g.Name, Command: g.Command})
	}
	if st := s.Doc.Story(id); st != nil {
		for i, c := range st.Checks {
			out = append(out, gate.Gate{Name: fmt.Sprintf("%s check %d", id, i+1), Command: c})
		}
	}
	return out
}

// gatesOf are a story's gates and whether it may change their files.
func (s *prdDoc) gatesOf(id string) ([]gate.Gate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	allow := false
	if st := s.Doc.Story(id); st != nil {
		allow = st.AllowGateChanges
	}
	return s.gatesFor(id), allow
}

// GatesFor are the gates a story's tree must pass (the PRD's quality
// checks, then the story's own checks).
func (s *prdDoc) GatesFor(id string) []gate.Gate {
	g, _ := s.gatesOf(id)
	return g
}

// unclaimed is the verdict of an iteration that claimed nothing.
func (s *prdDoc) unclaimed(a *engine.Attempt) engine.Verdict {
	return engine.Verdict{Summary: "no completion claim",
		Failure: fmt.Sprintf("The previous iteration ended without claiming %s complete (no <promise>%s</promise> in its final message). Finish the story, run its checks, then claim it.", a.Item.ID, a.Promise)}
}

// terms are story it's: the PRD's gates, its checks and flags, the
// feature branch and the newest commit known there, its commit message
// and the PRD's write-back.
func (s *prdDoc) terms(it *engine.Item, st *engine.State) judge.Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := judge.Claim{Target: s.Branch, Tip: s.resumedTip, Subject: fmt.Sprintf("feat(%s): %s", it.ID, it.Title),
		Trailers: markedTrailers(storyTrailer, it.ID, st.RunID, s.source), Mark: s.mark(it.ID)}
	for _, g := range s.Doc.QualityChecks.Gates() {
		c.Gates = append(c.Gates, gate.Gate{Name: g.Name, Command: g.Command})
	}
	c.Protect = s.Doc.Protected
	if story := s.Doc.Story(it.ID); story != nil {
		for i, cmd := range story.Checks {
			c.Checks = append(c.Checks, gate.Gate{Name: fmt.Sprintf("%s check %d", it.ID, i+1), Command: cmd})
		}
		c.AllowTestChanges, c.AllowGateChanges, c.Review = story.AllowTestChanges, story.AllowGateChanges, story.Review
	}
	return c
}

// repoPath is p relative to the repository, when ralph commits it (not
// in its own .ralph folder, which git ignores).
func (s *prdDoc) repoPath(p string) (string, bool) {
	rel, err := filepath.Rel(s.Git.Dir, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false
	}
	rel = filepath.ToSlash(rel)
	return rel, !strings.HasPrefix(rel, ".ralph/")
}

// mark is story id's write-back for its commit: the PRD with the story
// marked passed (and the plan mirror rendered from it), in the format the
// file was read in — the harness's model of it when the work is built on
// the tip, else the PRD as the tree it is built on has it (stories ahead
// of it in the queue marked there).
func (s *prdDoc) mark(id string) func(parent func(string) []byte, onTip bool) (map[string][]byte, error) {
	return func(parent func(string) []byte, onTip bool) (map[string][]byte, error) {
		out := map[string][]byte{}
		rel, inRepo := s.repoPath(s.File)
		var doc *prd.PRD
		if b := parent(rel); inRepo && b != nil && !onTip {
			var err error
			if doc, err = prd.Parse(s.File, b); err != nil {
				return nil, fmt.Errorf("%s as the branch has it: %w", rel, err)
			}
		} else {
			s.mu.Lock()
			b, err := s.Doc.Marshal()
			s.mu.Unlock()
			if err != nil {
				return nil, err
			}
			if doc, err = prd.Parse(s.File, b); err != nil {
				return nil, err
			}
		}
		doc.MarkPassed(id)
		if inRepo {
			b, err := doc.Marshal()
			if err != nil {
				return nil, err
			}
			out[rel] = b
		}
		if s.mirror != nil {
			if mrel, ok := s.repoPath(s.mirror.Path); ok {
				out[mrel] = s.mirror.Render(func(id string) bool {
					st := doc.Story(id)
					return st != nil && st.Passes
				})
			}
		}
		return out, nil
	}
}

// restore compares the PRD file in the main tree with the harness's model,
// reports tampering, and rewrites the file from the model. A story the
// agent set to passes:true is its claim, never the verdict.
func (s *prdDoc) restore(current string) (tampered []string, claimed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if changed, _ := s.writeMirror(); changed {
		tampered = append(tampered, fmt.Sprintf("the agent changed %s, whose boxes only ralph ticks; restored", filepath.Base(s.mirror.Path)))
	}
	b, err := os.ReadFile(s.File)
	if err != nil {
		tampered = append(tampered, fmt.Sprintf("%s was removed or unreadable (%v); restored", filepath.Base(s.File), err))
	} else if s.written != nil && bytes.Equal(b, s.written) {
		return tampered, false // untouched since the harness wrote it
	} else {
		var more []string
		more, claimed = s.compare(b, current)
		tampered = append(tampered, more...)
	}
	_ = s.write()
	return tampered, claimed
}

// compare reads an agent's copy of the PRD against the harness's model.
// Called with s.mu held.
func (s *prdDoc) compare(b []byte, current string) (tampered []string, claimed bool) {
	disk, perr := prd.Parse(s.File, b)
	if perr != nil {
		return []string{fmt.Sprintf("%s no longer parses (%v); restored", filepath.Base(s.File), perr)}, false
	}
	if !sameGates(disk, s.Doc) {
		tampered = append(tampered, fmt.Sprintf("gate commands (quality_checks or a story's checks) in %s were changed by the agent; restored the harness's", filepath.Base(s.File)))
	}
	onDisk := storiesByID(disk)
	for _, st := range s.Doc.Stories {
		if d := onDisk[st.ID]; d != nil && d.AllowGateChanges != st.AllowGateChanges {
			tampered = append(tampered, fmt.Sprintf("the agent changed allow_gate_changes on %s in %s; restored", st.ID, filepath.Base(s.File)))
		}
		if d := onDisk[st.ID]; d != nil && d.AllowTestChanges != st.AllowTestChanges {
			tampered = append(tampered, fmt.Sprintf("the agent changed allow_test_changes on %s in %s; restored", st.ID, filepath.Base(s.File)))
		}
		if d := onDisk[st.ID]; d != nil && d.Critical != st.Critical {
			tampered = append(tampered, fmt.Sprintf("the agent changed critical on %s in %s; restored", st.ID, filepath.Base(s.File)))
		}
	}
	mine := s.Doc.PassedInFile()
	for id := range disk.PassedInFile() {
		if mine[id] || s.filed[id] {
			continue // (a story marked when the run began, reopened since: not a claim)
		}
		if id == current {
			claimed = true
		} else {
			tampered = append(tampered, fmt.Sprintf("the agent set passes:true on %s, which it was not working on; reverted", id))
		}
	}
	if claimed {
		tampered = append(tampered, fmt.Sprintf("the agent set passes:true on %s itself; treated as a claim, reverted until the gates pass", current))
	}
	return tampered, claimed
}

// write puts the model into the file (in the format it was read in),
// and renders the mirror. Called with s.mu held.
func (s *prdDoc) write() error {
	if _, err := s.writeMirror(); err != nil {
		return err
	}
	b, err := s.Doc.Marshal()
	if err != nil {
		return err
	}
	if cur, err := os.ReadFile(s.File); err == nil && bytes.Equal(cur, b) {
		s.written = b
		return nil
	}
	st, err := os.Stat(s.File)
	perm := os.FileMode(0o644)
	if err == nil {
		perm = st.Mode().Perm()
	}
	if err := store.WriteFile(s.File, b, perm); err != nil {
		s.written = nil
		return err
	}
	s.written = b
	return nil
}

// setPassed records a story's verdict in the model and the file.
func (s *prdDoc) setPassed(id string, passed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if passed {
		s.Doc.MarkPassed(id)
	} else if st := s.Doc.Story(id); st != nil {
		st.Passes = false
	}
	return s.write()
}

// markModel marks story id passed in the model only: the file in the
// tree already holds it (the commit that landed wrote it there).
func (s *prdDoc) markModel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Doc.MarkPassed(id)
	if b, err := os.ReadFile(s.File); err == nil {
		s.written = b
	}
}

// sameGates compares every gate command: the PRD's and each story's.
func sameGates(a, b *prd.PRD) bool {
	if a.QualityChecks != b.QualityChecks {
		return false
	}
	byID := storiesByID(a)
	for _, sb := range b.Stories {
		sa := byID[sb.ID]
		if sa == nil || strings.Join(sa.Checks, "\x00") != strings.Join(sb.Checks, "\x00") {
			return false
		}
	}
	return true
}

// storiesByID indexes a PRD's stories (one pass, where looking each up
// would be quadratic in the stories).
func storiesByID(p *prd.PRD) map[string]*prd.Story {
	m := make(map[string]*prd.Story, len(p.Stories))
	for i := range p.Stories {
		m[p.Stories[i].ID] = &p.Stories[i]
	}
	return m
}

// BaselineGates are the gates the baseline runs — the PRD's quality
// checks, not a story's own checks (they are asked per story, at its
// base) — and the branch they run on: the feature branch, or the branch
// it is about to be cut from.
func (s *prdDoc) BaselineGates(ctx context.Context) (string, []gate.Gate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev := "HEAD"
	if s.Git.BranchExists(ctx, s.Branch) {
		rev = s.Branch
	}
	return rev, s.gatesFor("")
}

// allowTestChanges is the story's allow_test_changes in the harness's
// copy of the PRD.
func (s *prdDoc) allowTestChanges(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.Doc.Story(id)
	return st != nil && st.AllowTestChanges
}
