package gate

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/proc"
)

func TestGoTestJSONRewritesOneGoTestCommand(t *testing.T) {
	for cmd, want := range map[string]struct {
		rewritten string
		verbose   bool
	}{
		"go test ./...":                        {"go test -json ./...", false},
		"go test":                              {"go test -json", false},
		"  go test -v -race ./...":             {"  go test -json -v -race ./...", true},
		"go test --v=true ./...":               {"go test -json --v=true ./...", true},
		"go test -v=false ./...":               {"go test -json -v=false ./...", false},
		"CGO_ENABLED=0 GOOS=linux go test ./x": {"CGO_ENABLED=0 GOOS=linux go test -json ./x", false},
		"go test -run 'TestA|TestB' ./...":     {"go test -json -run 'TestA|TestB' ./...", false},
		`go test -run "Test(A|B)" ./...`:       {`go test -json -run "Test(A|B)" ./...`, false},
		"go test ./... -args -v -json":         {"go test -json ./... -args -v -json", false},
		"go test -json ./...":                  {},
		"go test --json=true ./...":            {},
		"go test ./... | tee out":              {},
		"go test ./... > out.txt":              {},
		"go test ./... 2>&1":                   {},
		"go test ./... && go vet ./...":        {},
		"go test $(go list ./...)":             {},
		`go test "$(go list ./...)"`:           {},
		"go test `go list ./...`":              {},
		"go test ./...; true":                  {},
		"go test -run 'open ./...":             {},
		"go tests":                             {},
		"go vet ./...":                         {},
		"make test":                            {},
		"X='a b' go test ./...":                {},
		"gotest ./...":                         {},
	} {
		got, verbose, ok := goTestJSON(cmd)
		if ok != (want.rewritten != "") || got != want.rewritten || verbose != want.verbose {
			t.Errorf("goTestJSON(%q) = %q, %v, %v; want %q, %v", cmd, got, verbose, ok, want.rewritten, want.verbose)
		}
	}
}

// goModule writes a module with one package per way an agent has made a
// test go away, each holding a test that passes, plus a package whose
// test fails and one without tests.
func goModule(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module example.com/m\n\ngo 1.22\n",
		"keep/keep_test.go": "package keep\n\nimport \"testing\"\n\nfunc TestKeep(t *testing.T) {}\n\nfunc TestSub(t *testing.T) {\n\tt.Run(\"a\", func(t *testing.T) {})\n\tt.Run(\"b\", func(t *testing.T) { t.Log(\"fine\") })\n}\n",
		"skipped/s_test.go": "package skipped\n\nimport \"testing\"\n\nfunc TestSkipped(t *testing.T) {}\n",
		"tagged/t.go":       "package tagged\n",
		"tagged/t_test.go":  "package tagged\n\nimport \"testing\"\n\nfunc TestTagged(t *testing.T) {}\n",
		"renamed/r.go":      "package renamed\n",
		"renamed/r_test.go": "package renamed\n\nimport \"testing\"\n\nfunc TestRenamed(t *testing.T) {}\n",
		"deleted/d_test.go": "package deleted\n\nimport \"testing\"\n\nfunc TestDeleted(t *testing.T) {}\n",
		"mained/m_test.go":  "package mained\n\nimport \"testing\"\n\nfunc TestMained(t *testing.T) {}\n",
		"broken/b_test.go":  "package broken\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) {}\n",
		"already/a_test.go": "package already\n\nimport \"testing\"\n\nfunc TestAlready(t *testing.T) { t.Skip(\"someday\") }\n",
		"failing/f_test.go": "package failing\n\nimport \"testing\"\n\nfunc TestFailing(t *testing.T) {\n\tt.Log(\"before\")\n\tt.Error(\"boom\")\n}\n\nfunc TestParent(t *testing.T) {\n\tt.Run(\"ok\", func(t *testing.T) {})\n\tt.Run(\"bad\", func(t *testing.T) { t.Fatal(\"sub boom\") })\n}\n",
		"nofiles/n.go":      "package nofiles\n",
	}
	writeFiles(t, dir, files)
	return dir
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// goEnv keeps the caller's go settings out of the module's runs.
var goEnv = []string{"GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local"}

func runGate(t *testing.T, r Runner, dir string, g Gate) (Result, string) {
	t.Helper()
	var log bytes.Buffer
	results, _ := r.Run(context.Background(), dir, []Gate{g}, &log)
	if len(results) != 1 {
		t.Fatalf("%+v", results)
	}
	return results[0], log.String()
}

func TestGoTestGateNamesEveryTestAndLosesTheOnesMadeToGoAway(t *testing.T) {
	dir := goModule(t)
	r := Runner{Proc: proc.Exec{}, Env: goEnv}
	gate := Gate{Name: "test", Command: "go test ./..."}
	base, _ := runGate(t, r, dir, gate)
	want := map[string]Outcome{
		"example.com/m/keep.TestKeep": Pass, "example.com/m/keep.TestSub": Pass, "example.com/m/keep.TestSub/a": Pass, "example.com/m/keep.TestSub/b": Pass,
		"example.com/m/skipped.TestSkipped": Pass, "example.com/m/tagged.TestTagged": Pass, "example.com/m/renamed.TestRenamed": Pass,
		"example.com/m/deleted.TestDeleted": Pass, "example.com/m/mained.TestMained": Pass, "example.com/m/broken.TestBroken": Pass,
		"example.com/m/already.TestAlready": Skip,
		"example.com/m/failing.TestFailing": Fail, "example.com/m/failing.TestParent": Fail, "example.com/m/failing.TestParent/ok": Pass, "example.com/m/failing.TestParent/bad": Fail,
	}
	if base.Tests == nil || base.Tests.Format != "go-json" || !base.Tests.PerTest || !mapsEqual(base.Tests.Names, want) {
		t.Fatalf("base inventory: %+v", base.Tests)
	}
	if base.Tests.Passed != 11 || base.Tests.Failed != 3 || base.Tests.Skipped != 1 || base.Tests.Ran() != 14 {
		t.Fatalf("base counts: %s", base.Tests)
	}
	if got := Counts([]Result{{Name: "lint"}, base}); got != "test: 11 passed, 3 failed, 1 skipped" {
		t.Fatal(got)
	}

	// What adversarial agents did to get a story passed.
	writeFiles(t, dir, map[string]string{
		"skipped/s_test.go":   "package skipped\n\nimport \"testing\"\n\nfunc TestSkipped(t *testing.T) { t.Skip(\"flaky\") }\n",
		"tagged/t_test.go":    "//go:build ignore\n\npackage tagged\n\nimport \"testing\"\n\nfunc TestTagged(t *testing.T) {}\n",
		"mained/main_test.go": "package mained\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) { os.Exit(0) }\n",
		"broken/b_test.go":    "package broken\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { x := 1 }\n",
		"keep/new_test.go":    "package keep\n\nimport \"testing\"\n\nfunc TestNew(t *testing.T) {}\n",
	})
	if err := os.Rename(filepath.Join(dir, "renamed/r_test.go"), filepath.Join(dir, "renamed/r_test.go.off")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"deleted/d_test.go", "already/a_test.go"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	now, log := runGate(t, r, dir, gate)
	lost := base.Tests.Lost(now.Tests)
	wantLost := []string{
		"example.com/m/broken.TestBroken (did not run)",
		"example.com/m/deleted.TestDeleted (did not run)",
		"example.com/m/mained.TestMained (did not run)",
		"example.com/m/renamed.TestRenamed (did not run)",
		"example.com/m/skipped.TestSkipped (skipped)",
		"example.com/m/tagged.TestTagged (did not run)",
	}
	if !slices.Equal(lost, wantLost) {
		t.Fatalf("lost:\n%s\nnow: %+v", strings.Join(lost, "\n"), now.Tests)
	}
	if !slices.Equal(LostTests([]Result{base}, []Result{now}), wantLost) {
		t.Fatal(LostTests([]Result{base}, []Result{now}))
	}
	// A package that does not build is a failure, not zero tests; a new
	// test is welcome.
	if now.Tests.Names["example.com/m/broken"] != Fail || now.Tests.Names["example.com/m/keep.TestNew"] != Pass {
		t.Fatalf("%+v", now.Tests.Names)
	}
	if now.Passed || !strings.Contains(now.Output, "declared and not used") {
		t.Fatalf("the build failure is not in the retry context: %+v", now)
	}

	// The log reads as go test without -json prints it.
	plain, _ := runGate(t, r, dir, Gate{Name: "plain", Command: "go test ./... 2>&1"}) // not one command: no -json
	if plain.Tests == nil || plain.Tests.Format != "go" {
		t.Fatalf("plain go test output: %+v", plain.Tests)
	}
	rendered := normalizeGoOutput(log)
	printed := normalizeGoOutput(plain.Output)
	printed = slices.DeleteFunc(printed, func(l string) bool { return l == "FAIL" }) // go's closing line
	rendered = slices.DeleteFunc(rendered, func(l string) bool { return l == "FAIL" })
	if !slices.Equal(rendered, printed) {
		t.Fatalf("rendered:\n%s\n\ngo test printed:\n%s", strings.Join(rendered, "\n"), strings.Join(printed, "\n"))
	}
	for _, seq := range []string{"--- FAIL: TestFailing (", "    f_test.go:6: before\n    f_test.go:7: boom\n",
		"--- FAIL: TestParent (", ")\n    --- FAIL: TestParent/bad (", ")\n        f_test.go:12: sub boom\n"} {
		if !strings.Contains(log, seq) {
			t.Errorf("the log lacks %q:\n%s", seq, log)
		}
	}
	if strings.Contains(log, "=== RUN") || strings.Contains(log, `"Action"`) {
		t.Errorf("the log shows -json's stream:\n%s", log)
	}
}

// normalizeGoOutput is go test's output without the gate's own lines,
// times and cache marks, sorted (packages finish in any order).
func normalizeGoOutput(s string) []string {
	times := regexp.MustCompile(`\t([0-9.]+s|\(cached\))`)
	durations := regexp.MustCompile(` \([0-9.]+s\)`)
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l == "" || strings.HasPrefix(l, "=== gate ") {
			continue
		}
		l = durations.ReplaceAllString(times.ReplaceAllString(l, "\tT"), " (T)")
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

func mapsEqual(a, b map[string]Outcome) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestGoFlagsThatRunNoTestLoseThemAll(t *testing.T) {
	dir := goModule(t)
	gate := Gate{Name: "test", Command: "go test ./keep ./skipped"}
	base, _ := runGate(t, Runner{Proc: proc.Exec{}, Env: goEnv}, dir, gate)
	// go env -w GOFLAGS=-run=^$ writes the go env file the next run reads.
	envFile := filepath.Join(t.TempDir(), "go.env")
	env := append(slices.Clone(goEnv), "GOENV="+envFile)
	if out, err := exec.Command("env", append(env, "go", "env", "-w", "GOFLAGS=-run=^$")...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	now, _ := runGate(t, Runner{Proc: proc.Exec{}, Env: env}, dir, gate)
	if !now.Passed || now.Tests == nil || len(now.Tests.Names) != 0 {
		t.Fatalf("%+v", now)
	}
	lost := base.Tests.Lost(now.Tests)
	if len(lost) != 5 || lost[0] != "example.com/m/keep.TestKeep (did not run)" {
		t.Fatalf("%q", lost)
	}
}

func TestVerboseGoTestGateKeepsItsOutput(t *testing.T) {
	dir := goModule(t)
	res, log := runGate(t, Runner{Proc: proc.Exec{}, Env: goEnv}, dir, Gate{Name: "test", Command: "go test -v ./keep"})
	if !res.Passed || res.Tests.Passed != 4 {
		t.Fatalf("%+v", res)
	}
	for _, want := range []string{"=== RUN   TestSub/b\n", "    keep_test.go:9: fine\n", "--- PASS: TestKeep (", "PASS\nok  \texample.com/m/keep"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	// A gate that asks for -json itself gets the stream as it is.
	res, log = runGate(t, Runner{Proc: proc.Exec{}, Env: goEnv}, dir, Gate{Name: "test", Command: "go test -json ./keep"})
	if res.Tests.Passed != 4 || !strings.Contains(log, `"Action":"pass"`) {
		t.Fatalf("%+v\n%s", res.Tests, log)
	}
}

func TestGoTextReadsPlainAndVerboseOutput(t *testing.T) {
	read := func(out string) *Tests {
		g := &goText{}
		for _, l := range strings.Split(out, "\n") {
			g.line(l)
		}
		return g.tests()
	}
	// Without -v: packages, and the tests that failed.
	plain := read("--- FAIL: TestX (0.00s)\n    x_test.go:3: boom\nFAIL\nFAIL\texample.com/m/a\t0.01s\nFAIL\texample.com/m/b [build failed]\n" +
		"?   \texample.com/m/c\t[no test files]\nok  \texample.com/m/d\t(cached)\nok  \texample.com/m/e\t0.01s [no tests to run]\nok  \texample.com/m/f\t0.2s\tcoverage: 80.0% of statements\nFAIL\n")
	want := map[string]Outcome{"example.com/m/a.TestX": Fail, "example.com/m/a": Fail, "example.com/m/b": Fail, "example.com/m/d": Pass, "example.com/m/f": Pass}
	if !mapsEqual(plain.Names, want) || plain.String() != "2 passed, 3 failed, 0 skipped" {
		t.Fatalf("%+v", plain)
	}
	// With -v: tests; a package only when it failed without a failing test.
	verbose := read("=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n    --- SKIP: TestB/x (0.00s)\nPASS\nok  \texample.com/m/a\t0.01s\n" +
		"ok  \texample.com/m/main0\t0.01s\nFAIL\texample.com/m/b [build failed]\n")
	want = map[string]Outcome{"example.com/m/a.TestA": Pass, "example.com/m/a.TestB/x": Skip, "example.com/m/b": Fail}
	if !mapsEqual(verbose.Names, want) {
		t.Fatalf("%+v", verbose)
	}
	if read("all good\nok then\n") != nil {
		t.Fatal("no go test output read as some")
	}
}

func FuzzGoJSON(f *testing.F) {
	f.Add(`{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}
{"Action":"fail","Package":"p"}`, false)
	f.Add(`{"ImportPath":"p [p.test]","Action":"build-output","Output":"# p\n"}
{"Action":"fail","Package":"p","FailedBuild":"p [p.test]"}
{"Action":"run","Package":"q","Test":"T/x"}
{"Action":"output","Package":"q","Test":"T/x","Output":"    --- FAIL: T/x\n"}
{"Action":"fail","Package":"q","Test":"T/x"}
not json`, true)
	f.Fuzz(func(t *testing.T, out string, verbose bool) {
		var rendered bytes.Buffer
		o := newOutputReader(&rendered, true, verbose)
		_, _ = o.Write([]byte(out))
		o.finish()
		checkInventory(t, o.goJSON.tests())
		checkInventory(t, o.goJSON.tests()) // asking twice gives the same
		if r := rendered.String(); !strings.Contains(out, "{") && len(out) < maxLine && r != out && r != out+"\n" {
			t.Fatalf("a stream without events did not pass through: %q → %q", out, rendered.String())
		}
	})
}

func FuzzGoText(f *testing.F) {
	f.Add("=== RUN   TestA\n--- PASS: TestA (0.00s)\nok  \tp\t0.1s\n--- FAIL: TestB (0.00s)\nFAIL\tq\t0.1s\n?   \tr\t[no test files]\n")
	f.Fuzz(func(t *testing.T, out string) {
		g := &goText{}
		for _, l := range strings.Split(out, "\n") {
			g.line(l)
		}
		checkInventory(t, g.tests())
	})
}

func FuzzGoTestJSONCommand(f *testing.F) {
	for _, s := range []string{"go test ./...", "A=1 go test -v -run 'a|b' ./...", "go test ./... | tee x", "go test \"$(x)\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		got, _, ok := goTestJSON(cmd)
		if !ok {
			return
		}
		cmds := simpleCommands(got)
		if len(cmds) != 1 {
			t.Fatalf("%q → %q: %d commands", cmd, got, len(cmds))
		}
		words := dropPrefixes(cmds[0])
		if len(words) < 3 || words[0] != "go" || words[1] != "test" || words[2] != "-json" {
			t.Fatalf("%q → %q: %q", cmd, got, words)
		}
	})
}

// checkInventory holds for every inventory: counts match the names.
func checkInventory(t *testing.T, inv *Tests) {
	t.Helper()
	if inv == nil {
		return
	}
	if inv.Passed < 0 || inv.Failed < 0 || inv.Skipped < 0 {
		t.Fatalf("negative counts: %+v", inv)
	}
	if !inv.PerTest {
		return
	}
	n := map[Outcome]int{}
	for _, o := range inv.Names {
		n[o]++
	}
	if n[Pass] != inv.Passed || n[Fail] != inv.Failed || n[Skip]+n[Todo]+n[XFail] != inv.Skipped || len(inv.Names) != inv.Passed+inv.Failed+inv.Skipped || len(inv.Names) > maxNames {
		t.Fatalf("counts do not match names: %+v", inv)
	}
	if !slices.IsSorted(inv.Contradictory) || len(slices.Compact(slices.Clone(inv.Contradictory))) != len(inv.Contradictory) {
		t.Fatalf("contradictions not sorted and unique: %q", inv.Contradictory)
	}
	for _, c := range inv.Contradictory {
		if _, ok := inv.Names[c]; !ok {
			t.Fatalf("contradiction %q names no test: %+v", c, inv)
		}
	}
}
