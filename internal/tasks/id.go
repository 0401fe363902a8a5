package tasks

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxIDLen bounds a task id: ids become branch names (task/<id>-<slug>)
// and transcript file names, which file systems and git limit.
const maxIDLen = 128

// idProblem says what is wrong with id, "" if nothing; what names it in
// the message ("id", "task id").
func idProblem(what, id string) string {
	if n := utf8.RuneCountInString(id); n > maxIDLen {
		return fmt.Sprintf("%s is %d characters long; ids are at most %d (they become branch and file names)", what, n, maxIDLen)
	}
	if !wellFormedID(id) {
		return fmt.Sprintf("invalid %s %q: use segments of letters, digits, _ or - separated by single dots (A, A.1, A.1.2)", what, id)
	}
	return ""
}

func wellFormedID(id string) bool {
	if id == "" {
		return false
	}
	segLen := 0
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c == '.':
			if segLen == 0 {
				return false
			}
			segLen = 0
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
			segLen++
		default:
			return false
		}
	}
	return segLen > 0
}

// ParentID is the id of id's parent ("A.1" for "A.1.2"), "" for a top-level id.
func ParentID(id string) string {
	if i := strings.LastIndexByte(id, '.'); i >= 0 {
		return id[:i]
	}
	return ""
}

// depth is the number of dots in id (0 for a top-level task).
func depth(id string) int { return strings.Count(id, ".") }

// isAncestor reports whether a is a proper ancestor of b.
func isAncestor(a, b string) bool {
	return len(b) > len(a) && b[len(a)] == '.' && b[:len(a)] == a
}

// Segment classes, in sort order: numbers, then upper-case letter ids
// (A … Z, AA, AB … like spreadsheet columns), then anything else.
const (
	segNumber = iota
	segLetters
	segOther
)

func segClass(s string) int {
	if s == "" {
		return segOther
	}
	digits, upper := true, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			digits = false
		}
		if c < 'A' || c > 'Z' {
			upper = false
		}
	}
	switch {
	case digits:
		return segNumber
	case upper:
		return segLetters
	}
	return segOther
}

func compareSeg(a, b string) int {
	if a == b {
		return 0
	}
	ca, cb := segClass(a), segClass(b)
	if ca != cb {
		return ca - cb
	}
	switch ca {
	case segNumber:
		ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(ta) != len(tb) {
			return len(ta) - len(tb)
		}
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
		// 01 vs 1: equal numbers, still distinct ids; keep the order total.
		if len(a) != len(b) {
			return len(a) - len(b)
		}
	case segLetters:
		if len(a) != len(b) {
			return len(a) - len(b)
		}
	}
	return strings.Compare(a, b)
}

// CompareIDs orders ids naturally, segment by segment: A.2 < A.10, a parent
// sorts right before its subtree (A < A.1 < A.1.1 < A.2 < B), numbers before
// letters, and letter ids like spreadsheet columns (Z < AA).
func CompareIDs(a, b string) int {
	for {
		if a == b {
			return 0
		}
		if a == "" {
			return -1
		}
		if b == "" {
			return 1
		}
		sa, ra := cutDot(a)
		sb, rb := cutDot(b)
		if c := compareSeg(sa, sb); c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
		a, b = ra, rb
	}
}

func cutDot(s string) (seg, rest string) {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// nextLetters is the spreadsheet-column successor: A→B, Z→AA, AZ→BA.
func nextLetters(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 'Z' {
			b[i]++
			return string(b)
		}
		b[i] = 'A'
	}
	return "A" + string(b)
}

// lastNumber is the numeric value of id's last segment, or -1.
func lastNumber(id string) int {
	seg := id[strings.LastIndexByte(id, '.')+1:]
	if segClass(seg) != segNumber || len(seg) > 9 {
		return -1
	}
	n, _ := strconv.Atoi(seg)
	return n
}
