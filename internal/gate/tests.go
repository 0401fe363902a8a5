package gate

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Outcome is how one test ended.
type Outcome string

const (
	pass Outcome = "pass"
	fail Outcome = "fail"
	skip Outcome = "skip"
)

// Tests is what a gate's output says about the tests it ran: per test
// when the runner names them (go test -json, JUnit XML, cargo's libtest
// lines), else only the counts of a summary line. An agent can make a
// story pass by making tests go away (a skip, a build tag, a TestMain
// that exits 0); comparing a gate's Tests at the base with the same
// gate's now (Lost) is how that shows.
type Tests struct {
	// Format is the reader that found them: "go-json", "go" (plain go
	// test output), "junit", "cargo" or "summary".
	Format string `json:"format"`
	// PerTest says Names is the whole inventory (it may be empty: a
	// go test run where no test ran); else only the counts are known.
	PerTest bool               `json:"per_test,omitempty"`
	Names   map[string]Outcome `json:"names,omitempty"`
	Passed  int                `json:"passed"`
	Failed  int                `json:"failed"`
	Skipped int                `json:"skipped"`
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
// duplicated JUnit case) keeps the worse outcome: a failure beats a
// pass, and a pass beats a skip.
func (t *Tests) add(name string, o Outcome) {
	prev, ok := t.Names[name]
	switch {
	case !ok && len(t.Names) >= maxNames:
		return
	case !ok, o == fail, o == pass && prev == skip:
		t.Names[name] = o
	}
}

// count sets the counts from Names.
func (t *Tests) count() *Tests {
	t.Passed, t.Failed, t.Skipped = 0, 0, 0
	for _, o := range t.Names {
		switch o {
		case pass:
			t.Passed++
		case fail:
			t.Failed++
		case skip:
			t.Skipped++
		}
	}
	return t
}

// Lost lists what base (the inventory at the item's base) had passing
// that now does not: per test, "name (skipped)", "name (failed)" or
// "name (did not run)", sorted; when either side knows only counts, a
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
			if o != pass {
				continue
			}
			var got Outcome
			if now != nil {
				got = now.Names[name]
			}
			switch got {
			case pass:
			case skip:
				lost = append(lost, name+" (skipped)")
			case fail:
				lost = append(lost, name+" (failed)")
			default:
				lost = append(lost, name+" (did not run)")
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
	goJSON  *goJSON // always reads; renders to out when it took the command's -json
	readers []lineReader
	partial []byte
	long    bool // the current line passed maxLine: the rest of it is dropped
}

func newOutputReader(out io.Writer, render bool, verbose bool) *outputReader {
	g := &goJSON{verbose: verbose}
	if render {
		g.out = out
	}
	return &outputReader{out: out, goJSON: g, readers: []lineReader{&goText{}, &libtest{}, &summary{}}}
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
}

// finish reads a last line without a newline and what go test left
// unfinished.
func (o *outputReader) finish() {
	if len(o.partial) > 0 {
		o.flush()
	}
	o.goJSON.finish()
}

// tests is the inventory of the first reader, in order, that found one:
// go test -json, the JUnit report (when the gate names one), go test's
// plain lines, cargo's libtest, a summary line.
func (o *outputReader) tests(junit *Tests) *Tests {
	if t := o.goJSON.tests(); t != nil {
		return t
	}
	if junit != nil {
		return junit
	}
	for _, r := range o.readers {
		if t := r.tests(); t != nil {
			return t
		}
	}
	return nil
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
