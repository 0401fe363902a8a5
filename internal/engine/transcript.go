package engine

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/store"
)

// TranscriptReader reads a transcript as ralph writes it (openTranscript,
// begin): a header naming the agent and the work folder, the prompt, the
// agent's output, then ralph's gate and verdict lines. `ralph log` and the
// dashboard show it through this one reader.
type TranscriptReader struct {
	section  string // "" (the header), prompt, output
	activity agent.ActivityReader
}

// Kinds of transcript line.
const (
	LineHeader = "header" // "# ralph iteration …": shown as is
	LinePrompt = "prompt" // a line of the prompt (or its heading)
	LineOutput = "output" // heading of the agent's output
	LineRalph  = "ralph"  // "=== gate …", "[ralph] …": shown as is
	LineAgent  = "agent"  // the agent's output, read as Steps
	LineOther  = "other"  // anything else in the header
	LineHidden = "hidden" // "# dir": for the reader, not for people
)

// Line classifies one line; an agent's line comes with its steps.
func (r *TranscriptReader) Line(l string) (kind string, steps []agent.Step) {
	switch {
	case strings.HasPrefix(l, "# ralph iteration "):
		if i := strings.LastIndex(l, " · agent "); i >= 0 {
			r.activity.Agent = strings.TrimSpace(l[i+len(" · agent "):])
		}
		return LineHeader, nil
	case strings.HasPrefix(l, "# dir ") && r.section == "":
		r.activity.Dir = strings.TrimPrefix(l, "# dir ")
		return LineHidden, nil
	case l == "## Prompt":
		r.section = "prompt"
		return LinePrompt, nil
	case l == "## Agent output":
		r.section = "output"
		return LineOutput, nil
	case strings.HasPrefix(l, "=== gate ") || strings.HasPrefix(l, "[ralph] "):
		return LineRalph, nil
	}
	switch r.section {
	case "prompt":
		return LinePrompt, nil
	case "output":
		return LineAgent, r.activity.Line([]byte(l))
	}
	return LineOther, nil
}

// TranscriptFiles are the run's transcripts by iteration, read from its
// events, and the newest iteration: a run folder's transcripts live in
// the folder, not in .ralph, and the events name them wherever they are.
func TranscriptFiles(p Paths) (map[int]string, int, error) {
	byIter := map[int]string{}
	newest := 0
	err := store.ReadJSONL(p.Events, func(_ int, b []byte) error {
		var ev Event
		if json.Unmarshal(b, &ev) != nil || ev.Type != "iteration_started" {
			return nil
		}
		if tr, ok := ev.Data["transcript"].(string); ok {
			byIter[ev.Iteration] = tr
			newest = max(newest, ev.Iteration)
		}
		return nil
	})
	if os.IsNotExist(err) {
		err = nil
	}
	return byIter, newest, err
}
