package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/plan"
	"github.com/ralph-loop/ralph/internal/planchat"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/tasks"
	"github.com/ralph-loop/ralph/internal/usage"
)

// PlanOptions are `ralph plan`'s settings.
type PlanOptions struct {
	IO *Factory
	AgentFlags
	Description string
	Output      string
	Answers     string
	Force       bool
	Timeout     time.Duration
	NoSandbox   bool
	flagSet     func(string) bool
}

// planRetries is how often the planning agent is asked again with the
// problems of its last stories.
const planRetries = 3

// newCmdPlan builds `ralph plan "DESCRIPTION"`.
func newCmdPlan(f *Factory, runF func(*PlanOptions) error) *cobra.Command {
	opts := &PlanOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "plan DESCRIPTION [-o prd.json|tasks.jsonl|PLAN.md]",
		Short: "Make a plan in a conversation: the agent's questions, then stories you accept, revise or edit",
		Long: `Plan a feature with the agent before the loop runs it. The agent reads the
repository and asks what the request leaves open; you answer each question on
the terminal (or all of them with --answers FILE). It then proposes the
stories — small, ordered, each with objective acceptance criteria and checks —
and you accept them, ask for a revision in your words, or edit them in
$EDITOR. What you accept is written, checked as ` + "`ralph prd validate`" + ` checks,
with the quality gates ` + "`ralph init`" + ` finds:

  -o prd.json      a PRD (the default: prd.json at the repository root)
  -o tasks.jsonl   a task tree (a task per story; the gates go to
                   .ralph/config.yaml when it has none)
  -o PLAN.md       a markdown plan (ralphex's form, for ralph run --plan)

The agent works in a scratch copy of HEAD in the sandbox: it changes
nothing. Without a terminal the proposal is accepted as it comes (give
--answers when the agent asks). The conversation is kept in
.ralph/plan-chat/<id>/.`,
		Example: `  ralph plan "a subtract command for the calculator CLI"
  ralph plan "rate-limit the public API" --answers answers.yaml -o prd.json --force
  ralph plan "migrate the settings page to the new form library" -o docs/plans/settings.md`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Description = strings.Join(args, " ")
			opts.flagSet = cmd.Flags().Changed
			if runF != nil {
				return runF(opts)
			}
			return runPlan(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Output, "output", "o", "", "`FILE` to write: .json a PRD, .jsonl a task tree, .md a markdown plan (default prd.json at the repository root)")
	fl.StringVar(&opts.Answers, "answers", "", "answer the agent's questions from `FILE` (a YAML list in order, a map 1: …, or one answer per line) instead of the terminal")
	fl.BoolVar(&opts.Force, "force", false, "overwrite an existing output file")
	fl.BoolVar(&opts.NoSandbox, "no-sandbox", false, "run the planning agent without the sandbox (bubblewrap)")
	fl.DurationVar(&opts.Timeout, "timeout", 20*time.Minute, "time limit (`DURATION`) of each agent turn")
	registerAgentFlags(fl, &opts.AgentFlags)
	completeAgents(cmd, "agent")
	return cmd
}

// planChat is one planning conversation: its agent, its scratch tree and
// its records.
type planChat struct {
	o     *PlanOptions
	ag    agent.Agent
	tree  string
	dir   string // .ralph/plan-chat/<id>
	turns int
	in    *bufio.Reader
}

func runPlan(ctx context.Context, o *PlanOptions) error {
	f := o.IO
	if strings.TrimSpace(o.Description) == "" {
		return usage.Errorf("say what to plan: ralph plan \"DESCRIPTION\"")
	}
	root, repo, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	if o.Output == "" {
		o.Output = filepath.Join(root, "prd.json")
	}
	if _, err := os.Stat(o.Output); err == nil && !o.Force {
		return usage.Errorf("%s already exists (use --force to replace it, or -o FILE)", o.Output)
	}
	interactive := f.IO.IsInteractive()
	if !repo.HasCommits(ctx) {
		return usage.Errorf("the repository has no commits yet: make a first commit, so the planning agent has a copy of it to read")
	}
	ag, err := oneOffAgent(f, &o.AgentFlags, root, o.NoSandbox, o.flagSet)
	if err != nil {
		return err
	}
	paths := engine.PathsFor(root)
	if err := repo.EnsureExcluded(ctx, "/.ralph/"); err != nil {
		return err
	}
	id := time.Now().UTC().Format("20060102-150405")
	dir := filepath.Join(paths.Dir, "plan-chat", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	head, err := repo.Head(ctx)
	if err != nil {
		return err
	}
	tree, done, err := scratchTree(ctx, repo, dir, "tree", head)
	if err != nil {
		return err
	}
	defer done()
	ch := &planChat{o: o, ag: ag, tree: tree, dir: dir, in: bufio.NewReader(f.IO.In)}

	// The questions, and the person's answers.
	qs, err := ch.questions(ctx)
	if err != nil {
		return err
	}
	answers, err := ch.answers(qs, interactive)
	if err != nil {
		return err
	}
	qas := make([]planchat.QA, len(qs))
	for i := range qs {
		qas[i] = planchat.QA{Question: qs[i], Answer: answers[i]}
	}
	if b, err := json.MarshalIndent(qas, "", "  "); err == nil {
		_ = store.WriteFile(filepath.Join(dir, "answers.json"), append(b, '\n'), 0o644)
	}

	// The stories, until the person accepts them.
	gates := gate.Detect(root).QualityChecks()
	doc, err := ch.stories(ctx, qas, gates, nil, "")
	if err != nil {
		return err
	}
	for interactive {
		fmt.Fprintf(f.IO.ErrOut, "\n%s\n", planchat.Show(doc))
		choice, err := ch.ask("[a]ccept · [r]evise (say what to change) · [e]dit in $EDITOR · [q]uit without writing: ")
		if err != nil {
			return err
		}
		switch strings.ToLower(strings.TrimSpace(choice)) {
		case "a", "accept", "y", "yes":
			interactive = false
			continue
		case "r", "revise":
			fb, err := ch.ask("What should change? ")
			if err != nil {
				return err
			}
			if doc, err = ch.stories(ctx, qas, gates, doc, fb); err != nil {
				return err
			}
		case "e", "edit":
			if edited, err := ch.edit(ctx, doc); err != nil {
				fmt.Fprintf(f.IO.ErrOut, "ralph: %v\n", err)
			} else {
				doc = edited
			}
		case "q", "quit":
			return usage.Errorf("nothing written (the conversation is in %s)", relOr(root, dir))
		default:
			fmt.Fprintf(f.IO.ErrOut, "ralph: a, r, e or q\n")
		}
	}
	if !f.IO.IsInteractive() {
		fmt.Fprintf(f.IO.ErrOut, "%s\nralph: no terminal: the proposal is accepted as it came\n", planchat.Show(doc))
	}
	return writePlan(ctx, o, root, repo, doc, gates)
}

// turn runs the agent once with prompt; its prompt and transcript are kept
// in the conversation's folder.
func (ch *planChat) turn(ctx context.Context, label, prompt string) (string, error) {
	ch.turns++
	base := filepath.Join(ch.dir, fmt.Sprintf("%d-%s", ch.turns, label))
	pf := base + ".prompt.md"
	if err := store.WriteFile(pf, []byte(prompt), 0o644); err != nil {
		return "", err
	}
	tr, err := store.OpenOwn(base+".log", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	defer tr.Close()
	o := ch.o
	env := append(append([]string{}, o.Env...), "RALPH_PROMPT_FILE="+pf, "RALPH_ITEM_ID=plan", "RALPH_ROLE=planner", "RALPH_WORK_DIR="+ch.tree,
		fmt.Sprintf("RALPH_ITERATION=%d", ch.turns), "RALPH_PLAN_TURN="+label)
	doing := "writing the stories"
	if label == "questions" {
		doing = "reading the repository and the request"
	}
	fmt.Fprintf(o.IO.IO.ErrOut, "ralph: the planning agent (%s) is %s…\n", ch.ag.Name(), doing)
	res, err := ch.ag.Run(ctx, agent.Request{Prompt: prompt, PromptFile: pf, Dir: ch.tree, Model: o.Model, Args: o.AgentArgs, Env: env,
		Timeout: o.Timeout, Transcript: tr, ItemID: "plan", Iteration: ch.turns, Attempt: ch.turns, Role: "planner"})
	return res.FinalText, oneOffFailure("the planning agent", ch.ag, res, err, o.Timeout, base+".log")
}

// questions are the agent's clarifying questions (asked again once when
// its answer has none in the form asked for).
func (ch *planChat) questions(ctx context.Context) ([]string, error) {
	prompt := planchat.QuestionsPrompt(ch.o.Description)
	for try := 1; try <= 2; try++ {
		answer, err := ch.turn(ctx, "questions", prompt)
		if err != nil {
			return nil, err
		}
		if qs, ok := planchat.ParseQuestions(answer); ok {
			return qs, nil
		}
		prompt += "\n## Your last answer had no questions block\n\nAnswer with exactly one ```json block {\"questions\": [...]} (an empty list when you have none).\n"
	}
	return nil, fmt.Errorf("the planning agent gave no questions block twice (its answers are in %s)", ch.dir)
}

// answers are the person's answers to qs: from --answers, else typed on
// the terminal; without either, questions cannot be answered.
func (ch *planChat) answers(qs []string, interactive bool) ([]string, error) {
	o, errOut := ch.o, ch.o.IO.IO.ErrOut
	if o.Answers != "" {
		b, err := os.ReadFile(o.Answers)
		if err != nil {
			return nil, usage.Errorf("--answers: %v", err)
		}
		as, err := planchat.ReadAnswers(o.Answers, b, len(qs))
		if err != nil {
			return nil, usage.Errorf("%v (the questions are in %s)", err, ch.dir)
		}
		for i, q := range qs {
			fmt.Fprintf(errOut, "ralph: Q%d. %s\n       %s\n", i+1, q, as[i])
		}
		return as, nil
	}
	if len(qs) == 0 {
		fmt.Fprintf(errOut, "ralph: the planning agent has no questions\n")
		return nil, nil
	}
	if !interactive {
		var lines []string
		for i, q := range qs {
			lines = append(lines, fmt.Sprintf("  %d. %s", i+1, q))
		}
		return nil, usage.Errorf("the planning agent asks %d question(s), and there is no terminal to answer them on; answer them with --answers FILE:\n%s", len(qs), strings.Join(lines, "\n"))
	}
	fmt.Fprintf(errOut, "\nThe planning agent asks %d question(s); answer each (an empty answer lets it decide):\n", len(qs))
	as := make([]string, len(qs))
	for i, q := range qs {
		a, err := ch.ask(fmt.Sprintf("\n%d. %s\n> ", i+1, q))
		if err != nil {
			return nil, err
		}
		as[i] = strings.TrimSpace(a)
	}
	return as, nil
}

// ask prints prompt and reads a line from the terminal.
func (ch *planChat) ask(prompt string) (string, error) {
	fmt.Fprint(ch.o.IO.IO.ErrOut, prompt)
	line, err := ch.in.ReadString('\n')
	if err != nil && (err != io.EOF || line == "") {
		return "", usage.Errorf("no answer on the terminal (%v): nothing written", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// stories asks for the stories (or their revision with the person's
// feedback), checking each answer as `ralph prd validate` and the lint
// do, and asking again with the problems.
func (ch *planChat) stories(ctx context.Context, qas []planchat.QA, gates prd.QualityChecks, last *prd.PRD, feedback string) (*prd.PRD, error) {
	lastJSON := ""
	if last != nil {
		if b, err := last.Marshal(); err == nil {
			lastJSON = string(b)
		}
	}
	var problems []string
	for n := 1; n <= 1+planRetries; n++ {
		answer, err := ch.turn(ctx, "stories", planchat.StoriesPrompt(ch.o.Description, qas, gates, lastJSON, feedback, problems))
		if err != nil {
			return nil, err
		}
		doc, bad, lint := checkDraft(fmt.Sprintf("the planning agent's stories (turn %d)", ch.turns), answer)
		for _, s := range docStories(doc) {
			if len(s.Checks) == 0 {
				lint = append(lint, fmt.Sprintf("story %s has no checks: give at least one command that passes only when it is done", s.ID))
			}
		}
		if len(bad) == 0 && len(lint) == 0 {
			return doc, nil
		}
		problems = append(bad, lint...)
		if js := draftJSON(answer); js != "" {
			lastJSON = js
		}
		feedback = ""
		fmt.Fprintf(ch.o.IO.IO.ErrOut, "ralph: %d problem(s) with the stories; asking again:\n  %s\n", len(problems), strings.Join(problems, "\n  "))
	}
	return nil, fmt.Errorf("the planning agent gave no valid stories in %d turns; nothing was written (its answers are in %s)", 1+planRetries, ch.dir)
}

func docStories(doc *prd.PRD) []prd.Story {
	if doc == nil {
		return nil
	}
	return doc.Stories
}

// edit opens the proposal in $VISUAL or $EDITOR (vi without one) and reads
// it back, checked like the agent's.
func (ch *planChat) edit(ctx context.Context, doc *prd.PRD) (*prd.PRD, error) {
	file := filepath.Join(ch.dir, fmt.Sprintf("edit-%d.json", ch.turns))
	b, err := doc.Marshal()
	if err != nil {
		return nil, err
	}
	if err := store.WriteFile(file, b, 0o644); err != nil {
		return nil, err
	}
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	// $EDITOR may carry arguments ("code --wait").
	argv, err := proc.SplitArgs(editor)
	if err != nil || len(argv) == 0 {
		return nil, fmt.Errorf("$EDITOR %q: %v", editor, err)
	}
	streams := ch.o.IO.IO
	res, err := proc.Interactive(ctx, proc.Cmd{Argv: append(argv, file), Stdin: streams.In, Stdout: streams.Out, Stderr: streams.ErrOut})
	if err != nil {
		return nil, fmt.Errorf("the editor %s: %v", editor, err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("the editor %s exited %d: the proposal is as it was", editor, res.ExitCode)
	}
	edited, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	d, bad, lint := checkDraft(file, string(edited))
	if len(bad) > 0 {
		return nil, fmt.Errorf("the edited stories are not valid, so the proposal is as it was:\n  %s", strings.Join(bad, "\n  "))
	}
	for _, l := range lint {
		fmt.Fprintf(streams.ErrOut, "ralph: warning: %s\n", l)
	}
	return d, nil
}

// writePlan writes what was accepted, in the output's format, with the
// gates ralph init finds.
func writePlan(ctx context.Context, o *PlanOptions, root string, repo *git.Repo, doc *prd.PRD, gates prd.QualityChecks) error {
	errOut := o.IO.IO.ErrOut
	for i := range doc.Stories {
		doc.Stories[i].Passes = false
	}
	doc.QualityChecks = gates
	now := time.Now().UTC().Format(time.RFC3339)
	doc.CreatedAt, doc.UpdatedAt = now, now
	if doc.BranchName == "" || repo.CheckRefName(ctx, doc.BranchName) != nil {
		doc.BranchName = "ralph/plan-" + time.Now().UTC().Format("20060102-150405")
	}
	if err := doc.Validate(); err != nil {
		return fmt.Errorf("the accepted stories are not valid (nothing written): %w", err)
	}
	noGates := gates == (prd.QualityChecks{})
	switch planchat.Format(o.Output) {
	case "tasks":
		n := 0
		err := tasks.Open(o.Output).Update(func(set *tasks.Set) error {
			for _, s := range doc.Stories {
				title := s.Title
				if len(s.Checks) > 0 {
					title += " (check: " + strings.Join(s.Checks, "; ") + ")"
				}
				if _, err := set.Add("", title, ""); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return usage.Errorf("%s: %v (nothing written)", o.Output, err)
		}
		cfg := filepath.Join(root, ".ralph", "config.yaml")
		if _, err := os.Stat(cfg); err != nil && !noGates {
			if err := store.WriteFile(cfg, []byte(config.Template+gatesYAML(gate.Detect(root))), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(errOut, "ralph: wrote .ralph/config.yaml with the gates ralph init finds (the task loop's)\n")
		}
		fmt.Fprintf(errOut, "ralph: wrote %s: %s; `ralph run --tasks %s` runs them\n", o.Output, engine.Plural(n, "task"), o.Output)
	case "markdown":
		b := plan.Markdown(doc)
		if _, err := plan.Parse(o.Output, b); err != nil {
			return fmt.Errorf("the markdown plan would not read back (nothing written): %w", err)
		}
		if err := store.WriteFile(o.Output, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "ralph: wrote %s: %s; `ralph run --plan %s` runs it\n", o.Output, engine.Plural(len(doc.Stories), "task"), o.Output)
	default:
		b, err := doc.Marshal()
		if err != nil {
			return err
		}
		if err := store.WriteFile(o.Output, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "ralph: wrote %s: %s in %s; `ralph prd validate`, then `ralph run`\n", o.Output, engine.Plural(len(doc.Stories), "story"), engine.Plural(len(doc.Levels()), "level"))
	}
	if noGates {
		fmt.Fprintf(errOut, "ralph: warning: ralph init finds no quality gate in this repository: add the commands that test it (quality_checks, or gates: in .ralph/config.yaml) before `ralph run`\n")
	}
	return nil
}
