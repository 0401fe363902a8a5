package judge

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/gate"
)

type attester map[string]Attestation

func (a attester) Attested(item string) (Attestation, bool) {
	at, ok := a[item]
	return at, ok
}

// A worker's gate results stand for exactly the tree they ran on (ralph's
// own bookkeeping aside), and the commit and the judgement log name the
// worker; any other tree, other gates or no attester at all, and the
// gates run here, where the forged "passed" of a check the work does not
// meet is caught, and the coordinator is named instead.
func TestAttestedResultsStandOnlyForTheirTree(t *testing.T) {
	ctx := context.Background()
	j, dir := newJudge(t)
	j.Here = "coordinator on here"
	write(t, dir, map[string]string{"a.txt": "a\n", ".gitignore": ".ralph/\n", "prd.json": "{\"passes\": false}\n"})
	base := commitAll(t, j, "base")
	run(t, j, "checkout", "-qb", "story")
	// The work: a.txt changed, and no done.txt, which the story's check
	// wants. The worker's commit is this work, as the agent left it.
	write(t, dir, map[string]string{"a.txt": "a\nb\n"})
	worker := commitAll(t, j, "the worker's commit")
	workerTree := strings.TrimSpace(run(t, j, "rev-parse", worker+"^{tree}"))
	checks := []gate.Gate{{Name: "S-1 check 1", Command: "test -f done.txt"}}
	forged := []gate.Result{{Name: "S-1 check 1", Command: "test -f done.txt", Passed: true}}

	judgeIt := func(att Attester) (*Case, Finding) {
		t.Helper()
		l, err := j.Lander(ctx, "main", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		j.Attested = att
		c := &Case{Item: "S-1", Dir: dir, Base: base, Lander: l, Log: &bytes.Buffer{},
			Claim: Claim{Target: "main", Own: "story", Checks: checks, Subject: "feat(S-1): b", Trailers: []string{"Ralph-Story: S-1"},
				Mark: func(parent func(string) []byte, onTip bool) (map[string][]byte, error) {
					return map[string][]byte{"prd.json": []byte("{\"passes\": true}\n")}, nil
				}}}
		if f := (recordStep{}).Check(ctx, j, c); f.Fail != nil {
			t.Fatalf("recording: %+v", f.Fail)
		}
		f := gatesStep{}.Check(ctx, j, c)
		c.snap.Remove()
		l.Withdraw(c.ticket)
		return c, f
	}

	// Exactly the worker's tree but for ralph's mark: its results stand.
	c, f := judgeIt(attester{"S-1": {Tree: workerTree, By: "worker build-1 on w1", Gates: checks, Results: forged}})
	if f.Fail != nil || c.judgedBy != "worker build-1 on w1" || len(c.results) != 1 || !c.results[0].Passed {
		t.Fatalf("the worker's results did not stand for its tree: %+v %q %+v\n%s", f.Fail, c.judgedBy, c.results, c.Log)
	}
	if c.tree == workerTree || !strings.Contains(c.Log.(*bytes.Buffer).String(), "=== gate S-1 check 1: passed on worker build-1 on w1, tree ") {
		t.Fatalf("tree %s (worker's %s):\n%s", c.tree, workerTree, c.Log)
	}
	if msg := c.message("passed"); !strings.Contains(msg, "\nRalph-Story: S-1\nRalph-Judged-By: worker build-1 on w1\n") {
		t.Fatalf("the commit does not name the worker:\n%s", msg)
	}
	if jd := j.record(c, Verdict{Passed: true}); jd.Worker != "worker build-1 on w1" {
		t.Fatalf("the judgement names %q", jd.Worker)
	}

	// The work here is not the worker's tree (a file more): the gates run
	// here, and the forged pass is caught.
	write(t, dir, map[string]string{"extra.txt": "x\n"})
	c, f = judgeIt(attester{"S-1": {Tree: workerTree, By: "worker build-1 on w1", Gates: checks, Results: forged}})
	if f.Fail == nil || c.judgedBy != "coordinator on here" || !strings.Contains(c.Log.(*bytes.Buffer).String(), "differs in extra.txt: the gates run here") {
		t.Fatalf("a tree other than the worker's took its results: %+v %q\n%s", f.Fail, c.judgedBy, c.Log)
	}
	if msg := c.message("x"); !strings.Contains(msg, "Ralph-Judged-By: coordinator on here\n") {
		t.Fatalf("the commit does not name the coordinator:\n%s", msg)
	}
	run(t, j, "clean", "-qf", "extra.txt")

	// Other gates than the worker ran, or no attester: the gates run here.
	for name, att := range map[string]Attester{
		"other gates":  attester{"S-1": {Tree: workerTree, By: "worker build-1 on w1", Gates: []gate.Gate{{Name: "S-1 check 1", Command: "true"}}, Results: []gate.Result{{Name: "S-1 check 1", Command: "true", Passed: true}}}},
		"another item": attester{"S-2": {Tree: workerTree, By: "worker build-1 on w1", Gates: checks, Results: forged}},
		"none":         nil,
	} {
		c, f = judgeIt(att)
		if f.Fail == nil || c.judgedBy != "coordinator on here" {
			t.Fatalf("%s: the forged pass stood: %+v %q\n%s", name, f.Fail, c.judgedBy, c.Log)
		}
	}

	// Other work landed on main since the story's base: the story is
	// judged merged onto it, a tree no worker ran the gates on.
	run(t, j, "checkout", "-q", "main")
	write(t, dir, map[string]string{"other.txt": "landed\n"})
	commitAll(t, j, "another story")
	run(t, j, "checkout", "-q", "story")
	c, f = judgeIt(attester{"S-1": {Tree: workerTree, By: "worker build-1 on w1", Gates: checks, Results: forged}})
	if f.Fail == nil || c.judgedBy != "coordinator on here" || !strings.Contains(c.Log.(*bytes.Buffer).String(), "differs in other.txt: the gates run here") {
		t.Fatalf("the merged tree took the worker's results: %+v %q\n%s", f.Fail, c.judgedBy, c.Log)
	}

	// A local run names nobody.
	j.Here = ""
	c, _ = judgeIt(nil)
	if msg := c.message("x"); strings.Contains(msg, "Ralph-Judged-By") {
		t.Fatalf("a local run's commit names a judge:\n%s", msg)
	}
}
