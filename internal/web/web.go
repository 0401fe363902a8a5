// Package web is the web dashboard of a repository's runs (`ralph
// serve`): Go templates with their assets embedded, pictures drawn as SVG
// on the server (svg.go: the timeline, the DAG, spending and progress),
// live updates by server-sent events, a JSON API (api.go) with the data
// behind each picture, a page per story (item.go) and controls
// (control.go). Like the terminal dashboard it reads the run's files
// through dashboard.Feed and is never a second engine: a control runs
// the command line's own command in process (Server.Invoke, handed in by
// `ralph serve`), as the MCP server's tools do.
package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/dashboard"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/github"
	"github.com/ralph-loop/ralph/internal/httpauth"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/secret"
	"github.com/ralph-loop/ralph/internal/source"
)

//go:embed templates/*.html
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"ctl":      ctl,
	"outcome":  outcomeLook,
	"status":   statusLook,
	"short":    engine.ShortSHA,
	"span":     span,
	"ms":       func(v int64) string { return span(time.Duration(v) * time.Millisecond) },
	"tokens":   dashboard.Tokens,
	"evidence": func(e judge.Evidence) string { return e.String() },
	"usd":      func(v float64) string { return fmt.Sprintf("$%.2f", v) },
	"clock":    func(t time.Time) string { return t.Local().Format(time.TimeOnly) },
	"base":     filepath.Base,
	"okChecks": func(cs []judge.CheckResult) (n int) {
		for _, c := range cs {
			if c.OK {
				n++
			}
		}
		return n
	},
}).ParseFS(files, "templates/*.html"))

// itemTrailer and commitURL are where the commit pages come from.
var (
	itemTrailer = source.ItemTrailer
	commitURL   = github.CommitURL
)

// controlView is one control's button.
type controlView struct {
	Action, ID, CSRF string
	Repo             int
}

// ctl is the button of action (on item id) in the page v.
func ctl(v view, action, id string) controlView {
	return controlView{Action: action, ID: id, CSRF: v.CSRF, Repo: v.Repo}
}

// Server serves the dashboard of one repository, or of several
// (Watch): requests name theirs with ?repo=N (0, the first, by default);
// with several, / is the overview of them all.
type Server struct {
	// Token, when set, is required on every request, the event stream
	// included: a Bearer header, or the cookie that opening the page once
	// with ?token= sets (the token then leaves the address).
	Token string
	// Hosts are names besides IP addresses, localhost and this machine's
	// name that requests may give as their Host: any other is refused (a
	// DNS-rebinding page in the person's browser).
	Hosts []string
	// Mask hides secrets in everything the dashboard shows.
	Mask *secret.Masker
	// Every is how often the event stream looks for a change.
	Every time.Duration
	// Invoke runs `ralph ARGS` in process in repo with its output
	// captured (the controls); nil: the dashboard only reads.
	Invoke func(ctx context.Context, repo string, args ...string) (stdout string, err error)
	// Git is the repository at dir (the story pages read commits: their
	// files, the remote); nil: git on $PATH.
	Git func(dir string) *git.Repo

	repos   []*repo
	csrfKey []byte // the per-session CSRF tokens' key, new with each server
}

// repo is one repository the server watches.
type repo struct {
	paths engine.Paths
	mu    sync.Mutex // serialises the feed's incremental reads
	feed  *dashboard.Feed

	gitMu       sync.Mutex // guards what git told about commits
	commitsKey  string
	commitsAt   time.Time
	commitIndex map[string]string
	commitInfo  map[string]*commitInfo
}

// New serves the repository at p.
func New(p engine.Paths, token string) *Server {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	s := &Server{Token: token, Every: 500 * time.Millisecond, Mask: secret.FromEnv(), csrfKey: key}
	s.Watch(p)
	return s
}

// Watch adds the repository at p to the ones the server shows.
func (s *Server) Watch(p engine.Paths) {
	s.repos = append(s.repos, &repo{paths: p, feed: dashboard.NewFeed(p)})
}

// git is the repository at dir.
func (s *Server) git(dir string) *git.Repo {
	if s.Git != nil {
		return s.Git(dir)
	}
	return &git.Repo{Dir: dir, Runner: proc.Exec{}}
}

// Handler routes: / (the run's page, or the overview of several
// repositories), /items/ID (a story's page), /events (server-sent events
// of the pages' live parts), /transcript/N, the JSON API under /api/ and
// the controls (POST /api/control/ACTION), all behind the Host check and
// the token when there is one.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /items/{id}", s.itemPage)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /transcript/{n}", s.transcript)
	s.api(mux)
	g := &httpauth.Guard{Token: s.Token, Cookie: CookieName, Hosts: s.Hosts}
	return g.Wrap(mux)
}

// repoOf is the repository a request names (?repo=N), or nil.
func (s *Server) repoOf(r *http.Request) (*repo, int) {
	n := 0
	if v := r.URL.Query().Get("repo"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			return nil, 0
		}
	}
	if n < 0 || n >= len(s.repos) {
		return nil, 0
	}
	return s.repos[n], n
}

// poll is the repository's snapshot now.
func (rp *repo) poll() dashboard.Snapshot {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.feed.PollHistory()
}

// CookieName is the cookie that carries the dashboard's token.
const CookieName = "ralph_dashboard"

// view is what the run's page renders.
type view struct {
	Repo     int
	RepoName string
	Repos    []repoView
	CSRF     string // "" when the controls are off
	Note     string // what the last control did
	Query    string
	Hits     []hit
	// SearchComplete: the search read everything (not stopped at a
	// bound).
	SearchComplete bool
	Guidance       []engine.Guidance
	Iterations     []iterationView
	Waiting        []string // items whose plans wait for a decision
	// Questions are the run's questions to a person; Asking those that
	// wait for an answer.
	Questions []engine.Question
	Asking    []engine.Question
	Paused    bool
	Active    bool
	// Finished: the run ended (complete, blocked, stopped…) and no
	// process holds it: nothing to pause or stop.
	Finished    bool
	State       *engine.State
	Status      string
	StatusLook  look
	Passed      int
	Blocked     int
	Marked      int // marked done by hand, not verified
	Total       int
	Percent     int
	Usage       string
	Elapsed     string
	Items       []rowView
	Workers     []workerView
	Gates       []string
	Transcripts []int
	Progress    string
	PastRuns    []string
	// The pictures and the data behind them.
	Timeline    template.HTML
	TimelineN   int
	Best        *bestSchedule
	DAG         template.HTML
	DAGAnswer   dagAnswer
	DAGAll      bool
	Spend       template.HTML
	PassedChart template.HTML
	Cost        costAnswer
	Legend      []look
}

// rowView is an item's row in the table.
type rowView struct {
	ID, Title, Status, Deps, Commit, Attempts string
	Level                                     int
	Look                                      look
	Waiting                                   bool   // its plan waits for a decision
	Asked                                     string // its questions that wait for an answer
}

// repoView is one watched repository in the list of them.
type repoView struct {
	Index         int
	Name, Status  string
	RunID         string
	Look          look
	Passed, Total int
	Blocked       int
	Marked        int // marked done by hand, not verified
	Percent       int
	Iterations    int
	Usage         string
	Updated       string
	Running       []string // the items under way
	Selected      bool
}

type workerView struct {
	Item, Role, Phase, Elapsed, Worker string
	Iteration, Attempt, Queue          int
	Tail                               []string
}

// iterationView is one iteration on the page, folded (<details>), with
// a title people read: the story, the attempt, what came of it.
type iterationView struct {
	Number  int
	Item    string
	Title   string
	Look    look
	Heading string
	Lines   []string
}

func (s *Server) snapshot(r *http.Request, rp *repo, n int) view {
	snap := rp.poll()
	now := time.Now().Truncate(time.Second)
	v := view{Repo: n, RepoName: rp.paths.Root, State: snap.State, Gates: snap.Gates, Paused: snap.Paused, Active: snap.Active, CSRF: s.csrfOf(r)}
	st := snap.State
	if st == nil {
		return v
	}
	v.Passed, v.Blocked, v.Total = st.Counts()
	v.Marked = len(st.Marked())
	if v.Total > 0 {
		v.Percent = 100 * v.Passed / v.Total
	}
	v.Status = status(snap)
	v.StatusLook = runLook(v.Status)
	v.Finished = !snap.Active && st.Status != engine.StatusRunning
	v.Waiting = engine.Waiting(st)
	v.Questions = snap.Questions
	asked := map[string][]string{}
	for _, q := range snap.Questions {
		if q.Waiting() {
			v.Asking = append(v.Asking, q)
			asked[q.Item] = append(asked[q.Item], q.ID)
		}
	}
	v.Usage = usageLine(st)
	if h := snap.History; h != nil && !h.Start.IsZero() {
		end := h.Last
		if snap.Active {
			end = now
		}
		v.Elapsed = span(end.Sub(h.Start))
	}
	commits := s.commits(r.Context(), rp, st)
	running := map[string]bool{}
	if snap.Active {
		for _, c := range st.Current {
			running[c.Item] = true
		}
	}
	for _, id := range st.Order {
		is := st.Items[id]
		commit := commitOf(is, commits)
		waiting := slices.Contains(v.Waiting, id)
		status := itemStatus(is, running[id], waiting)
		v.Items = append(v.Items, rowView{ID: id, Title: is.Title, Status: is.Status, Attempts: is.AttemptsOf(st.MaxAttempts), Level: snap.Levels[id], Deps: snap.Deps[id],
			Commit: engine.ShortSHA(commit), Look: statusLook(status), Waiting: waiting, Asked: strings.Join(asked[id], ", ")})
	}
	if snap.Active {
		on := map[int]string{}
		for _, it := range snap.History.Iterations {
			on[it.Number] = it.Worker
		}
		for _, c := range st.Current {
			role := c.Role
			if role == "" {
				role = "worker"
			}
			v.Workers = append(v.Workers, workerView{Item: c.Item, Iteration: c.Iteration, Attempt: c.Attempt, Role: role, Phase: c.Phase, Worker: on[c.Iteration],
				Elapsed: time.Since(c.StartedAt).Round(time.Second).String(), Queue: c.QueuePos, Tail: snap.Tails[c.Item]})
		}
	}
	for n := 1; n <= st.Iteration; n++ {
		v.Transcripts = append(v.Transcripts, n)
	}
	tl := timeline(snap, now)
	v.Timeline, v.TimelineN, v.Best = timelineSVG(tl, n).html(), len(tl.Bars), tl.Best
	v.DAGAll = r.URL.Query().Get("dag") == "all"
	v.DAGAnswer = dag(snap, commits, v.DAGAll)
	if len(v.DAGAnswer.Nodes) > 0 {
		v.DAG = dagSVG(v.DAGAnswer, n).html()
	}
	v.Cost = cost(snap, now)
	v.Spend, v.PassedChart = spendSVG(v.Cost).html(), passedSVG(v.Cost).html()
	for _, o := range []string{dashboard.OutcomePassed, dashboard.OutcomeFailed, dashboard.OutcomeBlocked, dashboard.OutcomeRunning, dashboard.OutcomeRateLimited,
		dashboard.OutcomeWaiting, dashboard.OutcomeProgress, dashboard.OutcomeInterrupted} {
		v.Legend = append(v.Legend, outcomeLook(o))
	}
	return v
}

// status is the run's status as people see it: a run no process holds
// is interrupted, a held one paused.
func status(snap dashboard.Snapshot) string {
	st := snap.State
	if st == nil {
		return "no run"
	}
	switch {
	case st.Status == engine.StatusRunning && !snap.Active:
		return "interrupted"
	case snap.Paused && snap.Active:
		return "paused"
	}
	return st.Status
}

// runLook is how a run's status is drawn.
func runLook(s string) look {
	switch s {
	case engine.StatusComplete:
		return look{"passed", "✓", "complete"}
	case engine.StatusRunning:
		return look{"running", "▶", "running"}
	case "paused":
		return look{"waiting", "‖", "paused"}
	case engine.StatusBlocked, engine.StatusError:
		return look{"blocked", "⊘", strings.ReplaceAll(s, "_", " ")}
	case engine.StatusUnverified:
		return look{"waiting", "✋", "unverified: items marked by hand are left"}
	case "no run":
		return look{"pending", "○", "no run yet"}
	}
	return look{"interrupted", "■", strings.ReplaceAll(s, "_", " ")}
}

// iterations are the run's iterations with their events, newest first.
func (s *Server) iterations(snap dashboard.Snapshot) []iterationView {
	if snap.History == nil {
		return nil
	}
	maxAttempts := 0
	if snap.State != nil {
		maxAttempts = snap.State.MaxAttempts
	}
	var out []iterationView
	now := time.Now()
	its := snap.History.Iterations
	for i := len(its) - 1; i >= 0; i-- {
		it := its[i]
		l := outcomeLook(it.Outcome)
		h := fmt.Sprintf("Iteration %d · %s", it.Number, it.Item)
		if it.Title != "" {
			h += " " + it.Title
		}
		if it.Attempt > 0 && maxAttempts > 0 {
			h += fmt.Sprintf(" · attempt %d/%d", it.Attempt, maxAttempts)
		}
		if it.Role != "worker" {
			h += " · " + it.Role
		}
		h += fmt.Sprintf(" · %s %s", l.Glyph, l.Word)
		if it.Outcome == dashboard.OutcomeRunning {
			h += " for " + span(it.Duration(now))
		} else {
			h += " after " + span(it.Duration(now))
		}
		iv := iterationView{Number: it.Number, Item: it.Item, Title: it.Title, Look: l, Heading: h}
		for _, e := range it.Events {
			msg := e.Message
			if msg == "" {
				msg = strings.ReplaceAll(e.Type, "_", " ")
			}
			iv.Lines = append(iv.Lines, e.Time.Local().Format(time.TimeOnly)+"  "+msg)
		}
		iv.Lines = s.Mask.Strings(iv.Lines)
		out = append(out, iv)
	}
	return out
}

// overview is the list of the watched repositories and their runs.
func (s *Server) overview() []repoView {
	var out []repoView
	for i, o := range s.repos {
		snap := o.poll()
		rv := repoView{Index: i, Name: o.paths.Root, Status: status(snap)}
		rv.Look = runLook(rv.Status)
		if st := snap.State; st != nil {
			rv.RunID = st.RunID
			rv.Passed, rv.Blocked, rv.Total = st.Counts()
			rv.Marked = len(st.Marked())
			if rv.Total > 0 {
				rv.Percent = 100 * rv.Passed / rv.Total
			}
			rv.Iterations = st.Iteration
			rv.Usage = usageLine(st)
			if snap.Active {
				for _, c := range st.Current {
					rv.Running = append(rv.Running, c.Item)
				}
			}
			if !st.UpdatedAt.IsZero() {
				rv.Updated = span(time.Since(st.UpdatedAt)) + " ago"
			}
		}
		out = append(out, rv)
	}
	return out
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if len(s.repos) > 1 && q.Get("repo") == "" {
		s.session(w, r)
		s.render(w, "overview.html", struct{ Repos []repoView }{s.overview()})
		return
	}
	rp, n := s.repoOf(r)
	if rp == nil {
		http.NotFound(w, r)
		return
	}
	s.session(w, r)
	v := s.snapshot(r, rp, n)
	v.Note, v.Query = q.Get("note"), strings.TrimSpace(q.Get("q"))
	if v.Query != "" {
		v.Hits, v.SearchComplete = s.search(rp, v.Query)
	}
	if gs, err := engine.ReadGuidance(rp.paths); err == nil {
		v.Guidance = engine.PendingGuidance(gs, "*")
	}
	v.Iterations = s.iterations(rp.poll())
	if len(s.repos) > 1 {
		v.Repos = s.overview()
		v.Repos[n].Selected = true
	}
	if b, err := os.ReadFile(rp.paths.Progress); err == nil {
		if len(b) > 16<<10 {
			b = b[len(b)-16<<10:]
		}
		v.Progress = string(b)
	}
	if entries, err := os.ReadDir(rp.paths.Dir + "/runs"); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				v.PastRuns = append(v.PastRuns, e.Name())
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(v.PastRuns)))
	}
	s.render(w, "page.html", v)
}

// render writes the page name with v, masked.
func (s *Server) render(w http.ResponseWriter, name string, v any) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, s.Mask.String(b.String()))
}

// liveParts are the parts of the run's page the event stream keeps up
// to date, each a template of that name and an element of that id
// ("items-part" for the items: the table is "items").
var liveParts = []string{"live", "timeline", "dag", "cost", "items"}

// events streams the live parts of the page whenever they change (and
// once at once), each as a server-sent event named after it; with
// ?view=overview, the overview of the repositories. With ?once=1 the
// stream ends after its first message: a client that polls (EventSource
// reconnects by itself).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	rp, n := s.repoOf(r)
	if rp == nil {
		http.NotFound(w, r)
		return
	}
	last := map[string]string{}
	s.stream(w, r, func(w io.Writer) bool {
		parts := map[string]any{}
		if r.URL.Query().Get("view") == "overview" {
			parts["overview"] = struct{ Repos []repoView }{s.overview()}
		} else {
			v := s.snapshot(r, rp, n)
			for _, p := range liveParts {
				parts[p] = v
			}
		}
		wrote := false
		for _, p := range append([]string{"overview"}, liveParts...) {
			data, ok := parts[p]
			if !ok {
				continue
			}
			var b bytes.Buffer
			if err := pages.ExecuteTemplate(&b, p, data); err != nil || b.String() == last[p] {
				continue
			}
			last[p] = b.String()
			fmt.Fprintf(w, "event: %s\n", p)
			for _, l := range strings.Split(s.Mask.String(last[p]), "\n") {
				fmt.Fprintf(w, "data: %s\n", l)
			}
			fmt.Fprint(w, "\n")
			wrote = true
		}
		return wrote
	})
}

// stream answers with server-sent events: send writes what is new and
// says whether it wrote anything, at once and every s.Every until the
// client leaves; with ?once=1 the stream ends after the first send that
// wrote.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, send func(io.Writer) bool) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	once := r.URL.Query().Get("once") == "1"
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		if send(w) {
			fl.Flush()
			if once {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) transcript(w http.ResponseWriter, r *http.Request) {
	text, ok := s.transcriptText(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, text)
}

// transcriptText is the transcript the request names (/N and ?repo),
// masked.
func (s *Server) transcriptText(r *http.Request) (string, bool) {
	rp, _ := s.repoOf(r)
	n, err := strconv.Atoi(r.PathValue("n"))
	if rp == nil || err != nil {
		return "", false
	}
	byIter, _, _ := engine.TranscriptFiles(rp.paths)
	path := byIter[n]
	if path == "" {
		return "", false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return s.Mask.String(string(b)), true
}
