package app

import (
	"context"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/secret"
)

// NewJudge is a run's one judge: its gates run through the run's gate
// runner (in the sandbox, where they see the judge's checkout of the
// commit at the repository's own path), and the work's files are
// searched for the secrets ralph masks.
func NewJudge(repo *git.Repo, paths engine.Paths, gates gate.Runner, sb *sandbox.Sandbox, mask *secret.Masker) (*judge.Judge, error) {
	j, err := judge.New(repo, gates, paths.Dir)
	if err != nil {
		return nil, err
	}
	if sb != nil {
		root := repo.Dir
		// The gates' confinement of a checkout ends with its judging: the
		// checkout is then another commit's.
		j.View = func(ctx context.Context, checkout string) (context.Context, string, func()) {
			return sandbox.WithGateView(ctx, sandbox.GateView{Tree: checkout}), root, sb.CloseGates
		}
	}
	if mask != nil {
		j.Secret = mask.Find
	}
	return j, nil
}
