// Package web is the web dashboard of a repository's runs (`ralph
// serve`): Go templates with their assets embedded, live updates by
// server-sent events, a JSON API (api.go) and controls (control.go). Like
// the terminal dashboard it reads the run's files through dashboard.Feed
// and is never a second engine: a control runs the command line's own
// command in process (Server.Invoke, handed in by `ralph serve`), as the
// MCP server's tools do.
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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/dashboard"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/httpauth"
	"github.com/ralph-loop/ralph/internal/secret"
)

//go:embed templates/page.html
var files embed.FS

var page = template.Must(template.New("page.html").Funcs(template.FuncMap{"ctl": ctl}).ParseFS(files, "templates/page.html"))

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
// (Watch): requests name theirs with ?repo=N (0, the first, by default).
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

	repos   []*repo
	csrfKey []byte // the per-session CSRF tokens' key, new with each server
}

// repo is one repository the server watches.
type repo struct {
	paths engine.Paths
	mu    sync.Mutex // serialises the feed's incremental reads
	feed  *dashboard.Feed
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

// Handler routes: / (the page), /events (server-sent events of the live
// part), /transcript/N, the JSON API under /api/ and the controls (POST
// /api/control/ACTION), all behind the Host check and the token when
// there is one.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
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
	return rp.feed.Poll()
}

// CookieName is the cookie that carries the dashboard's token.
const CookieName = "ralph_dashboard"

// view is what the templates render.
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
	Questions   []engine.Question
	Asking      []engine.Question
	Paused      bool
	Active      bool
	State       *engine.State
	Status      string
	Passed      int
	Total       int
	Usage       string
	Items       []itemView
	Workers     []workerView
	Gates       []string
	Transcripts []int
	Progress    string
	PastRuns    []string
}

type itemView struct {
	ID, Title, Status, Deps, Commit string
	Attempts, Level                 int
	Waiting                         bool   // its plan waits for a decision
	Asked                           string // its questions that wait for an answer
}

// repoView is one watched repository in the list of them.
type repoView struct {
	Index         int
	Name, Status  string
	Passed, Total int
	Selected      bool
}

type workerView struct {
	Item, Role, Phase, Elapsed string
	Iteration, Attempt, Queue  int
	Tail                       []string
}

func (s *Server) snapshot(r *http.Request, rp *repo, n int) view {
	snap := rp.poll()
	v := view{Repo: n, RepoName: rp.paths.Root, State: snap.State, Gates: snap.Gates, Paused: snap.Paused, Active: snap.Active, CSRF: s.csrfOf(r)}
	st := snap.State
	if st == nil {
		return v
	}
	v.Passed, _, v.Total = st.Counts()
	v.Status = status(snap)
	v.Waiting = engine.Waiting(st)
	v.Questions = snap.Questions
	asked := map[string][]string{}
	for _, q := range snap.Questions {
		if q.Waiting() {
			v.Asking = append(v.Asking, q)
			asked[q.Item] = append(asked[q.Item], q.ID)
		}
	}
	if u := st.Usage; u.InputTokens+u.OutputTokens > 0 || u.CostUSD > 0 {
		v.Usage = fmt.Sprintf("%d tokens, $%.2f", u.InputTokens+u.OutputTokens, u.CostUSD)
	}
	for _, id := range st.Order {
		is := st.Items[id]
		commit := is.Commit
		if len(commit) > 8 {
			commit = commit[:8]
		}
		v.Items = append(v.Items, itemView{ID: id, Title: is.Title, Status: is.Status, Attempts: is.Attempts, Level: snap.Levels[id], Deps: snap.Deps[id], Commit: commit,
			Waiting: slices.Contains(v.Waiting, id), Asked: strings.Join(asked[id], ", ")})
	}
	if snap.Active {
		for _, c := range st.Current {
			role := c.Role
			if role == "" {
				role = "worker"
			}
			v.Workers = append(v.Workers, workerView{Item: c.Item, Iteration: c.Iteration, Attempt: c.Attempt, Role: role, Phase: c.Phase,
				Elapsed: time.Since(c.StartedAt).Round(time.Second).String(), Queue: c.QueuePos, Tail: snap.Tails[c.Item]})
		}
	}
	for n := 1; n <= st.Iteration; n++ {
		v.Transcripts = append(v.Transcripts, n)
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

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	rp, n := s.repoOf(r)
	if rp == nil {
		http.NotFound(w, r)
		return
	}
	s.session(w, r)
	v := s.snapshot(r, rp, n)
	q := r.URL.Query()
	v.Note, v.Query = q.Get("note"), strings.TrimSpace(q.Get("q"))
	if v.Query != "" {
		v.Hits, v.SearchComplete = s.search(rp, v.Query)
	}
	if gs, err := engine.ReadGuidance(rp.paths); err == nil {
		v.Guidance = engine.PendingGuidance(gs, "*")
	}
	v.Iterations = s.iterations(rp)
	if len(s.repos) > 1 {
		for i, o := range s.repos {
			snap := o.poll()
			rv := repoView{Index: i, Name: o.paths.Root, Status: status(snap), Selected: i == n}
			if snap.State != nil {
				rv.Passed, _, rv.Total = snap.State.Counts()
			}
			v.Repos = append(v.Repos, rv)
		}
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
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, s.Mask.String(b.String()))
}

// events streams the live part of the page whenever it changes (and once
// at once). With ?once=1 the stream ends after its first message: a client
// that polls (EventSource reconnects by itself).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	rp, n := s.repoOf(r)
	if rp == nil {
		http.NotFound(w, r)
		return
	}
	var last string
	s.stream(w, r, func(w io.Writer) bool {
		var b bytes.Buffer
		if err := page.ExecuteTemplate(&b, "live", s.snapshot(r, rp, n)); err != nil || b.String() == last {
			return false
		}
		last = b.String()
		fmt.Fprint(w, "event: live\n")
		for _, l := range strings.Split(s.Mask.String(last), "\n") {
			fmt.Fprintf(w, "data: %s\n", l)
		}
		fmt.Fprint(w, "\n")
		return true
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
