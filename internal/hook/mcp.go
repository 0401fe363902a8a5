package hook

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/ralph-loop/ralph/internal/store"
)

// More agents whose MCP client configuration ralph can write.
const (
	Gemini   = "gemini"
	Opencode = "opencode"
)

// mcpServerName is the name ralph's server has in every client's config.
const mcpServerName = "ralph"

// MCPConfigPath is the file holding the agent's MCP servers for scope:
// Claude Code's .mcp.json (project) or ~/.claude.json (user); Codex's
// config.toml ($CODEX_HOME, else ~/.codex; user only); Gemini CLI's
// .gemini/settings.json; opencode's opencode.json (project) or
// ~/.config/opencode/opencode.json.
func MCPConfigPath(agent, scope, root, home string) (string, error) {
	if scope != ScopeProject && scope != ScopeUser {
		return "", &Error{Msg: fmt.Sprintf("--scope must be project or user, not %q", scope)}
	}
	user := scope == ScopeUser
	switch agent {
	case Claude:
		if user {
			return filepath.Join(home, ".claude.json"), nil
		}
		return filepath.Join(root, ".mcp.json"), nil
	case Codex:
		if !user {
			return "", &Error{Msg: "Codex reads MCP servers from its user config only: use --scope user"}
		}
		if ch := os.Getenv("CODEX_HOME"); ch != "" {
			return filepath.Join(ch, "config.toml"), nil
		}
		return filepath.Join(home, ".codex", "config.toml"), nil
	case Gemini:
		if user {
			return filepath.Join(home, ".gemini", "settings.json"), nil
		}
		return filepath.Join(root, ".gemini", "settings.json"), nil
	case Opencode:
		if user {
			return filepath.Join(home, ".config", "opencode", "opencode.json"), nil
		}
		return filepath.Join(root, "opencode.json"), nil
	}
	return "", &Error{Msg: fmt.Sprintf("unknown agent %q (claude, codex, gemini or opencode)", agent)}
}

// ProjectMCPFiles are the files, relative to the repository, that
// `ralph mcp install --scope project` may write.
func ProjectMCPFiles() []string {
	var out []string
	for _, a := range []string{Claude, Gemini, Opencode} {
		if p, err := MCPConfigPath(a, ScopeProject, "", ""); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// InstallMCP writes ralph's MCP server (argv: the program and its
// arguments) into agent's config at path: added once, replaced when it
// differs, every other key kept; a file that does not parse is refused,
// naming the place, with nothing written.
func InstallMCP(agent, path string, argv []string) (Result, error) {
	if agent == Codex {
		return installTOMLServer(path, argv)
	}
	doc, orig, err := readObject(path)
	if err != nil {
		return Result{}, err
	}
	var res Result
	key, entry := "mcpServers", any(map[string]any{"command": argv[0], "args": argv[1:]})
	switch agent {
	case Opencode:
		key, entry = "mcp", map[string]any{"type": "local", "command": argv, "enabled": true}
	case Gemini, Claude:
		if agent == Claude {
			entry = map[string]any{"type": "stdio", "command": argv[0], "args": argv[1:]}
		}
	}
	servers, err := doc.object(path, key)
	if err != nil {
		return res, err
	}
	servers.set(mcpServerName, mustRaw(entry))
	doc.set(key, mustRaw(servers))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return res, err
	}
	return res, write(path, doc, orig, &res)
}

// installTOMLServer writes Codex's [mcp_servers.ralph] table: the table
// replaced when it is there, appended when not; the rest of the file is
// left byte for byte (a TOML library would drop the user's comments).
func installTOMLServer(path string, argv []string) (Result, error) {
	var res Result
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, err
	}
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return res, &Error{Msg: fmt.Sprintf("%s:%d:%d: %v (nothing was written)", path, line, col, err)}
		}
		return res, &Error{Msg: fmt.Sprintf("%s: %v (nothing was written)", path, err)}
	}
	header := "[mcp_servers." + mcpServerName + "]"
	body, err := toml.Marshal(struct {
		Command string   `toml:"command"`
		Args    []string `toml:"args"`
	}{argv[0], argv[1:]})
	if err != nil {
		return res, err
	}
	table := header + "\n" + string(body)
	var out strings.Builder
	found, skipping := false, false
	for _, l := range strings.SplitAfter(string(b), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			skipping = false
			if t == header {
				found, skipping = true, true
				out.WriteString(table)
				continue
			}
		}
		if !skipping {
			out.WriteString(l)
		}
	}
	if !found {
		if out.Len() > 0 && !strings.HasSuffix(out.String(), "\n") {
			out.WriteString("\n")
		}
		if out.Len() > 0 {
			out.WriteString("\n")
		}
		out.WriteString(table)
	}
	if out.String() == string(b) {
		return res, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return res, err
	}
	res.Changed = true
	return res, store.WriteFile(path, []byte(out.String()), 0o644)
}
