package gate

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/proc"
)

func declaredIn(t *testing.T, dir string) *Declared {
	t.Helper()
	d, err := DeclareTestsIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func declaredIDs(d *Declared, keep func(DeclaredTest) bool) []string {
	var ids []string
	for _, x := range d.Tests {
		if keep == nil || keep(x) {
			ids = append(ids, x.ID())
		}
	}
	slices.Sort(ids)
	return ids
}

// The tests the fixture projects declare, read from their files, are
// the tests their runners reported: every check agrees.
func TestRunnerReportsAgreeWithTheDeclaredTests(t *testing.T) {
	for project, outputs := range map[string][]string{
		"node":   {"node-tap.txt", "node-spec.txt"},
		"jest":   {"jest-verbose.txt", "jest-default.txt"},
		"vitest": {"vitest-verbose.txt", "vitest-default.txt"},
		"mocha":  {"mocha-spec.txt"},
		"py":     {"pytest-v.txt", "pytest-v-rA.txt", "pytest-rA.txt", "pytest-unittest.txt", "unittest-v.txt"},
	} {
		d := declaredIn(t, filepath.Join("testdata", "runners", "projects", project))
		for _, out := range outputs {
			rep := readFixture(t, out)
			if got := CheckInventory("test", rep, rep, d, d); len(got) > 0 {
				t.Errorf("%s against %s: %v", out, project, got)
			}
		}
	}
}

func TestDeclaredTestsOfEachShape(t *testing.T) {
	d := DeclareTests(map[string][]byte{
		"web/src/a.test.ts": []byte(`import { describe, it, test, expect } from 'vitest'
// it('commented out', () => {})
describe("outer", () => {
  const re = /it\('not a test'\)/;
  it.each([[1], [2]])('case %i', (n) => {});
  test.skipIf(process.env.CI)('maybe', () => {});
  describe.skip('off', () => { it('inside off', () => {}) });
  it(` + "`plain template`" + `, () => { expect(re.test('x')).toBe(false) });
  it(` + "`dyn ${1}`" + `, () => {});
  xit('old skip', () => {});
  fit('focused', () => {});
  test.failing('known bug', () => {});
  it('pending in mocha');
});
describe(name, () => { it('under a dynamic suite', () => {}) });
`),
		"test/node.test.mjs": []byte(`import test from 'node:test';
test('parent', async (ctx) => {
  await ctx.test('child', () => {});
  await other.test('not a child', () => {});
});
test('opts', { skip: 'later' }, () => {});
test('todo opt', { todo: true }, () => {});
test('skip false', { skip: false }, () => {});
`),
		"src/app.js": []byte(`it('not a test file', () => {})`),
		"tests/test_m.py": []byte(`import unittest, pytest

def helper():
    def test_inner():
        pass

"""
def test_in_docstring():
"""

@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    pass

@unittest.skip("later")
class Later(unittest.TestCase):
    def test_a(self):
        pass

class Base(unittest.TestCase):
    def setUp(self):
        pass
    async def test_async(self):
        pass

class Child(Base):
    def test_child(self):
        pass

class TestOuter:
    class TestInner:
        @pytest.mark.xfail
        def test_deep(self):
            pass

class Mixed(SomeMixin, unittest.TestCase):
    def test_mixed(self):
        pass

class NotATest:
    def test_no(self):
        pass
`),
		"go.mod":                  []byte("module example.com/m // the module\n\ngo 1.22\n"),
		"calc/a_test.go":          []byte("package calc_test\n\nimport (\n\t\"testing\"\n\tt2 \"testing\"\n)\n\nfunc TestA(t *testing.T) {}\nfunc Test_b(t *t2.T) {}\nfunc Testify(t *testing.T) {}\nfunc TestMain(m *testing.M) {}\nfunc FuzzC(f *testing.F) {}\nfunc BenchmarkD(b *testing.B) {}\nfunc ExampleE() {\n\t// Output: e\n}\nfunc ExampleF() {}\nfunc helper(t *testing.T) {}\n"),
		"calc/int_test.go":        []byte("//go:build integration\n\npackage calc\n\nimport \"testing\"\n\nfunc TestIntegration(t *testing.T) {}\n"),
		"calc/w_windows_test.go":  []byte("package calc\n\nimport \"testing\"\n\nfunc TestWindows(t *testing.T) {}\n"),
		"calc/testdata/x_test.go": []byte("package x\n\nimport \"testing\"\n\nfunc TestData(t *testing.T) {}\n"),
	})
	got := map[string]string{}
	for _, x := range d.Tests {
		if x.Dynamic {
			got[x.ID()+" (dynamic)"] = "dynamic"
			continue
		}
		flags := x.Mark
		if x.Suite {
			flags += " suite"
		}
		if x.Dynamic {
			flags += " dynamic"
		}
		if x.Conditional {
			flags += " conditional"
		}
		got[x.ID()] = strings.TrimSpace(flags)
	}
	want := map[string]string{
		"web/src/a.test.ts > outer": "suite", "web/src/a.test.ts > outer > maybe": "",
		"web/src/a.test.ts > outer > off": "skip suite", "web/src/a.test.ts > outer > off > inside off": "skip",
		"web/src/a.test.ts > outer > plain template": "", "web/src/a.test.ts > outer > old skip": "skip", "web/src/a.test.ts > outer > focused": "only",
		"web/src/a.test.ts > outer > known bug": "xfail", "web/src/a.test.ts > outer > pending in mocha": "",
		// it.each's and a template's titles are known at run time: by their describe.
		"web/src/a.test.ts > outer (dynamic)": "dynamic", "web/src/a.test.ts >  (dynamic)": "dynamic",
		"test/node.test.mjs > parent": "", "test/node.test.mjs > parent > child": "", "test/node.test.mjs > opts": "skip", "test/node.test.mjs > todo opt": "todo",
		"test/node.test.mjs > skip false": "",
		"tests/test_m.py::test_param":     "", "tests/test_m.py::Later::test_a": "skip", "tests/test_m.py::Base::test_async": "",
		"tests/test_m.py::Child::test_child": "", "tests/test_m.py::TestOuter::TestInner::test_deep": "xfail", "tests/test_m.py::Mixed::test_mixed": "",
		"example.com/m/calc.TestA": "", "example.com/m/calc.Test_b": "", "example.com/m/calc.FuzzC": "", "example.com/m/calc.ExampleE": "",
		"example.com/m/calc.TestIntegration": "conditional", "example.com/m/calc.TestWindows": "conditional",
	}
	for id, flags := range want {
		if g, ok := got[id]; !ok || g != flags {
			t.Errorf("%s: got %q (present %v), want %q", id, g, ok, flags)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("unexpected %s %q", id, got[id])
		}
	}
	if !slices.Equal(d.Files, []string{"calc/a_test.go", "calc/int_test.go", "calc/w_windows_test.go", "test/node.test.mjs", "tests/test_m.py", "web/src/a.test.ts"}) {
		t.Errorf("%q", d.Files)
	}
	// The dynamic tests are known by their describe: "outer > case 1"
	// and "outer > dyn 1" are in the tree, "outer > made up" is not.
	for name, in := range map[string]bool{"web/src/a.test.ts > outer > case 1": true, "web/src/a.test.ts > outer > dyn 1": true,
		"web/src/a.test.ts > outer > plain template": true, "web/src/a.test.ts > x > under a dynamic suite": true, "src/a.test.ts > outer > focused": true,
		"web/src/b.test.ts > outer > focused": false} {
		if indexDeclared(d).inTree([]string{"vitest"}, name) != in {
			t.Errorf("inTree(%q) = %v", name, !in)
		}
	}
	// A class with a base from elsewhere may inherit tests.
	if idx := indexDeclared(d); !idx.inTree([]string{"unittest"}, "tests.test_m.Mixed.test_inherited") || idx.inTree([]string{"unittest"}, "tests.test_m.Base.test_gone") {
		t.Error("inherited tests")
	}
}

// runGateIn runs command as a gate in dir.
func runGateIn(t *testing.T, dir, command string, env ...string) Result {
	t.Helper()
	res, _ := runGate(t, Runner{Proc: proc.Exec{}, Env: env}, dir, Gate{Name: "test", Command: command})
	return res
}

func copyTree(t *testing.T, from string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-R", from+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return dir
}

func edit(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), old) {
		t.Fatalf("%s lacks %q: %v", file, old, err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// What agents did to node --test suites: test.skip, test.todo, renaming
// the test file. Each loses a test that passed at the base; the renamed
// file's tests are also protected tests not reported.
func TestNodeTestCheats(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	src := filepath.Join("testdata", "runners", "projects", "node")
	dir := copyTree(t, src)
	base := runGateIn(t, dir, "node --test")
	if base.Tests == nil || base.Tests.Format != "tap" || !mapsEqual(base.Tests.Names, nodeWant) {
		t.Fatalf("%+v", base.Tests)
	}
	protected := declaredIn(t, dir)
	edit(t, filepath.Join(dir, "test/calc.test.mjs"), "it('adds'", "it.skip('adds'")
	edit(t, filepath.Join(dir, "test/calc.test.mjs"), "it('deep'", "it.todo('deep'")
	if err := os.Rename(filepath.Join(dir, "test/other.test.js"), filepath.Join(dir, "test/other.test.js.off")); err != nil {
		t.Fatal(err)
	}
	now := runGateIn(t, dir, "node --test")
	if lost := base.Tests.Lost(now.Tests); !slices.Equal(lost, []string{"calc > adds (skipped)", "calc > nested > deep (todo)", "other passes (did not run)"}) {
		t.Fatalf("%q", lost)
	}
	problems := CheckInventory("test", base.Tests, now.Tests, declaredIn(t, dir), protected)
	if len(problems) != 1 || problems[0].String() != "gate test: protected test test/other.test.js > other passes was not reported" {
		t.Fatalf("%v", problems)
	}
	// The spec reporter reads the same.
	spec := runGateIn(t, dir, "node --test --test-reporter=spec")
	if spec.Tests == nil || spec.Tests.Format != "node-spec" || spec.Tests.Names["calc > adds"] != Skip || spec.Tests.Names["calc > nested > deep"] != Todo {
		t.Fatalf("%+v", spec.Tests)
	}
}

// @unittest.skip and @unittest.expectedFailure on a test that passed at
// the base lose it; so does moving the test module away.
func TestUnittestCheats(t *testing.T) {
	python := "python3"
	if _, err := exec.LookPath(python); err != nil {
		t.Skip("python3 is not on PATH")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"tests/__init__.py": "",
		"tests/test_calc.py": "import unittest\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n\n" +
			"    def test_sub(self):\n        self.assertEqual(2 - 1, 1)\n\n    def test_mul(self):\n        self.assertEqual(2 * 2, 4)\n",
	})
	base := runGateIn(t, dir, python+" -m unittest -v")
	want := map[string]Outcome{"tests.test_calc.TestCalc.test_add": Pass, "tests.test_calc.TestCalc.test_sub": Pass, "tests.test_calc.TestCalc.test_mul": Pass}
	if base.Tests == nil || base.Tests.Format != "unittest" || !mapsEqual(base.Tests.Names, want) {
		t.Fatalf("%+v\n%s", base.Tests, base.Output)
	}
	protected := declaredIn(t, dir)
	file := filepath.Join(dir, "tests/test_calc.py")
	edit(t, file, "    def test_add", "    @unittest.skip('flaky')\n    def test_add")
	edit(t, file, "    def test_sub(self):\n        self.assertEqual(2 - 1, 1)", "    @unittest.expectedFailure\n    def test_sub(self):\n        self.assertEqual(2 - 1, 0)")
	cheatLoses(t, dir, python+" -m unittest -v", base, protected, "tests.test_calc.TestCalc.test_add (skipped)", "tests.test_calc.TestCalc.test_sub (expected failure)")
	if err := os.Rename(file, filepath.Join(dir, "tests/calc.py")); err != nil {
		t.Fatal(err)
	}
	moved := runGateIn(t, dir, python+" -m unittest -v")
	p := CheckInventory("test", base.Tests, moved.Tests, declaredIn(t, dir), protected)
	if len(p) != 3 || p[0].Kind != ProblemNotReported || p[0].Test != "tests/test_calc.py::TestCalc::test_add" {
		t.Fatalf("%v %+v", p, moved.Tests)
	}
}

// Test code that forges go test's results: "--- PASS" lines printed to
// its output (which go reads as the test's), and -json events written to
// the go command's own stdout, which fails: the gate's output is a socket
// (proc.Cmd.SocketOutput), which /proc cannot open again. A forged pass
// for a test that fails is a contradiction; for a test the tree no
// longer holds, a test not in the tree.
func TestForgedGoResults(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	dir := t.TempDir()
	forger := func(line string) string {
		return "package keep\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestForger(t *testing.T) {\n" +
			"\tfmt.Println(\"--- PASS: TestSub (0.00s)\")\n" +
			"\tf, err := os.OpenFile(fmt.Sprintf(\"/proc/%d/fd/1\", os.Getppid()), os.O_WRONLY, 0)\n\tif err != nil {\n\t\tfmt.Println(\"forge:\", err)\n\t\treturn\n\t}\n" +
			"\tfmt.Fprintln(f, `" + line + "`)\n}\n"
	}
	writeFiles(t, dir, map[string]string{
		"go.mod":             "module example.com/m\n\ngo 1.22\n",
		"keep/sub_test.go":   "package keep\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) { t.Fatal(\"not yet\") }\n",
		"keep/forge_test.go": forger(`{"Action":"pass","Package":"example.com/m/keep","Test":"TestSub"}`),
	})
	tree := declaredIn(t, dir)
	// go test -json: the test's printed line is its output, and the
	// events it writes to go's output never get there.
	res := runGateIn(t, dir, "go test ./...", goEnv...)
	if res.Tests == nil || res.Tests.Names["example.com/m/keep.TestSub"] != Fail || len(res.Tests.Contradictory) > 0 {
		t.Fatalf("go test ./...: %+v\n%s", res.Tests, res.Output)
	}
	if p := CheckInventory("test", nil, res.Tests, tree, tree); len(p) != 0 {
		t.Fatalf("go test ./...: %v", p)
	}
	// go test -v's text: the printed line reads as a result.
	res = runGateIn(t, dir, "go test -v ./... 2>&1", goEnv...)
	if !strings.Contains(res.Output, "forge: open /proc/") || !strings.Contains(res.Output, "no such device or address") {
		t.Fatalf("the forger opened go's output:\n%s", res.Output)
	}
	if res.Tests == nil || res.Tests.Names["example.com/m/keep.TestSub"] != Fail || !slices.Equal(res.Tests.Contradictory, []string{"example.com/m/keep.TestSub"}) {
		t.Fatalf("go test -v: %+v\n%s", res.Tests, res.Output)
	}
	p := CheckInventory("test", nil, res.Tests, tree, tree)
	if len(p) != 1 || p[0].String() != "gate test: test example.com/m/keep.TestSub was reported with two different outcomes" {
		t.Fatalf("go test -v: %v", p)
	}
	// The test deleted: the forged pass names a test the tree lacks.
	if err := os.Remove(filepath.Join(dir, "keep/sub_test.go")); err != nil {
		t.Fatal(err)
	}
	tree = declaredIn(t, dir)
	res = runGateIn(t, dir, "go test -v ./... 2>&1", goEnv...)
	if res.Tests == nil || res.Tests.Names["example.com/m/keep.TestSub"] != Pass {
		t.Fatalf("%+v\n%s", res.Tests, res.Output)
	}
	p = CheckInventory("test", nil, res.Tests, tree, tree)
	if len(p) != 1 || p[0].Kind != ProblemNotInTree || p[0].Test != "example.com/m/keep.TestSub" {
		t.Fatalf("%v", p)
	}
}

// The declared Go tests are named as go test -json names them.
func TestDeclaredGoTestsMatchGoTestIDs(t *testing.T) {
	dir := goModule(t)
	res := runGateIn(t, dir, "go test ./...", goEnv...)
	d := declaredIn(t, dir)
	if p := CheckInventory("test", res.Tests, res.Tests, d, d); len(p) > 0 {
		t.Fatalf("%v", p)
	}
	var top []string
	for name := range res.Tests.Names {
		if r, _ := refOf("go-json", name); r.name != "" {
			top = append(top, r.pkg+"."+r.name)
		}
	}
	slices.Sort(top)
	top = slices.Compact(top)
	if ids := declaredIDs(d, nil); !slices.Equal(ids, top) {
		t.Fatalf("declared %q\nreported %q", ids, top)
	}
	// A test written before its code: the package does not build at the
	// base, so its tests are required by their package.
	writeFiles(t, dir, map[string]string{"failing/new_test.go": "package failing\n\nimport \"testing\"\n\nfunc TestNew(t *testing.T) { _ = NotYet() }\n"})
	base := runGateIn(t, dir, "go test ./failing", goEnv...)
	protected := declaredIn(t, dir)
	if err := os.Remove(filepath.Join(dir, "failing/new_test.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "failing/f_test.go"), filepath.Join(dir, "failing/f_test.go.off")); err != nil {
		t.Fatal(err)
	}
	now := runGateIn(t, dir, "go test ./failing", goEnv...)
	p := CheckInventory("test", base.Tests, now.Tests, declaredIn(t, dir), protected)
	var got []string
	for _, x := range p {
		got = append(got, x.Kind+" "+x.Test)
	}
	if !slices.Equal(got, []string{"not-reported example.com/m/failing.TestFailing", "not-reported example.com/m/failing.TestNew", "not-reported example.com/m/failing.TestParent"}) {
		t.Fatalf("%q\nbase %+v\nnow %+v", got, base.Tests, now.Tests)
	}
}

// A test written before its code: its file (jest) or module (unittest)
// did not import at the base, so its tests are required by their file.
func TestTestsWrittenBeforeTheirCodeAreRequired(t *testing.T) {
	protected := DeclareTests(map[string][]byte{
		"__tests__/a.test.js": []byte("const { add } = require('../calc');\ntest('adds', () => { expect(add(1, 2)).toBe(3); });\n"),
		"__tests__/b.test.js": []byte("test('b works', () => {});\n"),
		"tests/test_add.py":   []byte("from calc import add\nimport unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"),
		"tests/test_other.py": []byte("import unittest\n\nclass TestOther(unittest.TestCase):\n    def test_other(self):\n        pass\n"),
	})
	base := readFixture(t, "jest-verbose-import-error.txt")
	moved := readOutput("PASS __tests__/b.test.js\n  ✓ b works (3 ms)\n\nTests:       1 passed, 1 total\n")
	if p := CheckInventory("test", base, moved, protected, protected); len(p) != 1 || p[0].Test != "__tests__/a.test.js > adds" || p[0].Kind != ProblemNotReported {
		t.Fatalf("%v", p)
	}
	fixed := readOutput("PASS __tests__/b.test.js\n  ✓ b works (3 ms)\n\nPASS __tests__/a.test.js\n  ✓ adds (1 ms)\n\nTests:       2 passed, 2 total\n")
	if p := CheckInventory("test", base, fixed, protected, protected); len(p) > 0 {
		t.Fatalf("%v", p)
	}
	ran := "\n----------------------------------------------------------------------\nRan 2 tests in 0.001s\n\n"
	base = readOutput("tests.test_add (unittest.loader._FailedTest.tests.test_add) ... ERROR\ntest_other (tests.test_other.TestOther.test_other) ... ok\n" + ran + "FAILED (errors=1)\n")
	if base == nil || base.Names["unittest.loader._FailedTest.tests.test_add"] != Fail {
		t.Fatalf("%+v", base)
	}
	gone := readOutput("test_other (tests.test_other.TestOther.test_other) ... ok\n" + strings.Replace(ran, "2 tests", "1 test", 1) + "OK\n")
	if p := CheckInventory("test", base, gone, protected, protected); len(p) != 1 || p[0].Test != "tests/test_add.py::TestAdd::test_add" {
		t.Fatalf("%v", p)
	}
}

// pytest's skip and xfail markers on a test that passed at the base
// lose it, with a real pytest where one is installed.
func TestPytestCheats(t *testing.T) {
	python := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-m", "pytest", "--version").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Skip("no python3 with pytest")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"tests/test_calc.py": "import pytest\n\ndef test_add():\n    assert 1 + 1 == 2\n\ndef test_sub():\n    assert 2 - 1 == 1\n\n" +
			"@pytest.mark.parametrize('a', [1, 2])\ndef test_pos(a):\n    assert a > 0\n",
	})
	command := python + " -m pytest -v -p no:cacheprovider"
	base := runGateIn(t, dir, command)
	want := map[string]Outcome{"tests/test_calc.py::test_add": Pass, "tests/test_calc.py::test_sub": Pass,
		"tests/test_calc.py::test_pos[1]": Pass, "tests/test_calc.py::test_pos[2]": Pass}
	if base.Tests == nil || base.Tests.Format != "pytest" || !mapsEqual(base.Tests.Names, want) {
		t.Fatalf("%+v\n%s", base.Tests, base.Output)
	}
	protected := declaredIn(t, dir)
	file := filepath.Join(dir, "tests/test_calc.py")
	edit(t, file, "def test_add", "@pytest.mark.skip(reason='flaky')\ndef test_add")
	edit(t, file, "def test_sub", "@pytest.mark.xfail\ndef test_sub")
	cheatLoses(t, dir, command, base, protected, "tests/test_calc.py::test_add (skipped)", "tests/test_calc.py::test_sub (expected failure)")
}

// cheatLoses runs the gate again after a cheat that the runner itself
// passes: the tests it made not pass are lost, and the report agrees
// with the tree (the cheat is in the outcomes, not the names).
func cheatLoses(t *testing.T, dir, command string, base Result, protected *Declared, lost ...string) {
	t.Helper()
	now := runGateIn(t, dir, command)
	if !now.Passed {
		t.Fatalf("the cheat should pass the runner itself: %+v", now)
	}
	if got := base.Tests.Lost(now.Tests); !slices.Equal(got, lost) {
		t.Fatalf("%q", got)
	}
	if p := CheckInventory("test", base.Tests, now.Tests, declaredIn(t, dir), protected); len(p) > 0 {
		t.Fatalf("%v", p)
	}
}

func TestNoInventoryNamesTestGatesNobodyRead(t *testing.T) {
	got := NoInventory([]Result{
		{Name: "lint", Command: "eslint ."},
		{Name: "test", Command: "./run-my-tests", Tests: nil},
		{Name: "unit", Command: "npx jest", Tests: &Tests{Format: "jest"}},
		{Name: "e2e", Command: "npx playwright test"},
		{Name: "build", Command: "make"},
	})
	if !slices.Equal(got, []string{"test", "e2e"}) {
		t.Fatalf("%q", got)
	}
}

func FuzzDeclaredJS(f *testing.F) {
	for _, p := range []string{"node/test/calc.test.mjs", "jest/__tests__/calc.test.js", "mocha/test/calc.spec.js"} {
		b, err := os.ReadFile(filepath.Join("testdata", "runners", "projects", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("describe(`a ${x}`, () => { it.each`a|b`('t', () => {}) }); /re(/.test('x'); test('u")
	f.Fuzz(func(t *testing.T, src string) {
		for _, d := range declaredJS("a.test.js", []byte(src)) {
			if d.Lang != "js" || d.File != "a.test.js" || d.Line < 1 {
				t.Fatalf("%+v", d)
			}
		}
	})
}

func FuzzDeclaredPython(f *testing.F) {
	for _, p := range []string{"py/tests/test_calc.py", "py/tests/test_unit.py"} {
		b, err := os.ReadFile(filepath.Join("testdata", "runners", "projects", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, src string) {
		tests, _ := declaredPython("tests/test_x.py", []byte(src))
		for _, d := range tests {
			if !strings.HasPrefix(d.Name[strings.LastIndex(d.Name, "::")+1:], "test") && !strings.Contains(d.Name, ":test") {
				t.Fatalf("%+v", d)
			}
		}
	})
}

func FuzzCheckInventory(f *testing.F) {
	f.Add("TAP version 13\n# Subtest: a\nok 1 - a\n1..1\n", "test('a', () => {})")
	f.Add("tests/test_a.py::test_x PASSED\n== 1 passed in 0.1s ==\n", "def test_x():\n    pass\n")
	f.Fuzz(func(t *testing.T, out, src string) {
		rep := readOutput(out)
		d := DeclareTests(map[string][]byte{"test/a.test.js": []byte(src), "tests/test_a.py": []byte(src)})
		for _, p := range CheckInventory("g", rep, rep, d, d) {
			if p.Gate != "g" || p.Test == "" {
				t.Fatalf("%+v", p)
			}
		}
	})
}

// TestRunsTests: a gate runs tests by its name or its command; the
// shell's own test command is not a test runner.
func TestRunsTests(t *testing.T) {
	for cmd, want := range map[string]bool{
		"test ! -f deploy.txt":          false,
		"! test -e x && test -f y":      false,
		"[ -f x ] || test -s y":         false,
		"if true; then test -f a; fi":   false,
		"make check":                    false,
		"go test ./...":                 true,
		"sh run-tests.sh":               true,
		"npm test":                      true,
		"pytest -q":                     true,
		"cd web && npx jest":            true,
		"test -f a && go test ./calc/…": true,
	} {
		if got := RunsTests("gate", cmd); got != want {
			t.Errorf("RunsTests(gate, %q) = %v, want %v", cmd, got, want)
		}
	}
	if !RunsTests("unit tests", "make") {
		t.Error("a gate named for tests runs tests")
	}
}
