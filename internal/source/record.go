package source

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
)

// runTrailer names the run on every commit ralph makes for an item, so a
// resumed run finds its own commits and never another run's.
const runTrailer = "Ralph-Run"

func logOf(a *engine.Attempt) io.Writer {
	if a.Log == nil {
		return io.Discard
	}
	return a.Log
}

// parkWork keeps what the tree holds — HEAD and everything uncommitted
// (but the user's pre-existing files) — on a new side branch
// ralph/<kind>/<item>-<run>[-n] and returns its name. The tree is left on
// the side branch, clean.
func parkWork(ctx context.Context, repo *git.Repo, kind, itemID, runID string, preexisting []string, msg string, allowEmpty bool) (string, error) {
	side := "ralph/" + kind + "/" + git.Slug(itemID, 40) + "-" + runID
	for n := 2; repo.BranchExists(ctx, side); n++ {
		side = fmt.Sprintf("ralph/%s/%s-%s-%d", kind, git.Slug(itemID, 40), runID, n)
	}
	if err := repo.CreateBranch(ctx, side, ""); err != nil {
		return "", err
	}
	if err := repo.Checkout(ctx, side); err != nil {
		return "", err
	}
	if _, _, err := commitWork(ctx, repo, "", preexisting, msg, allowEmpty); err != nil {
		return "", err
	}
	return side, nil
}

// followTree makes the tree at repo, where an item's work was recorded,
// hold what landed: it takes the index the work was recorded in (as the
// tree's own) and, when what landed is more than that work (built on
// commits the tree did not have), the difference is written in.
func followTree(ctx context.Context, repo *git.Repo, v engine.Verdict, landed string) error {
	if v.Snapshot == nil {
		return nil
	}
	own := v.Snapshot.Tree
	if err := v.Snapshot.UseIndex(); err != nil {
		return err
	}
	if own == v.Tree {
		return nil
	}
	return repo.SwitchTree(ctx, own, landed)
}

func short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// commitWork is the one way an item's work becomes a single commit on the
// branch checked out in repo: the agent's own commits since base are
// folded in (a soft reset; base "" keeps them), everything but except (the
// user's files that were dirty before the run) is added, and msg is
// committed. Without allowEmpty and with nothing to commit, HEAD is
// returned. It returns the commit and the paths the add touched.
func commitWork(ctx context.Context, repo *git.Repo, base string, except []string, msg string, allowEmpty bool) (string, []string, error) {
	var folded []string
	if base != "" {
		var err error
		if folded, err = foldCommits(ctx, repo, base); err != nil {
			return "", nil, err
		}
	}
	files, err := repo.AddAllExcept(ctx, except)
	if err != nil {
		return "", nil, err
	}
	files = union(folded, files)
	if !allowEmpty && !repo.HasStagedChanges(ctx) {
		head, err := repo.Head(ctx)
		return head, files, err
	}
	sha, err := repo.Commit(ctx, msg, allowEmpty)
	return sha, files, err
}

// foldCommits soft-resets the branch to base when the agent committed
// since (its commits become staged changes), and returns the paths those
// commits changed: the item's files are counted from its base, not only
// from what the tree held uncommitted.
func foldCommits(ctx context.Context, repo *git.Repo, base string) ([]string, error) {
	head, _ := repo.Head(ctx)
	if head == base {
		return nil, nil
	}
	committed, _ := repo.DiffTrees(ctx, base, head)
	return committed, repo.ResetSoft(ctx, base)
}

// union is a followed by the paths of b it lacks.
func union(a, b []string) []string {
	if len(a) == 0 {
		return b
	}
	out := append([]string{}, a...)
	for _, p := range b {
		if !slices.Contains(a, p) {
			out = append(out, p)
		}
	}
	return out
}

// committedIn finds the commit that recorded item id in run runID on rev —
// the newest of rev's last 500 commits with both trailers — or "". It is
// how every source tells, after a crash, whether its commit landed.
func committedIn(ctx context.Context, repo *git.Repo, rev, key, id, runID string) string {
	return repo.FindTrailer(ctx, rev, 500, key, oneLine(id), runTrailer, oneLine(runID))
}

// lostCommit reports whether the state names commit sha but the
// repository does not have it: the state was saved ahead of git (a power
// cut lost the commit object, or the ref, after state.json recorded it).
func lostCommit(ctx context.Context, repo *git.Repo, sha string) bool {
	if sha == "" {
		return false
	}
	_, err := repo.RevParse(ctx, sha)
	return err != nil
}

// forgetLostBases clears the recorded base of every item still to do whose
// base commit the repository does not have (lostCommit): a base names the
// commit the item's work is compared with and the branch is put back to,
// and a lost one would fail every check of the item until it is blocked.
// The item's next iteration starts from the branch as it is, and its
// reason says why (the engine reports it when the run opens).
func forgetLostBases(ctx context.Context, repo *git.Repo, st *engine.State) {
	lost := map[string]bool{}
	isLost := func(sha string) bool {
		l, seen := lost[sha]
		if !seen {
			l = lostCommit(ctx, repo, sha)
			lost[sha] = l
		}
		return l
	}
	for _, is := range st.Items {
		if is == nil || is.BaseHead == "" || is.Status == engine.ItemPassed || is.Status == engine.ItemBlocked || !isLost(is.BaseHead) {
			continue
		}
		is.Reason = fmt.Sprintf("its recorded base commit %s is not in the repository (the state was saved ahead of git, as after a power cut); it starts again from the branch as it is", short(is.BaseHead))
		is.BaseHead = ""
	}
	for _, c := range st.Current {
		if c.BaseHead != "" && isLost(c.BaseHead) {
			c.BaseHead = ""
		}
	}
}

// commitMessage builds subject, bullet body and trailers. Subject and
// bullets are data (titles, learnings an agent wrote): line breaks in them
// are folded so they never add lines, and never a trailer, to the message.
func commitMessage(subject string, bullets []string, result string, trailers ...string) string {
	var b strings.Builder
	b.WriteString(oneLine(subject))
	b.WriteString("\n\n")
	for _, l := range bullets {
		fmt.Fprintf(&b, "- %s\n", oneLine(l))
	}
	if result != "" {
		fmt.Fprintf(&b, "- Verified by ralph: %s\n", oneLine(result))
	}
	b.WriteString("\n")
	for _, t := range trailers {
		b.WriteString(oneLine(t) + "\n")
	}
	return b.String()
}

// oneLine folds every line break and control character in s into a space
// and replaces invalid UTF-8, so the same text always gives the same line
// (a trailer written from an id is found again from that id).
func oneLine(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Join(strings.FieldsFunc(strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s), func(r rune) bool { return r == ' ' }), " ")
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 }

// itemTrailers are the trailers of an item's commit.
func itemTrailers(key, id, runID string) []string {
	return []string{key + ": " + id, runTrailer + ": " + runID}
}

// sourceTrailer names, on the commit of an item of a file that marks its
// items done (a PRD, a task tree), that file by its path in the
// repository: the commit proves a mark in that file, never one of the
// same id in another file.
const sourceTrailer = "Ralph-Source"

// markedTrailers are the trailers of the commit of an item whose file,
// src (sourceName), marks it done.
func markedTrailers(key, id, runID, src string) []string {
	return append(itemTrailers(key, id, runID), sourceTrailer+": "+src)
}

// sourceName is how the trailers name the file at path: its path in the
// repository at root with forward slashes, or its absolute path when it
// is outside.
func sourceName(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return filepath.ToSlash(rel)
	}
	return oneLine(path)
}

// provedMarks are the items of file src that rev's history records as
// ralph's commits (key names the kind of item), each with the newest such
// commit: a mark in src is verified only when its item is among them. Any
// run's commits count; the commits of an item of another file do not.
func provedMarks(ctx context.Context, repo *git.Repo, rev, key, src string) (map[string]string, error) {
	return repo.TrailerIndex(ctx, rev, key, sourceTrailer, oneLine(src))
}

// markedReason is why an item marked done in its file (how says how)
// is not counted passed: no commit of ralph's on rev records it.
func markedReason(how, rev string) string {
	return fmt.Sprintf("%s, but no commit of ralph's on %s records it", how, rev)
}

// provedReason is the reason of an item marked done whose commit of ralph's
// (sha) is on rev.
func provedReason(rev, sha string) string {
	return fmt.Sprintf("%s%s on %s records it", provedPrefix, short(sha), rev)
}

const provedPrefix = "passed before this run: ralph's commit "
