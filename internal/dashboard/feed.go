// Package dashboard is the live view of a run for people (`ralph run` on a
// terminal, `ralph watch`): a reader of the run's files — state.json,
// events.jsonl and the transcripts of the iterations under way — never a
// second engine. Feed reads them; Model renders them with bubbletea.
package dashboard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/sandbox"
)

// tailLines is how many lines of each agent's activity the view keeps.
const tailLines = 6

// Snapshot is what the view shows at one moment.
type Snapshot struct {
	State  *engine.State
	Active bool // a process holds the run lock
	Paused bool // .ralph/pause exists
	// Tails are the newest activity lines of each iteration under way,
	// by item.
	Tails map[string][]string
	// Transcripts are each item's newest transcript (for the pager).
	Transcripts map[string]string
	// Gates are the newest gate results, newest last.
	Gates []string
	// Levels are the PRD's dependency levels by story (1-based); Deps
	// each story's depends_on, joined, and DependsOn the same as a list.
	Levels    map[string]int
	Deps      map[string]string
	DependsOn map[string][]string
	// History is the run's iterations, passes and waits as its events
	// tell them, when asked for (PollHistory).
	History *History
	// Remote are a coordinator's workers on other machines (none for a
	// local run), while the run is active.
	Remote []cluster.WorkerInfo
	// Sandbox is the run's sandbox in one line (what it denied), "" for a
	// run without it.
	Sandbox string
	// Questions are the run's questions from agents to a person (ralph
	// ask), an answer ralph did not seal taken as none.
	Questions []engine.Question
	Err       error
}

// Feed reads a run's files incrementally: the events appended since the
// last read, the transcripts' new lines.
type Feed struct {
	Paths engine.Paths

	evOff       int64
	evPartial   []byte
	transcripts map[int]string    // iteration → transcript
	newest      map[string]string // item → newest transcript
	gates       []string
	tails       map[string]*tail // by transcript path
	levels      map[string]int
	deps        map[string]string
	dependsOn   map[string][]string
	levelsOf    string // the PRD levels and deps were read from
	history     History
}

// NewFeed reads the run of the repository at paths.
func NewFeed(p engine.Paths) *Feed {
	return &Feed{Paths: p, transcripts: map[int]string{}, newest: map[string]string{}, tails: map[string]*tail{}}
}

// Poll reads what changed and returns the snapshot.
func (f *Feed) Poll() Snapshot {
	s := Snapshot{Tails: map[string][]string{}}
	st, _, err := engine.LoadOrRebuildState(f.Paths)
	if err != nil {
		s.Err = err
		return s
	}
	s.State = st
	s.Active, _ = engine.ActiveRun(f.Paths)
	_, perr := os.Stat(f.Paths.Pause)
	s.Paused = perr == nil
	if s.Active {
		s.Remote = cluster.ReadWorkersFile(f.Paths.Dir)
	}
	s.Sandbox = sandbox.ReadRecord(f.Paths.Dir).Summary()
	f.readEvents()
	if st != nil {
		s.Questions, _ = engine.CheckedQuestions(f.Paths, st.RunID)
		for _, c := range st.Current {
			path := f.transcripts[c.Iteration]
			if path == "" {
				continue
			}
			t := f.tails[path]
			if t == nil {
				t = &tail{}
				f.tails[path] = t
			}
			t.read(path)
			s.Tails[c.Item] = append([]string(nil), t.lines...)
			if i, ok := f.history.byNumber[c.Iteration]; ok && t.worker != "" {
				f.history.Iterations[i].Worker = t.worker
			}
		}
		if st.Source == "prd" && st.SourcePath != f.levelsOf {
			f.levelsOf, f.levels, f.deps, f.dependsOn = st.SourcePath, nil, nil, nil
			if doc, err := prd.Load(st.SourcePath); err == nil {
				f.levels, f.deps, f.dependsOn = map[string]int{}, map[string]string{}, map[string][]string{}
				for i, level := range doc.Levels() {
					for _, story := range level {
						f.levels[story.ID] = i + 1
						f.deps[story.ID] = strings.Join(story.DependsOn, ", ")
						f.dependsOn[story.ID] = story.DependsOn
					}
				}
			}
		}
	}
	s.Levels, s.Deps, s.DependsOn = f.levels, f.deps, f.dependsOn
	s.Gates = append([]string(nil), f.gates...)
	s.Transcripts = make(map[string]string, len(f.newest))
	for k, v := range f.newest {
		s.Transcripts[k] = v
	}
	return s
}

// PollHistory is Poll with the run's History (a copy: the feed goes on
// reading into its own). While no process holds the run, what it had
// under way is cut off (a question to a person still waits for its
// answer).
func (f *Feed) PollHistory() Snapshot {
	s := f.Poll()
	f.history.findWorkers(32)
	s.History = f.history.copy()
	if !s.Active {
		s.History.interrupt(true)
	}
	return s
}

// readEvents reads the events appended since the last read; a file that
// shrank (a new run set the old one's aside) is read from the start.
func (f *Feed) readEvents() {
	fh, err := os.Open(f.Paths.Events)
	if err != nil {
		return
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.Size() < f.evOff {
		f.evOff, f.evPartial = 0, nil
		f.transcripts, f.newest, f.gates, f.tails = map[int]string{}, map[string]string{}, nil, map[string]*tail{}
		f.history = History{}
	}
	if _, err := fh.Seek(f.evOff, io.SeekStart); err != nil {
		return
	}
	b, _ := io.ReadAll(fh)
	f.evOff += int64(len(b))
	b = append(f.evPartial, b...)
	last := bytes.LastIndexByte(b, '\n')
	if last < 0 {
		f.evPartial = b
		return
	}
	f.evPartial = append([]byte(nil), b[last+1:]...)
	for _, line := range bytes.Split(b[:last], []byte{'\n'}) {
		var ev engine.Event
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		f.history.add(ev)
		switch ev.Type {
		case "iteration_started":
			if tr, ok := ev.Data["transcript"].(string); ok {
				f.transcripts[ev.Iteration] = tr
				f.newest[ev.Item] = tr
			}
		case "gate_result":
			f.gates = append(f.gates, ev.Item+": "+ev.Message)
			if len(f.gates) > 4 {
				f.gates = f.gates[len(f.gates)-4:]
			}
		}
	}
}

// tail follows one transcript: the agent's activity, as the log shows it.
type tail struct {
	off     int64
	partial string
	reader  engine.TranscriptReader
	lines   []string
	worker  string // the remote worker that took the job (a coordinator's run)
}

func (t *tail) read(path string) {
	fh, err := os.Open(path)
	if err != nil {
		return
	}
	defer fh.Close()
	if _, err := fh.Seek(t.off, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(fh)
	for {
		line, err := r.ReadString('\n')
		t.off += int64(len(line))
		if err != nil {
			t.partial += line
			return
		}
		t.line(strings.TrimSuffix(t.partial+line, "\n"))
		t.partial = ""
	}
}

func (t *tail) line(l string) {
	kind, steps := t.reader.Line(l)
	if kind == engine.LineRalph {
		if w, host, ok := cluster.WorkerOfLine(l); ok {
			t.worker = w + " on " + host
		}
		t.add(l)
		return
	}
	for _, s := range steps {
		switch s.Kind {
		case "tool":
			t.add("→ " + s.Text)
		case "output":
			for _, o := range strings.Split(strings.TrimRight(s.Text, "\n"), "\n") {
				t.add("    " + o)
			}
		case "error":
			t.add("! " + s.Text)
		default:
			if s.Delta && len(t.lines) > 0 && !strings.HasPrefix(t.lines[len(t.lines)-1], "→") {
				t.lines[len(t.lines)-1] += s.Text
				continue
			}
			for _, o := range strings.Split(s.Text, "\n") {
				if strings.TrimSpace(o) != "" {
					t.add(o)
				}
			}
		}
	}
}

func (t *tail) add(l string) {
	t.lines = append(t.lines, l)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

// elapsed renders a duration as m:ss (or h:mm:ss).
func elapsed(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}
