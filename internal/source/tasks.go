package source

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/tasks"
	"github.com/ralph-loop/ralph/internal/usage"
)

// taskTrailer is the trailer on every squash commit the tasks loop makes;
// Recover looks for it to tell whether a merge landed before a crash.
const taskTrailer = "Ralph-Task"

// InputError marks a problem with the user's input (a tasks file that does
// not validate): the CLI maps it to exit code 2.
type InputError struct{ Err error }

func (e *InputError) Error() string    { return e.Err.Error() }
func (e *InputError) Unwrap() error    { return e.Err }
func (e *InputError) UsageError() bool { return true }

// Tasks runs the leaf tasks of a tasks.jsonl tree. Each task is
// claimed, worked on its own branch task/<id>-<slug> created from the base
// branch (the one checked out when the run started), and, once the agent
// has completed it (`ralph task complete ID`, "status":"complete" in the
// file, or the promise) and the gates pass on the branch, squash-merged
// into the base branch as one commit ("[ID] title", the branch's commit
// subjects as bullets, "Completes: ID"), the branch deleted and the
// task archived with the squash commit's SHA.
//
// tasks.jsonl and tasks-done.jsonl are the loop's control plane: they are
// never part of a task's commits, and they carry over unchanged when the
// loop switches branches (git operations run with the files set aside
// under the store's lock, in .ralph/tasks-aside.json while it lasts).
type Tasks struct {
	File     string // absolute tasks.jsonl
	Store    *tasks.Store
	Git      *git.Repo
	Root     string
	Gates    gate.Runner
	GateList []gate.Gate

	base    string
	baseTip string // the base branch's head as ralph last left it
	set     *tasks.Set
	// tracked are the leaves with a record (Sparse): in the run's state,
	// claimed, completed or blocked in the file, or offered by Next. The
	// other pending leaves are only counted.
	tracked map[string]bool
	before  fileSnap // the files when the iteration started
	// checkedRef is the last branch name git accepted.
	checkedRef string
	beforeSet  *tasks.Set
	// carried are tamper reports made before the verdict they go with
	// (a claim that undid edits an agent made before ralph was killed).
	carried []string
	loaded  filesStamp // the files' stamp when set was read (reload)
	split   map[string]splitInfo
	state   *engine.State // the run's, as Prepare was given it
	// source names the task tree in its tasks' commits (sourceName).
	source string
	// archive is what the archive's tasks were found to be, by id: the
	// commit of ralph's on the base branch that proves one, or "" for one
	// marked done by hand (a line written into tasks-done.jsonl, a
	// "complete" archived without a commit of ralph's); scanned is the set
	// the archive was last looked through in.
	archive map[string]string
	scanned *tasks.Set
}

type splitInfo struct {
	children []string
	work     bool // the branch has work of its own
}

// fileSnap is the task files set aside while a merge checks out other
// branches. On disk it is tasks-aside.json naming the files, beside raw
// copies tasks-aside.json.active and .done (a JSON string of a 7 MB file
// costs more to encode than the whole iteration); the copies are written
// first, so the marker never names a copy that is not there.
type fileSnap struct {
	Active     []byte `json:"active,omitempty"` // files set aside by older versions carry the bytes here
	HasActive  bool   `json:"has_active"`
	Done       []byte `json:"done,omitempty"`
	HasDone    bool   `json:"has_done"`
	ActivePath string `json:"active_path"`
	DonePath   string `json:"done_path"`
}

// OpenTasks loads and validates path and remembers the current branch as
// the base branch.
func OpenTasks(ctx context.Context, path string, repo *git.Repo, root string, gates gate.Runner, list []gate.Gate) (*Tasks, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, usage.Errorf("tasks file %s: %v (create it with `ralph task add ID TITLE`)", path, errors.Unwrap(err))
	}
	s := &Tasks{File: abs, Store: tasks.Open(abs), Git: repo, Root: root, Gates: gates, GateList: list,
		tracked: map[string]bool{}, split: map[string]splitInfo{}, source: sourceName(root, abs), archive: map[string]string{}}
	if err := s.restoreAside(); err != nil {
		return nil, err
	}
	if err := s.reload(); err != nil {
		return nil, err
	}
	if err := repo.EnsureExcluded(ctx, "/.ralph/"); err != nil {
		return nil, err
	}
	for _, p := range []string{s.Store.LockPath, s.Store.HoldPath} {
		if rel, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(rel, "..") {
			if err := repo.EnsureExcluded(ctx, "/"+filepath.ToSlash(rel)); err != nil {
				return nil, err
			}
		}
	}
	if repo.HasCommits(ctx) {
		if err := s.loadBase(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// loadBase takes the current branch as the base branch and records it in
// .ralph/tasks-loop.json; a run restarted on a task branch (after a crash)
// reads it back from there.
func (s *Tasks) loadBase(ctx context.Context) error {
	cur, err := s.Git.CurrentBranch(ctx)
	if err != nil {
		return err
	}
	p := filepath.Join(s.Root, ".ralph", "tasks-loop.json")
	var rec struct {
		Base string `json:"base"`
	}
	if strings.HasPrefix(cur, "task/") {
		if err := store.ReadJSON(p, &rec); err != nil || rec.Base == "" {
			return usage.Errorf("%s is a task branch: check out the branch tasks should be merged into (e.g. main) and run again", cur)
		}
		s.base = rec.Base
		return nil
	}
	s.base = cur
	rec.Base = cur
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return store.WriteJSON(p, rec)
}

// Info names the task store's files: besides tasks.jsonl, the archive and
// the lock and hold files are ralph's, never the user's dirty work.
func (s *Tasks) Info() engine.SourceInfo {
	return engine.SourceInfo{Kind: "tasks", Path: s.File, ItemKind: "task", TasksPath: s.File, Gated: len(s.GateList) > 0, Commands: gateCommands(s.GateList),
		ControlFiles: []string{s.Store.DonePath, s.Store.LockPath, s.Store.HoldPath}}
}

// Base is the branch tasks are merged into.
func (s *Tasks) Base() string { return s.base }

// reload reads the task files again, unless neither changed since the
// set the run sees was read from them: parsing 5,000 tasks costs more
// than the rest of an iteration, and an iteration asks at its end and
// again when the next one is chosen.
func (s *Tasks) reload() error {
	stamp, ok := s.stamp()
	if ok && s.set != nil && stamp == s.loaded {
		return nil
	}
	set, err := s.Store.Load()
	if err != nil {
		var ve *tasks.ValidationError
		if errors.As(err, &ve) {
			return &InputError{err}
		}
		return err
	}
	s.use(set)
	if ok {
		s.loaded = stamp // taken before the read: a write meanwhile shows next time
	}
	return nil
}

// filesStamp tells one state of both task files from another: size,
// modification time and inode of each (every writer either renames a new
// file in or appends, and both change them).
type filesStamp [2]struct {
	size, mtime int64
	ino         uint64
}

// stamp is the task files' stamp now; false when one cannot be read.
func (s *Tasks) stamp() (filesStamp, bool) {
	var st filesStamp
	for i, p := range []string{s.File, s.Store.DonePath} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return st, false
		}
		sys, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return st, false
		}
		st[i].size, st[i].mtime, st[i].ino = fi.Size(), fi.ModTime().UnixNano(), uint64(sys.Ino)
	}
	return st, true
}

// use makes set the tasks the run sees.
func (s *Tasks) use(set *tasks.Set) {
	s.set = set
	for _, status := range []string{tasks.StatusActive, tasks.StatusComplete, tasks.StatusBlocked} {
		for _, t := range set.Open(status) {
			if t.Leaf {
				s.tracked[t.ID] = true
			}
		}
	}
}

// Items are the tracked leaves (see Sparse), archived ones included, in id
// order.
func (s *Tasks) Items() []engine.Item {
	out := make([]engine.Item, 0, len(s.tracked))
	for id := range s.tracked {
		if t, ok := s.set.Get(id); ok && t.Leaf {
			out = append(out, s.item(t))
		}
	}
	slices.SortFunc(out, func(a, b engine.Item) int { return tasks.CompareIDs(a.ID, b.ID) })
	return out
}

// Untracked counts the pending leaves of tasks.jsonl that have no record.
func (s *Tasks) Untracked() int {
	n := 0
	for _, t := range s.set.Open(tasks.StatusPending) {
		if t.Leaf && !s.tracked[t.ID] {
			n++
		}
	}
	return n
}

func (s *Tasks) item(t *tasks.Task) engine.Item {
	var b strings.Builder
	if raw, ok := t.Field("description"); ok {
		var d string
		if jsonString(raw, &d) && d != "" {
			b.WriteString(d + "\n\n")
		}
	}
	var path []string
	for p := t.Parent(); p != ""; p = tasks.ParentID(p) {
		if pt, ok := s.set.Get(p); ok {
			path = append([]string{pt.ID + " " + pt.Title}, path...)
		}
	}
	if len(path) > 0 {
		fmt.Fprintf(&b, "Part of: %s.\n\n", strings.Join(path, " › "))
	}
	fmt.Fprintf(&b, `You are on the git branch %s; commit your work there as often as you like (the harness squash-merges it into %s when the task is done).
When the task is done and its checks pass, run `+"`ralph task complete %s`"+`. If it is too big for one iteration, split it: `+"`ralph task split %s \"first part\" \"second part\"`"+` (or `+"`ralph task add --parent %s TITLE`"+`); the loop then works on the subtasks. Do not complete or claim other tasks: the harness archives tasks itself after running the gates.`,
		s.branchName(t.ID, t.Title), s.baseName(), t.ID, t.ID, t.ID)
	it := engine.Item{ID: t.ID, Title: t.Title, Description: b.String(), Kind: "task", Branch: s.branchName(t.ID, t.Title)}
	it.Agent, it.Model, it.Critical = t.Settings()
	return it
}

func (s *Tasks) baseName() string {
	if s.base == "" {
		return "the base branch"
	}
	return s.base
}

// branchName is task/<id>-<slug of the title>, safe for git whatever the
// title holds.
func (s *Tasks) branchName(id, title string) string {
	b := "task/" + id + "-" + git.Slug(title, 40)
	if strings.Contains(id, "..") || strings.HasSuffix(b, ".lock") || strings.HasPrefix(id, ".") {
		b = "task/" + git.Slug(id, 30) + "-" + git.Slug(title, 40)
	}
	return b
}

// branch is the task's branch name, checked by git once per name (an
// iteration asks for it three times).
func (s *Tasks) branch(ctx context.Context, it *engine.Item) (string, error) {
	b := s.branchName(it.ID, it.Title)
	if s.checkedRef == b {
		return b, nil
	}
	if err := s.Git.CheckRefName(ctx, b); err != nil {
		b = "task/" + git.Slug(it.ID, 30) + "-" + git.Slug(it.Title, 40)
		if err := s.Git.CheckRefName(ctx, b); err != nil {
			return "", err
		}
	}
	s.checkedRef = b
	return b, nil
}

// Sync makes the run state agree with the files: tasks archived by anyone
// are passed, tasks blocked in the file are blocked, tasks a person
// unblocked get their attempts back. When the run watches for work, the
// files are read again first (others append tasks).
func (s *Tasks) Sync(st *engine.State, why engine.SyncReason) error {
	if why == engine.SyncPoll {
		if err := s.reload(); err != nil {
			return err
		}
	}
	s.sync(st)
	if why == engine.SyncNewRun || why == engine.SyncResume {
		// A claim with no iteration under way (a crash between the claim
		// and the state's record of it, or a file written that way) is
		// resumed; say so.
		running := map[string]bool{}
		for _, c := range st.Current {
			running[c.Item] = true
		}
		for _, t := range s.set.Open(tasks.StatusActive) {
			if is := st.Item(t.ID); t.Leaf && !running[t.ID] && resumable(st, t.ID) && is.Reason == "" {
				is.Reason = strandedReason
			}
		}
		// A leaf "complete" in tasks.jsonl that no iteration holds as its
		// claim was marked by hand: the next write archives it as it is.
		held := s.Store.Held()
		var marked []*tasks.Task
		for _, t := range s.set.Open(tasks.StatusComplete) {
			if is := st.Items[t.ID]; t.Leaf && !running[t.ID] && !held[t.ID] && !is.Done() && (is == nil || is.Status != engine.ItemBlocked) {
				marked = append(marked, t)
			}
		}
		s.judgeMarks(st, marked, `"status": "complete" in `+filepath.Base(s.File))
	}
	return nil
}

func (s *Tasks) sync(st *engine.State) {
	// Leaves this run recorded are its items even once archived (a resumed
	// run counts the tasks of the processes before it too).
	for id := range st.Items {
		if t, ok := s.set.Get(id); ok && t.Leaf {
			s.tracked[id] = true
		}
	}
	for _, it := range s.Items() {
		if st.Items[it.ID] == nil {
			st.Item(it.ID) // tasks added since the run started (splits, appends)
		}
	}
	var archived []*tasks.Task // archived since the state last looked
	for id, is := range st.Items {
		t, ok := s.set.Get(id)
		if !ok {
			continue
		}
		switch {
		case !t.Archived() && is.Status == engine.ItemMarked && t.Status == tasks.StatusComplete:
			// Marked complete by hand: the next write archives it.
		case !t.Archived() && is.Done():
			// The archive is the record of a completed task: a state
			// that says passed without it is not believed.
			is.Status, is.Commit, is.PassedAt = engine.ItemPending, "", nil
			is.Reason = fmt.Sprintf("the saved state said passed, but %s does not archive it; worked on again", filepath.Base(s.Store.DonePath))
		case t.Archived():
			if !is.Done() {
				archived = append(archived, t)
			}
		case t.Leaf && t.Status == tasks.StatusBlocked:
			if is.Status != engine.ItemBlocked && is.Status != engine.ItemRunning {
				is.Status = engine.ItemBlocked
				is.Reason = t.Reason
			}
		case t.Leaf && t.Status == tasks.StatusPending && is.Status == engine.ItemBlocked:
			is.Status = engine.ItemPending
			is.Attempts = 0
			is.Reason = ""
		}
	}
	s.judgeArchive(st, archived)
}

// judgeArchive judges the archived leaves among the run's items that it
// has not counted done yet (archived), and the archive's other leaves when
// the files changed since it last looked (judgeMarks).
func (s *Tasks) judgeArchive(st *engine.State, archived []*tasks.Task) {
	if s.scanned != s.set {
		s.scanned = s.set
		for _, t := range s.set.Archived() {
			if _, known := s.archive[t.ID]; !known && t.Leaf && st.Items[t.ID] == nil {
				archived = append(archived, t)
			}
		}
	}
	s.judgeMarks(st, archived, "archived in "+filepath.Base(s.Store.DonePath))
}

// judgeMarks judges tasks the files mark done (how says how) by the
// commits of ralph's on the base branch (one look at its history, only
// for a task not judged before): a task one of them records passed; any
// other is marked done by hand (engine.ItemMarked) and becomes one of the
// run's items, counted apart. A proved task the run never worked on
// stays out of its items, as every task completed before it.
func (s *Tasks) judgeMarks(st *engine.State, marked []*tasks.Task, how string) {
	rev, name := s.base, s.base
	if rev == "" {
		rev, name = "HEAD", "HEAD"
	}
	var proved map[string]string
	looked := false
	for _, t := range marked {
		sha, known := s.archive[t.ID]
		if !known {
			if !looked {
				// No history to read (no commits yet): nothing is proved.
				proved, _ = provedMarks(context.Background(), s.Git, rev, taskTrailer, s.source)
				looked = true
			}
			sha = proved[oneLine(t.ID)]
			if t.Archived() {
				s.archive[t.ID] = sha
			}
		}
		is := st.Items[t.ID]
		switch {
		case sha != "" && is == nil:
		case sha != "":
			is.Status, is.Commit, is.Reason = engine.ItemPassed, cmp.Or(t.Commit, sha), how+" with ralph's commit "+short(sha)+" on "+name
		default:
			s.tracked[t.ID] = true
			is = st.Item(t.ID)
			is.Title = t.Title
			is.Status, is.Commit, is.Reason = engine.ItemMarked, "", markedReason(how, name)
		}
	}
}

// resumable reports whether a claimed (active) task is this run's to work
// on: the run holds the run lock, so no other loop has a live iteration on
// it — a claim left by a crash, or written before the run, is resumed.
func resumable(st *engine.State, id string) bool {
	is := st.Items[id]
	return is == nil || is.Status != engine.ItemBlocked && !is.Done()
}

// strandedReason marks a claim that no iteration held when the run began.
const strandedReason = "claimed (active) in the tasks file, but no iteration was working on it; this run resumes it"

// Next re-reads the files (anyone may have changed them) and returns the
// task this run was working on, else the next pending leaf in id order.
func (s *Tasks) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	if err := s.reload(); err != nil {
		return nil, err
	}
	st = st.Clone() // Next leaves what it is given as it was; sync corrects this copy (it holds only the tasks touched)
	s.sync(st)
	for _, status := range []string{tasks.StatusActive, tasks.StatusComplete} {
		for _, t := range s.set.Open(status) {
			if t.Leaf && !busy[t.ID] && resumable(st, t.ID) {
				it := s.item(t)
				return &it, nil
			}
		}
	}
	t := s.set.Next()
	if t == nil || busy[t.ID] {
		return nil, nil
	}
	if is := st.Items[t.ID]; is != nil && is.Status == engine.ItemBlocked {
		return nil, nil
	}
	s.tracked[t.ID] = true
	it := s.item(t)
	return &it, nil
}

// Prepare claims the task and puts the tree on its branch, creating it
// from the base branch the first time.
func (s *Tasks) Prepare(ctx context.Context, it *engine.Item, st *engine.State) (engine.Workspace, error) {
	s.state = st
	dir, err := s.prepare(ctx, it)
	return engine.Workspace{Dir: dir, Follow: s.follow}, err
}

// follow moves the main tree from the task's branch to the base branch
// once the task's work landed there: the tree already holds exactly that
// work, so HEAD goes to the base branch and the index is the one the work
// was recorded in (no checkout, nothing rewritten).
func (s *Tasks) follow(ctx context.Context, v engine.Verdict, old, landed string) error {
	if _, err := s.Git.Run(ctx, "symbolic-ref", "HEAD", "refs/heads/"+s.base); err != nil {
		return err
	}
	s.baseTip = landed
	return followTree(ctx, s.Git, v, landed)
}

func (s *Tasks) prepare(ctx context.Context, it *engine.Item) (string, error) {
	if s.base == "" || !s.Git.HasCommits(ctx) {
		return "", usage.Errorf("the repository has no commits yet: make a first commit so ralph can branch tasks from it")
	}
	if strings.HasPrefix(s.base, "task/") {
		return "", usage.Errorf("the run started on %s, a task branch: check out the branch tasks should be merged into (e.g. main) and run again", s.base)
	}
	branch, err := s.branch(ctx, it)
	if err != nil {
		return "", err
	}
	if s.baseTip == "" {
		if s.baseTip, err = s.Git.RevParse(ctx, s.base); err != nil {
			return "", err
		}
	}
	cur, err := s.Git.CurrentBranch(ctx)
	if err != nil {
		return "", err
	}
	if cur != branch && !s.Git.BranchExists(ctx, branch) {
		if err := s.Git.CreateBranch(ctx, branch, s.base); err != nil {
			return "", err
		}
	}
	// The claim, then the switch to the task's branch, under one hold of
	// the task lock: the files the agent's changes are judged against are
	// the ones the claim left.
	claim := func() error {
		s.before, s.beforeSet = fileSnap{}, nil
		err := s.Store.UpdateLocked(func(set *tasks.Set) error {
			t, ok := set.Get(it.ID)
			if !ok || t.Archived() {
				return fmt.Errorf("task %s is no longer in %s", it.ID, filepath.Base(s.File))
			}
			if t.Leaf && t.Status == tasks.StatusPending {
				_, err := set.Claim(it.ID)
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		if s.claimAgain(s.state.RunID, it.ID) {
			return nil
		}
		if s.before, err = s.snapshot(); err != nil {
			return err
		}
		if s.beforeSet, err = s.Store.LoadBytes(s.before.Active, s.before.Done); err != nil {
			return &InputError{err}
		}
		return s.keepClaim(s.state.RunID, it.ID, s.before)
	}
	if cur != branch {
		if err := s.switchTo(ctx, branch, claim); err != nil {
			return "", fmt.Errorf("switching to %s: %w", branch, err)
		}
	} else if err := store.WithLock(s.Store.LockPath, claim); err != nil {
		return "", err
	}
	if err := s.Store.SetHold(it.ID); err != nil {
		return "", err
	}
	return s.Git.Dir, nil
}

// Terms are a task's: the run's gates, its flags, the base branch it
// lands on from its own branch, its squash commit's message, and the task
// files (the loop's control plane, never a task's work).
func (s *Tasks) Terms(it *engine.Item, st *engine.State) judge.Claim {
	branch := s.branchName(it.ID, it.Title)
	c := judge.Claim{Gates: s.GateList, Target: s.base, Own: branch, Tip: s.baseTip,
		Subject:  fmt.Sprintf("[%s] %s", it.ID, it.Title),
		Trailers: append([]string{"Completes: " + it.ID}, markedTrailers(taskTrailer, it.ID, st.RunID, s.source)...),
		Unclaimed: engine.Verdict{Summary: "task not completed",
			Failure: fmt.Sprintf("The previous iteration ended without completing task %s. When it is done and its checks pass, run `ralph task complete %s` (or split it with `ralph task split %s \"…\" \"…\"`).", it.ID, it.ID, it.ID)},
		AllowTestChanges: s.allowTestChanges(it.ID)}
	c.Exclude = s.controlExcluded(context.Background())
	return c
}

// Claim checks the agent's changes to the task files (invalid ones are
// undone and fed back, a task it completed other than its own is put
// back), reads its signals (`ralph task complete`, a split, a block) and
// gives the task's terms. The squash commit's body lists the subjects of
// the commits the agent made on the branch.
func (s *Tasks) Claim(ctx context.Context, a *engine.Attempt, st *engine.State) judge.Claim {
	id := a.Item.ID
	c := s.Terms(a.Item, st)
	defer s.dropKeptClaim() // judged: the files are the claim's or the agent's valid edits
	c.Tampered = s.carried
	s.carried = nil
	if s.beforeSet == nil { // resumed after a crash while verifying
		if _, err := s.judgeAgainstKept(st.RunID, id); err != nil {
			c.Tampered = append(c.Tampered, fmt.Sprintf("the task files were judged as they are: %v", err))
		}
	}
	if s.beforeSet == nil { // no claim kept: nothing to compare with
		s.beforeSet, _ = s.Store.Load()
		s.before, _ = s.snapshot()
	}
	refuse := func(v engine.Verdict) judge.Claim {
		c.Refused = &v
		return c
	}
	rejected := ""
	after, err := s.Store.Load()
	if err == nil && s.beforeSet != nil {
		err = tasks.ValidateChanges(s.beforeSet, after)
	}
	if err != nil {
		rejected = fmt.Sprintf("Your changes to %s were rejected and undone:\n%v", filepath.Base(s.File), err)
		c.Tampered = append(c.Tampered, fmt.Sprintf("invalid changes to %s were undone: %v", filepath.Base(s.File), firstLine(err.Error())))
		if rerr := store.WithLock(s.Store.LockPath, func() error { return s.restoreSnap(s.before) }); rerr != nil {
			return refuse(engine.Verdict{Summary: "restoring the tasks file failed", Failure: rerr.Error()})
		}
		after, err = s.Store.Load()
		if err != nil {
			return refuse(engine.Verdict{Summary: "tasks file invalid", Failure: err.Error()})
		}
	}
	s.set, s.loaded = after, filesStamp{}
	// Tasks other than this one marked complete by hand: only the loop
	// completes tasks. Put them back.
	var others []string
	for _, t := range after.Open(tasks.StatusComplete) {
		if t.ID == id {
			continue
		}
		if bt, ok := s.beforeSet.Get(t.ID); ok && bt.Status != tasks.StatusComplete {
			others = append(others, t.ID)
		}
	}
	if len(others) > 0 {
		_ = s.Store.Update(func(set *tasks.Set) error {
			for _, oid := range others {
				if t, ok := set.Get(oid); ok && !t.Archived() {
					bt, _ := s.beforeSet.Get(oid)
					t.Status = bt.Status
				}
			}
			return nil
		})
		c.Tampered = append(c.Tampered, fmt.Sprintf("the agent marked %s complete while working on %s; reverted", strings.Join(others, ", "), id))
		_ = s.reload()
	}
	t, ok := s.set.Get(id)
	if !ok {
		return refuse(engine.Verdict{Summary: "task disappeared", Failure: fmt.Sprintf("Task %s is no longer in %s.", id, filepath.Base(s.File))})
	}
	if rejected != "" && !a.Result.Failed() {
		return refuse(engine.Verdict{Summary: "invalid changes to the tasks file", Failure: rejected})
	}
	if !t.Archived() && !t.Leaf {
		return s.claimSplit(ctx, a, c)
	}
	if !t.Archived() && t.Status == tasks.StatusBlocked {
		// The agent gave up with `ralph task block`: keep its work on the
		// branch and go back to the base branch; the file says blocked.
		_ = s.park(ctx, a.Item, st, "blocked by the agent")
		return refuse(engine.Verdict{Summary: "the agent blocked the task: " + t.Reason, Failure: "The task was blocked by the agent: " + t.Reason})
	}
	c.Claimed = t.Archived() || t.Status == tasks.StatusComplete
	subjects, _ := s.Git.Log(ctx, s.base+"..HEAD", "%s")
	slices.Reverse(subjects)
	c.Body = append(maskAll(a, subjects), a.Learnings...)
	return c
}

// claimSplit is an iteration that turned the task into a container: its
// own contract is done (Claim.Judged). Work it left on the branch is
// judged and lands like any task's; without any, nothing lands.
func (s *Tasks) claimSplit(ctx context.Context, a *engine.Attempt, c judge.Claim) judge.Claim {
	id := a.Item.ID
	var kids []string
	for _, t := range s.set.List("") {
		if t.Parent() == id {
			kids = append(kids, t.ID)
		}
	}
	info := splitInfo{children: kids, work: s.hasWork(ctx)}
	s.split[id] = info
	c.Judged = &engine.Verdict{Passed: true, Claimed: true, Summary: "split into " + strings.Join(kids, ", ")}
	c.NoLand = !info.work
	c.Subject = fmt.Sprintf("[%s] %s", id, a.Item.Title)
	c.Trailers = markedTrailers(taskTrailer, id, s.state.RunID, s.source)
	c.Body = append([]string{"Split into " + strings.Join(kids, ", ")}, a.Learnings...)
	return c
}

// NotPassed turns an agent's completion claim back into "active" after a
// verdict that did not pass, so the next iteration sees the task as
// still open; a split whose work failed keeps the work on its branch.
func (s *Tasks) NotPassed(ctx context.Context, a *engine.Attempt, v engine.Verdict) {
	if info, ok := s.split[a.Item.ID]; ok {
		delete(s.split, a.Item.ID)
		if s.state != nil {
			_ = s.park(ctx, a.Item, s.state, "split")
		}
		_ = s.afterSplit(a.Item.ID)
		_ = info
		return
	}
	s.unclaim(a.Item.ID)
}

// controlExcluded are the task files as paths never recorded as a task's
// work (git refuses an exclude pathspec naming an ignored file: the lock
// and hold files are in info/exclude).
func (s *Tasks) controlExcluded(ctx context.Context) []string {
	rel := s.controlRel()
	ignored, err := s.Git.Ignored(ctx, rel...)
	var out []string
	for _, p := range rel {
		if err != nil || !ignored[p] {
			out = append(out, p)
		}
	}
	return out
}

func jsonString(raw []byte, dst *string) bool {
	return json.Unmarshal(raw, dst) == nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// hasWork reports whether the task branch differs from the base branch
// (commits or uncommitted changes outside the control plane).
func (s *Tasks) hasWork(ctx context.Context) bool {
	if n, _ := s.Git.CountCommits(ctx, s.base+"..HEAD"); n > 0 {
		return true
	}
	dirty, _ := s.Git.StatusPorcelain(ctx, s.controlRel()...)
	return len(dirty) > 0
}

// unclaim turns an agent's completion claim back into "active" after a
// failed check, so the next iteration sees the task as still open.
func (s *Tasks) unclaim(id string) {
	_ = s.Store.Update(func(set *tasks.Set) error {
		if t, ok := set.Get(id); ok && !t.Archived() && t.Leaf && t.Status == tasks.StatusComplete {
			t.Status = tasks.StatusActive
		}
		return nil
	})
	_ = s.reload()
}

// maskAll masks the subjects of the agent's commits that a squash commit's
// message copies: they are the agent's words, and may hold a secret.
func maskAll(a *engine.Attempt, subjects []string) []string {
	out := make([]string, len(subjects))
	for i, s := range subjects {
		out[i] = a.Mask(s)
	}
	return out
}

// Landed archives a task whose work landed on the base branch with that
// commit and deletes its branch (the main tree followed onto the base
// branch); a split's children wait for their turn.
func (s *Tasks) Landed(ctx context.Context, a *engine.Attempt, v engine.Verdict, commit string, st *engine.State) error {
	it := a.Item
	branch, err := s.branch(ctx, it)
	if err != nil {
		return err
	}
	if _, ok := s.split[it.ID]; ok {
		delete(s.split, it.ID)
		if commit == "" {
			// Nothing landed: the tree goes back to the base branch.
			if cur, _ := s.Git.CurrentBranch(ctx); cur == branch {
				if err := s.switchTo(ctx, s.base, nil); err != nil {
					return err
				}
			}
		}
		if s.Git.BranchExists(ctx, branch) {
			_ = s.Git.DeleteBranch(ctx, branch)
		}
		return s.afterSplit(it.ID)
	}
	return s.finish(ctx, it.ID, commit, branch)
}

func (s *Tasks) afterSplit(id string) error {
	err := s.Store.Update(func(set *tasks.Set) error {
		if t, ok := set.Get(id); ok && !t.Archived() && !t.Leaf && t.Status == tasks.StatusActive {
			t.Status = tasks.StatusPending
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.Store.SetHold(); err != nil {
		return err
	}
	return s.reload()
}

// finish archives a merged task with its commit and drops its branch.
func (s *Tasks) finish(ctx context.Context, id, sha, branch string) error {
	err := s.Store.Update(func(set *tasks.Set) error {
		t, ok := set.Get(id)
		if !ok || t.Archived() {
			return nil
		}
		if !t.Leaf {
			if t.Status == tasks.StatusActive {
				t.Status = tasks.StatusPending
			}
			return nil
		}
		_, err := set.Complete(id, sha, time.Now())
		return err
	})
	if err != nil {
		return err
	}
	if err := s.Store.SetHold(); err != nil {
		return err
	}
	if branch != "" && s.Git.BranchExists(ctx, branch) {
		if err := s.Git.DeleteBranch(ctx, branch); err != nil {
			return err
		}
	}
	return s.reload()
}

// commitLeftovers commits what the agent left uncommitted on the task
// branch (never the task files or the user's pre-existing changes).
func (s *Tasks) commitLeftovers(ctx context.Context, st *engine.State, msg string) error {
	_, _, err := commitWork(ctx, s.Git, "", s.notWork(ctx, st), msg, false)
	return err
}

// notWork are the paths never staged as a task's work: the user's
// pre-existing files and the task files (the loop's control plane).
func (s *Tasks) notWork(ctx context.Context, st *engine.State) []string {
	except := append([]string{}, st.Preexisting...)
	// git refuses an exclude pathspec naming an ignored file (the lock and
	// hold files are in info/exclude).
	rel := s.controlRel()
	ignored, err := s.Git.Ignored(ctx, rel...)
	for _, p := range rel {
		if err != nil || !ignored[p] {
			except = append(except, p)
		}
	}
	return except
}

// Block keeps the task's work on its branch, returns to the base branch
// and marks the task blocked with the reason.
func (s *Tasks) Block(ctx context.Context, it *engine.Item, st *engine.State, reason string) error {
	if err := s.park(ctx, it, st, "blocked"); err != nil {
		return err
	}
	err := s.Store.Update(func(set *tasks.Set) error {
		t, ok := set.Get(it.ID)
		if !ok || t.Archived() {
			return nil
		}
		if t.Status == tasks.StatusComplete {
			t.Status = tasks.StatusActive
		}
		if t.Status == tasks.StatusBlocked {
			return nil
		}
		return set.Block(it.ID, reason)
	})
	if err != nil {
		return err
	}
	if err := s.Store.SetHold(); err != nil {
		return err
	}
	return s.reload()
}

// park commits the branch's leftovers on it and checks out the base
// branch, which stays untouched.
func (s *Tasks) park(ctx context.Context, it *engine.Item, st *engine.State, why string) error {
	branch, err := s.branch(ctx, it)
	if err != nil {
		return err
	}
	cur, _ := s.Git.CurrentBranch(ctx)
	if cur != branch {
		return nil
	}
	return s.switchTo(ctx, s.base, func() error {
		return s.commitLeftovers(ctx, st, fmt.Sprintf("wip(%s): unfinished work (%s)", it.ID, why))
	})
}

// Recover tells whether the squash merge of it landed before a crash (the
// base branch's tip carries its Ralph-Task trailer) and finishes the job;
// otherwise it undoes a half-done merge so the task is verified again.
func (s *Tasks) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if err := s.restoreAside(); err != nil {
		return "", false, err
	}
	branch, err := s.branch(ctx, it)
	if err != nil {
		return "", false, err
	}
	cur, _ := s.Git.CurrentBranch(ctx)
	if tip := committedIn(ctx, s.Git, s.base, taskTrailer, it.ID, st.RunID); tip != "" {
		s.baseTip = tip
		if cur != s.base {
			// A run killed between the landing and the checkout that
			// follows it left the task's work in the tree, where the base
			// now has it: the checkout goes over it.
			if err := s.switchOver(ctx, s.base, nil, true); err != nil {
				return "", false, err
			}
		}
		delete(s.split, it.ID)
		if err := s.finish(ctx, it.ID, tip, branch); err != nil {
			return "", false, err
		}
		return tip, true, nil
	}
	return "", false, nil
}

// --- the task files across git operations ---

func (s *Tasks) controlRel() []string {
	return s.inRepo(s.File, s.Store.DonePath, s.Store.LockPath, s.Store.HoldPath)
}

// fileRel are the task files inside the repository.
func (s *Tasks) fileRel() []string { return s.inRepo(s.File, s.Store.DonePath) }

// inRepo returns those of paths inside the repository, relative to its
// root with forward slashes.
func (s *Tasks) inRepo(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if rel, err := filepath.Rel(s.Root, p); err == nil && !strings.HasPrefix(rel, "..") {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

func removeAside(p string) error {
	// The marker goes first: without it the copies mean nothing.
	for _, f := range []string{p, p + ".active", p + ".done"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (s *Tasks) asidePath() string { return filepath.Join(s.Root, ".ralph", "tasks-aside.json") }

func (s *Tasks) snapshot() (fileSnap, error) {
	snap := fileSnap{ActivePath: s.File, DonePath: s.Store.DonePath}
	var err error
	if snap.Active, snap.Done, err = s.Store.ReadBoth(); err != nil {
		return snap, err
	}
	snap.HasActive, snap.HasDone = snap.Active != nil, snap.Done != nil
	return snap, nil
}

// aside saves the task files in .ralph/tasks-aside.json (a crash while
// they are aside is repaired by restoreAside on the next open). The copies
// are hard links: git never writes a file in place (it unlinks it and
// writes a new one), and every other writer of the task files either
// renames a new file in or holds the task lock, which the caller holds, so
// a link keeps the bytes of the moment for the cost of one system call
// whatever the file's size. A file system without hard links gets a copy.
// Every copy is in place before the marker; no fsync: the aside guards
// against a crash of ralph between checkouts, and linked bytes are the
// file's own.
func (s *Tasks) aside() (fileSnap, error) {
	snap := fileSnap{ActivePath: s.File, DonePath: s.Store.DonePath}
	if err := os.MkdirAll(filepath.Dir(s.asidePath()), 0o755); err != nil {
		return snap, err
	}
	for _, c := range []struct {
		path string
		has  *bool
		ext  string
	}{{s.File, &snap.HasActive, ".active"}, {s.Store.DonePath, &snap.HasDone, ".done"}} {
		cp := s.asidePath() + c.ext
		if err := os.Remove(cp); err != nil && !errors.Is(err, os.ErrNotExist) {
			return snap, err
		}
		if _, err := os.Lstat(c.path); errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return snap, err
		}
		*c.has = true
		if os.Link(c.path, cp) == nil {
			continue
		}
		data, err := os.ReadFile(c.path)
		if err != nil {
			return snap, err
		}
		if err := store.WriteFile(cp, data, 0o600); err != nil {
			return snap, err
		}
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return snap, err
	}
	return snap, store.WriteFileNoSync(s.asidePath(), b, 0o600)
}

// putBack returns the task files aside to their places and drops the
// aside: a file git left alone is still the copy's inode and stays; one git
// replaced gets the copy linked back in by a rename (the copy stays until
// the marker is gone, so a crash here repeats the same steps).
func (s *Tasks) putBack(snap fileSnap) error {
	for _, c := range []struct {
		path   string
		has    bool
		inline []byte
		ext    string
	}{{snap.ActivePath, snap.HasActive, snap.Active, ".active"}, {snap.DonePath, snap.HasDone, snap.Done, ".done"}} {
		if c.path == "" {
			continue
		}
		if !c.has {
			if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if c.inline != nil { // a marker of an older version
			if err := putFile(c.path, c.inline); err != nil {
				return err
			}
			continue
		}
		cp := s.asidePath() + c.ext
		ci, err := os.Stat(cp)
		if err != nil {
			return fmt.Errorf("restoring the task files set aside: %w", err)
		}
		if fi, err := os.Stat(c.path); err == nil && os.SameFile(fi, ci) {
			continue
		}
		tmp := c.path + ".ralph-restore"
		_ = os.Remove(tmp)
		if os.Link(cp, tmp) == nil {
			if err := os.Rename(tmp, c.path); err != nil {
				_ = os.Remove(tmp)
				return err
			}
			continue
		}
		data, err := os.ReadFile(cp)
		if err != nil {
			return fmt.Errorf("restoring the task files set aside: %w", err)
		}
		if err := putFile(c.path, data); err != nil {
			return err
		}
	}
	return removeAside(s.asidePath())
}

// putFile writes data to path unless it already holds exactly that.
func putFile(path string, data []byte) error {
	if cur, err := os.ReadFile(path); err == nil && string(cur) == string(data) {
		return nil
	}
	return store.WriteFile(path, data, 0o644)
}

// restoreSnap puts back the task files as snapshot read them.
func (s *Tasks) restoreSnap(snap fileSnap) error {
	for _, c := range []struct {
		path string
		has  bool
		data []byte
	}{{snap.ActivePath, snap.HasActive, snap.Active}, {snap.DonePath, snap.HasDone, snap.Done}} {
		if !c.has {
			if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if err := putFile(c.path, c.data); err != nil {
			return err
		}
	}
	return nil
}

// restoreAside puts back task files a crash left aside.
func (s *Tasks) restoreAside() error {
	var snap fileSnap
	err := store.ReadJSON(s.asidePath(), &snap)
	if errors.Is(err, os.ErrNotExist) {
		return removeAside(s.asidePath()) // copies a crash left without their marker
	}
	if err != nil {
		return err
	}
	if snap.ActivePath == "" {
		snap.ActivePath, snap.DonePath = s.File, s.Store.DonePath
	}
	return store.WithLock(s.Store.LockPath, func() error { return s.putBack(snap) })
}

// cleanControl makes the task files match HEAD (tracked ones) or removes
// them from the index, so checkouts and merges never trip over them; the
// caller has them aside and writes them back afterwards.
func (s *Tasks) cleanControl(ctx context.Context) error {
	for _, rel := range s.fileRel() { // git never touches a file outside
		_ = s.Git.Unstage(ctx, rel)
		if s.Git.HasPath(ctx, "HEAD", rel) {
			if err := s.Git.RestorePath(ctx, "HEAD", rel); err != nil {
				return err
			}
		} else if err := os.Remove(filepath.Join(s.Root, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// switchTo checks out branch (before runs first, on the current branch,
// under the same lock). The task files stay as they are: when the index
// already holds branch's version of them, git carries them through the
// checkout untouched (the usual case: no commit ever changes them); else
// they are set aside, made to match HEAD, and put back after.
func (s *Tasks) switchTo(ctx context.Context, branch string, before func() error) error {
	return s.switchOver(ctx, branch, before, false)
}

// switchOver is switchTo; over: the work tree's work is in branch already
// (it landed there), so the checkout replaces it (git.CheckoutOver).
func (s *Tasks) switchOver(ctx context.Context, branch string, before func() error, over bool) error {
	checkout := s.Git.Checkout
	if over {
		checkout = s.Git.CheckoutOver
	}
	return store.WithLock(s.Store.LockPath, func() error {
		if before != nil {
			if err := before(); err != nil {
				return err
			}
		}
		// A checkout over the tree would drop the task files' changes
		// git carries through a plain one: they are set aside first.
		if !over && s.carries(ctx, branch) {
			return checkout(ctx, branch)
		}
		snap, err := s.aside()
		if err != nil {
			return err
		}
		if err := s.cleanControl(ctx); err != nil {
			return err
		}
		cerr := checkout(ctx, branch)
		if err := s.putBack(snap); err != nil {
			return err
		}
		return cerr
	})
}

// carries reports whether git would carry the task files through a
// checkout of rev untouched: the index holds rev's version of each.
func (s *Tasks) carries(ctx context.Context, rev string) bool {
	rel := s.fileRel()
	return len(rel) == 0 || s.Git.IndexMatches(ctx, rev, rel...)
}

// Close has nothing to do: task branches are merged or parked as the run
// goes.
func (s *Tasks) Close(*engine.State) error { return nil }

// gateCommands are the commands of a gate list.
func gateCommands(gs []gate.Gate) []string {
	out := make([]string, 0, len(gs))
	for _, g := range gs {
		out = append(out, g.Command)
	}
	return out
}

// BaselineGates are the gates the baseline runs (every --gate: a task
// has no checks of its own) and the base branch they run on.
func (s *Tasks) BaselineGates(context.Context) (string, []gate.Gate) {
	rev := s.base
	if rev == "" {
		rev = "HEAD"
	}
	return rev, s.GateList
}

// allowTestChanges is the task's allow_test_changes as the iteration
// found it (the agent's later edits to the task file do not count).
func (s *Tasks) allowTestChanges(id string) bool {
	set := s.beforeSet
	if set == nil {
		set = s.set
	}
	if set == nil {
		return false
	}
	t, ok := set.Get(id)
	return ok && t.AllowTestChanges()
}
