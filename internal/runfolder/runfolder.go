// Package runfolder is the per-run folders: ralph/runs/<run_id>/
// with PRD.md, prd.json, PROMPT.md and progress.md, made by `ralph runs
// new`, listed by `ralph runs list` and checked against the
// "Ralph-ready" rules by `ralph runs lint` (and by `ralph run RUN_DIR`
// before it starts).
package runfolder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
)

// Parent is where run folders live, relative to the repository's top.
const Parent = "ralph/runs"

// The files of a run folder.
const (
	PRDMarkdown = "PRD.md"
	PRDJSON     = "prd.json"
	Prompt      = "PROMPT.md"
	Progress    = "progress.md"
	Transcripts = "transcripts"
	Summary     = "SUMMARY.md"
)

// New makes ralph/runs/<run_id>/ under root for a run called name: the
// run id is the date and the name's slug (a number added when taken). prdMD
// is the prose PRD to start from ("" writes an outline to fill in). It
// returns the folder. Every file is written before the folder gets its
// name (a rename), so a crash never leaves half a run folder.
func New(root, name, prdMD string, now time.Time) (string, error) {
	if strings.TrimSpace(name) == "" {
		return "", errors.New("a run needs a name")
	}
	slug := prd.Slug(name)
	parent := filepath.Join(root, Parent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	id := now.UTC().Format("20060102") + "-" + slug
	for n := 2; exists(filepath.Join(parent, id)); n++ {
		id = fmt.Sprintf("%s-%s-%d", now.UTC().Format("20060102"), slug, n)
	}
	dir := filepath.Join(parent, id)
	tmp, err := os.MkdirTemp(parent, "."+id+".tmp")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if prdMD == "" {
		prdMD = "# " + name + "\n\n## Goal\n\nWhat this run should achieve, for whom.\n\n## Requirements\n\n- One observable behaviour per line, each one testable.\n\n## Out of scope\n\n- \n"
	}
	doc := prd.Template(filepath.Base(root), name)
	doc.BranchName = "ralph/" + slug
	// The project's own gates (what `ralph init` finds): a story passes on
	// what they say, not on the agent's word.
	doc.QualityChecks = gate.Detect(root).QualityChecks()
	js, err := doc.Marshal()
	if err != nil {
		return "", err
	}
	rel := filepath.ToSlash(filepath.Join(Parent, id))
	files := map[string]string{
		PRDMarkdown:   prdMD,
		PRDJSON:       string(js),
		Prompt:        promptFor(name, rel),
		Progress:      "# Progress: " + name + "\n\nOne entry per iteration, appended at the end: the story, what changed, the files, what was learned.\n",
		Orchestration: "{\"scheme\": \"" + defaultScheme + "\", \"loop_settings\": {\"force_steering\": false}}\n",
		ControlPlane:  controlPlane,
	}
	for f, content := range files {
		if err := store.WriteFile(filepath.Join(tmp, f), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// promptFor is the PROMPT.md of a new run folder: every instruction a
// Ralph-ready prompt carries, as a ralph prompt template.
func promptFor(name, rel string) string {
	return `# Ralph run: ` + name + `

You are one iteration of a Ralph loop: a fresh agent that gets this same
prompt every time. Your memory is the repository, its git history and the
files of this run folder.

## Read first

Before you change anything, read these files first:
- ` + rel + `/PRD.md: the spec, in prose
- ` + rel + `/prd.json: the stories, in order
- ` + rel + `/progress.md: what earlier iterations did and learned
- ` + "`git log --oneline -20`" + `: what was committed

## Each iteration
{{if ne .Kind "story"}}
This iteration is a {{.Kind}}, not a worker iteration: do what "Your
{{.Kind}}" at the end of this prompt says, and none of the steps below.
{{end}}
1. Pick the next story where passes=false in prd.json (the first by
   priority whose depends_on stories all pass). This iteration's story is
   {{.ItemID}}: {{.Title}}.
2. Implement it, test it (its acceptance criteria and the quality checks),
   and commit your work: implement + test + commit, one story only.
3. Set passes=true only when every acceptance criterion is met and the
   checks pass. ralph runs the checks itself and takes passes=true as your
   claim: a claim that fails is reverted.
4. Append a progress entry to progress.md: the story, what you changed,
   the files, what you learned.
5. When you believe every story of the run is done, also write
   output/worker_result.json: {"complete": true, "reason": "worker_done"}
   (a final review follows). Never edit loop_state.json (CONTROL_PLANE.md).
6. When the story is complete, end your final message with
   <promise>{{.Promise}}</promise> and nothing after it.
{{if .RetryContext}}
## What went wrong last time

{{.RetryContext}}
{{end}}`
}

// Problem is one Ralph-ready rule a run folder breaks.
type Problem struct {
	File string // the file the rule is about (the folder itself for its place)
	Msg  string
}

func (p Problem) String() string { return p.File + ": " + p.Msg }

// promptRules are the instructions a Ralph-ready PROMPT.md carries, each
// with the phrasings that count as giving it. Compiled on first use: every
// ralph command pays for package-level work at start-up, and only a lint
// needs these.
var promptRules = sync.OnceValue(func() []promptRule {
	return []promptRule{
		{"read-first instructions (\"read PRD.md, prd.json and progress.md first\")", regexp.MustCompile(`(?is)\bread\b.{0,200}\bfirst\b|\bfirst\b.{0,40}\bread\b|before you (start|begin|change)[^.]{0,80}\bread`)},
		{"\"pick next story where passes=false\"", regexp.MustCompile(`(?is)(pick|select|choose|take)\b.{0,60}\bstor(y|ies)\b.{0,80}passes\W{0,4}\s*(=|:|is)?\s*\W?false`)},
		{"\"implement + test + commit\"", regexp.MustCompile(`(?is)\bimplement.{0,200}\btest.{0,200}\bcommit`)},
		{"\"set passes=true only when criteria met\"", regexp.MustCompile(`(?is)passes\W{0,4}\s*(=|:|to)?\s*\W?true\b.{0,80}\b(only|when|once|after)\b.{0,80}\b(criteria|criterion|met|pass)`)},
		{"\"append progress entry\"", regexp.MustCompile(`(?is)\bappend\b.{0,80}\bprogress`)},
		{"the completion promise tag (<promise>…</promise>)", regexp.MustCompile(`(?s)<promise>.{1,200}</promise>`)},
	}
})

type promptRule struct {
	what string
	re   *regexp.Regexp
}

// Lint checks dir against the "Ralph-ready" rules: it is
// ralph/runs/<run_id>/ of the repository at root; PRD.md, prd.json,
// PROMPT.md and progress.md exist; prd.json is a valid PRD whose stories
// all carry "passes"; PROMPT.md names the files and gives every required
// instruction. No problems: Ralph-ready.
func Lint(root, dir string) []Problem {
	var out []Problem
	add := func(file, format string, args ...any) {
		out = append(out, Problem{File: file, Msg: fmt.Sprintf(format, args...)})
	}
	show := func(name string) string { return filepath.ToSlash(relTo(root, filepath.Join(dir, name))) }
	folder := filepath.ToSlash(relTo(root, dir))
	if filepath.Base(filepath.Dir(dir)) != "runs" || filepath.Base(filepath.Dir(filepath.Dir(dir))) != "ralph" {
		add(folder, "a run folder is %s/<run_id>/ (`ralph runs new NAME` makes one)", Parent)
	}
	for _, f := range []string{PRDMarkdown, PRDJSON, Prompt, Progress} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil {
			add(show(f), "missing (every Ralph-ready run folder has %s, %s, %s and %s)", PRDMarkdown, PRDJSON, Prompt, Progress)
		} else if fi.IsDir() {
			add(show(f), "is a folder, not a file")
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, PRDJSON)); err == nil {
		doc, perr := prd.ParseAll(show(PRDJSON), b)
		var typeErrs prd.TypeErrors
		switch {
		case perr != nil && !errors.As(perr, &typeErrs):
			add(show(PRDJSON), "%v", strings.TrimPrefix(perr.Error(), show(PRDJSON)+":"))
		default:
			if perr != nil {
				add(show(PRDJSON), "%v", perr)
			}
			if verr := doc.Validate(); verr != nil {
				add(show(PRDJSON), "not a valid PRD: %s", strings.ReplaceAll(verr.Error(), show(PRDJSON)+": ", ""))
			}
			if len(doc.Stories) == 0 {
				add(show(PRDJSON), "has no stories")
			}
			if ids := doc.WithoutPasses(); len(ids) > 0 {
				add(show(PRDJSON), "stories without a \"passes\" field: %s (add \"passes\": false)", strings.Join(ids, ", "))
			}
		}
	}
	if _, err := ReadOrchestration(dir); err != nil {
		add(show(Orchestration), "%s", strings.TrimPrefix(err.Error(), filepath.Join(dir, Orchestration)+": "))
	}
	if b, err := os.ReadFile(filepath.Join(dir, Prompt)); err == nil {
		text := string(b)
		for _, f := range []string{PRDMarkdown, PRDJSON, Progress} {
			if !strings.Contains(text, f) {
				add(show(Prompt), "does not reference %s", f)
			}
		}
		for _, r := range promptRules() {
			if !r.re.MatchString(text) {
				add(show(Prompt), "missing %s", r.what)
			}
		}
	}
	return out
}

func relTo(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// Run is one run folder as `ralph runs list` shows it.
type Run struct {
	ID       string
	Dir      string
	Passed   int // stories with passes:true in prd.json
	Stories  int
	Problems int // Ralph-ready rules it breaks
	PRDError string
}

// List returns the run folders under root, oldest id first.
func List(root string) ([]Run, error) {
	entries, err := os.ReadDir(filepath.Join(root, Parent))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Run
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(root, Parent, e.Name())
		r := Run{ID: e.Name(), Dir: dir, Problems: len(Lint(root, dir))}
		if doc, err := prd.Load(filepath.Join(dir, PRDJSON)); err == nil {
			r.Stories = len(doc.Stories)
			r.Passed = len(doc.PassedInFile())
		} else {
			r.PRDError = err.Error()
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
