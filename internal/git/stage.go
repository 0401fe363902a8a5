package git

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/proc"
)

// Staging the whole tree before the quality gates is the one git call an
// iteration that does not pass needs. Two facts make the rest free:
//
//   - git never writes an index file in place: it writes index.lock and
//     renames it over. A hard link to the index therefore keeps that
//     version's bytes, whatever git does to the index afterwards; the tree
//     the gates ran on can be written from it later, and the index from
//     before the add can be put back.
//   - a commit leaves the index holding exactly the new HEAD's tree. While
//     HEAD and the index file are still those ralph's commit left, `git
//     add --all --verbose` names every path that differs from HEAD — what
//     `git status` would list after the add — so no status is needed.

// cleanIndexes remembers, per index file, the HEAD and index stamp the
// last commit through this package left (see noteClean).
var cleanIndexes sync.Map // index path -> cleanIndex

type cleanIndex struct{ head, stamp string }

// indexPath is the path of the work tree's index file, when the layout
// can be read from the files.
func (r *Repo) indexPath() (string, bool) {
	dir, _, ok := r.gitDirs()
	if !ok {
		return "", false
	}
	return filepath.Join(dir, "index"), true
}

// noteClean records that the index holds head's tree (called right after
// a commit of the whole index).
func (r *Repo) noteClean(head string) {
	p, ok := r.indexPath()
	if !ok {
		return
	}
	if st := r.IndexStamp(); st != "" && head != "" {
		cleanIndexes.Store(p, cleanIndex{head, st})
	} else {
		cleanIndexes.Delete(p)
	}
}

// noteStatus records what a `git status --porcelain -z` just said about
// the index: with nothing staged, it holds HEAD's tree.
func (r *Repo) noteStatus(out string) {
	if _, ok := r.indexPath(); !ok {
		return
	}
	for _, e := range parseStatus(out, nil) {
		if e.Code[0] != ' ' && e.Code[0] != '?' {
			return
		}
	}
	r.noteHead()
}

// noteHead records that the index holds the tree of HEAD as it is now.
func (r *Repo) noteHead() {
	if _, head, ok := r.readWhere(); ok {
		r.noteClean(head)
	}
}

// indexIsHEAD reports whether the index is known to hold HEAD's tree: it
// is the file a commit left, and HEAD is still that commit.
func (r *Repo) indexIsHEAD() bool {
	p, ok := r.indexPath()
	if !ok {
		return false
	}
	v, ok := cleanIndexes.Load(p)
	if !ok {
		return false
	}
	c := v.(cleanIndex)
	_, head, ok := r.readWhere()
	return ok && head == c.head && r.IndexStamp() == c.stamp
}

// Staged is the work tree staged whole by StageAll, before the gates run.
type Staged struct {
	// Files are the paths the add changed in the index.
	Files []string
	// Complete says Files is every path that differs from HEAD (the index
	// held HEAD's tree before the add), as `git status` would list them.
	Complete bool

	repo   *Repo
	index  string // the index file ("" when the layout is not readable)
	stamp  string // the index right after the add
	before string // hard link to the index from before the add, or ""
	after  string // hard link to the index right after the add, or ""
	tree   string // written at once when no link could be kept
}

// StageAll stages everything in the tree but the paths in except (`git
// add --all`) and keeps what Tree and Restore need. Call Drop (or Restore)
// when done.
func (r *Repo) StageAll(ctx context.Context, except []string) (*Staged, error) {
	s := &Staged{repo: r}
	p, ok := r.indexPath()
	if ok {
		s.index = p
		if len(except) == 0 && r.indexIsHEAD() {
			s.before = linkTo(p, p+".ralph-before")
		}
	}
	files, err := r.AddAllExcept(ctx, except)
	if err != nil {
		s.Drop()
		return nil, err
	}
	slices.Sort(files)
	s.Files, s.Complete = files, s.before != ""
	if ok {
		s.stamp = r.IndexStamp()
		s.after = linkTo(p, p+".ralph-staged")
	}
	if s.stamp == "" || s.after == "" {
		// Nothing to keep the staged index by: write its tree now.
		if s.tree, err = r.WriteTree(ctx); err != nil {
			s.Drop()
			return nil, err
		}
	}
	return s, nil
}

// linkTo hard-links file to link (replacing an old link), "" if it cannot.
func linkTo(file, link string) string {
	_ = os.Remove(link)
	if os.Link(file, link) != nil {
		return ""
	}
	return link
}

// Tree is the tree the index held right after the add — what a commit of
// it would hold. untouched says the index file is still that one (nobody
// wrote it since), so it holds exactly that tree.
func (s *Staged) Tree(ctx context.Context) (tree string, untouched bool, err error) {
	if s.tree != "" {
		return s.tree, s.stamp != "" && s.repo.IndexStamp() == s.stamp, nil
	}
	if s.repo.IndexStamp() == s.stamp {
		tree, err = s.repo.WriteTree(ctx)
		return tree, true, err
	}
	// Something wrote the index since (a gate's `git status` refreshes
	// it): the linked copy still holds the staged tree — if it is still
	// that file, untouched (the tree is in reach of the agent's processes).
	if fileStamp(s.after) != s.stamp {
		return "", false, errors.New("the staged index was changed while the gates ran (" + s.after + ")")
	}
	c := s.repo.cmd("write-tree")
	c.Env = append(c.Env, "GIT_INDEX_FILE="+s.after)
	out, err := proc.Output(ctx, s.repo.Runner, c)
	if err != nil {
		return "", false, err
	}
	if tree = strings.TrimSpace(out); tree == "" {
		return "", false, errors.New("git write-tree printed no tree")
	}
	return tree, false, nil
}

// Restore puts back the index from before the add when the add is the
// only thing that changed it and it held HEAD's tree (an iteration that
// did not pass leaves the index as the agent left it, still known to hold
// HEAD's tree), then drops the links.
func (s *Staged) Restore() {
	if s.before != "" && s.stamp != "" && s.repo.IndexStamp() == s.stamp && os.Rename(s.before, s.index) == nil {
		s.before = ""
	}
	s.Drop()
}

// Drop removes the links StageAll kept.
func (s *Staged) Drop() {
	for _, l := range []*string{&s.before, &s.after} {
		if *l != "" {
			_ = os.Remove(*l)
			*l = ""
		}
	}
}
