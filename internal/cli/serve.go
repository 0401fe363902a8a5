package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/httpauth"
	"github.com/ralph-loop/ralph/internal/usage"
	"github.com/ralph-loop/ralph/internal/web"
)

// ServeOptions are `ralph serve`'s settings.
type ServeOptions struct {
	IO         *Factory
	Addr       string
	Token      string
	AllowHosts []string
	Watch      []string
}

// newCmdServe builds `ralph serve`.
func newCmdServe(f *Factory, runF func(*ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "A web dashboard of this repository's runs, updated live, with a JSON API and controls",
		Long: `Serve a web page of the repository's run: a timeline of its iterations on
their worker slots (outcome, gate time, the best schedule the DAG allows),
the stories' dependency graph by level, spending against the budget and
stories passed over time, the items with their status, attempts,
dependency level, dependencies and commit, each iteration under way with
the agent's output tail, the last gates, pending guidance, the iterations
(folded, with their events), progress.md, the transcripts and the past
runs, and a search of the events and transcripts. Each story has a page
(/items/ID): its criteria and checks, the acceptance contract and evidence
the judge recorded, every attempt with its verdict, gate output and files,
its transcript as ralph log renders it, its commit (on GitHub when the
remote is there). It updates live by server-sent events from the run's
files, whether the run started before or after the dashboard, here or
elsewhere.

While a run is under way you can pause, resume and stop it from the page;
approve or reject a plan, retry a blocked item and guide the next
iterations: each runs the command line's own command (ralph pause, …
ralph guide). The same is a JSON API: /api/state, /api/items/ID,
/api/timeline, /api/dag, /api/cost, /api/transcripts/N, /api/search?q=,
/api/events (the events as server-sent JSON) and POST /api/control/ACTION.
--watch adds more repositories: / is then an overview of them all
(?repo=N opens one).

Every request needs the token (--token, or one it generates and prints):
open the printed URL once; the page trades the token for a cookie and
drops it from the address (scripts send "Authorization: Bearer TOKEN"). A
control must be a POST and, from a browser, from this page: it carries
the page's CSRF token and no other site's origin. A request that names
another host than an IP address, localhost, this machine's name or one
--allow-host gives is refused: a web page cannot reach the dashboard
through your browser by pointing its own name at your machine. Secrets in
what it shows and searches are masked. It binds 127.0.0.1 by default.`,
		Example: `  ralph serve                                # prints http://127.0.0.1:7332/?token=…
  ralph serve --watch ../api --watch ../web  # three repositories on one page
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:7332/api/state`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runServe(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:7332", "`ADDR` to listen on (host:port)")
	cmd.Flags().StringVar(&opts.Token, "token", "", "`TOKEN` every request must carry (default: generated and printed)")
	cmd.Flags().StringArrayVar(&opts.Watch, "watch", nil, "another repository `DIR` to show on the page (repeatable)")
	cmd.Flags().StringArrayVar(&opts.AllowHosts, "allow-host", nil, "a host `NAME` the dashboard may be reached by, besides IP addresses, localhost and this machine's name (repeatable)")
	return cmd
}

func runServe(ctx context.Context, o *ServeOptions) error {
	f := o.IO
	root, _, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return usage.Errorf("--addr %q: %v", o.Addr, err)
	}
	// The page can act on the run: every request carries a token, on
	// loopback too (another user of this machine reaches 127.0.0.1).
	token := o.Token
	if token == "" {
		if token, err = httpauth.NewToken(); err != nil {
			return err
		}
	}
	srv := web.New(engine.PathsFor(root), token)
	srv.Hosts = o.AllowHosts
	srv.Invoke = invokeInProcess(f)
	srv.Git = f.GitAt
	for _, dir := range o.Watch {
		top, err := f.GitAt(dir).Toplevel(ctx)
		if err != nil {
			return usage.Errorf("--watch %s: not inside a git repository", dir)
		}
		srv.Watch(engine.PathsFor(top))
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return usage.Errorf("--addr %s: %v", o.Addr, err)
	}
	url := "http://" + ln.Addr().String() + "/"
	if token != "" {
		url += "?token=" + token
	}
	fmt.Fprintf(f.IO.Out, "%s\n", url)
	fmt.Fprintf(f.IO.ErrOut, "ralph: the dashboard of %s is at %s (Ctrl-C stops it)\n", root, url)
	return serveHTTP(ctx, ln, srv.Handler())
}

// serveHTTP serves h on ln until ctx ends (ralph serve, ralph mcp --http).
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loopback reports whether host is a loopback address (or localhost).
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
