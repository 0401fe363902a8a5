package judge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The judgement log: one line per judgement, oldest first; a torn last
// line (a crash while appending) is skipped and the next append starts a
// line of its own.
func TestJudgementLogAppendAndRead(t *testing.T) {
	dir := t.TempDir()
	if js, err := Read(dir, "S-1"); err != nil || js != nil {
		t.Fatalf("no log: %v %v", js, err)
	}
	if Last(dir, "S-1") != nil {
		t.Fatal("a last judgement in no log")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := Judgement{Item: "S-1", Iteration: 1, Attempt: 1, Time: at, Tree: "t1", Claimed: true, Summary: "test FAILED",
		Checks:   []CheckResult{{Check: "claim", OK: true}, {Check: "gates on the commit", OK: false, Detail: "test FAILED"}},
		StillRed: []TestRef{{Gate: "test", Test: "TestOld"}}, Files: []FileStat{{Path: "a.go", Added: 3, Deleted: 1}, {Path: "b.bin", Added: 0, Deleted: 0, Binary: true}}}
	second := Judgement{Item: "S-1", Iteration: 2, Attempt: 2, Time: at.Add(time.Minute), Tree: "t2", Parent: "c1", Claimed: true, Passed: true, Summary: "passed",
		Evidence: []Evidence{{Kind: EvidenceFixed, Gate: "test", Test: "TestAdd"}}, Contract: &Contract{Item: "S-1", Base: "c0", Protected: []string{"a_test.go"}}}
	for _, j := range []Judgement{first, second} {
		if err := Append(dir, j); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(JudgedFile(dir, "S-1"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"item":"S-1","iteration":3,"summ`)
	f.Close()
	js, err := Read(dir, "S-1")
	if err != nil || len(js) != 2 {
		t.Fatalf("read %d judgements, %v", len(js), err)
	}
	if got := js[0]; got.Summary != "test FAILED" || len(got.Checks) != 2 || got.Checks[1].Detail != "test FAILED" || got.StillRed[0].String() != "test: TestOld" || !got.Files[1].Binary || !got.Time.Equal(at) {
		t.Fatalf("first %+v", got)
	}
	if got := Last(dir, "S-1"); got == nil || !got.Passed || got.Evidence[0].Test != "TestAdd" || got.Contract.Protected[0] != "a_test.go" || got.Parent != "c1" {
		t.Fatalf("last %+v", got)
	}
	// The next append after the torn line is read; the torn one is not.
	third := Judgement{Item: "S-1", Iteration: 3, Time: at, Landed: "c9", Passed: true, Summary: "landed"}
	if err := Append(dir, third); err != nil {
		t.Fatal(err)
	}
	if js, _ := Read(dir, "S-1"); len(js) != 3 || js[2].Landed != "c9" {
		t.Fatalf("after the torn line: %+v", js)
	}
	// Another item has a log of its own.
	if js, _ := Read(dir, "S-2"); len(js) != 0 {
		t.Fatalf("S-2's log: %+v", js)
	}
}

// Each item's log is one file, whatever its id holds.
func TestJudgedFileNames(t *testing.T) {
	seen := map[string]string{}
	for id, want := range map[string]string{
		"S-1":       "S-1.jsonl",
		"A.1.2":     "A.1.2.jsonl",
		"a/b":       "a%2Fb.jsonl",
		"a b":       "a%20b.jsonl",
		"..":        "_...jsonl",
		".":         "_..jsonl",
		"":          "_.jsonl",
		"../../etc": "..%2F..%2Fetc.jsonl",
	} {
		got := JudgedFile("/s", id)
		if filepath.Dir(got) != filepath.Join("/s", "judged") || filepath.Base(got) != want {
			t.Errorf("JudgedFile(%q) = %s, want judged/%s", id, got, want)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q share %s", id, other, got)
		}
		seen[got] = id
		if strings.Contains(strings.TrimPrefix(got, "/s/judged/"), "/") {
			t.Errorf("%q leaves the folder: %s", id, got)
		}
	}
}
