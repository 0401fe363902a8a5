package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// importRetries is how many times the prep agent is asked again with the
// problems of its last answer.
const importRetries = 3

// PRDImportOptions are `ralph prd import`'s settings.
type PRDImportOptions struct {
	IO *Factory
	AgentFlags
	Input   string
	Output  string
	DryRun  bool
	Force   bool
	Timeout time.Duration
	flagSet func(string) bool
	// NoSandbox runs the prep agent without the sandbox.
	NoSandbox bool
}

// newCmdPRDImport builds `ralph prd import`.
func newCmdPRDImport(f *Factory, runF func(*PRDImportOptions) error) *cobra.Command {
	opts := &PRDImportOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "import PRD.md [-o prd.json]",
		Short: "Turn a prose PRD into stories with one agent iteration (the prep agent)",
		Long: `Run the prep agent: one agent iteration (any --agent) reads PRD.md and the
repository and answers with a prd.json whose stories are unambiguous,
bite-sized, ordered, testable and safe (a Ralph-ready PRD). ralph checks the answer as
` + "`ralph prd validate`" + ` does (schema, ids, dependencies, cycles) and lints it: a
story with complexity above 2, one without acceptance criteria, or a criterion
with no objective check ("works well", "properly", "fast" with no number) is
flagged. With problems, the agent is asked again with them, at most 3 times.

The file is written (atomically, every story "passes": false) only when it is
valid; lint findings left after the last retry are printed as warnings. The
default output is prd.json beside PRD.md, so in a run folder
(` + "`ralph runs new`" + `) the folder's prd.json is replaced (give --force). The
prompts and transcripts stay in .ralph/import/.`,
		Example: `  ralph prd import docs/auth.md -o prd.json
  ralph runs new auth --prd docs/auth.md && ralph prd import ralph/runs/20261123-auth/PRD.md --force
  ralph prd import spec.md --dry-run --agent codex`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Input = args[0]
			opts.flagSet = cmd.Flags().Changed
			if runF != nil {
				return runF(opts)
			}
			return runPRDImport(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Output, "output", "o", "", "`FILE` to write (default prd.json beside PRD.md)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print the stories, write nothing")
	fl.BoolVar(&opts.Force, "force", false, "overwrite an existing output file")
	fl.BoolVar(&opts.NoSandbox, "no-sandbox", false, "run the prep agent without the sandbox (bubblewrap)")
	fl.DurationVar(&opts.Timeout, "timeout", 20*time.Minute, "time limit (`DURATION`) of each agent iteration")
	registerAgentFlags(fl, &opts.AgentFlags)
	completeAgents(cmd, "agent")
	return cmd
}

func runPRDImport(ctx context.Context, o *PRDImportOptions) error {
	f := o.IO
	spec, err := os.ReadFile(o.Input)
	if err != nil {
		return usage.Errorf("%v", err)
	}
	if strings.TrimSpace(string(spec)) == "" {
		return usage.Errorf("%s is empty: write the requirements first", o.Input)
	}
	if o.Output == "" {
		o.Output = filepath.Join(filepath.Dir(o.Input), "prd.json")
	}
	if _, err := os.Stat(o.Output); err == nil && !o.Force && !o.DryRun {
		return usage.Errorf("%s already exists (use --force to replace it, -o FILE to write elsewhere, or --dry-run)", o.Output)
	}
	// The agent works in the repository (it reads the code to shape the
	// stories); outside one, in the current folder.
	dir, err := f.Getwd()
	if err != nil {
		return err
	}
	scratch := ""
	if root, repo, err := f.Repo(ctx); err == nil {
		dir = root
		if err := repo.EnsureExcluded(ctx, "/.ralph/"); err != nil {
			return err
		}
		scratch = filepath.Join(root, ".ralph", "import")
	} else {
		if scratch, err = os.MkdirTemp("", "ralph-import-"); err != nil {
			return err
		}
		defer os.RemoveAll(scratch)
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	ag, err := oneOffAgent(f, &o.AgentFlags, dir, o.NoSandbox, o.flagSet)
	if err != nil {
		return err
	}

	stamp := time.Now().UTC().Format("20060102-150405")
	var problems, lint []string
	var doc *prd.PRD
	answer := ""
	attempts := 1 + importRetries
	for n := 1; n <= attempts; n++ {
		prompt := importPrompt(o.Input, string(spec), problems, answer, n, attempts)
		base := filepath.Join(scratch, fmt.Sprintf("%s-%d", stamp, n))
		res, err := o.runPrep(ctx, ag, dir, prompt, base, n)
		if err != nil {
			return err
		}
		answer = res.FinalText
		label := fmt.Sprintf("the prep agent's prd.json (attempt %d)", n)
		doc, problems, lint = checkDraft(label, answer)
		if len(problems) == 0 && len(lint) == 0 {
			fmt.Fprintf(f.IO.ErrOut, "ralph: attempt %d/%d: %s, valid\n", n, attempts, engine.Plural(len(doc.Stories), "story"))
			break
		}
		all := append(append([]string{}, problems...), lint...)
		fmt.Fprintf(f.IO.ErrOut, "ralph: attempt %d/%d: %d problem(s) (transcript %s.log):\n  %s\n", n, attempts, len(all), base, strings.Join(all, "\n  "))
		problems = all
	}
	if doc == nil || len(problems) > len(lint) {
		return fmt.Errorf("the prep agent gave no valid prd.json in %s; nothing was written (prompts and transcripts in %s)", engine.Plural(attempts, "attempt"), scratch)
	}
	for _, l := range lint {
		fmt.Fprintf(f.IO.ErrOut, "ralph: warning: %s\n", l)
	}
	for i := range doc.Stories {
		doc.Stories[i].Passes = false
	}
	now := time.Now().UTC().Format(time.RFC3339)
	if doc.CreatedAt == "" {
		doc.CreatedAt = now
	}
	doc.UpdatedAt = now
	doc.Canonical()
	b, err := doc.Marshal()
	if err != nil {
		return err
	}
	if o.DryRun {
		_, err := f.IO.Out.Write(b)
		fmt.Fprintf(f.IO.ErrOut, "ralph: not written (--dry-run)\n")
		return err
	}
	if err := store.WriteFile(o.Output, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "ralph: wrote %s: %s in %s; check them, then `ralph run`\n", o.Output, engine.Plural(len(doc.Stories), "story"), engine.Plural(len(doc.Levels()), "level"))
	return nil
}

// runPrep runs one prep iteration: its prompt and transcript are kept
// beside each other in the scratch folder.
func (o *PRDImportOptions) runPrep(ctx context.Context, ag agent.Agent, dir, prompt, base string, n int) (agent.Result, error) {
	pf := base + ".prompt.md"
	if err := store.WriteFile(pf, []byte(prompt), 0o644); err != nil {
		return agent.Result{}, err
	}
	tr, err := store.OpenOwn(base+".log", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return agent.Result{}, err
	}
	defer tr.Close()
	env := append(append([]string{}, o.Env...), "RALPH_PROMPT_FILE="+pf, "RALPH_ITEM_ID=prd-import",
		fmt.Sprintf("RALPH_ITERATION=%d", n), fmt.Sprintf("RALPH_ATTEMPT=%d", n), "RALPH_ROLE=prep", "RALPH_WORK_DIR="+dir)
	res, err := ag.Run(ctx, agent.Request{Prompt: prompt, PromptFile: pf, Dir: dir, Model: o.Model, Args: o.AgentArgs, Env: env,
		Timeout: o.Timeout, Transcript: tr, ItemID: "prd-import", Iteration: n, Attempt: n, Role: "prep"})
	return res, oneOffFailure("the prep agent", ag, res, err, o.Timeout, base+".log")
}

// checkDraft reads the prd.json out of the agent's answer: problems are
// what makes it unusable (no JSON, a parse error, a broken rule), lint what
// makes its stories not Ralph-ready.
func checkDraft(label, answer string) (*prd.PRD, []string, []string) {
	js := draftJSON(answer)
	if js == "" {
		return nil, []string{"no prd.json in the answer: give the whole file in one ```json block"}, nil
	}
	doc, err := prd.ParseAll(label, []byte(js))
	var typeErrs prd.TypeErrors
	if err != nil && !errors.As(err, &typeErrs) {
		return nil, []string{err.Error()}, nil
	}
	var problems []string
	if err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	if verr := doc.Validate(); verr != nil {
		problems = append(problems, strings.Split(verr.Error(), "\n")...)
	}
	if len(doc.Stories) == 0 {
		problems = append(problems, "no stories")
	}
	if len(problems) > 0 {
		return nil, problems, nil
	}
	return doc, nil, doc.Lint()
}

var fence = regexp.MustCompile("(?s)```(?:json|JSON)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```")

// draftJSON is the last fenced block of the answer that looks like a JSON
// object, else the span from its first '{' to its last '}'.
func draftJSON(answer string) string {
	blocks := fence.FindAllStringSubmatch(answer, -1)
	for i := len(blocks) - 1; i >= 0; i-- {
		if b := strings.TrimSpace(blocks[i][1]); strings.HasPrefix(b, "{") {
			return b
		}
	}
	start, end := strings.Index(answer, "{"), strings.LastIndex(answer, "}")
	if start < 0 || end < start {
		return ""
	}
	return answer[start : end+1]
}

// importPrompt is the prep agent's prompt: the five properties of a
// Ralph-ready story, the file format, the PRD, and on a retry the problems of
// the last answer.
func importPrompt(name, spec string, problems []string, last string, n, attempts int) string {
	var b strings.Builder
	b.WriteString(`# Turn a PRD into Ralph stories

You are ralph's prep agent. Turn the product requirements below into the
stories of a prd.json for a Ralph loop, in which a fresh agent implements
one story per iteration and ralph runs the quality checks after each. Read
the repository to see what already exists. Change no file: your answer is
the file.

Every story must be:
- unambiguous: one reading; name the files, commands, endpoints and fields;
- bite-sized: one iteration's work, "complexity" 1 or 2 (of 5); split
  anything bigger into several stories;
- ordered: "priority" 1, 2, 3 … in the order to build them, and
  "depends_on" the ids of the stories each one needs;
- testable: every acceptance criterion is something a test or a command
  decides, with a number where it speaks of speed or size ("works well",
  "properly", "fast" are not checks; "answers in under 200 ms" is);
- safe: no story deletes data, rewrites git history or touches secrets.

Answer with the whole prd.json in one ` + "```json" + ` block, in this format:

` + "```json" + `
{
  "project": "…",
  "feature": "…",
  "branch_name": "ralph/<feature-in-kebab-case>",
  "user_stories": [
    {
      "id": "US-001",
      "title": "…",
      "description": "As a …, I want … so that …",
      "acceptance_criteria": ["…", "…"],
      "priority": 1,
      "depends_on": [],
      "complexity": 1,
      "passes": false
    }
  ]
}
` + "```" + `

Leave out "quality_checks": a person sets the gates.
`)
	fmt.Fprintf(&b, "\n## The PRD (%s)\n\n%s\n", filepath.ToSlash(name), strings.TrimRight(spec, "\n"))
	if len(problems) > 0 {
		fmt.Fprintf(&b, "\n## Problems with your last answer (this is attempt %d of %d)\n\n- %s\n", n, attempts, strings.Join(problems, "\n- "))
		if js := draftJSON(last); js != "" {
			fmt.Fprintf(&b, "\nYour last prd.json:\n\n```json\n%s\n```\n", js)
		}
		b.WriteString("\nFix every problem and answer with the whole prd.json again.\n")
	}
	return b.String()
}
