package gate

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// DeclaredTest is a test that a file of a tree declares, named the way
// its runners name it, so that what a gate reported can be held against
// what the tree holds (CheckInventory).
type DeclaredTest struct {
	File string `json:"file"` // slash-separated, relative to the tree's root
	Line int    `json:"line"`
	Lang string `json:"lang"` // "go", "js" or "python"
	// Name is the test's name within its file or package: Go's function
	// ("TestAdd"); JavaScript's titles of its describes and its own,
	// joined by " > " ("calc > nested > deep"); Python's classes and
	// function, joined by "::" ("TestCalc::test_add", "test_add").
	Name string `json:"name"`
	// Package is a Go test's import path ("example.com/m/calc"; "" when
	// no go.mod above it was given).
	Package string `json:"package,omitempty"`
	// Mark is what the declaration says of running it: "skip" (test.skip,
	// xit, @unittest.skip, @pytest.mark.skip…), "todo", "only", "xfail"
	// (@unittest.expectedFailure, @pytest.mark.xfail, test.failing) or "".
	Mark string `json:"mark,omitempty"`
	// Suite is a JavaScript describe (a suite, not a test).
	Suite bool `json:"suite,omitempty"`
	// Dynamic says the runner names it from values known only when it
	// runs: a JavaScript title that is not a plain string (a template
	// with ${…}, a variable, test.each), whose Name is then only the
	// titles of its describes. A Python test parametrized by
	// @pytest.mark.parametrize keeps its name (the runner adds "[…]").
	Dynamic bool `json:"dynamic,omitempty"`
	// Conditional says it may not run in every gate: a Go file with build
	// constraints this platform does not meet without tags.
	Conditional bool `json:"conditional,omitempty"`
}

// ID is the test as one string: "example.com/m/calc.TestAdd",
// "src/calc.test.js > calc > adds", "tests/test_calc.py::TestCalc::test_add".
func (d DeclaredTest) ID() string {
	switch d.Lang {
	case "go":
		if d.Package != "" {
			return d.Package + "." + d.Name
		}
		return path.Dir(d.File) + "." + d.Name
	case "js":
		return d.File + titleSep + d.Name
	}
	return d.File + "::" + d.Name
}

// Declared are the tests a tree's files declare. It reads the common
// shapes exactly and says nothing of what it cannot see:
//   - Go: func TestX(t *testing.T), FuzzX(f *testing.F) and examples
//     with an output comment, in _test.go files, per package (the import
//     path from the nearest go.mod given). Subtests (t.Run) are named at
//     run time: a reported "TestX/sub" belongs to TestX.
//   - JavaScript and TypeScript: test/it/specify inside describe/context/
//     suite (jest, vitest, mocha, node:test), their .skip/.only/.todo/
//     .each/.failing forms, xit/fit, node:test's options ({ skip: true })
//     and subtests (t.test inside a test whose context is t). A title
//     built at run time (a template with ${…}, a variable, .each) and
//     tests declared in a loop or by a helper function in another file
//     are not seen by name: a dynamic title is matched by its describes.
//   - Python: def test* functions at a module's top level (pytest) and
//     def test* methods of Test* classes and unittest.TestCase subclasses
//     (also nested classes), with their skip/xfail decorators. Tests a
//     class inherits from a base in another file, tests made by
//     pytest_generate_tests hooks or load_tests, and doctests are not
//     seen; a class with a base other than TestCase or a test class of
//     the same file is taken to hold tests it inherits.
type Declared struct {
	Tests []DeclaredTest `json:"tests"`
	// Files are the test files read, sorted.
	Files []string `json:"files"`
	// Inheriting are the Python test classes ("tests/test_x.py::TestX")
	// with a base other than TestCase or a test class of their file: they
	// may inherit tests this reading did not see.
	Inheriting []string `json:"inheriting,omitempty"`
}

// TestSourceFile reports whether DeclareTests reads the file at path
// (slash-separated, relative to the tree's root): a Go, JavaScript,
// TypeScript or Python file named or placed like a test, or a go.mod
// (it names the Go packages). A judge reading a git tree reads only
// these.
func TestSourceFile(p string) bool {
	base := path.Base(p)
	for _, dir := range strings.Split(path.Dir(p), "/") {
		if dir == "node_modules" || dir == "vendor" || dir == ".git" || dir == "testdata" {
			return false
		}
	}
	switch {
	case base == "go.mod":
		return true
	case strings.HasSuffix(base, "_test.go"):
		return true
	case isPythonTestFile(base):
		return true
	}
	return isJSTestFile(p)
}

var jsExts = []string{".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"}

// isJSTestFile: the files jest, vitest, mocha and node --test run by
// default: *.test.* and *.spec.*, node's test-*, *-test, *_test and
// test.*, and any script under __tests__/, test/, tests/ or spec/.
func isJSTestFile(p string) bool {
	base := path.Base(p)
	ext := path.Ext(base)
	if !slices.Contains(jsExts, ext) || strings.HasSuffix(base, ".d.ts") {
		return false
	}
	stem := strings.TrimSuffix(base, ext)
	switch {
	case strings.HasSuffix(stem, ".test"), strings.HasSuffix(stem, ".spec"), strings.HasSuffix(stem, "-test"),
		strings.HasSuffix(stem, "_test"), strings.HasPrefix(stem, "test-"), stem == "test":
		return true
	}
	for _, dir := range strings.Split(path.Dir(p), "/") {
		if dir == "__tests__" || dir == "test" || dir == "tests" || dir == "spec" {
			return true
		}
	}
	return false
}

// isPythonTestFile: pytest's test_*.py and *_test.py, and unittest's
// test*.py.
func isPythonTestFile(base string) bool {
	return strings.HasSuffix(base, ".py") && (strings.HasPrefix(base, "test") || strings.HasSuffix(base, "_test.py"))
}

// DeclareTests reads the tests declared in files (slash-separated path
// → content; the files TestSourceFile names, others are ignored).
func DeclareTests(files map[string][]byte) *Declared {
	d := &Declared{}
	modules := map[string]string{} // go.mod's folder → module path
	for p, b := range files {
		if path.Base(p) == "go.mod" {
			modules[path.Dir(p)] = goModulePath(b)
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if !TestSourceFile(p) || path.Base(p) == "go.mod" {
			continue
		}
		src := files[p]
		switch base := path.Base(p); {
		case strings.HasSuffix(base, "_test.go"):
			d.Tests = append(d.Tests, declaredGo(p, src, goImportPath(modules, path.Dir(p)))...)
		case strings.HasSuffix(base, ".py"):
			tests, open := declaredPython(p, src)
			d.Tests = append(d.Tests, tests...)
			for _, c := range open {
				d.Inheriting = append(d.Inheriting, p+"::"+c)
			}
		default:
			d.Tests = append(d.Tests, declaredJS(p, src)...)
		}
		d.Files = append(d.Files, p)
	}
	return d
}

// DeclareTestsIn reads the tests declared under dir (a work tree),
// leaving out node_modules, vendor, testdata and hidden folders.
func DeclareTestsIn(dir string) (*Declared, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			if rel != "." && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules" || e.Name() == "vendor" || e.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !TestSourceFile(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return DeclareTests(files), nil
}

// goModulePath reads the module line of a go.mod.
func goModulePath(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(l, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '"') {
			rest, _, _ = strings.Cut(rest, "//")
			return strings.Trim(strings.TrimSpace(rest), "\"`")
		}
	}
	return ""
}

// goImportPath is the import path of the package in dir: the nearest
// go.mod's module path and the folders below it ("" without one).
func goImportPath(modules map[string]string, dir string) string {
	for d := dir; ; d = path.Dir(d) {
		if mod, ok := modules[d]; ok && mod != "" {
			rel := strings.TrimPrefix(strings.TrimPrefix(dir, d), "/")
			if d == "." {
				rel = dir
				if dir == "." {
					rel = ""
				}
			}
			if rel == "" {
				return mod
			}
			return mod + "/" + rel
		}
		if d == "." || d == "/" || d == "" {
			return ""
		}
	}
}
