package engine

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/secret"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Guidance from a person reaches the next iterations' prompts (`ralph
// guide`, the dashboard's g, the MCP guide tool, the web page's form).
// It is a log of sealed lines:
//
//   - given: the text, the item it is aimed at ("" for every item) and how
//     many iterations may be shown it before it lapses;
//   - shown: an iteration's prompt carried it (written by the run when the
//     prompt is written);
//   - acknowledged: that iteration's final message named it.
//
// What is pending is read from the log whenever a prompt is made: no state
// of its own in the engine. An agent must neither forge guidance nor
// erase it nor acknowledge it by writing a file, so the log is kept the
// way the run's policy is: every line sealed with a key kept outside the
// repository (decision.go), and the log itself kept beside the key
// (KeptOutside) — .ralph/guidance.jsonl is a copy for people and tools to
// read. A line without its seal is never believed, and the copy in .ralph
// is never read back while the kept one exists.

// DefaultGuidanceIterations is how many iterations are shown a piece of
// guidance that none acknowledges.
const DefaultGuidanceIterations = 3

// GuidanceAckPrefix starts the line of a final message that acknowledges
// guidance: "GUIDANCE-ACK: g2".
const GuidanceAckPrefix = "GUIDANCE-ACK:"

// Guidance is one piece of guidance and what became of it.
type Guidance struct {
	ID   string    `json:"id"`
	Item string    `json:"item,omitempty"` // "" for every item
	Text string    `json:"text"`
	By   string    `json:"by,omitempty"`
	At   time.Time `json:"at"`
	For  int       `json:"for"` // iterations it is shown at most
	// Shown are the iterations whose prompts carried it.
	Shown []int `json:"shown,omitempty"`
	// Acknowledged is the iteration that acknowledged it (0: none).
	Acknowledged int `json:"acknowledged,omitempty"`

	shownIn []string // run/iteration: iteration numbers start again with a new run
}

// Pending reports whether the next iteration it is aimed at is shown g.
func (g Guidance) Pending() bool {
	return g.Acknowledged == 0 && len(g.Shown) < g.For
}

// guidanceLine is one line of the log.
type guidanceLine struct {
	Kind      string    `json:"kind"` // given | shown | acknowledged
	ID        string    `json:"id"`
	Item      string    `json:"item,omitempty"`
	Text      string    `json:"text,omitempty"`
	By        string    `json:"by,omitempty"`
	At        time.Time `json:"at"`
	For       int       `json:"for,omitempty"`
	Iteration int       `json:"iteration,omitempty"`
	Run       string    `json:"run,omitempty"`
	Seal      string    `json:"seal"`
}

func (l guidanceLine) fields() []string {
	return []string{l.Kind, l.ID, l.Item, l.Text, l.By, l.At.UTC().Format(time.RFC3339Nano), strconv.Itoa(l.For), strconv.Itoa(l.Iteration), l.Run}
}

// GuidanceFile is the copy of the guidance log people and tools read.
func GuidanceFile(p Paths) string { return filepath.Join(p.Dir, "guidance.jsonl") }

// guidanceKept is the log ralph believes, outside the repository.
func guidanceKept(p Paths) (string, error) { return KeptOutside(p, "guidance.jsonl") }

// guidanceKey is the repository's guidance key: guidance outlives a run
// (given before `ralph run`, or pending when a run ends and the next
// begins), so it is not sealed with a run's own key.
func guidanceKey(p Paths) ([]byte, error) { return decisionKey(p, "\x00guidance") }

// ReadGuidance is every piece of guidance given in the repository at p,
// oldest first, with what became of it. Lines without a valid seal are
// left out.
func ReadGuidance(p Paths) ([]Guidance, error) {
	kept, err := guidanceKept(p)
	if err != nil {
		return nil, err
	}
	path := kept
	if _, err := os.Stat(kept); errors.Is(err, os.ErrNotExist) {
		path = GuidanceFile(p) // the state folder was wiped: the copy, seals checked all the same
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	key, err := guidanceKey(p)
	if err != nil {
		return nil, err
	}
	return foldGuidance(path, key)
}

func foldGuidance(path string, key []byte) ([]Guidance, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Guidance
	at := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var l guidanceLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || !sealMatches(key, l.Seal, l.fields()...) {
			continue
		}
		i, known := at[l.ID]
		switch {
		case l.Kind == "given" && !known:
			at[l.ID] = len(out)
			out = append(out, Guidance{ID: l.ID, Item: l.Item, Text: l.Text, By: l.By, At: l.At, For: l.For})
		case l.Kind == "shown" && known && !slices.Contains(out[i].shownIn, l.Run+"/"+strconv.Itoa(l.Iteration)):
			out[i].Shown = append(out[i].Shown, l.Iteration)
			out[i].shownIn = append(out[i].shownIn, l.Run+"/"+strconv.Itoa(l.Iteration))
		case l.Kind == "acknowledged" && known && out[i].Acknowledged == 0:
			out[i].Acknowledged = l.Iteration
		}
	}
	return out, sc.Err()
}

// appendGuidance seals lines and appends them to the kept log and its
// copy, under the log's lock; build makes them from the log as it is
// (nil: nothing to write).
func appendGuidance(p Paths, build func(have []Guidance) ([]guidanceLine, error)) ([]guidanceLine, error) {
	kept, err := guidanceKept(p)
	if err != nil {
		return nil, err
	}
	key, err := guidanceKey(p)
	if err != nil {
		return nil, err
	}
	var lines []guidanceLine
	err = store.WithLock(kept+".lock", func() error {
		have, err := foldGuidance(kept, key)
		if err != nil {
			return err
		}
		if lines, err = build(have); err != nil || len(lines) == 0 {
			return err
		}
		for i := range lines {
			lines[i].Seal = sealOf(key, lines[i].fields()...)
			b, err := json.Marshal(lines[i])
			if err != nil {
				return err
			}
			if err := store.AppendLine(kept, b); err != nil {
				return err
			}
			// The copy is for reading; a copy that cannot be written
			// (a read-only .ralph) does not lose the guidance.
			_ = store.AppendLine(GuidanceFile(p), b)
		}
		return nil
	})
	return lines, err
}

// GiveGuidance records guidance from a person for the next iterations
// (every item's, or item's only) and notes it in the progress log and
// the events. Asked from inside an iteration's process tree it refuses:
// guidance is a person's word, not an agent's.
func GiveGuidance(p Paths, text, item, by string, iterations int, now time.Time) (Guidance, error) {
	// Masked before it is kept: it is shown in prompts, transcripts,
	// progress, events and every dashboard.
	text = strings.TrimSpace(secret.FromEnv().String(text))
	if text == "" {
		return Guidance{}, usage.Errorf("the guidance is empty")
	}
	if iterations <= 0 {
		iterations = DefaultGuidanceIterations
	}
	st, _, err := LoadOrRebuildState(p)
	if err != nil {
		return Guidance{}, err
	}
	if st == nil {
		st = &State{}
	}
	if item != "" && st.Items != nil && st.Items[item] == nil {
		return Guidance{}, usage.Errorf("%s is not an item of run %s", item, st.RunID)
	}
	if why := fromIteration(p, st); why != "" {
		msg := fmt.Sprintf("ralph guide was called from inside an iteration (%s); refused: guidance comes from a person", why)
		_ = store.AppendJSONL(p.Events, Event{Time: now.UTC(), RunID: st.RunID, Type: "tamper_detected", Item: item, Message: msg})
		return Guidance{}, usage.Errorf("%s", msg)
	}
	lines, err := appendGuidance(p, func(have []Guidance) ([]guidanceLine, error) {
		id := "g" + strconv.Itoa(len(have)+1)
		return []guidanceLine{{Kind: "given", ID: id, Item: item, Text: text, By: by, At: now.UTC(), For: iterations}}, nil
	})
	if err != nil {
		return Guidance{}, err
	}
	l := lines[0]
	g := Guidance{ID: l.ID, Item: l.Item, Text: l.Text, By: l.By, At: l.At, For: l.For}
	aim := "every item"
	if item != "" {
		aim = item
	}
	msg := fmt.Sprintf("guidance %s from %s for %s: %s", g.ID, by, aim, oneLine(text, 300))
	_ = store.AppendJSONL(p.Events, Event{Time: now.UTC(), RunID: st.RunID, Type: "guidance_given", Item: item, Message: msg,
		Data: map[string]any{"id": g.ID, "text": text, "for": iterations, "by": by}})
	_ = store.AppendLog(p.Progress, []byte(fmt.Sprintf("\n## %s · guidance %s · %s\n\n- From: %s\n- Text: %s",
		now.UTC().Format(time.RFC3339), g.ID, aim, by, text)))
	return g, nil
}

// PendingGuidance is the guidance the next iteration on item is shown:
// pending, and aimed at every item or at this one ("*": all that is
// pending, whatever its item).
func PendingGuidance(all []Guidance, item string) []Guidance {
	out := []Guidance{}
	for _, g := range all {
		if g.Pending() && (item == "*" || g.Item == "" || g.Item == item) {
			out = append(out, g)
		}
	}
	return out
}

// guidanceFor is the guidance the prompt of an iteration on item carries.
// A log that cannot be read costs the prompt its guidance, not the run.
func (e *Engine) guidanceFor(item string) []Guidance {
	all, err := ReadGuidance(e.cfg.Paths)
	if err != nil {
		return nil
	}
	return PendingGuidance(all, item)
}

// guidanceShown records that iteration's prompt carried gs.
func (e *Engine) guidanceShown(gs []Guidance, item string, iteration int) {
	if len(gs) == 0 {
		return
	}
	now := e.cfg.Clock.Now().UTC()
	_, err := appendGuidance(e.cfg.Paths, func([]Guidance) ([]guidanceLine, error) {
		var ls []guidanceLine
		for _, g := range gs {
			ls = append(ls, guidanceLine{Kind: "shown", ID: g.ID, Item: item, At: now, Iteration: iteration, Run: e.runID()})
		}
		return ls, nil
	})
	if err != nil {
		e.emit(Event{Type: "source_error", Iteration: iteration, Item: item, Message: "recording the guidance shown: " + err.Error()})
	}
}

var guidanceAckRe = regexp.MustCompile(`(?i)^\s*[-*]?\s*` + regexp.QuoteMeta(GuidanceAckPrefix) + `\s*(.+?)\s*$`)

// acknowledgeGuidance reads the final message of iteration on item for
// acknowledgements: a line "GUIDANCE-ACK: g1" (several ids may follow,
// separated by commas or spaces), outside fenced blocks, that is not a
// line of the prompt. Only guidance this very iteration was shown counts:
// an agent cannot acknowledge what it was never told, nor do it from a
// file or its tool output.
func (e *Engine) acknowledgeGuidance(item string, iteration int, final, prompt string) {
	ids := guidanceAcks(final, prompt)
	if len(ids) == 0 {
		return
	}
	now := e.cfg.Clock.Now().UTC()
	lines, err := appendGuidance(e.cfg.Paths, func(have []Guidance) ([]guidanceLine, error) {
		var ls []guidanceLine
		for _, g := range have {
			if slices.Contains(ids, g.ID) && g.Acknowledged == 0 && slices.Contains(g.shownIn, e.runID()+"/"+strconv.Itoa(iteration)) {
				ls = append(ls, guidanceLine{Kind: "acknowledged", ID: g.ID, Item: item, At: now, Iteration: iteration, Run: e.runID()})
			}
		}
		return ls, nil
	})
	if err != nil {
		e.emit(Event{Type: "source_error", Iteration: iteration, Item: item, Message: "recording a guidance acknowledgement: " + err.Error()})
	}
	for _, l := range lines {
		e.emit(Event{Type: "guidance_acknowledged", Iteration: iteration, Item: item, Message: fmt.Sprintf("iteration %d acknowledged guidance %s", iteration, l.ID), Data: map[string]any{"id": l.ID}})
	}
}

// guidanceAcks are the guidance ids final acknowledges.
func guidanceAcks(final, prompt string) []string {
	promptLines := map[string]bool{}
	for _, l := range strings.Split(prompt, "\n") {
		promptLines[strings.TrimSpace(l)] = true
	}
	var ids []string
	for _, line := range strings.Split(stripFences(final), "\n") {
		if promptLines[strings.TrimSpace(line)] {
			continue
		}
		m := guidanceAckRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, id := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			id = strings.ToLower(strings.Trim(id, "`*.;:"))
			if id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// guidanceSection is the prompt's "Guidance from a person" section.
func guidanceSection(gs []Guidance) string {
	if len(gs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Guidance from a person\n\nA person watching this run wrote the following while it was under way. It takes precedence over earlier notes; follow it in this iteration.\n\n")
	for _, g := range gs {
		fmt.Fprintf(&b, "- [%s] %s\n", g.ID, strings.ReplaceAll(strings.TrimSpace(g.Text), "\n", "\n  "))
	}
	b.WriteString("\nWhen you have acted on a piece of guidance, say so in your final message with a line of its own: " + GuidanceAckPrefix + " followed by its id in brackets above (several ids separated by commas). Guidance you do not acknowledge is shown again to the next iterations, a few times at most.\n")
	return b.String()
}
