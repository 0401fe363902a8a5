package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
)

// StopOptions are `ralph stop`'s settings.
type StopOptions struct{ IO *Factory }

// newCmdStop builds `ralph stop`.
func newCmdStop(f *Factory, runF func(*StopOptions) error) *cobra.Command {
	opts := &StopOptions{IO: f}
	return &cobra.Command{
		Use:     "stop",
		Example: `  ralph stop`,
		Short:   "Stop the active run after its current iteration",
		Long: `Ask the active run in this repository to stop gracefully: it finishes the
current iteration (agent, gates, commit), saves its state and exits with 130.
This creates .ralph/stop, which you may also create by hand.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			root, _, err := f.Repo(cmd.Context())
			if err != nil {
				return err
			}
			p := engine.PathsFor(root)
			active, holder := engine.ActiveRun(p)
			if !active {
				fmt.Fprintf(f.IO.ErrOut, "ralph: no run is active in %s; nothing to stop\n", root)
				return nil
			}
			if err := requestStop(p, "`ralph stop`"); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "ralph: asked the run (%v) to stop after its current iteration\n", holder)
			return nil
		},
	}
}

// requestStop asks the run to stop after its current iteration (the
// dashboard's s, `ralph stop`).
func requestStop(p engine.Paths, by string) error {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	return store.WriteFile(p.Stop, []byte("stop requested by "+by+"\n"), 0o644)
}

// setPause holds new iterations back (on) or lets them start again.
func setPause(p engine.Paths, on bool, by string) error {
	if !on {
		if err := os.Remove(p.Pause); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	return store.WriteFile(p.Pause, []byte("paused by "+by+" at "+time.Now().Format("2006-01-02 15:04")+"\n"), 0o644)
}

// newCmdPause builds `ralph pause` and `ralph resume`.
func newCmdPause(f *Factory, resume bool) *cobra.Command {
	use, short := "pause", "Let the active run finish its current iterations, then start no new one until ralph resume"
	long := `Hold the run in this repository after the iterations under way: they finish
(agent, gates, commit) and no new one starts until ` + "`ralph resume`" + `. The run
keeps its lock and its state; ` + "`ralph stop`" + ` still stops it. This creates
.ralph/pause, which you may also create by hand (or press p in the dashboard).

With no run active, the pause holds the next ` + "`ralph run`" + `: it starts, says it
is paused and why, and waits for ` + "`ralph resume`" + ` before its first iteration
(a way to start a run and look at it first). ` + "`ralph resume`" + ` removes the pause.`
	if resume {
		use, short = "resume", "Let a paused run start new iterations again"
		long = "Remove .ralph/pause: a paused run starts its next iteration."
	}
	return &cobra.Command{
		Use: use, Short: short, Long: long, Args: cobra.NoArgs, Example: "  ralph " + use,
		RunE: func(cmd *cobra.Command, args []string) error {
			root, _, err := f.Repo(cmd.Context())
			if err != nil {
				return err
			}
			p := engine.PathsFor(root)
			if err := setPause(p, !resume, "`ralph pause`"); err != nil {
				return err
			}
			active, _ := engine.ActiveRun(p)
			switch {
			case resume:
				fmt.Fprintln(f.IO.ErrOut, "ralph: resumed; the run starts its next iteration")
			case active:
				fmt.Fprintln(f.IO.ErrOut, "ralph: paused; the iterations under way finish, then nothing starts until `ralph resume`")
			default:
				fmt.Fprintln(f.IO.ErrOut, "ralph: no run is active; the next `ralph run` starts paused until `ralph resume` (which also takes this pause back now)")
			}
			return nil
		},
	}
}
