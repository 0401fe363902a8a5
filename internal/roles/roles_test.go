package roles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedTriggers is the role-triggers roles.yaml as its document writes it.
const seedTriggers = `triggers:
  # After significant work, review it
  - condition: "branch_commits >= 5"
    role: "reviewer"

  # Refactoring tasks get architect perspective
  - condition: "task_title contains 'refactor'"
    role: "architect"

  # After a failure, switch to debugger mode
  - condition: "last_iteration_failed"
    role: "debugger"

  # Periodically document what we've learned
  - condition: "iterations_since_role('documenter') >= 10"
    role: "documenter"

  # Before completing a task, final review
  - condition: "task_marked_ready_to_complete"
    role: "reviewer"
`

func write(t *testing.T, root, rel, text string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func seedSet(t *testing.T) *Set {
	t.Helper()
	root := t.TempDir()
	write(t, root, "config/roles.yaml", seedTriggers)
	s, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func role(t *testing.T, s *Set, env Env, ready bool) string {
	t.Helper()
	tr, err := s.Choose(env, ready)
	if err != nil {
		t.Fatal(err)
	}
	if tr == nil {
		return ""
	}
	return tr.Role
}

func TestSeedTriggers(t *testing.T) {
	s := seedSet(t)
	if len(s.Triggers) != 5 || !s.Triggers[4].OnReady || s.Triggers[0].OnReady {
		t.Fatalf("triggers %+v", s.Triggers)
	}
	since := func(n int) func(string) int {
		return func(r string) int {
			if r == "documenter" {
				return n
			}
			return 0
		}
	}
	base := Env{Iteration: 3, TaskTitle: "add login", IterationsSinceRole: since(2)}
	cases := []struct {
		name  string
		env   func(Env) Env
		ready bool
		want  string
	}{
		{"nothing holds", func(e Env) Env { return e }, false, ""},
		{"branch_commits >= 5", func(e Env) Env { e.BranchCommits = 5; return e }, false, "reviewer"},
		{"4 commits are not enough", func(e Env) Env { e.BranchCommits = 4; return e }, false, ""},
		{"task_title contains 'refactor'", func(e Env) Env { e.TaskTitle = "refactor the session store"; return e }, false, "architect"},
		{"contains is case-sensitive", func(e Env) Env { e.TaskTitle = "Refactor it"; return e }, false, ""},
		{"last_iteration_failed", func(e Env) Env { e.LastIterationFailed = true; return e }, false, "debugger"},
		{"iterations_since_role('documenter') >= 10", func(e Env) Env { e.IterationsSinceRole = since(10); return e }, false, "documenter"},
		{"first match wins", func(e Env) Env { e.BranchCommits = 9; e.LastIterationFailed = true; return e }, false, "reviewer"},
		{"task_marked_ready_to_complete", func(e Env) Env { return e }, true, "reviewer"},
		{"ready asks only the completion gates", func(e Env) Env { e.LastIterationFailed = true; return e }, true, "reviewer"},
	}
	for _, c := range cases {
		if got := role(t, s, c.env(base), c.ready); got != c.want {
			t.Errorf("%s: role %q, want %q", c.name, got, c.want)
		}
	}
}

func TestEnvironmentFacts(t *testing.T) {
	root := t.TempDir()
	write(t, root, ".ralph/roles.yaml", `triggers:
  - condition: gate_failed("test") and consecutive_failures >= 2
    role: debugger
  - condition: item_iteration > 3 && files_changed == 0 && task_id == "S-1" && item_kind == "story"
    role: architect
  - condition: last_role == "reviewer" && attempt == 2 && iteration == 7
    role: documenter
`)
	s, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	failed := func(names ...string) func(string) bool {
		return func(n string) bool { return strings.Contains(strings.Join(names, ","), n) }
	}
	if r := role(t, s, Env{GateFailed: failed("test"), ConsecutiveFailures: 2}, false); r != "debugger" {
		t.Fatal(r)
	}
	if r := role(t, s, Env{GateFailed: failed("lint"), ConsecutiveFailures: 2}, false); r != "" {
		t.Fatal(r)
	}
	if r := role(t, s, Env{ItemIteration: 4, TaskID: "S-1", ItemKind: "story"}, false); r != "architect" {
		t.Fatal(r)
	}
	if r := role(t, s, Env{LastRole: "reviewer", Attempt: 2, Iteration: 7}, false); r != "documenter" {
		t.Fatal(r)
	}
	if !s.Uses("files_changed") || s.Uses("branch_commits") {
		t.Fatal("Uses")
	}
}

func TestOverridesAndSources(t *testing.T) {
	root := t.TempDir()
	write(t, root, "roles/reviewer.md", "# Role: Reviewer\nseed layout\n")
	write(t, root, "roles/security.md", "# Role: Security\n")
	write(t, root, ".ralph/roles/security.md", "# Role: Security\nralph layout wins\n")
	s, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Get("reviewer"); r.From != filepath.Join(root, "roles/reviewer.md") || !strings.Contains(r.Text, "seed layout") {
		t.Fatalf("reviewer %+v", r)
	}
	if r, _ := s.Get("security"); !strings.Contains(r.Text, "ralph layout wins") {
		t.Fatalf("security %+v", r)
	}
	if r, _ := s.Get("debugger"); r.From != BuiltinFrom || !strings.Contains(r.Text, "Do NOT") {
		t.Fatalf("debugger %+v", r)
	}
	want := "architect council debugger documenter planner refactorer reviewer security"
	if got := strings.Join(s.Names(), " "); got != want {
		t.Fatal(got)
	}
	for _, b := range []string{"reviewer", "architect", "debugger", "documenter", "refactorer", "council", "planner"} {
		r, _ := (&Set{roles: mustBuiltins(t)}).Get(b)
		if !strings.Contains(r.Text, "Do NOT") {
			t.Errorf("built-in %s does not say what the iteration must not do", b)
		}
	}
}

func mustBuiltins(t *testing.T) map[string]Role {
	s, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s.roles
}

func TestTriggerErrorsNameThePlace(t *testing.T) {
	cases := []struct{ text, want string }{
		{"triggers:\n  - condition: \"branch_commits >= 'x'\"\n    role: reviewer\n", `roles.yaml:2:32: trigger 1: condition "branch_commits >= 'x'": invalid operation: >= (mismatched types int and string)`},
		{"triggers:\n  - condition: branch_comits >= 5\n    role: reviewer\n", `roles.yaml:2:16: trigger 1: condition "branch_comits >= 5": unknown name branch_comits`},
		{"triggers:\n  - condition: branch_commits\n    role: reviewer\n", `roles.yaml:2:16: trigger 1: condition "branch_commits": expected bool, but got int`},
		{"triggers:\n  - condition: iteration > 1\n    role: critic\n", `roles.yaml:3:11: trigger 1: no role "critic"`},
		{"triggers:\n  - role: reviewer\n", `roles.yaml:2:9: trigger 1: condition is required`},
		{"triggers:\n  - condition: iteration > 1\n    rol: reviewer\n", `roles.yaml:3:5: unknown field "rol"`},
		{"agents:\n  critic: {agent: codex}\n", `roles.yaml:2:11: agents: no role "critic"`},
	}
	for _, c := range cases {
		root := t.TempDir()
		write(t, root, ".ralph/roles.yaml", c.text)
		_, err := Load(root)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant …%s", c.text, err, c.want)
		}
	}
	root := t.TempDir()
	write(t, root, ".ralph/roles.yaml", "triggers: []\n")
	write(t, root, "config/roles.yaml", "triggers: []\n")
	if _, err := Load(root); err == nil || !strings.Contains(err.Error(), "keep the triggers in one of them") {
		t.Fatal(err)
	}
	write(t, root, "roles/Bad Name.md", "x")
	os.Remove(filepath.Join(root, "config/roles.yaml"))
	if _, err := Load(root); err == nil || !strings.Contains(err.Error(), "a role's file name is its name") {
		t.Fatal(err)
	}
}

func TestParseVerdict(t *testing.T) {
	cases := []struct {
		final    string
		want     Decision
		findings string
	}{
		{"Looked at it all.\nREVIEW: approve", Approve, "Looked at it all."},
		{"- add.go ignores overflow\n\nREVIEW: changes\n", Changes, "- add.go ignores overflow"},
		{"**REVIEW: changes requested**", Changes, ""},
		{"REVIEW: changes\nfixed later?\nREVIEW: approve", Approve, "REVIEW: changes\nfixed later?"},
		{"I would say REVIEW: approve in the middle of a line", None, ""},
		{"no verdict at all", None, ""},
		{"REVIEW: maybe", None, ""},
		{"Done.\n```json\n{\"review\": \"changes\", \"findings\": [\"no test for 0\", \"typo\"]}\n```", Changes, "- no test for 0\n- typo"},
		{"```json\n{\"review\": \"approve\"}\n```", Approve, ""},
		{"```json\n{\"review\": \"lgtm\"}\n```", None, ""},
		{"```json\n{\"review\": \"approve\"}\n```\nREVIEW: changes", Changes, "```json\n{\"review\": \"approve\"}\n```"},
	}
	for _, c := range cases {
		v := ParseVerdict(c.final)
		if v.Decision != c.want || v.Findings != c.findings {
			t.Errorf("%q: %+v, want %q %q", c.final, v, c.want, c.findings)
		}
	}
}

func FuzzParseVerdict(f *testing.F) {
	f.Add("REVIEW: approve")
	f.Add("```json\n{\"review\": \"changes\", \"findings\": \"x\"}\n```")
	f.Fuzz(func(t *testing.T, s string) {
		v := ParseVerdict(s)
		if v.Decision == Approve && !strings.Contains(strings.ToLower(s), "approve") {
			t.Fatalf("approval from %q", s)
		}
	})
}

// TestParseVote: the JSON block, the VOTE line and a reviewer's verdict
// are votes; anything else abstains, never approves.
func TestParseVote(t *testing.T) {
	cases := []struct {
		final, decision, reasons string
	}{
		{"looks fine\n```json\n{\"vote\": \"approve\", \"reasons\": \"all criteria met\"}\n```", VoteApprove, "all criteria met"},
		{"```json\n{\"vote\": \"reject\", \"reasons\": [\"no test for empty input\", \"typo\"]}\n```", VoteReject, "- no test for empty input\n- typo"},
		{"the parser drops the last line\nVOTE: reject", VoteReject, "the parser drops the last line"},
		{"```json\n{\"vote\": \"approve\"}\n```\nthen I looked again: broken\nVOTE: reject", VoteReject, "```json\n{\"vote\": \"approve\"}\n```\nthen I looked again: broken"},
		{"fine\nREVIEW: approve", VoteApprove, "fine"},
		{"bad\nREVIEW: changes", VoteReject, "bad"},
		{"I think it is good, I approve", VoteAbstain, ""},
		{"```json\n{\"vote\": \"maybe\"}\n```", VoteAbstain, ""},
		{"```json\n{\"vote\": \"approve\"\n```", VoteAbstain, ""},
		{"", VoteAbstain, ""},
	}
	for _, c := range cases {
		v := ParseVote(c.final)
		if v.Decision != c.decision || (c.reasons != "" && v.Reasons != c.reasons) {
			t.Errorf("ParseVote(%q) = %+v; want %s %q", c.final, v, c.decision, c.reasons)
		}
	}
}

// TestCouncilRules: a council rule is compiled at load like a trigger
// (errors at file:line:col) and holds over the same facts.
func TestCouncilRules(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".ralph/roles.yaml", "council:\n  - condition: \"task_title contains 'auth'\"\n")
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := s.CouncilRule(Env{TaskTitle: "add auth tokens"}); r == nil || r.Line != 2 {
		t.Fatalf("rule %+v", r)
	}
	if r, _ := s.CouncilRule(Env{TaskTitle: "docs"}); r != nil {
		t.Fatalf("rule %+v for docs", r)
	}
	write(t, dir, ".ralph/roles.yaml", "council:\n  - condition: \"task_titel contains 'auth'\"\n")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "roles.yaml:2:17: council rule 1: condition") {
		t.Fatalf("err %v", err)
	}
}
