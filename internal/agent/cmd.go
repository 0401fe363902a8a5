package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
)

// cmd runs any program as the agent: prompt on stdin and in
// $RALPH_PROMPT_FILE, the model (when one is set) in $RALPH_MODEL. Its final message is the content of
// $RALPH_OUTPUT_FILE if it wrote one, else the last paragraph of stdout —
// so a prompt the program echoes earlier never counts as its answer.
type cmd struct {
	Argv   []string
	Runner proc.Runner
}

func init() {
	register("cmd", func(o Options) (Agent, error) {
		if len(o.Command) == 0 {
			return nil, errors.New("--agent cmd needs --agent-cmd 'PROGRAM ARGS…'")
		}
		return &cmd{Argv: append(append([]string{}, o.Command...), o.Args...), Runner: proc.Exec{}}, nil
	})
}

func (c *cmd) Name() string { return "cmd" }

// outputFile is where a cmd agent may write its final message: output.md
// beside prompt.md, or <item>.output.md beside a parallel worker's
// <item>.md.
func outputFile(promptFile string) string {
	if filepath.Base(promptFile) == "prompt.md" {
		return filepath.Join(filepath.Dir(promptFile), "output.md")
	}
	return strings.TrimSuffix(promptFile, ".md") + ".output.md"
}

func (c *cmd) Plan(req Request) (Invocation, error) {
	env := []string{}
	if req.PromptFile != "" {
		env = append(env, "RALPH_OUTPUT_FILE="+outputFile(req.PromptFile))
	}
	if req.Model != "" {
		env = append(env, "RALPH_MODEL="+req.Model) // the program picks its model itself
	}
	return Invocation{Argv: c.Argv, Env: env, PromptStdin: true}, nil
}

// maxOutputFile bounds what ralph reads of $RALPH_OUTPUT_FILE.
const maxOutputFile = 1 << 20

func (c *cmd) Run(ctx context.Context, req Request) (Result, error) {
	inv, _ := c.Plan(req)
	out := ""
	if req.PromptFile != "" {
		out = outputFile(req.PromptFile)
		_ = os.Remove(out)
	}
	p := &TextParser{}
	res, err := runCLI(ctx, c.Runner, inv, req, p)
	if err != nil {
		return res, err
	}
	if out != "" {
		// Read bounded: the agent writes it (a sparse file of terabytes
		// costs it nothing).
		b, rerr := store.ReadFileLimit(out, maxOutputFile)
		if rerr == nil || errors.Is(rerr, store.ErrTooLarge) {
			res.FinalText = string(b)
		}
		if errors.Is(rerr, store.ErrTooLarge) && req.Transcript != nil {
			fmt.Fprintf(req.Transcript, "\n[ralph] $RALPH_OUTPUT_FILE is larger than %d bytes: only its start was read\n", maxOutputFile)
		}
	}
	return res, nil
}

// TextParser is the parser for agents that print plain text (cmd, amp).
// It keeps a bounded tail and recognises two control lines:
// `RALPH_RATE_LIMIT: <seconds | RFC3339 time> [message]` and
// `RALPH_USAGE: {"input_tokens": N, "output_tokens": N, "cost_usd": X}`
// (added up when printed more than once: budgets and the dashboard's cost
// work for any program).
type TextParser struct {
	tail      TailBuffer
	rateLimit *RateLimit
	usage     Usage
	// learnings is the last "## Learnings" section of the whole output and
	// every LEARNING: line (bounded): the final paragraph alone would lose
	// a section the program printed before its closing words.
	learnings []string
	learnSize int
	inLearn   bool
}

// maxLearnings bounds what TextParser keeps of the learnings it saw.
const maxLearnings = 8 << 10

// rateLimitMarker starts a plain-text rate-limit line.
const rateLimitMarker = "RALPH_RATE_LIMIT:"

// usageMarker starts a plain-text usage line (Usage as JSON).
const usageMarker = "RALPH_USAGE:"

func (p *TextParser) Line(line []byte) {
	if p.tail.Max == 0 {
		p.tail.Max = 64 << 10
	}
	// Lines are looked at as bytes: an agent may print millions of them,
	// and only the few that matter become strings.
	trimmed := bytes.TrimSpace(line)
	if rest, ok := bytes.CutPrefix(trimmed, []byte(rateLimitMarker)); ok {
		p.rateLimit = parseRateLimitLine(string(bytes.TrimSpace(rest)), time.Now())
	}
	if rest, ok := bytes.CutPrefix(trimmed, []byte(usageMarker)); ok {
		var u Usage
		if json.Unmarshal(bytes.TrimSpace(rest), &u) == nil {
			p.usage.Add(u)
		}
	}
	_, _ = p.tail.Write(line)
	_, _ = p.tail.Write(newline)
	if p.inLearn || bytes.HasPrefix(trimmed, []byte("#")) || (len(trimmed) >= 9 && bytes.EqualFold(trimmed[:9], []byte("LEARNING:"))) {
		p.learn(string(trimmed))
	}
}

var newline = []byte{'\n'}

func (p *TextParser) learn(s string) {
	t := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(t, "#"):
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(t, "#")))
		p.inLearn = strings.HasPrefix(h, "learnings")
		if p.inLearn { // a later section replaces an earlier one
			p.learnings = slices.DeleteFunc(p.learnings, func(l string) bool { return !isLearningLine(l) })
			p.learnSize = 0
			for _, l := range p.learnings {
				p.learnSize += len(l)
			}
		}
	case isLearningLine(t), p.inLearn && t != "":
		if p.learnSize+len(t) <= maxLearnings {
			p.learnings = append(p.learnings, t)
			p.learnSize += len(t)
		}
	}
}

func isLearningLine(t string) bool {
	return len(t) >= 9 && strings.EqualFold(t[:9], "LEARNING:")
}

func (p *TextParser) Finish(res *Result, stderrTail string) {
	res.FinalText = lastParagraph(p.tail.String())
	if len(p.learnings) > 0 {
		res.Learnings = "## Learnings\n" + strings.Join(p.learnings, "\n")
	}
	res.RateLimit = p.rateLimit
	if res.RateLimit == nil && res.ExitCode != 0 && !res.TimedOut {
		// Any program's 429 or "rate limit … try again in 3s" on stderr
		// is a rate limit, as the known CLIs' are: a wait, no attempt.
		res.RateLimit = rateLimitFrom(stderrTail, time.Now(), false)
	}
	res.Usage = p.usage
	if res.ExitCode != 0 && !res.TimedOut {
		res.ErrorText = fmt.Sprintf("exit %d: %s", res.ExitCode, lastLines(stderrTail, 5))
	}
}

// parseRateLimitLine reads "<seconds|RFC3339> [message]".
func parseRateLimitLine(s string, now time.Time) *RateLimit {
	first, msg, _ := strings.Cut(s, " ")
	rl := &RateLimit{Message: strings.TrimSpace(msg)}
	if n, err := strconv.Atoi(first); err == nil {
		rl.ResetAt = now.Add(time.Duration(n) * time.Second)
	} else if t, err := time.Parse(time.RFC3339, first); err == nil {
		rl.ResetAt = t
	} else {
		rl.Message = strings.TrimSpace(s)
	}
	if rl.Message == "" {
		rl.Message = "rate limited"
	}
	return rl
}

// lastParagraph returns the text after the last blank line (trailing blank
// lines ignored).
func lastParagraph(s string) string {
	s = strings.TrimRight(s, "\n\r\t ")
	if i := strings.LastIndex(s, "\n\n"); i >= 0 {
		s = s[i+2:]
	}
	return strings.TrimSpace(s)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
