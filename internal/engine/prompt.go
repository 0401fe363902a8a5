package engine

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"text/template"
	"time"
)

// PromptData are the named variables a PROMPT.md template may use.
type PromptData struct {
	Kind          string // story | task | stage
	PRDPath       string
	TasksPath     string
	ProgressPath  string
	Branch        string
	ItemID        string
	Title         string
	Description   string
	Criteria      []string
	Iteration     int // the run's iteration; a stage's own (its attempt) for a stage
	MaxIterations int // the run's limit; the stage's max_iterations for a stage
	RunIteration  int // the run's iteration, whatever the kind
	Attempt       int
	MaxAttempts   int
	Promise       string
	Stage         string
	Role          string
	RetryContext  string
	Progress      string // bounded digest of progress.md
	// RepoProgress is the progress file the agents keep in the repository
	// (`progress: repo`), "" when ralph keeps the memory alone.
	RepoProgress string
	// AgentsFile is the instructions file whose codebase-patterns section
	// the agents keep (`progress: agents-md`), "" otherwise.
	AgentsFile string
	// Guidance is what a person said for this iteration (`ralph guide`),
	// read from the guidance log when the prompt is made.
	Guidance []Guidance
	// Questions are the item's questions to a person (`ralph ask`) that
	// were answered or timed out (after AskTimeout).
	Questions  []Question
	AskTimeout time.Duration
}

// DefaultPrompt is used when the repo has no PROMPT.md. It says what a
// Ralph-ready prompt says — read first, one story, test, leave learnings,
// promise when done — except that the harness, not the agent, commits and
// marks passes.
const DefaultPrompt = `You are one iteration of a Ralph loop: a fresh agent run that gets the same instructions every time. Your memory is the repository, its git history and {{.ProgressPath}}.

1. Read first: the progress notes below and ` + "`git log --oneline -10`" + ` show what earlier iterations did.
2. Work on exactly one {{.Kind}}: {{.ItemID}}, described below. Implement it completely and run the project's checks yourself.
3. {{if eq .Kind "stage"}}Do not edit the stage's exit condition or the quality checks: the harness checks the condition itself and moves to the next stage only when it holds.{{else if .PRDPath}}Do not set "passes" in {{.PRDPath}} and do not edit quality checks: the harness runs the quality gates itself and marks the {{.Kind}} passed only when they pass.{{else}}Do not edit quality checks: the harness runs the quality gates itself and marks the {{.Kind}} done only when they pass.{{end}} It also commits your work.
4. In your final message, list what you learned that the next iteration should know under a "## Learnings" heading.
5. Only when the {{.Kind}} is complete and its checks pass, end your final message with the completion tag for this loop (the word {{.Promise}} inside promise tags).
`

// repoProgressSection asks the agent to keep the repository's progress
// file (`progress: repo`): it travels with the branch.
const repoProgressSection = `
## Memory in the repository

Before you finish, append an entry to %[1]s at the repository root: the item, what you changed, what you learned. Put reusable patterns (how this codebase does things, commands, pitfalls) in the "%[2]s" section at the top of the file; create the file with that section if it is missing. It is committed with your work, so the next iteration, and anyone who clones the branch, reads it.
`

// loadPromptTemplate returns the text of the first existing file, or the
// default.
func loadPromptTemplate(paths ...string) (text, from string, err error) {
	for _, p := range paths {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err == nil {
			return string(b), p, nil
		}
		if !os.IsNotExist(err) {
			return "", "", err
		}
	}
	return DefaultPrompt, "built-in", nil
}

// checkTemplate parses a template so a typo in PROMPT.md fails before the
// loop starts, naming the file.
func checkTemplate(name, text string) error {
	_, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return fmt.Errorf("prompt template %s: %w", name, err)
	}
	return nil
}

// buildPrompt renders base with d, then appends the work item, the retry
// context and the progress digest — sections every prompt needs whatever
// the user's template says.
func buildPrompt(name, base, roleText string, d PromptData) (string, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(base)
	if err != nil {
		return "", fmt.Errorf("prompt template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("prompt template %s: %w", name, err)
	}
	out := strings.TrimRight(b.String(), "\n")
	if roleText != "" {
		out += "\n\n---\n\n" + strings.TrimSpace(roleText)
	}
	if d.Kind == "loop" {
		// A plain loop repeats the user's prompt as is; only a failed check
		// adds to it.
		if d.RetryContext != "" {
			out += "\n\n## Previous attempt failed\n\n" + d.RetryContext + "\n"
		}
		if g := guidanceSection(d.Guidance); g != "" {
			out = strings.TrimRight(out, "\n") + "\n" + g
		}
		if q := questionsSection(d.Questions, d.AskTimeout); q != "" {
			out = strings.TrimRight(out, "\n") + "\n" + q
		}
		return out, nil
	}
	out += fmt.Sprintf("\n\n## Your %s: %s — %s\n", d.Kind, d.ItemID, d.Title)
	if d.Description != "" {
		out += "\n" + strings.TrimSpace(d.Description) + "\n"
	}
	if len(d.Criteria) > 0 {
		out += "\nAcceptance criteria:\n"
		for _, c := range d.Criteria {
			out += "- " + c + "\n"
		}
	}
	if d.Kind == "stage" {
		out += fmt.Sprintf("\nStage iteration %d of at most %d (iteration %d of the run).\n", d.Iteration, d.MaxIterations, d.RunIteration)
	} else {
		out += fmt.Sprintf("\nIteration %d of at most %d; attempt %d of %d on this %s.\n", d.Iteration, d.MaxIterations, d.Attempt, d.MaxAttempts, d.Kind)
	}
	if d.RetryContext != "" {
		out += "\n## Previous attempt failed\n\nThe harness's check of your previous attempt failed. Fix this first:\n\n" + d.RetryContext + "\n"
	}
	out += guidanceSection(d.Guidance)
	out += questionsSection(d.Questions, d.AskTimeout)
	out += fmt.Sprintf(askSection, d.Kind, d.Kind)
	if f := d.RepoProgress; f != "" {
		out += fmt.Sprintf(repoProgressSection, f, repoPatternsHeading)
	}
	if f := d.AgentsFile; f != "" {
		out += fmt.Sprintf(agentsSection, f, AgentsPatternsBegin, AgentsPatternsEnd, agentsPatternsHeading)
	}
	if d.Progress != "" {
		out += "\n## Progress so far (latest entries of " + d.ProgressPath + ")\n\n" + d.Progress + "\n"
	}
	return out, nil
}
