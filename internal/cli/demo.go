package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/demo"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/usage"
)

// DemoOptions are `ralph demo`'s settings.
type DemoOptions struct {
	IO        *Factory
	Dir       string
	NoSandbox bool
}

// newCmdDemo builds `ralph demo`.
func newCmdDemo(f *Factory, runF func(*DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f}
	cmd := &cobra.Command{
		Use: "demo",
		Example: `  ralph demo
  ralph demo --dir /tmp/calc`,
		Short: "Run the whole loop on a small generated project with the scripted agent",
		Long: `Create a small Go project in a temporary folder (a calculator with a failing
test per story), a three-story prd.json where story 3 depends on stories 1
and 2, and run the full loop with the built-in scripted agent: a
deterministic replay of file edits, not a model. Story 2's first attempt
fails its check, so you see a retry whose prompt carries the gate output.
The folder is kept so you can look at the commits and transcripts.

The agent and the gates run in the sandbox, as in a real run (bubblewrap,
with the sandbox: settings of your ~/.config/ralph/config.yaml). Where
bubblewrap cannot start, the demo says why and runs without it, where
` + "`ralph run`" + ` would refuse until it is fixed or given --no-sandbox.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runDemo(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "`DIR` to create the demo in (default: a new temporary folder)")
	cmd.Flags().BoolVar(&opts.NoSandbox, "no-sandbox", false, "run the agent and the gates without the sandbox")
	return cmd
}

func runDemo(ctx context.Context, o *DemoOptions) error {
	w := o.IO.IO.ErrOut
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ralph-demo-")
		if err != nil {
			return err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 && o.Dir != "" {
		return usage.Errorf("--dir %s is not empty", dir)
	}
	start := time.Now()
	script, err := demo.Create(ctx, dir)
	if err != nil {
		return fmt.Errorf("creating the demo project: %w", err)
	}
	root := demo.ProjectDir(dir)
	fmt.Fprintf(w, "ralph demo: project in %s (3 stories; US-003 depends on US-001 and US-002)\n", root)
	fmt.Fprintf(w, "ralph demo: agent = scripted (replays %s; it is not a model)\n", script)

	paths := engine.PathsFor(root)
	sb := demoSandbox(w, o.NoSandbox, paths)
	fmt.Fprintln(w)
	repo := o.IO.GitAt(root)
	gates := app.ConfinedGates(o.IO.GateRunner(2*time.Minute), sb)
	pp := newPlainPrinter(w, o.IO.IO.Color())
	d, err := app.OpenDemo(repo, gates, sb, root, script, w, func(ev engine.Event) {
		pp.event(ev)
		if ev.Type == "iteration_started" && ev.Data["retry"] == true {
			fmt.Fprintf(w, "           (retry: the prompt carries the failing gate's output)\n")
		}
	})
	if err != nil {
		return err
	}
	src := d.Source
	outcome, err := d.Engine.Run(ctx)
	if err != nil && outcome.State == nil {
		return err
	}
	printSummary(w, outcome, paths)
	log, _ := repo.Log(ctx, "main..HEAD", "%h %s")
	fmt.Fprintf(w, "\nralph demo: commits on %s:\n", src.Branch)
	for _, l := range log {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if tr := retryTranscript(paths.Transcripts); tr != "" {
		fmt.Fprintf(w, "\nralph demo: the retry's prompt is in %s\n", tr)
	}
	fmt.Fprintf(w, "ralph demo: done in %s. Look around: cd %s && git log --stat && ralph status\n", time.Since(start).Round(100*time.Millisecond), root)
	if _, err := exec.LookPath("ralph"); err != nil {
		// Run by `go run`: the binary is gone, and ralph is not on PATH.
		install := "go install github.com/ralph-loop/ralph/cmd/ralph@latest"
		if _, err := os.Stat(filepath.Join("cmd", "ralph", "main.go")); err == nil {
			install = "go install ./cmd/ralph"
		}
		fmt.Fprintf(w, "ralph demo: ralph is not on your PATH: `%s` puts it there (in $(go env GOPATH)/bin), then `ralph status` works\n", install)
	}
	if outcome.Status != engine.StatusComplete {
		return &statusError{status: outcome.Status, reason: outcome.Reason}
	}
	return nil
}

// demoSandbox opens the sandbox the demo's agent and gates run in, as a
// run's would (the user's own sandbox: settings apply), and says so; where
// it cannot start, the demo says why and goes on without it (nil).
func demoSandbox(w io.Writer, off bool, paths engine.Paths) *sandbox.Sandbox {
	if off {
		fmt.Fprintf(w, "ralph demo: sandbox = off (--no-sandbox)\n")
		return nil
	}
	user, err := config.LoadLayered("") // the user's file alone: the demo has no project config
	var sb *sandbox.Sandbox
	if err == nil {
		var s config.Sandbox
		if s, err = app.SandboxSettings(user); err == nil {
			sb, err = app.OpenSandbox(s, false, paths)
		}
	}
	switch {
	case err != nil:
		fmt.Fprintf(w, "ralph demo: sandbox = off: %v\n", err)
		fmt.Fprintf(w, "ralph demo: (the demo goes on without it; `ralph run` would refuse to start here until the sandbox starts, or with --no-sandbox)\n")
	case sb == nil:
		fmt.Fprintf(w, "ralph demo: sandbox = off (sandbox.enabled: false in %s)\n", config.UserPath())
	default:
		fmt.Fprintf(w, "ralph demo: sandbox = bubblewrap: agent and gates write only the project and build caches, no network (`ralph doctor` in a project says all it allows)\n")
	}
	return sb
}

// retryTranscript finds the transcript of the first retry iteration.
func retryTranscript(dir string) string {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "## Previous attempt failed") {
			return p
		}
	}
	return ""
}
