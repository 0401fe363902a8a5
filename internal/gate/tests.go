package gate

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Outcome is how one test ended.
type Outcome string

// The outcomes a runner reports. Only Pass is a pass: a test marked to
// do later (Todo) or expected to fail (XFail: pytest's xfail and XPASS,
// unittest's expected failure) proves nothing, whatever its body did.
// Skip, Todo and XFail count as skipped.
const (
	Pass  Outcome = "pass"
	Fail  Outcome = "fail"
	Skip  Outcome = "skip"
	Todo  Outcome = "todo"
	XFail Outcome = "xfail"
)

// rank orders outcomes for a test reported twice: the worse is kept.
func (o Outcome) rank() int {
	switch o {
	case Fail:
		return 3
	case Pass:
		return 2
	}
	return 1
}

// words is how an outcome reads in a list of lost tests.
func (o Outcome) words() string {
	switch o {
	case Pass:
		return "passed"
	case Fail:
		return "failed"
	case Todo:
		return "todo"
	case XFail:
		return "expected failure"
	case "":
		return "did not run"
	}
	return "skipped"
}

// Tests is what a gate's output says about the tests it ran: per test
// when the runner names them (go test -json, JUnit XML, cargo's libtest
// lines, TAP, node --test's spec reporter, jest --verbose, vitest's
// verbose reporter, mocha's spec reporter, pytest -v or -rA, unittest
// -v), else only the counts of a summary line. An agent can make a
// story pass by making tests go away (a skip, a build tag, a TestMain
// that exits 0); comparing a gate's Tests at the base with the same
// gate's now (Lost) is how that shows.
type Tests struct {
	// Format is the reader that found them, which names the runner:
	// "go-json", "go" (plain go test output), "junit", "cargo", "tap"
	// (node --test's default and any TAP producer), "node-spec",
	// "jest", "vitest", "mocha", "pytest", "unittest" or "summary" (a
	// plain "N passed, N failed" line); readers that each found tests in
	// one gate's output are joined by "+".
	Format string `json:"format"`
	// PerTest says Names is the whole inventory (it may be empty: a
	// go test run where no test ran); else only the counts are known.
	PerTest bool               `json:"per_test,omitempty"`
	Names   map[string]Outcome `json:"names,omitempty"`
	Passed  int                `json:"passed"`
	Failed  int                `json:"failed"`
	Skipped int                `json:"skipped"` // skipped, todo and expected failures
	// Contradictory are the tests the output reported with two different
	// outcomes (passed and failed, passed and skipped), sorted: a test
	// that prints a forged result line, or writes forged go test -json
	// events to the go command's output, shows here. Names keeps the
	// worse outcome; a claim never passes over a contradiction.
	Contradictory []string `json:"contradictory,omitempty"`

	contradicted map[string]bool
}

// Ran is how many tests ran (passed or failed; a skipped test did not).
func (t *Tests) Ran() int { return t.Passed + t.Failed }

// String renders the counts: "42 passed, 0 failed, 1 skipped".
func (t *Tests) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", t.Passed, t.Failed, t.Skipped)
}

// maxNames bounds an inventory: output is written by the agent's code,
// and a million invented test names are not worth keeping.
const maxNames = 100_000

func perTest(format string) *Tests {
	return &Tests{Format: format, PerTest: true, Names: map[string]Outcome{}}
}

// add records a test's outcome. A name seen twice (go test -count=2, a
// duplicated JUnit case, a forged result line) keeps the worse outcome:
// a failure beats a pass, and a pass beats a skip, a todo or an
// expected failure. Two different outcomes are a contradiction.
func (t *Tests) add(name string, o Outcome) {
	prev, ok := t.Names[name]
	if ok && prev != o {
		t.contradict(name)
	}
	t.merge(name, o)
}

// merge records a test's outcome, keeping the worse, without calling two
// outcomes a contradiction: for a runner that itself reports a test twice
// (pytest's error in a passed test's teardown).
func (t *Tests) merge(name string, o Outcome) {
	prev, ok := t.Names[name]
	switch {
	case !ok && len(t.Names) >= maxNames:
	case !ok, o.rank() > prev.rank():
		t.Names[name] = o
	}
}

// include adds another inventory's tests and contradictions (two
// reports, two runners in one gate) and counts again.
func (t *Tests) include(o *Tests) *Tests {
	for _, c := range o.Contradictory {
		t.contradict(c)
	}
	for name, out := range o.Names {
		t.add(name, out)
	}
	return t.count()
}

func (t *Tests) contradict(name string) {
	if t.contradicted == nil {
		t.contradicted = map[string]bool{}
		for _, c := range t.Contradictory {
			t.contradicted[c] = true
		}
	}
	if !t.contradicted[name] && len(t.contradicted) < maxNames {
		t.contradicted[name] = true
		t.Contradictory = append(t.Contradictory, name)
	}
}

// count sets the counts from Names and sorts the contradictions.
func (t *Tests) count() *Tests {
	t.Passed, t.Failed, t.Skipped = 0, 0, 0
	for _, o := range t.Names {
		switch o {
		case Pass:
			t.Passed++
		case Fail:
			t.Failed++
		default:
			t.Skipped++
		}
	}
	slices.Sort(t.Contradictory)
	return t
}

// Lost lists what base (the inventory at the item's base) had passing
// that now does not: per test, "name (skipped)", "name (failed)",
// "name (todo)", "name (expected failure)" or "name (did not run)",
// sorted; when either side knows only counts, a
// sentence per count that went the wrong way (fewer passed, more
// skipped). A nil now is a gate that reported no tests at all — every
// test that passed at the base is lost. New tests are no loss.
func (base *Tests) Lost(now *Tests) []string {
	if base == nil {
		return nil
	}
	if base.PerTest && (now == nil || now.PerTest) {
		var lost []string
		for name, o := range base.Names {
			if o != Pass {
				continue
			}
			var got Outcome
			if now != nil {
				got = now.Names[name]
			}
			if got != Pass {
				lost = append(lost, name+" ("+got.words()+")")
			}
		}
		slices.Sort(lost)
		return lost
	}
	if now == nil {
		now = &Tests{}
	}
	var lost []string
	if now.Passed < base.Passed {
		lost = append(lost, fmt.Sprintf("%d tests passed at the base, %d now", base.Passed, now.Passed))
	}
	if now.Skipped > base.Skipped {
		lost = append(lost, fmt.Sprintf("%d tests were skipped at the base, %d now", base.Skipped, now.Skipped))
	}
	return lost
}

// LostTests compares the gates that ran at the base with the same gates
// now (by name) and lists the tests lost (Tests.Lost); a count sentence
// names its gate. A gate that did not run now (an earlier one failed)
// lost all its tests.
func LostTests(base, now []Result) []string {
	var lost []string
	for _, b := range base {
		if b.Tests == nil {
			continue
		}
		var cur *Tests
		for _, n := range now {
			if n.Name == b.Name {
				cur = n.Tests
			}
		}
		for _, l := range b.Tests.Lost(cur) {
			if !b.Tests.PerTest || (cur != nil && !cur.PerTest) {
				l = "gate " + b.Name + ": " + l
			}
			if !slices.Contains(lost, l) {
				lost = append(lost, l)
			}
		}
	}
	return lost
}

// Counts renders the test counts of the gates that reported tests, for
// a "Verified by ralph" line and status: "test: 42 passed, 0 failed,
// 1 skipped" ("" when no gate reported tests).
func Counts(results []Result) string {
	var parts []string
	for _, r := range results {
		if r.Tests != nil {
			parts = append(parts, r.Name+": "+r.Tests.String())
		}
	}
	return strings.Join(parts, "; ")
}

// lineReader reads a gate's output one line at a time and says what it
// found (nil: nothing it knows).
type lineReader interface {
	line(s string)
	tests() *Tests
}

// maxLine bounds the line a reader is given; the rest of a longer one is
// dropped (no test runner writes its results in such lines).
const maxLine = 64 << 10

// outputReader is the writer a gate's output goes through: it passes
// the bytes on to out (or, for a go test run that ralph added -json to,
// the plain text go test would have printed) and hands each line to the
// readers.
type outputReader struct {
	out     io.Writer
	goJSON  *goJSON      // always reads; renders to out when it took the command's -json
	readers []lineReader // one per runner
	summary *summary     // a plain counts line, when no runner's reader found tests
	partial []byte
	long    bool // the current line passed maxLine: the rest of it is dropped
}

func newOutputReader(out io.Writer, render bool, verbose bool) *outputReader {
	g := &goJSON{verbose: verbose}
	if render {
		g.out = out
	}
	return &outputReader{out: out, goJSON: g, summary: &summary{},
		readers: []lineReader{&goText{}, &libtest{}, &tap{}, &nodeSpec{}, &jest{}, &vitest{}, &mocha{}, &pytest{}, &unittest{}}}
}

func (o *outputReader) Write(p []byte) (int, error) {
	if o.goJSON.out == nil {
		if _, err := o.out.Write(p); err != nil {
			return 0, err
		}
	}
	n := len(p)
	for len(p) > 0 {
		i := slices.Index(p, '\n')
		if i < 0 {
			o.keep(p)
			break
		}
		o.keep(p[:i])
		o.flush()
		p = p[i+1:]
	}
	return n, nil
}

func (o *outputReader) keep(b []byte) {
	if room := maxLine - len(o.partial); len(b) > room {
		b, o.long = b[:room], true
	}
	o.partial = append(o.partial, b...)
}

// flush hands the line read so far to the readers.
func (o *outputReader) flush() {
	raw := string(o.partial)
	o.partial, o.long = o.partial[:0], false
	o.goJSON.line(raw)
	s := plainLine(raw)
	for _, r := range o.readers {
		r.line(s)
	}
	o.summary.line(s)
}

// finish reads a last line without a newline and what go test left
// unfinished.
func (o *outputReader) finish() {
	if len(o.partial) > 0 {
		o.flush()
	}
	o.goJSON.finish()
}

// tests is the gate's inventory: go test -json's when ralph added -json,
// else the JUnit report's (when the gate names one), else what the readers of
// each runner's output found — all of them, when one gate runs several
// runners — else a plain summary line's counts. nil: no reader
// understood the output.
func (o *outputReader) tests(junit *Tests) *Tests {
	goJSON := o.goJSON.tests()
	if goJSON != nil && o.goJSON.out != nil {
		return goJSON // ralph added -json: the output is go test's events
	}
	if junit != nil {
		return junit
	}
	var found []*Tests
	if goJSON != nil {
		// Events in a gate's output that ralph did not ask for: the
		// gate's own -json, or lines a test forged beside go test's.
		found = append(found, goJSON)
	}
	for _, r := range o.readers {
		if t := r.tests(); t != nil {
			found = append(found, t)
		}
	}
	if len(found) == 0 {
		return o.summary.tests()
	}
	return joinInventories(found)
}

// joinInventories is the inventory of several runners in one gate: every
// test by name when each named its tests, else the counts added up.
func joinInventories(found []*Tests) *Tests {
	if len(found) == 1 {
		return found[0]
	}
	formats := make([]string, len(found))
	perTest := true
	for i, t := range found {
		formats[i] = t.Format
		perTest = perTest && t.PerTest
	}
	all := &Tests{Format: strings.Join(formats, "+"), PerTest: perTest}
	if perTest {
		all.Names = map[string]Outcome{}
		for _, t := range found {
			all.include(t)
		}
		return all
	}
	for _, t := range found {
		addCounts(all, "", t)
		for _, c := range t.Contradictory {
			all.contradict(c)
		}
	}
	slices.Sort(all.Contradictory)
	return all
}

// plainLine is a line as a person reads it: without terminal colour
// codes, and, when it holds carriage returns (a progress display), only
// what the last one left.
func plainLine(s string) string {
	s = strings.TrimSuffix(s, "\r")
	if i := strings.LastIndexByte(s, '\r'); i >= 0 {
		s = s[i+1:]
	}
	if !strings.Contains(s, "\x1b[") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
