package judge

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/git"
)

// repositoryCheck refuses git's indirections, which could make what ralph
// records differ from what the repository holds: an alternate object
// store added during the run (a commit whose blobs live in someone
// else's folder builds nowhere else), a grafts file, and a merge, cherry
// pick, revert or rebase left in progress. Each is put back (the agent's
// version kept in ralph's folder) and fails the claim. ralph's own git
// never follows replace refs (GIT_NO_REPLACE_OBJECTS), and refsCheck
// removes any made.
type repositoryCheck struct{}

func (repositoryCheck) Name() string { return "the repository's own objects" }
func (repositoryCheck) Stage() Stage { return Restore }

// inProgress are the files git leaves while an operation is under way.
var inProgress = []string{"MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply"}

func (repositoryCheck) Check(ctx context.Context, j *Judge, c *Case) Finding {
	var f Finding
	failWith := func(summary, failure string) {
		if f.Fail == nil {
			f.Fail = fail(summary, failure)
		}
	}
	kept := filepath.Join(j.StateDir, "judge", "kept", fmt.Sprintf("%s-%d", c.RunID, c.Iteration))
	alt := filepath.Join(j.gitDir, "objects", "info", "alternates")
	now, _ := os.ReadFile(alt)
	if !bytes.Equal(now, j.alternates) {
		_ = os.MkdirAll(kept, 0o700)
		_ = os.WriteFile(filepath.Join(kept, "alternates"), now, 0o600)
		var err error
		if len(j.alternates) == 0 {
			err = os.Remove(alt)
		} else {
			err = os.WriteFile(alt, j.alternates, 0o644)
		}
		msg := "the agent changed objects/info/alternates (objects read from another folder); put back, its version kept in " + kept
		if err != nil && !os.IsNotExist(err) {
			msg = fmt.Sprintf("the agent changed objects/info/alternates and it could not be put back (%v)", err)
		}
		f.Tampered = append(f.Tampered, msg)
		failWith("tampering: an alternate object store", "The previous iteration pointed git at another object store (objects/info/alternates). A commit must hold all of its work in the repository's own objects; it was put back. Write your files in the work tree and nothing else of git's.")
	}
	grafts := filepath.Join(j.gitDir, "info", "grafts")
	if !c.Since.IsZero() && git.WrittenSince(grafts, c.Since) {
		_ = os.MkdirAll(kept, 0o700)
		if os.Rename(grafts, filepath.Join(kept, "grafts")) == nil {
			f.Tampered = append(f.Tampered, "the agent wrote info/grafts (history rewritten in place); moved to "+kept)
			failWith("tampering: a grafts file", "The previous iteration wrote a grafts file, which rewrites history in place. It was removed. Do not change git's own files.")
		}
	}
	if !c.Claim.Merging {
		merge, err := c.gitPath(ctx, j, "MERGE_HEAD")
		if err == nil {
			dir := filepath.Dir(merge)
			var left []string
			for _, n := range inProgress {
				p := filepath.Join(dir, n)
				if _, err := os.Lstat(p); err != nil {
					continue
				}
				_ = os.MkdirAll(kept, 0o700)
				if os.Rename(p, filepath.Join(kept, n)) == nil {
					left = append(left, n)
				}
			}
			if len(left) > 0 {
				f.Tampered = append(f.Tampered, fmt.Sprintf("the agent left git operations in progress (%s); removed, kept in %s", strings.Join(left, ", "), kept))
				failWith("tampering: a git operation left in progress", "The previous iteration left "+strings.Join(left, ", ")+" (a merge, cherry pick, revert or rebase in progress). ralph records the work tree as one commit of its own; do not merge, rebase or cherry-pick.")
			}
		}
	}
	return f
}
