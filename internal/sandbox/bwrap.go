package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// mount is one bubblewrap mount on top of `--ro-bind / /`.
type mount struct {
	kind string // "rw", "ro", "tmpfs" (an empty private folder)
	path string
	src  string // rw/ro: the source when it is not path itself
	bulk bool   // one of Use.ReadOnly: the init binds them when they are many
}

// gitPaths are what git needs to commit in the work tree at root, and
// what in there stays read-only: the repository's config, hooks and info
// (a filter, a hook or an exclude the agent wrote would run as, or fool,
// ralph's own git), objects/info (alternates would borrow objects from
// another repository) and packed-refs, and the admin folders of the
// other worktrees.
func gitPaths(root string) (rw, ro []string) {
	dotgit := filepath.Join(root, ".git")
	st, err := os.Lstat(dotgit)
	if err != nil {
		return nil, nil
	}
	common, admin := dotgit, ""
	if !st.IsDir() {
		b, err := os.ReadFile(dotgit)
		if err != nil {
			return nil, nil
		}
		gd, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return nil, nil
		}
		admin = strings.TrimSpace(gd)
		if !filepath.IsAbs(admin) {
			admin = filepath.Join(root, admin)
		}
		common = admin
		if c, err := os.ReadFile(filepath.Join(admin, "commondir")); err == nil {
			common = strings.TrimSpace(string(c))
			if !filepath.IsAbs(common) {
				common = filepath.Join(admin, common)
			}
		}
		common = filepath.Clean(common)
		ro = append(ro, dotgit)
	}
	rw = append(rw, common)
	for _, name := range []string{"config", "config.worktree", "hooks", "info", "modules", "worktrees", "objects/info", "packed-refs"} {
		p := filepath.Join(common, name)
		switch name {
		case "hooks", "info", "objects/info":
			// Made when missing (by ralph, which is trusted), so that the
			// agent cannot create one where git would look.
			_ = os.MkdirAll(p, 0o755)
		case "packed-refs":
			// An empty one is no packed ref, as none is.
			if !exists(p) {
				if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644); err == nil {
					f.Close()
				}
			}
		}
		if _, err := os.Lstat(p); err == nil {
			ro = append(ro, p)
		}
	}
	if admin != "" {
		// A linked worktree: the main tree's HEAD and index are not its
		// to change (ralph merges there).
		for _, name := range []string{"HEAD", "index"} {
			if p := filepath.Join(common, name); exists(p) {
				ro = append(ro, p)
			}
		}
		rw = append(rw, admin)
		for _, name := range []string{"config.worktree", "commondir", "gitdir"} {
			if p := filepath.Join(admin, name); exists(p) {
				ro = append(ro, p)
			}
		}
	}
	return rw, ro
}

// workRoot is the top of the work tree dir is in: the nearest folder
// with a .git, else dir itself.
func workRoot(dir string) string {
	for d := dir; ; {
		if exists(filepath.Join(d, ".git")) {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return dir
		}
		d = up
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// bwrapArgs renders the mounts, deepest last (a later mount covers an
// earlier one at or above its path), after the fixed part.
func bwrapArgs(unshareNet bool, mounts []mount, chdir string) []string {
	args := []string{"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"}
	if unshareNet {
		args = append(args, "--unshare-net")
	}
	args = append(args, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
	mounts = slices.Clone(mounts)
	sort.SliceStable(mounts, func(i, j int) bool { return depth(mounts[i].path) < depth(mounts[j].path) })
	for _, m := range mounts {
		src := m.src
		if src == "" {
			src = m.path
		}
		switch m.kind {
		case "rw":
			args = append(args, "--bind-try", src, m.path)
		case "ro":
			args = append(args, "--ro-bind-try", src, m.path)
		case "tmpfs":
			args = append(args, "--tmpfs", m.path)
		}
	}
	if chdir != "" {
		args = append(args, "--chdir", chdir)
	}
	return args
}

func depth(p string) int { return strings.Count(filepath.Clean(p), string(filepath.Separator)) }
