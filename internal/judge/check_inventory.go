package judge

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/ralph-loop/ralph/internal/gate"
)

// inventoryCheck holds each gate's report of tests against the tree it
// judged, read from the objects recorded (not the checkout, which a test
// could write into): a test reported with two outcomes (a forged result
// line or go test -json event beside the real one), a test reported that
// the tree does not declare (a forged result for a deleted test), and a
// test a protected file declared at the base that the gate ran there and
// no longer reports (a renamed file, a test made to go away) fail the
// claim. With allow_test_changes a person let tests go: only the first
// two are asked.
type inventoryCheck struct{}

func (inventoryCheck) Name() string { return "reported tests are the tree's" }
func (inventoryCheck) Stage() Stage { return Result }

func (inventoryCheck) Check(ctx context.Context, j *Judge, c *Case) Finding {
	counted := false
	for _, r := range c.results {
		if r.Tests != nil && (r.Tests.PerTest || len(r.Tests.Contradictory) > 0) {
			counted = true
		}
	}
	if !counted || c.tree == "" {
		return Finding{Skipped: true}
	}
	tree, err := j.declaredIn(ctx, c.tree, nil)
	if err != nil {
		c.Log.Write([]byte(fmt.Sprintf("ralph: reading the tests the judged tree declares: %v\n", err)))
		return Finding{Skipped: true}
	}
	var protected *gate.Declared
	if k := c.contract; k != nil && c.Base != "" && !c.Claim.AllowTestChanges && len(k.Protected) > 0 {
		protected, err = j.declaredIn(ctx, c.Base, k.Protected)
		if err != nil {
			c.Log.Write([]byte(fmt.Sprintf("ralph: reading the tests the protected files declared at the base: %v\n", err)))
			protected = nil
		}
	}
	var problems []string
	for i, r := range c.results {
		var base *gate.Tests
		if b := resultOf(c.base, r); b != nil {
			base = b.Tests
		}
		// A story's check runs the tests it names: it is held to the tree,
		// not to every protected test.
		required := protected
		if i >= len(c.Claim.Gates) {
			required = nil
		}
		for _, p := range gate.CheckInventory(r.Name, base, r.Tests, tree, required) {
			problems = append(problems, p.String())
		}
	}
	if len(problems) == 0 {
		return Finding{}
	}
	return Finding{Fail: fail("the tests reported are not the tree's: "+list(problems, 3),
		"The test results the gates reported do not match the tests in your work: "+strings.Join(problems, "; ")+
			". Results come from running the tests, not from printing them: do not write test results to the output, delete or rename tests, or move them out of the runner's way.")}
}

// declaredIn reads the tests declared in rev's test files (only those
// paths, when given), from the repository's objects.
func (j *Judge) declaredIn(ctx context.Context, rev string, only []string) (*gate.Declared, error) {
	keep := map[string]bool{}
	for _, p := range only {
		keep[p] = true
	}
	entries, err := j.Repo.TreeFiles(ctx, rev)
	if err != nil {
		return nil, err
	}
	var paths []string
	ids := map[string]string{}
	for _, e := range entries {
		// go.mod files name the Go packages the tests are in.
		if e.Type == "blob" && gate.TestSourceFile(e.Path) && (only == nil || keep[e.Path] || path.Base(e.Path) == "go.mod") {
			paths, ids[e.Path] = append(paths, e.Path), e.ID
		}
	}
	var want []string
	for _, p := range paths {
		want = append(want, ids[p])
	}
	blobs, err := j.Repo.Blobs(ctx, want)
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(paths))
	for _, p := range paths {
		files[p] = blobs[ids[p]]
	}
	return gate.DeclareTests(files), nil
}
