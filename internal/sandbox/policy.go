// Package sandbox confines the processes ralph starts for an agent or a
// gate with bubblewrap: the work tree and what git needs to commit there
// are writable, the rest of the filesystem is read-only, credentials are
// hidden, the processes live in their own pid namespace, and the network
// is a namespace of its own whose only way out is ralph's allowlisting
// proxy. Git commands ralph runs itself are never confined.
package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
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
	// Protect are read-only paths inside writable ones: ralph's state
	// folder (.ralph) above all.
	Protect []string
	// RecordDir is where the run's record of confinements and denials is
	// kept (.ralph; "" keeps none).
	RecordDir string
}

// DefaultHidden are the credentials no confined command sees.
var DefaultHidden = []string{"~/.ssh", "~/.gnupg", "~/.aws", "~/.config/gh", "~/.netrc", "~/.git-credentials",
	"~/.docker/config.json", "~/.kube", "~/.config/gcloud", "~/.azure", "~/.npmrc", "~/.pypirc"}

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
// settings): bound writable into its sandbox, never copied (see README),
// made first when missing (the CLI could not make them in a read-only
// home). A path ending in ".json" is a file, bound only when it exists.
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
