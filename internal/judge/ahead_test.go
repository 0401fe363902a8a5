package judge

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/gate"
)

// A story's gates fail on its work merged onto a plan queued ahead of it
// whose own work breaks them. When that plan then leaves the queue (its
// judgement failed), the story is not blamed: it is judged again on the
// queue's end, and passes. When the plan ahead lands instead, the failure
// is the story's on what landed, and stands.
func TestGatesFailedOnWorkAheadThatLeftAreJudgedAgain(t *testing.T) {
	for _, ahead := range []string{"left", "landed"} {
		t.Run(ahead, func(t *testing.T) {
			ctx := context.Background()
			j, dir := newJudge(t)
			write(t, dir, map[string]string{".gitignore": ".ralph/\n", "a.txt": "a\n"})
			base := commitAll(t, j, "base")
			run(t, j, "checkout", "-qb", "story")
			write(t, dir, map[string]string{"done.txt": "done\n"})
			l, err := j.Lander(ctx, "main", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			failed := filepath.Join(t.TempDir(), "failed")
			// The plan ahead: another story's work, which breaks the gate.
			broken := enqueueOther(t, j.Repo, l, base)
			c := &Case{Item: "S-1", Dir: dir, Base: base, Claimed: true, Lander: l, Log: &bytes.Buffer{},
				Claim: Claim{Target: "main", Own: "story", Subject: "feat(S-1): done", Trailers: []string{"Ralph-Story: S-1"},
					Gates:  []gate.Gate{{Name: "clean", Command: "test ! -f other.txt || { touch " + failed + "; false; }"}},
					Checks: []gate.Gate{{Name: "S-1 check 1", Command: "test -f done.txt"}}}}
			moved := make(chan struct{})
			defer func() { <-moved }()
			go func() {
				defer close(moved)
				// Once the story's gates failed on the plan ahead.
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if _, err := os.Stat(failed); err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Error("the story's gates never failed on the plan ahead")
						return
					}
				}
				if ahead == "left" {
					l.Withdraw(broken)
					return
				}
				if _, err := l.Land(ctx, broken, "the story ahead", nil); err != nil {
					t.Error(err)
				}
			}()
			v := j.Judge(ctx, c)
			t.Cleanup(func() { v.Snapshot.Remove() })
			log := c.Log.(*bytes.Buffer).String()
			if ahead == "landed" {
				if v.Passed || !strings.Contains(v.Summary, "integrated gates failed: clean FAILED") {
					t.Fatalf("the story passed, or failed for another reason, on the work that landed ahead of it: %+v\n%s", v, log)
				}
				return
			}
			if !v.Passed {
				t.Fatalf("the story was failed for the work of a plan that left the queue: %s\n%s", v.Summary, log)
			}
			if !strings.Contains(log, "which then left the queue without landing: judged again on main") {
				t.Errorf("the log does not say why the story was judged again:\n%s", log)
			}
			files := treeFiles(t, j, v.Tree)
			if _, ok := files["other.txt"]; ok {
				t.Errorf("the tree that lands holds the work that left the queue: %v", files)
			}
			if v.Ticket == nil || v.Ticket.Plan().On != nil {
				t.Errorf("the story is not queued on the tip: %+v", v.Ticket)
			}
			if _, err := l.Land(ctx, v.Ticket, v.Message, nil); err != nil {
				t.Fatalf("landing: %v", err)
			}
		})
	}
}
