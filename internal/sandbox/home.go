package sandbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A confined command gets a private, writable HOME, seeded from the
// user's: a folder of its own, kept between runs (one per repository,
// one for agents and one for gates), in which every entry of the user's
// home is a link to the real one (read-only there, the deny list left
// out), the folders tools write beneath (.cache, .config, .local/share,
// .local/state) are real folders of links, and the caches are real,
// private folders. A tool that writes ~/.node-spawn-wrap-*, ~/.cache/x
// or ~/go/pkg/mod writes the private home; one that reads ~/.gitconfig
// or ~/.pyenv reads the user's.
//
// Why a seeded folder and not an overlay of the user's home: bubblewrap
// before 0.9 has no overlay mounts (Debian 12's is 0.8), and an overlay
// made another way (a user namespace of ralph's own) costs a mount per
// sandbox start; the seeded folder costs a few dozen links once per run.
// docs/sandbox.md has the numbers (`go run ./bench sandbox`).

// Home kinds: the agents' and the gates' homes of a repository never
// share a writable folder (a cache the agent could write is a cache it
// could poison for the gates that judge it).
const (
	homeAgent = "agent"
	homeGate  = "gate"
)

// HomesDir is where the private homes are kept: $XDG_CACHE_HOME/ralph/homes
// (~/.cache/ralph/homes), one folder per repository.
func HomesDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = filepath.Join(os.TempDir(), "ralph-cache-"+strings.ReplaceAll(filepath.Base(os.Getenv("USER")), "/", ""))
	}
	return filepath.Join(d, "ralph", "homes")
}

// repoKey names a repository's homes: its main folder's name and a hash
// of its git folder (every worktree of a repository shares them).
func repoKey(root string) string {
	return keyOf(repoOf(root))
}

// repoOf is the path a repository's homes are named after and belong
// to: its git folder (its main folder's when root is a worktree), or
// root itself outside git.
func repoOf(root string) string {
	if common := gitCommonDir(root); common != "" {
		return common
	}
	return root
}

func keyOf(common string) string {
	sum := sha256.Sum256([]byte(common))
	name := filepath.Base(filepath.Dir(common))
	if filepath.Base(common) != ".git" {
		name = filepath.Base(common)
	}
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == ' ' {
			return '-'
		}
		return r
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	return name + "-" + hex.EncodeToString(sum[:6])
}

// xdgFolders are the folders of a home that tools write beneath: real
// folders in the private home, their entries links.
var xdgFolders = []string{".cache", ".config", ".local", ".local/share", ".local/state"}

// shimFolders are version managers' shim folders, rewritten by a
// `rehash` in every login shell (pyenv's prints "cannot rehash" where it
// cannot write): a private copy is shown over each.
func shimFolders() []string {
	out := []string{}
	for env, def := range map[string]string{"PYENV_ROOT": "~/.pyenv", "RBENV_ROOT": "~/.rbenv", "NODENV_ROOT": "~/.nodenv", "GOENV_ROOT": "~/.goenv"} {
		root := def
		if v := os.Getenv(env); v != "" {
			root = v
		}
		out = append(out, filepath.Join(expand(root), "shims"))
	}
	slices.Sort(out)
	return out
}

// home is one private home, seeded: what to show writable where.
type home struct {
	dir  string
	real string  // the user's home
	rw   []mount // the caches and shim copies, shown at the user's paths too
}

// homeSpec is what seeds a home.
type homeSpec struct {
	real    string   // the user's home
	hidden  []string // absolute paths left out
	special []string // absolute paths neither linked nor hidden: the agents' CLI state, bound by each session
	caches  []string // absolute paths of caches: private folders
}

// seedHome makes (or refreshes) the private home dir from spec.
func seedHome(dir string, spec homeSpec) (*home, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	h := &home{dir: dir, real: spec.real}
	if spec.real == "" || spec.real == "/" {
		return h, nil
	}
	rel := func(p string) (string, bool) {
		r, err := filepath.Rel(spec.real, p)
		if err != nil || r == "." || !filepath.IsLocal(r) {
			return "", false
		}
		return filepath.ToSlash(r), true
	}
	skip := map[string]bool{}    // neither linked nor made here
	folders := map[string]bool{} // real folders of links
	for _, f := range xdgFolders {
		folders[f] = true
	}
	addParents := func(r string) {
		for d := filepath.Dir(r); d != "."; d = filepath.Dir(d) {
			folders[filepath.ToSlash(d)] = true
		}
	}
	for _, list := range [][]string{spec.hidden, spec.special} {
		for _, p := range list {
			if r, ok := rel(p); ok {
				skip[r] = true
				addParents(r)
			}
		}
	}
	// Go's caches in the home (GOCACHE, GOMODCACHE are set there).
	private := []string{".cache/go-build", ".cache/go-mod"}
	for _, r := range private {
		skip[r] = true
	}
	for _, c := range spec.caches {
		if r, ok := rel(c); ok {
			skip[r] = true
			addParents(r)
			private = append(private, r)
		}
	}
	// The home's entries dir mirrors, one level at a time.
	var walk func(r string) error
	walk = func(r string) error {
		entries, err := os.ReadDir(filepath.Join(spec.real, r))
		if err != nil {
			return nil // a folder the user cannot read is left out
		}
		names := map[string]bool{}
		for _, e := range entries {
			cr := filepath.ToSlash(filepath.Join(r, e.Name()))
			names[e.Name()] = true
			here := filepath.Join(dir, cr)
			switch {
			case cr == ".npmrc":
				// npm's settings without its tokens.
				writeIfChanged(here, npmrcWithoutTokens(filepath.Join(spec.real, cr)))
			case skip[cr]:
				removeOwnLink(here, spec.real)
			case folders[cr] && e.IsDir():
				if err := ensureFolder(here, spec.real); err != nil {
					return err
				}
				if err := walk(cr); err != nil {
					return err
				}
			default:
				ensureLink(here, filepath.Join(spec.real, cr))
			}
		}
		// Links to what the user's home no longer has go.
		mine, _ := os.ReadDir(filepath.Join(dir, r))
		for _, e := range mine {
			if !names[e.Name()] {
				removeOwnLink(filepath.Join(dir, r, e.Name()), spec.real)
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return nil, err
	}
	for _, r := range private {
		p := filepath.Join(dir, r)
		if err := materialize(dir, r, spec.real); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
	}
	// Each cache the user has is shown at its real path too, as the
	// private folder (a tool configured with the absolute path writes
	// that as well); a cache outside the home gets a private folder of
	// its own. One the user has not is not made in their home.
	for _, c := range spec.caches {
		src := filepath.Join(dir, ".cache", "ralph-caches", escapePath(c))
		if r, ok := rel(c); ok {
			src = filepath.Join(dir, r)
		}
		if st, err := os.Stat(c); err != nil || !st.IsDir() {
			continue
		}
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		h.rw = append(h.rw, mount{kind: "rw", path: c, src: src})
	}
	for _, shims := range shimFolders() {
		if st, err := os.Stat(shims); err != nil || !st.IsDir() {
			continue
		}
		cp := filepath.Join(dir, ".cache", "ralph-shims", escapePath(shims))
		if err := linkFolder(shims, cp); err == nil {
			h.rw = append(h.rw, mount{kind: "rw", path: shims, src: cp})
		}
	}
	return h, nil
}

// materialize makes every folder on the way to r in dir a real folder
// (a link there from an earlier seed is replaced by a folder of links).
func materialize(dir, r, real string) error {
	parts := strings.Split(filepath.ToSlash(filepath.Dir(r)), "/")
	for i := range parts {
		if parts[i] == "." {
			continue
		}
		sub := strings.Join(parts[:i+1], "/")
		if err := ensureFolder(filepath.Join(dir, sub), real); err != nil {
			return err
		}
	}
	return nil
}

// ensureFolder makes p a real folder, replacing a link of ours.
func ensureFolder(p, real string) error {
	if st, err := os.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		removeOwnLink(p, real)
	}
	return os.MkdirAll(p, 0o755)
}

// ensureLink makes p a link to target unless something else is there
// (a file a tool made in the private home stays).
func ensureLink(p, target string) {
	if cur, err := os.Readlink(p); err == nil {
		if cur == target {
			return
		}
		os.Remove(p)
	} else if _, err := os.Lstat(p); err == nil {
		return
	}
	_ = os.Symlink(target, p)
}

// removeOwnLink removes p when it is a link into the user's home.
func removeOwnLink(p, real string) {
	if t, err := os.Readlink(p); err == nil && (t == real || strings.HasPrefix(t, real+string(filepath.Separator))) {
		os.Remove(p)
	}
}

func writeIfChanged(p string, b []byte) {
	if cur, err := os.ReadFile(p); err == nil && bytes.Equal(cur, b) {
		return
	}
	if st, err := os.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		os.Remove(p)
	}
	_ = os.WriteFile(p, b, 0o600)
}

// npmrcWithoutTokens is the user's .npmrc less the lines that hold a
// credential (a registry's _authToken, _auth, _password, a client key).
func npmrcWithoutTokens(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out bytes.Buffer
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, _, _ := strings.Cut(sc.Text(), "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if strings.Contains(k, "_auth") || strings.Contains(k, "_password") || strings.Contains(k, "token") ||
			strings.HasSuffix(k, "keyfile") || strings.HasSuffix(k, "certfile") || strings.HasSuffix(k, "username") {
			continue
		}
		out.WriteString(sc.Text() + "\n")
	}
	return out.Bytes()
}

// escapePath names an absolute path as one folder name.
func escapePath(p string) string {
	return strings.ReplaceAll(strings.Trim(filepath.ToSlash(p), "/"), "/", "_")
}

// linkFolder makes dst a folder of links to the files of src (one
// level: a shim folder): a tool that rewrites one (a rehash) replaces the
// link with a file of its own there; one written in place through a link
// would be the user's, which is read-only.
func linkFolder(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
		ensureLink(filepath.Join(dst, e.Name()), filepath.Join(src, e.Name()))
	}
	mine, _ := os.ReadDir(dst)
	for _, e := range mine {
		if !names[e.Name()] {
			removeOwnLink(filepath.Join(dst, e.Name()), src)
		}
	}
	return nil
}

// gitCommonDir is the git folder shared by the worktrees of the
// repository at root ("" when root is none).
func gitCommonDir(root string) string {
	dotgit := filepath.Join(root, ".git")
	st, err := os.Lstat(dotgit)
	if err != nil {
		return ""
	}
	if st.IsDir() {
		return dotgit
	}
	b, err := os.ReadFile(dotgit)
	if err != nil {
		return ""
	}
	gd, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return ""
	}
	admin := strings.TrimSpace(gd)
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(root, admin)
	}
	common := admin
	if c, err := os.ReadFile(filepath.Join(admin, "commondir")); err == nil {
		common = strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(admin, common)
		}
	}
	return filepath.Clean(common)
}
