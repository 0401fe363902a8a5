// Package hook connects ralph to agents that run it from inside their own
// session: the Stop hook entry in Claude Code's settings.json or Codex's
// hooks.json, and a Claude Code plugin folder.
//
// Installing edits JSON the user owns, so it keeps every other key and
// hook (and their order), adds ralph's entry once, writes atomically, and
// refuses a file that does not parse (naming file:line:col) without
// writing anything.
package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
)

// Agents whose Stop hook ralph can install.
const (
	Claude = "claude"
	Codex  = "codex"
)

// Scopes.
const (
	ScopeProject = "project"
	ScopeUser    = "user"
)

// SettingsPath is the file holding the agent's hooks for scope. root is
// the project (repository root); home the user's home folder. Codex's
// user layer is $CODEX_HOME when set.
func SettingsPath(agent, scope, root, home string) (string, error) {
	if scope != ScopeProject && scope != ScopeUser {
		return "", &Error{Msg: fmt.Sprintf("--scope must be project or user, not %q", scope)}
	}
	switch agent {
	case Claude:
		if scope == ScopeUser {
			return filepath.Join(home, ".claude", "settings.json"), nil
		}
		return filepath.Join(root, ".claude", "settings.json"), nil
	case Codex:
		if scope == ScopeUser {
			if ch := os.Getenv("CODEX_HOME"); ch != "" {
				return filepath.Join(ch, "hooks.json"), nil
			}
			return filepath.Join(home, ".codex", "hooks.json"), nil
		}
		return filepath.Join(root, ".codex", "hooks.json"), nil
	}
	return "", &Error{Msg: fmt.Sprintf("unknown agent %q (claude or codex)", agent)}
}

// StopCommand is the hook command for the ralph binary at exe: its
// absolute path, so the hook works whatever the agent's PATH is.
func StopCommand(exe string) string {
	return proc.Quote(exe) + " hook stop"
}

// isRalphCommand recognises a Stop hook command that runs ralph: one whose
// program is named ralph* and whose arguments are `hook stop`, or exactly
// mine.
func isRalphCommand(cmd, mine string) bool {
	cmd = strings.TrimSpace(cmd)
	if mine != "" && cmd == strings.TrimSpace(mine) {
		return true
	}
	argv, err := proc.SplitArgs(cmd)
	if err != nil || len(argv) != 3 || argv[1] != "hook" || argv[2] != "stop" {
		return false
	}
	return strings.HasPrefix(filepath.Base(argv[0]), "ralph")
}

// commandHook is one hook entry, fields in the documented order.
type commandHook struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	// Timeout (seconds) lets the hook run the gates: Claude Code's default
	// of 60 s is too short for a test suite. ralph hook stop's own limit is
	// 9 minutes, under this.
	Timeout int `json:"timeout,omitempty"`
}

// stopConfig is {"hooks":{"Stop":[{"hooks":[…]}]}}.
type stopConfig struct {
	Description string `json:"description,omitempty"`
	Hooks       struct {
		Stop []struct {
			Hooks []commandHook `json:"hooks"`
		} `json:"Stop"`
	} `json:"hooks"`
}

// Error is bad input: a settings file that does not parse or has the
// wrong shape, a bad flag (exit 2).
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// UsageError marks bad input for the exit-code table.
func (e *Error) UsageError() bool { return true }

// Result says what an install or uninstall did.
type Result struct {
	Path    string
	Changed bool
	Action  string // added | updated | unchanged | removed | absent
}

// Install adds ralph's Stop hook (command) to the settings file at path,
// creating it if needed. An existing ralph entry with another command
// (an older binary path) is replaced; the same one is left alone.
func Install(path, command string) (Result, error) {
	doc, orig, err := readObject(path)
	if err != nil {
		return Result{}, err
	}
	res := Result{Path: path, Action: "unchanged"}
	hooks, err := doc.object(path, "hooks")
	if err != nil {
		return res, err
	}
	stop, err := hooks.array(path, "Stop")
	if err != nil {
		return res, err
	}
	groups, found, err := parseGroups(path, stop)
	if err != nil {
		return res, err
	}
	if found == command {
		return res, nil
	}
	if found != "" {
		groups, _ = removeRalph(groups, command)
		res.Action = "updated"
	} else {
		res.Action = "added"
	}
	entry := obj{{"hooks", mustRaw([]commandHook{{Type: "command", Command: command, Timeout: hookTimeoutSeconds}})}}
	groups = append(groups, entry)
	hooks.set("Stop", mustRaw(groups))
	doc.set("hooks", mustRaw(hooks))
	return res, write(path, doc, orig, &res)
}

// Uninstall removes ralph's Stop hook entries (and only those) from path;
// a Stop list, hooks object or matcher group left empty by that goes too.
func Uninstall(path, command string) (Result, error) {
	res := Result{Path: path, Action: "absent"}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	doc, orig, err := readObject(path)
	if err != nil {
		return res, err
	}
	hooks, err := doc.object(path, "hooks")
	if err != nil || hooks == nil {
		return res, err
	}
	stop, err := hooks.array(path, "Stop")
	if err != nil {
		return res, err
	}
	groups, _, err := parseGroups(path, stop)
	if err != nil {
		return res, err
	}
	groups, n := removeRalph(groups, command)
	if n == 0 {
		return res, nil
	}
	res.Action = "removed"
	if len(groups) == 0 {
		hooks.del("Stop")
	} else {
		hooks.set("Stop", mustRaw(groups))
	}
	if len(hooks) == 0 {
		doc.del("hooks")
	} else {
		doc.set("hooks", mustRaw(hooks))
	}
	return res, write(path, doc, orig, &res)
}

func write(path string, doc obj, orig []byte, res *Result) error {
	b, err := marshal(doc)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	if bytes.Equal(out.Bytes(), orig) {
		return nil
	}
	perm := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		perm = st.Mode().Perm()
	}
	res.Changed = true
	return store.WriteFile(path, out.Bytes(), perm)
}

// parseGroups reads the Stop list's matcher groups and returns the command
// of ralph's entry if there is one.
func parseGroups(path string, stop []json.RawMessage) ([]obj, string, error) {
	var groups []obj
	found := ""
	for i, raw := range stop {
		var g obj
		if err := json.Unmarshal(raw, &g); err != nil {
			return nil, "", &Error{Msg: fmt.Sprintf("%s: hooks.Stop[%d] is not an object", path, i)}
		}
		hs, err := g.array(path, "hooks")
		if err != nil {
			return nil, "", err
		}
		for _, h := range hs {
			var e struct {
				Command string `json:"command"`
			}
			if json.Unmarshal(h, &e) == nil && isRalphCommand(e.Command, "") && found == "" {
				found = e.Command
			}
		}
		groups = append(groups, g)
	}
	return groups, found, nil
}

// removeRalph drops ralph's hook entries; a group left with no hooks goes.
func removeRalph(groups []obj, mine string) ([]obj, int) {
	var out []obj
	n := 0
	for _, g := range groups {
		hs, _ := g.array("", "hooks")
		var keep []json.RawMessage
		for _, h := range hs {
			var e struct {
				Command string `json:"command"`
			}
			if json.Unmarshal(h, &e) == nil && isRalphCommand(e.Command, mine) {
				n++
				continue
			}
			keep = append(keep, h)
		}
		if len(keep) == len(hs) {
			out = append(out, g)
			continue
		}
		if len(keep) == 0 {
			continue
		}
		g.set("hooks", mustRaw(keep))
		out = append(out, g)
	}
	return out, n
}

// readObject reads a JSON object file, keeping key order; a missing or
// blank file is an empty object.
func readObject(path string) (obj, []byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return obj{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return obj{}, b, nil
	}
	var o obj
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, nil, &Error{Msg: jsonErr(path, b, err)}
	}
	return o, b, nil
}

// jsonErr renders a decode error as file:line:col: message.
func jsonErr(path string, b []byte, err error) string {
	line, col, ok := store.JSONErrorPos(b, err)
	if errors.Is(err, errNotObject) {
		line, col = store.OffsetPos(b, int64(len(b)-len(bytes.TrimLeft(b, " \t\r\n"))+1))
		ok = true
	}
	if !ok {
		return fmt.Sprintf("%s: %v", path, err)
	}
	return fmt.Sprintf("%s:%d:%d: %v (nothing was written)", path, line, col, err)
}

// obj is a JSON object that keeps its keys in order.
type obj []kv

type kv struct {
	Key string
	Val json.RawMessage
}

var errNotObject = errors.New("expected a JSON object")

func (o *obj) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return errNotObject
	}
	*o = obj{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		o.set(k, v)
	}
	_, err = dec.Token()
	return err
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(e.Val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (o *obj) set(k string, v json.RawMessage) {
	for i := range *o {
		if (*o)[i].Key == k {
			(*o)[i].Val = v
			return
		}
	}
	*o = append(*o, kv{k, v})
}

func (o *obj) del(k string) {
	out := (*o)[:0]
	for _, e := range *o {
		if e.Key != k {
			out = append(out, e)
		}
	}
	*o = out
}

func (o obj) get(k string) (json.RawMessage, bool) {
	for _, e := range o {
		if e.Key == k {
			return e.Val, true
		}
	}
	return nil, false
}

// object returns key k as an object (empty when absent).
func (o obj) object(path, k string) (obj, error) {
	raw, ok := o.get(k)
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return obj{}, nil
	}
	var v obj
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, &Error{Msg: fmt.Sprintf("%s: %q is not a JSON object; fix it by hand (nothing was written)", path, k)}
	}
	return v, nil
}

// array returns key k as a list (empty when absent).
func (o obj) array(path, k string) ([]json.RawMessage, error) {
	raw, ok := o.get(k)
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var v []json.RawMessage
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, &Error{Msg: fmt.Sprintf("%s: %q is not a JSON list; fix it by hand (nothing was written)", path, k)}
	}
	return v, nil
}

func mustRaw(v any) json.RawMessage {
	b, err := marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// marshal is json.Marshal without HTML escaping (a user's "a && b" stays
// readable).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// hookTimeoutSeconds is the timeout written into hook entries.
const hookTimeoutSeconds = 600
