package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/secret"
	"github.com/ralph-loop/ralph/internal/store"
)

// Transcript is one iteration's log file, streamed to disk with secrets
// masked (owner-only: it holds everything the agent printed).
type Transcript struct {
	Path string
	f    io.WriteCloser
	w    io.WriteCloser
	mask *secret.Masker
}

// Mask masks s as the transcript is masked: for what a source writes down
// from the attempt itself (the subjects of the agent's commits in a squash
// commit's message).
func (a *Attempt) Mask(s string) string {
	if a == nil || a.Log == nil {
		return s
	}
	return a.Log.mask.String(s)
}

// defaultTranscriptMax caps a transcript unless the run says otherwise:
// beyond it the middle of the output is dropped (store.CappedFile).
const defaultTranscriptMax = 50 << 20

// openTranscript opens an iteration's transcript: NNNN-<item>.log, or
// NNNN-<item>.<role>.log for an iteration with a role.
func (e *Engine) openTranscript(iteration int, item, role string) (*Transcript, error) {
	dir := e.cfg.Paths.Transcripts
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%04d-%s", iteration, safeFileName(item))
	if role != "" {
		name += "." + safeFileName(role)
	}
	p := filepath.Join(dir, name+".log")
	f, err := store.OpenCapped(p, e.cfg.Limits.TranscriptMax)
	if err != nil {
		return nil, err
	}
	return &Transcript{Path: p, f: f, w: e.mask.Writer(f), mask: e.mask}, nil
}

func (t *Transcript) Write(b []byte) (int, error) { return t.w.Write(b) }

// Close writes what the masking writer holds back, then closes the file.
func (t *Transcript) Close() error {
	err := t.w.Close()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// safeFileName makes an item id a file name. Ids that needed changing get
// a short hash of the id, so two ids (A/1 and A_1) never share a file.
func safeFileName(s string) string {
	var b strings.Builder
	changed := false
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
			changed = true
		}
	}
	if changed || s == "" || s == "." || s == ".." {
		sum := sha256.Sum256([]byte(s))
		b.WriteString("-" + hex.EncodeToString(sum[:3]))
	}
	return b.String()
}

// TranscriptReader reads a transcript as ralph writes it (openTranscript,
// the prompt step): a header naming the agent and the work folder, the
// prompt, the agent's output, then ralph's gate and verdict lines. `ralph
// log` and the dashboard show it through this one reader.
type TranscriptReader struct {
	section  string // "" (the header), prompt, output
	activity agent.ActivityReader
}

// Kinds of transcript line.
const (
	lineHeader = "header" // "# ralph iteration …": shown as is
	LinePrompt = "prompt" // a line of the prompt (or its heading)
	LineOutput = "output" // heading of the agent's output
	LineRalph  = "ralph"  // "=== gate …", "[ralph] …": shown as is
	LineAgent  = "agent"  // the agent's output, read as Steps
	lineOther  = "other"  // anything else in the header
	LineHidden = "hidden" // "# dir": for the reader, not for people
)

// Line classifies one line; an agent's line comes with its steps.
func (r *TranscriptReader) Line(l string) (kind string, steps []agent.Step) {
	switch {
	case strings.HasPrefix(l, "# ralph iteration "):
		if i := strings.LastIndex(l, " · agent "); i >= 0 {
			r.activity.Agent = strings.TrimSpace(l[i+len(" · agent "):])
		}
		return lineHeader, nil
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
	return lineOther, nil
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
