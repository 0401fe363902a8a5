package dashboard

import (
	"fmt"
	"io"
	"strings"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
)

// FoldAfter is how many lines of a tool's output a rendered transcript
// shows before it folds the rest.
const FoldAfter = 4

// LogRenderer renders a transcript for people, line by line, as `ralph
// log` prints it and the web dashboard's story page shows it: the prompt
// folded, the agent's stream as its tool calls and text, long tool
// output folded, ralph's gate and verdict lines as they are.
type LogRenderer struct {
	w      io.Writer
	raw    bool
	prompt int // prompt lines folded
	reader engine.TranscriptReader
	text   strings.Builder // streamed text not yet printed
	folded int             // output lines folded of the current tool
	shown  int             // output lines shown of the current tool
}

// NewLogRenderer renders to w; raw prints every line as it is.
func NewLogRenderer(w io.Writer, raw bool) *LogRenderer {
	return &LogRenderer{w: w, raw: raw}
}

// Line renders one line of the transcript.
func (r *LogRenderer) Line(l string) {
	if r.raw {
		fmt.Fprintln(r.w, l)
		return
	}
	kind, steps := r.reader.Line(l)
	switch kind {
	case engine.LinePrompt:
		r.prompt++ // the heading too: folded with the prompt
	case engine.LineOutput:
		r.flushPrompt()
		fmt.Fprintln(r.w, "\n## Agent output")
	case engine.LineRalph:
		r.Flush()
		fmt.Fprintln(r.w, l)
	case engine.LineAgent:
		for _, s := range steps {
			r.step(s)
		}
	case engine.LineHidden:
	default:
		fmt.Fprintln(r.w, l)
	}
}

func (r *LogRenderer) flushPrompt() {
	if r.prompt > 0 {
		fmt.Fprintf(r.w, "## Prompt (%d lines folded; --raw shows them)\n", r.prompt-1)
		r.prompt = 0
	}
}

func (r *LogRenderer) step(s agent.Step) {
	if s.Kind == "text" && s.Delta {
		r.text.WriteString(s.Text)
		return
	}
	r.Flush()
	switch s.Kind {
	case "tool":
		fmt.Fprintf(r.w, "→ %s\n", s.Text)
		r.shown, r.folded = 0, 0
	case "output":
		for _, l := range strings.Split(strings.TrimRight(s.Text, "\n"), "\n") {
			if r.shown < FoldAfter {
				fmt.Fprintf(r.w, "    %s\n", l)
				r.shown++
			} else {
				r.folded++
			}
		}
	case "error":
		fmt.Fprintf(r.w, "! %s\n", s.Text)
	default:
		fmt.Fprintln(r.w, s.Text)
	}
}

// Flush prints streamed text and the count of folded output lines: at
// the end of the transcript, or where a follower waits for more.
func (r *LogRenderer) Flush() {
	if r.folded > 0 {
		fmt.Fprintf(r.w, "    … %d more lines\n", r.folded)
		r.folded = 0
	}
	if r.text.Len() > 0 {
		fmt.Fprintln(r.w, strings.TrimSpace(r.text.String()))
		r.text.Reset()
	}
	r.flushPrompt()
}
