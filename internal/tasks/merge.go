package tasks

import (
	"bytes"
	"strings"
)

// MergeEdits brings an agent's edits of a copy of a task file into the
// file as it is now: the agent was given sent and left got, while cur may
// have changed meanwhile (`ralph task add` by a person, say). Lines are
// matched by task id (lines without one by their text). A line the agent
// changed or removed takes the agent's version when cur still has the one
// it was sent; a line both changed keeps cur's and is reported in
// conflicts, as is a task the agent changed that cur no longer has. Lines
// the agent added are appended in its order. Everything else is cur's,
// in cur's order.
func MergeEdits(sent, got, cur []byte) (merged []byte, conflicts []string) {
	if bytes.Equal(sent, cur) {
		return got, nil
	}
	if bytes.Equal(sent, got) {
		return cur, nil
	}
	s, g, c := keyedLines(sent), keyedLines(got), keyedLines(cur)
	sm, gm, cm := s.byKey(), g.byKey(), c.byKey()
	var out bytes.Buffer
	put := func(line []byte) {
		out.Write(line)
		out.WriteByte('\n')
	}
	for _, l := range c {
		was, inSent := sm[l.key]
		now, inGot := gm[l.key]
		switch {
		case !inSent || inGot && bytes.Equal(now, was):
			put(l.text) // not the agent's business
		case !bytes.Equal(l.text, was):
			conflicts = append(conflicts, l.name())
			put(l.text)
		case inGot:
			put(now)
		}
	}
	for _, l := range s {
		if _, inCur := cm[l.key]; !inCur {
			if now, inGot := gm[l.key]; !inGot || !bytes.Equal(now, l.text) {
				conflicts = append(conflicts, l.name())
			}
		}
	}
	for _, l := range g {
		if _, inSent := sm[l.key]; inSent {
			continue
		}
		if have, inCur := cm[l.key]; inCur {
			if !bytes.Equal(have, l.text) {
				conflicts = append(conflicts, l.name())
			}
			continue
		}
		put(l.text)
	}
	return out.Bytes(), conflicts
}

type keyedLine struct {
	key  string // "id:" + the task's id, or "line:" + the text
	text []byte
}

func (l keyedLine) name() string {
	if id, ok := strings.CutPrefix(l.key, "id:"); ok {
		return id
	}
	return string(l.text)
}

type keyed []keyedLine

func (k keyed) byKey() map[string][]byte {
	m := make(map[string][]byte, len(k))
	for _, l := range k {
		if _, dup := m[l.key]; !dup {
			m[l.key] = l.text
		}
	}
	return m
}

// keyedLines are data's non-blank lines with their keys.
func keyedLines(data []byte) keyed {
	var out keyed
	eachLine(data, func(_ int, line []byte, _ bool) {
		key := "line:" + string(line)
		if t, _ := parseLine(line); t != nil && t.ID != "" {
			key = "id:" + t.ID
		}
		out = append(out, keyedLine{key: key, text: line})
	})
	return out
}
