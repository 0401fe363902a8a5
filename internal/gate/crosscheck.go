package gate

import (
	"fmt"
	"go/token"
	"path"
	"regexp"
	"slices"
	"strings"
)

// InventoryProblem is one way a gate's report and the tree disagree.
type InventoryProblem struct {
	Gate string `json:"gate"`
	// Kind is ProblemContradictory, ProblemNotInTree or ProblemNotReported.
	Kind string `json:"kind"`
	Test string `json:"test"` // as the runner named it, or DeclaredTest.ID
}

// The kinds of InventoryProblem.
const (
	// ProblemContradictory: the output reported the test with two
	// outcomes (a forged result line or go test -json event).
	ProblemContradictory = "contradictory"
	// ProblemNotInTree: the output reported a test that the judged tree
	// does not declare (a forged result for a deleted test).
	ProblemNotInTree = "not-in-tree"
	// ProblemNotReported: a test declared in a protected file, which the
	// gate ran at the base (or whose file or package it ran), was not
	// reported (a renamed test file, a test made to go away).
	ProblemNotReported = "not-reported"
)

func (p InventoryProblem) String() string {
	switch p.Kind {
	case ProblemContradictory:
		return fmt.Sprintf("gate %s: test %s was reported with two different outcomes", p.Gate, p.Test)
	case ProblemNotInTree:
		return fmt.Sprintf("gate %s: test %s was reported, but the tree declares no such test", p.Gate, p.Test)
	}
	return fmt.Sprintf("gate %s: protected test %s was not reported", p.Gate, p.Test)
}

// CheckInventory holds what gate reported (now, on the judged commit;
// base, the same gate at the item's base, nil when it did not run there)
// against the tests the judged tree declares (tree) and the tests the
// protected files declared at the base (protected). It returns, sorted:
//   - every test now reports with two outcomes (Tests.Contradictory);
//   - every test now reports that tree does not declare — checked where
//     the runner's names say where a test lives: go test, pytest,
//     unittest, jest and vitest by file, package or module (only in files
//     the tree reading holds or that are named like tests); TAP, node's
//     spec reporter and mocha by titles, when the tree declares any
//     JavaScript test;
//   - every protected test that now does not report though base did
//     (any outcome), or whose file or package base reported without
//     naming a test in it (it did not build or import: a test written
//     before its code), or, with no per-test base, whose file or package
//     now reports.
//
// A report of counts alone (or none: nil now) checks only
// contradictions; JUnit and cargo names are not checked against the
// tree. A declared test that is Dynamic, Conditional or a Suite is never
// required.
func CheckInventory(gate string, base, now *Tests, tree, protected *Declared) []InventoryProblem {
	var problems []InventoryProblem
	add := func(kind, test string) {
		problems = append(problems, InventoryProblem{Gate: gate, Kind: kind, Test: test})
	}
	if now == nil {
		return nil
	}
	for _, c := range now.Contradictory {
		add(ProblemContradictory, c)
	}
	if !now.PerTest {
		return problems
	}
	formats := strings.Split(now.Format, "+")
	if tree != nil {
		for name := range now.Names {
			if !inTree(formats, name, tree) {
				add(ProblemNotInTree, name)
			}
		}
	}
	if protected != nil {
		for _, d := range protected.Tests {
			if d.Suite || d.Dynamic || d.Conditional {
				continue
			}
			if required(formats, d, base, now) && !reports(formats, now, d) {
				add(ProblemNotReported, d.ID())
			}
		}
	}
	slices.SortFunc(problems, func(a, b InventoryProblem) int {
		return strings.Compare(a.Kind+"\x00"+a.Test, b.Kind+"\x00"+b.Test)
	})
	return slices.Compact(problems)
}

// NoInventory names the gates that look like they run tests (the gate's
// name or command says test, spec, pytest, jest, vitest, mocha, tox or
// nox) but whose output no reader understood: "no test inventory for
// gate X" is what the verdict and status say of each.
func NoInventory(results []Result) []string {
	var names []string
	for _, r := range results {
		if r.Tests == nil && RunsTests(r.Name, r.Command) {
			names = append(names, r.Name)
		}
	}
	return names
}

var testWords = regexp.MustCompile(`(?i)test|spec|jest|vitest|mocha|\btox\b|\bnox\b|\bava\b`)

// RunsTests reports whether a gate looks like it runs tests, by its name
// or command.
func RunsTests(name, command string) bool {
	return testWords.MatchString(name) || testWords.MatchString(command)
}

// testRef is a reported test's name read for the runner that reported
// it: where it lives (a Go package, a file, a Python module) and its
// name there in DeclaredTest.Name's form.
type testRef struct {
	lang   string
	pkg    string // Go
	file   string // pytest, jest, vitest
	module string // unittest
	name   string // "" for a package or file that failed as a whole
}

// refOf reads name as format names tests (ok false: a format whose names
// say nothing of where a test is declared).
func refOf(format, name string) (testRef, bool) {
	switch format {
	case "go-json", "go":
		// "example.com/m/calc.TestAdd/sub.case": the first ".Test…"
		// (Fuzz, Example) that is a whole identifier ends the package.
		for i := strings.IndexByte(name, '.'); i > 0; {
			fn, _, _ := strings.Cut(name[i+1:], "/")
			if token.IsIdentifier(fn) && (goTestName(fn, "Test") || goTestName(fn, "Fuzz") || goTestName(fn, "Example")) {
				return testRef{lang: "go", pkg: name[:i], name: fn}, true
			}
			j := strings.IndexByte(name[i+1:], '.')
			if j < 0 {
				break
			}
			i += j + 1
		}
		return testRef{lang: "go", pkg: name}, true
	case "pytest":
		file, rest, ok := strings.Cut(name, "::")
		if !ok {
			return testRef{lang: "python", file: file}, true
		}
		if i := strings.IndexByte(rest, '['); i >= 0 {
			rest = rest[:i]
		}
		return testRef{lang: "python", file: file, name: rest}, true
	case "unittest":
		parts := strings.Split(name, ".")
		if len(parts) < 3 {
			return testRef{}, false
		}
		n := len(parts)
		return testRef{lang: "python", module: strings.Join(parts[:n-2], "."), name: parts[n-2] + "::" + parts[n-1]}, true
	case "jest", "vitest":
		file, rest, ok := strings.Cut(name, titleSep)
		if !ok {
			return testRef{}, false
		}
		return testRef{lang: "js", file: file, name: rest}, true
	case "tap", "node-spec", "mocha":
		return testRef{lang: "js", name: name}, true
	}
	return testRef{}, false
}

// samePath: a runner's path (relative to where it ran, maybe a folder
// of the tree) names the tree's file.
func samePath(runner, tree string) bool {
	runner = strings.TrimPrefix(path.Clean(runner), "./")
	return runner == tree || strings.HasSuffix(tree, "/"+runner)
}

// sameModule: unittest's dotted module names the tree's Python file.
func sameModule(module, file string) bool {
	dotted := strings.ReplaceAll(strings.TrimSuffix(file, ".py"), "/", ".")
	return dotted == module || strings.HasSuffix(dotted, "."+module)
}

// samePackage: go test's import path names the package of a declared
// test (by its folder when no go.mod was given).
func samePackage(pkg string, d DeclaredTest) bool {
	if d.Package != "" {
		return pkg == d.Package
	}
	dir := path.Dir(d.File)
	return pkg == dir || strings.HasSuffix(pkg, "/"+dir)
}

// located: d is in the file, module or package r names.
func (r testRef) located(d DeclaredTest) bool {
	if d.Lang != r.lang {
		return false
	}
	switch {
	case r.lang == "go":
		return samePackage(r.pkg, d)
	case r.module != "":
		return sameModule(r.module, d.File)
	case r.file != "":
		return samePath(r.file, d.File)
	}
	return true
}

// names: the reported name is d, one of its subtests or parameters, or
// one of the tests a dynamic declaration makes.
func (r testRef) names(d DeclaredTest) bool {
	if !r.located(d) || r.name == "" {
		return false
	}
	sep := titleSep
	if r.lang == "python" {
		sep = "::"
	}
	switch {
	case d.Dynamic:
		return d.Name == "" || strings.HasPrefix(r.name, d.Name+sep)
	case r.name == d.Name:
		return true
	}
	return r.lang == "js" && !d.Suite && strings.HasPrefix(r.name, d.Name+sep)
}

// inTree: the reported test is one the tree declares, or the check
// cannot tell (its file is one the tree reading did not hold, its class
// may inherit tests, its runner's names do not say).
func inTree(formats []string, name string, tree *Declared) bool {
	checked := false
	for _, f := range formats {
		r, ok := refOf(f, name)
		if !ok {
			continue
		}
		if r.name == "" {
			return true // a package or file that failed as a whole
		}
		known := false
		for _, d := range tree.Tests {
			if r.names(d) {
				return true
			}
			known = known || r.located(d)
		}
		switch {
		case r.lang == "python" && tree.inheritsTests(r):
			return true
		case r.lang == "go", known:
			checked = true
		case r.file != "":
			checked = checked || slices.ContainsFunc(tree.Files, func(f string) bool { return samePath(r.file, f) }) || TestSourceFile(r.file)
		case r.module != "":
			checked = checked || slices.ContainsFunc(tree.Files, func(f string) bool { return sameModule(r.module, f) })
		}
	}
	return !checked
}

// inheritsTests: the reported unittest or pytest method's class may
// inherit tests from a base the tree reading did not see.
func (d *Declared) inheritsTests(r testRef) bool {
	class, _, ok := cutLast(r.name, "::")
	if !ok {
		return false
	}
	for key := range d.openClasses {
		file, c, _ := strings.Cut(key, "::")
		if c == class && ((r.module != "" && sameModule(r.module, file)) || (r.file != "" && samePath(r.file, file))) {
			return true
		}
	}
	return false
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// reports: t names d (or a subtest or parameter of it). A package that
// plain go test output reports (without -v: it names only failing
// tests) reports each test in it.
func reports(formats []string, t *Tests, d DeclaredTest) bool {
	if t == nil {
		return false
	}
	for name := range t.Names {
		for _, f := range formats {
			r, ok := refOf(f, name)
			if !ok {
				continue
			}
			if r.names(d) || (f == "go" && r.name == "" && r.located(d)) {
				return true
			}
		}
	}
	return false
}

// required: the gate must report the protected test d now: it did at
// the base, or the base (with no per-test base, now) reported d's file
// or package without naming a test in it.
func required(formats []string, d DeclaredTest, base, now *Tests) bool {
	if base == nil || !base.PerTest {
		return inUnit(formats, d, now)
	}
	if reports(formats, base, d) {
		return true
	}
	unit, named := unitOf(formats, d, base)
	return unit && !named
}

// inUnit: t reports d's file, module or package.
func inUnit(formats []string, d DeclaredTest, t *Tests) bool {
	unit, _ := unitOf(formats, d, t)
	return unit
}

// unitOf: whether t reports d's file, module or package, and whether it
// names a test in it.
func unitOf(formats []string, d DeclaredTest, t *Tests) (unit, named bool) {
	for name := range t.Names {
		for _, f := range formats {
			r, ok := refOf(f, name)
			if !ok || !r.located(d) || r.lang == "js" && r.file == "" {
				continue
			}
			unit = true
			named = named || r.name != ""
		}
	}
	return unit, named
}
