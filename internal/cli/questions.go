package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
)

// questionView is one question in `ralph status --json` (and the web
// API): the agent's question, and the person's answer (null while none).
type questionView struct {
	ID         string     `json:"id"`
	Item       string     `json:"item"`
	Text       string     `json:"text"`
	Answer     *string    `json:"answer"`
	Waiting    bool       `json:"waiting"`
	Iteration  int        `json:"iteration"`
	AskedAt    time.Time  `json:"asked_at"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	TimedOut   bool       `json:"timed_out,omitempty"`
	// Forged: the file held an answer ralph did not seal; it still waits.
	Forged bool `json:"forged_answer,omitempty"`
}

// questionViews are the run's questions as status shows them (an answer
// ralph did not seal counts as none).
func questionViews(p engine.Paths, runID string) []questionView {
	qs, _ := engine.CheckedQuestions(p, runID)
	out := []questionView{}
	for _, q := range qs {
		v := questionView{ID: q.ID, Item: q.Item, Text: q.Text, Waiting: q.Waiting(), Iteration: q.Iteration, AskedAt: q.AskedAt,
			AnsweredAt: q.AnsweredAt, AnsweredBy: q.By, TimedOut: q.TimedOut, Forged: q.Forged}
		if q.Answer != "" {
			a := q.Answer
			v.Answer = &a
		}
		out = append(out, v)
	}
	return out
}

// waitingFor maps each item with a question that waits to its question ids.
func waitingFor(qs []questionView) map[string][]string {
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
func questionsMarkdown(qs []questionView) string {
	if len(qs) == 0 {
		return ""
	}
	var b strings.Builder
	var answered []questionView
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
