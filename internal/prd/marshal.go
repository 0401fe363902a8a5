package prd

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Marshal writes the PRD back in the format it was read in. A parsed PRD is
// written as its own bytes with only the changed values replaced (and new
// fields such as a camelCase story's first "passes" added after the last
// key, in the file's own spacing), so a write-back after MarkPassed shows up
// in a diff as the passes flags and nothing else, whatever the file's
// indentation or line breaks. A PRD that was not parsed (Template, or one
// built in Go), or whose stories were added, removed or reordered, gets the
// format's canonical layout, keeping unknown fields and key order.
func (p *PRD) Marshal() ([]byte, error) {
	f := p.Format
	if f != FormatCamel {
		f = FormatSnake
	}
	if out, ok := p.splice(f); ok {
		return out, nil
	}
	var b bytes.Buffer
	writeObject(&b, topSpec, f, p.top, func(id int) ([]byte, bool) { return p.topValue(f, id) })
	out := indent(b.Bytes(), "", "\n")
	return append(out, '\n'), nil
}

// topValue is a top-level field's compact encoding and whether it is zero.
func (p *PRD) topValue(f Format, id int) ([]byte, bool) {
	switch id {
	case tProject:
		return encString(p.Project), p.Project == ""
	case tFeature:
		return encString(p.Feature), p.Feature == ""
	case tBranch:
		return encString(p.BranchName), p.BranchName == ""
	case tVersion:
		return encString(p.Version), p.Version == ""
	case tDescription:
		return encString(p.Description), p.Description == ""
	case tStories:
		var sb bytes.Buffer
		sb.WriteByte('[')
		for i := range p.Stories {
			if i > 0 {
				sb.WriteByte(',')
			}
			s := &p.Stories[i]
			writeObject(&sb, storySpec, f, s.lay, s.value)
		}
		sb.WriteByte(']')
		return sb.Bytes(), len(p.Stories) == 0
	case tTechReq:
		return encStrings(p.TechnicalRequirements), len(p.TechnicalRequirements) == 0
	case tQuality:
		var qb bytes.Buffer
		writeObject(&qb, qualitySpec, f, p.quality, p.QualityChecks.value)
		return qb.Bytes(), p.QualityChecks == (QualityChecks{}) && !hasUnknown(p.quality)
	case tCreated:
		return encString(p.CreatedAt), p.CreatedAt == ""
	case tUpdated:
		return encString(p.UpdatedAt), p.UpdatedAt == ""
	}
	return nil, true
}

// value is a quality check's compact encoding and whether it is empty.
func (q QualityChecks) value(id int) ([]byte, bool) {
	var s string
	switch id {
	case qTypecheck:
		s = q.Typecheck
	case qLint:
		s = q.Lint
	case qTest:
		s = q.Test
	case qBuild:
		s = q.Build
	}
	return encString(s), s == ""
}

// value is a story field's compact encoding and whether it is zero.
func (s *Story) value(id int) ([]byte, bool) {
	switch id {
	case sID:
		return encString(s.ID), s.ID == ""
	case sTitle:
		return encString(s.Title), s.Title == ""
	case sDescription:
		return encString(s.Description), s.Description == ""
	case sAC:
		return encStrings(s.AcceptanceCriteria), len(s.AcceptanceCriteria) == 0
	case sPasses:
		return []byte(strconv.FormatBool(s.Passes)), !s.Passes
	case sPriority:
		return []byte(strconv.Itoa(s.Priority)), s.Priority == 0 && !s.priorityGiven
	case sDeps:
		return encStrings(s.DependsOn), len(s.DependsOn) == 0
	case sComplexity:
		return []byte(strconv.Itoa(s.Complexity)), s.Complexity == 0 && !s.complexityGiven
	case sNotes:
		return encString(s.Notes), s.Notes == ""
	case sChecks:
		return encStrings(s.Checks), len(s.Checks) == 0
	case sAllowGateChanges:
		return []byte(strconv.FormatBool(s.AllowGateChanges)), !s.AllowGateChanges
	case sAgent:
		return encString(s.Agent), s.Agent == ""
	case sModel:
		return encString(s.Model), s.Model == ""
	case sCritical:
		return []byte(strconv.FormatBool(s.Critical)), !s.Critical
	}
	return nil, true
}

func hasUnknown(l *layout) bool {
	if l == nil {
		return false
	}
	for _, m := range l.members {
		if m.id < 0 {
			return true
		}
	}
	return false
}

// writeObject writes one object compactly. value returns a known field's
// encoding and whether it is zero. Keys the original had are all written, in
// their order (a zero value that was null stays null, so an untouched file
// does not churn); known fields it lacked are added only when set, so e.g.
// passes appears in a camelCase story that never had it once it has passed.
func writeObject(b *bytes.Buffer, spec *objSpec, f Format, lay *layout, value func(id int) ([]byte, bool)) {
	b.WriteByte('{')
	first := true
	emit := func(key string, v []byte) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(encString(key))
		b.WriteByte(':')
		b.Write(v)
	}
	present := make([]bool, len(spec.fields))
	if lay != nil {
		for _, m := range lay.members {
			if m.id < 0 {
				var c bytes.Buffer
				if err := json.Compact(&c, m.raw); err != nil {
					emit(m.key, m.raw) // cannot happen: raw came from a valid document
				} else {
					emit(m.key, c.Bytes())
				}
				continue
			}
			present[m.id] = true
			v, zero := value(m.id)
			if zero && isNull(m.raw) {
				v = []byte("null")
			}
			emit(m.key, v)
		}
	}
	for _, id := range spec.order[f] {
		if present[id] {
			continue
		}
		v, zero := value(id)
		if !zero || (lay == nil && spec.always[f][id]) {
			emit(spec.name(id, f), v)
		}
	}
	b.WriteByte('}')
}

// encString encodes without HTML escaping: gate commands such as
// `a && b` must stay readable in the file.
func encString(s string) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func encStrings(ss []string) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(encString(s))
	}
	b.WriteByte(']')
	return b.Bytes()
}
