package gate

import (
	"regexp"
	"strings"
)

// pytest reads pytest's output. With -v each test has a line,
// "tests/test_calc.py::TestCalc::test_add PASSED", and with -rA (or -rp)
// the short test summary names the passed ones too; either names every
// test by its node id. Without them pytest names only what failed, so
// the closing "== 3 passed, 1 skipped in 0.12s ==" line's counts are the
// inventory. XFAIL and a non-strict XPASS are expected failures (not a
// pass: the test is marked as allowed to fail); a strict XPASS is
// reported FAILED. An ERROR (a fixture's setup or teardown failed, a
// file did not import: then named by its path) is a failure, also of a
// test whose -v line said PASSED before its teardown failed.
type pytest struct {
	seen    bool // "test session starts" or the closing counts
	summary bool // in the short test summary
	named   bool // a -v line or a PASSED summary line: every test is named
	t       *Tests
	counts  *Tests
}

var (
	pytestVerbose = regexp.MustCompile(`^(\S+::.+?) (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)(?: \(.*\))?(?: +\[ *\d+%\])?$`)
	pytestXdist   = regexp.MustCompile(`^\[gw\d+\] \[ *\d+%\] (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) (\S+::.+?)(?: \(.*\))?$`)
	pytestShort   = regexp.MustCompile(`^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+)(?: .*)?$`)
	pytestHeader  = regexp.MustCompile(`^=+ .* =+$`)
)

var pytestOutcomes = map[string]Outcome{"PASSED": Pass, "FAILED": Fail, "ERROR": Fail, "SKIPPED": Skip, "XFAIL": XFail, "XPASS": XFail}

func (r *pytest) line(s string) {
	if m := pytestSummary.FindStringSubmatch(s); m != nil && !strings.HasPrefix(s, " ") {
		r.summary = false
		t := &Tests{}
		if m[1] != "no tests ran" {
			t = countParts(m[1], ", ", pytestWords)
		}
		r.seen = r.seen || t != nil
		r.counts = addCounts(r.counts, "pytest", t)
		return
	}
	if pytestHeader.MatchString(s) {
		r.summary = strings.Contains(s, " short test summary info ")
		r.seen = r.seen || strings.Contains(s, " test session starts ")
		return
	}
	var word, id string
	if m := pytestVerbose.FindStringSubmatch(s); m != nil {
		id, word = m[1], m[2]
		r.named = true
	} else if m := pytestXdist.FindStringSubmatch(s); m != nil {
		id, word = m[2], m[1]
		r.named = true
	} else if m := pytestShort.FindStringSubmatch(s); m != nil && r.summary {
		id, word = m[2], m[1]
		r.named = r.named || word == "PASSED"
	} else {
		return
	}
	id = strings.TrimSpace(id)
	if r.t == nil {
		r.t = perTest("pytest")
	}
	if word == "ERROR" {
		r.t.merge(id, Fail)
		return
	}
	r.t.add(id, pytestOutcomes[word])
}

func (r *pytest) tests() *Tests {
	if !r.seen || !r.named {
		return namesOrCounts(nil, r.counts, "pytest")
	}
	return namesOrCounts(r.t, r.counts, "pytest")
}

// unittest reads python -m unittest. With -v each test has a line,
// "test_add (tests.test_calc.TestCalc.test_add) ... ok" (before Python
// 3.11 the parentheses name the class alone), and is named
// "tests.test_calc.TestCalc.test_add"; a failing subTest fails its test;
// a module that did not import is unittest's
// "unittest.loader._FailedTest.tests.test_calc", failed.
// "expected failure" is not a pass, and "unexpected success" fails (as
// unittest counts it). Without -v, "Ran N tests" and the "OK (skipped=1,
// expected failures=1)" or "FAILED (failures=2, errors=1)" line that
// follows give the counts.
type unittest struct {
	pending string // a test whose result is still to come
	ran     int
	seen    bool // "Ran N tests"
	t       *Tests
	counts  *Tests
}

var (
	unittestTest   = regexp.MustCompile(`^( *)([\w.]+) \(([\w.]+)\)( \(.*\))?(?: \.\.\. (.*))?$`)
	unittestResult = regexp.MustCompile(`^(.*) \.\.\. (.*)$`)
	unittestRan    = regexp.MustCompile(`^Ran (\d+) tests? in [0-9.]+s$`)
	unittestStatus = regexp.MustCompile(`^(OK|FAILED)(?: \((.*)\))?$`)
)

// unittestOutcome reads a result word ("" when it is none).
func unittestOutcome(s string) Outcome {
	switch {
	case s == "ok":
		return Pass
	case s == "FAIL", s == "ERROR", s == "unexpected success":
		return Fail
	case s == "expected failure":
		return XFail
	case s == "skipped" || strings.HasPrefix(s, "skipped '") || strings.HasPrefix(s, `skipped "`):
		return Skip
	}
	return ""
}

func (r *unittest) line(s string) {
	if m := unittestRan.FindStringSubmatch(s); m != nil {
		r.seen, r.ran, r.pending = true, atoi(m[1]), ""
		return
	}
	if m := unittestStatus.FindStringSubmatch(s); m != nil && r.seen {
		r.status(m[1], m[2])
		return
	}
	if m := unittestTest.FindStringSubmatch(s); m != nil {
		id := m[3]
		if !strings.HasSuffix(id, "."+m[2]) {
			id += "." + m[2] // before Python 3.11: the class alone
		}
		sub := m[4] != "" || m[1] != ""
		o := unittestOutcome(strings.TrimSpace(m[5]))
		switch {
		case sub && o == Fail:
			r.record(id, o, true)
		case sub:
		case o != "":
			r.record(id, o, false)
			r.pending = ""
		default:
			// Output of the test, a docstring line or its subtests come
			// before the result.
			r.pending = id
		}
		return
	}
	if r.pending == "" {
		return
	}
	if o := unittestOutcome(strings.TrimSpace(s)); o != "" {
		r.record(r.pending, o, false)
		r.pending = ""
	} else if m := unittestResult.FindStringSubmatch(s); m != nil {
		if o := unittestOutcome(strings.TrimSpace(m[2])); o != "" {
			r.record(r.pending, o, false) // after a docstring line
			r.pending = ""
		}
	}
}

func (r *unittest) record(id string, o Outcome, subtest bool) {
	if r.t == nil {
		r.t = perTest("unittest")
	}
	if subtest {
		r.t.merge(id, o)
		return
	}
	r.t.add(id, o)
}

// status reads "FAILED (failures=2, errors=1, skipped=1, expected
// failures=1, unexpected successes=1)" after "Ran N tests".
func (r *unittest) status(word, detail string) {
	n := map[string]int{}
	for _, part := range strings.Split(detail, ", ") {
		k, v, ok := strings.Cut(part, "=")
		if ok && digits(v) {
			n[k] = atoi(v)
		}
	}
	failed := n["failures"] + n["errors"] + n["unexpected successes"]
	skipped := n["skipped"] + n["expected failures"]
	r.counts = addCounts(r.counts, "unittest", &Tests{Passed: max(0, r.ran-failed-skipped), Failed: min(failed, r.ran), Skipped: skipped})
	r.seen = false
}

func (r *unittest) tests() *Tests {
	return namesOrCounts(r.t, r.counts, "unittest")
}

// namesOrCounts is a runner's inventory: its names when it named tests,
// else the counts of its closing line — an empty inventory by name when
// those say no test ran (a test module moved out of discovery's way).
func namesOrCounts(names, counts *Tests, format string) *Tests {
	switch {
	case counts == nil:
		return nil
	case names != nil:
		return names.count()
	case counts.Passed+counts.Failed+counts.Skipped == 0:
		return perTest(format).count()
	}
	return counts
}
