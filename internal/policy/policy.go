// Package policy pins the rules that judge a run's items for the whole
// run: the PRD's quality checks, its protected globs and every story's
// checks and flags
// (critical, allow_gate_changes, allow_test_changes), .ralph/config.yaml
// (the task tree's gates, the council size, everything else it sets) and
// roles.yaml (triggers, council rules, per-role agents).
//
// A new run pins what the files say (beside the run key outside the
// repository, sealed with it the way plan decisions are: engine.RunSeal).
// From then on the files are checked against the pinned policy before a
// later start reads them (Check) and after every agent run (Guard.Restore): what differs is put
// back — a PRD's policy fields through the prd package's write-back,
// keeping passes and notes; the YAML files as their pinned bytes — the
// edited file is kept in .ralph/policy-edits/, and the change is reported.
// A snapshot whose seal does not match stops the run: only a person
// starting it with --reload-policy (or --fresh) takes the files as they are.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
)

// Snapshot is the policy a run pinned.
type Snapshot struct {
	RunID string    `json:"run_id"`
	At    time.Time `json:"at"`
	// PRD is the policy part of the run's PRD (nil: the run has none).
	PRD *PRDPolicy `json:"prd,omitempty"`
	// Files are kept whole: .ralph/config.yaml and roles.yaml.
	Files []File `json:"files"`
	Seal  string `json:"seal"`
}

// PRDPolicy is what a PRD says about judging its stories.
type PRDPolicy struct {
	Path          string            `json:"path"` // relative to the repository
	QualityChecks map[string]string `json:"quality_checks"`
	Protected     []string          `json:"protected,omitempty"`
	Stories       []StoryPolicy     `json:"stories"`
}

// StoryPolicy is what one story says about judging it.
type StoryPolicy struct {
	ID               string   `json:"id"`
	Checks           []string `json:"checks,omitempty"`
	Critical         bool     `json:"critical,omitempty"`
	AllowGateChanges bool     `json:"allow_gate_changes,omitempty"`
	AllowTestChanges bool     `json:"allow_test_changes,omitempty"`
	Review           string   `json:"review,omitempty"`
}

// File is a policy file pinned whole.
type File struct {
	Path    string `json:"path"` // relative to the repository
	Exists  bool   `json:"exists"`
	Content []byte `json:"content,omitempty"`
}

// yamlFiles are the policy files kept whole, relative to the repository
// (roles.Load reads the triggers from either roles.yaml).
var yamlFiles = []string{".ralph/config.yaml", ".ralph/roles.yaml", "config/roles.yaml"}

// file is where the snapshot is kept: outside the repository, beside the
// run keys, so that an agent working in it does not remove or replace it
// by the way (and a person finds it named in the messages).
func file(p engine.Paths) string {
	f, err := engine.KeptOutside(p, "policy.json")
	if err != nil {
		return filepath.Join(p.Dir, "policy.json") // no home: the repository's own folder
	}
	return f
}

// fields are what the seal covers: the snapshot without its seal.
func (s Snapshot) fields() []string {
	s.Seal = ""
	b, _ := json.Marshal(s)
	return []string{"policy", string(b)}
}

// errNoSnapshot: no run pinned a policy in this repository yet.
var errNoSnapshot = errors.New("is missing")

// load reads the pinned snapshot and checks that it is run runID's ("":
// the run it names) with its seal.
func load(p engine.Paths, runID string) (*Snapshot, error) {
	var s Snapshot
	if err := store.ReadJSON(file(p), &s); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errNoSnapshot
		}
		return nil, fmt.Errorf("is unreadable (%v)", err)
	}
	if runID == "" {
		runID = s.RunID
	}
	if s.RunID != runID || runID == "" {
		return nil, fmt.Errorf("names run %q, not the saved run's", s.RunID)
	}
	ok, err := engine.RunSealed(p, runID, s.Seal, s.fields()...)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("does not carry the run's seal (it was edited)")
	}
	return &s, nil
}

// UntrustedError: the policy the saved run pinned cannot be read or
// trusted (missing, edited, another run's), so the run does not go on. A
// usage error: a person decides (--reload-policy, --fresh).
type UntrustedError struct{ Msg string }

func (e *UntrustedError) Error() string {
	return e.Msg + ": the run does not go on with a policy it cannot trust; if a person changed the files, `ralph run --reload-policy` takes the policy in them"
}

// UsageError marks it as the person's to decide (exit code 2).
func (e *UntrustedError) UsageError() bool { return true }

// Options are what the start of a run says about its policy.
type Options struct {
	// Reload takes the policy in the files for a resumed run
	// (--reload-policy), reporting what changed.
	Reload bool
	// Fresh and Resume are the run's --fresh and --resume: they decide,
	// as the engine does, whether the saved run goes on.
	Fresh, Resume bool
	// DryRun only warns: nothing is written.
	DryRun bool
}

// Guard is one run's policy: engine.Policy.
type Guard struct {
	paths  engine.Paths
	reload bool
	// PRD is the absolute path of the PRD the run judges by ("" none),
	// set once the source is open.
	PRD string
	// Whole are more policy files to pin whole (absolute paths): a
	// pipeline's file, whose stages carry their gates and exit conditions.
	Whole []string

	mu      sync.Mutex
	snap    *Snapshot
	written []byte // policy.json as last written or checked
}

// Check is the first thing a run (or a Stop-hook step) does, before it
// reads any policy file: the files are checked against the policy the
// last run in the repository pinned — whether that run goes on or a new
// one starts, since a new run pins what the files say. A change is put
// back, kept aside and reported on errOut and in the run's events, unless
// o.Reload takes it (and reports what it takes) or o.Fresh starts a new
// run, which is the user's word for a new policy too. A snapshot that is
// missing while a saved run is unfinished, names another run than the
// saved state, or whose seal does not match refuses to go on (a usage
// error) unless o.Reload.
func Check(p engine.Paths, o Options, errOut io.Writer) (*Guard, error) {
	g := &Guard{paths: p, reload: o.Reload}
	if running, _ := engine.ActiveRun(p); running {
		return g, nil // the run cannot open: another holds it
	}
	if o.Fresh {
		return g, nil // a new run: it pins what the files say
	}
	st, _, err := engine.LoadOrRebuildState(p)
	if err != nil {
		return g, nil // the engine reports the state it cannot read
	}
	runID := ""
	if st != nil {
		runID = st.RunID
	}
	record := func(typ, msg string) {
		if !o.DryRun {
			_ = store.AppendJSONL(p.Events, engine.Event{Time: time.Now().UTC(), Type: typ, RunID: runID, Message: msg})
		}
	}
	report := func(typ, msg string) {
		fmt.Fprintf(errOut, "ralph: %s\n", msg)
		record(typ, msg)
	}
	snap, err := load(p, runID)
	if errors.Is(err, errNoSnapshot) && (st == nil || st.Status == engine.StatusComplete) {
		return g, nil // no unfinished run to hold to a policy
	}
	if err != nil {
		msg := fmt.Sprintf("the policy run %s pinned when it started (%s) %v", runID, file(p), err)
		switch {
		case o.Reload:
			report("policy_reloaded", msg+"; --reload-policy: the policy in the files is taken")
			return g, nil
		case o.DryRun:
			fmt.Fprintf(errOut, "ralph: warning: %s; the run would refuse to go on without --reload-policy\n", msg)
			return g, nil
		}
		record("tamper_detected", msg)
		return nil, &UntrustedError{Msg: msg}
	}
	g.snap = snap
	changes := snap.compare(p.Root)
	if o.Reload {
		var what []string
		for _, c := range changes {
			what = append(what, c.summary())
		}
		if len(what) == 0 {
			what = []string{"no change"}
		}
		report("policy_reloaded", fmt.Sprintf("policy reloaded (--reload-policy) for run %s: %s", snap.RunID, strings.Join(what, "; ")))
		return g, nil
	}
	for _, c := range changes {
		if o.DryRun {
			fmt.Fprintf(errOut, "ralph: warning: %s differs from the policy run %s pinned (%s): a run restores it\n", c.Path, snap.RunID, strings.Join(c.Fields, ", "))
			continue
		}
		aside, err := c.restore(p)
		msg := fmt.Sprintf("%s was changed since run %s pinned its policy (%s); restored", c.Path, snap.RunID, strings.Join(c.Fields, ", "))
		if err != nil {
			msg = fmt.Sprintf("%s was changed since run %s pinned its policy (%s); restoring it failed: %v", c.Path, snap.RunID, strings.Join(c.Fields, ", "), err)
		} else if aside != "" {
			msg += ", the edited file is kept as " + aside
		}
		report("tamper_detected", msg+"; if a person made the change, `ralph run --reload-policy` takes it")
	}
	return g, nil
}

// Open is engine.Policy: a new run, a resume Check did not see, or one
// started with --reload-policy pins the policy in the files.
func (g *Guard) Open(runID string, resumed bool) (time.Time, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if resumed && !g.reload && g.snap != nil && g.snap.RunID == runID {
		g.written, _ = os.ReadFile(file(g.paths))
		return g.snap.At, nil
	}
	if err := g.pin(runID); err != nil {
		return time.Time{}, err
	}
	return g.snap.At, nil
}

// pin seals the policy in the files as run runID's. Called with g.mu held.
func (g *Guard) pin(runID string) error {
	s := &Snapshot{RunID: runID, At: time.Now().UTC()}
	if g.PRD != "" {
		doc, err := prd.Load(g.PRD)
		if err != nil {
			return fmt.Errorf("pinning the run's policy: %w", err)
		}
		s.PRD = prdPolicy(doc, rel(g.paths, g.PRD))
	}
	names := slices.Clone(yamlFiles)
	for _, abs := range g.Whole {
		if r := rel(g.paths, abs); !strings.HasPrefix(r, "..") && !filepath.IsAbs(r) {
			names = append(names, r)
		}
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(g.paths.Root, name))
		switch {
		case err == nil:
			s.Files = append(s.Files, File{Path: name, Exists: true, Content: b})
		case errors.Is(err, os.ErrNotExist):
			s.Files = append(s.Files, File{Path: name})
		default:
			return fmt.Errorf("pinning the run's policy: %w", err)
		}
	}
	seal, err := engine.RunSeal(g.paths, runID, s.fields()...)
	if err != nil {
		return fmt.Errorf("pinning the run's policy: %w", err)
	}
	s.Seal = seal
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := os.MkdirAll(filepath.Dir(file(g.paths)), 0o700); err != nil {
		return fmt.Errorf("pinning the run's policy: %w", err)
	}
	if err := store.WriteFile(file(g.paths), b, 0o600); err != nil {
		return fmt.Errorf("pinning the run's policy: %w", err)
	}
	g.snap, g.written = s, b
	return nil
}

// Restore is engine.Policy: after an agent ran, the policy files of the
// main tree are put back where they differ from the pinned policy, and
// the snapshot itself where it was touched, and the copies of the files
// pinned whole in dir, a story's own tree. (A story's worktree copy of
// the PRD is the parallel source's to restore.)
func (g *Guard) Restore(dir string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.snap == nil {
		return nil
	}
	var out []string
	if b, err := os.ReadFile(file(g.paths)); err != nil || !bytes.Equal(b, g.written) {
		if err := store.WriteFile(file(g.paths), g.written, 0o600); err == nil {
			out = append(out, fmt.Sprintf("%s, the run's pinned policy, was changed by the agent; restored", file(g.paths)))
		}
	}
	changes := g.snap.compare(g.paths.Root)
	if dir != "" && filepath.Clean(dir) != filepath.Clean(g.paths.Root) {
		// A story's own tree: its copies of the whole files are merged
		// with its work, so an edit there is put back too.
		changes = append(changes, g.snap.compareFiles(dir, true)...)
	}
	for _, c := range changes {
		msg := fmt.Sprintf("the agent changed %s (%s); restored the policy the run started with", c.Path, strings.Join(c.Fields, ", "))
		aside, err := c.restore(g.paths)
		switch {
		case err != nil:
			msg = fmt.Sprintf("the agent changed %s (%s); restoring it failed: %v", c.Path, strings.Join(c.Fields, ", "), err)
		case aside != "":
			msg += " (its edit is kept as " + aside + ")"
		}
		out = append(out, msg)
	}
	return out
}

// change is one policy file that differs from the pinned policy.
type change struct {
	Path   string   // relative to the repository
	Fields []string // what differs, e.g. "quality_checks.test changed"
	abs    string
	now    []byte // the file as found (nil: missing)
	// put writes the pinned policy back.
	put func() error
}

func (c change) summary() string { return c.Path + ": " + strings.Join(c.Fields, ", ") }

// restore keeps the file as found in .ralph/policy-edits/ and puts the
// pinned policy back; it returns where the edit was kept.
func (c change) restore(p engine.Paths) (string, error) {
	aside := ""
	if c.now != nil {
		dir := filepath.Join(p.Dir, "policy-edits")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		name := filepath.Join(dir, time.Now().UTC().Format("20060102-150405.000")+"-"+strings.ReplaceAll(c.Path, "/", "_"))
		if err := store.WriteFile(name, c.now, 0o600); err != nil {
			return "", err
		}
		aside = rel(p, name)
	}
	return aside, c.put()
}

// compare lists the policy files under root that differ from s.
func (s *Snapshot) compare(root string) []change {
	var out []change
	if s.PRD != nil {
		if c := s.PRD.compare(root); c != nil {
			out = append(out, *c)
		}
	}
	return append(out, s.compareFiles(root, false)...)
}

// compareFiles compares the files pinned whole with root's. With
// onlyPresent (another tree: a story's worktree, where .ralph/ is not
// checked out) only the files root holds are compared.
func (s *Snapshot) compareFiles(root string, onlyPresent bool) []change {
	var out []change
	for _, f := range s.Files {
		abs := filepath.Join(root, f.Path)
		b, err := os.ReadFile(abs)
		exists := err == nil
		if exists == f.Exists && bytes.Equal(b, f.Content) || onlyPresent && !exists {
			continue
		}
		c := change{Path: f.Path, abs: abs}
		if exists {
			c.now = b
		}
		switch {
		case !exists:
			c.Fields = []string{"removed"}
		case !f.Exists:
			c.Fields = []string{"added"}
		default:
			c.Fields = yamlKeysChanged(f.Content, b)
		}
		c.put = func() error {
			if !f.Exists {
				return os.Remove(abs)
			}
			perm := os.FileMode(0o644)
			if st, err := os.Stat(abs); err == nil {
				perm = st.Mode().Perm()
			} else if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
				return err
			}
			return store.WriteFile(abs, f.Content, perm)
		}
		out = append(out, c)
	}
	return out
}

// yamlKeysChanged names the top-level keys two YAML documents differ in
// ("gates changed"), or says the file changed when either does not parse
// as a mapping.
func yamlKeysChanged(was, now []byte) []string {
	var a, b map[string]any
	if yaml.Unmarshal(was, &a) != nil || yaml.Unmarshal(now, &b) != nil {
		return []string{"changed"}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if v, ok := b[k]; !ok {
			out = append(out, k+" removed")
		} else if !reflect.DeepEqual(a[k], v) {
			out = append(out, k+" changed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			out = append(out, k+" added")
		}
	}
	if len(out) == 0 {
		out = []string{"its text changed"}
	}
	return out
}

// prdPolicy is the policy part of doc.
func prdPolicy(doc *prd.PRD, path string) *PRDPolicy {
	q := doc.QualityChecks
	pp := &PRDPolicy{Path: path, QualityChecks: map[string]string{"typecheck": q.Typecheck, "lint": q.Lint, "test": q.Test, "build": q.Build},
		Protected: doc.Protected}
	for _, st := range doc.Stories {
		pp.Stories = append(pp.Stories, StoryPolicy{ID: st.ID, Checks: st.Checks, Critical: st.Critical,
			AllowGateChanges: st.AllowGateChanges, AllowTestChanges: st.AllowTestChanges, Review: st.Review})
	}
	return pp
}

// compare reads the PRD under root against the pinned policy. Stories
// the pinned policy does not know (added since) are not compared; a PRD
// that does not parse is left to the source, which refuses it.
func (pp *PRDPolicy) compare(root string) *change {
	abs := pp.Path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(root, pp.Path)
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil
	}
	doc, err := prd.Parse(abs, b)
	if err != nil {
		return nil
	}
	now := prdPolicy(doc, pp.Path)
	var fields []string
	for _, k := range []string{"typecheck", "lint", "test", "build"} {
		was, is := pp.QualityChecks[k], now.QualityChecks[k]
		switch {
		case was == is:
		case is == "":
			fields = append(fields, "quality_checks."+k+" removed")
		case was == "":
			fields = append(fields, "quality_checks."+k+" added")
		default:
			fields = append(fields, "quality_checks."+k+" changed")
		}
	}
	if !slices.Equal(pp.Protected, now.Protected) {
		fields = append(fields, "protected changed")
	}
	pinned := map[string]StoryPolicy{}
	for _, s := range pp.Stories {
		pinned[s.ID] = s
	}
	flag := func(id, name string, was, is bool) {
		switch {
		case was && !is:
			fields = append(fields, id+" "+name+" removed")
		case !was && is:
			fields = append(fields, id+" "+name+" set")
		}
	}
	for _, s := range now.Stories {
		w, ok := pinned[s.ID]
		if !ok {
			continue
		}
		if !slices.Equal(w.Checks, s.Checks) {
			fields = append(fields, s.ID+" checks changed")
		}
		flag(s.ID, "critical", w.Critical, s.Critical)
		flag(s.ID, "allow_gate_changes", w.AllowGateChanges, s.AllowGateChanges)
		flag(s.ID, "allow_test_changes", w.AllowTestChanges, s.AllowTestChanges)
		if w.Review != s.Review {
			fields = append(fields, s.ID+" review changed")
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return &change{Path: pp.Path, Fields: fields, abs: abs, now: b, put: func() error {
		doc.QualityChecks = prd.QualityChecks{Typecheck: pp.QualityChecks["typecheck"], Lint: pp.QualityChecks["lint"],
			Test: pp.QualityChecks["test"], Build: pp.QualityChecks["build"]}
		doc.Protected = pp.Protected
		for i := range doc.Stories {
			st := &doc.Stories[i]
			if w, ok := pinned[st.ID]; ok {
				st.Checks, st.Critical, st.AllowGateChanges, st.AllowTestChanges, st.Review = w.Checks, w.Critical, w.AllowGateChanges, w.AllowTestChanges, w.Review
			}
		}
		out, err := doc.Marshal()
		if err != nil {
			return err
		}
		perm := os.FileMode(0o644)
		if st, err := os.Stat(abs); err == nil {
			perm = st.Mode().Perm()
		}
		return store.WriteFile(abs, out, perm)
	}}
}

func rel(p engine.Paths, abs string) string {
	if r, err := filepath.Rel(p.Root, abs); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return abs
}
