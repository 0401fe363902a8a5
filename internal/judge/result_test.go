package judge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/gate"
)

// perTest is a gate's result with a test inventory.
func perTest(name string, passed bool, tests map[string]gate.Outcome) gate.Result {
	return gate.Result{Name: name, Command: "go test ./...", Passed: passed, Tests: &gate.Tests{Format: "go-json", PerTest: true, Names: tests}}
}

// bare is a gate's result without one (a linter, a typechecker).
func bare(name string, passed bool, output string) gate.Result {
	return gate.Result{Name: name, Command: "make " + name, Passed: passed, Output: output}
}

// againstBase: a gate that failed at the base too fails a claim only for
// what is new — tests that did not fail there, or (without an inventory)
// findings the base's output did not have; what failed there and still
// fails is listed as still red, never blamed on the item.
func TestAgainstBase(t *testing.T) {
	base := perTest("test", false, map[string]gate.Outcome{"TestA": gate.Fail, "TestB": gate.Pass, "TestC": gate.Fail})
	for _, c := range []struct {
		name     string
		now      gate.Result
		base     *gate.Result
		stillRed string
		why      string
	}{
		{name: "green at the base", now: bare("lint", false, "x.go:1: bad"), base: &gate.Result{Name: "lint", Passed: true},
			why: "lint FAILED"},
		{name: "an item's own check", now: bare("S-1 check 1", false, ""), why: "S-1 check 1 FAILED"},
		{name: "the same tests still red",
			now: perTest("test", false, map[string]gate.Outcome{"TestA": gate.Fail, "TestB": gate.Pass, "TestC": gate.Pass}), base: &base,
			stillRed: "test: TestA"},
		{name: "a test red that was green",
			now: perTest("test", false, map[string]gate.Outcome{"TestA": gate.Fail, "TestB": gate.Fail, "TestC": gate.Fail}), base: &base,
			why: "gate test: tests fail that did not at the base: TestB"},
		{name: "a new test red",
			now: perTest("test", false, map[string]gate.Outcome{"TestA": gate.Pass, "TestC": gate.Pass, "TestNew": gate.Fail}), base: &base,
			why: "gate test: tests fail that did not at the base: TestNew"},
		{name: "red on nothing named",
			now: func() gate.Result {
				r := perTest("test", false, map[string]gate.Outcome{"TestA": gate.Pass})
				r.Output = "ok\nbuild failed: x.go:3"
				return r
			}(), base: &base,
			why: "gate test fails, and not on the tests that failed at the base (build failed: x.go:3)"},
		{name: "no inventory, the same findings at other lines",
			now: bare("vet", false, "x.go:12:3: unused a\ny.go:7: shadow b"), base: &gate.Result{Name: "vet", Output: "x.go:10:3: unused a\ny.go:5: shadow b"},
			stillRed: "vet"},
		{name: "no inventory, a new finding",
			now: bare("vet", false, "x.go:12:3: unused a\nz.go:1: unreachable code"), base: &gate.Result{Name: "vet", Output: "x.go:10:3: unused a"},
			why: "gate vet: new findings since the base: z.go:1: unreachable code"},
	} {
		red, why := againstBase(c.now, c.base)
		var got []string
		for _, r := range red {
			got = append(got, r.String())
		}
		if strings.Join(got, ", ") != c.stillRed || why != c.why {
			t.Errorf("%s: still red %q, why %q; want %q, %q", c.name, got, why, c.stillRed, c.why)
		}
	}
}

// newFindings: the lines of now's output the base's lacks, numbers aside,
// blank lines and === headers left out.
func TestNewFindings(t *testing.T) {
	base := "=== vet\nx.go:10:3: unused a\n\n  y.go:5: shadow b  \n"
	now := "=== vet 2\nx.go:99:1: unused a\ny.go:6: shadow b\ny.go:6: shadow c\n\nz.go:1: unreachable code\n"
	if got := fmt.Sprint(newFindings(base, now)); got != "[y.go:6: shadow c z.go:1: unreachable code]" {
		t.Fatalf("newFindings = %s", got)
	}
	if got := newFindings(now, base); len(got) != 0 {
		t.Fatalf("the base's findings, all still there: %q", got)
	}
}

// fixedTests is the evidence of a gate against the base: per test, the
// ones that failed there and pass now; without an inventory, the gate
// that failed there and passes now.
func TestFixedTests(t *testing.T) {
	base := perTest("test", false, map[string]gate.Outcome{"TestA": gate.Fail, "TestB": gate.Pass, "TestC": gate.Fail, "TestD": gate.Skip})
	for _, c := range []struct {
		name string
		now  gate.Result
		base *gate.Result
		want string
	}{
		{name: "per test", now: perTest("test", true, map[string]gate.Outcome{"TestC": gate.Pass, "TestA": gate.Pass, "TestB": gate.Pass, "TestD": gate.Pass, "TestNew": gate.Pass}), base: &base,
			want: "test: TestA failed at the base and passes; test: TestC failed at the base and passes"},
		{name: "one of two still red", now: perTest("test", false, map[string]gate.Outcome{"TestA": gate.Fail, "TestC": gate.Pass}), base: &base,
			want: "test: TestC failed at the base and passes"},
		{name: "nothing went green", now: perTest("test", true, map[string]gate.Outcome{"TestB": gate.Pass}), base: &base},
		{name: "no base", now: bare("lint", true, "")},
		{name: "no inventory, red at the base", now: bare("lint", true, ""), base: &gate.Result{Name: "lint", Passed: false},
			want: "lint failed at the base and passes"},
		{name: "no inventory, still red", now: bare("lint", false, ""), base: &gate.Result{Name: "lint", Passed: false}},
		{name: "no inventory, green at the base", now: bare("lint", true, ""), base: &gate.Result{Name: "lint", Passed: true}},
		{name: "an inventory now, none at the base", now: perTest("test", true, map[string]gate.Outcome{"TestA": gate.Pass}), base: &gate.Result{Name: "test", Passed: false},
			want: "test failed at the base and passes"},
	} {
		var got []string
		for _, e := range fixedTests(c.now, c.base) {
			if e.Kind != EvidenceFixed {
				t.Errorf("%s: evidence of kind %s", c.name, e.Kind)
			}
			got = append(got, e.String())
		}
		if strings.Join(got, "; ") != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Evidence reads as the commit's "Verified by ralph" line says it.
func TestEvidenceString(t *testing.T) {
	for e, want := range map[Evidence]string{
		{Kind: EvidenceFixed, Gate: "test", Test: "TestAdd"}:                    "test: TestAdd failed at the base and passes",
		{Kind: EvidenceFixed, Gate: "S-1 check 1"}:                              "S-1 check 1 failed at the base and passes",
		{Kind: EvidenceNewTest, Gate: "test", Test: "TestSum"}:                  "new test test: TestSum passes and fails on the base's code",
		{Kind: EvidenceNewTest, Gate: "test", Detail: "the tests in a_test.go"}: "the new tests of gate test pass and fail on the base's code",
		{Kind: EvidenceReview, Detail: "reviewer"}:                              "approved by the reviewer",
		{Kind: EvidenceCondition, Detail: "design.md has 3 lines"}:              "exit condition met: design.md has 3 lines",
		{Kind: "other", Gate: "g", Test: "T"}:                                   "other g: T",
	} {
		if got := e.String(); got != want {
			t.Errorf("%+v: %q, want %q", e, got, want)
		}
	}
	if got := (TestRef{Gate: "test"}).String(); got != "test" {
		t.Errorf("a gate's ref: %q", got)
	}
}
