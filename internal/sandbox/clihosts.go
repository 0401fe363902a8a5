package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// CLIHost is a host an agent CLI's own configuration sends it to, and
// where that is set.
type CLIHost struct {
	Host string // host:port
	From string // "~/.codex/config.toml (model_provider azure)"
}

// CLIHosts are the hosts an agent CLI's own configuration sends it to
// when ralph gives it no base URL: a Codex model provider's base_url,
// Claude Code's ANTHROPIC_BASE_URL in its settings, opencode's
// providers' baseURL, Gemini CLI's GOOGLE_GEMINI_BASE_URL in its .env.
// Each must be allowed (allow_hosts in the user's config) or every
// iteration fails at ralph's proxy.
func CLIHosts(adapter string) []CLIHost {
	var out []CLIHost
	add := func(url, from string) {
		if h := HostOf(url); h != "" {
			out = append(out, CLIHost{Host: h, From: from})
		}
	}
	switch adapter {
	case "codex":
		dir := "~/.codex"
		if v := os.Getenv("CODEX_HOME"); v != "" {
			dir = v
		}
		p := expand(filepath.Join(dir, "config.toml"))
		var cfg struct {
			ModelProvider  string `toml:"model_provider"`
			ModelProviders map[string]struct {
				BaseURL string `toml:"base_url"`
			} `toml:"model_providers"`
		}
		if b, err := os.ReadFile(p); err == nil && toml.Unmarshal(b, &cfg) == nil {
			if pr, ok := cfg.ModelProviders[cfg.ModelProvider]; ok {
				add(pr.BaseURL, tilde(p)+" (model_provider "+cfg.ModelProvider+")")
			}
		}
	case "claude":
		dir := "~/.claude"
		if v := os.Getenv("CLAUDE_CONFIG_DIR"); v != "" {
			dir = v
		}
		p := expand(filepath.Join(dir, "settings.json"))
		var cfg struct {
			Env map[string]string `json:"env"`
		}
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &cfg) == nil {
			for _, k := range []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL"} {
				add(cfg.Env[k], tilde(p)+" (env "+k+")")
			}
		}
	case "opencode":
		xdg := "~/.config"
		if v := os.Getenv("XDG_CONFIG_HOME"); v != "" {
			xdg = v
		}
		for _, name := range []string{"opencode.json", "config.json"} {
			p := expand(filepath.Join(xdg, "opencode", name))
			var cfg struct {
				Provider map[string]struct {
					Options struct {
						BaseURL string `json:"baseURL"`
					} `json:"options"`
				} `json:"provider"`
			}
			if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &cfg) == nil {
				names := make([]string, 0, len(cfg.Provider))
				for n := range cfg.Provider {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					add(cfg.Provider[n].Options.BaseURL, tilde(p)+" (provider "+n+")")
				}
			}
		}
	case "gemini":
		p := expand("~/.gemini/.env")
		if b, err := os.ReadFile(p); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "GOOGLE_GEMINI_BASE_URL="); ok {
					add(strings.Trim(v, `"'`), tilde(p))
				}
			}
		}
	}
	return out
}

// Allowed reports whether hostport is among hosts (host or host:port
// entries, as allow_hosts takes them).
func Allowed(hosts []string, hostport string) bool { return newAllowlist(hosts).allows(hostport) }

// tilde writes a path in the user's home with ~.
func tilde(p string) string {
	if home, err := os.UserHomeDir(); err == nil && strings.HasPrefix(p, home+"/") {
		return "~" + strings.TrimPrefix(p, home)
	}
	return p
}
