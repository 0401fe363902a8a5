package gate

import (
	"regexp"
	"strings"
)

// jest reads jest's output. With --verbose (jest's default when it runs
// one test file) each file's block names its tests under their describe
// titles: "__tests__/calc.test.js > calc > adds", "✓" passed, "✕"
// failed, "○ skipped", "✎ todo". Without it jest names only failing
// tests, so the "Tests:" line's counts are the inventory.
type jest struct {
	file   string // the file whose block is open ("" outside one)
	path   titlePath
	t      *Tests
	counts *Tests
	// failed are the files jest said FAIL of; named are those whose
	// block named a test. A failed file that named none did not run
	// ("Test suite failed to run": it did not import).
	failed []string
	named  map[string]bool
}

var (
	jestFile = regexp.MustCompile(`^ ?(?:PASS|FAIL) +(\S+)(?: \([0-9.]+ m?s\))?$`)
	jestTest = regexp.MustCompile(`^( +)(✓|✕|√|×|○ skipped|✎ todo) (.+?)(?: \(\d+ m?s\))?$`)
)

func (r *jest) line(s string) {
	if m := jestFile.FindStringSubmatch(s); m != nil {
		r.file, r.path = m[1], nil
		if strings.Contains(s, "FAIL") && len(r.failed) < maxNames {
			r.failed = append(r.failed, m[1])
		}
		return
	}
	if m := jestSummary.FindStringSubmatch(s); m != nil {
		r.file = ""
		r.counts = addCounts(r.counts, "jest", countParts(m[1], ", ", jestWords))
		return
	}
	if r.file == "" {
		return
	}
	if strings.TrimSpace(s) == "" {
		r.file = ""
		return
	}
	m := jestTest.FindStringSubmatch(s)
	if m == nil {
		if n := indent(s); n >= 2 && n%2 == 0 {
			r.path.at((n-2)/2, strings.TrimSpace(s))
		}
		return
	}
	o := map[string]Outcome{"✓": Pass, "√": Pass, "✕": Fail, "×": Fail, "○ skipped": Skip, "✎ todo": Todo}[m[2]]
	if r.t == nil {
		r.t, r.named = perTest("jest"), map[string]bool{}
	}
	r.named[r.file] = true
	r.t.add(r.file+titleSep+r.path.name((len(m[1])-2)/2, m[3]), o)
}

// tests: with --verbose, a failed file that named no test is a failure
// named by the file.
func (r *jest) tests() *Tests {
	if r.t == nil {
		return r.counts
	}
	for _, f := range r.failed {
		if !r.named[f] {
			r.t.add(f, Fail)
		}
	}
	return r.t.count()
}

// vitest reads vitest's output. Its verbose reporter (vitest 3 and
// later) names each test on one line, "✓ src/calc.test.js > calc > adds
// 2ms": "✓" passed, "×" failed, "↓" skipped, "□" todo. Its default
// reporter names tests only under a failing file, without their describe
// titles, so there the "Tests" line's counts are the inventory.
type vitest struct {
	seen   bool // a "Test Files" line
	t      *Tests
	counts *Tests
}

var (
	vitestFiles = regexp.MustCompile(`^\s*Test Files\s+\d+ `)
	vitestTest  = regexp.MustCompile(`^ +(✓|×|↓|□|√) (\S+ > .+?)(?: \[[^\]]*\])?$`)
	vitestTime  = regexp.MustCompile(` \d+(?:\.\d+)?m?s$`)
)

func (r *vitest) line(s string) {
	if vitestFiles.MatchString(s) {
		r.seen = true
		return
	}
	if strings.HasPrefix(strings.TrimSpace(s), "Tests ") {
		if m := vitestSummary.FindStringSubmatch(s); m != nil {
			r.counts = addCounts(r.counts, "vitest", countParts(m[1], " | ", jestWords))
		}
		return
	}
	m := vitestTest.FindStringSubmatch(s)
	if m == nil {
		return
	}
	o := map[string]Outcome{"✓": Pass, "√": Pass, "×": Fail, "↓": Skip, "□": Todo}[m[1]]
	name := m[2]
	if o == Pass || o == Fail {
		name = vitestTime.ReplaceAllString(name, "")
	}
	if r.t == nil {
		r.t = perTest("vitest")
	}
	r.t.add(name, o)
}

func (r *vitest) tests() *Tests {
	switch {
	case !r.seen:
		return nil
	case r.t != nil:
		return r.t.count()
	}
	return r.counts
}

// mocha reads mocha's spec reporter (its default): describe titles
// indented by level, "✔ name" passed, "N) name" failed, "- name"
// pending (it.skip, this.skip(), an it without a function: skipped),
// closed by "N passing (12ms)". Tests are named by their describe
// titles: "calc > nested > deep". What follows the counts (the
// failures' details) is not read, until a passing test starts another
// run of mocha in the same gate.
type mocha struct {
	path    titlePath
	cur     []pendingTest // this run's tests, kept when its counts come
	details bool
	t       *Tests
}

var (
	mochaPassing = regexp.MustCompile(`^ *\d+ passing \(\d+\S*\)$`)
	mochaTest    = regexp.MustCompile(`^( +)(?:(✔|✓) |(\d+)\) |- )(.+?)(?: \(\d+ms\))?$`)
)

func (r *mocha) line(s string) {
	if mochaPassing.MatchString(s) {
		if r.t == nil {
			r.t = perTest("mocha")
		}
		for _, c := range r.cur {
			r.t.add(c.name, c.o)
		}
		r.cur, r.path, r.details = nil, nil, true
		return
	}
	n := indent(s)
	if n < 2 || n%2 != 0 || strings.TrimSpace(s) == "" {
		return
	}
	m := mochaTest.FindStringSubmatch(s)
	if r.details {
		// Titles still set the path: the next run's describes come
		// before its first passing test.
		switch {
		case m == nil:
			r.path.at((n-2)/2, strings.TrimSpace(s))
			return
		case m[2] == "":
			return
		}
		r.details = false
	}
	if m == nil {
		r.path.at((n-2)/2, strings.TrimSpace(s))
		return
	}
	o := Skip
	switch {
	case m[2] != "":
		o = Pass
	case m[3] != "":
		o = Fail
	}
	if len(r.cur) < maxNames {
		r.cur = append(r.cur, pendingTest{r.path.name((n-2)/2, m[4]), o})
	}
}

func (r *mocha) tests() *Tests {
	if r.t == nil {
		return nil
	}
	return r.t.count()
}
