package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/hook"
	"github.com/ralph-loop/ralph/internal/httpauth"
	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/mcp"
	"github.com/ralph-loop/ralph/internal/usage"
)

// MCPOptions are `ralph mcp`'s settings.
type MCPOptions struct {
	IO         *Factory
	HTTP       string
	AllowRepos []string
	AllowHosts []string
}

// newCmdMCP builds `ralph mcp`.
func newCmdMCP(f *Factory, runF func(*MCPOptions) error) *cobra.Command {
	opts := &MCPOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve ralph's tools to an agent over MCP (stdio, or streamable HTTP with --http)",
		Long: `Run ralph as an MCP server, so that an agent in one session can start, watch
and steer a Ralph loop. Tools: run (starts ` + "`ralph run`" + ` in the background in a
repository and returns its run id), status (all_passed, ready_to_merge,
feature_branch, passed, total, each item, the iteration, the stop reason),
create_prd, validate_prd, stop, approve, task_add, task_next, task_complete,
task_list, tail (the last events). Resources: ralph://progress,
ralph://state and ralph://transcript/{iteration} of the repository the
server runs in. Every tool runs the same command code as the CLI: its
errors are tool errors with the CLI's message and exit code.

Over HTTP (--http) every request must carry the server's token as
"Authorization: Bearer TOKEN": generated on first use, printed once and kept
in .ralph/mcp-token (readable by you only). Requests naming another host
(a DNS-rebinding page) or coming from a web page of another origin are
refused. The tools act on this repository only, and on those --allow-repo
names. Over stdio the client is your own agent: nothing changes.

Install it in an agent's MCP configuration with ` + "`ralph mcp install`" + `.`,
		Example: `  ralph mcp                       # stdio, for an agent's MCP client
  ralph mcp --http 127.0.0.1:7331  # streamable HTTP at http://127.0.0.1:7331/mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runMCP(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.HTTP, "http", "", "serve streamable HTTP on `ADDR` (path /mcp) instead of stdio")
	cmd.Flags().StringArrayVar(&opts.AllowRepos, "allow-repo", nil, "with --http: another repository (`DIR`) the tools may act on (repeatable)")
	cmd.Flags().StringArrayVar(&opts.AllowHosts, "allow-host", nil, "with --http: a host `NAME` clients may reach the server by, besides IP addresses, localhost and this machine's name (repeatable)")
	cmd.AddCommand(newCmdMCPInstall(f, nil))
	return cmd
}

func runMCP(ctx context.Context, o *MCPOptions) error {
	wd, err := o.IO.Getwd()
	if err != nil {
		return err
	}
	opts := MCPServerOptions(o.IO, wd)
	if o.HTTP == "" {
		if len(o.AllowRepos)+len(o.AllowHosts) > 0 {
			return usage.Errorf("--allow-repo and --allow-host go with --http (over stdio the tools act where the client says)")
		}
		return mcp.ServeStdio(ctx, mcp.NewServer(opts))
	}
	// Over HTTP the caller is whoever reaches the port: it proves it
	// holds the token, and acts on the repositories named here only.
	opts.Repos = []string{wd}
	for _, r := range o.AllowRepos {
		abs, err := filepath.Abs(r)
		if err != nil {
			return err
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return usage.Errorf("--allow-repo %s: not a folder", r)
		}
		opts.Repos = append(opts.Repos, abs)
	}
	tokenFile := filepath.Join(engine.PathsFor(wd).Dir, "mcp-token")
	token, created, err := httpauth.LoadOrCreateToken(tokenFile)
	if err != nil {
		return fmt.Errorf("the MCP server's token (%s): %w", tokenFile, err)
	}
	ln, err := net.Listen("tcp", o.HTTP)
	if err != nil {
		return usage.Errorf("--http %s: %v", o.HTTP, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.HTTPHandler(mcp.NewServer(opts)))
	guard := &httpauth.Guard{Token: token, Hosts: o.AllowHosts}
	errOut := o.IO.IO.ErrOut
	fmt.Fprintf(errOut, "ralph: MCP over streamable HTTP at http://%s/mcp\n", ln.Addr())
	if created {
		fmt.Fprintf(errOut, "ralph: token (generated, shown once, kept in %s): %s\n", tokenFile, token)
	} else {
		fmt.Fprintf(errOut, "ralph: token in %s\n", tokenFile)
	}
	fmt.Fprintf(errOut, "ralph: clients send it as the header \"Authorization: Bearer TOKEN\"\n")
	return serveHTTP(ctx, ln, guard.Wrap(mux))
}

// MCPServerOptions are the MCP server's over the repository at dir: its
// tools run this command line's commands in process, with its exit codes.
func MCPServerOptions(f *Factory, dir string) mcp.Options {
	return mcp.Options{Dir: dir, Version: versionString(), Invoke: invokeInProcess(f), ExitCode: exitCode, Stop: requestStop}
}

// invokeInProcess runs a ralph command in process, in repo, with captured
// output: the same code, messages and exit codes as the CLI.
func invokeInProcess(f *Factory) func(ctx context.Context, repo string, args ...string) (string, error) {
	return func(ctx context.Context, repo string, args ...string) (string, error) {
		streams, _, out, errb := iostreams.Test()
		cmd := newCmdRoot(&Factory{IO: streams, Getwd: func() (string, error) { return repo, nil }, Runner: f.Runner})
		cmd.SetArgs(args)
		_, cerr := cmd.ExecuteContextC(ctx)
		if code := exitCode(cerr); code != exitOK {
			msg := strings.TrimSpace(errb.String())
			var se *statusError
			if cerr != nil && !errors.As(cerr, &se) {
				msg = strings.TrimSpace(strings.TrimSpace(msg) + "\n" + cerr.Error())
			}
			return out.String(), &mcp.ToolError{Code: code, Msg: msg}
		}
		return out.String(), nil
	}
}

// MCPInstallOptions are `ralph mcp install`'s settings.
type MCPInstallOptions struct {
	IO                              *Factory
	Claude, Codex, Gemini, Opencode bool
	Scope                           string
	Command                         string
}

// newCmdMCPInstall builds `ralph mcp install`.
func newCmdMCPInstall(f *Factory, runF func(*MCPInstallOptions) error) *cobra.Command {
	opts := &MCPInstallOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "install [--claude] [--codex] [--gemini] [--opencode] [--scope project|user] [--command PROGRAM]",
		Short: "Add ralph's MCP server to an agent's MCP client configuration",
		Long: `Add ralph's MCP server (` + "`ralph mcp`" + `, over stdio) to the agents' configuration,
keeping every other key and server. The command written is this binary's
absolute path, as ` + "`ralph hook install`" + ` writes it, so the server starts
whatever the agent's PATH holds (a bin/ralph built in a clone included);
--command ralph writes the bare name instead, for a project file a team
shares with ralph on each machine's PATH.

Each agent's file, in the scope it reads MCP servers from by default:

  Claude Code  project: .mcp.json               user: ~/.claude.json        mcpServers.ralph
  Codex        user only: ~/.codex/config.toml ($CODEX_HOME)                 [mcp_servers.ralph]
  Gemini CLI   user: ~/.gemini/settings.json (project: .gemini/settings.json) mcpServers.ralph
  opencode     project: opencode.json            user: ~/.config/opencode/opencode.json  mcp.ralph

Without --scope, Claude Code and opencode get the project's file, Codex and
Gemini CLI the user's: Codex reads MCP servers from its user config only,
and Gemini CLI offered none of a project's servers to its model in headless
runs, so --gemini --scope project warns. Running it twice changes nothing.
A configuration file that is not valid JSON (or TOML) is an error naming
file:line:col, and nothing is written.`,
		Example: `  ralph mcp install --claude
  ralph mcp install --codex
  ralph mcp install --gemini --opencode
  ralph mcp install --claude --command ralph   # a team's .mcp.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return mcpInstall(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&opts.Claude, "claude", false, "Claude Code (the default when no agent is named)")
	fl.BoolVar(&opts.Codex, "codex", false, "Codex (user scope)")
	fl.BoolVar(&opts.Gemini, "gemini", false, "Gemini CLI (user scope by default)")
	fl.BoolVar(&opts.Opencode, "opencode", false, "opencode")
	fl.StringVar(&opts.Scope, "scope", "", "`SCOPE`: project (this repository) or user (your home folder); default: each agent's own (see above)")
	fl.StringVar(&opts.Command, "command", "", "the `PROGRAM` the agent starts as ralph (default: this binary's absolute path)")
	return cmd
}

// mcpDefaultScope is the scope an agent reads ralph's server from when
// --scope is not given.
func mcpDefaultScope(agent string) string {
	if agent == hook.Codex || agent == hook.Gemini {
		return hook.ScopeUser
	}
	return hook.ScopeProject
}

func mcpInstall(ctx context.Context, o *MCPInstallOptions) error {
	f := o.IO
	var agents []string
	for _, a := range []struct {
		on   bool
		name string
	}{{o.Claude, hook.Claude}, {o.Codex, hook.Codex}, {o.Gemini, hook.Gemini}, {o.Opencode, hook.Opencode}} {
		if a.on {
			agents = append(agents, a.name)
		}
	}
	if len(agents) == 0 {
		agents = []string{hook.Claude}
	}
	exe, err := mcpCommand(o.Command)
	if err != nil {
		return err
	}
	argv := []string{exe, "mcp"}
	wd, _ := f.Getwd()
	for _, a := range agents {
		scope := o.Scope
		if scope == "" {
			scope = mcpDefaultScope(a)
		}
		root, home, err := configRoots(ctx, f, scope)
		if err != nil {
			return err
		}
		path, err := hook.MCPConfigPath(a, scope, root, home)
		if err != nil {
			return usage.Errorf("%v", err)
		}
		if a == hook.Gemini && scope == hook.ScopeProject {
			fmt.Fprintln(f.IO.ErrOut, "ralph: warning: Gemini CLI offered the model none of a project's MCP servers (.gemini/settings.json) in headless runs; --scope user, the default for --gemini, works")
		}
		res, err := hook.InstallMCP(a, path, argv)
		if err != nil {
			return err
		}
		if res.Changed {
			fmt.Fprintf(f.IO.ErrOut, "wrote   ralph's MCP server (%s mcp) into %s\n", exe, pipelineRel(wd, path))
		} else {
			fmt.Fprintf(f.IO.ErrOut, "kept    %s (ralph's MCP server is already there)\n", pipelineRel(wd, path))
		}
	}
	return nil
}

// mcpCommand is the program an MCP client starts for ralph's server: the
// one given, else this binary by its absolute path (as the Stop hook's),
// so the server starts whatever PATH the agent has.
func mcpCommand(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	exe, err := mcp.Executable()
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return exe, nil
}
