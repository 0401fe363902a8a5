// Package sandbox confines the processes ralph starts for an agent or a
// gate with bubblewrap: the work tree and what git needs to commit there
// are writable, the rest of the filesystem is read-only, credentials and
// the user's session (its sockets, /tmp, /run, its environment) are out
// of reach, HOME is a private folder of the repository's (the agents'
// and the gates' apart, so that no cache one writes is the other's), the
// processes live in their own pid namespace, and the network is a
// namespace of its own whose only way out is ralph's allowlisting proxy.
// Git commands ralph runs itself are never confined.
//
// An agent's run is one Session (Sandbox.Open, then proc.WithConfiner);
// the gates go through Sandbox.Gates. The judge shows the gates a
// checkout of the commit it judges with a GateView on their context:
//
//	ctx = sandbox.WithGateView(ctx, sandbox.GateView{
//		Tree:     ".ralph/judge/0",                  // shown at the work tree's path, .git read-only inside
//		ReadOnly: []string{tree + "/calc_test.go"},  // EROFS/EBUSY on write, remove, rename
//		Mounts:   []sandbox.Mount{{Src: snapshot, Dst: tree + "/node_modules"}},
//		Env:      []string{"RALPH_JUDGED=" + sha},
//	})
//	results, ok := gates.Run(ctx, tree, list, log) // tree: the work tree, as always
//
// The same fields on Use (Tree, ReadOnly, Mounts, Env) confine an agent's
// session: its protected test files read-only, say.
package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Network modes of a confined command.
const (
	// NetNone: a network namespace with only its own loopback.
	NetNone = "none"
	// NetProxy: as NetNone, plus ralph's proxy for the allowed hosts.
	NetProxy = "proxy"
	// NetHost: the machine's network, unfiltered.
	NetHost = "host"
)

// Policy is what every confined command of a run may do, from the
// `sandbox:` sections of the user's and the project's config.
type Policy struct {
	// Writable are extra writable paths (besides the work tree, git's
	// folders, the private tmp, the caches and the agent's state).
	Writable []string
	// Caches are the language and package caches gates need; nil: the
	// defaults (DefaultCaches).
	Caches []string
	// Hidden are paths covered by an empty folder (or /dev/null for a
	// file), on top of DefaultHidden.
	Hidden []string
	// AllowHosts are hosts ("host" or "host:port") every agent may reach
	// besides its model's API.
	AllowHosts []string
	// AgentNetwork is NetProxy (the default) or NetHost.
	AgentNetwork string
	// GateNetwork is each gate's network by name ("*": every gate's
	// default; NetNone unless set).
	GateNetwork map[string]string
	// GateHosts are hosts a gate may reach through ralph's proxy, by the
	// gate's name ("*": every gate): a registry for `npm audit`.
	GateHosts map[string][]string
	// Env are more variables (NAME, or NAME_* for a family) passed into
	// the sandbox from ralph's environment, besides the allowlist.
	Env []string
	// UserConfig is the user's config file, named in the advice of a
	// failure the sandbox caused (where a setting allows it).
	UserConfig string
	// Protect are read-only paths inside writable ones: ralph's state
	// folder (.ralph) above all.
	Protect []string
	// RecordDir is where the run's record of confinements and denials is
	// kept (.ralph; "" keeps none).
	RecordDir string
}

// DefaultHidden are the credentials (and the sockets of the user's
// session that live beside them) no confined command sees.
var DefaultHidden = []string{"~/.ssh", "~/.gnupg", "~/.aws", "~/.config/gh", "~/.netrc", "~/.git-credentials",
	"~/.docker", "~/.kube", "~/.config/gcloud", "~/.azure", "~/.npmrc", "~/.pypirc", "~/.1password",
	"~/.config/op", "~/.password-store", "~/.local/share/keyrings", "~/.vault-token", "~/.pgpass", "~/.my.cnf",
	"~/.cargo/credentials", "~/.cargo/credentials.toml", "~/.gem/credentials", "~/.terraform.d/credentials.tfrc.json",
	"~/.config/hub", "~/.config/rclone", "~/.colima", "~/.lima"}

// hiddenPaths are the deny list and extra, expanded, plus the session's
// sockets that ralph's environment names (SSH_AUTH_SOCK, TMUX, a D-Bus
// or Docker address, …) and the user's runtime folder: a read-only
// view of a socket still lets a process connect to it, so each is
// covered instead.
func hiddenPaths(extra []string) []string {
	var out []string
	for _, h := range append(append([]string{}, DefaultHidden...), extra...) {
		out = append(out, expand(h))
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		out = append(out, filepath.Clean(d))
	}
	for _, kv := range os.Environ() {
		_, v, _ := strings.Cut(kv, "=")
		for _, p := range socketPaths(v) {
			if st, err := os.Stat(p); err == nil && st.Mode()&os.ModeSocket != 0 {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// socketPaths are the absolute paths a variable's value may name a
// socket by: the value itself, or the path in "unix:path=…", "unix://…",
// "PATH,pid,n" (TMUX) or "PATH:pid:n" (GPG_AGENT_INFO).
func socketPaths(v string) []string {
	var out []string
	for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' }) {
		part = strings.TrimPrefix(part, "unix://")
		part = strings.TrimPrefix(part, "unix:")
		part = strings.TrimPrefix(part, "path=")
		if i := strings.IndexByte(part, ':'); i > 0 {
			part = part[:i]
		}
		if filepath.IsAbs(part) {
			out = append(out, filepath.Clean(part))
		}
	}
	return out
}

// DefaultCaches are the language and package caches a gate may fill.
func DefaultCaches() []string {
	caches := []string{"~/.npm", "~/.cache/pip", "~/.cache/yarn", "~/.cache/pnpm", "~/.local/share/pnpm/store",
		"~/.cargo/registry", "~/.cargo/git", "~/.m2/repository", "~/.gradle/caches", "~/.bun/install/cache"}
	if v := os.Getenv("GOCACHE"); v != "" {
		caches = append(caches, v)
	} else if d, err := os.UserCacheDir(); err == nil {
		caches = append(caches, filepath.Join(d, "go-build"))
	}
	if v := os.Getenv("GOMODCACHE"); v != "" {
		caches = append(caches, v)
	} else if v := os.Getenv("GOPATH"); v != "" {
		caches = append(caches, filepath.Join(strings.Split(v, string(os.PathListSeparator))[0], "pkg", "mod"))
	} else {
		caches = append(caches, "~/go/pkg/mod")
	}
	return caches
}

// ModelHosts are the hosts an agent adapter talks to when no base URL
// points it elsewhere.
func ModelHosts(adapter string) []string {
	switch adapter {
	case "claude":
		return []string{"api.anthropic.com", "console.anthropic.com"}
	case "codex":
		return []string{"api.openai.com", "chatgpt.com", "auth.openai.com"}
	case "gemini":
		return []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"}
	case "opencode":
		return []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "models.dev", "opencode.ai"}
	case "amp":
		return []string{"ampcode.com"}
	case "copilot":
		return []string{"api.githubcopilot.com", "api.individual.githubcopilot.com", "api.business.githubcopilot.com",
			"api.enterprise.githubcopilot.com", "api.github.com", "github.com"}
	}
	return nil
}

// StateDirs are where an agent CLI keeps its own state (login, sessions,
// settings): bound writable into its sandbox, never copied (a login
// refreshed during a run must survive it), made first when missing. A
// path ending in ".json" is a file, bound only when it exists. Its
// settings are guarded apart (SettingsOf). Gates see none of it.
// AllStateDirs are every adapter's.
func StateDirs(adapter string) []string {
	xdg := func(env, def, sub string) string {
		if v := os.Getenv(env); v != "" {
			return filepath.Join(v, sub)
		}
		return filepath.Join(def, sub)
	}
	switch adapter {
	case "claude":
		dirs := []string{"~/.claude", "~/.claude.json"}
		if v := os.Getenv("CLAUDE_CONFIG_DIR"); v != "" {
			dirs = append(dirs, v)
		}
		return dirs
	case "codex":
		if v := os.Getenv("CODEX_HOME"); v != "" {
			return []string{v}
		}
		return []string{"~/.codex"}
	case "gemini":
		return []string{"~/.gemini"}
	case "opencode":
		return []string{xdg("XDG_DATA_HOME", "~/.local/share", "opencode"), xdg("XDG_CONFIG_HOME", "~/.config", "opencode"),
			xdg("XDG_CACHE_HOME", "~/.cache", "opencode"), xdg("XDG_STATE_HOME", "~/.local/state", "opencode")}
	case "amp":
		return []string{xdg("XDG_CONFIG_HOME", "~/.config", "amp"), xdg("XDG_DATA_HOME", "~/.local/share", "amp"),
			xdg("XDG_CACHE_HOME", "~/.cache", "amp")}
	case "copilot":
		// Its settings, sessions and logs; and the package its binary
		// unpacks on first start.
		home := "~/.copilot"
		if v := os.Getenv("COPILOT_HOME"); v != "" {
			home = v
		}
		return []string{home, xdg("XDG_CACHE_HOME", "~/.cache", "copilot")}
	}
	return nil
}

// Adapters are the agent CLIs whose state the sandbox knows.
var Adapters = []string{"claude", "codex", "gemini", "opencode", "amp", "copilot"}

// AllStateDirs are the state of every adapter, expanded.
func AllStateDirs() []string {
	var out []string
	for _, a := range Adapters {
		for _, p := range StateDirs(a) {
			out = append(out, expand(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Credentials are where each agent CLI keeps its login: an agent sees
// only its own CLI's, a gate none (the rest of another CLI's state stays
// readable, like the rest of the home).
func Credentials(adapter string) []string {
	xdg := func(env, def, sub string) string {
		if v := os.Getenv(env); v != "" {
			return filepath.Join(v, sub)
		}
		return filepath.Join(def, sub)
	}
	codex := "~/.codex"
	if v := os.Getenv("CODEX_HOME"); v != "" {
		codex = v
	}
	claude := "~/.claude"
	if v := os.Getenv("CLAUDE_CONFIG_DIR"); v != "" {
		claude = v
	}
	var out []string
	switch adapter {
	case "claude":
		out = []string{filepath.Join(claude, ".credentials.json"), "~/.claude.json"}
	case "codex":
		out = []string{filepath.Join(codex, "auth.json")}
	case "gemini":
		out = []string{"~/.gemini/oauth_creds.json", "~/.gemini/google_accounts.json", "~/.gemini/.env"}
	case "opencode":
		out = []string{xdg("XDG_DATA_HOME", "~/.local/share", "opencode/auth.json")}
	case "amp":
		out = []string{xdg("XDG_DATA_HOME", "~/.local/share", "amp/secrets.json"), xdg("XDG_CONFIG_HOME", "~/.config", "amp/settings.json")}
	}
	for i, p := range out {
		out[i] = expand(p)
	}
	return out
}

// BaseURLEnv are the variables that point an agent at another endpoint:
// their hosts are allowed as the model's API.
var BaseURLEnv = []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "GEMINI_BASE_URL",
	"RALPH_CLAUDE_BASE_URL", "RALPH_CODEX_BASE_URL", "RALPH_OPENCODE_BASE_URL", "RALPH_GEMINI_BASE_URL", "RALPH_AMP_BASE_URL", "RALPH_NATIVE_BASE_URL",
	"RALPH_COPILOT_BASE_URL", "COPILOT_PROVIDER_BASE_URL"}

// HostOf is the host:port a base URL (or a bare host) names; "" when it
// names none.
func HostOf(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	scheme := "https"
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, s = strings.ToLower(s[:i]), s[i+3:]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return ""
	}
	if _, _, err := net.SplitHostPort(s); err == nil {
		return strings.ToLower(s)
	}
	port := "443"
	if scheme == "http" {
		port = "80"
	}
	return strings.ToLower(net.JoinHostPort(strings.Trim(s, "[]"), port))
}

// allowlist is a set of host:port, and of hosts allowed on any port
// (written without a port).
type allowlist struct {
	exact map[string]bool
	any   map[string]bool
}

func newAllowlist(hosts []string) allowlist {
	a := allowlist{exact: map[string]bool{}, any: map[string]bool{}}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		if strings.Contains(h, "://") {
			a.exact[HostOf(h)] = true
			continue
		}
		if _, _, err := net.SplitHostPort(h); err == nil {
			a.exact[h] = true
			continue
		}
		a.any[strings.Trim(h, "[]")] = true
	}
	return a
}

func (a allowlist) allows(hostport string) bool {
	hostport = strings.ToLower(hostport)
	if a.exact[hostport] {
		return true
	}
	h, _, err := net.SplitHostPort(hostport)
	return err == nil && a.any[h]
}

func (a allowlist) empty() bool { return len(a.exact) == 0 && len(a.any) == 0 }

// list renders the allowlist for notes and doctor.
func (a allowlist) list() []string {
	var out []string
	for h := range a.exact {
		out = append(out, h)
	}
	for h := range a.any {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// loopback lists the allowed host:ports on this machine's loopback: a
// confined command reaches them at the same address (its own loopback
// forwards there), since the CLIs do not send loopback traffic through a
// proxy.
func (a allowlist) loopback() []string {
	var out []string
	for hp := range a.exact {
		h, _, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(h); (ip != nil && ip.IsLoopback() && ip.To4() != nil) || h == "localhost" {
			out = append(out, hp)
		}
	}
	sort.Strings(out)
	return out
}

// expand resolves a leading ~ and makes p absolute.
func expand(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// CheckNetwork validates a network mode from config.
func CheckNetwork(mode string, gate bool) error {
	switch mode {
	case "", NetProxy, NetHost:
		return nil
	case NetNone:
		if gate {
			return nil
		}
	}
	if gate {
		return fmt.Errorf("network %q: use none, proxy or host", mode)
	}
	return fmt.Errorf("network %q: use proxy or host", mode)
}

// Expand is a path as the sandbox reads it: ~ resolved, absolute.
func Expand(p string) string { return expand(p) }
