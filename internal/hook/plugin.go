package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/ralph-loop/ralph/internal/store"
)

// pluginFiles are the files of a Claude Code plugin that runs ralph:
// .claude-plugin/plugin.json (the manifest), hooks/hooks.json (the Stop
// hook calling `<bin> hook stop`) and commands/ralph-loop.md (the
// /ralph-loop slash command running `<bin> loop start "$ARGUMENTS"`).
// bin is how the hook and the command call ralph: an absolute path works
// without PATH changes.
func pluginFiles(bin, version string) map[string]string {
	manifest := struct {
		Name        string   `json:"name"`
		Version     string   `json:"version"`
		Description string   `json:"description"`
		Keywords    []string `json:"keywords"`
	}{"ralph", version, "Ralph loop driven by the ralph harness: the Stop hook feeds the next prompt until the work is verifiably done (gates run by ralph, one commit per item).", []string{"ralph", "loop", "stop-hook"}}
	var hooks stopConfig
	hooks.Description = "ralph's Stop hook: decides whether the session may stop or gets the next prompt"
	hooks.Hooks.Stop = append(hooks.Hooks.Stop, struct {
		Hooks []commandHook `json:"hooks"`
	}{[]commandHook{{Type: "command", Command: bin + " hook stop", Timeout: hookTimeoutSeconds}}})
	cmd := fmt.Sprintf(`---
description: "Start a ralph loop in this session"
argument-hint: "PROMPT [--max-iterations N] [--completion-promise TEXT] [--check COMMAND] | --prd FILE | --pipeline FILE"
allowed-tools: ["Bash(%s loop start:*)"]
---

# Ralph loop

!`+"`%s loop start $ARGUMENTS`"+`

Work on the task above. When you try to stop, ralph's Stop hook checks the
work and, unless it is verifiably done, gives you the same prompt again: your
earlier work is in the files and the git history. Only print the completion
promise when it is completely true; never to escape the loop.
`, bin, bin)
	return map[string]string{
		".claude-plugin/plugin.json": jsonText(manifest),
		"hooks/hooks.json":           jsonText(hooks),
		"commands/ralph-loop.md":     cmd,
	}
}

func jsonText(v any) string {
	b, _ := marshal(v)
	var out bytes.Buffer
	_ = json.Indent(&out, b, "", "  ")
	out.WriteByte('\n')
	return out.String()
}

// WritePlugin writes the plugin into dir (created if needed) and returns
// the files it wrote or found unchanged, in order. Files are ralph's own:
// they are replaced when they differ.
func WritePlugin(dir, bin, version string) (written, unchanged []string, err error) {
	files := pluginFiles(bin, version)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if b, err := os.ReadFile(p); err == nil && string(b) == files[n] {
			unchanged = append(unchanged, n)
			continue
		}
		if err := store.WriteFile(p, []byte(files[n]), 0o644); err != nil {
			return written, unchanged, err
		}
		written = append(written, n)
	}
	return written, unchanged, nil
}
