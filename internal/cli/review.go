package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/review"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/tasks"
	"github.com/ralph-loop/ralph/internal/usage"
)

// ReviewOptions are `ralph review`'s settings.
type ReviewOptions struct {
	IO *Factory
	// Run holds the agent flags and the sandbox switch (and is --fix's
	// run).
	Run       RunOptions
	Base      string
	Roles     []string
	Commands  []string
	IntoPRD   string
	IntoTasks string
	PR        int
	Fix       bool
	Nits      bool
	JSON      bool
	Timeout   time.Duration
	flagSet   func(string) bool
}

// newCmdReview builds `ralph review`.
func newCmdReview(f *Factory, runF func(*ReviewOptions) error) *cobra.Command {
	opts := &ReviewOptions{IO: f}
	opts.Run.IO = f
	cmd := &cobra.Command{
		Use:   "review [--base REF]",
		Short: "Review a branch's changes with reviewer roles (and commands); commits nothing",
		Long: `A review-only pass over the changes of the current branch since it left the
base (` + "`git diff $(git merge-base BASE HEAD) HEAD`" + `). Each reviewer role runs at
once, each with its own agent and model from roles.yaml (agents: ROLE), in a
scratch worktree of HEAD in the sandbox: the reviewers read the diff and the
code and answer with findings ("- [major] path:line — what"). --reviewer-cmd
adds a program that reads the diff on stdin and prints findings the same way.

The findings go to .ralph/reviews/<id>.md (and <id>.json, which the dashboards
list), and to the terminal. Nothing is committed and the work tree is not
touched. Then, as asked: --into-prd FILE or --into-tasks FILE make them stories
or tasks, --pr N posts them as a review of pull request N (through your gh
login), --fix runs the loop over them on this branch, each finding a story
judged and committed like any other.

The reviewer roles are every role in force named reviewer or ending in
-reviewer (roles/, .ralph/roles/; ` + "`ralph roles list`" + `), or those --role names.
BASE is --base, else the base branch of --pr N, else main, master or the
remote's default branch, whichever exists.`,
		Example: `  ralph review
  ralph review --base origin/main --role reviewer --role security-reviewer
  ralph review --reviewer-cmd 'coderabbit review --plain' --into-prd review-fixes.json
  ralph review --pr 42
  ralph review --fix`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.flagSet = cmd.Flags().Changed
			if runF != nil {
				return runF(opts)
			}
			return runReview(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Base, "base", "", "the `REF` the branch is reviewed against (default: --pr's base, else main, master or origin's default branch)")
	fl.StringArrayVar(&opts.Roles, "role", nil, "a reviewer `ROLE` (repeatable; default every role named reviewer or *-reviewer)")
	fl.StringArrayVar(&opts.Commands, "reviewer-cmd", nil, "an external reviewer: a shell `COMMAND` that reads the diff on stdin ($RALPH_REVIEW_BASE, $RALPH_REVIEW_HEAD, $RALPH_REVIEW_DIFF) and prints findings (repeatable)")
	fl.StringVar(&opts.IntoPRD, "into-prd", "", "add the findings as stories to this PRD `FILE` (made with the gates ralph init finds when missing)")
	fl.StringVar(&opts.IntoTasks, "into-tasks", "", "add the findings as tasks to this task tree `FILE` (tasks.jsonl)")
	fl.IntVar(&opts.PR, "pr", 0, "post the findings as a review of pull request `N` (gh pr review --comment)")
	fl.BoolVar(&opts.Fix, "fix", false, "then run the loop over the findings on this branch (each a story, judged and committed like any other)")
	fl.BoolVar(&opts.Nits, "nits", false, "with --into-prd, --into-tasks or --fix: the nits too (by default minor and above)")
	fl.BoolVar(&opts.JSON, "json", false, "print the report as JSON (the .json file) instead of markdown")
	fl.DurationVar(&opts.Timeout, "timeout", 20*time.Minute, "time limit (`DURATION`) of each reviewer")
	fl.BoolVar(&opts.Run.NoSandbox, "no-sandbox", false, "run the reviewers without the sandbox (bubblewrap)")
	registerAgentFlags(fl, &opts.Run.AgentSpec)
	completeAgents(cmd, "agent")
	return cmd
}

// reviewTarget is what is reviewed: the branch's commits since base.
type reviewTarget struct {
	base, baseSHA, head, headSHA string
	commits                      int
	files                        []string
	stat, diff                   string
}

func runReview(ctx context.Context, o *ReviewOptions) error {
	f := o.IO
	if o.Fix && (o.IntoPRD != "" || o.IntoTasks != "") {
		return usage.Errorf("--fix runs the loop over the findings itself: not with --into-prd or --into-tasks")
	}
	root, repo, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	l, err := f.Settings(root)
	if err != nil {
		return err
	}
	c := l.Config
	ro := &o.Run
	ro.FlagSet = o.flagSet
	ro.root = root
	applyAgentConfig(&ro.AgentSpec, c, o.flagSet)
	if ro.SandboxConfig, err = app.SandboxSettings(l); err != nil {
		return err
	}
	t, err := o.target(ctx, root, repo)
	if err != nil {
		return err
	}
	rs, err := app.LoadRoles(root)
	if err != nil {
		return err
	}
	names, err := reviewerRoles(rs, o.Roles)
	if err != nil {
		return err
	}
	if err := repo.EnsureExcluded(ctx, "/.ralph/"); err != nil {
		return err
	}
	paths := engine.PathsFor(root)
	if ro.sandbox, err = app.OpenSandbox(ro.SandboxConfig, ro.NoSandbox, paths); err != nil {
		return err
	}
	ag, err := ro.AgentSpec.Build()
	if err != nil {
		return err
	}
	id := time.Now().UTC().Format("20060102-150405") + "-" + t.headSHA[:8]
	dir := filepath.Join(paths.Dir, "reviews", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "ralph: reviewing %s (%.8s) against %s (merge base %.8s): %s, %s; reviewers: %s\n",
		t.head, t.headSHA, t.base, t.baseSHA, engine.Plural(t.commits, "commit"), engine.Plural(len(t.files), "file"), strings.Join(append(slices.Clone(names), commandNames(o.Commands)...), ", "))

	rep := review.Report{ID: id, CreatedAt: time.Now().UTC(), Base: t.base, BaseSHA: t.baseSHA, Head: t.head, HeadSHA: t.headSHA, Commits: t.commits, Files: t.files,
		Page: relOr(root, filepath.Join(paths.Dir, "reviews", id+".md")), PR: o.PR}
	rep.Reviewers = make([]review.Reviewer, len(names)+len(o.Commands))
	choose := ro.AgentChooser(root, rs, ag)
	mask := app.Masker(ro.NoMask, ro.Env)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep.Reviewers[i] = o.roleReview(ctx, repo, rs, choose, name, t, dir, mask)
		}()
	}
	for i, command := range o.Commands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep.Reviewers[len(names)+i] = o.commandReview(ctx, repo, command, fmt.Sprintf("command %d", i+1), t, dir, mask)
		}()
	}
	wg.Wait()
	for _, rv := range rep.Reviewers {
		line := fmt.Sprintf("ralph: %s: %s", rv.Name, engine.Plural(len(rv.Findings), "finding"))
		if rv.Verdict != "" {
			line += ", " + rv.Verdict
		}
		if rv.Error != "" {
			line += " — failed: " + rv.Error
		}
		fmt.Fprintln(f.IO.ErrOut, line)
	}
	md := rep.Markdown()
	js, _ := json.MarshalIndent(rep, "", "  ")
	if err := store.WriteFile(filepath.Join(paths.Dir, "reviews", id+".md"), []byte(md), 0o644); err != nil {
		return err
	}
	if err := store.WriteFile(filepath.Join(paths.Dir, "reviews", id+".json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if o.JSON {
		fmt.Fprintf(f.IO.Out, "%s\n", js)
	} else {
		fmt.Fprint(f.IO.Out, md)
	}
	fmt.Fprintf(f.IO.ErrOut, "ralph: review %s: %s, verdict %s; written to %s\n", id, engine.Plural(len(rep.Findings()), "finding"), cmp.Or(rep.Verdict(), "none"), rep.Page)
	failed := 0
	for _, rv := range rep.Reviewers {
		if rv.Error != "" {
			failed++
		}
	}
	if failed == len(rep.Reviewers) {
		return fmt.Errorf("every reviewer failed; nothing was reviewed (see %s)", rep.Page)
	}
	if o.PR > 0 {
		if err := postReview(ctx, ro, root, o.PR, rep); err != nil {
			return err
		}
		fmt.Fprintf(f.IO.ErrOut, "ralph: posted the review on pull request #%d\n", o.PR)
	}
	return o.afterReview(ctx, root, repo, rep, dir)
}

func commandNames(cmds []string) []string {
	var out []string
	for i := range cmds {
		out = append(out, fmt.Sprintf("command %d", i+1))
	}
	return out
}

// target finds the base and what the branch changed since it.
func (o *ReviewOptions) target(ctx context.Context, root string, repo *git.Repo) (reviewTarget, error) {
	var t reviewTarget
	if !repo.HasCommits(ctx) {
		return t, usage.Errorf("the repository has no commits yet: nothing to review")
	}
	t.base = o.Base
	if t.base == "" && o.PR > 0 {
		b, err := o.IO.gh(root).PullRequestBase(ctx, o.PR)
		if err != nil {
			return t, fmt.Errorf("the base of pull request #%d: %w", o.PR, err)
		}
		t.base = b
		if !repo.BranchExists(ctx, b) && repo.HasCommit(ctx, "origin/"+b) {
			t.base = "origin/" + b
		}
	}
	if t.base == "" {
		for _, b := range []string{"main", "master", "origin/HEAD"} {
			if repo.HasCommit(ctx, b) {
				t.base = b
				break
			}
		}
		if t.base == "" {
			return t, usage.Errorf("no main, master or origin/HEAD to review against: give --base REF")
		}
	}
	branch, head, err := repo.Where(ctx)
	if err != nil {
		return t, err
	}
	t.head, t.headSHA = branch, head
	if t.head == "" {
		t.head = "HEAD"
	}
	if !repo.HasCommit(ctx, t.base) {
		return t, usage.Errorf("--base %s: no such commit or branch", t.base)
	}
	if t.baseSHA, err = repo.MergeBase(ctx, t.base, "HEAD"); err != nil {
		return t, usage.Errorf("%s and HEAD have no common ancestor: nothing to review against", t.base)
	}
	if t.baseSHA == t.headSHA {
		return t, usage.Errorf("nothing to review: %s has no commits that %s lacks (give --base REF)", t.head, t.base)
	}
	if t.commits, err = repo.CountCommits(ctx, t.baseSHA+"..HEAD"); err != nil {
		return t, err
	}
	if t.files, err = repo.DiffNames(ctx, t.baseSHA, t.headSHA); err != nil {
		return t, err
	}
	if t.stat, err = repo.DiffStat(ctx, t.baseSHA, t.headSHA); err != nil {
		return t, err
	}
	t.diff, err = repo.Diff(ctx, t.baseSHA, t.headSHA)
	return t, err
}

// reviewerRoles are the roles given, each one in force, else every role
// named reviewer or *-reviewer.
func reviewerRoles(rs *roles.Set, given []string) ([]string, error) {
	if len(given) > 0 {
		for _, r := range given {
			if _, ok := rs.Get(r); !ok {
				return nil, usage.Errorf("--role %s: no such role in force (%s; add roles/%s.md or .ralph/roles/%s.md)", r, strings.Join(rs.Names(), ", "), r, r)
			}
		}
		return given, nil
	}
	var out []string
	for _, n := range rs.Names() {
		if n == "reviewer" || strings.HasSuffix(n, "-reviewer") || strings.HasSuffix(n, "_reviewer") {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, usage.Errorf("no reviewer role in force: add roles/reviewer.md (or name one with --role)")
	}
	return out, nil
}

// scratchTree is a detached worktree of HEAD for one reviewer, removed
// when done: whatever it writes there is thrown away.
func scratchTree(ctx context.Context, repo *git.Repo, dir, name, head string) (string, func(), error) {
	tree := filepath.Join(dir, "trees", safeName(name))
	if err := os.MkdirAll(filepath.Dir(tree), 0o755); err != nil {
		return "", nil, err
	}
	// One worktree add or remove at a time: git writes a worktree's admin
	// entry piecemeal, and another add reading the entries meanwhile fails.
	worktreesMu.Lock()
	err := repo.WorktreeAddDetached(ctx, tree, head)
	worktreesMu.Unlock()
	if err != nil {
		return "", nil, fmt.Errorf("a scratch worktree for %s: %w", name, err)
	}
	return tree, func() {
		ctx := context.WithoutCancel(ctx)
		worktreesMu.Lock()
		defer worktreesMu.Unlock()
		_ = repo.WorktreeRemove(ctx, tree)
		_ = os.RemoveAll(tree)
		_ = repo.WorktreePrune(ctx)
	}, nil
}

// worktreesMu serialises this process's scratch worktree adds and removes.
var worktreesMu sync.Mutex

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// roleReview runs one reviewer role's agent over the diff.
func (o *ReviewOptions) roleReview(ctx context.Context, repo *git.Repo, rs *roles.Set, choose func(*engine.Item, string) (engine.AgentChoice, error), role string, t reviewTarget, dir string, mask func(string) string) review.Reviewer {
	rv := review.Reviewer{Name: role, Kind: "role", Findings: []review.Finding{}}
	start := time.Now()
	defer func() { rv.Seconds = time.Since(start).Seconds() }()
	choice, err := choose(nil, role)
	if err != nil {
		rv.Error = err.Error()
		return rv
	}
	rv.Agent, rv.Model = choice.Name, choice.Model
	text, err := rs.Text(role)
	if err != nil {
		rv.Error = err.Error()
		return rv
	}
	tree, done, err := scratchTree(ctx, repo, dir, role, t.headSHA)
	if err != nil {
		rv.Error = err.Error()
		return rv
	}
	defer done()
	ro := &o.Run
	ag := app.Confine(choice.Agent, ro.sandbox, engine.PathsFor(ro.root), ro.BaseURL, ro.Env)
	prompt := review.Prompt(text, t.base, t.baseSHA, t.head, t.headSHA, t.commits, t.stat, t.diff)
	pf := filepath.Join(dir, safeName(role)+".prompt.md")
	if err := store.WriteFile(pf, []byte(prompt), 0o644); err != nil {
		rv.Error = err.Error()
		return rv
	}
	logPath := filepath.Join(dir, safeName(role)+".log")
	tr, err := store.OpenOwn(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		rv.Error = err.Error()
		return rv
	}
	defer tr.Close()
	rv.Transcript = relOr(ro.root, logPath)
	fmt.Fprintf(tr, "# ralph review · %s · agent %s\n# started %s\n\n## Prompt\n\n%s\n\n## Agent output\n\n", role, choice.Name, start.UTC().Format(time.RFC3339), prompt)
	env := append(append([]string{}, ro.Env...), "RALPH_PROMPT_FILE="+pf, "RALPH_ITEM_ID=review", "RALPH_ROLE="+role, "RALPH_WORK_DIR="+tree,
		"RALPH_REVIEW_BASE="+t.baseSHA, "RALPH_REVIEW_HEAD="+t.headSHA)
	res, err := ag.Run(ctx, agent.Request{Prompt: prompt, PromptFile: pf, Dir: tree, Model: choice.Model, Role: role, Env: env,
		Timeout: o.Timeout, Transcript: tr, ItemID: "review-" + role, Iteration: 1, Attempt: 1})
	switch {
	case err != nil:
		rv.Error = err.Error()
	case res.RateLimit != nil:
		rv.Error = "rate limited: " + res.RateLimit.Message
	case res.Failed():
		rv.Error = cmp.Or(strings.TrimSpace(res.ErrorText), fmt.Sprintf("exit status %d", res.ExitCode))
		if res.TimedOut {
			rv.Error = "timed out after " + o.Timeout.String()
		}
	}
	rv.Text = mask(res.FinalText)
	fmt.Fprintf(tr, "\n[ralph] review by %s done: %s\n", role, orNone(rv.Error))
	if rv.Error != "" {
		return rv
	}
	rv.Findings = review.ParseFindings(rv.Text, role)
	rv.Verdict = string(roles.ParseVerdict(rv.Text).Decision)
	return rv
}

// commandReview runs an external reviewer: the diff on stdin (and in a
// file), in a scratch worktree, confined like a gate (its network is
// gate_network's "review" entry).
func (o *ReviewOptions) commandReview(ctx context.Context, repo *git.Repo, command, name string, t reviewTarget, dir string, mask func(string) string) review.Reviewer {
	rv := review.Reviewer{Name: name, Kind: "command", Command: command, Findings: []review.Finding{}}
	start := time.Now()
	defer func() { rv.Seconds = time.Since(start).Seconds() }()
	tree, done, err := scratchTree(ctx, repo, dir, safeName(name), t.headSHA)
	if err != nil {
		rv.Error = err.Error()
		return rv
	}
	defer done()
	diffFile := filepath.Join(dir, "diff.patch")
	if err := store.WriteFile(diffFile, []byte(t.diff+"\n"), 0o644); err != nil {
		rv.Error = err.Error()
		return rv
	}
	runner := o.IO.runner()
	if sb := o.Run.sandbox; sb != nil {
		runner = sb.Gates(runner)
	}
	var out, errb bytes.Buffer
	res, err := runner.Run(ctx, proc.Cmd{Argv: []string{"sh", "-c", command}, Dir: tree, Stdin: strings.NewReader(t.diff + "\n"), Stdout: &out, Stderr: &errb, Timeout: o.Timeout,
		Env: proc.Environ(nil, sandbox.GateEnv+"=review", "RALPH_REVIEW_BASE="+t.baseSHA, "RALPH_REVIEW_HEAD="+t.headSHA, "RALPH_REVIEW_DIFF="+diffFile)})
	logPath := filepath.Join(dir, safeName(name)+".log")
	_ = store.WriteFile(logPath, []byte(mask(fmt.Sprintf("$ %s\n%s\n--- stderr\n%s", command, out.String(), errb.String()))), 0o600)
	rv.Transcript = relOr(o.Run.root, logPath)
	rv.Text = mask(out.String())
	switch {
	case err != nil:
		rv.Error = err.Error()
	case res.TimedOut:
		rv.Error = "timed out after " + o.Timeout.String()
	case res.ExitCode != 0:
		rv.Error = fmt.Sprintf("exit status %d: %s", res.ExitCode, gate.Trim(strings.TrimSpace(mask(errb.String())), 500))
	}
	if rv.Error == "" {
		rv.Findings = review.ParseFindings(rv.Text, name)
		rv.Verdict = string(roles.ParseVerdict(rv.Text).Decision)
	}
	return rv
}

// postReview posts the report on pull request n as a review comment.
func postReview(ctx context.Context, ro *RunOptions, root string, n int, rep review.Report) error {
	body := rep.Markdown()
	// GitHub takes at most 65,536 characters.
	if len(body) > 60000 {
		body = body[:60000] + "\n\n… (cut; the whole review is in " + rep.Page + ")\n"
	}
	if err := ro.IO.gh(root).ReviewPullRequest(ctx, n, "ralph review "+rep.ID+"\n\n"+body, false); err != nil {
		return fmt.Errorf("posting the review on pull request #%d (it is kept in %s): %w", n, rep.Page, err)
	}
	return nil
}

// afterReview turns the findings into stories or tasks, or runs the
// loop over them.
func (o *ReviewOptions) afterReview(ctx context.Context, root string, repo *git.Repo, rep review.Report, dir string) error {
	f := o.IO
	if o.IntoTasks != "" {
		n, err := findingsIntoTasks(o.IntoTasks, rep, o.Nits)
		if err != nil {
			return err
		}
		fmt.Fprintf(f.IO.ErrOut, "ralph: added %s to %s\n", engine.Plural(n, "task"), o.IntoTasks)
	}
	if o.IntoPRD == "" && !o.Fix {
		return nil
	}
	branch := rep.Head
	if branch == "HEAD" {
		return usage.Errorf("HEAD is detached: check out the branch the findings are to be fixed on")
	}
	gates := gate.Detect(root).QualityChecks()
	doc := rep.PRD(branch, gates, o.Nits)
	if doc == nil {
		fmt.Fprintf(f.IO.ErrOut, "ralph: no finding to fix\n")
		return nil
	}
	if o.IntoPRD != "" {
		n, err := findingsIntoPRD(o.IntoPRD, doc)
		if err != nil {
			return err
		}
		fmt.Fprintf(f.IO.ErrOut, "ralph: added %s to %s; `ralph run --prd %s` fixes them\n", engine.Plural(n, "story"), o.IntoPRD, o.IntoPRD)
		return nil
	}
	file := filepath.Join(dir, "prd.json")
	b, err := doc.Marshal()
	if err == nil {
		err = store.WriteFile(file, b, 0o644)
	}
	if err != nil {
		return err
	}
	if doc.QualityChecks == (prd.QualityChecks{}) {
		return usage.Errorf("--fix: ralph init finds no quality gate in this repository, so no fix could be judged; the stories are in %s (add quality_checks, then `ralph run --prd %s`)", relOr(root, file), relOr(root, file))
	}
	fmt.Fprintf(f.IO.ErrOut, "ralph: fixing %s on %s (%s)\n", engine.Plural(len(doc.Stories), "finding"), branch, relOr(root, file))
	// `ralph run --prd FILE` with the agent flags given here: its own
	// defaults and config apply as to any run.
	args := []string{"--prd", file}
	a := o.Run.AgentSpec
	for name, v := range map[string]string{"agent": a.Agent, "agent-cmd": a.AgentCmd, "model": a.Model, "base-url": a.BaseURL, "provider": a.Provider, "script": a.Script} {
		if o.flagSet(name) {
			args = append(args, "--"+name, v)
		}
	}
	if o.flagSet("agent-arg") {
		for _, v := range a.AgentArgs {
			args = append(args, "--agent-arg", v)
		}
	}
	if o.Run.NoSandbox {
		args = append(args, "--no-sandbox")
	}
	run := newCmdRun(f, nil)
	run.SetArgs(args)
	run.SilenceErrors, run.SilenceUsage = true, true
	return run.ExecuteContext(ctx)
}

// findingsIntoPRD adds doc's stories to the PRD at path (made, with doc's
// gates and branch, when missing), each with an id the file does not use.
func findingsIntoPRD(path string, doc *prd.PRD) (int, error) {
	target := doc
	if _, err := os.Stat(path); err == nil {
		if target, err = prd.Load(path); err != nil {
			return 0, usage.Errorf("%v", err)
		}
		used := map[string]bool{}
		top := 0
		for _, s := range target.Stories {
			used[s.ID] = true
			top = max(top, s.Priority)
		}
		n := 0
		for _, s := range doc.Stories {
			for k := n + 1; ; k++ {
				if id := "R-" + strconv.Itoa(k); !used[id] {
					s.ID, n, used[id] = id, k, true
					break
				}
			}
			s.Priority = top + s.Priority
			target.Stories = append(target.Stories, s)
		}
	}
	if err := target.Validate(); err != nil {
		return 0, fmt.Errorf("the PRD with the findings is not valid (nothing written): %w", err)
	}
	b, err := target.Marshal()
	if err != nil {
		return 0, err
	}
	return len(doc.Stories), store.WriteFile(path, b, 0o644)
}

// findingsIntoTasks adds a task per finding (minor and above, unless
// nits) to the task tree at path.
func findingsIntoTasks(path string, rep review.Report, nits bool) (int, error) {
	n := 0
	err := tasks.Open(path).Update(func(set *tasks.Set) error {
		for _, fd := range rep.Findings() {
			if fd.Severity == "nit" && !nits {
				continue
			}
			if _, err := set.Add("", fd.TaskTitle(), ""); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, usage.Errorf("%s: %v", path, err)
	}
	return n, nil
}
