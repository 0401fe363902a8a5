package gate

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// The reports in testdata/junit have the shape each tool writes: pytest
// --junitxml, jest-junit, vitest --reporter=junit, and a JUnit suite
// nesting suites.
func TestReadJUnitReportsOfEachTool(t *testing.T) {
	for file, want := range map[string]map[string]Outcome{
		"pytest.xml": {"tests.test_calc::test_add": Pass, "tests.test_calc::test_sub": Fail, "tests.test_calc::test_later": Skip,
			"tests.test_calc::test_div[1-1]": Pass, "tests.test_calc::test_div[4-2]": Pass, "tests.test_calc::test_known_bug": XFail, "tests.test_io::test_read": Fail},
		"jest.xml":   {"calc adds": Pass, "calc subtracts": Fail, "calc divides": Skip, "format pads numbers": Pass},
		"vitest.xml": {"src/calc.test.ts::calc > adds": Pass, "src/calc.test.ts::calc > subtracts": Fail, "src/calc.test.ts::calc > divides": Skip, "src/calc.test.ts::calc > multiplies": Pass},
		"suite.xml":  {"com.example.CalcTest::addsTwoNumbers": Pass, "com.example.CalcTest::subtracts": Pass, "orphan": Pass},
	} {
		f, err := os.Open(filepath.Join("testdata", "junit", file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := readJUnit(f)
		f.Close()
		if err != nil || got.Format != "junit" || !got.PerTest || !mapsEqual(got.Names, want) {
			t.Errorf("%s: %v %+v", file, err, got)
			continue
		}
		checkInventory(t, got)
	}
	for _, bad := range []string{"", "not xml", "<testsuites><testsuite>", "<a></b>"} {
		if got, err := readJUnit(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadJUnit(%q) = %+v, no error", bad, got)
		}
	}
}

func TestGateReadsTheReportItWrote(t *testing.T) {
	dir := t.TempDir()
	sample, err := os.ReadFile(filepath.Join("testdata", "junit", "pytest.xml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"sample.xml": string(sample)})
	r := Runner{Proc: proc.Exec{}}

	// A report the gate wrote names its tests (several files add up),
	// ahead of the summary line the runner printed.
	writeFiles(t, dir, map[string]string{"testdata.xml": `<testsuite><testcase classname="tests.test_more" name="test_x"/><testcase classname="tests.test_calc" name="test_later"/></testsuite>`})
	res, _ := runGate(t, r, dir, Gate{Name: "test", Command: "mkdir -p out && cp sample.xml out/a.xml && cp testdata.xml out/b.xml && echo '== 1 passed in 0.1s =='",
		Report: "out/*.xml"})
	if res.Tests == nil || res.Tests.Format != "junit" || res.Tests.Names["tests.test_more::test_x"] != Pass ||
		res.Tests.Names["tests.test_calc::test_later"] != Pass || res.Tests.String() != "5 passed, 2 failed, 1 skipped" {
		t.Fatalf("%+v", res.Tests)
	}

	// A report older than the gate run (left from before, or committed)
	// is not this run's: the summary line counts instead.
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{"out/a.xml", "out/b.xml"} {
		if err := os.Chtimes(filepath.Join(dir, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	res, _ = runGate(t, r, dir, Gate{Name: "test", Command: "echo '== 1 passed in 0.1s =='", Report: "out/*.xml"})
	if res.Tests == nil || res.Tests.Format != "pytest" || res.Tests.Passed != 1 {
		t.Fatalf("%+v", res.Tests)
	}

	// A link out of the tree is not followed, a named pipe does not hang
	// ralph, and neither is read; the log says so.
	secret := filepath.Join(t.TempDir(), "secret.xml")
	writeFiles(t, filepath.Dir(secret), map[string]string{"secret.xml": string(sample)})
	if err := os.Symlink(secret, filepath.Join(dir, "out", "link.xml")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "out", "pipe.xml"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, log := runGate(t, r, dir, Gate{Name: "test", Command: "touch out/link.xml out/pipe.xml", Report: "out/*.xml"})
	if res.Tests != nil || !strings.Contains(log, "report out/link.xml not read") || !strings.Contains(log, "report out/pipe.xml not read: not a regular file") {
		t.Fatalf("%+v\n%s", res.Tests, log)
	}
	res, log = runGate(t, r, dir, Gate{Name: "test", Command: "true", Report: "../*.xml"})
	if res.Tests != nil || !strings.Contains(log, "is not a path inside the work tree") {
		t.Fatalf("%+v\n%s", res.Tests, log)
	}
}

func FuzzJUnit(f *testing.F) {
	for _, name := range []string{"pytest.xml", "jest.xml", "vitest.xml", "suite.xml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "junit", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, report string) {
		got, err := readJUnit(strings.NewReader(report))
		if err != nil {
			return
		}
		checkInventory(t, got)
	})
}
