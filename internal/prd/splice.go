package prd

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
)

// splice writes a parsed PRD as its own file with only the changed values
// replaced and new fields added: every other byte (line breaks inside
// arrays, indentation, key spacing, CRLF) stays as the user wrote it. ok is
// false when p was not parsed, or its stories were added, removed or
// reordered since; Marshal then writes the canonical layout.
func (p *PRD) splice(f Format) ([]byte, bool) {
	if p.src == nil || p.top == nil {
		return nil, false
	}
	sp := &splicer{src: p.src, nl: "\n"}
	if bytes.Contains(p.src, []byte("\r\n")) {
		sp.nl = "\r\n"
	}
	ok := sp.object(p.top, topSpec, f, func(id int) ([]byte, bool) { return p.topValue(f, id) }, func(m laid) (handled, ok bool) {
		switch m.id {
		case tStories:
			if !p.storiesInPlace() {
				return false, true // the whole array is written anew
			}
			for i := range p.Stories {
				s := &p.Stories[i]
				if s.lay.parsed != nil && s.Equal(s.lay.parsed) {
					continue // as the file has it
				}
				if !sp.object(s.lay, storySpec, f, s.value, nil) {
					return true, false
				}
			}
			return true, true
		case tQuality:
			if p.quality == nil || p.quality.doc != p.top.doc {
				return false, true
			}
			return true, sp.object(p.quality, qualitySpec, f, p.QualityChecks.value, nil)
		}
		return false, true
	})
	if !ok {
		return nil, false
	}
	return sp.apply(), true
}

// storiesInPlace tells whether p.Stories are still the file's stories, in
// the file's order, so each can be edited where it stands.
func (p *PRD) storiesInPlace() bool {
	if len(p.Stories) != p.storyCount {
		return false
	}
	last := -1
	for i := range p.Stories {
		lay := p.Stories[i].lay
		if lay == nil || lay.doc != p.top.doc || lay.open <= last {
			return false
		}
		last = lay.open
	}
	return true
}

type splicer struct {
	src   []byte
	nl    string
	edits []edit
}

// edit replaces src[from:to] with text (an insertion when from == to).
type edit struct {
	from, to int
	text     []byte
}

// object records the edits that bring one parsed object up to date: a
// known member whose value changed gets the new value in its place; a
// known field the object lacked and that is now set is added after the last
// member, with the separator and key spacing the object already uses.
// nested handles members it edits itself (handled) and may give up (!ok).
func (sp *splicer) object(lay *layout, spec *objSpec, f Format, value func(int) ([]byte, bool), nested func(laid) (handled, ok bool)) bool {
	present := make([]bool, len(spec.fields))
	for _, m := range lay.members {
		if m.id < 0 {
			continue
		}
		present[m.id] = true
		if nested != nil {
			handled, ok := nested(m)
			if !ok {
				return false
			}
			if handled {
				continue
			}
		}
		v, zero := value(m.id)
		if zero && isNull(m.raw) {
			continue // a null that is still empty stays null
		}
		if sameJSON(m.raw, v) {
			continue
		}
		sp.edits = append(sp.edits, edit{m.valOff, m.valOff + len(m.raw), indent(v, sp.lineIndent(m.keyOff), sp.nl)})
	}
	var added bytes.Buffer
	n := len(lay.members)
	for _, id := range spec.order[f] {
		if present[id] {
			continue
		}
		v, zero := value(id)
		if zero {
			continue
		}
		if n == 0 {
			return false // no spacing to copy: the canonical layout decides
		}
		last := lay.members[n-1]
		var sep []byte
		if n >= 2 {
			prev := lay.members[n-2]
			sep = sp.src[prev.valOff+len(prev.raw) : last.keyOff]
		} else {
			sep = append([]byte{','}, sp.src[lay.open+1:last.keyOff]...)
		}
		added.Write(sep)
		added.Write(encString(spec.name(id, f)))
		added.Write(sp.src[stringEnd(sp.src, last.keyOff):last.valOff])
		added.Write(indent(v, sp.lineIndent(last.keyOff), sp.nl))
	}
	if added.Len() > 0 {
		last := lay.members[n-1]
		end := last.valOff + len(last.raw)
		sp.edits = append(sp.edits, edit{end, end, added.Bytes()})
	}
	return true
}

// lineIndent is the leading white space of the line holding src[off].
func (sp *splicer) lineIndent(off int) string {
	start := bytes.LastIndexByte(sp.src[:off], '\n') + 1
	end := start
	for end < off && (sp.src[end] == ' ' || sp.src[end] == '\t') {
		end++
	}
	return string(sp.src[start:end])
}

func (sp *splicer) apply() []byte {
	sort.SliceStable(sp.edits, func(i, j int) bool { return sp.edits[i].from < sp.edits[j].from })
	var b bytes.Buffer
	b.Grow(len(sp.src) + 64)
	at := 0
	for _, e := range sp.edits {
		b.Write(sp.src[at:e.from])
		b.Write(e.text)
		at = e.to
	}
	b.Write(sp.src[at:])
	return b.Bytes()
}

// sameJSON tells whether the file's value raw already says what the
// compact encoding v says (1.0 and 1, "\u0026" and "&", spacing and line
// breaks all count as the same), so that it is left as written.
func sameJSON(raw, v []byte) bool {
	if bytes.Equal(raw, v) {
		return true
	}
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal(v, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// clone copies a story, its lists included, without its layout.
func (s *Story) clone() *Story {
	c := *s
	c.lay = nil
	c.AcceptanceCriteria = slices.Clone(s.AcceptanceCriteria)
	c.DependsOn = slices.Clone(s.DependsOn)
	c.Checks = slices.Clone(s.Checks)
	return &c
}

// Equal compares every field that is written to the file (TestStoryEqual
// makes sure a new field is not forgotten here).
func (s *Story) Equal(o *Story) bool {
	return s.ID == o.ID && s.Title == o.Title && s.Description == o.Description &&
		slices.Equal(s.AcceptanceCriteria, o.AcceptanceCriteria) && s.Passes == o.Passes &&
		s.Priority == o.Priority && s.priorityGiven == o.priorityGiven &&
		slices.Equal(s.DependsOn, o.DependsOn) &&
		s.Complexity == o.Complexity && s.complexityGiven == o.complexityGiven &&
		s.Notes == o.Notes && slices.Equal(s.Checks, o.Checks) &&
		s.AllowGateChanges == o.AllowGateChanges && s.Agent == o.Agent && s.Model == o.Model &&
		s.Critical == o.Critical
}
