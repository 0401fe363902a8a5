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
		idx := indexDeclared(tree)
		for name := range now.Names {
			if !idx.inTree(formats, name) {
				add(ProblemNotInTree, name)
			}
		}
	}
	if protected != nil {
		nowIdx, baseIdx := indexReport(formats, now), indexReport(formats, base)
		for _, d := range protected.Tests {
			if d.Suite || d.Dynamic || d.Conditional {
				continue
			}
			if required(d, baseIdx, nowIdx) && !nowIdx.reports(d) {
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

// shellTest is the shell's own test command (`test -f x`, `! test -e
// y`), which runs no tests.
var shellTest = regexp.MustCompile(`(^|[;&|(!]|\bthen|\bdo|\belse)\s*test\s`)

// RunsTests reports whether a gate looks like it runs tests, by its name
// or command (the shell's test command aside).
func RunsTests(name, command string) bool {
	return testWords.MatchString(name) || testWords.MatchString(shellTest.ReplaceAllString(command, "$1 "))
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
		if module, ok := strings.CutPrefix(name, "unittest.loader._FailedTest."); ok {
			return testRef{lang: "python", module: module}, true // it did not import
		}
		parts := strings.Split(name, ".")
		if len(parts) < 3 {
			return testRef{}, false
		}
		n := len(parts)
		return testRef{lang: "python", module: strings.Join(parts[:n-2], "."), name: parts[n-2] + "::" + parts[n-1]}, true
	case "jest", "vitest":
		file, rest, ok := strings.Cut(name, titleSep)
		if !ok {
			return testRef{lang: "js", file: file}, true // it did not run
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

// prefixes are the keys a reported name is looked up by: the name, and
// for JavaScript each title path above it and "" (the tests declared
// there may be its parent test or a dynamic declaration).
func (r testRef) prefixes() []string {
	keys := []string{r.name}
	if r.lang != "js" {
		return keys
	}
	for n := r.name; ; {
		i := strings.LastIndex(n, titleSep)
		if i < 0 {
			break
		}
		n = n[:i]
		keys = append(keys, n)
	}
	return append(keys, "")
}

// declaredIndex finds declared tests by language and name.
type declaredIndex struct {
	tree   *Declared
	byName map[string][]DeclaredTest // nameKey
	byBase map[string][]DeclaredTest // path.Base(File) (and its stem for Python modules)
	files  map[string][]string       // path.Base → the test files read
	js     bool                      // the tree declares JavaScript tests
}

func indexDeclared(tree *Declared) *declaredIndex {
	idx := &declaredIndex{tree: tree, byName: map[string][]DeclaredTest{}, byBase: map[string][]DeclaredTest{}, files: map[string][]string{}}
	for _, d := range tree.Tests {
		idx.byName[d.nameKey(d.Name)] = append(idx.byName[d.nameKey(d.Name)], d)
		base := path.Base(d.File)
		idx.byBase[base] = append(idx.byBase[base], d)
		if stem, ok := strings.CutSuffix(base, ".py"); ok {
			idx.byBase[stem] = append(idx.byBase[stem], d)
		}
		idx.js = idx.js || d.Lang == "js"
	}
	for _, f := range tree.Files {
		idx.files[path.Base(f)] = append(idx.files[path.Base(f)], f)
	}
	return idx
}

// inTree: the reported test is one the tree declares, or the check
// cannot tell (its file is one the tree reading did not hold, its class
// may inherit tests, its runner's names do not say).
func (idx *declaredIndex) inTree(formats []string, name string) bool {
	checked := false
	for _, f := range formats {
		r, ok := refOf(f, name)
		if !ok {
			continue
		}
		if r.name == "" {
			return true // a package or file that failed as a whole
		}
		for _, key := range r.prefixes() {
			for _, d := range idx.byName[r.nameKey(key)] {
				if r.names(d) {
					return true
				}
			}
		}
		switch {
		case r.lang == "python" && idx.tree.inheritsTests(r):
			return true
		case r.lang == "go", r.lang == "js" && r.file == "" && idx.js:
			checked = true
		case r.file != "":
			checked = checked || slices.ContainsFunc(idx.byBase[path.Base(r.file)], r.located) ||
				slices.ContainsFunc(idx.files[path.Base(r.file)], func(f string) bool { return samePath(r.file, f) }) || TestSourceFile(r.file)
		case r.module != "":
			checked = checked || slices.ContainsFunc(idx.byBase[r.module[strings.LastIndexByte(r.module, '.')+1:]], r.located)
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
	for _, key := range d.Inheriting {
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

// reportIndex finds a gate's reported tests by the declared test they
// name, and the files, modules and packages it reported.
type reportIndex struct {
	perTest bool
	byName  map[string][]testRef // nameKey of a name or a JS title path above it
	units   map[string][]testRef // "go\x00"+package, or a file's or module's last element
	plainGo map[string][]testRef // packages plain go test output reported (each test in them), by unitKey
}

func indexReport(formats []string, t *Tests) *reportIndex {
	idx := &reportIndex{byName: map[string][]testRef{}, units: map[string][]testRef{}, plainGo: map[string][]testRef{}}
	if t == nil || !t.PerTest {
		return idx
	}
	idx.perTest = true
	for name := range t.Names {
		for _, f := range formats {
			r, ok := refOf(f, name)
			if !ok {
				continue
			}
			if r.name != "" {
				for _, key := range r.prefixes() {
					idx.byName[r.nameKey(key)] = append(idx.byName[r.nameKey(key)], r)
				}
			} else if f == "go" {
				idx.plainGo[r.unitKey()] = append(idx.plainGo[r.unitKey()], r)
			}
			if key := r.unitKey(); key != "" {
				idx.units[key] = append(idx.units[key], r)
			}
		}
	}
	return idx
}

// unitKey is where a reported test is filed by its unit ("": a runner
// that names no file).
func (r testRef) unitKey() string {
	switch {
	case r.lang == "go":
		return "go\x00" + path.Base(r.pkg)
	case r.module != "":
		return r.module[strings.LastIndexByte(r.module, '.')+1:]
	case r.file != "":
		return path.Base(r.file)
	}
	return ""
}

// nameKey files a reported test, or a title path above it, by its
// language, its unit's last element where it names one, and name.
func (r testRef) nameKey(name string) string {
	switch r.lang {
	case "js":
		return "js\x00" + name
	case "python":
		return "py\x00" + strings.TrimSuffix(r.unitKey(), ".py") + "\x00" + name
	}
	return r.unitKey() + "\x00" + name
}

// nameKey is testRef.nameKey for a declared test.
func (d DeclaredTest) nameKey(name string) string {
	switch d.Lang {
	case "js":
		return "js\x00" + name
	case "python":
		return "py\x00" + strings.TrimSuffix(path.Base(d.File), ".py") + "\x00" + name
	}
	return unitKeyOf(d)[0] + "\x00" + name
}

// unitKeyOf is the unitKey under which d's file, module or package is
// filed.
func unitKeyOf(d DeclaredTest) []string {
	if d.Lang == "go" {
		if d.Package != "" {
			return []string{"go\x00" + path.Base(d.Package)}
		}
		return []string{"go\x00" + path.Base(path.Dir(d.File))}
	}
	base := path.Base(d.File)
	return []string{base, strings.TrimSuffix(base, ".py")}
}

// reports: the report names d (or a subtest or parameter of it). A
// package that plain go test output reports (without -v it names only
// failing tests) reports each test in it.
func (idx *reportIndex) reports(d DeclaredTest) bool {
	for _, r := range idx.byName[d.nameKey(d.Name)] {
		if r.names(d) {
			return true
		}
	}
	for _, key := range unitKeyOf(d) {
		if slices.ContainsFunc(idx.plainGo[key], func(r testRef) bool { return r.located(d) }) {
			return true
		}
	}
	return false
}

// unitOf: whether the report holds d's file, module or package, and
// whether it names a test in it.
func (idx *reportIndex) unitOf(d DeclaredTest) (unit, named bool) {
	for _, key := range unitKeyOf(d) {
		for _, r := range idx.units[key] {
			if r.located(d) {
				unit = true
				named = named || r.name != ""
			}
		}
	}
	return unit, named
}

// required: the gate must report the protected test d now: it did at
// the base, or the base (with no per-test base, now) reported d's file
// or package without naming a test in it (it did not build or import:
// a test written before its code).
func required(d DeclaredTest, base, now *reportIndex) bool {
	if !base.perTest {
		unit, _ := now.unitOf(d)
		return unit
	}
	if base.reports(d) {
		return true
	}
	unit, named := base.unitOf(d)
	return unit && !named
}
