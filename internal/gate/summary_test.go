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

func readLines(r lineReader, out string) *Tests {
	for _, l := range strings.Split(out, "\n") {
		r.line(plainLine(l))
	}
	return r.tests()
}

func TestCargoTestGateNamesEachTest(t *testing.T) {
	if _, err := exec.LookPath("cargo"); err != nil {
		t.Skip("cargo is not on PATH")
	}
	dir := t.TempDir()
	lib := "/// Adds.\n///\n/// ```\n/// assert_eq!(cr::add(1, 2), 3);\n/// ```\npub fn add(a: u64, b: u64) -> u64 { a + b }\n\n" +
		"#[cfg(test)]\nmod tests {\n    #[test]\n    fn it_works() { assert_eq!(super::add(2, 2), 4); }\n    #[test]\n    #[ignore]\n    fn later() {}\n    #[test]\n    fn flaky() {}\n}\n"
	writeFiles(t, dir, map[string]string{
		"Cargo.toml":  "[package]\nname = \"cr\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"src/lib.rs":  lib,
		"tests/it.rs": "#[test]\nfn it_works() { assert_eq!(cr::add(1, 1), 2); }\n",
	})
	r := Runner{Proc: proc.Exec{}, Env: []string{"CARGO_TARGET_DIR=" + filepath.Join(dir, "target"), "CARGO_NET_OFFLINE=true", "CARGO_TERM_COLOR=never"}}
	base, _ := runGate(t, r, dir, Gate{Name: "test", Command: "cargo test"})
	want := map[string]Outcome{"src/lib.rs::tests::it_works": Pass, "src/lib.rs::tests::later": Skip, "src/lib.rs::tests::flaky": Pass,
		"tests/it.rs::it_works": Pass, "doc::src/lib.rs - add (line 3)": Pass}
	if !base.Passed || base.Tests == nil || base.Tests.Format != "cargo" || !mapsEqual(base.Tests.Names, want) {
		t.Fatalf("%+v", base)
	}
	// An agent marks a test #[ignore] and deletes the integration tests.
	writeFiles(t, dir, map[string]string{"src/lib.rs": strings.Replace(lib, "#[test]\n    fn flaky", "#[test]\n    #[ignore]\n    fn flaky", 1)})
	if err := os.Remove(filepath.Join(dir, "tests/it.rs")); err != nil {
		t.Fatal(err)
	}
	now, _ := runGate(t, r, dir, Gate{Name: "test", Command: "cargo test"})
	lost := base.Tests.Lost(now.Tests)
	if !now.Passed || !slices.Equal(lost, []string{"src/lib.rs::tests::flaky (skipped)", "tests/it.rs::it_works (did not run)"}) {
		t.Fatalf("%q %+v", lost, now)
	}
}

func TestLibtestReadsNamesAndCounts(t *testing.T) {
	// An older cargo names the binary's file; its hash changes with the build.
	got := readLines(&libtest{}, "     Running target/debug/deps/cr-0123abcd\n\nrunning 2 tests\ntest a::b ... ok\ntest a::c - should panic ... ok\n"+
		"test a::d ... ignored, needs a database\ntest a::e ... FAILED\ntest bench_x ... bench:         12 ns/iter (+/- 1)\n")
	want := map[string]Outcome{"cr::a::b": Pass, "cr::a::c - should panic": Pass, "cr::a::d": Skip, "cr::a::e": Fail}
	if got == nil || !mapsEqual(got.Names, want) {
		t.Fatalf("%+v", got)
	}
	// The terse format prints dots: the result lines count, added up.
	got = readLines(&libtest{}, "running 3 tests\n..i\ntest result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n"+
		"test result: FAILED. 4 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s\n")
	if got == nil || got.PerTest || got.String() != "6 passed, 1 failed, 1 skipped" {
		t.Fatalf("%+v", got)
	}
	if got := readLines(&libtest{}, "test of patience ... passed with flying colours\nok\n"); got != nil {
		t.Fatalf("%+v", got)
	}
}

func TestSummaryLinesCount(t *testing.T) {
	for out, want := range map[string]string{
		"===== 3 passed, 1 skipped in 0.12s =====":                                                                                                         "3 passed, 0 failed, 1 skipped",
		"== 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 2 warnings, 1 error in 1.50s ==":                                                          "2 passed, 2 failed, 3 skipped",
		"3 passed, 2 deselected in 65.43s (0:01:05)":                                                                                                       "3 passed, 0 failed, 2 skipped",
		"============================ no tests ran in 0.01s =============================":                                                                 "0 passed, 0 failed, 0 skipped",
		"Tests:       1 failed, 2 skipped, 1 todo, 3 passed, 7 total":                                                                                      "3 passed, 1 failed, 3 skipped",
		"Test Suites: 1 passed, 1 total\nTests:       4 passed, 4 total\nSnapshots:   0 total":                                                             "4 passed, 0 failed, 0 skipped",
		" Test Files  1 passed (1)\n      Tests  2 passed | 1 skipped (3)\n   Duration  310ms":                                                             "2 passed, 0 failed, 1 skipped",
		"\x1b[2m      Tests \x1b[22m \x1b[1m\x1b[31m1 failed\x1b[39m\x1b[22m\x1b[2m | \x1b[22m\x1b[1m\x1b[32m5 passed\x1b[39m\x1b[22m\x1b[90m (6)\x1b[39m": "5 passed, 1 failed, 0 skipped",
		// Two runners in one gate add up.
		"== 2 passed in 0.1s ==\nTests:       1 failed, 3 passed, 4 total": "5 passed, 1 failed, 0 skipped",
		// A plain line: the last one closes.
		"12 passed, 0 failed, 1 skipped\nResults: 42 passed, 1 failed, 3 skipped": "42 passed, 1 failed, 3 skipped",
		"suite: 7 passed": "7 passed, 0 failed, 0 skipped",
		"progress 1 passed\r3 passed, 1 failed, 0 skipped\r\n": "3 passed, 1 failed, 0 skipped",
	} {
		got := readLines(&summary{}, out)
		if got == nil || got.PerTest || got.String() != want {
			t.Errorf("%q: %v, want %s", out, got, want)
		}
	}
	for _, out := range []string{
		"", "Finished `test` profile [unoptimized + debuginfo] target(s) in 0.90s", "compiled 3 files in 2.1s",
		"3 apples, 2 passed", "Tests: many passed", "lint: 0 problems", "passed", "1 passed and 2 failed",
		`{"passed": 3}`, "Test Files  1 passed (1)",
	} {
		if got := readLines(&summary{}, out); got != nil {
			t.Errorf("%q read as %v", out, got)
		}
	}
}

func TestLostComparesWhatPassedAtTheBase(t *testing.T) {
	base := &Tests{Format: "go-json", PerTest: true, Names: map[string]Outcome{"a": Pass, "b": Pass, "c": Pass, "d": Pass, "e": Skip, "f": Fail}}
	now := &Tests{Format: "go-json", PerTest: true, Names: map[string]Outcome{"a": Pass, "b": Skip, "c": Fail, "e": Pass, "g": Pass}}
	if got := base.Lost(now); !slices.Equal(got, []string{"b (skipped)", "c (failed)", "d (did not run)"}) {
		t.Fatalf("%q", got)
	}
	if got := base.Lost(nil); !slices.Equal(got, []string{"a (did not run)", "b (did not run)", "c (did not run)", "d (did not run)"}) {
		t.Fatalf("%q", got)
	}
	if got := (*Tests)(nil).Lost(now); got != nil {
		t.Fatalf("%q", got)
	}
	// Counts alone: fewer passed, or more skipped, is a loss; more passed is not.
	cb := &Tests{Format: "summary", Passed: 10, Skipped: 1}
	for now, want := range map[*Tests][]string{
		{Passed: 10, Skipped: 1}: nil,
		{Passed: 12, Failed: 1}:  nil,
		{Passed: 9, Skipped: 2}:  {"10 tests passed at the base, 9 now", "1 tests were skipped at the base, 2 now"},
		{Passed: 11, Skipped: 2}: {"1 tests were skipped at the base, 2 now"},
		nil:                      {"10 tests passed at the base, 0 now"},
	} {
		if got := cb.Lost(now); !slices.Equal(got, want) {
			t.Errorf("%+v: %q, want %q", now, got, want)
		}
	}
	// A per-test base against counts now compares counts (4 passed at the base).
	if got := base.count().Lost(&Tests{Passed: 3}); !slices.Equal(got, []string{"4 tests passed at the base, 3 now"}) {
		t.Fatalf("%q", got)
	}
	got := LostTests(
		[]Result{{Name: "lint"}, {Name: "unit", Tests: base}, {Name: "e2e", Tests: cb}},
		[]Result{{Name: "lint"}, {Name: "unit", Tests: now}, {Name: "e2e", Tests: &Tests{Passed: 8, Skipped: 1}}})
	if !slices.Equal(got, []string{"b (skipped)", "c (failed)", "d (did not run)", "gate e2e: 10 tests passed at the base, 8 now"}) {
		t.Fatalf("%q", got)
	}
	if got := Counts([]Result{{Name: "lint"}}); got != "" {
		t.Fatal(got)
	}
}

func TestOutputReaderBoundsLinesAndPassesBytesOn(t *testing.T) {
	var out strings.Builder
	o := newOutputReader(&out, false, false)
	long := strings.Repeat("x", maxLine+10)
	input := long + "\n3 passed, 0 failed, 0 skipped\npartial 4 passed"
	for i := 0; i < len(input); i += 7 {
		_, _ = o.Write([]byte(input[i:min(i+7, len(input))]))
	}
	o.finish()
	if out.String() != input {
		t.Fatal("the output was changed")
	}
	if got := o.tests(nil); got == nil || got.Passed != 3 {
		t.Fatalf("%+v", got)
	}
}

func FuzzLibtest(f *testing.F) {
	f.Add("     Running unittests src/lib.rs (target/debug/deps/cr-1)\ntest a ... ok\ntest b ... FAILED\ntest c ... ignored\n   Doc-tests cr\ntest result: ok. 1 passed; 1 failed; 1 ignored;")
	f.Fuzz(func(t *testing.T, out string) {
		checkInventory(t, readLines(&libtest{}, out))
	})
}

func FuzzSummary(f *testing.F) {
	for _, s := range []string{"== 1 failed, 2 passed in 0.1s ==", "Tests:  1 failed, 2 passed, 3 total", "Tests  2 passed | 1 skipped (3)", "Done: 1 passed, 2 failed, 3 skipped"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		got := readLines(&summary{}, out)
		checkInventory(t, got)
		if got != nil && got.PerTest {
			t.Fatal("a summary line named tests")
		}
	})
}

// A failed gate's summary names the tests its inventory saw fail (three,
// then how many more); a passing gate's and one without an inventory
// stay one word.
func TestSummaryNamesFailedTests(t *testing.T) {
	names := map[string]Outcome{"p.TestA": Fail, "p.TestB": Pass, "p.TestC": Fail, "p.TestD": Fail, "p.TestE": Fail}
	got := Summary([]Result{
		{Name: "test", Tests: &Tests{PerTest: true, Names: names}},
		{Name: "lint", Passed: true},
		{Name: "e2e"},
	})
	if want := "test FAILED (p.TestA, p.TestC, p.TestD and 1 more), lint passed, e2e FAILED"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
