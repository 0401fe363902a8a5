package gate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readFixture reads a runner's real output kept in testdata/runners
// (see its README for the versions and commands) as a gate would.
func readFixture(t testing.TB, name string) *Tests {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "runners", name))
	if err != nil {
		t.Fatal(err)
	}
	return readOutput(string(b))
}

// readOutput reads out as a gate's output, a few bytes at a time.
func readOutput(out string) *Tests {
	o := newOutputReader(&strings.Builder{}, false, false)
	for i := 0; i < len(out); i += 13 {
		_, _ = o.Write([]byte(out[i:min(i+13, len(out))]))
	}
	o.finish()
	return o.tests(nil)
}

var (
	nodeWant = map[string]Outcome{
		"calc > adds": Pass, "calc > subtracts": Fail, "calc > divides": Skip, "calc > multiplies": Todo, "calc > nested > deep": Pass,
		"top level": Pass, "top level > sub one": Pass, "top level > sub two": Skip,
		"skip option": Skip, "todo top": Todo, "todo that runs": Todo, "other passes": Pass,
	}
	jsFileWant = map[string]Outcome{
		"calc > adds": Pass, "calc > subtracts": Fail, "calc > divides": Skip, "calc > multiplies": Todo, "calc > nested > deep": Pass, "top level": Pass,
	}
	pytestWant = map[string]Outcome{
		"tests/test_calc.py::test_add": Pass, "tests/test_calc.py::test_sub": Fail, "tests/test_calc.py::test_later": Skip,
		"tests/test_calc.py::test_div[1-1]": Pass, "tests/test_calc.py::test_div[4-2]": Pass,
		"tests/test_calc.py::test_known_bug": XFail, "tests/test_calc.py::test_xpass": XFail, "tests/test_calc.py::test_strict_xpass": Fail,
		"tests/test_calc.py::test_needs_db":         Fail,
		"tests/test_calc.py::TestCalc::test_method": Pass, "tests/test_calc.py::TestCalc::test_skipped_inside": Skip,
	}
	unittestWant = map[string]Outcome{
		"tests.test_unit.TestOther.test_other": Pass, "tests.test_unit.TestUnit.test_ok": Pass,
		"tests.test_unit.TestUnit.test_fail": Fail, "tests.test_unit.TestUnit.test_error": Fail, "tests.test_unit.TestUnit.test_sub": Fail,
		"tests.test_unit.TestUnit.test_unexpected": Fail, "tests.test_unit.TestUnit.test_skip": Skip, "tests.test_unit.TestUnit.test_expected": XFail,
	}
)

func prefixed(prefix string, m map[string]Outcome) map[string]Outcome {
	out := map[string]Outcome{}
	for k, v := range m {
		out[prefix+k] = v
	}
	return out
}

func without(m map[string]Outcome, drop ...string) map[string]Outcome {
	out := map[string]Outcome{}
	for k, v := range m {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	return out
}

// Each runner's real output, as it prints it: per test where it names
// them, else the counts of its summary line.
func TestRunnerOutputsOfEachTool(t *testing.T) {
	jestWant := prefixed("__tests__/calc.test.js > ", jsFileWant)
	jestWant["__tests__/calc.test.js > calc > nested > inc 1"] = Pass
	jestWant["__tests__/calc.test.js > calc > nested > inc 2"] = Pass
	jestWant["__tests__/format.test.js > format > pads numbers"] = Pass
	vitestWant := prefixed("src/calc.test.js > ", jsFileWant)
	vitestWant["src/format.test.js > format > pads numbers"] = Pass
	mochaWant := map[string]Outcome{"calc > adds": Pass, "calc > subtracts": Fail, "calc > divides": Skip, "calc > multiplies": Skip,
		"calc > skips itself": Skip, "calc > nested > deep": Pass, "top level": Pass, "format > pads numbers": Pass}
	specWant := map[string]Outcome{"calc": Fail, "calc > nested": Pass}
	for k, v := range nodeWant {
		specWant[k] = v
	}
	for file, want := range map[string]struct {
		format string
		names  map[string]Outcome
		counts string
	}{
		"node-tap.txt":               {"tap", nodeWant, "5 passed, 1 failed, 6 skipped"},
		"node-spec.txt":              {"node-spec", specWant, "6 passed, 2 failed, 6 skipped"},
		"jest-verbose.txt":           {"jest", jestWant, "6 passed, 1 failed, 2 skipped"},
		"jest-default.txt":           {"jest", nil, "6 passed, 1 failed, 2 skipped"},
		"vitest-verbose.txt":         {"vitest", vitestWant, "4 passed, 1 failed, 2 skipped"},
		"vitest-verbose-nocolor.txt": {"vitest", vitestWant, "4 passed, 1 failed, 2 skipped"},
		"vitest-default.txt":         {"vitest", nil, "4 passed, 1 failed, 2 skipped"},
		"vitest-default-nocolor.txt": {"vitest", nil, "4 passed, 1 failed, 2 skipped"},
		"mocha-spec.txt":             {"mocha", mochaWant, "4 passed, 1 failed, 3 skipped"},
		"pytest-v.txt":               {"pytest", pytestWant, "4 passed, 3 failed, 4 skipped"},
		"pytest-v-rA.txt":            {"pytest", pytestWant, "4 passed, 3 failed, 4 skipped"},
		// -rA names every test but the skipped (pytest prints their file and line).
		"pytest-rA.txt":      {"pytest", without(pytestWant, "tests/test_calc.py::test_later", "tests/test_calc.py::TestCalc::test_skipped_inside"), "4 passed, 3 failed, 2 skipped"},
		"pytest-default.txt": {"pytest", nil, "4 passed, 3 failed, 4 skipped"},
		"pytest-unittest.txt": {"pytest", map[string]Outcome{
			"tests/test_unit.py::TestOther::test_other": Pass, "tests/test_unit.py::TestUnit::test_ok": Pass,
			"tests/test_unit.py::TestUnit::test_fail": Fail, "tests/test_unit.py::TestUnit::test_error": Fail, "tests/test_unit.py::TestUnit::test_sub": Fail,
			"tests/test_unit.py::TestUnit::test_unexpected": Fail, "tests/test_unit.py::TestUnit::test_skip": Skip, "tests/test_unit.py::TestUnit::test_expected": XFail,
		}, "2 passed, 4 failed, 2 skipped"},
		// A file that did not import: failed, by its name.
		"jest-verbose-import-error.txt": {"jest", map[string]Outcome{"__tests__/b.test.js > b works": Pass, "__tests__/a.test.js": Fail}, "1 passed, 1 failed, 0 skipped"},
		"unittest-v.txt":                {"unittest", unittestWant, "2 passed, 4 failed, 2 skipped"},
		"unittest-default.txt":          {"unittest", nil, "2 passed, 4 failed, 2 skipped"},
	} {
		got := readFixture(t, file)
		if got == nil {
			t.Errorf("%s: no inventory", file)
			continue
		}
		checkInventory(t, got)
		if got.Format != want.format || got.PerTest != (want.names != nil) || got.String() != want.counts || len(got.Contradictory) > 0 {
			t.Errorf("%s: %s per test %v, %s, contradictions %q; want %s %v, %s", file, got.Format, got.PerTest, got, got.Contradictory, want.format, want.names != nil, want.counts)
		}
		if want.names != nil && !mapsEqual(got.Names, want.names) {
			t.Errorf("%s:\n got %v\nwant %v", file, got.Names, want.names)
		}
	}
}

// A todo, an expected failure, an xpass or a skip is no pass: a test
// that passed at the base and is now any of them is lost, by its word.
func TestLostNamesWhatBecameOfATest(t *testing.T) {
	base := readFixture(t, "node-tap.txt")
	now := readOutput(strings.NewReplacer("ok 1 - adds", "ok 1 - adds # TODO later", "ok 6 - other passes", "ok 6 - other passes # SKIP").
		Replace(mustRead(t, "node-tap.txt")))
	if got := base.Lost(now); !slices.Equal(got, []string{"calc > adds (todo)", "other passes (skipped)"}) {
		t.Fatalf("%q", got)
	}
	base = readFixture(t, "unittest-v.txt")
	now = readOutput(strings.NewReplacer("test_ok (tests.test_unit.TestUnit.test_ok) ... ok", "test_ok (tests.test_unit.TestUnit.test_ok) ... expected failure").
		Replace(mustRead(t, "unittest-v.txt")))
	if got := base.Lost(now); !slices.Equal(got, []string{"tests.test_unit.TestUnit.test_ok (expected failure)"}) {
		t.Fatalf("%q", got)
	}
}

func mustRead(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "runners", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The shapes each reader must also read: older formats, output a test
// printed between its name and its result, docstrings, xdist.
func TestRunnerReadersEdgeShapes(t *testing.T) {
	for name, c := range map[string]struct {
		out  string
		want map[string]Outcome
	}{
		"unittest before 3.11, output and a docstring": {
			"test_a (m.T) ... ok\ntest_b (m.T) ... hello\nok\ntest_c (m.T.test_c)\nDoes c. ... FAIL\n" +
				"test_d (m.T.test_d) ... skipped \"why\"\n\n----------------------------------------------------------------------\nRan 4 tests in 0.001s\n\nFAILED (failures=1, skipped=1)\n",
			map[string]Outcome{"m.T.test_a": Pass, "m.T.test_b": Pass, "m.T.test_c": Fail, "m.T.test_d": Skip},
		},
		"pytest-xdist": {
			"[gw0] [ 50%] PASSED tests/test_a.py::test_one \n[gw1] [100%] FAILED tests/test_a.py::test_two \n== 1 failed, 1 passed in 0.5s ==\n",
			map[string]Outcome{"tests/test_a.py::test_one": Pass, "tests/test_a.py::test_two": Fail},
		},
		"pytest: a file that does not import, a teardown error": {
			"tests/test_a.py::test_one PASSED [ 50%]\ntests/test_a.py::test_one ERROR [ 50%]\n" +
				"=== short test summary info ===\nERROR tests/test_a.py::test_one - RuntimeError\nERROR tests/test_b.py - ImportError: no module\n== 1 passed, 2 errors in 0.1s ==\n",
			map[string]Outcome{"tests/test_a.py::test_one": Fail, "tests/test_b.py": Fail},
		},
		"TAP without node's subtest lines counts": {"TAP version 13\nok 1 should be equal\nnot ok 2 should be equal\n1..2\n", nil},
		"mocha twice in one gate": {
			"\n  a\n    ✔ one\n\n  1 passing (2ms)\n\n\n  b\n    ✔ two (120ms)\n    1) three\n\n  1 passing (3ms)\n  1 failing\n\n  1) b\n       three:\n     Error\n",
			map[string]Outcome{"a > one": Pass, "b > two": Pass, "b > three": Fail},
		},
		"jest and pytest in one gate": {
			"PASS src/a.test.js\n  ✓ works (2 ms)\n\nTests:       1 passed, 1 total\n" +
				"tests/test_x.py::test_y PASSED\n== 1 passed in 0.1s ==\n",
			map[string]Outcome{"src/a.test.js > works": Pass, "tests/test_x.py::test_y": Pass},
		},
	} {
		got := readOutput(c.out)
		checkInventory(t, got)
		switch {
		case got == nil:
			t.Errorf("%s: nothing read", name)
		case c.want == nil && got.PerTest:
			t.Errorf("%s: %+v", name, got)
		case c.want != nil && !mapsEqual(got.Names, c.want):
			t.Errorf("%s: %v", name, got.Names)
		}
	}
	if got := readOutput("TAP version 13\nok 1 should be equal\nnot ok 2 # TODO\n1..2\n"); got == nil || got.String() != "1 passed, 0 failed, 1 skipped" {
		t.Errorf("%+v", got)
	}
	if got := readOutput("PASS src/a.test.js\n  ✓ works (2 ms)\n\nTests:       1 passed, 1 total\ntests/test_x.py::test_y PASSED\n== 1 passed in 0.1s =="); got.Format != "jest+pytest" {
		t.Errorf("%+v", got)
	}
	// Lines that only look like results are not an inventory.
	for _, out := range []string{"ok 1 - looks like tap\n", "  ✔ looks like mocha\n", "test_a (m.T) ... ok\n", "a::b PASSED\n", "ℹ tests 3\n"} {
		if got := readOutput(out); got != nil && got.PerTest && len(got.Names) > 0 {
			t.Errorf("%q read as %+v", out, got)
		}
	}
}

// The same test reported with two outcomes is a contradiction: the
// worse outcome is kept, and the contradiction recorded.
func TestForgedResultLinesAreContradictions(t *testing.T) {
	tap := mustRead(t, "node-tap.txt")
	// A test's own output forging a pass for the failing test.
	forged := readOutput(tap + "ok 7 - calc > subtracts\n# Subtest: calc\n    ok 1 - subtracts\nok 8 - calc\n")
	if forged.Names["calc > subtracts"] != Fail || !slices.Equal(forged.Contradictory, []string{"calc > subtracts"}) {
		t.Fatalf("%+v", forged)
	}
	for out, want := range map[string][]string{
		"tests/test_a.py::test_one FAILED\ntests/test_a.py::test_one PASSED\n== 1 failed in 0.1s ==\n":          {"tests/test_a.py::test_one"},
		"test_a (m.T.test_a) ... FAIL\ntest_a (m.T.test_a) ... ok\nRan 1 test in 0.0s\n\nFAILED (failures=1)\n": {"m.T.test_a"},
		"--- FAIL: TestSub (0.00s)\n--- PASS: TestSub (0.00s)\nFAIL\tex/m\t0.1s\n":                              {"ex/m.TestSub"},
		"--- SKIP: TestSub (0.00s)\n--- PASS: TestSub (0.00s)\nok  \tex/m\t0.1s\n":                              {"ex/m.TestSub"},
		// pytest reports a passed test's teardown error itself: no contradiction.
		"tests/test_a.py::test_one PASSED\ntests/test_a.py::test_one ERROR\n== 1 passed, 1 error in 0.1s ==\n": nil,
	} {
		got := readOutput(out)
		if got == nil || !slices.Equal(got.Contradictory, want) {
			t.Errorf("%q: %+v", out, got)
		}
	}
}

func FuzzRunnerOutput(f *testing.F) {
	for _, name := range []string{"node-tap.txt", "node-spec.txt", "jest-verbose.txt", "vitest-verbose-nocolor.txt", "mocha-spec.txt", "pytest-v-rA.txt", "unittest-v.txt"} {
		f.Add(mustRead(f, name))
	}
	f.Fuzz(func(t *testing.T, out string) {
		got := readOutput(out)
		checkInventory(t, got)
		if again := readOutput(out); (got == nil) != (again == nil) || got != nil && (!mapsEqual(got.Names, again.Names) || got.String() != again.String()) {
			t.Fatalf("two readings differ: %+v, %+v", got, again)
		}
	})
}
