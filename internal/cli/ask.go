package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// AskOptions are `ralph ask`'s settings.
type AskOptions struct {
	IO       *Factory
	Question string
}

// newCmdAsk builds `ralph ask "QUESTION"`: an agent's question to a person,
// from inside an iteration.
func newCmdAsk(f *Factory, runF func(*AskOptions) error) *cobra.Command {
	opts := &AskOptions{IO: f}
	return &cobra.Command{
		Use:   "ask QUESTION",
		Short: "From inside an iteration: ask a person; the item waits for the answer",
		Long: `For the agent of an iteration: ask a person a question the work cannot go on
without. The question is recorded for the run; when the iteration ends, the
item waits ("waiting for an answer" in ralph status, the dashboards and MCP)
while other items go on, and the configured notifications tell a person. They
answer with ` + "`ralph answer ID \"TEXT\"`" + ` (or the dashboard, or a reply in
Telegram or Slack), and the item's next iteration gets the question and the
answer in its prompt. End the iteration after asking, without claiming the
work done.

It works inside ralph's sandbox (the run's own folder is read-only there: the
question goes to a scratch folder ralph reads when the agent is done). It
reads $RALPH_ITEM_ID, $RALPH_ITERATION and $RALPH_STATE_DIR, which ralph gives
every agent; outside an iteration it refuses.`,
		Example: `  ralph ask "Should the new endpoint keep the v1 field names, or may it use the v2 ones?"`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Question = strings.Join(args, " ")
			if runF != nil {
				return runF(opts)
			}
			return runAsk(opts)
		},
	}
}

func runAsk(o *AskOptions) error {
	item, dir, n := os.Getenv("RALPH_ITEM_ID"), os.Getenv("RALPH_STATE_DIR"), os.Getenv("RALPH_ITERATION")
	iteration, err := strconv.Atoi(n)
	if item == "" || dir == "" || err != nil || iteration <= 0 {
		return usage.Errorf("ralph ask is for the agent of a ralph iteration ($RALPH_ITEM_ID, $RALPH_ITERATION and $RALPH_STATE_DIR are not set); a person guides a run with `ralph guide`")
	}
	q := strings.TrimSpace(o.Question)
	if q == "" {
		return usage.Errorf("the question is empty")
	}
	file := engine.AskFile(dir, item, iteration)
	if err := os.MkdirAll(engine.AskDir(dir), 0o755); err != nil {
		return fmt.Errorf("ralph ask: %w", err)
	}
	if err := store.AppendJSONL(file, engine.Asked{Text: q, At: time.Now().UTC()}); err != nil {
		return fmt.Errorf("ralph ask: recording the question: %w", err)
	}
	fmt.Fprintf(o.IO.IO.Out, "Your question is recorded. A person is told when this iteration ends, and %s waits for the answer.\nEnd this iteration now: finish your final message without claiming the work done. Your next iteration's prompt will carry the question and the answer.\n", item)
	return nil
}

// AnswerOptions are `ralph answer`'s settings.
type AnswerOptions struct {
	IO     *Factory
	ID     string
	Answer string
	// By names who answered (the dashboard says "the dashboard").
	By string
}

// newCmdAnswer builds `ralph answer ID "TEXT"`.
func newCmdAnswer(f *Factory, runF func(*AnswerOptions) error) *cobra.Command {
	opts := &AnswerOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "answer ID TEXT",
		Short: "Answer an agent's question (ralph ask); its item goes on",
		Long: `Answer a question an agent asked with ` + "`ralph ask`" + `. ID is the question's id
(q1, q2, …: ` + "`ralph status`" + ` lists the questions that wait). The answer is
written beside the question, sealed so that no agent can write one; a running
loop sees it before it next picks an item and the item's next iteration gets
the question and the answer in its prompt. Without a running loop, the next
` + "`ralph run`" + ` does.`,
		Example: `  ralph status
  ralph answer q3 "Keep the v1 field names; add the v2 ones beside them."`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID, opts.Answer = args[0], strings.Join(args[1:], " ")
			if runF != nil {
				return runF(opts)
			}
			return runAnswer(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.By, "by", "ralph answer", "who answers (`NAME`, kept with the answer)")
	return cmd
}

func runAnswer(cmd *cobra.Command, o *AnswerOptions) error {
	root, _, err := o.IO.Repo(cmd.Context())
	if err != nil {
		return err
	}
	p := engine.PathsFor(root)
	q, err := engine.AnswerQuestion(p, o.ID, o.Answer, o.By, time.Now())
	if err != nil {
		return err
	}
	then := "`ralph run` goes on with it"
	if active, _ := engine.ActiveRun(p); active {
		then = "the running loop gives it to " + q.Item + "'s next iteration"
	}
	fmt.Fprintf(o.IO.IO.ErrOut, "ralph: answered %s (%s asked: %s); %s\n", q.ID, q.Item, engine.OneLine(q.Text, 100), then)
	return nil
}
