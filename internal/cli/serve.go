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
}

// newCmdServe builds `ralph serve`.
func newCmdServe(f *Factory, runF func(*ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "A read-only web dashboard of this repository's runs, updated live",
		Long: `Serve a web page of the repository's run: the items with their status,
attempts, dependency level and dependencies, each iteration under way with
the agent's output tail, the merge queue, the last gates, tokens and cost,
progress.md, the transcripts and the past runs. It updates live by
server-sent events from the run's files (the page works without
JavaScript, without the live updates) and never writes anything.

It binds 127.0.0.1 by default. Bound to any other address it requires a
token on every request, the event stream included (--token, or one it
generates and prints): open the printed URL once; the page trades the token
for a cookie and drops it from the address (scripts send "Authorization:
Bearer TOKEN"). A request that names another host than an IP address,
localhost, this machine's name or one --allow-host gives is refused: a web
page cannot reach the dashboard through your browser by pointing its own
name at your machine. Secrets in what it shows are masked.`,
		Example: `  ralph serve                      # http://127.0.0.1:7332/
  ralph serve --addr 0.0.0.0:7332  # prints the URL with its token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runServe(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:7332", "`ADDR` to listen on (host:port)")
	cmd.Flags().StringVar(&opts.Token, "token", "", "`TOKEN` every request must carry; generated when --addr is not a loopback address")
	cmd.Flags().StringArrayVar(&opts.AllowHosts, "allow-host", nil, "a host `NAME` the dashboard may be reached by, besides IP addresses, localhost and this machine's name (repeatable)")
	return cmd
}

func runServe(ctx context.Context, o *ServeOptions) error {
	f := o.IO
	root, _, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return usage.Errorf("--addr %q: %v", o.Addr, err)
	}
	token := o.Token
	if token == "" && !loopback(host) {
		if token, err = httpauth.NewToken(); err != nil {
			return err
		}
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
	srv := web.New(engine.PathsFor(root), token)
	srv.Hosts = o.AllowHosts
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
