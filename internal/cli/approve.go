package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
)

// DecideOptions are `ralph approve` and `ralph reject`'s settings.
type DecideOptions struct {
	IO      *Factory
	Item    string
	Approve bool
	Reason  string
}

// newCmdApprove builds `ralph approve ID`.
func newCmdApprove(f *Factory, runF func(*DecideOptions) error) *cobra.Command {
	opts := &DecideOptions{IO: f, Approve: true}
	return &cobra.Command{
		Use:   "approve ID",
		Short: "Approve the plan an item waits with (--plan-approval)",
		Long: `Approve the plan of an item that waits for approval: with --plan-approval
each item's first iteration writes a plan to .ralph/plans/<ID>.md and changes
no code, and the item waits until a person decides. ` + "`ralph status`" + ` lists the
waiting plans. The decision is written beside the plan; a running loop applies
it before it next picks an item, otherwise the next ` + "`ralph run`" + ` does.`,
		Example:           "  ralph status\n  ralph approve US-002",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeItems(f, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Item = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runDecide(cmd, opts)
		},
	}
}

// newCmdReject builds `ralph reject ID --reason TEXT`.
func newCmdReject(f *Factory, runF func(*DecideOptions) error) *cobra.Command {
	opts := &DecideOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "reject ID --reason TEXT",
		Short: "Reject the plan an item waits with; it plans again with the reason",
		Long: `Reject the plan of an item that waits for approval (--plan-approval). The
item's next iteration writes a new plan with the reason in its prompt; the
rejected plan is kept as .ralph/plans/<ID>.<N>.rejected.md.`,
		Example:           `  ralph reject US-002 --reason "keep the old API; add a new endpoint instead"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeItems(f, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Item = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runDecide(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the plan is rejected (`TEXT`): the next plan must answer it")
	requireFlags(cmd, "reason")
	return cmd
}

func runDecide(cmd *cobra.Command, o *DecideOptions) error {
	f := o.IO
	root, _, err := f.Repo(cmd.Context())
	if err != nil {
		return err
	}
	p := engine.PathsFor(root)
	if _, err := engine.DecidePlan(p, o.Item, o.Approve, o.Reason, time.Now()); err != nil {
		return err
	}
	what := "approved the plan of " + o.Item
	if !o.Approve {
		what = "rejected the plan of " + o.Item + "; it plans again with your reason"
	}
	then := "`ralph run` goes on"
	if active, _ := engine.ActiveRun(p); active {
		then = "the running loop applies it before it next picks an item"
	}
	fmt.Fprintf(f.IO.ErrOut, "ralph: %s (%s); %s\n", what, relOr(root, engine.PlanFile(p, o.Item)), then)
	return nil
}
