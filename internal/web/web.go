// Package web is the read-only web dashboard of a repository's runs
// (`ralph serve`): Go templates with their assets embedded, live updates
// by server-sent events. Like the terminal dashboard it reads the run's
// files through dashboard.Feed; it never writes and never runs anything.
package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
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

var page = template.Must(template.ParseFS(files, "templates/page.html"))

// Server serves the dashboard of the repository at Paths.
type Server struct {
	Paths engine.Paths
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

	mu   sync.Mutex // serialises the feed's incremental reads
	feed *dashboard.Feed
}

// New serves the repository at p.
func New(p engine.Paths, token string) *Server {
	return &Server{Paths: p, Token: token, Every: 500 * time.Millisecond, feed: dashboard.NewFeed(p), Mask: secret.FromEnv()}
}

// Handler routes: / (the page), /events (server-sent events),
// /transcript/N, all behind the Host check and the token when there is
// one.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /transcript/{n}", s.transcript)
	g := &httpauth.Guard{Token: s.Token, Cookie: CookieName, Hosts: s.Hosts}
	return g.Wrap(mux)
}

// CookieName is the cookie that carries the dashboard's token.
const CookieName = "ralph_dashboard"

// view is what the templates render.
type view struct {
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
}

type workerView struct {
	Item, Role, Phase, Elapsed string
	Iteration, Attempt, Queue  int
	Tail                       []string
}

func (s *Server) snapshot(r *http.Request) view {
	s.mu.Lock()
	snap := s.feed.Poll()
	s.mu.Unlock()
	v := view{State: snap.State, Gates: snap.Gates}
	st := snap.State
	if st == nil {
		return v
	}
	v.Passed, _, v.Total = st.Counts()
	v.Status = st.Status
	if st.Status == engine.StatusRunning && !snap.Active {
		v.Status = "interrupted"
	}
	if snap.Paused && snap.Active {
		v.Status = "paused"
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
		v.Items = append(v.Items, itemView{ID: id, Title: is.Title, Status: is.Status, Attempts: is.Attempts, Level: snap.Levels[id], Deps: snap.Deps[id], Commit: commit})
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

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	v := s.snapshot(r)
	if b, err := os.ReadFile(s.Paths.Progress); err == nil {
		if len(b) > 16<<10 {
			b = b[len(b)-16<<10:]
		}
		v.Progress = string(b)
	}
	if entries, err := os.ReadDir(s.Paths.Dir + "/runs"); err == nil {
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
	once := r.URL.Query().Get("once") == "1"
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	var last string
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		var b bytes.Buffer
		if err := page.ExecuteTemplate(&b, "live", s.snapshot(r)); err == nil && b.String() != last {
			last = b.String()
			live := s.Mask.String(last)
			fmt.Fprint(w, "event: live\n")
			for _, l := range strings.Split(live, "\n") {
				fmt.Fprintf(w, "data: %s\n", l)
			}
			fmt.Fprint(w, "\n")
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
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	byIter, _, _ := engine.TranscriptFiles(s.Paths)
	path := byIter[n]
	if path == "" {
		http.NotFound(w, r)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, s.Mask.String(string(b)))
}
