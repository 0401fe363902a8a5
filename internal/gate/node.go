package gate

import (
	"regexp"
	"strings"
)

// titleSep joins the titles of a JavaScript test's enclosing suites and
// its own: "calc > nested > deep" (jest and vitest put the test file
// first: "src/calc.test.js > calc > adds").
const titleSep = " > "

// titlePath is the title of the suite open at each indentation level.
type titlePath []string

// at sets the title open at level and forgets deeper ones.
func (p *titlePath) at(level int, title string) {
	if level < 0 || level > 64 {
		return
	}
	for len(*p) <= level {
		*p = append(*p, "")
	}
	*p = append((*p)[:level], title)
}

// name is title under the suites open above level.
func (p titlePath) name(level int, title string) string {
	var parts []string
	for i := 0; i < level && i < len(p); i++ {
		if p[i] != "" {
			parts = append(parts, p[i])
		}
	}
	return strings.Join(append(parts, title), titleSep)
}

// indent is the number of leading spaces of s.
func indent(s string) int {
	return len(s) - len(strings.TrimLeft(s, " "))
}

// tap reads TAP (node --test's default reporter when its output is not a
// terminal, and node-tap, tape, prove…). With node's "# Subtest: name"
// lines every test is named by its suites' titles and its own ("calc >
// nested > deep"; a test's subtests under it, "top level > sub one"), a
// suite itself (YAML type 'suite') is not a test, and "# SKIP" / "# TODO"
// directives make it skipped or todo whatever its ok said. Without them
// (tape's assertions share descriptions) only the ok / not ok lines are
// counted. Lines inside a YAML block (a failure's stack) are never read
// as results.
type tap struct {
	seen     bool // "TAP version" or a top-level plan
	subtests bool // "# Subtest:" lines: node's format
	yaml     bool
	last     *tapResult // the result whose YAML block may follow
	pending  [][]tapResult
	t        *Tests
	counts   Tests
}

type tapResult struct {
	level int
	name  string
	o     Outcome
	suite bool
}

var (
	tapVersion = regexp.MustCompile(`^TAP version \d+$`)
	tapPlan    = regexp.MustCompile(`^1\.\.\d+(?:\s|$)`)
	tapLine    = regexp.MustCompile(`^( *)(not ok|ok)\b(?: \d+)?(?: -)?(?: (.*))?$`)
	tapDirect  = regexp.MustCompile(`(?i)\s#\s*(skip|todo)\b.*$`)
)

func (r *tap) line(s string) {
	trimmed := strings.TrimSpace(s)
	if r.yaml {
		switch {
		case trimmed == "...":
			r.yaml = false
		case (trimmed == "type: 'suite'" || trimmed == `type: "suite"`) && r.last != nil:
			r.last.suite = true
		}
		return
	}
	if trimmed == "---" && r.last != nil {
		r.yaml = true
		return
	}
	r.settle()
	switch {
	case tapVersion.MatchString(s), tapPlan.MatchString(s):
		r.seen = true
		return
	case strings.HasPrefix(trimmed, "# Subtest: "):
		r.subtests = true
		return
	}
	m := tapLine.FindStringSubmatch(s)
	if m == nil || len(m[1])%4 != 0 {
		return
	}
	desc := m[3]
	o := Pass
	if m[2] == "not ok" {
		o = Fail
	}
	if d := tapDirect.FindStringSubmatch(" " + desc); d != nil {
		desc = desc[:max(0, len(desc)+1-len(d[0]))]
		o = Skip
		if strings.EqualFold(d[1], "todo") {
			o = Todo
		}
	}
	switch o {
	case Pass:
		r.counts.Passed++
	case Fail:
		r.counts.Failed++
	default:
		r.counts.Skipped++
	}
	desc = strings.NewReplacer(`\#`, "#", `\\`, `\`).Replace(strings.TrimSpace(desc))
	r.last = &tapResult{level: len(m[1]) / 4, name: desc, o: o}
}

// settle files the last result, its YAML read: its finished subtests
// go under its name, and it joins the results of its level.
func (r *tap) settle() {
	res := r.last
	if res == nil {
		return
	}
	r.last = nil
	if res.level > 64 {
		return
	}
	for len(r.pending) <= res.level+1 {
		r.pending = append(r.pending, nil)
	}
	children := r.pending[res.level+1]
	r.pending[res.level+1] = nil
	for _, c := range children {
		if len(r.pending[res.level]) < maxNames {
			r.pending[res.level] = append(r.pending[res.level], tapResult{name: res.name + titleSep + c.name, o: c.o})
		}
	}
	if !res.suite && len(r.pending[res.level]) < maxNames {
		r.pending[res.level] = append(r.pending[res.level], tapResult{name: res.name, o: res.o})
	}
	if res.level == 0 {
		if r.t == nil {
			r.t = perTest("tap")
		}
		for _, c := range r.pending[0] {
			r.t.add(c.name, c.o)
		}
		r.pending[0] = nil
	}
}

func (r *tap) tests() *Tests {
	r.settle()
	switch {
	case !r.seen:
		return nil
	case r.subtests:
		if r.t == nil {
			r.t = perTest("tap")
		}
		return r.t.count()
	case r.counts.Passed+r.counts.Failed+r.counts.Skipped == 0:
		return nil
	}
	c := r.counts
	c.Format = "tap"
	return &c
}

// nodeSpec reads node --test's spec reporter (its default on a
// terminal): "▶ suite" opens a suite or a test with subtests, "✔ name
// (1.2ms)" passed, "✖" failed, "﹣" skipped, and a "# reason" after
// the duration of a ✔ or ✖ is a todo. Every line is a test, suites
// included (the reporter does not tell them apart), named by the titles
// above it. The "✖ failing tests:" list after the summary repeats
// failures and is not read again.
type nodeSpec struct {
	path titlePath
	t    *Tests
	seen bool // "ℹ tests N"
	done bool // the failing tests' list began
}

var (
	nodeSpecSuite  = regexp.MustCompile(`^( *)▶ (.+)$`)
	nodeSpecResult = regexp.MustCompile(`^( *)(✔|✖|﹣) (.+?) \([0-9.]+m?s\)(?: # (.*))?$`)
	nodeSpecCount  = regexp.MustCompile(`^ℹ tests \d+$`)
)

func (r *nodeSpec) line(s string) {
	switch {
	case r.done:
		return
	case nodeSpecCount.MatchString(s):
		r.seen = true
		return
	case s == "✖ failing tests:":
		r.done = true
		return
	}
	if m := nodeSpecSuite.FindStringSubmatch(s); m != nil {
		r.path.at(len(m[1])/2, m[2])
		return
	}
	m := nodeSpecResult.FindStringSubmatch(s)
	if m == nil {
		return
	}
	o := map[string]Outcome{"✔": Pass, "✖": Fail, "﹣": Skip}[m[2]]
	if m[4] != "" && o != Skip {
		o = Todo
	}
	if r.t == nil {
		r.t = perTest("node-spec")
	}
	r.t.add(r.path.name(len(m[1])/2, m[3]), o)
}

func (r *nodeSpec) tests() *Tests {
	if !r.seen || r.t == nil {
		return nil
	}
	return r.t.count()
}
