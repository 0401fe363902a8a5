package prd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// ParseError is a problem with the JSON itself or with the type of a known
// field. Line and Column (1-based; the column counts characters, not bytes,
// to match what editors show) locate it so a person or an agent can jump
// straight to the spot; they are 0 when the problem has no single place.
type ParseError struct {
	File   string
	Line   int
	Column int
	Offset int // byte offset into the file
	Msg    string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// TypeErrors are every field of a file whose value has the wrong type, in
// file order: one parse reports them all, so fixing a file takes one round
// trip, not one per mistake.
type TypeErrors []*ParseError

func (e TypeErrors) Error() string {
	lines := make([]string, len(e))
	for i, pe := range e {
		lines[i] = pe.Error()
	}
	return strings.Join(lines, "\n")
}

// UsageError marks bad input (exit 2).
func (e TypeErrors) UsageError() bool { return true }

// Unwrap gives each error (errors.As finds the first *ParseError).
func (e TypeErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, pe := range e {
		out[i] = pe
	}
	return out
}

// field is a known member of an object: its spelling in each format and
// where the model keeps its value. Either spelling is accepted in either
// format, because agents editing a file often use the other dialect's name
// and silently dropping e.g. a dependency would be worse than accepting it;
// the spelling found is kept on write-back.
type field[T any] struct {
	snake, camel string
	val          func(*T) any // *string, *[]string, *bool, number, *QualityChecks or *[]Story
}

// number is a whole-number field and whether the file gave it: an explicit
// 0 is invalid (users who write 0 usually mean "highest"), an absent one
// means "not given".
type number struct {
	n     *int
	given *bool
}

// object is one kind of object of a prd.json: its known fields, and its
// canonical layout in each format — every field in order, those marked "?"
// written only when set, so a generated file shows the others even empty.
type object[T any] struct {
	fields []field[T]
	layout [2]string
}

func (o *object[T]) lookup(key string) int {
	for i, f := range o.fields {
		if key == f.snake || key == f.camel {
			return i
		}
	}
	return -1
}

// name is a field's spelling in a format.
func (o *object[T]) name(snake string, f Format) string {
	if f == formatCamel {
		return o.fields[o.lookup(snake)].camel
	}
	return snake
}

var topObject = &object[PRD]{
	fields: []field[PRD]{
		{"project", "project", func(p *PRD) any { return &p.Project }},
		{"feature", "feature", func(p *PRD) any { return &p.Feature }},
		{"branch_name", "branchName", func(p *PRD) any { return &p.BranchName }},
		{"version", "version", func(p *PRD) any { return &p.Version }},
		{"description", "description", func(p *PRD) any { return &p.Description }},
		{"user_stories", "userStories", func(p *PRD) any { return &p.Stories }},
		{"technical_requirements", "technicalRequirements", func(p *PRD) any { return &p.TechnicalRequirements }},
		{"quality_checks", "qualityChecks", func(p *PRD) any { return &p.QualityChecks }},
		{"protected", "protected", func(p *PRD) any { return &p.Protected }},
		{"created_at", "createdAt", func(p *PRD) any { return &p.CreatedAt }},
		{"updated_at", "updatedAt", func(p *PRD) any { return &p.UpdatedAt }},
	},
	layout: [2]string{
		formatSnake: "project feature branch_name version description? user_stories technical_requirements quality_checks protected? created_at updated_at",
		formatCamel: "project feature? branchName version? description userStories technicalRequirements? qualityChecks? protected? createdAt? updatedAt?",
	},
}

var storyObject = &object[Story]{
	fields: []field[Story]{
		{"id", "id", func(s *Story) any { return &s.ID }},
		{"title", "title", func(s *Story) any { return &s.Title }},
		{"description", "description", func(s *Story) any { return &s.Description }},
		{"acceptance_criteria", "acceptanceCriteria", func(s *Story) any { return &s.AcceptanceCriteria }},
		{"passes", "passes", func(s *Story) any { return &s.Passes }},
		{"priority", "priority", func(s *Story) any { return number{&s.Priority, &s.priorityGiven} }},
		{"depends_on", "dependsOn", func(s *Story) any { return &s.DependsOn }},
		{"complexity", "complexity", func(s *Story) any { return number{&s.Complexity, &s.complexityGiven} }},
		{"notes", "notes", func(s *Story) any { return &s.Notes }},
		{"checks", "checks", func(s *Story) any { return &s.Checks }},
		{"allow_gate_changes", "allowGateChanges", func(s *Story) any { return &s.AllowGateChanges }},
		{"allow_test_changes", "allowTestChanges", func(s *Story) any { return &s.AllowTestChanges }},
		{"review", "review", func(s *Story) any { return &s.Review }},
		{"agent", "agent", func(s *Story) any { return &s.Agent }},
		{"model", "model", func(s *Story) any { return &s.Model }},
		{"critical", "critical", func(s *Story) any { return &s.Critical }},
	},
	layout: [2]string{
		formatSnake: "id title description acceptance_criteria priority? depends_on complexity? passes notes? checks? allow_gate_changes? allow_test_changes? review? agent? model? critical?",
		formatCamel: "id title description acceptanceCriteria priority? passes notes dependsOn? complexity? checks? allowGateChanges? allowTestChanges? review? agent? model? critical?",
	},
}

var qualityObject = &object[QualityChecks]{
	fields: []field[QualityChecks]{
		{"typecheck", "typecheck", func(q *QualityChecks) any { return &q.Typecheck }},
		{"lint", "lint", func(q *QualityChecks) any { return &q.Lint }},
		{"test", "test", func(q *QualityChecks) any { return &q.Test }},
		{"build", "build", func(q *QualityChecks) any { return &q.Build }},
	},
	layout: [2]string{formatSnake: "typecheck lint test build", formatCamel: "typecheck lint test build"},
}

// source is where a parsed object came from: the file, the object in it,
// the file's spelling of each known field it has (by snake_case name),
// and the object's model as the file gave it. Marshal edits only what
// changed since, in place, so the rest of the file stays byte for byte.
type source[T any] struct {
	doc  string
	obj  gjson.Result // Raw is the object's text, Index its offset in doc
	keys map[string]string
	was  T
}

// key is the file's spelling of a field, "" when the object lacks it or
// was not parsed.
func (s *source[T]) key(name string) string {
	if s == nil {
		return ""
	}
	return s.keys[name]
}

var bom = []byte("\xef\xbb\xbf")

// Parse decodes a prd.json and detects its format from the stories key.
// name only labels errors. Parse checks JSON syntax and field types; call
// Validate for the rules between stories.
func Parse(name string, data []byte) (*PRD, error) {
	p, err := ParseAll(name, data)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ParseAll is Parse that, when the only problems are fields of the wrong
// type, still returns the document (those fields left zero) beside a
// TypeErrors naming every one: `ralph prd validate` checks the rules
// between stories on it too.
func ParseAll(name string, data []byte) (*PRD, error) {
	// Some Windows editors add a byte order mark; it is invisible to the
	// user, so positions are reported as if it were not there.
	data = bytes.TrimPrefix(data, bom)
	ps := &parser{name: name, data: data}
	if bytes.HasPrefix(data, []byte("\xff\xfe")) || bytes.HasPrefix(data, []byte("\xfe\xff")) {
		return nil, ps.errAt(0, "the file starts with a UTF-16 byte order mark: save it as UTF-8")
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, ps.errAt(off, "invalid UTF-8 (byte 0x%02x): save the file as UTF-8", data[off])
	}
	start := len(data) - len(bytes.TrimLeft(data, " \t\r\n"))
	if start == len(data) {
		return nil, &ParseError{File: name, Msg: `empty file; a prd.json is a JSON object with a "user_stories" or "userStories" array`}
	}
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		var se *json.SyntaxError
		if !errors.As(err, &se) {
			return nil, ps.errAt(start, "%s", err.Error())
		}
		off := int(se.Offset)
		// The decoder reports the offset after the offending byte; point
		// at the byte itself, except at end of input.
		if off > 0 && off <= len(data) && !(off == len(data) && se.Error() == "unexpected end of JSON input") {
			off--
		}
		if bytes.HasPrefix(data[off:], bom) {
			// An invisible character: the decoder's "invalid character
			// 'ï'" would not tell the user what to look for.
			return nil, ps.errAt(off, "a byte order mark (U+FEFF) where JSON is expected; only the file's first bytes may be one: remove it")
		}
		return nil, ps.errAt(off, "%s", se.Error())
	}
	// The document is valid JSON from here on: gjson walks it, with each
	// key's and value's offset for the messages and the write-back.
	ps.doc = string(data)
	top := gjson.Parse(ps.doc)
	if !top.IsObject() {
		return nil, ps.errAt(top.Index, "top level must be a JSON object, got %s", kind(top))
	}
	p := &PRD{name: name}
	src, _, err := read(ps, top, topObject, p, "", strconv.Quote)
	if err != nil {
		return nil, err
	}
	switch src.keys["user_stories"] {
	case "":
		return nil, &ParseError{File: name, Msg: `no "user_stories" (snake_case) or "userStories" (camelCase) array; not a prd.json?`}
	case "userStories":
		p.Format = formatCamel
	}
	p.src, src.was = src, *p
	src.was.Stories, src.was.TechnicalRequirements, src.was.Protected = slices.Clone(p.Stories), slices.Clone(p.TechnicalRequirements), slices.Clone(p.Protected)
	if len(ps.typeErrs) > 0 {
		sort.SliceStable(ps.typeErrs, func(i, j int) bool { return ps.typeErrs[i].Offset < ps.typeErrs[j].Offset })
		return p, ps.typeErrs
	}
	return p, nil
}

// parser reads one file. A field of the wrong type is collected in
// typeErrs and the parse goes on; a problem with the document's shape
// (a repeated key, one field spelt twice) ends it.
type parser struct {
	name     string
	data     []byte
	doc      string
	typeErrs TypeErrors
}

func (ps *parser) errAt(off int, format string, args ...any) *ParseError {
	line, col := position(ps.data, off)
	return &ParseError{File: ps.name, Line: line, Column: col, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (ps *parser) typeErr(off int, format string, args ...any) {
	ps.typeErrs = append(ps.typeErrs, ps.errAt(off, format, args...))
}

// position turns a byte offset into a 1-based line and character column.
func position(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col = 1 + utf8.RuneCount(before[lineStart:])
	return line, col
}

type member struct {
	key  string
	k, v gjson.Result
	i    int // the field's index, -1 if unknown
}

// read decodes obj's known members into v and tells where it came from.
// ctx starts messages about the object, label names one of its members.
func read[T any](ps *parser, obj gjson.Result, o *object[T], v *T, ctx string, label func(key string) string) (*source[T], []member, error) {
	var ms []member
	var err error
	first := map[string]int{}
	obj.ForEach(func(k, val gjson.Result) bool {
		key := unquote(k.Raw)
		// encoding/json would silently keep the last of two equal keys;
		// an edited file with a repeated key is almost always a mistake.
		if at, dup := first[key]; dup {
			line, _ := position(ps.data, at)
			err = ps.errAt(k.Index, "duplicate key %q (first on line %d)", key, line)
			return false
		}
		first[key] = k.Index
		ms = append(ms, member{key: key, k: k, v: val, i: o.lookup(key)})
		return true
	})
	if err != nil {
		return nil, nil, err
	}
	src := &source[T]{doc: ps.doc, obj: obj, keys: map[string]string{}}
	for _, m := range ms {
		if m.i < 0 {
			continue
		}
		name := o.fields[m.i].snake
		if prev, two := src.keys[name]; two {
			return nil, nil, ps.errAt(m.k.Index, "%s%q and %q are the same field; keep one", ctx, prev, m.key)
		}
		src.keys[name] = m.key
	}
	for _, m := range ms {
		if m.i >= 0 {
			if err := ps.decode(o.fields[m.i].val(v), m, label(m.key)); err != nil {
				return nil, nil, err
			}
		}
	}
	return src, ms, nil
}

// decode reads a member's value into the model; null leaves it zero.
func (ps *parser) decode(dst any, m member, at string) error {
	v := m.v
	if v.Type == gjson.Null {
		return nil
	}
	switch dst := dst.(type) {
	case *string:
		if v.Type != gjson.String {
			ps.typeErr(v.Index, "%s must be a string, got %s", at, describe(v))
			return nil
		}
		*dst = unquote(v.Raw)
	case *[]string:
		*dst = ps.strings(v, at)
	case *bool:
		if !v.IsBool() {
			ps.typeErr(v.Index, "%s must be true or false, got %s", at, describe(v))
			return nil
		}
		*dst = v.Bool()
	case number:
		*dst.n, *dst.given = ps.integer(v, at)
	case *QualityChecks:
		return ps.quality(dst, m)
	case *[]Story:
		return ps.stories(dst, m)
	}
	return nil
}

func (ps *parser) strings(v gjson.Result, at string) []string {
	if !v.IsArray() {
		ps.typeErr(v.Index, "%s must be an array of strings, got %s", at, describe(v))
		return nil
	}
	var out []string
	ok := true
	v.ForEach(func(_, e gjson.Result) bool {
		if e.Type != gjson.String {
			ps.typeErr(e.Index, "%s[%d] must be a string, got %s", at, len(out), describe(e))
			ok = false
			return false
		}
		out = append(out, unquote(e.Raw))
		return true
	})
	if !ok {
		return nil
	}
	return out
}

// integer accepts whole numbers written any way JSON allows (2, 2.0, 2e0).
// The range is checked by Validate so that all range problems are reported
// together.
func (ps *parser) integer(v gjson.Result, at string) (int, bool) {
	if v.Type != gjson.Number {
		ps.typeErr(v.Index, "%s must be a whole number, got %s", at, describe(v))
		return 0, false
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 32); err == nil {
		return int(n), true
	}
	f, err := strconv.ParseFloat(v.Raw, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		ps.typeErr(v.Index, "%s must be a whole number between %d and %d, got %s", at, math.MinInt32, math.MaxInt32, describe(v))
		return 0, false
	}
	return int(f), true
}

func (ps *parser) quality(q *QualityChecks, m member) error {
	if !m.v.IsObject() {
		ps.typeErr(m.v.Index, "%q must be an object with typecheck, lint, test and build commands, got %s", m.key, describe(m.v))
		return nil
	}
	label := func(key string) string { return strconv.Quote(m.key + "." + key) }
	_, ms, err := read(ps, m.v, qualityObject, q, strconv.Quote(m.key)+": ", label)
	for _, qm := range ms {
		if qm.i < 0 {
			// A misspelt or invented gate would be silently not run, and
			// stories would pass on the agent's word alone.
			ps.typeErr(qm.k.Index, "%s is not a quality check: the known ones are typecheck, lint, test and build (a story's own commands go in its \"checks\", other gates in .ralph/config.yaml)", label(qm.key))
		}
	}
	return err
}

func (ps *parser) stories(dst *[]Story, m member) error {
	if !m.v.IsArray() {
		ps.typeErr(m.v.Index, "%q must be an array of story objects, got %s", m.key, describe(m.v))
		return nil
	}
	var err error
	i := 0
	m.v.ForEach(func(_, e gjson.Result) bool {
		where := fmt.Sprintf("%s[%d]", m.key, i)
		i++
		if !e.IsObject() {
			ps.typeErr(e.Index, "%s must be a story object, got %s", where, describe(e))
			return true
		}
		// Name the story by its id in every message when the id is
		// readable, wherever the id sits among the keys.
		ctx := where + ": "
		if id := e.Get("id"); id.Type == gjson.String && unquote(id.Raw) != "" {
			ctx = fmt.Sprintf("%s (%s): ", where, shortID(unquote(id.Raw)))
		}
		var s Story
		s.src, _, err = read(ps, e, storyObject, &s, ctx, func(key string) string { return ctx + strconv.Quote(key) })
		if err != nil {
			return false
		}
		s.src.was = s.clone()
		*dst = append(*dst, s)
		return true
	})
	return err
}

// unquote decodes a JSON string literal of a valid document.
func unquote(raw string) string {
	if !strings.Contains(raw, `\`) {
		return raw[1 : len(raw)-1]
	}
	var s string
	_ = json.Unmarshal([]byte(raw), &s)
	return s
}

func kind(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return "string"
	case gjson.Number:
		return "number"
	case gjson.True, gjson.False:
		return "boolean"
	case gjson.Null:
		return "null"
	}
	if v.IsObject() {
		return "object"
	}
	return "array"
}

// describe shows the offending value when it is short enough to help.
func describe(v gjson.Result) string {
	k := kind(v)
	switch k {
	case "object", "array", "null":
		return k
	}
	s := v.Raw
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:37]) + "..."
	}
	return k + " " + s
}
