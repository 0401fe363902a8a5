package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
)

// questionViews are the run's questions as status shows them (an answer
// ralph did not seal counts as none).
func questionViews(p engine.Paths, runID string) []engine.QuestionView {
	qs, _ := engine.CheckedQuestions(p, runID)
	return engine.QuestionViews(qs)
}

// waitingFor maps each item with a question that waits to its question ids.
func waitingFor(qs []engine.QuestionView) map[string][]string {
	m := map[string][]string{}
	for _, q := range qs {
		if q.Waiting {
			m[q.Item] = append(m[q.Item], q.ID)
		}
	}
	return m
}

// questionsMarkdown lists the run's questions: those that wait first,
// with the command that answers each, then the answered ones.
func questionsMarkdown(qs []engine.QuestionView) string {
	if len(qs) == 0 {
		return ""
	}
	var b strings.Builder
	var answered []engine.QuestionView
	waiting := 0
	for _, q := range qs {
		if !q.Waiting {
			answered = append(answered, q)
			continue
		}
		if waiting == 0 {
			b.WriteString("\n## Questions waiting for an answer\n")
		}
		waiting++
		fmt.Fprintf(&b, "\n- **%s** (%s, asked %s ago): %s\n  `ralph answer %s \"…\"`\n", q.ID, q.Item, time.Since(q.AskedAt).Round(time.Second), oneLineText(q.Text), q.ID)
		if q.Forged {
			b.WriteString("  (an answer in its file was not written by `ralph answer`: it is ignored)\n")
		}
	}
	if len(answered) > 0 {
		b.WriteString("\n## Questions answered\n\n| ID | Story | Question | Answer |\n|---|---|---|---|\n")
		for _, q := range answered {
			a := "(no answer in time: it went on alone)"
			if q.Answer != nil {
				a = *q.Answer
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", q.ID, q.Item, cell(q.Text), cell(a))
		}
	}
	return b.String()
}

func oneLineText(s string) string { return engine.OneLine(s, 300) }

// cell is s in one table cell.
func cell(s string) string { return strings.ReplaceAll(engine.OneLine(s, 160), "|", `\|`) }
