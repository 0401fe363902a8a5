package app

import (
	"io"
	"path/filepath"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/policy"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/source"
)

// Demo is `ralph demo`'s run of its generated project: the PRD, the
// scripted agent replaying script, the one judge and the policy pinned as
// a run pins it (a `ralph run` in the project afterwards finds it), the
// agent and gates in sb (nil: without the sandbox). log hears the
// policy's words; onEvent every event.
type Demo struct {
	Engine *engine.Engine
	Source *source.PRD
}

// OpenDemo assembles the demo's engine in root.
func OpenDemo(repo *git.Repo, gates gate.Runner, sb *sandbox.Sandbox, root, script string, log io.Writer, onEvent func(engine.Event)) (*Demo, error) {
	paths := engine.PathsFor(root)
	src, err := source.OpenPRD(filepath.Join(root, "prd.json"), repo, gates)
	if err != nil {
		return nil, err
	}
	ag, err := agent.New("scripted", agent.Options{Script: script})
	if err != nil {
		return nil, err
	}
	if sb != nil {
		sb.Save() // `ralph status` in the project says the run was confined
	}
	j, err := NewJudge(repo, paths, gates, sb, nil)
	if err != nil {
		return nil, err
	}
	guard, err := policy.Check(paths, policy.Options{Fresh: true}, log)
	if err != nil {
		return nil, err
	}
	guard.PRD = src.Info().PRDPath
	eng, err := engine.New(engine.Config{
		Paths: paths, Source: src, Git: repo, Judge: j, Policy: guard,
		Agent:   engine.AgentConfig{Default: Confine(ag, sb, paths, "", nil), Name: "scripted"},
		Limits:  engine.Limits{IterationTimeout: time.Minute},
		OnEvent: onEvent,
	})
	if err != nil {
		return nil, err
	}
	return &Demo{Engine: eng, Source: src}, nil
}
