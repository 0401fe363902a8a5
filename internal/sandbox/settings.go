package sandbox

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// An agent CLI's state is writable in its sandbox (its login and
// sessions must be), but its settings are the user's: a hook, an MCP
// server, a plugin or an instructions file the agent writes there would
// run, or speak, in the user's next session of that CLI, outside any
// sandbox. So the settings folders are read-only inside, and the
// settings files — which the CLIs themselves may rewrite — are read
// before the run and compared after it: what changed is put back and
// reported (Session.CheckSettings).

// Settings are an agent CLI's settings: files compared and put back,
// folders kept read-only, and JSON files of which only some keys are
// settings (the rest is the CLI's own state).
type Settings struct {
	Files   []string
	Folders []string
	// Keys are JSON files and the settings in them: top-level keys, and
	// keys of every entry of "projects" (Claude Code's ~/.claude.json).
	Keys map[string][]string
}

// claudeProjectKeys are the settings Claude Code keeps per project in
// ~/.claude.json: servers it starts and tools it may run unasked.
var claudeProjectKeys = []string{"mcpServers", "allowedTools", "enabledMcpjsonServers", "disabledMcpjsonServers", "enableAllProjectMcpServers"}

// SettingsOf are adapter's settings, expanded.
func SettingsOf(adapter string) Settings {
	var s Settings
	files := func(dir string, names ...string) {
		for _, n := range names {
			s.Files = append(s.Files, expand(filepath.Join(dir, n)))
		}
	}
	folders := func(dir string, names ...string) {
		for _, n := range names {
			s.Folders = append(s.Folders, expand(filepath.Join(dir, n)))
		}
	}
	xdgConfig := "~/.config"
	if v := os.Getenv("XDG_CONFIG_HOME"); v != "" {
		xdgConfig = v
	}
	switch adapter {
	case "claude":
		dirs := []string{"~/.claude"}
		if v := os.Getenv("CLAUDE_CONFIG_DIR"); v != "" {
			dirs = append(dirs, v)
		}
		s.Keys = map[string][]string{expand("~/.claude.json"): {"mcpServers"}}
		for _, d := range dirs {
			files(d, "settings.json", "settings.local.json", "CLAUDE.md")
			folders(d, "plugins", "agents", "commands", "skills", "output-styles")
			if d != "~/.claude" {
				s.Keys[expand(filepath.Join(d, ".claude.json"))] = []string{"mcpServers"}
			}
		}
	case "codex":
		d := "~/.codex"
		if v := os.Getenv("CODEX_HOME"); v != "" {
			d = v
		}
		files(d, "config.toml", "hooks.json", "AGENTS.md", "AGENTS.override.md")
		folders(d, "prompts", "rules", "skills")
	case "gemini":
		files("~/.gemini", "settings.json", "GEMINI.md", ".env")
		folders("~/.gemini", "extensions", "commands")
	case "opencode":
		d := filepath.Join(xdgConfig, "opencode")
		files(d, "opencode.json", "opencode.jsonc", "config.json", "AGENTS.md")
		folders(d, "agent", "agents", "command", "commands", "plugin", "plugins", "mode", "modes")
	case "amp":
		files(filepath.Join(xdgConfig, "amp"), "settings.json", "AGENTS.md")
	}
	return s
}

// settingsMax bounds a settings file read before the run; a larger one
// is kept read-only instead.
const settingsMax = 1 << 20

// settingsGuard is what a session read of its agent's settings.
type settingsGuard struct {
	by    string
	files map[string][]byte // nil: absent
	keys  map[string]map[string]any
	keyed map[string][]string
}

// guardSettings reads s before a run; ro are the paths to keep
// read-only (the folders, and files too big to read).
func guardSettings(by string, s Settings) (*settingsGuard, []string) {
	g := &settingsGuard{by: by, files: map[string][]byte{}, keys: map[string]map[string]any{}, keyed: s.Keys}
	var ro []string
	for _, f := range s.Files {
		st, err := os.Stat(f)
		switch {
		case err != nil:
			g.files[f] = nil
		case st.Size() > settingsMax || !st.Mode().IsRegular():
			ro = append(ro, f)
		default:
			b, err := os.ReadFile(f)
			if err != nil {
				ro = append(ro, f)
				continue
			}
			g.files[f] = b
		}
	}
	for _, d := range s.Folders {
		// Made when missing, so that none can be planted there either
		// (the CLI's own state around them stays writable).
		if exists(filepath.Dir(d)) && os.MkdirAll(d, 0o755) == nil {
			ro = append(ro, d)
		}
	}
	for f, keys := range s.Keys {
		g.keys[f] = settingKeys(f, keys)
	}
	return g, ro
}

// settingKeys reads the settings keys of a JSON file (nil when it is
// not there or not JSON): top-level ones, and "projects/<path>/<key>".
func settingKeys(path string, keys []string) map[string]any {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 64<<20 {
		return nil
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return nil
	}
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := doc[k]; ok && !emptySetting(v) {
			out[k] = v
		}
	}
	projects, _ := doc["projects"].(map[string]any)
	for p, v := range projects {
		entry, _ := v.(map[string]any)
		for _, k := range claudeProjectKeys {
			if val, ok := entry[k]; ok && !emptySetting(val) {
				out["projects/"+p+"/"+k] = val
			}
		}
	}
	return out
}

// emptySetting: a project entry's default (the CLI writes them for a
// project it meets the first time).
func emptySetting(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// check compares the settings with what was read and puts back what
// changed; it returns what it put back.
func (g *settingsGuard) check() []Tamper {
	now := time.Now().UTC()
	var out []Tamper
	note := func(path, what string) { out = append(out, Tamper{Path: path, By: g.by, What: what, When: now}) }
	for _, f := range slices.Sorted(maps.Keys(g.files)) {
		before := g.files[f]
		after, err := os.ReadFile(f)
		switch {
		case before == nil && err == nil:
			os.Remove(f)
			note(f, "created")
		case before != nil && err != nil:
			_ = store.WriteFile(f, before, 0o600)
			note(f, "removed")
		case before != nil && !bytes.Equal(before, after):
			_ = store.WriteFile(f, before, 0o600)
			note(f, "changed")
		}
	}
	for _, f := range slices.Sorted(maps.Keys(g.keyed)) {
		before := g.keys[f]
		after := settingKeys(f, g.keyed[f])
		if reflect.DeepEqual(before, after) || (len(before) == 0 && len(after) == 0) {
			continue
		}
		var changed []string
		for _, k := range slices.Sorted(maps.Keys(union(before, after))) {
			if !reflect.DeepEqual(before[k], after[k]) {
				changed = append(changed, k)
			}
		}
		if restoreKeys(f, before, changed) == nil {
			for _, k := range changed {
				note(f, "changed "+k)
			}
		}
	}
	return out
}

func union(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// restoreKeys puts the keys of a JSON file back as they were (absent
// ones removed), keeping everything else the CLI wrote.
func restoreKeys(path string, before map[string]any, keys []string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	for _, k := range keys {
		v, had := before[k]
		target := doc
		name := k
		if rest, ok := cutProjectKey(k); ok {
			projects, _ := doc["projects"].(map[string]any)
			entry, _ := projects[rest[0]].(map[string]any)
			if entry == nil {
				continue
			}
			target, name = entry, rest[1]
		}
		if had {
			target[name] = v
		} else {
			delete(target, name)
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return store.WriteFile(path, append(out, '\n'), 0o600)
}

// cutProjectKey splits "projects/<path>/<key>" (a path holds slashes:
// the key is the last part).
func cutProjectKey(k string) ([2]string, bool) {
	rest, ok := bytes.CutPrefix([]byte(k), []byte("projects/"))
	if !ok {
		return [2]string{}, false
	}
	i := bytes.LastIndexByte(rest, '/')
	if i < 0 || !slices.Contains(claudeProjectKeys, string(rest[i+1:])) {
		return [2]string{}, false
	}
	return [2]string{string(rest[:i]), string(rest[i+1:])}, true
}

// CheckSettings compares the agent CLI's settings with what they were
// when the session opened, puts back what the run changed, and returns
// it (also kept in the run's record, for `ralph status`). Call it once
// the agent has ended.
func (ss *Session) CheckSettings() []Tamper {
	if ss.guard == nil {
		return nil
	}
	t := ss.guard.check()
	if len(t) > 0 {
		ss.sb.mu.Lock()
		ss.sb.record.Tampered = append(ss.sb.record.Tampered, t...)
		ss.sb.saveLocked()
		ss.sb.mu.Unlock()
	}
	return t
}
