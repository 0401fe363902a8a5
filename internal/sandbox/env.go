package sandbox

import (
	"slices"
	"strings"
)

// The environment a confined command gets is built from an allowlist,
// not a deny list: a variable not named here (or in the user's `env:`)
// stays outside. That is how the user's session stays out: TMUX,
// SSH_AUTH_SOCK, GPG_AGENT_INFO, DBUS_SESSION_BUS_ADDRESS, DISPLAY,
// WAYLAND_DISPLAY, XDG_RUNTIME_DIR, DOCKER_HOST, KUBECONFIG and every
// token the user keeps in their shell (GITHUB_TOKEN, AWS_*) are simply
// never named.

// envNames are variables every confined command gets as they are.
var envNames = []string{
	"PATH", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR",
	"CLICOLOR", "CLICOLOR_FORCE", "CI", "PWD", "EDITOR", "VISUAL", "PAGER", "DEBIAN_FRONTEND", "MAKEFLAGS",
	"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_DIRS", "XDG_DATA_DIRS",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
	"CC", "CXX", "AR", "LD", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "PKG_CONFIG_PATH", "LIBRARY_PATH",
	"CPATH", "C_INCLUDE_PATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "JAVA_HOME", "JAVA_OPTS", "M2_HOME",
	"RUSTFLAGS", "PERL5LIB", "IS_SANDBOX",
}

// envPrefixes are families of variables every confined command gets:
// ralph's own, git's identity and configuration, and the toolchains'.
var envPrefixes = []string{
	"RALPH_", "LC_", "GIT_", "CGO_", "NODE_", "NPM_CONFIG_", "npm_config_", "NVM_", "YARN_", "PNPM_",
	"BUN_", "DENO_", "COREPACK_", "PYTHON", "PYENV", "PIP_", "UV_", "POETRY_", "PIPX_", "CONDA_", "CARGO_",
	"RUSTUP_", "RUSTC", "MAVEN_", "GRADLE_", "JDK_", "DOTNET_", "GEM_", "BUNDLE_", "RUBY", "RBENV_", "PERL_",
	"ASDF_", "MISE_", "PLAYWRIGHT_", "PUPPETEER_",
}

// envAgentPrefixes are what an agent CLI needs to reach its model (keys,
// base URLs, switches): an agent gets them, a gate does not.
var envAgentPrefixes = []string{
	"ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "OPENCODE_", "AMP_", "DISABLE_",
	"COPILOT_", "AZURE_OPENAI_", "OLLAMA_", "OPENROUTER_", "MISTRAL_", "GROQ_", "DEEPSEEK_", "XAI_", "VERTEX_",
	"CLOUD_ML_REGION",
}

// envDenied are variables of an allowed family that still stay out:
// git settings that run a program of the user's (with the user's keys).
var envDenied = []string{"GIT_ASKPASS", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND", "GIT_EXTERNAL_DIFF", "SSH_ASKPASS"}

// envFilter keeps the allowed entries of env (KEY=VALUE); extra names
// and NAME_* prefixes (the user's `env:` setting) are allowed too.
func envFilter(env []string, agent bool, extra []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if ok && envAllowed(k, agent, extra) {
			out = append(out, kv)
		}
	}
	return out
}

func envAllowed(k string, agent bool, extra []string) bool {
	if slices.Contains(envDenied, k) {
		return false
	}
	if agent && hasAnyPrefix(k, envAgentPrefixes) {
		return true
	}
	if slices.Contains(envNames, k) || hasAnyPrefix(k, envPrefixes) || isGoVar(k) {
		return true
	}
	for _, e := range extra {
		if p, ok := strings.CutSuffix(e, "*"); ok && strings.HasPrefix(k, p) || e == k {
			return true
		}
	}
	return false
}

// isGoVar: the go command's variables (GOPATH, GOFLAGS, GOPROXY, …), not
// Google's (GOOGLE_APPLICATION_CREDENTIALS).
func isGoVar(k string) bool {
	return strings.HasPrefix(k, "GO") && !strings.HasPrefix(k, "GOOGLE") && strings.ToUpper(k) == k
}

func hasAnyPrefix(k string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) })
}

// envSet sets k in env (replacing every entry of k).
func envSet(env []string, k, v string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
	return append(env, k+"="+v)
}

// envGet is k's value in env (the last entry wins, as for exec).
func envGet(env []string, k string) (string, bool) {
	for _, kv := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v, true
		}
	}
	return "", false
}
