package git

import "context"

// Staged is the work tree staged whole by StageAll, before the gates run.
type Staged struct {
	// Tree is what the index held right after the add: the tree the gates
	// run on, and what a commit of the index would hold.
	Tree string

	repo   *Repo
	before string // the index's tree before the add; "" when it had none (unmerged paths)
}

// StageAll stages everything in the tree but the paths in except (`git
// add --all`) and records the tree that staged, and the one the index
// held before, so that Restore can put it back.
func (r *Repo) StageAll(ctx context.Context, except []string) (*Staged, error) {
	// An index with unmerged paths has no tree to put back; the add
	// resolves them either way.
	before, _ := r.WriteTree(ctx)
	if _, err := r.AddAllExcept(ctx, except); err != nil {
		return nil, err
	}
	tree, err := r.WriteTree(ctx)
	if err != nil {
		return nil, err
	}
	return &Staged{Tree: tree, repo: r, before: before}, nil
}

// Restore puts back the index from before the add (an iteration that did
// not pass leaves the index as the agent left it), keeping git's cached
// file stats where the contents agree. It does so only while the index
// still holds the staged tree: anything someone else staged since stays.
func (s *Staged) Restore(ctx context.Context) error {
	if s.before == "" || s.before == s.Tree {
		return nil
	}
	if now, err := s.repo.WriteTree(ctx); err != nil || now != s.Tree {
		return err
	}
	_, err := s.repo.Run(ctx, "read-tree", "-m", s.before)
	return err
}
