package prd

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/git"
)

// Validation rules, as found in Problem.Rule. They are stable strings so
// that callers (and agents reading the output) can act on them.
const (
	ruleNoStories         = "no-stories"
	ruleMissingID         = "missing-id"
	ruleDuplicateID       = "duplicate-id"
	ruleMissingTitle      = "missing-title"
	ruleUnknownDependency = "unknown-dependency"
	ruleSelfDependency    = "self-dependency"
	ruleDependencyCycle   = "dependency-cycle"
	rulePriorityRange     = "priority-range"
	ruleComplexityRange   = "complexity-range"
	ruleBranchName        = "branch-name"
	ruleProtectedGlob     = "protected-glob"
	ruleBadID             = "bad-id"
	ruleIDTooLong         = "id-too-long"
	ruleUnknownAgent      = "unknown-agent"
	ruleBlankCheck        = "blank-check"
)

// Priority and complexity bounds. 999 leaves room for any hand-numbered
// scheme while catching values that are clearly not priorities.
const (
	maxPriority   = 999
	maxComplexity = 5
)

// maxIDLength bounds a story id, in characters. A run names files after
// ids (transcripts NNNN-<id>.<role>.log, prompts, plans) and a file name
// is at most 255 bytes; 128 leaves room for the rest of the name. Branch
// names take a bounded slug of the id instead.
const maxIDLength = 128

// Problem is one broken rule. StoryID is empty for problems that are not
// about one identifiable story (then Message says where).
type Problem struct {
	StoryID string
	Rule    string
	Message string
}

func (p Problem) String() string {
	if p.StoryID == "" {
		return p.Message
	}
	return "story " + shortID(p.StoryID) + ": " + p.Message
}

// shortID is an id as messages show it: whole, unless it is longer than
// MaxIDLength (a message naming a 100,000-character id would bury the
// problem in it).
func shortID(id string) string {
	if utf8.RuneCountInString(id) <= maxIDLength {
		return id
	}
	r := []rune(id)
	return string(r[:32]) + "…"
}

// ValidationError lists every problem at once, so a person or agent fixing
// the file does not go through one round trip per mistake.
type ValidationError struct {
	File     string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File)
		b.WriteString(": ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Validate checks the rules between fields that JSON types cannot express.
// It returns nil or a *ValidationError.
func (p *PRD) Validate() error {
	name := p.name
	if name == "" {
		name = "prd.json"
	}
	f := p.format()
	storiesKey := cmp.Or(p.src.key("user_stories"), topObject.name("user_stories", f))
	var probs []Problem
	add := func(id, rule, format string, args ...any) {
		probs = append(probs, Problem{StoryID: id, Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
	if len(p.Stories) == 0 {
		add("", ruleNoStories, "%s is empty; there is nothing to work on", storiesKey)
	}
	if p.BranchName != "" {
		if why := git.BranchNameProblem(p.BranchName); why != "" {
			add("", ruleBranchName, "%s %q is not a valid git branch name: %s", topObject.name("branch_name", f), p.BranchName, why)
		}
	}
	for i, g := range p.Protected {
		if why := GlobProblem(g); why != "" {
			add("", ruleProtectedGlob, "protected[%d] %q: %s", i, g, why)
		}
	}

	// Problems are listed story by story, in file order, so the report reads
	// like the file; cycles span stories and come last.
	first := map[string]int{}
	for i, s := range p.Stories {
		if _, dup := first[s.ID]; !dup && strings.TrimSpace(s.ID) != "" {
			first[s.ID] = i
		}
	}
	for i, s := range p.Stories {
		label, where := s.ID, ""
		if strings.TrimSpace(s.ID) == "" {
			label, where = "", fmt.Sprintf("%s[%d]: ", storiesKey, i)
			add("", ruleMissingID, "%smissing id", where)
		} else if j := first[s.ID]; j != i {
			add(label, ruleDuplicateID, "duplicate id (%s[%d] repeats %s[%d])", storiesKey, i, storiesKey, j)
		}
		if n := utf8.RuneCountInString(s.ID); n > maxIDLength {
			add(label, ruleIDTooLong, "%sid is %d characters long; ids are at most %d (files of the run are named after them)", where, n, maxIDLength)
		}
		if why := badIDRune(s.ID); why != "" {
			add("", ruleBadID, "%s[%d]: id %q holds %s; ids are single-line names of visible characters", storiesKey, i, shortID(s.ID), why)
		}
		if strings.TrimSpace(s.Title) == "" {
			add(label, ruleMissingTitle, "%smissing title", where)
		}
		depsKey := cmp.Or(s.src.key("depends_on"), storyObject.name("depends_on", f))
		for _, d := range s.DependsOn {
			switch {
			case d == s.ID:
				add(label, ruleSelfDependency, "%sdepends on itself (%s)", where, depsKey)
			default:
				if _, ok := first[d]; !ok {
					add(label, ruleUnknownDependency, "%sunknown dependency %q (%s)", where, shortID(d), depsKey)
				}
			}
		}
		for j, c := range s.Checks {
			if strings.TrimSpace(c) == "" {
				add(label, ruleBlankCheck, "%s%s[%d] is blank; a blank command passes every time: give the command or remove it", where, cmp.Or(s.src.key("checks"), "checks"), j)
			}
		}
		if s.Agent != "" && !slices.Contains(agent.Names(), s.Agent) {
			add(label, ruleUnknownAgent, "%sagent %q is not one ralph knows (%s)", where, s.Agent, strings.Join(agent.Names(), ", "))
		}
		if s.Priority != 0 || s.priorityGiven {
			if s.Priority < 1 || s.Priority > maxPriority {
				add(label, rulePriorityRange, "%spriority %d out of range; use 1 (highest) to %d, or leave it out", where, s.Priority, maxPriority)
			}
		}
		if s.Complexity != 0 || s.complexityGiven {
			if s.Complexity < 1 || s.Complexity > maxComplexity {
				add(label, ruleComplexityRange, "%scomplexity %d out of range; use 1 to %d, or leave it out", where, s.Complexity, maxComplexity)
			}
		}
	}

	for _, cyc := range p.cycles(first) {
		add(cyc[0], ruleDependencyCycle, "dependency cycle %s", strings.Join(cyc, " -> "))
	}

	if len(probs) == 0 {
		return nil
	}
	return &ValidationError{File: name, Problems: probs}
}

// badIDRune names the first character an id must not hold, or "": a line
// break or control character (an id is one line of a commit trailer), or
// an invisible format character such as a byte order mark or a
// bidirectional override (the id on screen would not be the id).
func badIDRune(id string) string {
	for _, r := range id {
		switch {
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return "a line break or control character"
		case r == '\ufeff':
			return "a byte order mark (U+FEFF)"
		case unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("an invisible character (U+%04X)", r)
		}
	}
	return ""
}

// cycles finds dependency cycles by depth-first search in file order and
// returns each as a closed path (first id repeated at the end), rotated to
// start at the story that comes first in the file so the report is stable.
// Self-dependencies and unknown ids are reported by their own rules.
func (p *PRD) cycles(index map[string]int) [][]string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(p.Stories))
	var stack []int
	var found [][]string
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, d := range p.Stories[i].DependsOn {
			j, ok := index[d]
			if !ok || j == i {
				continue
			}
			switch color[j] {
			case white:
				visit(j)
			case grey:
				// The path from j down the stack back to j is a cycle.
				at := len(stack) - 1
				for stack[at] != j {
					at--
				}
				loop := append([]int(nil), stack[at:]...)
				// Rotate so the earliest story in the file leads.
				lo := 0
				for k := range loop {
					if loop[k] < loop[lo] {
						lo = k
					}
				}
				loop = append(loop[lo:], loop[:lo]...)
				// The stack runs from dependent to dependency, which reads
				// naturally as "A depends on B depends on ... A".
				ids := make([]string, 0, len(loop)+1)
				for _, k := range loop {
					ids = append(ids, p.Stories[k].ID)
				}
				ids = append(ids, ids[0])
				found = append(found, ids)
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range p.Stories {
		if j, ok := index[p.Stories[i].ID]; ok && j == i && color[i] == white {
			visit(i)
		}
	}
	return found
}

// GlobProblem says what is wrong with g as a glob of files in the
// repository (a "protected:" entry), or "": a path from the
// repository's root (a leading / changes nothing), with "*", "?", "[…]"
// within a folder name and "**" across folders.
func GlobProblem(g string) string {
	switch {
	case strings.TrimSpace(g) == "":
		return "an empty glob"
	case strings.Contains(g, "\\"):
		return "use / between folders"
	}
	for _, part := range strings.Split(strings.Trim(g, "/"), "/") {
		if part == ".." {
			return "leaves the repository (..)"
		}
		if part == "**" {
			continue
		}
		if _, err := path.Match(part, ""); err != nil {
			return "not a valid glob (" + err.Error() + ")"
		}
	}
	return ""
}
