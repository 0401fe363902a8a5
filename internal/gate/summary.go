package gate

import (
	"path"
	"regexp"
	"strconv"
	"strings"
)

// libtest reads cargo test (Rust's libtest): "test NAME ... ok|FAILED|
// ignored" per test, named after the test binary that cargo's "Running"
// or "Doc-tests" line announced ("src/lib.rs::tests::it_works",
// "tests/it.rs::it_adds", "doc::src/lib.rs - add (line 3)"), since two
// binaries may hold tests of the same name. Without such lines (libtest's
// terse format) the "test result:" lines give the counts.
type libtest struct {
	binary string
	t      *Tests
	counts *Tests
}

var (
	libtestCase    = regexp.MustCompile(`^test (.+) \.\.\. (ok|FAILED|ignored(?:, .*)?)$`)
	libtestRunning = regexp.MustCompile(`^\s+Running (?:unittests )?(\S+)`)
	libtestDoc     = regexp.MustCompile(`^\s+Doc-tests \S+$`)
	libtestResult  = regexp.MustCompile(`^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored;`)
)

func (l *libtest) line(s string) {
	if m := libtestCase.FindStringSubmatch(s); m != nil {
		if l.t == nil {
			l.t = perTest("cargo")
		}
		o := Pass
		switch {
		case m[2] == "FAILED":
			o = Fail
		case strings.HasPrefix(m[2], "ignored"):
			o = Skip
		}
		name := m[1]
		if l.binary != "" {
			name = l.binary + "::" + name
		}
		l.t.add(name, o)
		return
	}
	if m := libtestRunning.FindStringSubmatch(s); m != nil {
		l.binary = m[1]
		if strings.Contains(l.binary, "/deps/") {
			// An older cargo names the binary's file, whose hash changes
			// with every build: its name is what stays.
			l.binary, _, _ = strings.Cut(path.Base(l.binary), "-")
		}
		return
	}
	if libtestDoc.MatchString(s) {
		l.binary = "doc"
		return
	}
	if m := libtestResult.FindStringSubmatch(s); m != nil {
		if l.counts == nil {
			l.counts = &Tests{Format: "cargo"}
		}
		l.counts.Passed += atoi(m[1])
		l.counts.Failed += atoi(m[2])
		l.counts.Skipped += atoi(m[3])
	}
}

func (l *libtest) tests() *Tests {
	if l.t != nil {
		return l.t.count()
	}
	return l.counts
}

// summary reads the counts a test runner closes with when nothing names
// the tests: pytest's "== 3 passed, 1 skipped in 0.12s ==", jest's
// "Tests: 1 failed, 2 passed, 3 total", vitest's "Tests  2 passed |
// 1 skipped (3)" — added up when a gate runs several — else the last
// plain "N passed, N failed, N skipped" line (a word and a colon may
// come first).
type summary struct {
	tools *Tests
	plain *Tests
}

var (
	pytestSummary = regexp.MustCompile(`^=*\s*(.+?) in [0-9.]+s(?: \([0-9:.]+\))?\s*=*$`)
	jestSummary   = regexp.MustCompile(`^\s*Tests:\s+(.+)$`)
	vitestSummary = regexp.MustCompile(`^\s*Tests\s+(.+?)(?:\s+\(\d+\))?$`)
	plainSummary  = regexp.MustCompile(`^\s*(?:[A-Za-z][\w -]*:\s*)?(\d+ passed(?:, \d+ (?:failed|skipped))*|\d+ (?:failed|skipped)(?:, \d+ (?:passed|failed|skipped))+)\.?$`)
)

// What each runner's words count as. An expected failure (xfail, and
// an xpass: a test marked as allowed to fail) is no pass: skipped, like
// a deselected one.
var (
	pytestWords = map[string]string{"passed": "pass", "xpassed": "skip", "failed": "fail", "error": "fail", "errors": "fail",
		"skipped": "skip", "xfailed": "skip", "deselected": "skip", "warning": "", "warnings": "", "rerun": ""}
	jestWords  = map[string]string{"passed": "pass", "failed": "fail", "skipped": "skip", "todo": "skip", "total": ""}
	plainWords = map[string]string{"passed": "pass", "failed": "fail", "skipped": "skip"}
)

func (s *summary) line(l string) {
	if l == "" || l[0] == '{' {
		return
	}
	var t *Tests
	switch {
	case jestSummary.MatchString(l):
		t = countParts(jestSummary.FindStringSubmatch(l)[1], ", ", jestWords)
	case strings.HasPrefix(strings.TrimSpace(l), "Tests ") && vitestSummary.MatchString(l):
		t = countParts(vitestSummary.FindStringSubmatch(l)[1], " | ", jestWords)
	case pytestSummary.MatchString(l):
		if counts := pytestSummary.FindStringSubmatch(l)[1]; counts == "no tests ran" {
			t = &Tests{}
		} else {
			t = countParts(counts, ", ", pytestWords)
		}
	case plainSummary.MatchString(l):
		if p := countParts(plainSummary.FindStringSubmatch(l)[1], ", ", plainWords); p != nil {
			p.Format = "summary"
			s.plain = p
		}
		return
	}
	s.tools = addCounts(s.tools, "summary", t)
}

// addCounts adds the counts of t (nil: none) to sum, made with format
// when it is the first.
func addCounts(sum *Tests, format string, t *Tests) *Tests {
	if t == nil {
		return sum
	}
	if sum == nil {
		sum = &Tests{Format: format}
	}
	sum.Passed += t.Passed
	sum.Failed += t.Failed
	sum.Skipped += t.Skipped
	return sum
}

// countParts reads "N word<sep>N word…" where every word is one of words
// (nil when one is not, or none counts tests).
func countParts(s, sep string, words map[string]string) *Tests {
	t := &Tests{}
	counted := false
	for _, part := range strings.Split(strings.TrimSpace(s), sep) {
		n, word, ok := strings.Cut(strings.TrimSpace(part), " ")
		kind, known := words[word]
		if !ok || !known || !digits(n) {
			return nil
		}
		switch kind {
		case "pass":
			t.Passed += atoi(n)
		case "fail":
			t.Failed += atoi(n)
		case "skip":
			t.Skipped += atoi(n)
		}
		counted = counted || kind != ""
	}
	if !counted {
		return nil
	}
	return t
}

func digits(s string) bool {
	return s != "" && len(s) <= 9 && strings.Trim(s, "0123456789") == ""
}

// atoi reads a count the regexps matched (digits only; a count too large
// to be real is zero).
func atoi(s string) int {
	if len(s) > 9 {
		return 0
	}
	n, _ := strconv.Atoi(s)
	return n
}

func (s *summary) tests() *Tests {
	if s.tools != nil {
		return s.tools
	}
	return s.plain
}
