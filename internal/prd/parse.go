package prd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
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

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Field tables. Each known field has a snake_case and a camelCase spelling;
// either is accepted in either format, because agents editing a file often
// use the other dialect's name and silently dropping e.g. a dependency would
// be worse than accepting it. The spelling found is kept on write-back.
type fieldSpec struct{ snake, camel string }

type objSpec struct {
	fields []fieldSpec
	// order is the canonical key order per format, used for objects that
	// were not parsed and for known fields a parsed object lacked.
	order [2][]int
	// always marks fields written even when zero in a fresh object, so that
	// a generated file shows every field a person may want to fill in.
	always [2][]bool
}

func (s *objSpec) lookup(key string) int {
	for i, f := range s.fields {
		if key == f.snake || key == f.camel {
			return i
		}
	}
	return -1
}

func (s *objSpec) name(id int, f Format) string {
	if f == FormatCamel {
		return s.fields[id].camel
	}
	return s.fields[id].snake
}

func flags(n int, ids ...int) []bool {
	b := make([]bool, n)
	for _, id := range ids {
		b[id] = true
	}
	return b
}

const (
	tProject = iota
	tFeature
	tBranch
	tVersion
	tDescription
	tStories
	tTechReq
	tQuality
	tCreated
	tUpdated
	nTop
)

var topSpec = &objSpec{
	fields: []fieldSpec{
		tProject:     {"project", "project"},
		tFeature:     {"feature", "feature"},
		tBranch:      {"branch_name", "branchName"},
		tVersion:     {"version", "version"},
		tDescription: {"description", "description"},
		tStories:     {"user_stories", "userStories"},
		tTechReq:     {"technical_requirements", "technicalRequirements"},
		tQuality:     {"quality_checks", "qualityChecks"},
		tCreated:     {"created_at", "createdAt"},
		tUpdated:     {"updated_at", "updatedAt"},
	},
	order: [2][]int{
		FormatSnake: {tProject, tFeature, tBranch, tVersion, tDescription, tStories, tTechReq, tQuality, tCreated, tUpdated},
		FormatCamel: {tProject, tFeature, tBranch, tVersion, tDescription, tStories, tTechReq, tQuality, tCreated, tUpdated},
	},
	always: [2][]bool{
		FormatSnake: flags(nTop, tProject, tFeature, tBranch, tVersion, tStories, tTechReq, tQuality, tCreated, tUpdated),
		FormatCamel: flags(nTop, tProject, tBranch, tDescription, tStories),
	},
}

const (
	sID = iota
	sTitle
	sDescription
	sAC
	sPasses
	sPriority
	sDeps
	sComplexity
	sNotes
	sChecks
	sAllowGateChanges
	sAgent
	sModel
	sCritical
	nStory
)

var storySpec = &objSpec{
	fields: []fieldSpec{
		sID:               {"id", "id"},
		sTitle:            {"title", "title"},
		sDescription:      {"description", "description"},
		sAC:               {"acceptance_criteria", "acceptanceCriteria"},
		sPasses:           {"passes", "passes"},
		sPriority:         {"priority", "priority"},
		sDeps:             {"depends_on", "dependsOn"},
		sComplexity:       {"complexity", "complexity"},
		sNotes:            {"notes", "notes"},
		sChecks:           {"checks", "checks"},
		sAllowGateChanges: {"allow_gate_changes", "allowGateChanges"},
		sAgent:            {"agent", "agent"},
		sModel:            {"model", "model"},
		sCritical:         {"critical", "critical"},
	},
	order: [2][]int{
		FormatSnake: {sID, sTitle, sDescription, sAC, sPriority, sDeps, sComplexity, sPasses, sNotes, sChecks, sAllowGateChanges, sAgent, sModel, sCritical},
		FormatCamel: {sID, sTitle, sDescription, sAC, sPriority, sPasses, sNotes, sDeps, sComplexity, sChecks, sAllowGateChanges, sAgent, sModel, sCritical},
	},
	always: [2][]bool{
		FormatSnake: flags(nStory, sID, sTitle, sDescription, sAC, sDeps, sPasses),
		FormatCamel: flags(nStory, sID, sTitle, sDescription, sAC, sPasses, sNotes),
	},
}

const (
	qTypecheck = iota
	qLint
	qTest
	qBuild
	nQuality
)

var qualitySpec = &objSpec{
	fields: []fieldSpec{
		qTypecheck: {"typecheck", "typecheck"},
		qLint:      {"lint", "lint"},
		qTest:      {"test", "test"},
		qBuild:     {"build", "build"},
	},
	order: [2][]int{
		FormatSnake: {qTypecheck, qLint, qTest, qBuild},
		FormatCamel: {qTypecheck, qLint, qTest, qBuild},
	},
	always: [2][]bool{
		FormatSnake: flags(nQuality, qTypecheck, qLint, qTest, qBuild),
		FormatCamel: flags(nQuality, qTypecheck, qLint, qTest, qBuild),
	},
}

// layout is a parsed object's members in file order. Unknown members keep
// their raw value; known ones keep it only to write a null back as null.
type layout struct {
	members []laid
	// open and close are the offsets of the object's braces in the parsed
	// file, for Marshal's in-place write-back.
	open, close int
	// doc identifies the parse that made the layout: a story moved in from
	// another parsed file must not be edited at this file's offsets.
	doc *[]byte
	// parsed is a story as the file says it (a story's layout only): a
	// story still equal to it needs no edit, so a write-back looks only at
	// the stories that changed.
	parsed *Story
}

type laid struct {
	key    string
	id     int // index into the objSpec, -1 if unknown
	raw    json.RawMessage
	keyOff int // offset of the key's opening quote in the parsed file
	valOff int // offset of the value's first byte
}

func (l *layout) key(id int) (string, bool) {
	if l == nil {
		return "", false
	}
	for _, m := range l.members {
		if m.id == id {
			return m.key, true
		}
	}
	return "", false
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
	start := skipSpace(data, 0)
	if start == len(data) {
		return nil, &ParseError{File: name, Msg: `empty file; a prd.json is a JSON object with a "user_stories" or "userStories" array`}
	}
	var probe json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off := int(se.Offset)
			// The decoder reports the offset after the offending byte; point
			// at the byte itself, except at end of input.
			if off > 0 && off <= len(data) && !(off == len(data) && se.Error() == "unexpected end of JSON input") {
				off--
			}
			return nil, ps.errAt(off, "%s", se.Error())
		}
		return nil, ps.errAt(start, "%s", err.Error())
	}
	if data[start] != '{' {
		return nil, ps.errAt(start, "top level must be a JSON object, got %s", kindOf(data[start:]))
	}
	members, err := ps.object(data[start:], start)
	if err != nil {
		return nil, err
	}

	p := &PRD{name: name, src: data}
	storiesKey := ""
	for _, m := range members {
		if id := topSpec.lookup(m.key); id == tStories {
			storiesKey = m.key
		}
	}
	if storiesKey == "" {
		return nil, &ParseError{File: name, Msg: `no "user_stories" (snake_case) or "userStories" (camelCase) array; not a prd.json?`}
	}
	if storiesKey == "userStories" {
		p.Format = FormatCamel
	}

	laidOut, err := ps.known(members, topSpec, "")
	if err != nil {
		return nil, err
	}
	p.top = ps.layout(laidOut, start, data[start:])
	for i, m := range members {
		id := laidOut[i].id
		var err error
		at := ps.at(m.key, "")
		switch id {
		case tProject:
			p.Project, err = ps.str(m, at)
		case tFeature:
			p.Feature, err = ps.str(m, at)
		case tBranch:
			p.BranchName, err = ps.str(m, at)
		case tVersion:
			p.Version, err = ps.str(m, at)
		case tDescription:
			p.Description, err = ps.str(m, at)
		case tTechReq:
			p.TechnicalRequirements, err = ps.strs(m, at)
		case tCreated:
			p.CreatedAt, err = ps.str(m, at)
		case tUpdated:
			p.UpdatedAt, err = ps.str(m, at)
		case tQuality:
			err = ps.quality(p, m, at)
		case tStories:
			p.Stories, p.storyCount, err = ps.stories(m, at)
		}
		if err = ps.keep(err); err != nil {
			return nil, err
		}
	}
	if len(ps.typeErrs) > 0 {
		sort.SliceStable(ps.typeErrs, func(i, j int) bool { return ps.typeErrs[i].Offset < ps.typeErrs[j].Offset })
		return p, ps.typeErrs
	}
	return p, nil
}

type parser struct {
	name     string
	data     []byte
	typeErrs TypeErrors
}

// keep collects a field's type error and lets the parse go on; any other
// error (the JSON's shape) is returned.
func (ps *parser) keep(err error) error {
	var te *typeError
	if errors.As(err, &te) {
		ps.typeErrs = append(ps.typeErrs, te.ParseError)
		return nil
	}
	return err
}

// typeError is a value of the wrong type: reported, not fatal.
type typeError struct{ *ParseError }

func (ps *parser) typeErrAt(off int, format string, args ...any) error {
	return &typeError{ps.errAt(off, format, args...)}
}

type member struct {
	key    string
	keyOff int // absolute offset of the key's opening quote
	valOff int // absolute offset of the value's first byte
	raw    json.RawMessage
}

func (ps *parser) errAt(off int, format string, args ...any) *ParseError {
	line, col := position(ps.data, off)
	return &ParseError{File: ps.name, Line: line, Column: col, Offset: off, Msg: fmt.Sprintf(format, args...)}
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

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// object splits a syntactically valid JSON object into members with their
// absolute offsets. base is the offset of raw within the file.
func (ps *parser) object(raw []byte, base int) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, ps.errAt(base, "%v", err)
	}
	var ms []member
	seen := map[string]int{}
	for dec.More() {
		keyOff := int(dec.InputOffset())
		for keyOff < len(raw) && (raw[keyOff] == ',' || raw[keyOff] == ' ' || raw[keyOff] == '\t' || raw[keyOff] == '\r' || raw[keyOff] == '\n') {
			keyOff++
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, ps.errAt(base+keyOff, "%v", err)
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, ps.errAt(base+keyOff, "%v", err)
		}
		end := int(dec.InputOffset())
		m := member{key: key, keyOff: base + keyOff, valOff: base + end - len(v), raw: v}
		// encoding/json would silently keep the last of two equal keys;
		// an edited file with a repeated key is almost always a mistake.
		if prev, dup := seen[key]; dup {
			line, _ := position(ps.data, ms[prev].keyOff)
			return nil, ps.errAt(m.keyOff, "duplicate key %q (first on line %d)", key, line)
		}
		seen[key] = len(ms)
		ms = append(ms, m)
	}
	return ms, nil
}

type element struct {
	off int
	raw json.RawMessage
}

func (ps *parser) array(raw []byte, base int) ([]element, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, ps.errAt(base, "%v", err)
	}
	var es []element
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, ps.errAt(base, "%v", err)
		}
		end := int(dec.InputOffset())
		es = append(es, element{off: base + end - len(v), raw: v})
	}
	return es, nil
}

// known maps members to field ids and rejects two spellings of one field.
func (ps *parser) known(ms []member, spec *objSpec, ctx string) ([]laid, error) {
	out := make([]laid, len(ms))
	first := map[int]member{}
	for i, m := range ms {
		id := spec.lookup(m.key)
		if id >= 0 {
			if prev, dup := first[id]; dup {
				return nil, ps.errAt(m.keyOff, "%s%q and %q are the same field; keep one", ctx, prev.key, m.key)
			}
			first[id] = m
		}
		out[i] = laid{key: m.key, id: id, raw: m.raw, keyOff: m.keyOff, valOff: m.valOff}
	}
	return out, nil
}

// layout records an object's members and where its braces are; obj starts
// at the object's '{' (offset base) and may run on past its '}'.
func (ps *parser) layout(ms []laid, base int, obj []byte) *layout {
	return &layout{members: ms, open: base, close: base + len(bytes.TrimRight(obj, " \t\r\n")) - 1, doc: &ps.data}
}

// at labels a field for error messages, e.g. `user_stories[1] (US-002): "priority"`.
func (ps *parser) at(key, ctx string) string {
	return fmt.Sprintf("%s%q", ctx, key)
}

func kindOf(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// describe shows the offending value when it is short enough to help.
func describe(raw []byte) string {
	k := kindOf(raw)
	switch k {
	case "object", "array", "null":
		return k
	}
	s := string(raw)
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:37]) + "..."
	}
	return k + " " + s
}

func isNull(raw []byte) bool { return string(raw) == "null" }

func (ps *parser) str(m member, at string) (string, error) {
	return ps.strAt(m.raw, m.valOff, at)
}

func (ps *parser) strAt(raw []byte, off int, at string) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	if kindOf(raw) != "string" {
		return "", ps.typeErrAt(off, "%s must be a string, got %s", at, describe(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", ps.errAt(off, "%s: %v", at, err)
	}
	return s, nil
}

func (ps *parser) strs(m member, at string) ([]string, error) {
	if isNull(m.raw) {
		return nil, nil
	}
	if kindOf(m.raw) != "array" {
		return nil, ps.typeErrAt(m.valOff, "%s must be an array of strings, got %s", at, describe(m.raw))
	}
	es, err := ps.array(m.raw, m.valOff)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, e := range es {
		if kindOf(e.raw) != "string" {
			return nil, ps.typeErrAt(e.off, "%s[%d] must be a string, got %s", at, i, describe(e.raw))
		}
		s, err := ps.strAt(e.raw, e.off, fmt.Sprintf("%s[%d]", at, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (ps *parser) boolean(m member, at string) (bool, error) {
	switch string(m.raw) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, ps.typeErrAt(m.valOff, "%s must be true or false, got %s", at, describe(m.raw))
}

// integer accepts whole numbers written any way JSON allows (2, 2.0, 2e0);
// given is false only for null. The range is checked by Validate so that all
// range problems are reported together.
func (ps *parser) integer(m member, at string) (v int, given bool, err error) {
	if isNull(m.raw) {
		return 0, false, nil
	}
	if kindOf(m.raw) != "number" {
		return 0, false, ps.typeErrAt(m.valOff, "%s must be a whole number, got %s", at, describe(m.raw))
	}
	if n, err := strconv.ParseInt(string(m.raw), 10, 32); err == nil {
		return int(n), true, nil
	}
	f, err := strconv.ParseFloat(string(m.raw), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, false, ps.typeErrAt(m.valOff, "%s must be a whole number between %d and %d, got %s", at, math.MinInt32, math.MaxInt32, describe(m.raw))
	}
	return int(f), true, nil
}

func (ps *parser) quality(p *PRD, m member, at string) error {
	if isNull(m.raw) {
		p.quality = nil
		return nil
	}
	if kindOf(m.raw) != "object" {
		return ps.typeErrAt(m.valOff, "%s must be an object with typecheck, lint, test and build commands, got %s", at, describe(m.raw))
	}
	ms, err := ps.object(m.raw, m.valOff)
	if err != nil {
		return err
	}
	lay, err := ps.known(ms, qualitySpec, at+": ")
	if err != nil {
		return err
	}
	p.quality = ps.layout(lay, m.valOff, m.raw)
	for i, qm := range ms {
		qat := strconv.Quote(m.key + "." + qm.key)
		if lay[i].id < 0 {
			// A misspelt or invented gate would be silently not run, and
			// stories would pass on the agent's word alone.
			if err := ps.keep(ps.typeErrAt(qm.keyOff, "%s is not a quality check: the known ones are typecheck, lint, test and build (a story's own commands go in its \"checks\", other gates in .ralph/config.yaml)", qat)); err != nil {
				return err
			}
			continue
		}
		var s string
		if lay[i].id >= 0 {
			if s, err = ps.str(qm, qat); ps.keep(err) != nil {
				return err
			}
		}
		switch lay[i].id {
		case qTypecheck:
			p.QualityChecks.Typecheck = s
		case qLint:
			p.QualityChecks.Lint = s
		case qTest:
			p.QualityChecks.Test = s
		case qBuild:
			p.QualityChecks.Build = s
		}
	}
	return nil
}

func (ps *parser) stories(m member, at string) ([]Story, int, error) {
	if isNull(m.raw) {
		return nil, 0, nil
	}
	if kindOf(m.raw) != "array" {
		return nil, 0, ps.typeErrAt(m.valOff, "%s must be an array of story objects, got %s", at, describe(m.raw))
	}
	es, err := ps.array(m.raw, m.valOff)
	if err != nil {
		return nil, 0, err
	}
	var out []Story
	for i, e := range es {
		s, err := ps.story(e, fmt.Sprintf("%s[%d]", m.key, i))
		if err != nil {
			if err = ps.keep(err); err != nil {
				return nil, 0, err
			}
			if s.lay == nil {
				continue // not an object: nothing to read
			}
		}
		out = append(out, s)
	}
	return out, len(es), nil
}

func (ps *parser) story(e element, where string) (Story, error) {
	var s Story
	if kindOf(e.raw) != "object" {
		return s, ps.typeErrAt(e.off, "%s must be a story object, got %s", where, describe(e.raw))
	}
	ms, err := ps.object(e.raw, e.off)
	if err != nil {
		return s, err
	}
	// Name the story by its id in every message when the id is readable,
	// wherever the id sits among the keys.
	ctx := where + ": "
	for _, m := range ms {
		if m.key == "id" && kindOf(m.raw) == "string" {
			var id string
			if json.Unmarshal(m.raw, &id) == nil && id != "" {
				ctx = fmt.Sprintf("%s (%s): ", where, id)
			}
		}
	}
	lay, err := ps.known(ms, storySpec, ctx)
	if err != nil {
		return s, err
	}
	s.lay = ps.layout(lay, e.off, e.raw)
	for i, m := range ms {
		at := ps.at(m.key, ctx)
		var err error
		switch lay[i].id {
		case sID:
			s.ID, err = ps.str(m, at)
		case sTitle:
			s.Title, err = ps.str(m, at)
		case sDescription:
			s.Description, err = ps.str(m, at)
		case sAC:
			s.AcceptanceCriteria, err = ps.strs(m, at)
		case sPasses:
			s.Passes, err = ps.boolean(m, at)
		case sPriority:
			s.Priority, s.priorityGiven, err = ps.integer(m, at)
		case sDeps:
			s.DependsOn, err = ps.strs(m, at)
		case sComplexity:
			s.Complexity, s.complexityGiven, err = ps.integer(m, at)
		case sNotes:
			s.Notes, err = ps.str(m, at)
		case sChecks:
			s.Checks, err = ps.strs(m, at)
		case sAllowGateChanges:
			s.AllowGateChanges, err = ps.boolean(m, at)
		case sAgent:
			s.Agent, err = ps.str(m, at)
		case sModel:
			s.Model, err = ps.str(m, at)
		case sCritical:
			s.Critical, err = ps.boolean(m, at)
		}
		if err = ps.keep(err); err != nil {
			return s, err
		}
	}
	s.lay.parsed = s.clone()
	return s, nil
}
