package web

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/dashboard"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/prd"
)

// itemAnswer is /api/items/ID, and what the story's page (/items/ID)
// shows: the story as the PRD gives it, the acceptance contract and the
// evidence the judge recorded, every iteration on it with its verdict,
// gates and files, its commit (with its page on GitHub when the remote
// is there), its transcripts, events and pending guidance.
type itemAnswer struct {
	Item *engine.ItemState `json:"item"`
	// Status is the item's status as the pages show it (itemStatus);
	// Attempts its attempts used of the limit, "1/3".
	Status   string     `json:"status"`
	Attempts string     `json:"attempts"`
	Story    *storyInfo `json:"story,omitempty"`
	// Gates are the PRD's quality gates, "name: command".
	Gates []string `json:"gates"`
	// Judgements are the judge's records of the claims on the item,
	// oldest first (.ralph/judged/ID.jsonl); Contract the newest
	// acceptance contract among them.
	Judgements  []judge.Judgement `json:"judgements"`
	Contract    *judge.Contract   `json:"contract,omitempty"`
	Iterations  []attemptInfo     `json:"iterations"`
	Commit      *commitInfo       `json:"commit,omitempty"`
	Transcripts []int             `json:"transcripts"`
	Events      []engine.Event    `json:"events"`
	Guidance    []engine.Guidance `json:"guidance"`
}

// storyInfo is the story as the PRD gives it.
type storyInfo struct {
	Title              string   `json:"title"`
	Description        string   `json:"description,omitempty"`
	AcceptanceCriteria []string `json:"acceptance_criteria"`
	Checks             []string `json:"checks"`
	DependsOn          []string `json:"depends_on"`
	Level              int      `json:"level,omitempty"`
	Notes              string   `json:"notes,omitempty"`
	AllowTestChanges   bool     `json:"allow_test_changes,omitempty"`
}

// attemptInfo is one iteration on the item.
type attemptInfo struct {
	dashboard.Iteration
	DurationMS int64        `json:"duration_ms"`
	GateOutput []gateOutput `json:"gate_output"`
	// Files are what the iteration changed, from its judgement (or, for
	// the iteration that passed, its commit).
	Files []judge.FileStat `json:"files,omitempty"`
	// Judged: the judge recorded a judgement of this iteration (Verdict
	// is its summary).
	Judged  bool   `json:"judged"`
	Verdict string `json:"verdict,omitempty"`
}

// gateOutput is what a gate printed in an iteration (its last lines).
type gateOutput struct {
	Name   string `json:"name"`
	Result string `json:"result"`
	Output string `json:"output"`
}

// commitInfo is the item's commit.
type commitInfo struct {
	SHA   string         `json:"sha"`
	URL   string         `json:"url,omitempty"`
	Files []git.FileStat `json:"files"`
}

// item builds the answer for id, nil when the run has no such item.
func (s *Server) item(ctx context.Context, rp *repo, id string) *itemAnswer {
	snap := rp.poll()
	st := snap.State
	if st == nil || st.Items[id] == nil {
		return nil
	}
	is := st.Items[id]
	running := false
	if snap.Active {
		for _, c := range st.Current {
			running = running || c.Item == id
		}
	}
	a := &itemAnswer{Item: is, Status: itemStatus(is, running, slices.Contains(engine.Waiting(st), id)), Attempts: is.AttemptsOf(st.MaxAttempts),
		Gates: []string{}, Judgements: []judge.Judgement{}, Iterations: []attemptInfo{}, Transcripts: []int{}, Events: []engine.Event{}}
	if st.Source == "prd" {
		if doc, err := prd.Load(st.SourcePath); err == nil {
			for _, g := range doc.QualityChecks.Gates() {
				a.Gates = append(a.Gates, g.Name+": "+g.Command)
			}
			if story := doc.Story(id); story != nil {
				a.Story = &storyInfo{Title: story.Title, Description: story.Description, AcceptanceCriteria: nonNil(story.AcceptanceCriteria), Checks: nonNil(story.Checks),
					DependsOn: nonNil(story.DependsOn), Level: snap.Levels[id], Notes: story.Notes, AllowTestChanges: story.AllowTestChanges}
			}
		}
	}
	if js, err := judge.Read(rp.paths.Dir, id); err == nil && js != nil {
		js = foldLandings(js)
		a.Judgements = js
		for i := len(js) - 1; i >= 0; i-- {
			if js[i].Contract != nil {
				a.Contract = js[i].Contract
				break
			}
		}
	}
	eachEvent(rp.paths, func(ev engine.Event) {
		if ev.Item != id {
			return
		}
		a.Events = append(a.Events, ev)
		if ev.Type == "iteration_started" {
			a.Transcripts = append(a.Transcripts, ev.Iteration)
		}
	})
	gs, _ := engine.ReadGuidance(rp.paths)
	a.Guidance = engine.PendingGuidance(gs, id)
	if sha := commitOf(is, s.commits(ctx, rp, st)); sha != "" {
		a.Commit = s.commit(ctx, rp, sha)
	}
	now := time.Now()
	for _, it := range snap.History.Iterations {
		if it.Item != id {
			continue
		}
		at := attemptInfo{Iteration: it, DurationMS: it.Duration(now).Milliseconds(), GateOutput: gateOutputs(it.Transcript)}
		for _, j := range a.Judgements {
			if j.Iteration == it.Number {
				at.Judged, at.Verdict, at.Files = true, j.Summary, j.Files
			}
		}
		if at.Files == nil && it.Outcome == dashboard.OutcomePassed && a.Commit != nil {
			for _, f := range a.Commit.Files {
				at.Files = append(at.Files, judge.FileStat(f))
			}
		}
		a.Iterations = append(a.Iterations, at)
	}
	return a
}

// foldLandings folds the judge's landing records (the commit a passed
// claim landed as, recorded when the lander took it: no iteration, no
// checks) into the judgement they landed: the newest passed one before
// them that has not landed yet.
func foldLandings(js []judge.Judgement) []judge.Judgement {
	out := make([]judge.Judgement, 0, len(js))
	for _, j := range js {
		if j.Iteration == 0 && j.Landed != "" && len(j.Checks) == 0 {
			for i := len(out) - 1; i >= 0; i-- {
				if out[i].Passed && out[i].Landed == "" {
					out[i].Landed = j.Landed
					break
				}
			}
			continue
		}
		out = append(out, j)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// gateStart and gateEnd are the lines that open and close a gate's
// output in a transcript (gate.Runner; a worker's attested result).
var (
	gateStart = regexp.MustCompile(`^=== gate (.+?): (.*)$`)
	gateEnd   = regexp.MustCompile(`^=== gate (.+?): (passed|FAILED)( on worker .*)? \(exit -?\d+`)
)

// gateLines is how much of a gate's output the page keeps: its end,
// where the failure is.
const gateLines = 60

// gateOutputs are the gates' outputs in a transcript, in order.
func gateOutputs(path string) []gateOutput {
	out := []gateOutput{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var cur *gateOutput
	var lines []string
	for sc.Scan() {
		l := sc.Text()
		if m := gateEnd.FindStringSubmatch(l); m != nil {
			g := gateOutput{Name: m[1], Result: strings.TrimPrefix(l, "=== gate "+m[1]+": ")}
			if cur != nil && cur.Name == m[1] {
				g.Output = strings.Join(lines, "\n")
			}
			out = append(out, g)
			cur, lines = nil, nil
			continue
		}
		if m := gateStart.FindStringSubmatch(l); m != nil {
			cur, lines = &gateOutput{Name: m[1]}, nil
			continue
		}
		if cur != nil {
			lines = append(lines, l)
			if len(lines) > gateLines {
				lines = lines[1:]
			}
		}
	}
	return out
}

// renderedLimit bounds a transcript rendered on the story's page; the
// whole file is at /transcript/N.
const renderedLimit = 256 << 10

// rendered is the transcript at path as `ralph log` prints it.
func rendered(path string) (text string, cut bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	return renderTranscript(f)
}

// renderText is a transcript's text as `ralph log` prints it.
func renderText(text string) (string, bool) { return renderTranscript(strings.NewReader(text)) }

// renderTranscript renders a transcript (dashboard.LogRenderer), cut at
// renderedLimit.
func renderTranscript(in io.Reader) (text string, cut bool) {
	var b bytes.Buffer
	r := dashboard.NewLogRenderer(&b, false)
	br := bufio.NewReader(in)
	for b.Len() < renderedLimit {
		line, err := br.ReadString('\n')
		if line != "" {
			r.Line(strings.TrimSuffix(line, "\n"))
		}
		if err != nil {
			r.Flush()
			return b.String(), false
		}
	}
	r.Flush()
	return b.String(), true
}

// commits maps the run's items to the newest commit on its branch that
// names them (source.ItemTrailer): the commit of an item that passed in
// an earlier run, which this run's state does not hold. Asked of git at
// most once every few seconds.
func (s *Server) commits(ctx context.Context, rp *repo, st *engine.State) map[string]string {
	rp.gitMu.Lock()
	defer rp.gitMu.Unlock()
	key := st.RunID + "\x00" + st.Branch
	if rp.commitsKey == key && time.Since(rp.commitsAt) < commitsEvery {
		return rp.commitIndex
	}
	rp.commitsKey, rp.commitsAt, rp.commitIndex = key, time.Now(), nil
	need := false
	for _, id := range st.Order {
		need = need || st.Items[id].PassedBefore()
	}
	trailer := itemTrailer(st.Source)
	if !need || trailer == "" {
		return nil
	}
	rev := st.Branch
	if rev == "" {
		rev = "HEAD"
	}
	idx, err := s.git(rp.paths.Root).TrailerIndex(ctx, rev, trailer, "", "")
	if err == nil {
		rp.commitIndex = idx
	}
	return rp.commitIndex
}

// commitsEvery is how long the index of earlier commits is kept.
const commitsEvery = 10 * time.Second

// commit is a commit's files and its page on GitHub (kept: a commit does
// not change).
func (s *Server) commit(ctx context.Context, rp *repo, sha string) *commitInfo {
	rp.gitMu.Lock()
	defer rp.gitMu.Unlock()
	if c := rp.commitInfo[sha]; c != nil {
		return c
	}
	g := s.git(rp.paths.Root)
	files, err := g.FileStats(ctx, sha)
	if err != nil {
		return &commitInfo{SHA: sha, Files: []git.FileStat{}} // not in this clone (yet): asked again next time
	}
	c := &commitInfo{SHA: sha, Files: files, URL: commitURL(g.RemoteURL(ctx, "origin"), sha)}
	if c.Files == nil {
		c.Files = []git.FileStat{}
	}
	if rp.commitInfo == nil {
		rp.commitInfo = map[string]*commitInfo{}
	}
	rp.commitInfo[sha] = c
	return c
}

// apiItem answers /api/items/ID.
func (s *Server) apiItem(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOrFail(w, r)
	if rp == nil {
		return
	}
	id := r.PathValue("id")
	a := s.item(r.Context(), rp, id)
	if a == nil {
		s.fail(w, http.StatusNotFound, "%s is not an item of the run", id)
		return
	}
	s.writeJSON(w, http.StatusOK, a)
}

// itemView is what the story's page renders.
type itemView struct {
	*itemAnswer
	ID       string
	Repo     int
	RepoName string
	Look     look
	Latest   *judge.Judgement
	Shown    []shownAttempt
	Text     func(judge.Evidence) string
}

// shownAttempt is an iteration on the story's page, its transcript
// rendered.
type shownAttempt struct {
	attemptInfo
	Look        look
	Duration    string
	Transcript  string
	Cut         bool
	MaxAttempts int
}

// itemPage serves /items/ID.
func (s *Server) itemPage(w http.ResponseWriter, r *http.Request) {
	rp, n := s.repoOf(r)
	if rp == nil {
		http.NotFound(w, r)
		return
	}
	s.session(w, r)
	id := r.PathValue("id")
	a := s.item(r.Context(), rp, id)
	if a == nil {
		http.Error(w, id+" is not an item of the run in "+rp.paths.Root, http.StatusNotFound)
		return
	}
	v := itemView{itemAnswer: a, ID: id, Repo: n, RepoName: rp.paths.Root, Look: statusLook(a.Status)}
	if k := len(a.Judgements); k > 0 {
		v.Latest = &a.Judgements[k-1]
	}
	maxAttempts := 0
	if st := rp.poll().State; st != nil {
		maxAttempts = st.MaxAttempts
	}
	for i := len(a.Iterations) - 1; i >= 0; i-- { // the newest first
		at := a.Iterations[i]
		text, cut := rendered(at.Transcript)
		v.Shown = append(v.Shown, shownAttempt{attemptInfo: at, Look: outcomeLook(at.Outcome), Duration: span(time.Duration(at.DurationMS) * time.Millisecond),
			Transcript: text, Cut: cut, MaxAttempts: maxAttempts})
	}
	s.render(w, "item.html", v)
}
