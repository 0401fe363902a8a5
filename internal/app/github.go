package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/github"
	"github.com/ralph-loop/ralph/internal/plan"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/secret"
	"github.com/ralph-loop/ralph/internal/source"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// materialisedPRD is where the harness-owned PRD of --issues ("issues")
// or --plan ("plan") is kept: one per query or plan, so that a run of
// another one is a run of another source (its items never taken for the
// last one's, whose ids they may share).
func materialisedPRD(root, kind, name string) string {
	return filepath.Join(root, ".ralph", kind, git.Slug(name, 60), "prd.json")
}

// Masker is what ralph writes to GitHub and into the PRDs it makes from
// issues goes through: secrets masked unless noMask (env: the agent's
// variables, masked too).
func Masker(noMask bool, env []string) func(string) string {
	if noMask {
		return secret.Off().String
	}
	return secret.FromEnv(env...).String
}

func (o *opener) gh(root string) *github.GH {
	return &github.GH{Runner: o.d.Runner, Dir: root}
}

// materialised says whether the harness-owned PRD at path is to be made
// afresh: not while the last run of it is unfinished (it resumes with
// the PRD, and so the policy, it started with), unless --fresh.
func (o *opener) materialise(root, path string) bool {
	if o.Fresh {
		return true
	}
	if _, err := os.Stat(path); err != nil {
		return true
	}
	st, _, err := engine.LoadOrRebuildState(engine.PathsFor(root))
	if err != nil || st == nil {
		return true
	}
	return st.Status == engine.StatusComplete || filepath.Clean(st.SourcePath) != filepath.Clean(path)
}

// writePRD writes a materialised PRD into .ralph.
func writePRD(ctx context.Context, repo *git.Repo, path string, doc *prd.PRD) error {
	if err := repo.EnsureExcluded(ctx, "/.ralph/"); err != nil {
		return err
	}
	b, err := doc.Marshal()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return store.WriteFile(path, b, 0o644)
}

// runGates are the gates of .ralph/config.yaml and --gate for a
// materialised PRD.
func (o *Options) runGates() ([]prd.Gate, error) {
	list, err := ParseGates(o.Gates)
	if err != nil {
		return nil, err
	}
	out := make([]prd.Gate, 0, len(list))
	for _, g := range list {
		out = append(out, prd.Gate{Name: g.Name, Command: g.Command})
	}
	return out, nil
}

// issuesSource makes (or, for an unfinished run, keeps) the PRD of the
// open issues --issues matches and returns its path.
func (o *opener) issuesSource(ctx context.Context, root string, repo *git.Repo) (string, error) {
	path := materialisedPRD(root, "issues", o.Issues)
	if !o.materialise(root, path) {
		return path, nil
	}
	issues, err := o.gh(root).ListIssues(ctx, o.Issues)
	if err != nil {
		return "", fmt.Errorf("--issues: %w", err)
	}
	if len(issues) == 0 {
		return "", usage.Errorf("--issues %q: no open issue matches", o.Issues)
	}
	gates, err := o.runGates()
	if err != nil {
		return "", err
	}
	doc, err := github.IssuesPRD(o.Issues, issues, gates, "ralph/issues-"+git.Slug(o.Issues, 40), Masker(o.NoMask, o.Env))
	if err != nil {
		return "", fmt.Errorf("--issues: %w", err)
	}
	return path, writePRD(ctx, repo, path, doc)
}

// planSource makes (or keeps) the PRD of the --plan file, and returns
// its path and the plan (whose boxes the PRD's write-back ticks).
func (o *opener) planSource(ctx context.Context, root string, repo *git.Repo) (string, *plan.Plan, error) {
	p, err := plan.Load(o.abs(o.Plan))
	if err != nil {
		return "", nil, err
	}
	if rel, err := filepath.Rel(root, p.Path); err != nil || filepath.IsAbs(rel) || strings.HasPrefix(rel, "..") || strings.HasPrefix(filepath.ToSlash(rel), ".ralph/") {
		return "", nil, usage.Errorf("--plan %s: the plan must be a file of the repository (ralph commits its ticked boxes)", o.Plan)
	}
	rel, _ := filepath.Rel(root, p.Path)
	path := materialisedPRD(root, "plan", rel)
	if !o.materialise(root, path) {
		return path, p, nil
	}
	gates, err := o.runGates()
	if err != nil {
		return "", nil, err
	}
	name := strings.TrimSuffix(filepath.Base(p.Path), filepath.Ext(p.Path))
	doc, err := p.PRD("ralph/plan-"+git.Slug(name, 40), gates)
	if err != nil {
		return "", nil, err
	}
	return path, p, writePRD(ctx, repo, path, doc)
}

// mirrorPlan makes the PRD source tick p's boxes as its stories pass.
func mirrorPlan(src any, p *plan.Plan) {
	if m, ok := src.(interface{ SetMirror(*source.Mirror) }); ok && p != nil {
		m.SetMirror(&source.Mirror{Path: p.Path, Render: p.Tick})
	}
}

// afterRun is what a run does on GitHub and to its plan once the engine
// stopped: the last reports on the issues, the finished plan moved to
// its completed/ folder, and the pull request. Failures are told, never
// fatal: the run's verdicts are recorded already.
func (r *Run) afterRun(ctx context.Context, st *engine.State, reporter *github.Reporter) {
	o := r.o
	ctx = context.WithoutCancel(ctx)
	if reporter != nil {
		reporter.Report(ctx, st)
	}
	if o.Plan != "" && st != nil && st.Status == engine.StatusComplete {
		if err := r.completePlan(ctx); err != nil {
			o.logf("plan: %v", err)
		}
	}
	if o.PR && st != nil {
		url, err := github.UpdatePullRequest(ctx, github.PullRequestOptions{GH: o.gh(o.root), Git: r.repo, Remote: o.PRRemote,
			Record: filepath.Join(r.cfg.Paths.Dir, github.RecordFile), Title: o.prTitle(st), Mask: Masker(o.NoMask, o.Env)}, st)
		if err != nil {
			o.logf("pull request: %v", err)
		} else {
			o.logf("pull request: %s", url)
		}
	}
}

// completePlan moves a finished plan into its completed folder (as
// ralphex does) in one commit on the feature branch.
func (r *Run) completePlan(ctx context.Context) error {
	o := r.o
	if o.PlanCompleted == "-" {
		return nil
	}
	from := o.abs(o.Plan)
	dir := o.PlanCompleted
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(from), dir)
	}
	to := filepath.Join(dir, filepath.Base(from))
	if _, err := os.Stat(from); err != nil {
		return nil // moved already
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := r.repo.AddPaths(ctx, from, to); err != nil {
		return err
	}
	rel, _ := filepath.Rel(o.root, from)
	relTo, _ := filepath.Rel(o.root, to)
	if _, err := r.repo.Commit(ctx, fmt.Sprintf("chore(plan): %s is done; moved to %s", rel, relTo), false); err != nil {
		return err
	}
	o.logf("plan: every item passed; %s moved to %s", rel, relTo)
	return nil
}

// prTitle names the run's pull request.
func (o *opener) prTitle(st *engine.State) string {
	switch {
	case o.Issues != "":
		return "ralph: issues " + o.Issues // the pull request takes the issues' titles
	case o.Plan != "":
		return "ralph: plan " + filepath.Base(o.Plan)
	}
	return "ralph: " + strings.TrimPrefix(st.Branch, "ralph/")
}

// reportWhileRunning reports on the issues whenever the saved state
// changed (checked every interval) until ctx ends.
func reportWhileRunning(ctx context.Context, paths engine.Paths, rep *github.Reporter, interval time.Duration) {
	var last time.Time
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if fi, err := os.Stat(paths.State); err == nil && !fi.ModTime().Equal(last) {
			last = fi.ModTime()
			if st, _, err := engine.LoadOrRebuildState(paths); err == nil && st != nil {
				rep.Report(ctx, st)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// logf tells the user something about the run's side effects.
func (o *opener) logf(format string, args ...any) {
	fmt.Fprintf(o.d.ErrOut, "%s ralph: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
