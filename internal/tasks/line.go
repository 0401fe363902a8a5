package tasks

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// A hand-written, allocation-free reader for one task line. Lines of
// 100,000-task files are read on every command, so the common line (four
// known fields, no escapes) must cost a single pass and no allocations: the
// strings of a Task point into the file's bytes, which are never modified.

type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

type scanner struct {
	b []byte
	i int
}

func (s *scanner) errf(format string, args ...any) error {
	return &syntaxError{fmt.Sprintf(format, args...) + " at column " + strconv.Itoa(s.i+1)}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// str reads a string starting at the opening quote; it returns the bounds
// of its content and whether it holds escapes.
func (s *scanner) str() (start, end int, esc bool, err error) {
	s.i++ // opening quote
	start = s.i
	for s.i < len(s.b) {
		for s.i < len(s.b) && plain[s.b[s.i]] {
			s.i++
		}
		if s.i >= len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			end = s.i
			s.i++
			return start, end, esc, nil
		case c == '\\':
			esc = true
			s.i++
			if s.i >= len(s.b) {
				return 0, 0, false, s.errf("unterminated string")
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+4 >= len(s.b) {
					return 0, 0, false, s.errf("unterminated string")
				}
				for k := 1; k <= 4; k++ {
					if !isHex(s.b[s.i+k]) {
						return 0, 0, false, s.errf("invalid \\u escape")
					}
				}
				s.i += 5
			default:
				return 0, 0, false, s.errf("invalid escape in string")
			}
		case c < 0x20:
			return 0, 0, false, s.errf("control character in string")
		default:
			s.i++
		}
	}
	return 0, 0, false, s.errf("unterminated string")
}

// plain marks the bytes that stand for themselves inside a JSON string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return
}()

// plainString returns the length of the plain string body at the start of
// b, ending at a quote; ok is false if it holds an escape, a control
// character or no closing quote.
func plainString(b []byte) (n int, ok bool) {
	for n < len(b) && plain[b[n]] {
		n++
	}
	return n, n < len(b) && b[n] == '"'
}

// parseCanonical reads the exact form this package writes (and people
// write by hand), {"id":"…","title":"…","status":"…","leaf":true}, in one pass.
// Anything else (other field order, spaces, escapes, more fields) makes it
// return false, and the general reader takes over.
func parseCanonical(raw []byte, t *Task) bool {
	const (
		pID     = `{"id":"`
		pTitle  = `","title":"`
		pStatus = `","status":"`
		pLeaf   = `","leaf":`
	)
	b := raw
	if len(b) < len(pID) || string(b[:len(pID)]) != pID {
		return false
	}
	b = b[len(pID):]
	n, ok := plainString(b)
	if !ok || len(b)-n < len(pTitle) || string(b[n:n+len(pTitle)]) != pTitle {
		return false
	}
	id := b[:n]
	b = b[n+len(pTitle):]
	if n, ok = plainString(b); !ok || len(b)-n < len(pStatus) || string(b[n:n+len(pStatus)]) != pStatus {
		return false
	}
	title := b[:n]
	b = b[n+len(pStatus):]
	if n, ok = plainString(b); !ok || len(b)-n < len(pLeaf) || string(b[n:n+len(pLeaf)]) != pLeaf {
		return false
	}
	status := b[:n]
	b = b[n+len(pLeaf):]
	var leaf bool
	switch string(b) {
	case "true}":
		leaf = true
	case "false}":
	default:
		return false
	}
	*t = Task{ID: bstr(id), Title: bstr(title), Status: bstr(status), Leaf: leaf, raw: raw}
	t.orig = t.core()
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (s *scanner) lit(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.errf("invalid literal")
	}
	s.i += len(word)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.errf("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.errf("invalid number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.errf("invalid number")
		}
	}
	return nil
}

// value skips one JSON value, checking its syntax.
func (s *scanner) value(depth int) error {
	if depth > 1000 {
		return s.errf("nesting too deep")
	}
	s.ws()
	if s.i >= len(s.b) {
		return s.errf("unexpected end of line")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, _, err := s.str()
		return err
	case c == '{':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			return nil
		}
		for {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return s.errf("expected object key")
			}
			if _, _, _, err := s.str(); err != nil {
				return err
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return s.errf("expected ':'")
			}
			s.i++
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.i >= len(s.b) {
				return s.errf("unexpected end of line")
			}
			if s.b[s.i] == '}' {
				s.i++
				return nil
			}
			if s.b[s.i] != ',' {
				return s.errf("expected ',' or '}'")
			}
			s.i++
		}
	case c == '[':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.i >= len(s.b) {
				return s.errf("unexpected end of line")
			}
			if s.b[s.i] == ']' {
				s.i++
				return nil
			}
			if s.b[s.i] != ',' {
				return s.errf("expected ',' or ']'")
			}
			s.i++
		}
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.errf("invalid character %q", s.b[s.i])
}

// field is one top-level member of a line: raw key (with quotes), decoded
// key, and raw value.
type field struct {
	keyRaw, val []byte
	key         string
}

// beginObject expects the line to be an object.
func (s *scanner) beginObject() error {
	s.ws()
	if s.i >= len(s.b) {
		return s.errf("empty line")
	}
	if s.b[s.i] != '{' {
		if err := s.value(0); err != nil {
			return err
		}
		if err := s.end(); err != nil {
			return err
		}
		return errNotObject
	}
	s.i++
	return nil
}

var errNotObject = errors.New("not a JSON object")

// nextKey reads the next key of the object (positioned after '{' or a
// value) and leaves the scanner before its value. ok is false at '}'.
func (s *scanner) nextKey(first bool) (keyStart, keyEnd int, esc, ok bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return 0, 0, false, false, s.errf("unexpected end of line")
	}
	if s.b[s.i] == '}' {
		s.i++
		return 0, 0, false, false, nil
	}
	if !first {
		if s.b[s.i] != ',' {
			return 0, 0, false, false, s.errf("expected ',' or '}'")
		}
		s.i++
		s.ws()
	}
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return 0, 0, false, false, s.errf("expected object key")
	}
	keyStart, keyEnd, esc, err = s.str()
	if err != nil {
		return
	}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return 0, 0, false, false, s.errf("expected ':'")
	}
	s.i++
	s.ws()
	if s.i >= len(s.b) {
		return 0, 0, false, false, s.errf("unexpected end of line")
	}
	return keyStart, keyEnd, esc, true, nil
}

func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.errf("unexpected data after the object")
	}
	return nil
}

// bstr makes a string that shares b's memory. b must never change.
func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func decodeStr(b []byte, start, end int, esc bool) string {
	if !esc {
		return bstr(b[start:end])
	}
	return unescape(b[start:end])
}

// unescape decodes a string body whose syntax was checked. Bytes that are
// not escapes are kept as they are (even invalid UTF-8), so that a string
// reads back exactly as appendString wrote it.
func unescape(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch b[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(b[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					r2 = hex4(b[i+3:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // " \ /
			out = append(out, b[i])
		}
	}
	return string(out)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Flags kept on a Task.
const (
	fArchived      uint8 = 1 << iota // lives in the archive
	fLeafMissing                     // line had no "leaf": derived, rewritten
	fStatusMissing                   // line had no "status": pending, rewritten
	fHasExtra                        // line has fields beyond id,title,status,leaf
	fIDAside                         // (records) the id is in Set.names, not the line's bytes
	fPatched                         // (records, inside patchCache) line rewritten by the edit
)

// fieldError is a problem with one field of an otherwise valid JSON line.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

// parseLine fills t from raw (which must stay unmodified while t lives).
// A *syntaxError means the line is not JSON; a *fieldError names a field
// of the wrong type.
func parseLine(raw []byte, t *Task) error {
	if parseCanonical(raw, t) {
		return nil
	}
	s := scanner{b: raw}
	if err := s.beginObject(); err != nil {
		if err == errNotObject {
			return &fieldError{"a task line must be a JSON object"}
		}
		return err
	}
	*t = Task{raw: raw, flags: fLeafMissing | fStatusMissing}
	var seen uint8
	var ferr error
	for first := true; ; first = false {
		ks, ke, kesc, ok, err := s.nextKey(first)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		key := decodeStr(raw, ks, ke, kesc)
		var dst *string
		var bit uint8
		switch key {
		case "id":
			dst, bit = &t.ID, 1
		case "title":
			dst, bit = &t.Title, 2
		case "status":
			dst, bit = &t.Status, 4
		case "reason":
			dst, bit = &t.Reason, 8
		case "completed":
			dst, bit = &t.Completed, 16
		case "commit":
			dst, bit = &t.Commit, 32
		case "leaf":
			bit = 64
		}
		if bit == 0 || (bit >= 8 && bit < 64) {
			t.flags |= fHasExtra // re-encoding must walk the raw line
		}
		if bit != 0 && seen&bit != 0 && ferr == nil {
			ferr = &fieldError{fmt.Sprintf("field %q appears twice", key)}
		}
		seen |= bit
		switch {
		case dst != nil:
			if s.b[s.i] != '"' {
				if err := s.value(0); err != nil {
					return err
				}
				if ferr == nil {
					ferr = &fieldError{fmt.Sprintf("field %q must be a string", key)}
				}
				continue
			}
			vs, ve, vesc, err := s.str()
			if err != nil {
				return err
			}
			*dst = decodeStr(raw, vs, ve, vesc)
			if bit == 4 {
				t.flags &^= fStatusMissing
			}
		case bit == 64:
			switch s.b[s.i] {
			case 't':
				if err := s.lit("true"); err != nil {
					return err
				}
				t.Leaf = true
				t.flags &^= fLeafMissing
			case 'f':
				if err := s.lit("false"); err != nil {
					return err
				}
				t.flags &^= fLeafMissing
			default:
				if err := s.value(0); err != nil {
					return err
				}
				if ferr == nil {
					ferr = &fieldError{`field "leaf" must be true or false`}
				}
			}
		default:
			// The agent settings a task may carry (seed 004's task.agent)
			// are checked here, so that a wrong type names the line.
			c := s.b[s.i]
			if ferr == nil {
				switch {
				case (key == "agent" || key == "model") && c != '"' && c != 'n':
					ferr = &fieldError{fmt.Sprintf("field %q must be a string", key)}
				case key == "critical" && c != 't' && c != 'f' && c != 'n':
					ferr = &fieldError{`field "critical" must be true or false`}
				}
			}
			if err := s.value(0); err != nil {
				return err
			}
		}
	}
	if err := s.end(); err != nil {
		return err
	}
	if t.flags&fLeafMissing != 0 {
		t.Leaf = true // until we know it has subtasks
	}
	if t.flags&fStatusMissing != 0 {
		t.Status = StatusPending
	}
	t.orig = t.core()
	return ferr
}

// fields lists the top-level members of a (valid) raw line in order.
func fields(raw []byte) []field {
	s := scanner{b: raw}
	if s.beginObject() != nil {
		return nil
	}
	var out []field
	for first := true; ; first = false {
		ks, ke, kesc, ok, err := s.nextKey(first)
		if err != nil || !ok {
			return out
		}
		vs := s.i
		if s.value(0) != nil {
			return out
		}
		out = append(out, field{keyRaw: raw[ks-1 : ke+1], key: decodeStr(raw, ks, ke, kesc), val: raw[vs:s.i]})
	}
}

// appendString appends s as a JSON string without HTML escaping, so titles
// stay as readable (and greppable) as hand-written lines.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
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
	if t.Leaf {
		dst = append(dst, `,"leaf":true`...)
	} else {
		dst = append(dst, `,"leaf":false`...)
	}
	var done uint8
	opt := func(dst []byte, bit uint8, key, v string) []byte {
		if done&bit != 0 || v == "" {
			done |= bit
			return dst
		}
		done |= bit
		dst = append(dst, ",\""+key+"\":"...)
		return appendString(dst, v)
	}
	if t.raw != nil && t.flags&fHasExtra != 0 {
		for _, f := range fields(t.raw) {
			switch f.key {
			case "id", "title", "status", "leaf":
			case "reason":
				dst = opt(dst, 1, "reason", t.Reason)
			case "completed":
				dst = opt(dst, 2, "completed", t.Completed)
			case "commit":
				dst = opt(dst, 4, "commit", t.Commit)
			default:
				dst = append(dst, ',')
				dst = append(dst, f.keyRaw...)
				dst = append(dst, ':')
				dst = append(dst, f.val...)
			}
		}
	}
	dst = opt(dst, 1, "reason", t.Reason)
	dst = opt(dst, 2, "completed", t.Completed)
	dst = opt(dst, 4, "commit", t.Commit)
	return append(dst, '}')
}
