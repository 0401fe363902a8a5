// Package source adapts ralph's work formats (PRD, task tree, pipeline)
// to the engine's Source interface: which item is next, which tree it
// runs in, how "done" is verified and recorded in git.
package source

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
)

// PRD runs the stories of a prd.json on one feature branch, one commit
// per story. The harness keeps its own copy of the PRD (loaded at start):
// the file in the tree is rewritten from it after every iteration, so an
// agent that flips "passes" or edits the gate commands is reverted.
type PRD struct {
	File   string // absolute path
	Doc    *prd.PRD
	Git    *git.Repo
	Gates  gate.Runner
	Branch string // feature branch
	// Parallel: stories run in worktrees and merge through the queue.
	Parallel bool
	original []byte
	mu       sync.Mutex     // guards Doc and the main tree's checkout
	onBranch bool           // the main tree was seen on Branch this run
	waiting  map[string]int // per story, how many stories wait on it

	// Parallel bookkeeping, under wmu (never held across a git call, so
	// preparing and verifying worktrees never wait for a merge).
	wmu       sync.Mutex
	wtAdmin   sync.RWMutex // worktree adds vs. commands that list worktrees
	mainReady bool         // main tree on Branch and stale worktrees pruned
	tip       string       // the feature branch's head after our last merge
	// branchPRD holds each worktree's PRD bytes as cut, so restoring the
	// agent's copy needs no git call; merging marks worktrees in a merge.
	branchPRD map[string][]byte
	merging   map[string]bool
	// parked are worktrees of stories merged this run, ready for the next
	// story; leftover are merged stories' worktrees from a crashed run;
	// merged are those stories' branches, deleted in one call when the run
	// stops; bases are the tips new worktrees were cut at.
	parked   []string
	leftover []string
	merged   []string
	bases    map[string]string
	// readying are worktrees being readied (or ready) for stories not yet
	// started; starting are stories inside Prepare; dropped are stories
	// whose readied tree another story took.
	readying map[string]*readied
	starting map[string]bool
	dropped  map[string]bool
	// prdTracked: the PRD is in git's index (known after the first merge
	// of the run, or seen at its start), so a commit can --include it.
	prdTracked bool
}

// OpenPRD loads and validates path.
func OpenPRD(path string, repo *git.Repo, gates gate.Runner) (*PRD, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	doc, err := prd.Load(abs)
	if err != nil {
		return nil, err
	}
	b, _ := os.ReadFile(abs)
	branch := doc.BranchName
	if branch == "" {
		name := doc.Feature
		if name == "" {
			name = doc.Project
		}
		branch = "ralph/" + git.Slug(name, 50)
	}
	return &PRD{File: abs, Doc: doc, Git: repo, Gates: gates, Branch: branch, original: b}, nil
}

func (s *PRD) Kind() string { return "prd" }
func (s *PRD) Path() string { return s.File }

func (s *PRD) Items() []engine.Item {
	out := make([]engine.Item, 0, len(s.Doc.Stories))
	for _, st := range s.Doc.Stories {
		out = append(out, storyItem(st))
	}
	return out
}

func storyItem(st prd.Story) engine.Item {
	return engine.Item{ID: st.ID, Title: st.Title, Description: st.Description, Criteria: st.AcceptanceCriteria, Kind: "story"}
}

// Seed trusts stories that were already passed in the file before the
// first run: a person put them there, not an agent of this run.
func (s *PRD) Seed(st *engine.State) {
	for id := range s.Doc.PassedInFile() {
		if is := st.Items[id]; is != nil {
			is.Status = engine.ItemPassed
			is.Reason = "passes:true in the PRD before the run started"
		}
	}
}

func (s *PRD) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	exclude := map[string]bool{}
	for id, is := range st.Items {
		if is.Status == engine.ItemBlocked || busy[id] {
			exclude[id] = true
		}
	}
	var story *prd.Story
	if s.Parallel {
		s.mu.Lock()
		if s.waiting == nil {
			s.waiting = s.Doc.Dependents() // the graph is fixed for the run
		}
		ready := s.Doc.ReadyStoriesUnblockingFirst(st.Passed(), exclude, s.waiting)
		s.mu.Unlock()
		if len(ready) > 0 {
			story = ready[0]
		}
	} else {
		story = s.Doc.NextStory(st.Passed(), exclude)
	}
	if story == nil {
		return nil, nil
	}
	it := storyItem(*story)
	return &it, nil
}

// Prepare puts the main tree on the feature branch, creating it from the
// current branch the first time.
func (s *PRD) Prepare(ctx context.Context, it *engine.Item, st *engine.State) (string, error) {
	if s.Parallel {
		return s.prepareWorktree(ctx, it)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onBranch {
		// Checked once per run; Accept checks again before it commits, in
		// case the agent switched branches.
		return s.Git.Dir, nil
	}
	return s.prepareMain(ctx)
}

func (s *PRD) prepareMain(ctx context.Context) (string, error) {
	cur, err := s.Git.CurrentBranch(ctx)
	if err != nil {
		return "", err
	}
	if cur != s.Branch {
		if !s.Git.HasCommits(ctx) {
			return "", engine.UsageError("the repository has no commits yet: make a first commit so ralph can branch %s from it", s.Branch)
		}
		if !s.Git.BranchExists(ctx, s.Branch) {
			if err := s.Git.CheckRefName(ctx, s.Branch); err != nil {
				return "", engine.UsageError("branch_name in %s: %v", s.File, err)
			}
			if err := s.Git.CreateBranch(ctx, s.Branch, ""); err != nil {
				return "", err
			}
		}
		if err := s.Git.Checkout(ctx, s.Branch); err != nil {
			return "", fmt.Errorf("switching to %s: %w", s.Branch, err)
		}
	}
	s.onBranch = true
	return s.Git.Dir, nil
}

func (s *PRD) PromptData(it *engine.Item, d *engine.PromptData) {
	d.PRDPath = s.File
	d.Branch = s.Branch
}

// Verify restores the control plane, then checks the claim and runs the
// gates on the tree that would be committed.
func (s *PRD) Verify(ctx context.Context, a *engine.Attempt, st *engine.State) engine.Verdict {
	var tampered []string
	var claimedInFile bool
	if s.Parallel {
		tampered, claimedInFile = s.restoreWorktree(ctx, a.Dir, a.Item.ID)
		s.wmu.Lock()
		merging := s.merging[a.Item.ID]
		s.wmu.Unlock()
		// Conflict markers can only be left where a merge was replayed.
		if merging {
			if left := conflictMarkers(ctx, s.Git.At(a.Dir)); len(left) > 0 {
				return engine.Verdict{Tampered: tampered, Summary: "conflict markers remain in " + strings.Join(left, ", "),
					Failure: "These files still hold conflict markers (<<<<<<< … >>>>>>>): " + strings.Join(left, ", ") + ". Resolve them."}
			}
		}
	} else {
		s.mu.Lock()
		tampered, claimedInFile = s.restore(a.Item.ID)
		s.mu.Unlock()
	}
	if a.Result.Failed() {
		v := engine.AgentFailure(a.Result)
		v.Tampered = tampered
		return v
	}
	claimed := a.Claimed || claimedInFile
	if !claimed {
		return engine.Verdict{Tampered: tampered, Summary: "no completion claim",
			Failure: fmt.Sprintf("The previous iteration ended without claiming %s complete (no <promise>%s</promise> in its final message). Finish the story, run its checks, then claim it.", a.Item.ID, a.Promise)}
	}
	s.mu.Lock()
	gates := prdGates(s.Doc, a.Item.ID)
	s.mu.Unlock()
	if len(gates) == 0 {
		return engine.Verdict{Passed: true, Claimed: true, Tampered: tampered, Summary: "claimed complete (no quality gates configured)"}
	}
	results, ok := s.Gates.Run(ctx, a.Dir, gates, a.Log)
	v := engine.Verdict{Passed: ok, Claimed: true, Gates: results, Tampered: tampered, Summary: gate.Summary(results)}
	if !ok {
		v.Failure = gate.FailureContext(results, 4<<10)
	}
	return v
}

// prdGates are the PRD's quality gates followed by the story's own checks.
func prdGates(d *prd.PRD, id string) []gate.Gate {
	var out []gate.Gate
	for _, g := range d.QualityChecks.Gates() {
		out = append(out, gate.Gate{Name: g.Name, Command: g.Command})
	}
	if st := d.Story(id); st != nil {
		for i, c := range st.Checks {
			out = append(out, gate.Gate{Name: fmt.Sprintf("%s check %d", id, i+1), Command: c})
		}
	}
	return out
}

// restore compares the PRD file in the tree with the harness's model,
// reports tampering, and rewrites the file from the model. A story the
// agent set to passes:true is its claim, never the verdict.
func (s *PRD) restore(current string) (tampered []string, claimed bool) {
	b, err := os.ReadFile(s.File)
	if err != nil {
		tampered = append(tampered, fmt.Sprintf("%s was removed or unreadable (%v); restored", filepath.Base(s.File), err))
	} else {
		tampered, claimed = s.compare(b, current)
	}
	_ = s.write()
	return tampered, claimed
}

// compare reads an agent's copy of the PRD against the harness's model.
func (s *PRD) compare(b []byte, current string) (tampered []string, claimed bool) {
	disk, perr := prd.Parse(s.File, b)
	if perr != nil {
		return []string{fmt.Sprintf("%s no longer parses (%v); restored", filepath.Base(s.File), perr)}, false
	}
	if !sameGates(disk, s.Doc) {
		tampered = append(tampered, fmt.Sprintf("gate commands (quality_checks or a story's checks) in %s were changed by the agent; restored the harness's", filepath.Base(s.File)))
	}
	mine := s.Doc.PassedInFile()
	for id := range disk.PassedInFile() {
		if mine[id] {
			continue
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

func (s *PRD) write() error {
	b, err := s.Doc.Marshal()
	if err != nil {
		return err
	}
	if cur, err := os.ReadFile(s.File); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	st, err := os.Stat(s.File)
	perm := os.FileMode(0o644)
	if err == nil {
		perm = st.Mode().Perm()
	}
	return store.WriteFile(s.File, b, perm)
}

// Accept marks the story passed in the PRD and commits everything the
// iteration changed as one commit on the feature branch.
func (s *PRD) Accept(ctx context.Context, a *engine.Attempt, v engine.Verdict, st *engine.State) (string, error) {
	if s.Parallel {
		return s.acceptParallel(ctx, a, v, st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.prepareMain(ctx); err != nil {
		return "", err
	}
	id := a.Item.ID
	s.Doc.MarkPassed(id)
	if err := s.write(); err != nil {
		return "", err
	}
	repo := s.Git.At(a.Dir)
	if base := st.Items[id].BaseHead; base != "" {
		if head, _ := repo.Head(ctx); head != base {
			if err := repo.ResetSoft(ctx, base); err != nil {
				return "", err
			}
		}
	}
	if _, err := repo.AddAllExcept(ctx, st.Preexisting); err != nil {
		return "", err
	}
	msg := CommitMessage(fmt.Sprintf("feat(%s): %s", id, a.Item.Title), a.Learnings, v.Summary,
		"Ralph-Story: "+id, "Ralph-Run: "+st.RunID)
	return repo.Commit(ctx, msg, true)
}

// CommitMessage builds subject, bullet body and trailers.
func CommitMessage(subject string, bullets []string, result string, trailers ...string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(subject))
	b.WriteString("\n\n")
	for _, l := range bullets {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	if result != "" {
		fmt.Fprintf(&b, "- Verified by ralph: %s\n", result)
	}
	b.WriteString("\n")
	for _, t := range trailers {
		b.WriteString(t + "\n")
	}
	return b.String()
}

// Recover reports whether a story's commit landed before a crash.
func (s *PRD) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if s.Parallel {
		return s.recoverParallel(ctx, it, st)
	}
	head, err := s.Git.Head(ctx)
	if err != nil {
		return "", false, err
	}
	if base := st.Items[it.ID].BaseHead; head != base && s.Git.Trailer(ctx, "HEAD", "Ralph-Story") == it.ID {
		s.Doc.MarkPassed(it.ID)
		return head, true, s.write()
	}
	return "", false, nil
}

// Block keeps the story's unfinished work on a side branch for a person
// and returns the feature branch to where the story started.
func (s *PRD) Block(ctx context.Context, it *engine.Item, st *engine.State, reason string) error {
	if s.Parallel {
		// A person takes over: the story's branch and worktree stay as they
		// are (conflict included); the reason is in the state.
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	base := st.Items[it.ID].BaseHead
	if base == "" {
		return nil
	}
	side := "ralph/blocked/" + git.Slug(it.ID, 40) + "-" + st.RunID
	for n := 2; s.Git.BranchExists(ctx, side); n++ {
		side = fmt.Sprintf("ralph/blocked/%s-%s-%d", git.Slug(it.ID, 40), st.RunID, n)
	}
	if err := s.Git.CreateBranch(ctx, side, ""); err != nil {
		return err
	}
	if err := s.Git.Checkout(ctx, side); err != nil {
		return err
	}
	if _, err := s.Git.AddAllExcept(ctx, st.Preexisting); err != nil {
		return err
	}
	msg := CommitMessage(fmt.Sprintf("wip(%s): %s (blocked)", it.ID, it.Title), nil, "", "Ralph-Blocked: "+it.ID, "Reason: "+strings.ReplaceAll(reason, "\n", " "))
	if _, err := s.Git.Commit(ctx, msg, true); err != nil {
		return err
	}
	if err := s.Git.Checkout(ctx, s.Branch); err != nil {
		return err
	}
	if err := s.Git.ResetHard(ctx, base); err != nil {
		return err
	}
	return s.write()
}

// sameGates compares every gate command: the PRD's and each story's.
func sameGates(a, b *prd.PRD) bool {
	if a.QualityChecks != b.QualityChecks {
		return false
	}
	for _, sb := range b.Stories {
		sa := a.Story(sb.ID)
		if sa == nil || strings.Join(sa.Checks, "\x00") != strings.Join(sb.Checks, "\x00") {
			return false
		}
	}
	return true
}
