// Package git drives the git CLI through proc.Runner with argv lists. It is
// the only place in ralph that runs git; task titles and story ids reach
// branch names and messages, so nothing here is ever a shell string.
package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/proc"
)

// Repo is a work tree (main checkout or a linked worktree).
type Repo struct {
	Dir    string
	Runner proc.Runner
	// BatchMaintenance keeps git from starting `git maintenance run --auto`
	// after each commit (an extra process per commit, and in a parallel run
	// one inside the merge queue); the owner calls Maintain once at the end.
	BatchMaintenance bool
}

// At returns the same runner bound to another directory (a worktree).
func (r *Repo) At(dir string) *Repo {
	return &Repo{Dir: dir, Runner: r.Runner, BatchMaintenance: r.BatchMaintenance}
}

// cmd builds `git -C dir <args>` with an identity fallback, so commits work
// on a fresh machine without a global user.name.
func (r *Repo) cmd(args ...string) proc.Cmd {
	argv := []string{"git"}
	if r.BatchMaintenance {
		argv = append(argv, "-c", "maintenance.auto=false")
	}
	argv = append(append(argv, "-C", r.Dir), args...)
	return proc.Cmd{Argv: argv, Env: gitEnv()}
}

// gitEnv is the environment of every git command ralph runs. Hooks are
// off and so is the file-system monitor: what ralph stages and commits is
// decided by git alone, never by a script someone put in .git/hooks,
// core.hooksPath or core.fsmonitor (a post-commit hook could amend ralph's
// commit, a monitor could hide a changed file from the add). The settings
// come through GIT_CONFIG_COUNT, after any the user's environment carries.
func gitEnv() []string {
	// Replace refs (refs/replace/, and the grafts file) never stand in for
	// an object: what ralph records, judges and lands is what the
	// repository's objects say.
	extra := []string{"GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_NO_REPLACE_OBJECTS=1"}
	n, _ := strconv.Atoi(os.Getenv("GIT_CONFIG_COUNT"))
	for _, kv := range [][2]string{{"core.hooksPath", os.DevNull}, {"core.fsmonitor", "false"}} {
		extra = append(extra, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, kv[1]))
		n++
	}
	extra = append(extra, "GIT_CONFIG_COUNT="+strconv.Itoa(n))
	if os.Getenv("GIT_AUTHOR_NAME") == "" && !hasGlobalIdentity() {
		extra = append(extra,
			"GIT_AUTHOR_NAME=ralph", "GIT_AUTHOR_EMAIL=ralph@localhost",
			"GIT_COMMITTER_NAME=ralph", "GIT_COMMITTER_EMAIL=ralph@localhost")
	}
	return proc.Environ(nil, extra...)
}

// hasGlobalIdentity asks git once per process whether a user.email is
// configured. Concurrent workers build commands at once, so the answer is
// computed under sync.OnceValue: every caller sees the same, finished one.
var hasGlobalIdentity = sync.OnceValue(func() bool {
	out, err := proc.Output(context.Background(), proc.Exec{}, proc.Cmd{Argv: []string{"git", "config", "user.email"}})
	return err == nil && strings.TrimSpace(out) != ""
})

// Identity is who git itself records as the committer ("Name <email>"),
// asked without ralph's fallback identity: an error when git knows no one
// (no user.name and user.email, and nothing it could guess from).
func (r *Repo) Identity(ctx context.Context) (string, error) {
	c := r.cmd("var", "GIT_COMMITTER_IDENT")
	c.Env = proc.Environ(nil, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	out, err := proc.Output(ctx, r.Runner, c)
	if err != nil {
		return "", err
	}
	out = strings.TrimSpace(out)
	if i := strings.LastIndexByte(out, '>'); i > 0 {
		out = out[:i+1]
	}
	return out, nil
}

// Run runs git and returns trimmed stdout.
func (r *Repo) Run(ctx context.Context, args ...string) (string, error) {
	out, err := proc.Output(ctx, r.Runner, r.cmd(args...))
	return strings.TrimRight(out, "\n"), err
}

// ok runs git and reports only whether it exited 0.
func (r *Repo) ok(ctx context.Context, args ...string) bool {
	res, err := r.Runner.Run(ctx, r.cmd(args...))
	return err == nil && res.ExitCode == 0
}

// Toplevel returns the root of the work tree containing Dir.
func (r *Repo) Toplevel(ctx context.Context) (string, error) {
	out, err := r.Run(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("%s is not inside a git repository", r.Dir)
	}
	return out, nil
}

// CommonDir returns the absolute .git directory (the common one for
// worktrees).
func (r *Repo) CommonDir(ctx context.Context) (string, error) {
	return r.Run(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
}

// RepoID names the repository itself rather than its path: its git
// folder and its root commit (the first of them, by name, when histories
// were joined). A new repository made where an old one was has another;
// one with no commit yet is named by its git folder alone. "" when Dir is
// no repository.
func (r *Repo) RepoID(ctx context.Context) string {
	dir, err := r.CommonDir(ctx)
	if err != nil {
		return ""
	}
	roots, _ := r.Run(ctx, "rev-list", "--max-parents=0", "HEAD")
	first := ""
	for _, l := range strings.Fields(roots) {
		if first == "" || l < first {
			first = l
		}
	}
	return dir + "\x00" + first
}

// CurrentBranch returns the checked-out branch ("" when detached).
func (r *Repo) CurrentBranch(ctx context.Context) (string, error) {
	out, err := r.Run(ctx, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		var ee *proc.ExitError
		if errors.As(err, &ee) {
			return "", nil
		}
		return "", err
	}
	return out, nil
}

// Where is the branch checked out ("HEAD" when HEAD is detached) and the
// commit HEAD is at, in one git call; on an unborn branch head is "".
func (r *Repo) Where(ctx context.Context) (branch, head string, err error) {
	out, err := r.Run(ctx, "rev-parse", "HEAD", "--symbolic-full-name", "HEAD")
	if err != nil {
		var ee *proc.ExitError
		if !errors.As(err, &ee) {
			return "", "", err
		}
		branch, err = r.CurrentBranch(ctx) // no commit yet
		return branch, "", err
	}
	head, ref, _ := strings.Cut(out, "\n")
	return strings.TrimPrefix(strings.TrimSpace(ref), "refs/heads/"), strings.TrimSpace(head), nil
}

// HasCommits reports whether HEAD points at a commit.
func (r *Repo) HasCommits(ctx context.Context) bool {
	return r.ok(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
}

// Head returns the full SHA of HEAD.
func (r *Repo) Head(ctx context.Context) (string, error) {
	return r.Run(ctx, "rev-parse", "HEAD")
}

// RevParse resolves a revision to a SHA.
func (r *Repo) RevParse(ctx context.Context, rev string) (string, error) {
	return r.Run(ctx, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
}

// LocalHooksPath is core.hooksPath as the repository's own config file
// sets it ("" when it does not): ralph's git ignores it (gitEnv), the
// user's git commands do not.
func (r *Repo) LocalHooksPath(ctx context.Context) string {
	out, err := r.Run(ctx, "config", "--local", "--get", "core.hooksPath")
	if err != nil {
		return ""
	}
	return out
}

// BranchExists reports whether refs/heads/name exists.
func (r *Repo) BranchExists(ctx context.Context, name string) bool {
	return r.ok(ctx, "show-ref", "--verify", "--quiet", "refs/heads/"+name)
}

// CreateBranch creates name at start (HEAD when empty) without checking out.
func (r *Repo) CreateBranch(ctx context.Context, name, start string) error {
	args := []string{"branch", "--", name}
	if start != "" {
		args = append(args, start)
	}
	_, err := r.Run(ctx, args...)
	return err
}

// Checkout switches to an existing branch.
func (r *Repo) Checkout(ctx context.Context, name string) error {
	_, err := r.Run(ctx, "checkout", "--quiet", name, "--")
	return err
}

// CheckoutOver checks out name over what the work tree holds: its
// changes to tracked files and the untracked files name has are
// replaced by name's versions (ignored files stay). For a tree whose work
// is already in name (it landed there), never for a person's changes.
func (r *Repo) CheckoutOver(ctx context.Context, name string) error {
	_, err := r.Run(ctx, "checkout", "--quiet", "--force", name, "--")
	return err
}

// DeleteBranch force-deletes a local branch.
func (r *Repo) DeleteBranch(ctx context.Context, name string) error {
	_, err := r.Run(ctx, "branch", "-D", "--", name)
	return err
}

// StatusPorcelain lists changed paths (tracked and untracked, not ignored),
// skipping any under the given prefixes.
func (r *Repo) StatusPorcelain(ctx context.Context, skip ...string) ([]string, error) {
	out, err := proc.Output(ctx, r.Runner, r.cmd("status", "--porcelain=v1", "-z", "--untracked-files=all"))
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range parseStatus(out, skip) {
		paths = append(paths, e.Path)
	}
	return paths, nil
}

// StatusEntry is one line of `git status --porcelain`: Code is its two
// columns, the index against HEAD and the tree against the index.
type StatusEntry struct {
	Code string
	Path string
}

// Unstaged reports whether the tree holds something the index does not:
// a change since the last add, or a file git does not track.
func (e StatusEntry) Unstaged() bool { return e.Code[1] != ' ' }

// Status lists the changed paths with their codes, skipping any under the
// given prefixes. Submodules count only by the commit they point at.
func (r *Repo) Status(ctx context.Context, skip ...string) ([]StatusEntry, error) {
	out, err := proc.Output(ctx, r.Runner, r.cmd("status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty"))
	if err != nil {
		return nil, err
	}
	return parseStatus(out, skip), nil
}

func parseStatus(out string, skip []string) []StatusEntry {
	var entries []StatusEntry
	fields := strings.Split(out, "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		code, path := f[:2], f[3:]
		if code[0] == 'R' || code[0] == 'C' {
			i++ // the source path follows
		}
		keep := true
		for _, s := range skip {
			if path == s || strings.HasPrefix(path, strings.TrimSuffix(s, "/")+"/") {
				keep = false
			}
		}
		if keep {
			entries = append(entries, StatusEntry{Code: code, Path: path})
		}
	}
	return entries
}

// AddAll stages everything (respecting ignore rules, including .ralph's
// entry in info/exclude).
func (r *Repo) AddAll(ctx context.Context) error {
	_, err := r.Run(ctx, "add", "--all", "--", ".")
	return err
}

// Commit commits what is staged with msg (read from stdin, so any text is
// safe) and returns the new SHA. allowEmpty lets a story that needed no
// change still leave its commit.
func (r *Repo) Commit(ctx context.Context, msg string, allowEmpty bool) (string, error) {
	return r.commit(ctx, msg, allowEmpty)
}

// CommitInclude stages paths on top of what is staged and commits both,
// returning the new SHA: one git call instead of add, commit and rev-parse.
// The paths must be tracked (see Tracked): git's --include skips an
// untracked file without an error.
func (r *Repo) CommitInclude(ctx context.Context, msg string, allowEmpty bool, paths ...string) (string, error) {
	return r.commit(ctx, msg, allowEmpty, paths...)
}

// Tracked reports whether path is in the index.
func (r *Repo) Tracked(ctx context.Context, path string) bool {
	return r.ok(ctx, "ls-files", "--error-unmatch", "--", ":(literal)"+path)
}

// commit runs `git commit` and reads the new SHA from its summary line
// ("[branch 0123…] subject", printed in full with core.abbrev=no), saving a
// rev-parse; if the line cannot be read, it asks git.
func (r *Repo) commit(ctx context.Context, msg string, allowEmpty bool, include ...string) (string, error) {
	out, err := r.runCommit(ctx, msg, allowEmpty, include, "-c", "core.abbrev=no", "commit", "--no-verify", "-F", "-")
	if err != nil {
		return "", err
	}
	sha := summarySHA(out)
	if sha == "" {
		if sha, err = r.Head(ctx); err != nil {
			return "", err
		}
	}
	return sha, nil
}

// runCommit runs the commit argv with msg on stdin, then --allow-empty and
// the literal paths to --include as asked.
func (r *Repo) runCommit(ctx context.Context, msg string, allowEmpty bool, include []string, argv ...string) (string, error) {
	if allowEmpty {
		argv = append(argv, "--allow-empty")
	}
	if len(include) > 0 {
		argv = append(append(argv, "--include", "--"), literal(include)...)
	}
	c := r.cmd(argv...)
	c.Stdin = strings.NewReader(msg)
	return proc.Output(ctx, r.Runner, c)
}

// summarySHA finds the full object name in the first line of git commit's
// output: "[main (root-commit) <sha>] subject". The branch comes first and
// the subject after "]", so only the words before the first "] " count.
func summarySHA(out string) string {
	line, _, _ := strings.Cut(out, "\n")
	head, _, ok := strings.Cut(strings.TrimPrefix(line, "["), "] ")
	if !ok || !strings.HasPrefix(line, "[") {
		return ""
	}
	words := strings.Fields(head)
	if len(words) < 2 {
		return ""
	}
	if w := words[len(words)-1]; fullSHA.MatchString(w) {
		return w
	}
	return ""
}

var fullSHA = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// Maintain runs git's own housekeeping once (`git maintenance run --auto`:
// it does something only past git's thresholds), for a caller that set
// BatchMaintenance.
func (r *Repo) Maintain(ctx context.Context) {
	_, _ = r.Run(ctx, "maintenance", "run", "--auto", "--quiet")
}

// ResetHard moves the current branch to rev and resets the tree.
func (r *Repo) ResetHard(ctx context.Context, rev string) error {
	_, err := r.Run(ctx, "reset", "--quiet", "--hard", rev)
	return err
}

// Log returns commit subjects of rev range (newest first).
func (r *Repo) Log(ctx context.Context, rng string, format string) ([]string, error) {
	out, err := r.Run(ctx, "log", "--format="+format, rng, "--")
	if err != nil {
		return nil, err
	}
	if out == "" {
		return nil, nil
	}
	return strings.Split(out, "\n"), nil
}

// IsAncestor reports whether a is an ancestor of b.
func (r *Repo) IsAncestor(ctx context.Context, a, b string) bool {
	return r.ok(ctx, "merge-base", "--is-ancestor", a, b)
}

// MergeSquash squash-merges branch into the current branch's index and
// tree. On conflict it returns *ConflictError listing the paths; the caller
// decides whether to resolve or abort (ResetHard).
func (r *Repo) MergeSquash(ctx context.Context, branch string) error {
	_, err := r.Run(ctx, "merge", "--squash", "--no-commit", branch)
	if err == nil {
		return nil
	}
	if paths, _ := r.UnmergedPaths(ctx); len(paths) > 0 {
		return &ConflictError{Branch: branch, Paths: paths}
	}
	return err
}

// ConflictError is a merge that stopped on conflicts.
type ConflictError struct {
	Branch string
	Paths  []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merge of %s conflicts in %s", e.Branch, strings.Join(e.Paths, ", "))
}

// WorktreeAdd creates a linked worktree at path on branch (created from
// start when it does not exist; an existing branch is checked out as it
// is, work included).
func (r *Repo) WorktreeAdd(ctx context.Context, path, branch, start string) error {
	// Creating the branch is the usual case: try it first (one git call),
	// and attach to an existing branch only when that is why it failed.
	_, err := r.Run(ctx, "worktree", "add", "--quiet", "-b", branch, path, start)
	if err != nil && r.BranchExists(ctx, branch) {
		_, err = r.Run(ctx, "worktree", "add", "--quiet", path, branch)
	}
	return err
}

// WorktreeAddReset is WorktreeAdd for a branch whose content does not
// matter: it is created, or reset, at start.
func (r *Repo) WorktreeAddReset(ctx context.Context, path, branch, start string) error {
	_, err := r.Run(ctx, "worktree", "add", "--quiet", "-B", branch, path, start)
	return err
}

// WorktreeAddDetached creates a linked worktree at path with commit
// checked out and no branch (a look at a commit, removed after).
func (r *Repo) WorktreeAddDetached(ctx context.Context, path, commit string) error {
	_, err := r.Run(ctx, "worktree", "add", "--quiet", "--detach", path, commit)
	return err
}

// WorktreeRemove removes a linked worktree (forcefully: its changes are
// either merged or deliberately discarded by the caller).
func (r *Repo) WorktreeRemove(ctx context.Context, path string) error {
	_, err := r.Run(ctx, "worktree", "remove", "--force", path)
	return err
}

// WorktreeMove moves a linked worktree to a new folder.
func (r *Repo) WorktreeMove(ctx context.Context, from, to string) error {
	_, err := r.Run(ctx, "worktree", "move", from, to)
	return err
}

// WorktreePrune forgets worktrees whose folders are gone.
func (r *Repo) WorktreePrune(ctx context.Context) error {
	_, err := r.Run(ctx, "worktree", "prune")
	return err
}

// EnsureExcluded lists pattern in .git/info/exclude (never the user's
// .gitignore) so ralph's own files stay out of commits and status.
func (r *Repo) EnsureExcluded(ctx context.Context, pattern string) error {
	ownExcluded.Store(pattern, true)
	return r.ensureInfoLine(ctx, "exclude", "# ralph's own state", pattern)
}

// EnsureAttribute adds line (a pattern and its attributes) to the
// repository's own attributes file, .git/info/attributes, when it is
// not there yet: a setting of ralph's, never in the user's .gitattributes.
func (r *Repo) EnsureAttribute(ctx context.Context, line string) error {
	return r.ensureInfoLine(ctx, "attributes", "# ralph", line)
}

// ensureInfoLine appends line, after comment, to the file name in the
// git folder's info/ unless a line of it already says it.
func (r *Repo) ensureInfoLine(ctx context.Context, name, comment, pattern string) error {
	common, err := r.CommonDir(ctx)
	if err != nil {
		return err
	}
	path := filepath.Join(common, "info", name)
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == pattern {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	prefix := ""
	if len(b) > 0 && b[len(b)-1] != '\n' {
		prefix = "\n"
	}
	_, err = f.WriteString(prefix + comment + "\n" + pattern + "\n")
	return err
}

// ownExcluded are the patterns this process asked EnsureExcluded for:
// ralph's own files in a tree (its state, a run folder's control files).
// Kept in memory, not read back from info/exclude, which anyone who can
// write the repository's git folder can add to.
var ownExcluded sync.Map

// OwnExcluded lists the paths (relative to a tree, "/" for a folder at the
// end) of ralph's own files this process has excluded.
func OwnExcluded() []string {
	var out []string
	ownExcluded.Range(func(k, _ any) bool {
		out = append(out, strings.TrimPrefix(k.(string), "/"))
		return true
	})
	return out
}

// Init creates a repository with an initial branch (tests and the demo).
func Init(ctx context.Context, r proc.Runner, dir, branch string) (*Repo, error) {
	repo := &Repo{Dir: dir, Runner: r}
	_, err := repo.Run(ctx, "init", "--quiet", "--initial-branch="+branch)
	return repo, err
}

var unsafeRef = regexp.MustCompile(`[^a-z0-9._/-]+`)

// Slug turns any title into a string safe inside a git ref: lower case,
// [a-z0-9-] words, no "..", no leading/trailing separators, bounded length.
func Slug(s string, max int) string {
	s = strings.ToLower(s)
	s = unsafeRef.ReplaceAllString(s, "-")
	s = strings.NewReplacer("/", "-", ".", "-", "_", "-").Replace(s)
	for strings.Contains(s, "--") {
		s = strings.ReplaceAll(s, "--", "-")
	}
	s = strings.Trim(s, "-")
	if max > 0 && len(s) > max {
		s = strings.TrimRight(s[:max], "-")
	}
	if s == "" {
		s = "task"
	}
	return s
}

// CheckRefName checks name against git's rules for branch names (see
// BranchNameProblem), without starting git.
func (r *Repo) CheckRefName(ctx context.Context, name string) error {
	if why := BranchNameProblem(name); why != "" {
		return fmt.Errorf("%q is not a valid git branch name: %s", name, why)
	}
	return nil
}

// BranchNameProblem applies git's rules for a branch name (what `git
// check-ref-format --branch` and `git branch` refuse) and says which one
// name breaks, or "". It refuses a little more than git, never less:
// a name under refs/ (ralph adds refs/heads/ itself), '@' alone (git
// reads it as HEAD in a revision), and a part longer than maxPart bytes
// (git checks the name, then cannot create the file).
func BranchNameProblem(name string) string {
	// git keeps a branch as the file refs/heads/<name> and locks it with
	// <last part>.lock beside it; a file name is at most 255 bytes on
	// common file systems.
	const maxPart = 255 - len(".lock")
	switch {
	case name == "":
		return "it must not be empty"
	case strings.HasPrefix(name, "refs/"):
		return "give the branch's short name, without refs/heads/ (ralph creates refs/heads/<name> itself)"
	case strings.HasPrefix(name, "-"):
		return "it must not begin with '-'"
	case name == "HEAD":
		return "it must not be HEAD (git's name for the commit checked out)"
	case name == "@":
		return "it must not be '@' (git reads '@' alone as HEAD)"
	case strings.Contains(name, ".."):
		return "it must not contain '..'"
	case strings.Contains(name, "@{"):
		return "it must not contain '@{'"
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return "it must not begin or end with '/' or contain '//'"
	case strings.HasSuffix(name, "."):
		return "it must not end with '.'"
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r)
	}); i >= 0 {
		return fmt.Sprintf("it must not contain %q (spaces, control characters and ~ ^ : ? * [ \\ are not allowed)", name[i:i+1])
	}
	for _, c := range strings.Split(name, "/") {
		if strings.HasPrefix(c, ".") {
			return fmt.Sprintf("no part may begin with '.' (%q)", c)
		}
		if strings.HasSuffix(c, ".lock") {
			return fmt.Sprintf("no part may end with '.lock' (%q)", c)
		}
		if len(c) > maxPart {
			return fmt.Sprintf("no part may be longer than %d bytes (one is %d): git stores each part as a file name", maxPart, len(c))
		}
	}
	return ""
}

// AddAllExcept stages everything except the given paths (files the user
// had in the tree before ralph started: ralph never commits those) and
// returns the paths it added or removed (from git's --verbose lines).
func (r *Repo) AddAllExcept(ctx context.Context, except []string) ([]string, error) {
	args := []string{"add", "--all", "--verbose", "--", "."}
	for _, p := range except {
		args = append(args, ":(exclude,literal)"+p)
	}
	out, err := r.Run(ctx, args...)
	if err != nil {
		return nil, err
	}
	files := []string{}
	for _, line := range strings.Split(out, "\n") {
		for _, verb := range []string{"add '", "remove '"} {
			if p, ok := strings.CutPrefix(line, verb); ok && strings.HasSuffix(p, "'") {
				files = append(files, strings.TrimSuffix(p, "'"))
			}
		}
	}
	return files, nil
}

// AddPaths stages the given paths (literal pathspecs).
func (r *Repo) AddPaths(ctx context.Context, paths ...string) error {
	_, err := r.Run(ctx, append([]string{"add", "--"}, literal(paths)...)...)
	return err
}

// ResetSoft moves the branch to rev keeping index and tree (folds an
// agent's own commits into ralph's one commit per item).
func (r *Repo) ResetSoft(ctx context.Context, rev string) error {
	_, err := r.Run(ctx, "reset", "--quiet", "--soft", rev)
	return err
}

// ResetIndex makes the index HEAD's, keeping the work tree's files.
func (r *Repo) ResetIndex(ctx context.Context) error {
	_, err := r.Run(ctx, "reset", "--quiet", "--mixed", "HEAD")
	return err
}

// Message returns the full commit message of rev.
func (r *Repo) Message(ctx context.Context, rev string) (string, error) {
	return r.Run(ctx, "log", "-1", "--format=%B", rev, "--")
}

// FindTrailer returns the newest commit among the last n of rev whose
// message has every given trailer (key, value pairs), or "".
func (r *Repo) FindTrailer(ctx context.Context, rev string, n int, kv ...string) string {
	out, err := r.Run(ctx, "log", fmt.Sprintf("-%d", n), "--format=%H%x1f%B%x1e", rev, "--")
	if err != nil {
		return ""
	}
	for _, rec := range strings.Split(out, "\x1e") {
		sha, body, ok := strings.Cut(strings.TrimSpace(rec), "\x1f")
		if !ok {
			continue
		}
		all := true
		for i := 0; i+1 < len(kv); i += 2 {
			if !strings.Contains("\n"+body+"\n", "\n"+kv[i]+": "+kv[i+1]+"\n") {
				all = false
				break
			}
		}
		if all {
			return sha
		}
	}
	return ""
}

// Changed is StatusPorcelain of the tree at dir (engine.VCS).
func (r *Repo) Changed(ctx context.Context, dir string, skip ...string) ([]string, error) {
	return r.At(dir).StatusPorcelain(ctx, skip...)
}

// CommitsSince counts the commits on the tree at dir's HEAD since base
// (engine.VCS).
func (r *Repo) CommitsSince(ctx context.Context, dir, base string) (int, error) {
	return r.At(dir).CountCommits(ctx, base+"..HEAD")
}

// HeadOf is the HEAD of the tree at dir (engine.VCS).
func (r *Repo) HeadOf(ctx context.Context, dir string) (string, error) {
	return r.At(dir).Head(ctx)
}
