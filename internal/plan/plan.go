// Package plan reads markdown checklist plans as work: ralphex's form
// (`### Task N: title` sections with `- [ ]` boxes, and a "Validation
// Commands" section whose commands become the quality gates) and a flat
// checklist such as fix_plan.md (each top-level `- [ ]` line one item).
// A plan becomes a harness-owned PRD (PRD); ralph, not the agent, ticks
// an item's boxes when it passes (Tick renders the file from the PRD's
// verdicts, committed with the item's commit).
package plan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Item is one unit of work in a plan.
type Item struct {
	ID       string // task-N (a Task section) or item-K (a flat checklist's K-th line)
	Title    string
	Body     string   // the section's text besides its boxes
	Criteria []string // its boxes' texts
	Line     int      // where it starts (1-based)
	// Boxes are the lines (0-based) whose box ralph ticks when it passes.
	Boxes []int
	Done  bool // every box was ticked in the file
}

// Plan is a parsed plan file.
type Plan struct {
	Path  string
	Title string // the first # heading
	Items []Item
	Gates []gate.Gate // the Validation Commands
	Flat  bool        // a flat checklist, not Task sections
	lines []string    // the file's lines, each with its line ending
}

var (
	taskHeading = regexp.MustCompile(`^(#{2,4})\s+Task\s+([0-9]+)\s*[:.)-]?\s*(.*?)\s*#*\s*$`)
	anyTask     = regexp.MustCompile(`(?i)^#{1,6}\s+task\b`)
	heading     = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	box         = regexp.MustCompile(`^(\s*)[-*+]\s+\[([ xX])\]\s*(.*?)\s*$`)
	badBox      = regexp.MustCompile(`^\s*[-*+]\s*\[([^\]]{0,3})\]|^\s*[-*+]\[[ xX]\]`)
	validation  = regexp.MustCompile(`(?i)^validation\s+commands?\b`)
	inlineCode  = regexp.MustCompile("`([^`]+)`")
)

// Load reads and parses path.
func Load(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usage.Errorf("--plan: %v", err)
	}
	return Parse(path, b)
}

// Parse reads a plan; a malformed one is a usage error naming file:line.
func Parse(path string, data []byte) (*Plan, error) {
	p := &Plan{Path: path}
	p.lines = splitLines(string(data))
	fail := func(i int, format string, args ...any) error {
		return usage.Errorf("%s:%d: %s", path, i+1, fmt.Sprintf(format, args...))
	}
	hasTasks := false
	for _, l := range p.lines {
		if taskHeading.MatchString(trimEOL(l)) {
			hasTasks = true
			break
		}
	}
	p.Flat = !hasTasks
	var cur *Item
	inValidation, fence, fenceStart := false, "", 0
	seen := map[string]int{}
	flatN := 0
	for i, raw := range p.lines {
		l := trimEOL(raw)
		t := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
				continue
			}
			if inValidation && t != "" && !strings.HasPrefix(t, "#") {
				p.Gates = append(p.Gates, gate.Gate{Name: gateName(len(p.Gates)), Command: t})
			} else if cur != nil {
				cur.Body += l + "\n"
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence, fenceStart = t[:3], i
			if cur != nil && !inValidation {
				cur.Body += l + "\n"
			}
			continue
		}
		if m := heading.FindStringSubmatch(l); m != nil {
			inValidation = validation.MatchString(m[2])
			if p.Title == "" && m[1] == "#" {
				p.Title = m[2]
			}
			if tm := taskHeading.FindStringSubmatch(l); tm != nil {
				if tm[3] == "" {
					return nil, fail(i, "task %s has no title (write `### Task %s: what to do`)", tm[2], tm[2])
				}
				id := "task-" + tm[2]
				if at, dup := seen[id]; dup {
					return nil, fail(i, "Task %s again (first at line %d): each task needs its own number", tm[2], at)
				}
				seen[id] = i + 1
				p.Items = append(p.Items, Item{ID: id, Title: tm[3], Line: i + 1})
				cur = &p.Items[len(p.Items)-1]
				continue
			}
			if hasTasks && anyTask.MatchString(l) {
				return nil, fail(i, "a task heading must read `### Task N: title`, found %q", t)
			}
			if hasTasks {
				cur = nil // another section ends the task
			}
			continue
		}
		if inValidation {
			if m := box.FindStringSubmatch(l); m != nil {
				return nil, fail(i, "a box in the Validation Commands section: list commands (in a code block or as `- `command``), not tasks")
			}
			if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") {
				cmd := strings.TrimSpace(t[2:])
				if m := inlineCode.FindStringSubmatch(cmd); m != nil {
					cmd = m[1]
				}
				if cmd != "" {
					p.Gates = append(p.Gates, gate.Gate{Name: gateName(len(p.Gates)), Command: cmd})
				}
			}
			continue
		}
		m := box.FindStringSubmatch(l)
		if m == nil && badBox.MatchString(l) {
			return nil, fail(i, "malformed checkbox %q: write `- [ ] text` (or `- [x] text` when done)", t)
		}
		switch {
		case m != nil && hasTasks:
			if cur == nil {
				continue // a checklist of another section (success criteria, post-completion): no task's
			}
			if m[3] == "" {
				return nil, fail(i, "an empty checkbox: say what it checks")
			}
			cur.Criteria = append(cur.Criteria, m[3])
			cur.Boxes = append(cur.Boxes, i)
		case m != nil && m[1] == "":
			if m[3] == "" {
				return nil, fail(i, "an empty checkbox: say what it checks")
			}
			flatN++
			p.Items = append(p.Items, Item{ID: "item-" + strconv.Itoa(flatN), Title: m[3], Line: i + 1, Boxes: []int{i}})
			cur = &p.Items[len(p.Items)-1]
		case m != nil && cur != nil:
			cur.Criteria = append(cur.Criteria, m[3])
		case cur != nil && !hasTasks && t != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t"):
			cur = nil // a flat item's details are the indented lines under it
		case cur != nil:
			cur.Body += l + "\n"
		}
	}
	if fence != "" {
		return nil, fail(fenceStart, "a code block that never closes")
	}
	if len(p.Items) == 0 {
		return nil, usage.Errorf("%s: no work found: write `### Task 1: title` sections with `- [ ]` boxes, or a checklist of top-level `- [ ]` lines", path)
	}
	for i := range p.Items {
		it := &p.Items[i]
		if len(it.Boxes) == 0 {
			return nil, fail(it.Line-1, "%s has no `- [ ]` box: ralph ticks its boxes when it passes", it.ID)
		}
		it.Body = strings.TrimSpace(it.Body)
		it.Done = true
		for _, b := range it.Boxes {
			it.Done = it.Done && box.FindStringSubmatch(trimEOL(p.lines[b]))[2] != " "
		}
	}
	return p, nil
}

// Tick renders the file with the boxes of the items in done ticked (and
// every other box as the file had it).
func (p *Plan) Tick(done func(id string) bool) []byte {
	lines := append([]string(nil), p.lines...)
	for _, it := range p.Items {
		if !done(it.ID) {
			continue
		}
		for _, b := range it.Boxes {
			l := lines[b]
			if i := strings.Index(l, "[ ]"); i >= 0 {
				lines[b] = l[:i] + "[x]" + l[i+3:]
			}
		}
	}
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(l)
	}
	return buf.Bytes()
}

// gateName names the i-th validation command.
func gateName(i int) string { return "validation-" + strconv.Itoa(i+1) }

// splitLines splits s keeping each line's ending.
func splitLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func trimEOL(l string) string { return strings.TrimRight(l, "\r\n") }

// PRD is the harness-owned PRD of a plan: one story per item in the
// plan's order (priority by position, no dependencies: --parallel may run
// them together), a ticked item already passed; the Validation Commands
// (and gates, the run's own from .ralph/config.yaml or --gate, after
// them) as its quality checks, those beyond the four slots as every
// story's checks.
func (p *Plan) PRD(branch string, gates []prd.Gate) (*prd.PRD, error) {
	doc := &prd.PRD{Project: "plan", Feature: "plan " + filepath.Base(p.Path), BranchName: branch,
		Description: "The work of " + p.Path + " (made by ralph; edit the plan, not this file)."}
	all := make([]prd.Gate, 0, len(p.Gates)+len(gates))
	for _, g := range p.Gates {
		all = append(all, prd.Gate{Name: g.Name, Command: g.Command})
	}
	checks := doc.QualityChecks.Take(append(all, gates...))
	for i, it := range p.Items {
		doc.Stories = append(doc.Stories, prd.Story{ID: it.ID, Title: it.Title, Description: it.Body, AcceptanceCriteria: it.Criteria,
			Priority: i + 1, Passes: it.Done, Checks: checks})
	}
	if err := doc.Validate(); err != nil {
		return nil, err
	}
	return doc, nil
}
