package e2e

import (
	"strings"
	"testing"
	"time"
)

// A worker's clone lists .ralph/ in its info/exclude, as the repository
// does: what ralph keeps in a job's tree — an agent CLI's private home,
// .ralph/agents/codex-home, whose session rollouts hold the whole prompt
// — never reaches a commit or the remote. Control: the agent's own file
// does.
func TestClusterNeverCommitsRalphFolder(t *testing.T) {
	bin := buildRalph(t)
	const agentSh = `cat > /dev/null
mkdir -p .ralph/agents/codex-home/sessions
echo '{"prompt":"the whole prompt"}' > .ralph/agents/codex-home/sessions/rollout.jsonl
echo "$RALPH_ITEM_ID" > "out-$RALPH_ITEM_ID.txt"
echo '<promise>COMPLETE</promise>'
`
	prd := `{"project":"d","branch_name":"ralph/d","user_stories":[{"id":"S-1","title":"one","priority":1,"checks":["test -f out-S-1.txt"]}],"quality_checks":{"test":"test -f agent.sh"}}` + "\n"
	repo, remote, mark, url := clusterRepo(t, map[string]string{"prd.json": prd, "agent.sh": agentSh})
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url)...)
	w := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s", code, co, w)
	}
	if files := git(t, remote, "ls-tree", "-r", "--name-only", "ralph/d"); !strings.Contains(files, "out-S-1.txt") {
		t.Fatalf("control: the agent's file is not on the branch:\n%s", files)
	}
	if files := git(t, remote, "log", "--all", "--name-only", "--format="); strings.Contains(files, ".ralph/") {
		t.Fatalf("a commit on the remote holds ralph's folder:\n%s\n%s", files, w)
	}
	if files := git(t, repo, "log", "--all", "--name-only", "--format="); strings.Contains(files, ".ralph/") {
		t.Fatalf("a commit in the repository holds ralph's folder:\n%s", files)
	}
}
