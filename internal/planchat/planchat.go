// Package planchat is the conversation of `ralph plan`: the planning
// agent's prompts (first its clarifying questions, then the stories),
// its questions read out of its answer, a person's answers read from a
// file, and the proposed stories shown for a person to accept, revise or
// edit. Running the agent and talking to the terminal are the CLI's.
package planchat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/ralph-loop/ralph/internal/prd"
)

// MaxQuestions bounds the clarifying questions.
const MaxQuestions = 8

// QA is one clarifying question and a person's answer ("" for none).
type QA struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// QuestionsPrompt asks the agent what it must know before it can plan.
func QuestionsPrompt(description string) string {
	return `# Plan a feature: your questions first

You are ralph's planning agent. A person wants the work below done by a
Ralph loop, in which a fresh agent implements one small story per
iteration and ralph runs the project's checks after each. Before you
propose the stories, ask the person what you must know to plan it well:
what the request leaves open (scope, behaviour at the edges, names,
constraints, what must not change). Read the repository first: ask only
what the code and its documents do not answer. Change no file.

Ask at most ` + strconv.Itoa(MaxQuestions) + ` short questions, each answerable in a sentence, and none
when the request is clear. Answer with one ` + "```json" + ` block:

` + "```json" + `
{"questions": ["…", "…"]}
` + "```" + `

## The request

` + strings.TrimSpace(description) + "\n"
}

var fence = regexp.MustCompile("(?s)```(?:json|JSON)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```")

// ParseQuestions reads the questions out of the agent's answer: the last
// fenced (or bare) JSON object with a "questions" list. ok is false when
// there is none.
func ParseQuestions(answer string) (qs []string, ok bool) {
	var cands []string
	for _, m := range fence.FindAllStringSubmatch(answer, -1) {
		cands = append(cands, m[1])
	}
	if i, j := strings.Index(answer, "{"), strings.LastIndex(answer, "}"); i >= 0 && j > i {
		cands = append(cands, answer[i:j+1])
	}
	for k := len(cands) - 1; k >= 0; k-- {
		var v struct {
			Questions *[]any `json:"questions"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(cands[k])), &v) != nil || v.Questions == nil {
			continue
		}
		for _, q := range *v.Questions {
			s, _ := q.(string)
			if s = strings.Join(strings.Fields(s), " "); s != "" {
				qs = append(qs, s)
			}
		}
		if len(qs) > MaxQuestions {
			qs = qs[:MaxQuestions]
		}
		return qs, true
	}
	return nil, false
}

// ReadAnswers reads a person's answers to n questions from a file: a
// YAML (or JSON) list in order, a map from the question's number (1, 2,
// … or q1, q2, …) to its answer, or plain lines, one answer per line in
// order ("1: …" or "q1: …" names the question). Every question must have
// an answer; the error names the file and what is missing.
func ReadAnswers(name string, data []byte, n int) ([]string, error) {
	out := make([]string, n)
	set := make([]bool, n)
	put := func(i int, v string) error {
		if i < 0 || i >= n {
			return fmt.Errorf("%s: answer to question %d, but there %s", name, i+1, were(n))
		}
		out[i], set[i] = strings.TrimSpace(v), true
		return nil
	}
	trimmed := bytes.TrimSpace(data)
	var list []any
	var m map[string]any
	switch {
	case len(trimmed) > 0 && yamlInto(trimmed, &list) == nil && list != nil:
		for i, v := range list {
			if err := put(i, fmt.Sprint(v)); err != nil {
				return nil, err
			}
		}
	case len(trimmed) > 0 && yamlInto(trimmed, &m) == nil && m != nil && numberedKeys(m):
		for k, v := range m {
			i, _ := strconv.Atoi(strings.TrimPrefix(strings.ToLower(k), "q"))
			if err := put(i-1, fmt.Sprint(v)); err != nil {
				return nil, err
			}
		}
	default:
		next := 0
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			i := next
			if g := numbered.FindStringSubmatch(line); g != nil {
				k, _ := strconv.Atoi(g[1])
				i, line = k-1, g[2]
			}
			if err := put(i, line); err != nil {
				return nil, err
			}
			next = i + 1
		}
	}
	var missing []string
	for i, ok := range set {
		if !ok {
			missing = append(missing, strconv.Itoa(i+1))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s answers %d of %d questions: none for question %s", name, n-len(missing), n, strings.Join(missing, ", "))
	}
	return out, nil
}

// yamlInto is yaml.Unmarshal, with the decoder's panics on some odd
// input (a bare tag: "!0000 0") as errors: the file is then read as lines.
func yamlInto(b []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return yaml.Unmarshal(b, v)
}

var numbered = regexp.MustCompile(`^[qQ]?(\d+)\s*[:.)]\s*(.*)$`)

func numberedKeys(m map[string]any) bool {
	for k := range m {
		if _, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(k), "q")); err != nil {
			return false
		}
	}
	return len(m) > 0
}

func were(n int) string {
	if n == 1 {
		return "is 1 question"
	}
	return fmt.Sprintf("are %d questions", n)
}

// StoriesPrompt asks for the stories: the request, the person's answers,
// the format, and on a retry or a revision the last proposal with its
// problems or the person's words.
func StoriesPrompt(description string, qas []QA, gates prd.QualityChecks, last, feedback string, problems []string) string {
	var b strings.Builder
	b.WriteString(`# Plan a feature: the stories

You are ralph's planning agent. Turn the request below into the stories of
a prd.json for a Ralph loop, in which a fresh agent implements one story
per iteration and ralph runs the quality checks after each. Read the
repository to see what already exists. Change no file: your answer is the
file.

Every story must be:
- small: one iteration's work, "complexity" 1 or 2 (of 5); split anything
  bigger;
- ordered: "priority" 1, 2, 3 … in the order to build them, "depends_on"
  the ids of the stories each one needs;
- objective: every acceptance criterion is something a test or a command
  decides, with a number where it speaks of speed or size;
- checked: "checks" are shell commands, run in the repository after the
  quality checks, that pass only when the story is done (a test of its
  own, a grep for a symbol, a command's output) — at least one per story.

Answer with the whole prd.json in one ` + "```json" + ` block:

` + "```json" + `
{
  "project": "…",
  "feature": "…",
  "branch_name": "ralph/<feature-in-kebab-case>",
  "user_stories": [
    {"id": "US-001", "title": "…", "description": "As a …, I want … so that …",
     "acceptance_criteria": ["…"], "checks": ["go test ./calc -run TestSub"],
     "priority": 1, "depends_on": [], "complexity": 1, "passes": false}
  ]
}
` + "```" + `

Leave out "quality_checks": ralph sets them.
`)
	if q := gates.Gates(); len(q) > 0 {
		b.WriteString("\nThe project's quality checks, which run after every story:\n")
		for _, g := range q {
			fmt.Fprintf(&b, "- %s: `%s`\n", g.Name, g.Command)
		}
	}
	fmt.Fprintf(&b, "\n## The request\n\n%s\n", strings.TrimSpace(description))
	if len(qas) > 0 {
		b.WriteString("\n## Your questions and the person's answers\n")
		for i, qa := range qas {
			a := qa.Answer
			if a == "" {
				a = "(no answer: decide yourself and say so in the story's description)"
			}
			fmt.Fprintf(&b, "\n%d. %s\n   %s\n", i+1, qa.Question, a)
		}
	}
	if last != "" {
		fmt.Fprintf(&b, "\n## Your last proposal\n\n```json\n%s\n```\n", strings.TrimSpace(last))
	}
	if strings.TrimSpace(feedback) != "" {
		fmt.Fprintf(&b, "\n## The person asks you to revise it\n\n%s\n\nAnswer with the whole revised prd.json.\n", strings.TrimSpace(feedback))
	}
	if len(problems) > 0 {
		fmt.Fprintf(&b, "\n## Problems with your last answer\n\n- %s\n\nFix every problem and answer with the whole prd.json again.\n", strings.Join(problems, "\n- "))
	}
	return b.String()
}

// Show renders the proposed stories for a person to read.
func Show(doc *prd.PRD) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s — %d stories on %s\n", doc.Feature, len(doc.Stories), doc.BranchName)
	for _, s := range doc.Stories {
		fmt.Fprintf(&b, "\n%d. %s  %s", s.Priority, s.ID, s.Title)
		if len(s.DependsOn) > 0 {
			fmt.Fprintf(&b, "  (after %s)", strings.Join(s.DependsOn, ", "))
		}
		b.WriteString("\n")
		if d := strings.TrimSpace(s.Description); d != "" {
			fmt.Fprintf(&b, "   %s\n", strings.Join(strings.Fields(d), " "))
		}
		for _, c := range s.AcceptanceCriteria {
			fmt.Fprintf(&b, "   - %s\n", c)
		}
		for _, c := range s.Checks {
			fmt.Fprintf(&b, "   check: %s\n", c)
		}
	}
	return b.String()
}

// Format is where a plan is written: a PRD, a task tree or a markdown
// plan, by the output file's name.
func Format(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl":
		return "tasks"
	case ".md", ".markdown":
		return "markdown"
	}
	return "prd"
}
