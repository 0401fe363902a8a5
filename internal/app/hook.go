package app

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/decide"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/hook"
	"github.com/ralph-loop/ralph/internal/policy"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/secret"
	"github.com/ralph-loop/ralph/internal/source"
	"github.com/ralph-loop/ralph/internal/usage"
)

// HookEngine builds the engine for an armed loop (the Stop hook's). Every Stop-hook step is
// a resume: the policy files are checked against the pinned policy before
// they are read, as `ralph run` does. A PRD's run-wide gates run on the
// untouched base first, as for ralph run (kept in .ralph/baseline.json,
// so a Stop re-runs them only when the base moved).
func HookEngine(ctx context.Context, root string, repo *git.Repo, a *hook.Armed, gates gate.Runner, sb *sandbox.Sandbox, fresh bool, errOut io.Writer) (*engine.Engine, error) {
	guard, err := policy.Check(engine.PathsFor(root), policy.Options{Fresh: fresh}, errOut)
	if err != nil {
		return nil, err
	}
	cfg := engine.Config{Policy: guard,
		Paths: engine.PathsFor(root), Git: repo,
		Agent:      engine.AgentConfig{Name: "in-session (Stop hook)"},
		Prompt:     engine.PromptConfig{Paths: []string{filepath.Join(root, ".ralph", "PROMPT.md"), filepath.Join(root, "PROMPT.md")}, Promise: a.Promise},
		Limits:     engine.Limits{MaxIterations: a.MaxIterations},
		Start:      engine.StartConfig{Fresh: fresh, AllowDirty: true},
		TrustMarks: a.TrustMarks,
	}
	switch a.Kind {
	case "loop":
		var checks []gate.Gate
		for i, c := range a.Checks {
			checks = append(checks, gate.Gate{Name: fmt.Sprintf("check %d", i+1), Command: c})
		}
		// What each iteration leaves lands on the branch checked out, as
		// `ralph run --prompt` does (on a detached HEAD nothing is
		// committed: the session's own commits are all there is).
		branch, _ := repo.CurrentBranch(ctx)
		cfg.Source = &source.Loop{Root: root, Prompt: a.Prompt, Checks: checks, Gates: gates, MaxIterations: a.MaxIterations, Git: repo, Commit: branch != "" && repo.HasCommits(ctx)}
		cfg.Prompt.Text = source.LiteralTemplate(a.Prompt)
		cfg.Limits.MaxAttempts = a.MaxIterations + 1
	case "prd":
		src, err := source.OpenPRD(a.Path, repo, gates)
		if err != nil {
			return nil, err
		}
		cfg.Source, guard.PRD = src, src.Info().PRDPath
	case "pipeline":
		src, err := source.OpenPipeline(a.Path, root, repo, gates.Proc, gates.Timeout)
		if err != nil {
			return nil, err
		}
		cfg.Source = src
		if a.Path != "pagent" {
			guard.Whole = append(guard.Whole, a.Path)
		}
	default:
		return nil, fmt.Errorf("%s: unknown loop kind %q", hook.ArmedPath(root), a.Kind)
	}
	// The same roles as `ralph run`: the Stop hook hands the agent the
	// role's prompt (its agent is the session itself, so roles.yaml's
	// agents do not apply).
	rs, err := LoadRoles(root)
	if err != nil {
		return nil, err
	}
	cfg.Roles = rs
	if cfg.Deciders, err = decide.Rules(decide.Options{Paths: cfg.Paths, Roles: rs}); err != nil {
		return nil, err
	}
	if cfg.Judge, err = NewJudge(repo, cfg.Paths, gates, sb, secret.FromEnv()); err != nil {
		return nil, err
	}
	return engine.New(cfg)
}

// LoopGates is the gate runner of an in-session loop: gates in the
// sandbox l's settings make for root (unconfined when off).
func LoopGates(gates gate.Runner, l *config.Layered, root string, off bool) (gate.Runner, *sandbox.Sandbox, error) {
	s, err := SandboxSettings(l)
	if err != nil {
		return gates, nil, err
	}
	sb, err := OpenSandbox(s, off, engine.PathsFor(root))
	if err != nil {
		return gates, nil, err
	}
	return ConfinedGates(gates, sb), sb, nil
}

// LoadRoles reads the roles in force; a bad file is a usage error (exit 2).
func LoadRoles(root string) (*roles.Set, error) {
	rs, err := roles.Load(root)
	if err != nil {
		return nil, usage.Errorf("%v", err)
	}
	return rs, nil
}
