package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/usage"
)

// GuideOptions are `ralph guide`'s settings.
type GuideOptions struct {
	IO         *Factory
	Text       string
	Item       string
	Iterations int
	By         string
}

// newCmdGuide builds `ralph guide "TEXT"`.
func newCmdGuide(f *Factory, runF func(*GuideOptions) error) *cobra.Command {
	opts := &GuideOptions{IO: f, By: "ralph guide"}
	cmd := &cobra.Command{
		Use:   `guide "TEXT" [--item ID]`,
		Short: "Give the next iterations guidance (every item's, or one item's)",
		Long: `Tell the agents of the next iterations something, while the loop runs: the
text is added to their prompts under "Guidance from a person" — every item's,
or only the item --item names — until an iteration acknowledges it (its
agent ends a line of its final message with "GUIDANCE-ACK: g1", naming the
guidance's id) or it has been shown to guidance_iterations iterations
(.ralph/config.yaml, default 3; --iterations for this one). ` + "`ralph status`" + `
lists the guidance still pending. It is recorded in .ralph/progress.md and
the events; secrets in the text are masked before it is kept.

Guidance is a person's word: given from inside an iteration (an agent, or
anything it started) it is refused, and the log ralph believes is sealed
and kept outside the repository (.ralph/guidance.jsonl is a copy to read).`,
		Example: `  ralph guide "the tests need TZ=UTC; set it in the test helper, not in CI"
  ralph guide --item US-003 "use the existing Store type, do not add a new one"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Text = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runGuide(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Item, "item", "", "aim the guidance at the item `ID` only")
	cmd.Flags().IntVar(&opts.Iterations, "iterations", 0, "show it to at most `N` iterations unless one acknowledges it (default guidance_iterations, else 3)")
	cmd.Flags().StringVar(&opts.By, "by", opts.By, "who gives it (`NAME`, shown beside it)")
	_ = cmd.Flags().MarkHidden("by")
	return cmd
}

func runGuide(cmd *cobra.Command, o *GuideOptions) error {
	f := o.IO
	root, _, err := f.Repo(cmd.Context())
	if err != nil {
		return err
	}
	if o.Iterations < 0 {
		return usage.Errorf("--iterations must not be negative")
	}
	g, err := giveGuidance(engine.PathsFor(root), o.Text, o.Item, o.By, o.Iterations)
	if err != nil {
		return err
	}
	aim := "every item's next iterations"
	if g.Item != "" {
		aim = g.Item + "'s next iterations"
	}
	fmt.Fprintln(f.IO.Out, g.ID)
	fmt.Fprintf(f.IO.ErrOut, "ralph: guidance %s is in %s prompts until one acknowledges it (at most %d)\n", g.ID, aim, g.For)
	return nil
}

// giveGuidance gives guidance from by; iterations 0 takes
// guidance_iterations from the repository's config.
func giveGuidance(p engine.Paths, text, item, by string, iterations int) (engine.Guidance, error) {
	if iterations == 0 {
		c, err := config.LoadLayered(filepath.Join(p.Dir, "config.yaml"))
		if err != nil {
			return engine.Guidance{}, usage.Errorf("%v", err)
		}
		iterations = c.GuidanceIterations
	}
	return engine.GiveGuidance(p, text, item, by, iterations, time.Now())
}

// guidanceMarkdown lists the guidance still pending.
func guidanceMarkdown(gs []engine.Guidance) string {
	var b strings.Builder
	for _, g := range gs {
		if !g.Pending() {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n## Pending guidance\n\n| ID | For | Shown | Text |\n|---|---|---|---|\n")
		}
		aim := g.Item
		if aim == "" {
			aim = "every item"
		}
		fmt.Fprintf(&b, "| %s | %s | %d/%d | %s |\n", g.ID, aim, len(g.Shown), g.For, strings.ReplaceAll(strings.Join(strings.Fields(g.Text), " "), "|", `\|`))
	}
	return b.String()
}
