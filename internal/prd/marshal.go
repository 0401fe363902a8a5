package prd

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Marshal writes the PRD back in the format it was read in. A parsed PRD is
// written as its own bytes with only the changed values replaced (and new
// fields such as a camelCase story's first "passes" added after the last
// key, in the file's own spacing), so a write-back after MarkPassed shows up
// in a diff as the passes flags and nothing else, whatever the file's
// indentation or line breaks. If stories were added, removed or reordered,
// the stories array is written in the format's canonical layout (keeping
// the fields ralph does not know); a PRD that was not parsed (Template, or
// one built in Go) is written wholly in it.
func (p *PRD) Marshal() ([]byte, error) {
	w := writer{f: p.format(), nl: "\n"}
	if p.src == nil {
		return []byte(w.pretty(canonical(w, p, topObject, true), "") + "\n"), nil
	}
	doc := p.src.doc
	if strings.Contains(doc, "\r\n") {
		w.nl = "\r\n"
	}
	return []byte(doc[:p.src.obj.Index] + edit(w, p.src, topObject, p)), nil
}

// writer is how a write-back writes: in which format, with which line end.
type writer struct {
	f  Format
	nl string
}

// edit is the text of a parsed object brought up to date with its model
// now: a member whose field changed gets the new value in its place; a
// field the object lacked and that is now set is added after the last
// member, with the separator and key spacing the object already uses.
// Every other byte stays as written.
func edit[T any](w writer, src *source[T], o *object[T], now *T) string {
	doc, obj := src.doc, src.obj
	changed := false
	for _, f := range o.fields {
		changed = changed || !same(f.val(&src.was), f.val(now))
	}
	if !changed {
		return obj.Raw
	}
	var b strings.Builder
	b.Grow(len(obj.Raw) + 64)
	at := obj.Index // doc is copied up to here
	present := make([]bool, len(o.fields))
	var ms []member
	obj.ForEach(func(k, v gjson.Result) bool {
		ms = append(ms, member{k: k, v: v})
		i := o.lookup(unquote(k.Raw))
		if i < 0 {
			return true
		}
		present[i] = true
		was, cur := o.fields[i].val(&src.was), o.fields[i].val(now)
		var text string
		switch cur := cur.(type) {
		case *QualityChecks:
			if v.IsObject() {
				text = edit(w, &source[QualityChecks]{doc: doc, obj: v, was: *was.(*QualityChecks)}, qualityObject, cur)
			}
		case *[]Story:
			if v.IsArray() && inPlace(*was.(*[]Story), *cur) {
				text = w.stories(doc, v, *cur)
			}
		}
		if text == "" {
			if same(was, cur) {
				return true
			}
			text = w.pretty(encode(w, cur), lineIndent(doc, k.Index))
		}
		b.WriteString(doc[at:v.Index])
		b.WriteString(text)
		at = end(v)
		return true
	})
	var added [][2]string // key and value, compact
	for _, name := range strings.Fields(o.layout[w.f]) {
		name = strings.TrimSuffix(name, "?")
		if i := o.lookup(name); !present[i] && !isZero(o.fields[i].val(now)) {
			added = append(added, [2]string{jsonOf(name), encode(w, o.fields[i].val(now))})
		}
	}
	if len(added) > 0 && len(ms) == 0 { // no spacing to copy: the canonical layout decides
		return w.pretty(canonical(w, now, o, false), lineIndent(doc, obj.Index))
	}
	if len(added) > 0 {
		last := ms[len(ms)-1]
		sep := "," + doc[obj.Index+1:last.k.Index]
		if len(ms) >= 2 {
			sep = doc[end(ms[len(ms)-2].v):last.k.Index]
		}
		b.WriteString(doc[at:end(last.v)])
		for _, kv := range added {
			b.WriteString(sep + kv[0] + doc[end(last.k):last.v.Index] + w.pretty(kv[1], lineIndent(doc, last.k.Index)))
		}
		at = end(last.v)
	}
	b.WriteString(doc[at:end(obj)])
	return b.String()
}

// stories is a parsed stories array brought up to date with the model's
// stories, which are still the file's, in its order: only the changed
// ones are edited.
func (w writer) stories(doc string, arr gjson.Result, stories []Story) string {
	var b strings.Builder
	b.Grow(len(arr.Raw) + 64)
	at := arr.Index
	for i := range stories {
		if s := &stories[i]; !s.Equal(&s.src.was) {
			b.WriteString(doc[at:s.src.obj.Index] + edit(w, s.src, storyObject, s))
			at = end(s.src.obj)
		}
	}
	b.WriteString(doc[at:end(arr)])
	return b.String()
}

// inPlace tells whether stories are the parsed ones (was), in the file's
// order, whatever their fields now.
func inPlace(was, stories []Story) bool {
	if len(stories) != len(was) {
		return false
	}
	for i := range stories {
		if stories[i].src != was[i].src {
			return false
		}
	}
	return true
}

// canonical is an object in the format's canonical layout, compact; all
// writes the fields not marked "?" even when unset.
func canonical[T any](w writer, v *T, o *object[T], all bool) string {
	b := []byte{'{'}
	for _, name := range strings.Fields(o.layout[w.f]) {
		name, optional := strings.CutSuffix(name, "?")
		val := o.fields[o.lookup(name)].val(v)
		if (optional || !all) && isZero(val) {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(append(append(b, jsonOf(name)...), ':'), encode(w, val)...)
	}
	return string(append(b, '}'))
}

// encode is a field's value as JSON, compact: stories added, removed or
// reordered are written in the canonical layout, those from a file with
// the fields ralph does not know.
func encode(w writer, v any) string {
	switch v := v.(type) {
	case *[]string:
		if len(*v) == 0 {
			return "[]" // not null: a generated file shows the list to fill in
		}
		return jsonOf(*v)
	case number:
		return jsonOf(*v.n)
	case *QualityChecks:
		return canonical(w, v, qualityObject, true)
	case *[]Story:
		texts := make([]string, len(*v))
		for i := range *v {
			if s := &(*v)[i]; s.src != nil {
				texts[i] = edit(w, s.src, storyObject, s)
			} else {
				texts[i] = canonical(w, s, storyObject, true)
			}
		}
		return "[" + strings.Join(texts, ",") + "]"
	}
	return jsonOf(v) // *string, *bool
}

// isZero tells whether a field is unset: empty, false, an empty list, or
// a number the file did not give.
func isZero(v any) bool {
	switch v := v.(type) {
	case *[]string:
		return len(*v) == 0
	case *[]Story:
		return len(*v) == 0
	case number:
		return *v.n == 0 && !*v.given
	}
	return reflect.ValueOf(v).Elem().IsZero()
}

// same tells whether two values of a field are equal (an empty list and
// none are).
func same(a, b any) bool {
	switch a := a.(type) {
	case *string:
		return *a == *b.(*string)
	case *bool:
		return *a == *b.(*bool)
	case *[]string:
		return slices.Equal(*a, *b.(*[]string))
	case number:
		b := b.(number)
		return *a.n == *b.n && *a.given == *b.given
	case *QualityChecks:
		return *a == *b.(*QualityChecks)
	case *[]Story:
		return len(*a) == 0 && len(*b.(*[]Story)) == 0 // else inPlace and Equal decide
	}
	return false
}

// jsonOf encodes without HTML escaping: gate commands such as `a && b`
// must stay readable in the file.
func jsonOf(v any) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(v) // strings, lists of strings and numbers always encode
	return strings.TrimSuffix(b.String(), "\n")
}

// flatArray matches, in json.Indent's output, an array of scalars (one
// element per line) — or a string, matched whole so that a bracket inside
// one is never taken for an array.
var flatArray = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|\[\s*(?:(?:"(?:[^"\\]|\\.)*"|[^\s\[\]{},"]+)\s*,\s*)*(?:"(?:[^"\\]|\\.)*"|[^\s\[\]{},"]+)\s*\]`)

// pretty lays out JSON with two-space indentation, but keeps arrays of
// scalars on one line (["a", "b"]): that is how people and the bash Ralph
// write acceptance criteria and dependencies. Every line after the first
// starts with indent.
func (w writer) pretty(js string, indent string) string {
	var b bytes.Buffer
	_ = json.Indent(&b, []byte(js), indent, "  ") // js is valid: it was encoded or parsed
	out := flatArray.ReplaceAllFunc(b.Bytes(), func(m []byte) []byte {
		if m[0] == '"' {
			return m
		}
		var items []string
		gjson.ParseBytes(m).ForEach(func(_, e gjson.Result) bool {
			items = append(items, e.Raw)
			return true
		})
		return []byte("[" + strings.Join(items, ", ") + "]")
	})
	return strings.ReplaceAll(string(out), "\n", w.nl)
}

// lineIndent is the leading white space of the line holding doc[off].
func lineIndent(doc string, off int) string {
	line := doc[strings.LastIndexByte(doc[:off], '\n')+1 : off]
	return line[:len(line)-len(strings.TrimLeft(line, " \t"))]
}

// end is the offset just past a value in its document.
func end(v gjson.Result) int { return v.Index + len(v.Raw) }

// clone copies a story, its lists included, as parsed (without its source).
func (s *Story) clone() Story {
	c := *s
	c.src = nil
	c.AcceptanceCriteria = slices.Clone(s.AcceptanceCriteria)
	c.DependsOn = slices.Clone(s.DependsOn)
	c.Checks = slices.Clone(s.Checks)
	return c
}

// Equal compares every field that is written to the file (TestStoryEqual
// makes sure a new field is not forgotten here nor in storyObject).
func (s *Story) Equal(o *Story) bool {
	return s.ID == o.ID && s.Title == o.Title && s.Description == o.Description &&
		slices.Equal(s.AcceptanceCriteria, o.AcceptanceCriteria) && s.Passes == o.Passes &&
		s.Priority == o.Priority && s.priorityGiven == o.priorityGiven &&
		slices.Equal(s.DependsOn, o.DependsOn) &&
		s.Complexity == o.Complexity && s.complexityGiven == o.complexityGiven &&
		s.Notes == o.Notes && slices.Equal(s.Checks, o.Checks) &&
		s.AllowGateChanges == o.AllowGateChanges && s.AllowTestChanges == o.AllowTestChanges && s.Agent == o.Agent && s.Model == o.Model &&
		s.Critical == o.Critical && s.Review == o.Review
}
