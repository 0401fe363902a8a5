// Package landtest is a repository in memory for tests of the lander and
// of what drives it (the engine's unit tests): commits, their trees and
// refs, with a hook that moves a branch under the lander as a person's
// commit or rewrite would. Real landings are tested on real git; this is
// for scripting the moves a test needs, exactly when it needs them.
package landtest

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
)

// Root is the commit every branch starts at.
const Root = "root"

// Git is an in-memory land.Git.
type Git struct {
	mu      sync.Mutex
	refs    map[string]string
	commits map[string]Commit
	n       int
	// OnUpdate, when set, runs before each compare-and-swap of a branch
	// (refs/heads/…), outside the repository's lock: a test moves the
	// branch there. Set it before the lander runs.
	OnUpdate func(g *Git, ref string)
}

// Commit is a commit as it was made.
type Commit struct {
	Tree    string
	Parents []string
	Msg     string
}

// New is a repository with the commit Root (tree "tree-root") and no refs.
func New() *Git {
	return &Git{refs: map[string]string{}, commits: map[string]Commit{Root: {Tree: "tree-root"}}}
}

// Ensure makes branch (at Root) if it does not exist.
func (g *Git) Ensure(branch string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.refs["refs/heads/"+branch]; !ok {
		g.refs["refs/heads/"+branch] = Root
	}
}

// Tip is the commit branch is at ("" none).
func (g *Git) Tip(branch string) string { return g.Ref("refs/heads/" + branch) }

// Ref is the commit ref is at ("" none).
func (g *Git) Ref(ref string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refs[ref]
}

// Refs are every ref and its commit.
func (g *Git) Refs() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.refs)
}

// Commit is commit sha as it was made (zero when there is none).
func (g *Git) Commit(sha string) Commit {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.commits[sha]
}

// History lists the trees of branch's first-parent history, oldest
// first, Root's left out.
func (g *Git) History(branch string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var trees []string
	for c := g.refs["refs/heads/"+branch]; c != "" && c != Root; {
		cm := g.commits[c]
		trees = append([]string{cm.Tree}, trees...)
		if len(cm.Parents) == 0 {
			break
		}
		c = cm.Parents[0]
	}
	return trees
}

// Push makes a commit of tree on branch's tip and moves the branch there,
// as a person's commit does (no compare-and-swap of the lander's).
func (g *Git) Push(branch, tree, msg string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ref := "refs/heads/" + branch
	sha := g.newCommit(tree, []string{g.refs[ref]}, msg)
	g.refs[ref] = sha
	return sha
}

// Set moves ref to sha, whatever it was (a rewrite: reset, rebase).
func (g *Git) Set(ref, sha string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refs[ref] = sha
}

// Make makes a commit of tree on parents, no ref moved.
func (g *Git) Make(tree string, parents ...string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.newCommit(tree, parents, "")
}

func (g *Git) newCommit(tree string, parents []string, msg string) string {
	g.n++
	sha := fmt.Sprintf("c%04d", g.n)
	g.commits[sha] = Commit{Tree: tree, Parents: parents, Msg: msg}
	return sha
}

// UpdateRef moves ref to newSHA only if it is at oldSHA ("" a ref that
// does not exist), as `git update-ref ref new old` does.
func (g *Git) UpdateRef(_ context.Context, ref, newSHA, oldSHA, _ string) error {
	if hook := g.OnUpdate; hook != nil && strings.HasPrefix(ref, "refs/heads/") {
		hook(g, ref)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur := g.refs[ref]; cur != oldSHA {
		return fmt.Errorf("cannot lock ref %s: is at %q but expected %q", ref, cur, oldSHA)
	}
	if _, ok := g.commits[newSHA]; !ok {
		return fmt.Errorf("no commit %s", newSHA)
	}
	g.refs[ref] = newSHA
	return nil
}

// RevParse resolves a ref or a commit.
func (g *Git) RevParse(_ context.Context, rev string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sha, ok := g.refs[rev]; ok {
		return sha, nil
	}
	if _, ok := g.commits[rev]; ok {
		return rev, nil
	}
	return "", fmt.Errorf("unknown revision %s", rev)
}

// TreeOf is the tree of a ref or commit.
func (g *Git) TreeOf(ctx context.Context, rev string) (string, error) {
	sha, err := g.RevParse(ctx, rev)
	if err != nil {
		return "", err
	}
	return g.Commit(sha).Tree, nil
}

// IsAncestor reports whether a is b or one of its ancestors.
func (g *Git) IsAncestor(_ context.Context, a, b string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for todo := []string{b}; len(todo) > 0; {
		c := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if c == a {
			return true
		}
		todo = append(todo, g.commits[c].Parents...)
	}
	return false
}

// CommitTreeMsg makes a commit of tree on parents (each must exist).
func (g *Git) CommitTreeMsg(_ context.Context, tree string, parents []string, msg string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range parents {
		if _, ok := g.commits[p]; !ok {
			return "", fmt.Errorf("no commit %s", p)
		}
	}
	return g.newCommit(tree, parents, msg), nil
}
