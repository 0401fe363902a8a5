package git

import (
	"context"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/proc"
)

// TestBranchNameRules checks each rule's message and asks the real git
// about every name: where BranchNameProblem and `git check-ref-format
// --branch` (run in a repository, as `git branch` is) disagree, the name
// must be one ralph refuses on purpose (see ralphOnly).
func TestBranchNameRules(t *testing.T) {
	r := refFormatRepo(t)
	for name, want := range map[string]string{
		"ralph/login":                   "",
		"feature/x-1.2":                 "",
		"head":                          "",
		"HEAD/x":                        "",
		"x/HEAD":                        "",
		"@/x":                           "",
		"a@b":                           "",
		"{":                             "",
		"a./b":                          "",
		"é/ünï":                         "",
		strings.Repeat("a", 250):        "",
		"refs/heads/feature":            "without refs/heads/",
		"HEAD":                          "must not be HEAD",
		"-x":                            "begin with '-'",
		"-":                             "begin with '-'",
		"@":                             "'@'",
		"feature/../x":                  "'..'",
		"a..b":                          "'..'",
		"x@{1}":                         "'@{'",
		"@{-1}":                         "'@{'",
		"x@{u}":                         "'@{'",
		"x.lock":                        "'.lock'",
		"a.lock/b":                      "'.lock'",
		"a/.hidden":                     "begin with '.'",
		".a":                            "begin with '.'",
		"a b":                           `" "`,
		"a:b":                           `":"`,
		"a*b":                           `"*"`,
		"a?b":                           `"?"`,
		"a[b":                           `"["`,
		`a\b`:                           `"\\"`,
		"a^b":                           `"^"`,
		"a~b":                           `"~"`,
		"tab\there":                     `"\t"`,
		"del\x7f":                       `"\x7f"`,
		"x/":                            "'/'",
		"/x":                            "'/'",
		"a//b":                          "'//'",
		"x.":                            "end with '.'",
		"":                              "empty",
		strings.Repeat("a", 251):        "longer than 250 bytes",
		"x/" + strings.Repeat("é", 130): "longer than 250 bytes",
	} {
		got := BranchNameProblem(name)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("BranchNameProblem(%q) = %q, want %q", name, got, want)
		}
		compareWithGit(t, r, name)
	}
}

// FuzzBranchNameMatchesGit: on any name, BranchNameProblem and git agree,
// except where ralph is stricter on purpose. A name ralph accepts is one
// `ralph run` can create its branch with.
func FuzzBranchNameMatchesGit(f *testing.F) {
	for _, s := range []string{"ralph/x", "HEAD", "@", "-a", "a..b", "a@{b", "a/.b", "a.lock", "x.", "é", "a\x01b", "@{-1}", "a/b/c", "refs/x"} {
		f.Add(s)
	}
	r := refFormatRepo(f)
	f.Fuzz(func(t *testing.T, name string) {
		if strings.ContainsRune(name, 0) {
			// An argument cannot carry NUL; ralph refuses it as a control
			// character.
			if BranchNameProblem(name) == "" {
				t.Fatalf("BranchNameProblem(%q) accepts it", name)
			}
			return
		}
		compareWithGit(t, r, name)
	})
}

// ralphOnly are the names ralph refuses and git may accept.
func ralphOnly(name string) bool {
	if name == "@" || strings.HasPrefix(name, "refs/") {
		return true
	}
	for _, c := range strings.Split(name, "/") {
		if len(c) > 250 {
			return true
		}
	}
	return false
}

func compareWithGit(t *testing.T, r *Repo, name string) {
	t.Helper()
	gitOK := r.ok(context.Background(), "check-ref-format", "--branch", name)
	why := BranchNameProblem(name)
	switch {
	case why == "" && !gitOK:
		t.Errorf("%q: ralph accepts it, git check-ref-format --branch refuses it", name)
	case why != "" && gitOK && !ralphOnly(name):
		t.Errorf("%q: ralph refuses it (%s), git accepts it", name, why)
	}
}

// refFormatRepo is a fresh repository with no configuration from the
// machine: git reads a name like @{-1} against the repository.
func refFormatRepo(tb testing.TB) *Repo {
	tb.Helper()
	tb.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	tb.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	r, err := Init(context.Background(), proc.Exec{}, tb.TempDir(), "main")
	if err != nil {
		tb.Fatal(err)
	}
	return r
}
