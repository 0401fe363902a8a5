package gate

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
)

// goTestJSON rewrites a gate that is one `go test …` command (after
// plain VAR=value assignments, its output not piped or redirected) to
// run with -json: only the events of -json name every test that passed,
// failed or was skipped — go test without -v prints failing tests alone
// and "ok" for a package whose TestMain exits 0 before any test ran, and
// with -v a test's own output can pass for a result line. The gate's log
// gets what go test would have printed (outputReader renders it), so
// nothing changes for the person or the agent reading it. verbose is -v,
// which the rendering keeps. A command that already asks for -json, or
// is anything else, is left alone (ok false).
func goTestJSON(command string) (rewritten string, verbose, ok bool) {
	rest := strings.TrimLeft(command, " \t")
	for {
		w, after, _ := strings.Cut(rest, " ")
		if !envAssign.MatchString(w) {
			break
		}
		rest = strings.TrimLeft(after, " \t")
	}
	at := len(command) - len(rest)
	args, found := strings.CutPrefix(rest, "go test")
	if !found || (args != "" && args[0] != ' ' && args[0] != '\t') || !oneCommand(args) {
		return "", false, false
	}
	for _, cmd := range simpleCommands(args) {
		for _, w := range cmd {
			if w == "-args" || w == "--args" {
				break
			}
			flag := strings.TrimPrefix(strings.TrimPrefix(w, "-"), "-")
			name, _, _ := strings.Cut(flag, "=")
			switch {
			case !strings.HasPrefix(w, "-"):
			case name == "json":
				return "", false, false
			case name == "v" && !strings.HasSuffix(flag, "=false"):
				verbose = true
			}
		}
	}
	return command[:at] + "go test -json" + args, verbose, true
}

var envAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_./:,=+@%-]*$`)

// oneCommand reports whether s, the rest of a command line, holds no
// shell operator, redirection or command substitution outside quotes:
// go test's output is then the gate's output.
func oneCommand(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return false
			}
			i += j + 1
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' || s[i] == '`' || (s[i] == '$' && i+1 < len(s) && s[i+1] == '(') {
					return false
				}
			}
			if i >= len(s) {
				return false
			}
		case ';', '&', '|', '<', '>', '(', ')', '`', '\n', '\\', '#':
			return false
		case '$':
			if i+1 < len(s) && s[i+1] == '(' {
				return false
			}
		}
	}
	return true
}

// goEvent is one line of go test -json (test2json's TestEvent, and the
// build events of go 1.24 and later).
type goEvent struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

// goJSON reads go test -json. Every test that ran is named
// "package.Test" (a subtest "package.Test/sub"); a package that failed
// with no failing test (it did not build, its TestMain exited non-zero,
// it panicked outside a test) is a failure named by the package, so a
// build failure is never "zero tests". A test that started and never
// ended (the binary crashed or timed out) failed.
//
// With out set it also renders the events as go test without -json
// prints them: package lines, build errors and failing tests' output,
// a failing test's result line first and its failing subtests indented
// under it. Lines that are not events pass through.
type goJSON struct {
	out     io.Writer
	verbose bool

	t        *Tests
	running  map[string]string // test key → its package
	failedIn map[string]bool   // packages with a failing test
	pkgFail  map[string]bool   // packages that failed as a whole
	held     map[string]*strings.Builder
}

func (g *goJSON) line(s string) {
	var e goEvent
	if !strings.HasPrefix(s, "{") || json.Unmarshal([]byte(s), &e) != nil || e.Action == "" || (e.Package == "" && e.ImportPath == "") {
		g.write(s + "\n")
		return
	}
	if g.t == nil {
		g.t = perTest("go-json")
		g.running, g.failedIn, g.pkgFail, g.held = map[string]string{}, map[string]bool{}, map[string]bool{}, map[string]*strings.Builder{}
	}
	key := ""
	if e.Test != "" {
		key = e.Package + "." + e.Test
	}
	switch e.Action {
	case "build-output":
		g.write(e.Output)
	case "output":
		switch {
		case g.verbose:
			g.write(e.Output)
		case key != "":
			if !strings.HasPrefix(e.Output, "=== ") {
				g.hold(key, e.Output)
			}
		case e.Output != "PASS\n":
			g.release(e.Package)
			g.write(e.Output)
		}
	case "run":
		if key != "" {
			g.running[key] = e.Package
		}
	case "pass", "skip", "fail":
		if key == "" {
			if e.Action == "fail" {
				g.pkgFail[e.Package] = true
			}
			g.release(e.Package)
			return
		}
		delete(g.running, key)
		o := Outcome(e.Action)
		g.t.add(key, o)
		if o != Fail {
			delete(g.held, key)
			return
		}
		g.failedIn[e.Package] = true
		g.failed(key)
	}
}

// hold keeps a running test's output until it ends: shown if it fails.
// Of a flood it keeps the head (what went wrong first) and the result
// lines, and reports whether text was kept.
func (g *goJSON) hold(key, text string) bool {
	if g.out == nil {
		return true
	}
	b := g.held[key]
	if b == nil {
		b = &strings.Builder{}
		g.held[key] = b
	}
	if b.Len()+len(text) > maxHeld && !strings.HasPrefix(strings.TrimLeft(text, " "), "--- ") {
		return false
	}
	b.WriteString(text)
	return true
}

// maxHeld bounds the output kept for one running test.
const maxHeld = 256 << 10

// failed renders a failed test's held output, its result line first, into
// its parent test's held output (indented, as go test prints a subtest)
// or the log.
func (g *goJSON) failed(key string) {
	b := g.held[key]
	delete(g.held, key)
	if b == nil {
		return
	}
	lines := strings.SplitAfter(b.String(), "\n")
	head := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "--- FAIL") {
			head = i
		}
	}
	if head > 0 {
		lines = append(append([]string{lines[head]}, lines[:head]...), lines[head+1:]...)
	}
	text := strings.Join(lines, "")
	if i := strings.LastIndexByte(key, '/'); i > 0 {
		indented := "    " + strings.ReplaceAll(strings.TrimSuffix(text, "\n"), "\n", "\n    ") + "\n"
		if _, running := g.running[key[:i]]; running && g.hold(key[:i], indented) {
			return
		}
	}
	g.write(text)
}

// release shows the held output of a package's tests that never ended:
// what a crash or a timeout left is why the package failed.
func (g *goJSON) release(pkg string) {
	for key, p := range g.running {
		if p == pkg {
			if b := g.held[key]; b != nil {
				g.write(b.String())
				delete(g.held, key)
			}
		}
	}
}

func (g *goJSON) write(s string) {
	if g.out != nil {
		_, _ = io.WriteString(g.out, s)
	}
}

// finish shows what is still held (the run was cut short).
func (g *goJSON) finish() {
	for _, b := range g.held {
		g.write(b.String())
	}
	g.held = map[string]*strings.Builder{}
}

func (g *goJSON) tests() *Tests {
	if g.t == nil {
		return nil
	}
	for key, pkg := range g.running {
		g.t.add(key, Fail)
		g.failedIn[pkg] = true
	}
	for pkg := range g.pkgFail {
		if !g.failedIn[pkg] {
			g.t.add(pkg, Fail)
		}
	}
	return g.t.count()
}

// goText reads the plain output of go test (a Makefile's recipe, a
// script). Each "--- PASS/FAIL/SKIP: Test" line belongs to the package
// whose "ok"/"FAIL" line follows (go test prints a package's output in
// one piece). Without -v only failing tests are printed, so there a
// package is also a test named by its path: passed, failed, or not there
// when it had no test files or no test to run. With -v (a "=== RUN" line
// anywhere) a package is named only when it failed with no failing test.
type goText struct {
	t       *Tests
	pending []pendingTest
	units   []pendingTest // packages, with their outcome
	sawRun  bool
}

type pendingTest struct {
	name string
	o    Outcome
}

var (
	goResultLine  = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \([0-9.]+s\)$`)
	goPackageLine = regexp.MustCompile(`^(ok  |FAIL|\?   )\t(\S+)(?:\t| \[)(.*)$`)
)

func (g *goText) line(s string) {
	if strings.HasPrefix(s, "=== RUN ") {
		g.sawRun = true
		return
	}
	if m := goResultLine.FindStringSubmatch(s); m != nil {
		if len(g.pending) < maxNames {
			g.pending = append(g.pending, pendingTest{m[2], map[string]Outcome{"PASS": Pass, "FAIL": Fail, "SKIP": Skip}[m[1]]})
		}
		return
	}
	m := goPackageLine.FindStringSubmatch(s)
	if m == nil {
		return
	}
	if g.t == nil {
		g.t = perTest("go")
	}
	pkg, rest := m[2], m[3]
	failing := false
	for _, p := range g.pending {
		g.t.add(pkg+"."+p.name, p.o)
		failing = failing || p.o == Fail
	}
	g.pending = g.pending[:0]
	switch {
	case m[1] == "FAIL" && failing:
		g.units = append(g.units, pendingTest{pkg, Skip}) // named only without -v
	case m[1] == "FAIL":
		g.units = append(g.units, pendingTest{pkg, Fail})
	case m[1] == "ok  " && !strings.Contains(rest, "[no tests to run]") && len(g.units) < maxNames:
		g.units = append(g.units, pendingTest{pkg, Pass})
	}
}

func (g *goText) tests() *Tests {
	if g.t == nil {
		return nil
	}
	for _, u := range g.units {
		switch {
		case !g.sawRun && u.o == Skip:
			g.t.add(u.name, Fail)
		case !g.sawRun || u.o == Fail:
			g.t.add(u.name, u.o)
		}
	}
	return g.t.count()
}
