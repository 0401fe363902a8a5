package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
)

// StopOptions are `ralph stop`'s settings.
type StopOptions struct{ IO *Factory }

// NewCmdStop builds `ralph stop`.
func NewCmdStop(f *Factory, runF func(*StopOptions) error) *cobra.Command {
	opts := &StopOptions{IO: f}
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the active run after its current iteration",
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
			if err := os.MkdirAll(p.Dir, 0o755); err != nil {
				return err
			}
			if err := store.WriteFile(p.Stop, []byte("stop requested by `ralph stop`\n"), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "ralph: asked the run (%v) to stop after its current iteration\n", holder)
			return nil
		},
	}
}
