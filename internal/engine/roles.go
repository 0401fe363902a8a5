package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/roles"
)

// AgentChoice is the agent that runs one iteration and why it is that one.
type AgentChoice struct {
	Agent agent.Agent
	Name  string
	Model string
	From  string // where the choice came from ("" for the run's agent)
}

// defaultAgent is the run's own agent.
func (e *Engine) defaultAgent() AgentChoice {
	return AgentChoice{Agent: e.cfg.Agent, Name: e.cfg.AgentName, Model: e.cfg.Model}
}

// agentFor chooses the agent of an iteration on it with role.
func (e *Engine) agentFor(it *Item, role string) (AgentChoice, error) {
	if e.cfg.AgentFor == nil {
		return e.defaultAgent(), nil
	}
	c, err := e.cfg.AgentFor(it, role)
	if err != nil {
		return c, err
	}
	if c.Agent == nil {
		d := e.defaultAgent()
		d.From = c.From
		return d, nil
	}
	return c, nil
}

// chooseRole is the role of the next iteration on it, and why: the role
// that must approve a held item, none right after a review asked for
// changes, else the first trigger that holds.
func (e *Engine) chooseRole(it *Item, st *State, iteration int) (role, why string, err error) {
	if it.Role != "" {
		return it.Role, it.RoleWhy, nil
	}
	rs := e.cfg.Roles
	if rs == nil {
		return "", "", nil
	}
	var is ItemState
	if s := st.Items[it.ID]; s != nil {
		is = *s
	}
	if is.Review != "" {
		return is.Review, "awaiting review: " + is.ReviewWhy, nil
	}
	if is.Fix != "" {
		return is.Fix, fmt.Sprintf("test-fix re-run %d/%d: the test gate failed (--test-fix)", is.Fixes, e.cfg.TestFix), nil
	}
	if is.Revise {
		return "", "the last review asked for changes; this iteration addresses them", nil
	}
	t, err := rs.Choose(e.roleEnv(it, st, iteration), false)
	if err != nil || t == nil {
		return "", "", err
	}
	return t.Role, e.triggerWhy(t), nil
}

func (e *Engine) triggerWhy(t *roles.Trigger) string {
	return fmt.Sprintf("%s (%s:%d)", t.Condition, relTo(e.cfg.Paths.Root, e.cfg.Roles.TriggersFrom), t.Line)
}

// roleText is the text appended to the prompt for role.
func (e *Engine) roleText(role string) (string, error) {
	if role == "" {
		return "", nil
	}
	r, ok := e.cfg.Roles.Get(role)
	if !ok {
		return "", fmt.Errorf("role %q is not in force (the roles are %v): restore roles/%s.md or .ralph/roles/%s.md", role, e.cfg.Roles.Names(), role, role)
	}
	return r.Text, nil
}

// roleEnv is what a trigger condition sees for the next iteration on it.
func (e *Engine) roleEnv(it *Item, st *State, iteration int) roles.Env {
	var is ItemState
	if s := st.Items[it.ID]; s != nil {
		is = *s
	}
	return roles.Env{
		Iteration: iteration, ItemIteration: is.Runs + 1, Attempt: is.Attempts + 1, ItemKind: it.Kind,
		TaskID: it.ID, TaskTitle: it.Title, BranchCommits: is.Commits, FilesChanged: is.FilesChanged,
		LastIterationFailed: is.LastFailed, ConsecutiveFailures: is.Failures, LastRole: is.Role,
		GateFailed: func(name string) bool { return slices.Contains(is.FailedGates, name) },
		IterationsSinceRole: func(role string) int {
			return iteration - 1 - st.RoleLast[role] // never served: every iteration so far
		},
	}
}

// completionGate asks the completion triggers once an iteration's claim
// passed the gates: a trigger that holds names the role that must approve
// before the item passes.
func (e *Engine) completionGate(x *iteration) (*roles.Trigger, error) {
	if !e.cfg.Roles.HasCompletionGates() || x.verdict == roles.Approve || x.it.Role != "" {
		return nil, nil // none to ask (no state copy), or the approval is what it asks for
	}
	snap := e.box.snapshot()
	return e.cfg.Roles.Choose(e.roleEnv(x.it, snap, x.cur.Iteration), true)
}

// itemFacts is what the harness measures at the end of an iteration that
// did not pass, for the next trigger evaluation and the progress rule.
type itemFacts struct {
	files       int
	commits     int // since the item's base; -1 when not measured
	mark        string
	failedGates []string
}

// measure takes the facts of an iteration in dir. The commit count costs
// a git call: it is taken when a trigger reads branch_commits or the
// progress rule needs it (no claim and no changed files).
func (e *Engine) measure(ctx context.Context, x *iteration, v Verdict, files []string) itemFacts {
	f := itemFacts{files: len(files), commits: -1, mark: treeMark(x.att.Dir, files)}
	for _, g := range v.Gates {
		if !g.Passed {
			f.failedGates = append(f.failedGates, g.Name)
		}
	}
	base := ""
	e.box.read(func(st *State) {
		if is := st.Items[x.it.ID]; is != nil {
			base = is.BaseHead
		}
	})
	if base != "" && (e.cfg.Roles.Uses("branch_commits") || !v.Claimed && len(files) == 0) {
		if n, err := e.cfg.Git.CommitsSince(ctx, x.att.Dir, base); err == nil {
			f.commits = n
		}
	}
	return f
}

// treeMark fingerprints the changed files of a tree (names, sizes, mtimes)
// so that an iteration that leaves the same uncommitted changes as the one
// before is told from one that changed them again, without a git call.
func treeMark(dir string, files []string) string {
	if len(files) == 0 {
		return ""
	}
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00", f)
		if fi, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			fmt.Fprintf(h, "%d %d\x00", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// progressed says whether an iteration that did not claim done moved the
// item on: a new commit, or changed files that differ from what the
// iteration before left.
func progressed(is *ItemState, f itemFacts) bool {
	if f.commits > is.Commits {
		return true
	}
	return f.files > 0 && f.mark != is.TreeMark
}

// record keeps the facts in the item's state.
func (f itemFacts) record(is *ItemState) {
	is.FilesChanged = f.files
	is.TreeMark = f.mark
	if f.commits >= 0 {
		is.Commits = f.commits
	}
	is.FailedGates = f.failedGates
}

// maxItemIterations bounds the iterations on one item.
func (e *Engine) maxItemIterations() int {
	if e.cfg.MaxItemIterations > 0 {
		return e.cfg.MaxItemIterations
	}
	return DefaultMaxItemIterations
}

// DefaultMaxItemIterations is --max-item-iterations' default.
const DefaultMaxItemIterations = 10
