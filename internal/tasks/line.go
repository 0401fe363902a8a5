package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// lineJSON is what this package reads from a task line; other fields stay
// in the line's bytes (see fields). parseLine has made sure the names
// match exactly before encoding/json, which ignores case, reads them.
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
	// AllowTestChanges lets the task make tests that passed at its base
	// go missing or skip.
	AllowTestChanges bool `json:"allow_test_changes"`
}

// knownFields are lineJSON's names.
var knownFields = []string{"id", "title", "status", "leaf", "reason", "completed", "commit", "agent", "model", "critical", "allow_test_changes"}

// syntaxError is a line that is not JSON at all.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

var (
	errNotObject = errors.New("a task line must be a JSON object")
	errBOM       = errors.New("a byte-order mark (BOM) starts the line: save the file as UTF-8 without BOM")
	bom          = []byte("\xef\xbb\xbf")
)

// parseLine reads one (trimmed, non-blank) line. A *syntaxError means the
// line is not JSON; other errors are about the line's bytes (nil task) or
// its fields (the task as far as it was read): a key given twice, a known
// field's name in another case, a field of the wrong type.
//
// Keys are matched exactly and a repeated key is refused, where
// encoding/json alone ignores case and takes the last: "Status":"complete"
// or a second "status" is most likely a mistake, and a guess either way
// would silently change the task. A name that is no known field's in any
// case ("owner") is an unknown field, kept as it is.
func parseLine(line []byte) (*Task, error) {
	if bytes.HasPrefix(line, bom) {
		// Not JSON either, but never a torn write: say what it is.
		return nil, errBOM
	}
	// Unmarshal checks that the whole line is JSON before it decodes any
	// of it: one scan of the line, where json.Valid first would be two.
	var v lineJSON
	err := json.Unmarshal(line, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return nil, &syntaxError{"invalid JSON: " + err.Error()}
	}
	if !utf8.Valid(line) {
		// encoding/json would read it as U+FFFD and a write would keep that.
		return nil, invalidUTF8(line)
	}
	if line[0] != '{' {
		return nil, errNotObject
	}
	if err := checkKeys(line); err != nil {
		// The task is only its id, from the exact key, to name it.
		t := &Task{raw: line}
		if id, ok := t.Field("id"); ok {
			_ = json.Unmarshal(id, &t.ID)
		}
		return t, err
	}
	t := &Task{ID: v.ID, Title: v.Title, Status: StatusPending, Leaf: true, Reason: v.Reason,
		Completed: v.Completed, Commit: v.Commit, raw: line, agent: v.Agent, model: v.Model, critical: v.Critical,
		allowTestChanges: v.AllowTestChanges}
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
		if te.Field == "leaf" || te.Field == "critical" || te.Field == "allow_test_changes" {
			return t, fmt.Errorf("field %q must be true or false", te.Field)
		}
		return t, fmt.Errorf("field %q must be a string", te.Field)
	}
	return t, err
}

// checkKeys reports the first top-level key of a valid JSON object line
// that is repeated or is a known field's name in another case.
func checkKeys(line []byte) error {
	var buf [16][]byte // enough for most lines: no allocation
	keys := topKeys(buf[:0], line)
	for i, key := range keys {
		for _, prev := range keys[:i] {
			if bytes.Equal(prev, key) {
				return fmt.Errorf("field %q appears twice", key)
			}
		}
		for _, k := range knownFields {
			if string(key) != k && bytes.EqualFold(key, []byte(k)) {
				return fmt.Errorf("field %q: field names are case-sensitive, write %q", key, k)
			}
		}
	}
	return nil
}

// topKeys appends the top-level keys of a valid JSON object line to dst,
// in order (fields lists them too, but a json.Decoder walk costs more than
// decoding the line, and this runs on every line of every load).
func topKeys(dst [][]byte, line []byte) [][]byte {
	depth := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end, escaped := i+1, false
			for ; line[end] != '"'; end++ {
				if line[end] == '\\' {
					end, escaped = end+1, true
				}
			}
			// In valid JSON, a string at the top level followed by a
			// colon is a key.
			if depth == 1 && bytes.TrimLeft(line[end+1:], " \t\r\n")[0] == ':' {
				key := line[i+1 : end]
				if escaped {
					var s string
					_ = json.Unmarshal(line[i:end+1], &s)
					key = []byte(s)
				}
				dst = append(dst, key)
			}
			i = end
		}
	}
	return dst
}

// invalidUTF8 names the first byte of line that is not UTF-8, and its
// column in characters.
func invalidUTF8(line []byte) error {
	off := 0
	for off < len(line) {
		r, size := utf8.DecodeRune(line[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	return fmt.Errorf("invalid UTF-8 (byte 0x%02x at column %d): save the file as UTF-8", line[off], 1+utf8.RuneCount(line[:off]))
}

// fieldProblems checks one task's own fields.
func fieldProblems(t *Task) []string {
	var out []string
	if t.ID == "" {
		out = append(out, `missing "id"`)
	} else if p := idProblem("id", t.ID); p != "" {
		out = append(out, p)
	}
	if strings.TrimSpace(t.Title) == "" {
		out = append(out, `missing "title"`)
	}
	// Lines read were checked whole; this is for text given to Add,
	// Split or Block, which encoding would turn into U+FFFD.
	for _, f := range []struct{ key, val string }{{"title", t.Title}, {"reason", t.Reason}} {
		if !utf8.ValidString(f.val) {
			out = append(out, fmt.Sprintf("field %q is not valid UTF-8", f.key))
		}
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
		switch f.key {
		case "id", "title", "status", "leaf":
		case "reason", "completed", "commit":
			put(f.key)
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
