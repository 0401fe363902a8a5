// Package prd reads, checks and writes back prd.json files, and decides which
// user story an iteration should work on next.
//
// Two dialects exist in the wild: a snake_case format (user_stories, depends_on, quality_checks, ...) and the camelCase format of
// the bash Ralph (userStories, acceptanceCriteria, branchName, ...). Files are
// edited by people and by agents, so the package keeps whatever it does not
// understand: unknown fields and the original key order survive a write-back,
// and the file is written in the dialect it was read in.
//
// Selection takes the set of passed story ids from the caller rather than
// trusting the file's "passes" flags, because the harness, not the agent, owns
// "done" (an agent may flip passes in the file; that must not count).
package prd

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Format is the dialect a prd.json was written in; Marshal writes the same one
// so that tools and people that produced the file can keep reading it.
type Format int

const (
	// formatSnake is the snake_case dialect: user_stories, acceptance_criteria,
	// depends_on, quality_checks, branch_name, created_at, updated_at.
	formatSnake Format = iota
	// formatCamel is the bash Ralph dialect: userStories, acceptanceCriteria,
	// branchName, passes, notes (and dependsOn when dependencies are used).
	formatCamel
)

func (f Format) String() string {
	switch f {
	case formatSnake:
		return "snake"
	case formatCamel:
		return "camel"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// PRD is one prd.json. The zero value is an empty snake_case PRD.
type PRD struct {
	Format                Format
	Project               string
	Feature               string
	BranchName            string
	Version               string
	Description           string
	Stories               []Story
	TechnicalRequirements []string
	QualityChecks         QualityChecks
	// Protected are globs of more files the agent may not change (besides
	// the tests and test configuration every story's contract protects):
	// golden files, fixtures, a schema the tests read.
	Protected []string
	CreatedAt string
	UpdatedAt string

	// name is what Parse was given, so Validate can name the file.
	name string
	// src is the parsed file (without a byte order mark), which Marshal
	// edits; nil means "never parsed", and Marshal then writes the
	// format's canonical layout.
	src *source[PRD]
}

// format is the PRD's format, a zero or unknown one read as snake_case.
func (p *PRD) format() Format {
	if p.Format == formatCamel {
		return formatCamel
	}
	return formatSnake
}

// Story is one user story.
type Story struct {
	ID                 string
	Title              string
	Description        string
	AcceptanceCriteria []string
	// Passes mirrors the file's flag. Selection ignores it (see package doc);
	// it is kept for write-back and for PassedInFile.
	Passes bool
	// Priority: 1 is highest; 0 means not given and sorts after every given
	// priority, so unprioritised stories run last in file order.
	Priority  int
	DependsOn []string
	// Complexity is 1..5; 0 means not given.
	Complexity int
	Notes      string
	// Checks are commands the harness runs for this story only, after the
	// PRD's quality gates (ralph's extension: a story's own acceptance test).
	Checks []string
	// AllowGateChanges lets this story change the files the gates run
	// (scripts, Makefile, package.json scripts, tool configs); otherwise
	// the harness reverts such changes and reports them as tampering.
	AllowGateChanges bool
	// AllowTestChanges lets this story make tests that passed at its base
	// go missing, skip or fail to run (a deliberate removal); otherwise
	// such a story does not pass.
	AllowTestChanges bool
	// Review names the role whose approval is this story's evidence,
	// for a story a person judged is shown by review rather than by a
	// test (docs, a refactor with no behaviour to test): a claim whose
	// only lack is evidence goes to that role, and its approval counts.
	Review string
	// Agent and Model run this story's iterations (a task's own agent):
	// above a role's agent and the config, below the command line.
	Agent string
	Model string
	// Critical stories pass only with a council's majority (--council).
	Critical bool

	// priorityGiven/complexityGiven tell an explicit 0 (invalid: users who
	// write 0 usually mean "highest") apart from an absent field.
	priorityGiven   bool
	complexityGiven bool
	// src is the story's object in the parsed file, which Marshal edits;
	// nil for a story not read from a file.
	src *source[Story]
}

// QualityChecks are the gate commands. Empty means "no such gate". Kept
// comparable with == on purpose; unknown keys of the object live in PRD.
type QualityChecks struct {
	Typecheck string
	Lint      string
	Test      string
	Build     string
}

// Gate is one quality gate to run.
type Gate struct {
	Name    string
	Command string
}

// Take puts gates into the quality checks (typecheck, lint,
// test, build by name; a second gate of a name, or another name, into the
// first free one in the order test, build, lint, typecheck) and returns
// those left over, which become every story's checks.
func (q *QualityChecks) Take(gates []Gate) []string {
	slot := map[string]*string{"typecheck": &q.Typecheck, "lint": &q.Lint, "test": &q.Test, "build": &q.Build}
	var rest []Gate
	for _, g := range gates {
		if p := slot[g.Name]; p != nil && *p == "" {
			*p = g.Command
			continue
		}
		rest = append(rest, g)
	}
	var checks []string
	for _, g := range rest {
		placed := false
		for _, name := range []string{"test", "build", "lint", "typecheck"} {
			if p := slot[name]; *p == "" {
				*p, placed = g.Command, true
				break
			}
		}
		if !placed {
			checks = append(checks, g.Command)
		}
	}
	return checks
}

// Gates lists the configured gates in the order a developer would run them
// by hand: cheap and fast first, so a failure is reported as early as
// possible. A blank command is no gate: run by a shell it would pass
// every time.
func (q QualityChecks) Gates() []Gate {
	var gs []Gate
	for _, g := range []Gate{
		{"typecheck", q.Typecheck},
		{"lint", q.Lint},
		{"test", q.Test},
		{"build", q.Build},
	} {
		if strings.TrimSpace(g.Command) != "" {
			gs = append(gs, g)
		}
	}
	return gs
}

// Load reads, parses and validates a prd.json. Error messages name path as
// given, so pass the path the user typed. On any error the PRD is nil: an
// invalid file must not drive a run. Use Parse and Validate separately to
// inspect an invalid file.
func Load(path string) (*PRD, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// Story returns the story with that id (the first, if ids repeat), or nil.
// The pointer aliases p.Stories so callers can update the story in place.
func (p *PRD) Story(id string) *Story {
	for i := range p.Stories {
		if p.Stories[i].ID == id {
			return &p.Stories[i]
		}
	}
	return nil
}

// NextStory is the story the next iteration should work on, or nil when none
// is ready (all passed, all excluded, or the rest blocked by dependencies).
// exclude lets a scheduler skip stories that are already claimed by another
// worker or have used up their attempts.
func (p *PRD) NextStory(passed, exclude map[string]bool) *Story {
	return p.NextStoryBy(func(id string) bool { return passed[id] }, func(id string) bool { return exclude[id] })
}

// NextStoryBy is NextStory asking passed and excluded story by story. It
// is ReadyStories' first, found in one pass without listing and sorting
// every ready story: the highest priority, the first in the file among
// equals. A loop asks once per iteration, over 1,000 stories, so a story
// that could not come before the best one found so far is not asked about
// (the answers may cost a lookup in a state of 1,000 records each).
func (p *PRD) NextStoryBy(passed, excluded func(id string) bool) *Story {
	var best *Story
	for i := range p.Stories {
		s := &p.Stories[i]
		if best != nil && priorityKey(s.Priority) >= priorityKey(best.Priority) {
			continue
		}
		if ready(s, passed, excluded) {
			best = s
		}
	}
	return best
}

// ReadyStories lists every story that could be started now, best first.
// A story is ready when it is not passed, not excluded, and every dependency
// is passed; a dependency on an unknown id therefore never becomes ready
// (Validate reports it).
func (p *PRD) ReadyStories(passed, exclude map[string]bool) []*Story {
	return p.readyStories(passed, exclude, nil)
}

// ReadyStoriesUnblockingFirst is ReadyStories for a parallel run: among
// stories of equal priority, the one more stories wait on (waiting, from
// Dependents) goes first, then file order. Starting it early lets the
// stories behind it start sooner while other workers are busy; one worker
// cannot gain from this, so a sequential run keeps plain file order.
func (p *PRD) ReadyStoriesUnblockingFirst(passed, exclude map[string]bool, waiting map[string]int) []*Story {
	return p.readyStories(passed, exclude, waiting)
}

func (p *PRD) readyStories(passed, exclude map[string]bool, waiting map[string]int) []*Story {
	var out []*Story
	isPassed, isExcluded := func(id string) bool { return passed[id] }, func(id string) bool { return exclude[id] }
	for i := range p.Stories {
		if s := &p.Stories[i]; ready(s, isPassed, isExcluded) {
			out = append(out, s)
		}
	}
	sortSelection(out, waiting)
	return out
}

// ready tells whether s could be started now: not passed, not excluded,
// every dependency passed.
func ready(s *Story, passed, excluded func(id string) bool) bool {
	if passed(s.ID) || excluded(s.ID) {
		return false
	}
	for _, d := range s.DependsOn {
		if !passed(d) {
			return false
		}
	}
	return true
}

// sortSelection orders by priority (given ones first, 1 highest), then by
// how many stories wait (nil waiting: all equal), and keeps file order
// among equals, so authors can order ties by position.
func sortSelection(ss []*Story, waiting map[string]int) {
	slices.SortStableFunc(ss, func(a, b *Story) int {
		if c := cmp.Compare(priorityKey(a.Priority), priorityKey(b.Priority)); c != 0 {
			return c
		}
		return cmp.Compare(waiting[b.ID], waiting[a.ID])
	})
}

// Dependents counts, for each story, the stories that depend on it
// directly or through others.
func (p *PRD) Dependents() map[string]int {
	kids := map[string][]string{}
	for _, s := range p.Stories {
		for _, d := range s.DependsOn {
			kids[d] = append(kids[d], s.ID)
		}
	}
	out := make(map[string]int, len(p.Stories))
	for _, s := range p.Stories {
		seen := map[string]bool{}
		stack := append([]string(nil), kids[s.ID]...)
		for len(stack) > 0 {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[id] || id == s.ID {
				continue // a cycle (Validate reports it) is counted once
			}
			seen[id] = true
			stack = append(stack, kids[id]...)
		}
		out[s.ID] = len(seen)
	}
	return out
}

func priorityKey(p int) int {
	if p == 0 {
		return int(^uint(0) >> 1) // not given: after every given priority
	}
	return p
}

// Levels groups stories into dependency levels: every story in level n
// depends only on stories in earlier levels, so a whole level can run
// concurrently once the previous ones are merged. A story's level is
// 1 + the highest level of its dependencies. Stories whose level is undefined
// (in or behind a dependency cycle, or depending on an unknown id) are left
// out; Validate reports why.
func (p *PRD) Levels() [][]*Story {
	index := p.indexByID()
	const (
		unknown  = -1
		visiting = -2
		invalid  = -3
	)
	level := make([]int, len(p.Stories))
	for i := range level {
		level[i] = unknown
	}
	var visit func(i int) int
	visit = func(i int) int {
		switch level[i] {
		case visiting:
			level[i] = invalid
			return invalid
		case unknown:
		default:
			return level[i]
		}
		level[i] = visiting
		lv := 0
		for _, d := range p.Stories[i].DependsOn {
			j, ok := index[d]
			if !ok {
				lv = invalid
				break
			}
			dl := visit(j)
			if dl == invalid {
				lv = invalid
				break
			}
			lv = max(lv, dl+1)
		}
		if level[i] == invalid { // part of a cycle found below us
			lv = invalid
		}
		level[i] = lv
		return lv
	}
	var levels [][]*Story
	for i := range p.Stories {
		if index[p.Stories[i].ID] != i {
			continue // a repeated id is ambiguous; only the first counts
		}
		lv := visit(i)
		if lv < 0 {
			continue
		}
		for len(levels) <= lv {
			levels = append(levels, nil)
		}
		levels[lv] = append(levels[lv], &p.Stories[i])
	}
	for _, st := range levels {
		sortSelection(st, nil)
	}
	return levels
}

// indexByID maps each id to its first story.
func (p *PRD) indexByID() map[string]int {
	m := make(map[string]int, len(p.Stories))
	for i, s := range p.Stories {
		if _, ok := m[s.ID]; !ok {
			m[s.ID] = i
		}
	}
	return m
}

// PassedCount counts the PRD's stories that are in passed; ids in passed that
// the PRD does not have (a story removed from the file) do not count.
func (p *PRD) PassedCount(passed map[string]bool) int {
	n := 0
	for _, s := range p.Stories {
		if passed[s.ID] {
			n++
		}
	}
	return n
}

// IsComplete reports whether every story is in passed.
func (p *PRD) IsComplete(passed map[string]bool) bool {
	return p.PassedCount(passed) == len(p.Stories)
}

// MarkPassed records a verified pass in the model so that the next Marshal
// writes passes: true for that story (and nothing else changes).
func (p *PRD) MarkPassed(id string) bool {
	s := p.Story(id)
	if s == nil {
		return false
	}
	s.Passes = true
	return true
}

// PassedInFile is what the file claims. The harness compares it with its own
// state to detect an agent that flipped passes by itself.
func (p *PRD) PassedInFile() map[string]bool {
	m := make(map[string]bool)
	for _, s := range p.Stories {
		if s.Passes {
			m[s.ID] = true
		}
	}
	return m
}

// WithoutPasses lists the stories whose object in the parsed file has no
// "passes" field (the "Ralph-ready" rule: every story carries its
// flag). Stories not read from a file are not listed.
func (p *PRD) WithoutPasses() []string {
	var out []string
	for _, s := range p.Stories {
		if s.src != nil && s.src.key("passes") == "" {
			out = append(out, s.ID)
		}
	}
	return out
}
