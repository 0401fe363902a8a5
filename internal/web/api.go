package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
)

// The JSON API: what the page shows, as data. Every answer is masked
// (secret.Masker) as a whole, after it is encoded: a secret never leaves
// the server, whatever field it hid in.
//
//	GET /api/repos              the watched repositories and their runs
//	GET /api/state              the run: state, status, pending guidance
//	GET /api/items/ID           one item: the story, the judge's contract and
//	                            evidence, every iteration with its verdict,
//	                            gates and files, its commit, transcripts, events
//	GET /api/timeline           the iterations on their slots, the waits, the
//	                            DAG's best schedule
//	GET /api/dag                the stories, their levels and dependencies
//	GET /api/cost               spending over time, by agent and role, the
//	                            budget, the stories passed against time
//	GET /api/transcripts/N      iteration N's transcript (and rendered)
//	GET /api/search?q=TEXT      the events and transcripts that say TEXT
//	GET /api/events             the run's events as they are appended (SSE)
//	GET /api/csrf               this browser session's control token
//	POST /api/control/ACTION    pause, resume, stop, approve, reject, guide, retry
func (s *Server) api(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/repos", s.apiRepos)
	mux.HandleFunc("GET /api/state", s.apiState)
	mux.HandleFunc("GET /api/items/{id}", s.apiItem)
	mux.HandleFunc("GET /api/timeline", s.apiTimeline)
	mux.HandleFunc("GET /api/dag", s.apiDAG)
	mux.HandleFunc("GET /api/cost", s.apiCost)
	mux.HandleFunc("GET /api/transcripts/{n}", s.apiTranscript)
	mux.HandleFunc("GET /api/search", s.apiSearch)
	mux.HandleFunc("GET /api/events", s.apiEvents)
	mux.HandleFunc("GET /api/csrf", s.apiCSRF)
	mux.HandleFunc("POST /api/control/{action}", s.control)
}

// writeJSON answers v as masked JSON.
func (s *Server) writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, s.Mask.String(string(b))+"\n")
}

// apiError is an error answer.
type apiError struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

func (s *Server) fail(w http.ResponseWriter, code int, format string, args ...any) {
	s.writeJSON(w, code, apiError{Error: fmt.Sprintf(format, args...)})
}

// repoOrFail is the request's repository, or a 404 answered.
func (s *Server) repoOrFail(w http.ResponseWriter, r *http.Request) *repo {
	rp, _ := s.repoOf(r)
	if rp == nil {
		s.fail(w, http.StatusNotFound, "no such repository (?repo=N, 0 to %d)", len(s.repos)-1)
	}
	return rp
}

// repoInfo is a repository in /api/repos.
type repoInfo struct {
	Index  int    `json:"index"`
	Root   string `json:"root"`
	RunID  string `json:"run_id,omitempty"`
	Status string `json:"status"`
	Active bool   `json:"active"`
	Passed int    `json:"passed"`
	Marked int    `json:"marked"`
	Total  int    `json:"total"`
}

func (s *Server) apiRepos(w http.ResponseWriter, r *http.Request) {
	out := []repoInfo{}
	for i, rp := range s.repos {
		snap := rp.poll()
		ri := repoInfo{Index: i, Root: rp.paths.Root, Status: status(snap), Active: snap.Active}
		if st := snap.State; st != nil {
			ri.RunID = st.RunID
			ri.Passed, _, ri.Total = st.Counts()
			ri.Marked = len(st.Marked())
		}
		out = append(out, ri)
	}
	s.writeJSON(w, http.StatusOK, out)
}

// stateAnswer is /api/state.
type stateAnswer struct {
	Root    string   `json:"root"`
	Status  string   `json:"status"`
	Active  bool     `json:"active"`
	Paused  bool     `json:"paused"`
	Passed  int      `json:"passed"`
	Blocked int      `json:"blocked"`
	Marked  int      `json:"marked"` // marked done by hand, not verified
	Total   int      `json:"total"`
	Waiting []string `json:"waiting_for_approval"`
	// Questions are the run's questions from agents to a person (ralph
	// ask) and their answers.
	Questions []engine.QuestionView `json:"questions"`
	Guidance  []engine.Guidance     `json:"guidance"`
	Gates     []string              `json:"gates"`
	State     *engine.State         `json:"state"`
}

func (s *Server) apiState(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOrFail(w, r)
	if rp == nil {
		return
	}
	snap := rp.poll()
	a := stateAnswer{Root: rp.paths.Root, Status: status(snap), Active: snap.Active, Paused: snap.Paused, State: snap.State, Gates: snap.Gates, Waiting: []string{},
		Questions: engine.QuestionViews(snap.Questions)}
	if st := snap.State; st != nil {
		a.Passed, a.Blocked, a.Total = st.Counts()
		a.Marked = len(st.Marked())
		a.Waiting = engine.Waiting(st)
	}
	gs, _ := engine.ReadGuidance(rp.paths)
	a.Guidance = engine.PendingGuidance(gs, "*")
	s.writeJSON(w, http.StatusOK, a)
}

// eachEvent calls fn with each event of the run at p, oldest first.
func eachEvent(p engine.Paths, fn func(engine.Event)) {
	f, err := os.Open(p.Events)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev engine.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			fn(ev)
		}
	}
}

// transcriptAnswer is /api/transcripts/N: the file as it is, and as
// `ralph log` renders it.
type transcriptAnswer struct {
	Iteration int    `json:"iteration"`
	Text      string `json:"text"`
	Rendered  string `json:"rendered"`
}

func (s *Server) apiTranscript(w http.ResponseWriter, r *http.Request) {
	text, ok := s.transcriptText(r)
	if !ok {
		s.fail(w, http.StatusNotFound, "no transcript %s", r.PathValue("n"))
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	a := transcriptAnswer{Iteration: n, Text: text}
	a.Rendered, _ = renderText(text)
	s.writeJSON(w, http.StatusOK, a)
}

// apiTimeline answers /api/timeline.
func (s *Server) apiTimeline(w http.ResponseWriter, r *http.Request) {
	if rp := s.repoOrFail(w, r); rp != nil {
		s.writeJSON(w, http.StatusOK, timeline(rp.poll(), time.Now()))
	}
}

// apiDAG answers /api/dag (?dag=all: no level folded).
func (s *Server) apiDAG(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOrFail(w, r)
	if rp == nil {
		return
	}
	snap := rp.poll()
	var commits map[string]string
	if snap.State != nil {
		commits = s.commits(r.Context(), rp, snap.State)
	}
	s.writeJSON(w, http.StatusOK, dag(snap, commits, r.URL.Query().Get("dag") == "all"))
}

// apiCost answers /api/cost.
func (s *Server) apiCost(w http.ResponseWriter, r *http.Request) {
	if rp := s.repoOrFail(w, r); rp != nil {
		s.writeJSON(w, http.StatusOK, cost(rp.poll(), time.Now()))
	}
}

// hit is one line that matched a search.
type hit struct {
	Where     string `json:"where"` // events | transcript
	Iteration int    `json:"iteration,omitempty"`
	Line      int    `json:"line"`
	Text      string `json:"text"`
}

// maxHits bounds a search's answer, searchBytes the transcripts one
// search reads (newest first): a run of many long transcripts is searched
// in part, and says so.
const (
	maxHits     = 200
	searchBytes = 64 << 20
)

// search finds q (case-insensitive) in the run's events and transcripts,
// the newest transcripts first; complete is false when it stopped at a
// bound. It searches the masked text: a secret is neither shown nor
// found.
func (s *Server) search(rp *repo, q string) (hits []hit, complete bool) {
	q = strings.ToLower(q)
	hits = []hit{}
	match := func(h hit) bool {
		h.Text = s.Mask.String(h.Text)
		if !strings.Contains(strings.ToLower(h.Text), q) {
			return true
		}
		if len(h.Text) > 400 {
			h.Text = h.Text[:400] + "…"
		}
		hits = append(hits, h)
		return len(hits) < maxHits
	}
	line := 0
	more := true
	eachEvent(rp.paths, func(ev engine.Event) {
		line++
		if more {
			more = match(hit{Where: "events", Iteration: ev.Iteration, Line: line, Text: ev.Type + " " + ev.Item + " " + ev.Message})
		}
	})
	byIter, _, _ := engine.TranscriptFiles(rp.paths)
	iters := make([]int, 0, len(byIter))
	for n := range byIter {
		iters = append(iters, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(iters)))
	read := 0
	for _, n := range iters {
		if !more || read >= searchBytes {
			return hits, false
		}
		b, err := os.ReadFile(byIter[n])
		if err != nil {
			continue
		}
		read += len(b)
		for i, l := range strings.Split(string(b), "\n") {
			if more = match(hit{Where: "transcript", Iteration: n, Line: i + 1, Text: l}); !more {
				break
			}
		}
	}
	return hits, more
}

func (s *Server) apiSearch(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOrFail(w, r)
	if rp == nil {
		return
	}
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" {
		s.fail(w, http.StatusBadRequest, "search for what? (?q=TEXT)")
		return
	}
	hits, complete := s.search(rp, q)
	s.writeJSON(w, http.StatusOK, map[string]any{"query": q, "hits": hits, "complete": complete})
}

// apiEvents streams the run's events as server-sent events of type
// "ralph", each one masked JSON line with its offset in events.jsonl as
// its id: a client that reconnects (Last-Event-ID, or ?from=OFFSET) goes
// on where it was. A file that shrank (a new run set the old events
// aside) is read again from the start. ?once=1 ends the stream when it
// has sent what there is.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOrFail(w, r)
	if rp == nil {
		return
	}
	var off int64
	from := r.Header.Get("Last-Event-ID")
	if v := r.URL.Query().Get("from"); v != "" {
		from = v
	}
	if from != "" {
		off, _ = strconv.ParseInt(from, 10, 64)
	}
	s.stream(w, r, func(w io.Writer) bool {
		off = s.sendEvents(w, rp.paths.Events, off)
		return true // ?once=1: what there is, even nothing
	})
}

// sendEvents writes the whole lines of path after off as events and
// returns the offset after the last one.
func (s *Server) sendEvents(w io.Writer, path string, off int64) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() < off {
		off = 0
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return off
	}
	b, _ := io.ReadAll(io.LimitReader(f, 8<<20))
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return off // a line still being written waits for its end
		}
		line := bytes.TrimSpace(b[:i])
		off += int64(i + 1)
		b = b[i+1:]
		if len(line) == 0 || !json.Valid(line) {
			continue
		}
		fmt.Fprintf(w, "event: ralph\nid: %d\ndata: %s\n\n", off, s.Mask.String(string(line)))
	}
}
