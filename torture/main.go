// Command torture runs ralph's kill -9 campaign, as a user's machine would
// see it: `ralph run` is killed with SIGKILL at a random moment (at a
// uniformly random time; while an agent's own `git commit`, a gate or the
// progress summariser is running; or while one of ralph's own git commands
// runs — a `git worktree add` of a parallel story, the judge's checkout of
// the work under .ralph/judge/trees/, the recording of the work into a
// snapshot's own index, the lander's commit and its move of the branch,
// the checkout that follows a landing; a campaign's first kills go
// through every kill point once), then run again until the work is done.
// Where the killed git command works on ralph's own files (the judge's
// checkout, the snapshot's index), half the kills take it down with ralph,
// leaving what a half-done git leaves. Every trial's repository holds a
// realistic number of files (-files, 5,000 by default, generated once per
// kind and copied). Every story has a check its agent makes pass (its
// evidence), a task a test of the gate's. It does this for six kinds of
// run — a parallel PRD (a diamond DAG with random agent times), a
// parallel PRD whose lander queues stories judged on top of each other
// while some fail (killed during those speculative gates, and while a
// story whose story ahead failed is judged again), a sequential PRD, a
// task tree, a run folder with a worker/reviewer cadence (reviews and
// steering between the stories), and a coordinator with two workers on
// its embedded NATS (only the coordinator is killed; the remote's branch
// is checked too) — and checks each finished trial:
//
//	lost         an item without its work on the branch, or not passed
//	             (a cadence: a review or steering missing)
//	duplicated   an item (review, steering) committed more than once
//	corrupt      state.json, events.jsonl, prd.json or tasks.jsonl unreadable
//	branches     story, task or side branches left behind, or any other
//	             ref (refs/ralph/kept/: a kill taken for a rewrite)
//	worktrees    worktrees left behind
//	processes    agents, gates or git left running
//	locks        git lock files (a worktree's "initializing" lock too), a
//	             lock left in the judge's checkouts, a held run or task
//	             lock, a task-file copy
//	wedged       a rerun that could not finish the work
//	dirty        a cadence run's tree left with uncommitted changes
//	litter       snapshot index files (ralph-snapshot-*.index) left in .git
//	alarms       tampering reported (the agents never cheat: a kill taken
//	             for tampering)
//
// Every count must be zero; the exit status is 1 otherwise.
//
// It prints, per kind, the kills at each kill point and how many of those
// aimed at a git command landed while it ran.
//
// Usage: go run ./torture [-trials N] [-files N] [-kinds parallel,queue,sequential,tasks,cadence,coordinator] [-seed S] [-keep]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/scratch"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/tasks"
)

// counts are one kind's results; every field but trials and kills must be
// zero.
type counts struct {
	trials, kills                                                            int
	lost, duplicated, corrupt, branches, worktrees, processes, locks, wedged int
	dirty, litter, alarms                                                    int
	// points counts the kills at each kill point; inside, those aimed at
	// a git command that landed while it ran.
	points, inside map[string]int
}

func (c *counts) bad() int {
	return c.lost + c.duplicated + c.corrupt + c.branches + c.worktrees + c.processes + c.locks + c.wedged + c.dirty + c.litter + c.alarms
}

func main() {
	trials := flag.Int("trials", 100, "trials per kind")
	kindList := flag.String("kinds", "parallel,queue,sequential,tasks,cadence,coordinator", "kinds of run, comma-separated")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "random seed (printed; give it again to repeat a campaign)")
	keep := flag.Bool("keep", false, "keep every trial's repository (failed trials are always kept)")
	nfiles := flag.Int("files", 5000, "files in every trial's repository besides the run's own")
	flag.Parse()
	rng := rand.New(rand.NewPCG(*seed, 0))

	// Repositories on a tmpfs when there is one ($TORTURE_TMP chooses):
	// the campaign is about what a kill leaves, not about the disk.
	tmp, err := os.MkdirTemp(scratch.Dir("TORTURE_TMP"), "ralph-torture-")
	check(err)
	bin := filepath.Join(tmp, "bin")
	check(os.MkdirAll(bin, 0o755))
	// With the coordinator's embedded NATS server (the coordinator kind).
	out, err := exec.Command("go", "build", "-tags", "natsserver", "-o", filepath.Join(bin, "ralph"), "./cmd/ralph").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "torture: building ralph: %v\n%s", err, out)
		os.Exit(1)
	}
	realGit, err := exec.LookPath("git")
	check(err)
	check(os.WriteFile(filepath.Join(bin, "git"), []byte(strings.ReplaceAll(gitShim, "REAL_GIT", realGit)), 0o755))
	fmt.Printf("ralph kill -9 campaign: %d trials per kind, %d files per repository, seed %d, repositories under %s\n\n", *trials, *nfiles, *seed, tmp)

	failed := false
	var rows []string
	for _, name := range strings.Split(*kindList, ",") {
		k, ok := kinds[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "torture: unknown kind %q (parallel, queue, sequential, tasks, cadence, coordinator)\n", name)
			os.Exit(2)
		}
		c := &counts{}
		began := time.Now()
		template := makeTemplate(tmp, name, k, *nfiles)
		// A clean run first: its length is the window kills are drawn from.
		calib := newTrial(tmp, template, name, 0, bin, k)
		start := time.Now()
		stopWorkers := func() {}
		if k.coordinator {
			stopWorkers = calib.startWorkers()
		}
		code, _ := calib.run(rng, nil)
		stopWorkers()
		if code != 0 {
			fmt.Fprintf(os.Stderr, "torture: a %s run without kills failed (exit %d); see %s\n", name, code, calib.dir)
			os.Exit(1)
		}
		window := time.Since(start)
		if problems := calib.verify(c); len(problems) > 0 {
			fmt.Fprintf(os.Stderr, "torture: a %s run without kills left problems: %s; see %s\n", name, strings.Join(problems, "; "), calib.dir)
			os.Exit(1)
		}
		if !*keep {
			os.RemoveAll(calib.dir)
		}
		*c = counts{points: map[string]int{}, inside: map[string]int{}}
		d := newDeck(k)
		for i := 1; i <= *trials; i++ {
			t := newTrial(tmp, template, name, i, bin, k)
			t.campaign(rng, window, c, d)
			problems := t.verify(c)
			c.trials++
			if len(problems) > 0 {
				failed = true
				fmt.Printf("  %s trial %d: %s (kept in %s)\n", name, i, strings.Join(problems, "; "), t.dir)
				t.printLogs()
			} else if !*keep {
				os.RemoveAll(t.dir)
			}
		}
		rows = append(rows, fmt.Sprintf("%-11s %6d %5d %5d %10d %7d %8d %9d %9d %5d %6d %5d %6d %6d",
			name, c.trials, c.kills, c.lost, c.duplicated, c.corrupt, c.branches, c.worktrees, c.processes, c.locks, c.wedged, c.dirty, c.litter, c.alarms))
		if c.bad() > 0 {
			failed = true
		}
		fmt.Printf("%s: %d trials done in %s (run window %s); kills %s\n", name, c.trials, time.Since(began).Round(time.Second), window.Round(time.Millisecond), c.pointSummary())
		if !*keep {
			os.RemoveAll(template)
		}
	}
	fmt.Printf("\n%-11s %6s %5s %5s %10s %7s %8s %9s %9s %5s %6s %5s %6s %6s\n", "kind", "trials", "kills", "lost", "duplicated", "corrupt", "branches", "worktrees", "processes", "locks", "wedged", "dirty", "litter", "alarms")
	for _, r := range rows {
		fmt.Println(r)
	}
	if failed {
		fmt.Println("\nFAIL: a trial lost, duplicated or left something behind (see above)")
		os.Exit(1)
	}
	if !*keep {
		os.RemoveAll(tmp)
	}
	fmt.Println("\nall zero")
}

// kind is one kind of run: its files, its command line and its items.
type kind struct {
	files   map[string]string
	args    []string
	items   []string
	trailer string // the commit trailer naming an item
	branch  string // where the work lands
	prd     string // the PRD file, when not prd.json
	// cadence: the review and steering commits a finished run has,
	// each exactly once.
	reviews, steerings int
	memory             bool // progress compaction runs: check the archive
	// points are where this kind's runs are killed besides the common
	// ones (killPoints): the git commands of its own.
	points []string
	// coordinator: the run is `ralph coordinator` (args) with its
	// embedded NATS server, a bare remote and two `ralph worker`
	// processes that live through the coordinator's kills; only the
	// coordinator is killed.
	coordinator bool
}

// killPoints are where every kind's runs are killed: at a uniformly random
// time (twice as often as the rest), inside an agent's own git commit,
// inside a gate, inside the judge's checkout of the work, inside the
// recording of the work, inside the lander (its commit and its move of
// the branch).
var killPoints = []string{"uniform", "uniform", "commit", "gate", "checkout", "record", "landcommit", "landref"}

// gitPoints are the kill points aimed at ralph's own git commands (marked
// by gitShim), with how long after the command starts the kill comes at
// most: about the command's length on a repository of 5,000 files (a
// first checkout of the judge's writes every file; later ones only what
// differs; the lander's commands and the checkout that follows a landing
// are slowed by the shim to 40 ms and more). The lander's move of the
// branch is followed at once by the checkout following it (a task's
// HEAD, a parallel run's main tree): its window reaches into that too.
var gitPoints = map[string]time.Duration{
	"wtadd":      250 * time.Millisecond,
	"checkout":   60 * time.Millisecond,
	"record":     40 * time.Millisecond,
	"landcommit": 45 * time.Millisecond,
	"landref":    60 * time.Millisecond,
	"follow":     60 * time.Millisecond,
}

// withGit are the kill points where half the kills take the marked git
// command down with ralph (its process group, as a power cut or a
// container's stop would): it leaves what a half-done git leaves — a lock,
// a half-written index — in files that are ralph's alone, the judge's
// checkout and the snapshot's index. Elsewhere only ralph is killed and
// its git finishes on its own.
var withGit = map[string]bool{"checkout": true, "record": true}

// gitShim stands before git on the PATH of ralph and its agents: it marks
// the start and the end of ralph's own git commands a kill is aimed at
// (the campaign can tell whether it landed inside) and runs every other
// git command as it is:
//
//	wtadd       a parallel story's `git worktree add`
//	checkout    the judge's checkout: `read-tree --reset -u` or `clean`
//	            of a folder under .ralph/judge/trees/
//	record      the work recorded: `git add --all` into a snapshot's
//	            own index (.git/ralph-snapshot-*.index)
//	landcommit  the lander's `commit-tree` of a landing (its message
//	            names the item by a Ralph- trailer)
//	landref     the lander's `update-ref` of the target branch
//	follow      a checkout following a landing: a task's main tree
//	            moving HEAD to the base branch, a parallel run's main
//	            tree switched by `read-tree -m -u`
const gitShim = `#!/bin/sh
m= in=
case " $* " in
*" worktree add "*) m=wtadd ;;
*" read-tree --reset -u "*|*" clean -ffdxq "*)
  case "$GIT_WORK_TREE" in */.ralph/judge/trees/*) m=checkout ;; esac ;;
*" read-tree -m -u "*) m=follow ;;
*" symbolic-ref HEAD refs/heads/"*) m=follow ;;
*" add --all "*)
  case "$GIT_INDEX_FILE" in */ralph-snapshot-*.index) m=record ;; esac ;;
*" update-ref -m "*" refs/heads/"*) m=landref ;;
*" commit-tree "*" -F - "*)
  in="$TORTURE_DIR/marks/msg.$$"
  cat > "$in"
  if grep -q '^Ralph-' "$in"; then m=landcommit; fi ;;
esac
if [ -z "$m" ]; then
  [ -n "$in" ] || exec REAL_GIT "$@"
  REAL_GIT "$@" < "$in"
  rc=$?
  rm -f "$in"
  exit $rc
fi
touch "$TORTURE_DIR/marks/$m.$$"
# The lander's commands and a task's move of HEAD take a few
# milliseconds: here they take longer (as on a loaded machine), so that a
# kill aimed at one lands while ralph waits on it, before or after git
# did its part.
case $m in landref|landcommit|follow) sleep 0.02 ;; esac
if [ -n "$in" ]; then REAL_GIT "$@" < "$in"; else REAL_GIT "$@"; fi
rc=$?
case $m in landref|landcommit|follow) sleep 0.02 ;; esac
[ -z "$in" ] || rm -f "$in"
touch "$TORTURE_DIR/marks/$m-done.$$"
exit $rc
`

// The agent works for a random time, writes its item's file, and half the
// time commits it itself through a slow editor (a kill can land inside
// that git commit); in a task run it completes its task. Marks tell the
// campaign where the agent and the gates are.
// A cadence's review writes review.md (odd reviews ask for steering); a
// steering iteration leaves the stories as they are.
const agentScript = `cat > /dev/null
r=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
sleep "0.$(( r % 30 ))"
case "$RALPH_ITEM_ID" in
review-*)
  f="$TORTURE_RUN/review.md"
  n=${RALPH_ITEM_ID#review-}
  v=no; if [ $(( n % 2 )) -eq 1 ]; then v=yes; fi
  printf '# Review %s\n\nSTEERING_NEEDED: %s\n' "$n" "$v" > "$f" ;;
steering-*) f="" ;;
*) f="work-$RALPH_ITEM_ID.txt"; echo "$RALPH_ITEM_ID" > "$f"
  # The queue kind: a story's first try is wrong one time in three —
  # wrong (its gates fail, and so do those of the stories judged on top
  # of it), or a draft (only its own check fails: the stories judged on
  # top of it pass, and are judged again once it left the queue).
  if [ -n "$TORTURE_BAD" ] && [ $(( r % 3 )) -eq 0 ] && [ ! -e "$TORTURE_DIR/bad-$RALPH_ITEM_ID" ]; then
    touch "$TORTURE_DIR/bad-$RALPH_ITEM_ID"
    if [ $(( (r / 3) % 2 )) -eq 0 ]; then echo "wrong" > "$f"; else echo "$RALPH_ITEM_ID draft" > "$f"; fi
  fi ;;
esac
if [ -n "$f" ] && [ $(( r % 2 )) -eq 0 ]; then
  git add "$f"
  GIT_EDITOR="sh $TORTURE_DIR/editor.sh" git -c user.name=agent -c user.email=agent@example.com commit -q
fi
if [ -n "$RALPH_TASK_RUN" ]; then ralph task complete "$RALPH_ITEM_ID" > /dev/null; fi
echo "done"
echo '<promise>COMPLETE</promise>'
`

// Marks made in the sandbox (the agent's, the gates', the summariser's)
// are named by mktemp: the sandbox's own pid namespace gives its
// processes small pids that repeat.

// The summariser takes a moment (a kill can land inside it) and keeps
// every story id it is shown.
const summarizeScript = `mktemp "$TORTURE_DIR/marks/summary.XXXXXX" > /dev/null
sleep 0.05
echo "Stories so far: $(grep -o 'S-[0-9]*' | sort -u | tr '\n' ' ')"
`

const editorScript = `mktemp "$TORTURE_DIR/marks/commit.XXXXXX" > /dev/null
sleep 0.1
echo "agent's own commit" > "$1"
`

// The gate checks every work file starts with its item's id (a story's
// own check wants exactly the id), slowly enough to be killed inside. Its mark lists the work files of the tree it judges (the
// campaign tells a speculative tree by them: stories in it that are not
// on the branch yet).
const gateScript = `m=$(mktemp "$TORTURE_DIR/marks/.gate.XXXXXX")
ls work-*.txt > "$m" 2>/dev/null
mv "$m" "$TORTURE_DIR/marks/gate.${m##*.}"
sleep "${TORTURE_GATE_TIME:-0.05}"
for f in work-*.txt; do
  [ -e "$f" ] || continue
  id=${f#work-}; id=${id%.txt}
  case "$(cat "$f")" in "$id"*) ;; *) exit 1 ;; esac
done
`

// The task tree's gate reports a test per task, as go test does: each
// fails at the base and passes once its task's work is there (a task's
// evidence), and the gate is red until every task is done.
const taskGateScript = `m=$(mktemp "$TORTURE_DIR/marks/.gate.XXXXXX")
ls work-*.txt > "$m" 2>/dev/null
mv "$m" "$TORTURE_DIR/marks/gate.${m##*.}"
sleep 0.05
rc=0
for id in A.1 A.2 B.1 C D; do
  t=TestWork$(echo "$id" | tr -d .)
  echo "=== RUN   $t"
  if [ "$(cat "work-$id.txt" 2>/dev/null)" = "$id" ]; then
    echo "--- PASS: $t (0.00s)"
  else
    echo "--- FAIL: $t (0.00s)"; rc=1
  fi
done
if [ $rc -eq 0 ]; then printf 'ok  \ttorture\t0.01s\n'; else printf 'FAIL\ttorture\t0.01s\n'; fi
exit $rc
`

// taskTests declares the tests the task gate reports, so the judge finds
// them in the tree it judged (a test reported that the tree does not
// declare fails a claim).
const taskTests = `package torture

import "testing"

func TestWorkA1(t *testing.T) {}
func TestWorkA2(t *testing.T) {}
func TestWorkB1(t *testing.T) {}
func TestWorkC(t *testing.T)  {}
func TestWorkD(t *testing.T)  {}
`

func storiesJSON(branch string, deps map[string][]string, ids []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"project": "torture", "branch_name": %q, "user_stories": [`, branch)
	for i, id := range ids {
		if i > 0 {
			b.WriteString(",")
		}
		d, _ := json.Marshal(deps[id])
		if deps[id] == nil {
			d = []byte("[]")
		}
		// The story's evidence: a check that fails at the base and passes
		// once its agent wrote its file.
		check, _ := json.Marshal([]string{fmt.Sprintf(`test "$(cat work-%s.txt)" = %s`, id, id)})
		fmt.Fprintf(&b, "\n  {\"id\": %q, \"title\": \"story %s\", \"priority\": %d, \"depends_on\": %s, \"checks\": %s}", id, id, i+1, d, check)
	}
	b.WriteString("\n], \"quality_checks\": {\"test\": \"sh gate.sh\"}}\n")
	return b.String()
}

var kinds = map[string]kind{
	"parallel": func() kind {
		ids := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
		deps := map[string][]string{"B": {"A"}, "C": {"A"}, "D": {"A"}, "E": {"B", "C"}, "F": {"C", "D"}, "G": {"E", "F"}}
		return kind{
			files: map[string]string{"prd.json": storiesJSON("ralph/torture", deps, ids)},
			args:  []string{"run", "--prd", "prd.json", "--parallel", "3", "--max-attempts", "5"},
			items: ids, trailer: "Ralph-Story", branch: "ralph/torture",
			points: []string{"wtadd", "wtadd", "follow"},
		}
	}(),
	// The lander's queue: four stories judged at once, each on top of the
	// ones ahead of it, some of them wrong on their first try; killed
	// while gates run on a speculative tree (built on stories queued
	// ahead, not on the branch), and while a story whose story ahead
	// failed is judged again on the new end.
	"queue": func() kind {
		ids := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
		deps := map[string][]string{"B": {"A"}, "C": {"A"}, "D": {"A"}, "E": {"A"}, "F": {"B", "C"}, "G": {"D", "E"}, "H": {"F", "G"}}
		return kind{
			files: map[string]string{"prd.json": storiesJSON("ralph/torture", deps, ids)},
			args:  []string{"run", "--prd", "prd.json", "--parallel", "4", "--max-attempts", "5"},
			items: ids, trailer: "Ralph-Story", branch: "ralph/torture",
			points: []string{"specgate", "specgate", "rejudge", "follow"},
		}
	}(),
	"sequential": func() kind {
		ids := []string{"S-1", "S-2", "S-3", "S-4", "S-5"}
		return kind{
			files: map[string]string{"prd.json": storiesJSON("ralph/torture", nil, ids)},
			// A small progress budget: the summariser folds entries every
			// few iterations, so kills land in compactions too.
			args: []string{"run", "--prd", "prd.json", "--max-attempts", "5",
				"--progress-budget", "100", "--summarizer", "cmd", "--summarizer-cmd", "sh {dir}/summarize.sh"},
			items: ids, trailer: "Ralph-Story", branch: "ralph/torture", memory: true,
		}
	}(),
	// W1R1: S-1, review-1 (yes), steering-1, S-2, review-2, S-3, review-3
	// (yes), steering-2, S-4, the final review-4.
	"cadence": func() kind {
		ids := []string{"S-1", "S-2", "S-3", "S-4"}
		run := "ralph/runs/20260101-torture/"
		return kind{
			files: map[string]string{
				run + "prd.json":           storiesJSON("ralph/torture", nil, ids),
				run + "orchestration.json": `{"scheme": "W1R1"}`,
				run + "PRD.md":             "# Torture\n",
				run + "progress.md":        "# Progress\n",
				run + "PROMPT.md":          "Work on {{.ItemID}}: {{.Title}}.\n",
			},
			args:  []string{"run", run, "--no-lint", "--max-attempts", "5", "--max-iterations", "40"},
			items: ids, trailer: "Ralph-Story", branch: "ralph/torture", prd: run + "prd.json",
			reviews: 4, steerings: 2,
		}
	}(),
	// Many machines: the coordinator killed (in its judge and its
	// lander, at random) and started again while its workers go on;
	// every story on the remote's feature branch once.
	"coordinator": func() kind {
		ids := []string{"A", "B", "C", "D", "E", "F"}
		deps := map[string][]string{"B": {"A"}, "C": {"A"}, "D": {"A"}, "E": {"B", "C"}, "F": {"D", "E"}}
		return kind{
			files: map[string]string{"prd.json": storiesJSON("ralph/torture", deps, ids)},
			// A short lease: the restarted coordinator takes the run over
			// once the killed one's lease has lapsed.
			args:  []string{"coordinator", "--prd", "prd.json", "--max-attempts", "5", "--lease", "1s", "--iteration-timeout", "2m"},
			items: ids, trailer: "Ralph-Story", branch: "ralph/torture",
			points: []string{"landref", "landcommit", "follow"}, coordinator: true,
		}
	}(),
	"tasks": {
		files: map[string]string{"taskgate.sh": taskGateScript, "go.mod": "module torture\n\ngo 1.21\n", "work_test.go": taskTests, "tasks.jsonl": `{"id":"A","title":"group a","status":"pending","leaf":false}
{"id":"A.1","title":"first of a","status":"pending","leaf":true}
{"id":"A.2","title":"second of a","status":"pending","leaf":true}
{"id":"B","title":"group b","status":"pending","leaf":false}
{"id":"B.1","title":"only of b","status":"pending","leaf":true}
{"id":"C","title":"alone","status":"pending","leaf":true}
{"id":"D","title":"last","status":"pending","leaf":true}
`},
		args:  []string{"run", "--tasks", "tasks.jsonl", "--gate", "check=sh taskgate.sh", "--max-attempts", "5"},
		items: []string{"A.1", "A.2", "B.1", "C", "D"}, trailer: "Ralph-Task", branch: "main",
		points: []string{"follow", "follow"},
	},
}

// trial is one repository and its run's history.
type trial struct {
	name, dir, bin, id string
	k                  kind
	env                []string
	natsAddr           string // a coordinator's NATS server
}

// makeTemplate writes kind's repository once — its files and nfiles
// generated ones in folders of a thousand, committed on main — for every
// trial to copy.
func makeTemplate(tmp, name string, k kind, nfiles int) string {
	dir := filepath.Join(tmp, "template-"+name)
	files := map[string]string{"agent.sh": agentScript, "gate.sh": gateScript}
	for f, s := range k.files {
		files[f] = s
	}
	for f, s := range files {
		check(os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		check(os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644))
	}
	for i := 0; i < nfiles; i++ {
		folder := filepath.Join(dir, "src", fmt.Sprintf("part%d", i/1000))
		if i%1000 == 0 {
			check(os.MkdirAll(folder, 0o755))
		}
		check(os.WriteFile(filepath.Join(folder, fmt.Sprintf("file%04d.txt", i%1000)), []byte(fmt.Sprintf("generated file %d\n", i)), 0o644))
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=torture", "GIT_AUTHOR_EMAIL=torture@example.com",
			"GIT_COMMITTER_NAME=torture", "GIT_COMMITTER_EMAIL=torture@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			check(fmt.Errorf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, out))
		}
	}
	return dir
}

func newTrial(tmp, template, name string, n int, bin string, k kind) *trial {
	t := &trial{name: name, dir: filepath.Join(tmp, fmt.Sprintf("%s-%03d", name, n)), bin: bin, k: k,
		id: fmt.Sprintf("%s-%d-%d", name, n, time.Now().UnixNano())}
	repo := filepath.Join(t.dir, "repo")
	check(os.MkdirAll(filepath.Join(t.dir, "marks"), 0o755))
	if out, err := exec.Command("cp", "-a", template, repo).CombinedOutput(); err != nil {
		check(fmt.Errorf("copying %s: %v: %s", template, err, out))
	}
	check(os.WriteFile(filepath.Join(t.dir, "editor.sh"), []byte(editorScript), 0o644))
	// The summariser runs outside the repository: its script is found by
	// an absolute path ({dir} in the arguments).
	check(os.WriteFile(filepath.Join(t.dir, "summarize.sh"), []byte(summarizeScript), 0o644))
	// Agents, gates and the summariser run in ralph's sandbox, as on a
	// user's machine: the user's config lets them write the trial's marks
	// and see the campaign's TORTURE_ variables (without it no mark is
	// written, no kill is aimed at them, and a review has nowhere to go).
	xdg := filepath.Join(t.dir, "xdg")
	check(os.MkdirAll(filepath.Join(xdg, "ralph"), 0o755))
	check(os.WriteFile(filepath.Join(xdg, "ralph", "config.yaml"), []byte("sandbox:\n  writable: ["+strconv.Quote(t.dir)+"]\n  env: [\"TORTURE_*\"]\n"), 0o644))
	t.env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TORTURE_DIR="+t.dir, "TORTURE_TRIAL="+t.id, "XDG_CONFIG_HOME="+xdg,
		"GIT_AUTHOR_NAME=torture", "GIT_AUTHOR_EMAIL=torture@example.com",
		"GIT_COMMITTER_NAME=torture", "GIT_COMMITTER_EMAIL=torture@example.com")
	if name == "tasks" {
		t.env = append(t.env, "RALPH_TASK_RUN=1")
	}
	if name == "queue" {
		// Gates slow enough that stories finishing together queue up to
		// land, each judged on top of the ones ahead.
		t.env = append(t.env, "TORTURE_BAD=1", "TORTURE_GATE_TIME=0.4")
	}
	if k.prd != "" {
		t.env = append(t.env, "TORTURE_RUN="+filepath.Join(repo, filepath.Dir(k.prd)))
	}
	if k.coordinator {
		t.env = append(t.env, "RALPH_NATS_TOKEN=torture-"+t.id)
		remote := t.remote()
		if out, err := exec.Command("git", "init", "-q", "--bare", remote).CombinedOutput(); err != nil {
			check(fmt.Errorf("git init %s: %v: %s", remote, err, out))
		}
		t.git("push", "-q", remote, "main")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		t.natsAddr = l.Addr().String()
		l.Close()
	}
	return t
}

// printLogs prints the ends of a failed trial's logs: where the campaign
// runs on a machine that is gone afterwards (CI), the kept folder is not
// there to read.
func (t *trial) printLogs() {
	logs, _ := filepath.Glob(filepath.Join(t.dir, "*.log"))
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		text, dump, hung := strings.Cut(string(b), hungMarker)
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Printf("    --- the last %d lines of %s\n", len(lines), filepath.Base(name))
		for _, l := range lines {
			fmt.Printf("    | %s\n", l)
		}
		if hung {
			// The goroutines, by ralph's own frames only.
			fmt.Printf("    --- where it hung (goroutines, ralph's frames)\n")
			n := 0
			for _, l := range strings.Split(dump, "\n") {
				if (strings.HasPrefix(l, "goroutine ") || strings.Contains(l, "ralph-loop/ralph/") && !strings.HasPrefix(l, "\t")) && n < 400 {
					fmt.Printf("    | %s\n", l)
					n++
				}
			}
		}
	}
}

// hungMarker is written to a run's log before the run that ran too long
// is made to dump its goroutines.
const hungMarker = "=== ralph ran too long: its goroutines follow (SIGQUIT)"

func (t *trial) remote() string { return filepath.Join(t.dir, "remote.git") }

// startWorkers starts the two workers of a coordinator trial; stop ends
// them (a worker's guard ends its agents with it) before the trial is
// checked.
func (t *trial) startWorkers() (stop func()) {
	var cmds []*exec.Cmd
	for i := 1; i <= 2; i++ {
		dir := filepath.Join(t.dir, fmt.Sprintf("worker%d", i))
		check(os.MkdirAll(dir, 0o755))
		log, err := os.OpenFile(filepath.Join(t.dir, fmt.Sprintf("worker%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		check(err)
		cmd := exec.Command(filepath.Join(t.bin, "ralph"), "worker", "--nats", "nats://"+t.natsAddr, "--dir", "w", "--parallel", "2")
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, t.env, log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		check(cmd.Start())
		log.Close()
		cmds = append(cmds, cmd)
	}
	return func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, cmd := range cmds {
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
	}
}

func (t *trial) repo() string { return filepath.Join(t.dir, "repo") }

func (t *trial) git(args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = t.repo(), t.env
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		panic(fmt.Sprintf("git %s in %s: %v", strings.Join(args, " "), t.repo(), err))
	}
	return string(out)
}

// kill says when to kill a run; nil runs it to its end.
type kill struct {
	point string        // the kill point (killPoints, kind.points)
	after time.Duration // uniform: SIGKILL this long after the start
	mark  string        // or: at the next mark of this name, plus a little
	extra time.Duration
	// speculative: only a gate mark whose tree holds the work of two
	// stories or more that are not on the branch yet counts.
	speculative bool
	// event: only a mark made after the run logged an event of this
	// type counts.
	event string
	// git: the marked git command is killed too (its process group).
	git bool
	// inside is set when the kill came while the marked git command ran.
	inside bool
}

// allPoints are the kind's kill points: its own first, then the common
// ones (a point listed twice is drawn twice as often).
func (k kind) allPoints() []string {
	points := append(append([]string{}, k.points...), killPoints...)
	if k.memory {
		points = append(points, "summary")
	}
	return points
}

// deck is the order a campaign's first kills take: every kill point of
// the kind once, its own first, so that even a short campaign kills at
// each; later kills are drawn at random.
type deck []string

func newDeck(k kind) *deck {
	var d deck
	for _, p := range k.allPoints() {
		if !slices.Contains(d, p) {
			d = append(d, p)
		}
	}
	return &d
}

func (d *deck) draw(rng *rand.Rand, k kind) string {
	if len(*d) > 0 {
		p := (*d)[0]
		*d = (*d)[1:]
		return p
	}
	points := k.allPoints()
	return points[rng.IntN(len(points))]
}

// newKill makes a kill at point.
func newKill(rng *rand.Rand, point string, window time.Duration) *kill {
	k := &kill{point: point}
	switch k.point {
	case "commit":
		k.mark, k.extra = "commit", time.Duration(rng.IntN(100))*time.Millisecond
	case "gate":
		k.mark, k.extra = "gate", time.Duration(rng.IntN(50))*time.Millisecond
	case "specgate":
		k.mark, k.extra, k.speculative = "gate", time.Duration(rng.IntN(50))*time.Millisecond, true
	case "rejudge":
		// The gates of a story judged again because what it was judged
		// on did not land as judged.
		k.mark, k.extra, k.event = "gate", time.Duration(rng.IntN(50))*time.Millisecond, "merge_stale"
	case "summary":
		// Inside the summariser, or just after it: the archive and the
		// rewrite.
		k.mark, k.extra = "summary", time.Duration(40+rng.IntN(30))*time.Millisecond
	case "uniform":
		k.after = time.Duration(rng.Int64N(int64(window)))
	default:
		k.mark, k.extra = k.point, time.Duration(rng.Int64N(int64(gitPoints[k.point])))
		k.git = withGit[k.point] && rng.IntN(2) == 0
	}
	return k
}

// run starts ralph once and waits for it (killing it as k says); it
// returns the exit code (-1 when killed) and whether it had to be killed
// because it ran too long.
func (t *trial) run(rng *rand.Rand, k *kill) (code int, hung bool) {
	log, err := os.OpenFile(filepath.Join(t.dir, "ralph.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	check(err)
	defer log.Close()
	var args []string
	for _, a := range t.k.args {
		args = append(args, strings.ReplaceAll(a, "{dir}", t.dir))
	}
	args = append(args, "--agent", "cmd", "--agent-cmd", "sh agent.sh")
	if t.k.coordinator {
		args = append(args, "--remote", t.remote(), "--listen", t.natsAddr)
	}
	fmt.Fprintf(log, "\n=== ralph %s (kill %+v)\n", strings.Join(args, " "), k)
	cmd := exec.Command(filepath.Join(t.bin, "ralph"), args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = t.repo(), t.env, log, log
	before := marks(t.dir)
	eventsAt := fileSize(engine.PathsFor(t.repo()).Events)
	check(cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	limit := time.After(3 * time.Minute)
	var fire <-chan time.Time
	var poll <-chan time.Time
	if k != nil {
		if k.mark == "" {
			fire = time.After(k.after)
		} else {
			ticker := time.NewTicker(2 * time.Millisecond)
			defer ticker.Stop()
			poll = ticker.C
		}
	}
	for {
		select {
		case err := <-done:
			return exitCode(err), false
		case <-fire:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			fire = nil
			if _, aimed := gitPoints[k.mark]; aimed {
				pids := running(t.dir, before, k.mark)
				k.inside = len(pids) > 0
				if k.git {
					for _, pid := range pids {
						_ = syscall.Kill(-pid, syscall.SIGKILL)
					}
				}
			}
		case <-poll:
			if k.event != "" && !t.logged(eventsAt, k.event) {
				continue
			}
			if t.newMark(before, k) {
				poll = nil
				fire = time.After(k.extra)
			}
		case <-limit:
			// A Go program dumps its goroutines on SIGQUIT: the dump, in
			// the log, says where the run hung.
			fmt.Fprintf(log, "\n%s\n", hungMarker)
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
			}
			return -1, true
		}
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
		return ee.ExitCode()
	}
	return -2
}

func marks(dir string) map[string]bool {
	m := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(dir, "marks"))
	for _, e := range entries {
		m[e.Name()] = true
	}
	return m
}

// newMark reports whether a mark k aims at (by gitShim or a script) has
// been made since before: for a speculative kill, a gate's on a tree
// holding the work of two stories or more that are not on the branch.
func (t *trial) newMark(before map[string]bool, k *kill) bool {
	entries, _ := os.ReadDir(filepath.Join(t.dir, "marks"))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), k.mark+".") || before[e.Name()] {
			continue
		}
		if !k.speculative {
			return true
		}
		before[e.Name()] = true // looked at once
		b, _ := os.ReadFile(filepath.Join(t.dir, "marks", e.Name()))
		onBranch, _ := gitOut(t.repo(), t.env, "ls-tree", "--name-only", t.k.branch)
		ahead := 0
		for _, f := range strings.Fields(string(b)) {
			if !slices.Contains(strings.Fields(onBranch), f) {
				ahead++
			}
		}
		if ahead >= 2 {
			return true
		}
	}
	return false
}

// logged reports whether the run's events.jsonl holds an event of type
// typ past offset from (where it ended when the run started).
func (t *trial) logged(from int64, typ string) bool {
	f, err := os.Open(engine.PathsFor(t.repo()).Events)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		return false
	}
	b, _ := io.ReadAll(f)
	return bytes.Contains(b, []byte(`"type":"`+typ+`"`))
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// running lists the git commands marked name (by gitShim) since before
// that have started and not ended (the shim's pid, its process group).
func running(dir string, before map[string]bool, name string) []int {
	now := marks(dir)
	var pids []int
	for m := range now {
		if pid, ok := strings.CutPrefix(m, name+"."); ok && !before[m] && !now[name+"-done."+pid] {
			if n, err := strconv.Atoi(pid); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// pointSummary lists the kills at each kill point, and for those aimed at
// a git command how many landed while it ran.
func (c *counts) pointSummary() string {
	var names []string
	for p := range c.points {
		names = append(names, p)
	}
	sort.Strings(names)
	var parts []string
	for _, p := range names {
		part := fmt.Sprintf("%s %d", p, c.points[p])
		if _, aimed := gitPoints[p]; aimed {
			part += fmt.Sprintf(" (%d inside)", c.inside[p])
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// campaign kills the run once or twice at random moments, then reruns it
// until it finishes: a rerun that stops short three times is wedged.
func (t *trial) campaign(rng *rand.Rand, window time.Duration, c *counts, d *deck) {
	if t.k.coordinator {
		defer t.startWorkers()()
	}
	for n := 1 + rng.IntN(2); n > 0; n-- {
		k := newKill(rng, d.draw(rng, t.k), window)
		code, hung := t.run(rng, k)
		if hung {
			c.wedged++
			return
		}
		if code == -1 {
			c.kills++
			c.points[k.point]++
			if k.inside {
				c.inside[k.point]++
			}
		}
		if code == 0 {
			break // it finished before the kill
		}
	}
	for i := 0; i < 3; i++ {
		code, hung := t.run(rng, nil)
		if code == 0 {
			return
		}
		if hung {
			break
		}
	}
	c.wedged++
}

// verify checks a finished trial; it adds to c and returns what it found.
func (t *trial) verify(c *counts) (problems []string) {
	add := func(n *int, format string, args ...any) {
		*n++
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	repo := t.repo()
	p := engine.PathsFor(repo)

	// Corrupt files.
	st, err := engine.LoadState(p.State)
	if err != nil || st == nil {
		add(&c.corrupt, "state.json: %v", err)
	}
	if err := store.ReadJSONL(p.Events, func(int, []byte) error { return nil }); err != nil {
		add(&c.corrupt, "events.jsonl: %v", err)
	} else if b, _ := os.ReadFile(p.Events); len(b) > 0 && b[len(b)-1] != '\n' {
		add(&c.corrupt, "events.jsonl ends in a torn line")
	}
	passed := map[string]bool{}
	switch t.name {
	case "tasks":
		set, err := tasks.Open(filepath.Join(repo, "tasks.jsonl")).Load()
		if err != nil {
			add(&c.corrupt, "tasks.jsonl: %v", err)
		} else {
			for _, id := range t.k.items {
				if tk, ok := set.Get(id); ok && tk.Status == tasks.StatusComplete {
					passed[id] = true
				}
			}
		}
	default:
		file := "prd.json"
		if t.k.prd != "" {
			file = t.k.prd
		}
		doc, err := prd.Load(filepath.Join(repo, file))
		if err != nil {
			add(&c.corrupt, "prd.json: %v", err)
		} else {
			for _, s := range doc.Stories {
				passed[s.ID] = s.Passes
			}
		}
	}

	// Lost and duplicated items: every item passed, its work on the
	// branch, committed once.
	commits := t.trailerCounts(t.k.trailer)
	for _, id := range t.k.items {
		work, err := gitShow(repo, t.env, t.k.branch+":work-"+id+".txt")
		switch {
		case err != nil || strings.TrimSpace(work) != id:
			add(&c.lost, "%s: its work is not on %s", id, t.k.branch)
		case !passed[id]:
			add(&c.lost, "%s: not marked passed", id)
		case st != nil && (st.Items[id] == nil || st.Items[id].Status != engine.ItemPassed):
			add(&c.lost, "%s: not passed in the run's state", id)
		}
		if commits[id] > 1 {
			add(&c.duplicated, "%s: committed %d times", id, commits[id])
		} else if commits[id] == 0 {
			add(&c.lost, "%s: no commit names it", id)
		}
	}

	// Many machines: the remote's feature branch is the one the work is
	// on (what a coordinator in a fresh clone would resume from), and
	// no job's ref is left on the remote.
	if t.k.coordinator {
		remoteTip, lerr := gitOut(t.remote(), t.env, "rev-parse", t.k.branch)
		localTip, _ := gitOut(repo, t.env, "rev-parse", t.k.branch)
		if lerr != nil || remoteTip != localTip {
			add(&c.lost, "the remote's %s is not the branch the work is on", t.k.branch)
		}
		refs, _ := gitOut(t.remote(), t.env, "for-each-ref", "--format=%(refname)")
		for _, r := range strings.Fields(refs) {
			if r != "refs/heads/main" && r != "refs/heads/"+t.k.branch {
				add(&c.branches, "ref %s left on the remote", r)
			}
		}
	}

	// A cadence: each review and steering committed once, the loop
	// state counting them, the tree clean.
	if t.k.reviews > 0 {
		for _, c2 := range []struct {
			trailer, prefix string
			want            int
		}{{"Ralph-Review", "review-", t.k.reviews}, {"Ralph-Steering", "steering-", t.k.steerings}} {
			got := t.trailerCounts(c2.trailer)
			for n := 1; n <= c2.want; n++ {
				id := fmt.Sprintf("%s%d", c2.prefix, n)
				if got[id] > 1 {
					add(&c.duplicated, "%s: committed %d times", id, got[id])
				} else if got[id] == 0 {
					add(&c.lost, "%s: no commit names it", id)
				}
				delete(got, id)
			}
			for id := range got {
				add(&c.duplicated, "%s: committed, but the run has no such item", id)
			}
		}
		var ls struct{ Reviews, Steerings int }
		if b, err := os.ReadFile(filepath.Join(repo, filepath.Dir(t.k.prd), "loop_state.json")); err != nil || json.Unmarshal(b, &ls) != nil {
			add(&c.corrupt, "loop_state.json unreadable: %v", err)
		} else if ls.Reviews != t.k.reviews || ls.Steerings != t.k.steerings {
			add(&c.lost, "loop_state.json counts %d reviews and %d steerings, want %d and %d", ls.Reviews, ls.Steerings, t.k.reviews, t.k.steerings)
		}
		if s := strings.TrimSpace(t.git("status", "--porcelain")); s != "" {
			add(&c.dirty, "tree left dirty: %s", strings.ReplaceAll(s, "\n", "; "))
		}
	}

	// Progress memory: the patterns section whole, each archived chunk
	// once (a compaction a kill repeated must not archive it again).
	if t.k.memory {
		b, _ := os.ReadFile(p.Progress)
		if bytes.HasPrefix(b, []byte("## Codebase patterns\n")) && !bytes.Contains(b, []byte("<!-- ralph: end of the codebase patterns")) {
			add(&c.corrupt, "progress.md: a patterns section without its end")
		}
		a, _ := os.ReadFile(filepath.Join(p.Dir, "progress-archive.md"))
		seen := map[string]bool{}
		for _, line := range strings.Split(string(a), "\n") {
			if strings.HasPrefix(line, "<!-- ralph: archived ") {
				if seen[line] {
					add(&c.duplicated, "progress-archive.md: %s twice", line)
				}
				seen[line] = true
			}
		}
	}

	// Leftovers: branches, and any other ref (a version of the branch
	// kept under refs/ralph/kept/ means ralph took a kill for a rewrite).
	for _, r := range strings.Fields(t.git("for-each-ref", "--format=%(refname)")) {
		switch b, isBranch := strings.CutPrefix(r, "refs/heads/"); {
		case b == "main" || b == t.k.branch:
		case isBranch:
			add(&c.branches, "branch %s left", b)
		default:
			add(&c.branches, "ref %s left", r)
		}
	}
	// The agents never cheat: whatever ralph reports as tampering is a
	// kill taken for it.
	_ = store.ReadJSONL(p.Events, func(_ int, line []byte) error {
		var ev struct{ Type, Item, Message string }
		if json.Unmarshal(line, &ev) == nil && ev.Type == "tamper_detected" {
			add(&c.alarms, "tampering reported (%s): %s", ev.Item, ev.Message)
		}
		return nil
	})
	if n := strings.Count(t.git("worktree", "list", "--porcelain"), "worktree "); n != 1 {
		add(&c.worktrees, "%d worktrees besides the main one", n-1)
	}
	if entries, _ := os.ReadDir(filepath.Join(p.Dir, "worktrees")); len(entries) > 0 {
		add(&c.worktrees, "%d folders in .ralph/worktrees", len(entries))
	}
	if left := processesOf(t.id); len(left) > 0 {
		add(&c.processes, "processes left running: %s", strings.Join(left, ", "))
	}
	_ = filepath.WalkDir(filepath.Join(repo, ".git"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".lock") {
			add(&c.locks, "git lock %s left", strings.TrimPrefix(path, repo+"/"))
		}
		return nil
	})
	// The judge's checkouts are ralph's alone: a git killed in one leaves
	// its index's lock, which the next judging must have cleared.
	_ = filepath.WalkDir(filepath.Join(p.Dir, "judge"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == filepath.Join(p.Dir, "judge", "trees") {
			// The checkouts' files are the work's, not the judge's.
			entries, _ := os.ReadDir(path)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".lock") {
					add(&c.locks, "the judge's lock %s left", filepath.Join(".ralph/judge/trees", e.Name()))
				}
			}
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".lock") {
			add(&c.locks, "lock %s left", strings.TrimPrefix(path, repo+"/"))
		}
		return nil
	})
	// A snapshot's index (the work recorded) is ralph's temporary file in
	// .git: a killed run's must not pile up.
	if left, _ := filepath.Glob(filepath.Join(repo, ".git", "ralph-snapshot-*")); len(left) > 0 {
		add(&c.litter, "%d snapshot index files left in .git", len(left))
	}
	if left, _ := filepath.Glob(filepath.Join(repo, ".git", "worktrees", "*", "ralph-snapshot-*")); len(left) > 0 {
		add(&c.litter, "%d snapshot index files left in .git/worktrees", len(left))
	}
	// A worktree add killed mid-checkout leaves its tree locked: a rerun
	// must have repaired it.
	if held, _ := filepath.Glob(filepath.Join(repo, ".git", "worktrees", "*", "locked")); len(held) > 0 {
		add(&c.locks, "worktree locks left: %s", strings.Join(held, ", "))
	}
	for _, lock := range []string{p.Lock, filepath.Join(repo, "tasks.jsonl.lock")} {
		if held, _ := store.Held(lock); held {
			add(&c.locks, "%s still held", filepath.Base(lock))
		}
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "tasks-aside.json")); err == nil {
		add(&c.locks, "the task files' copy (.ralph/tasks-aside.json) left")
	}
	return problems
}

// trailerCounts counts the commits on the branch naming each id in key.
func (t *trial) trailerCounts(key string) map[string]int {
	commits := map[string]int{}
	for _, line := range strings.Split(t.git("log", "--format=%(trailers:key="+key+",valueonly,separator=%x2C)", t.k.branch), "\n") {
		for _, id := range strings.Split(strings.TrimSpace(line), ",") {
			if id = strings.TrimSpace(id); id != "" {
				commits[id]++
			}
		}
	}
	return commits
}

func gitShow(dir string, env []string, rev string) (string, error) {
	return gitOut(dir, env, "show", rev)
}

// gitOut is git's output in dir, trimmed of its last newline.
func gitOut(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	return strings.TrimSuffix(string(out), "\n"), err
}

// processesOf lists live processes (not zombies) carrying the trial's
// mark in their environment, after a short grace for ones exiting.
func processesOf(id string) []string {
	want := []byte("TORTURE_TRIAL=" + id + "\x00")
	var left []string
	for wait := 0; wait < 20; wait++ {
		left = left[:0]
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil || !bytes.Contains(append(env, 0), want) || zombie(pid) {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			left = append(left, fmt.Sprintf("%d %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	sort.Strings(left)
	return left
}

func zombie(pid int) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "State:"); ok {
			return strings.Contains(s, "Z")
		}
	}
	return false
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture:", err)
		os.Exit(1)
	}
}
