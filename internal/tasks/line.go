package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// lineJSON is what this package reads from a task line; other fields stay
// in the line's bytes (see fields).
type lineJSON struct {
	ID        string  `json:"id"`
	Title     string  `json:"title"`
	Status    *string `json:"status"`
	Leaf      *bool   `json:"leaf"`
	Reason    string  `json:"reason"`
	Completed string  `json:"completed"`
	Commit    string  `json:"commit"`
	// A task's own agent settings, read here so that a wrong type names
	// the line.
	Agent    string `json:"agent"`
	Model    string `json:"model"`
	Critical bool   `json:"critical"`
}

// syntaxError is a line that is not JSON at all.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

var errNotObject = errors.New("a task line must be a JSON object")

// parseLine reads one (trimmed, non-blank) line. A *syntaxError means the
// line is not JSON; other errors name a field of the wrong type, with the
// task as far as it was read.
func parseLine(line []byte) (*Task, error) {
	var v lineJSON
	err := json.Unmarshal(line, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return nil, &syntaxError{"invalid JSON: " + err.Error()}
	}
	if line[0] != '{' {
		return nil, errNotObject
	}
	t := &Task{ID: v.ID, Title: v.Title, Status: StatusPending, Leaf: true, Reason: v.Reason,
		Completed: v.Completed, Commit: v.Commit, raw: line, agent: v.Agent, model: v.Model, critical: v.Critical}
	if v.Status != nil {
		t.Status = *v.Status
	}
	if v.Leaf != nil {
		t.Leaf = *v.Leaf // else a leaf, until it turns out to have subtasks
	}
	t.noStatus, t.noLeaf = v.Status == nil, v.Leaf == nil
	t.orig = t.core()
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "leaf" || te.Field == "critical" {
			return t, fmt.Errorf("field %q must be true or false", te.Field)
		}
		return t, fmt.Errorf("field %q must be a string", te.Field)
	}
	return t, err
}

// fieldProblems checks one task's own fields.
func fieldProblems(t *Task) []string {
	var out []string
	if t.ID == "" {
		out = append(out, `missing "id"`)
	} else if !ValidID(t.ID) {
		out = append(out, fmt.Sprintf("invalid id %q: use segments of letters, digits, _ or - separated by single dots (A, A.1, A.1.2)", t.ID))
	}
	if strings.TrimSpace(t.Title) == "" {
		out = append(out, `missing "title"`)
	}
	if !ValidStatus(t.Status) {
		out = append(out, fmt.Sprintf("unknown status %q (want pending, active, blocked or complete)", t.Status))
	}
	return out
}

// eachLine calls fn for every non-blank line of data (trimmed) with its
// 1-based number and whether it is the last non-blank line.
func eachLine(data []byte, fn func(n int, line []byte, last bool)) {
	for n := 1; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		if line = bytes.TrimSpace(line); len(line) > 0 {
			fn(n, line, len(bytes.TrimSpace(data)) == 0)
		}
	}
}

// field is one top-level member of a line, in the line's order.
type field struct {
	key string
	val json.RawMessage
}

// fields lists the top-level members of a valid line in order.
func fields(raw []byte) []field {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	var out []field
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return out
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return out
		}
		out = append(out, field{key.(string), val})
	}
	return out
}

// appendString appends s as a JSON string without HTML escaping, so titles
// stay as readable (and greppable) as hand-written lines.
func appendString(dst []byte, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte{'\n'})...)
}

// appendTask encodes t as one line (no newline): id, title, status, leaf,
// then the other fields in the order the original line had them (unknown
// fields byte for byte), then reason, completed, commit if new.
func appendTask(dst []byte, t *Task) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, t.ID)
	dst = append(dst, `,"title":`...)
	dst = appendString(dst, t.Title)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, t.Status)
	dst = fmt.Appendf(dst, `,"leaf":%t`, t.Leaf)
	own := map[string]string{"reason": t.Reason, "completed": t.Completed, "commit": t.Commit}
	put := func(key string) {
		if v, ok := own[key]; ok {
			delete(own, key)
			if v != "" {
				dst = append(dst, ",\""+key+"\":"...)
				dst = appendString(dst, v)
			}
		}
	}
	for _, f := range fields(t.raw) {
		switch key := strings.ToLower(f.key); key { // encoding/json matched keys in any case
		case "id", "title", "status", "leaf":
		case "reason", "completed", "commit":
			put(key)
		default:
			dst = append(dst, ',')
			dst = appendString(dst, f.key)
			dst = append(dst, ':')
			dst = append(dst, f.val...)
		}
	}
	put("reason")
	put("completed")
	put("commit")
	return append(dst, '}')
}
