package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A command that prints nothing for a while (go test compiling, or a slow
// package ahead of the others) still gets a line every interval, naming
// the test binary that runs.
func TestHeartbeatWhileSilent(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "slowpkg")
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "slowpkg.test"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `cd "` + pkg + `" && ./slowpkg.test 1.5
echo '{"Action":"output","Package":"ex/slowpkg","Output":"ok  \tex/slowpkg\t1.5s\n"}'
echo '{"Action":"pass","Package":"ex/slowpkg","Elapsed":1.5}'
`
	var out bytes.Buffer
	code := run([]string{"sh", "-c", script}, 200*time.Millisecond, &out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	beats := regexp.MustCompile(`(?m)^testprogress: \ds, 0 package\(s\) reported; now testing `+regexp.QuoteMeta(pkg)+`$`).FindAllString(out.String(), -1)
	if len(beats) < 2 {
		t.Errorf("want a line every 200ms naming the running test binary, got:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "ok  \tex/slowpkg\t1.5s\n") || !strings.Contains(out.String(), "testprogress: 1 package(s) in ") {
		t.Errorf("package line or summary missing:\n%s", out.String())
	}
}

// Against the real go test: a passing package gets go test's line, a
// failing one the output of its failed test (not of the passing ones),
// its FAIL line, the summary names it, and the exit code is go test's.
func TestRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module ex\n\ngo 1.21\n",
		"good/good_test.go": "package good\n\nimport \"testing\"\n\nfunc TestGood(t *testing.T) { t.Log(\"quiet\") }\n",
		"bad/bad_test.go": "package bad\n\nimport \"testing\"\n\nfunc TestFine(t *testing.T) { t.Log(\"not shown\") }\n\n" +
			"func TestBroken(t *testing.T) { t.Fatal(\"broken on purpose\") }\n",
		"none/none.go":            "package none\n",
		"nobuild/nobuild_test.go": "package nobuild\n\nfunc TestX(t *testing.T) { undefinedThing() }\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	code := run([]string{"sh", "-c", `cd "` + dir + `" && exec go test -json -count=1 ./...`}, time.Minute, &out)
	s := out.String()
	if code != 1 {
		t.Errorf("exit %d, want go test's 1", code)
	}
	for _, want := range []string{
		"ok  \tex/good\t",
		"?   \tex/none\t[no test files]\n",
		"broken on purpose",
		"--- FAIL: TestBroken",
		"FAIL\tex/bad\t",
		"undefined: testing",
		"FAIL\tex/nobuild [build failed]\n",
		"testprogress: 4 package(s) in ",
		", 2 failed: ex/bad ex/nobuild\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in:\n%s", want, s)
		}
	}
	for _, not := range []string{"quiet", "not shown", "=== RUN"} {
		if strings.Contains(s, not) {
			t.Errorf("%q printed (a passing test's output) in:\n%s", not, s)
		}
	}
}
