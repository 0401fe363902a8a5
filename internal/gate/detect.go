package gate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ralph-loop/ralph/internal/prd"
)

// The four quality gate slots of a PRD, in the order they run.
var Slots = []string{"typecheck", "lint", "test", "build"}

// Found is what Detect found in a project: a command per gate slot and,
// per finding, the file and what it said.
type Found struct {
	Commands map[string]string // slot → command (several languages joined by &&)
	Why      []string          // "go.mod: Go → typecheck: go vet ./…"
}

// QualityChecks are the findings as a PRD's quality_checks.
func (f Found) QualityChecks() prd.QualityChecks {
	return prd.QualityChecks{Typecheck: f.Commands["typecheck"], Lint: f.Commands["lint"], Test: f.Commands["test"], Build: f.Commands["build"]}
}

// Empty reports whether nothing was found.
func (f Found) Empty() bool { return len(f.Commands) == 0 }

// Detect looks at the project's own files — go.mod, package.json (and its
// lock file for the package manager), pyproject.toml / pytest.ini, Cargo.toml
// and a Makefile's test, lint and check targets — and proposes the quality
// gates a person would run. A Makefile's target replaces what a language
// proposed for the same slot: the project's own recipe knows best.
func Detect(root string) Found {
	f := Found{Commands: map[string]string{}}
	add := func(file, what string, cmds map[string]string) {
		if len(cmds) == 0 {
			return
		}
		var parts []string
		for _, s := range Slots {
			c, ok := cmds[s]
			if !ok {
				continue
			}
			if prev := f.Commands[s]; prev != "" && file != "Makefile" {
				c = prev + " && " + c
			}
			f.Commands[s] = c
			parts = append(parts, s+": "+cmds[s])
		}
		f.Why = append(f.Why, fmt.Sprintf("%s: %s → %s", file, what, strings.Join(parts, ", ")))
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(root, name))
		return err == nil
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(root, name))
		return string(b)
	}

	if exists("go.mod") {
		// No go build ./... besides: go vet type-checks every package and
		// go test compiles the tested ones, and each gate compiles the
		// module again.
		add("go.mod", "Go module (no go build gate: go vet type-checks every package, go test builds what it tests)",
			map[string]string{"typecheck": "go vet ./...", "test": "go test ./..."})
	}
	if exists("package.json") {
		pm, why := nodePackageManager(exists)
		cmds, note, err := nodeScripts(read("package.json"), pm, exists("tsconfig.json"))
		switch {
		case err != nil:
			f.Why = append(f.Why, "package.json: not read ("+err.Error()+")")
		case len(cmds) == 0:
			f.Why = append(f.Why, "package.json: Node, "+why+" → no gate: "+note)
		default:
			if note != "" {
				why += "; " + note
			}
			add("package.json", "Node, "+why, cmds)
		}
	}
	if py := read("pyproject.toml") + read("setup.cfg") + read("tox.ini"); py != "" || exists("pytest.ini") || exists("noxfile.py") {
		cmds := map[string]string{}
		file, what := "pyproject.toml", "Python (the tools it names; install the project first, e.g. pip install -e . in its virtualenv, or the gates cannot import it)"
		switch {
		case exists("tox.ini"):
			// tox makes its own environments with the project installed.
			cmds["test"], file, what = "tox", "tox.ini", "Python, tox (its environments install the project)"
		case exists("noxfile.py"):
			cmds["test"], file, what = "nox", "noxfile.py", "Python, nox (its sessions install the project)"
		case exists("pytest.ini") || strings.Contains(py, "pytest"):
			cmds["test"] = "pytest"
		}
		if strings.Contains(py, "ruff") {
			cmds["lint"] = "ruff check ."
		}
		if strings.Contains(py, "mypy") {
			cmds["typecheck"] = "mypy ."
		}
		if !exists(file) {
			file = "setup.cfg / pytest.ini"
		}
		if len(cmds) == 0 {
			f.Why = append(f.Why, file+": Python → no gate: it names no pytest, tox, nox, ruff or mypy")
		}
		add(file, what, cmds)
	}
	if exists("Cargo.toml") {
		add("Cargo.toml", "Rust crate", map[string]string{"typecheck": "cargo check", "lint": "cargo clippy -- -D warnings", "test": "cargo test"})
	}
	if mk := read("Makefile"); mk != "" {
		targets := makeTargets(mk)
		// A target whose recipe runs a program from one person's home
		// (~/.virtualenvs/…/python) is a maintainer's shortcut, not the
		// project's recipe: the language's gate stays.
		targets, personal := withoutPersonal(mk, targets)
		for _, p := range personal {
			if f.Commands[p.slot] != "" {
				f.Why = append(f.Why, fmt.Sprintf("Makefile: %s runs %s, a path on one machine → kept %s: %s", p.target, p.path, p.slot, f.Commands[p.slot]))
			} else {
				f.Why = append(f.Why, fmt.Sprintf("Makefile: %s runs %s, a path on one machine → no gate from it", p.target, p.path))
			}
		}
		cmds := map[string]string{}
		if targets["test"] {
			cmds["test"] = "make test"
		}
		if targets["lint"] {
			cmds["lint"] = "make lint"
		}
		if targets["check"] {
			// check is the project's whole verification when there is no
			// test target, else its static checks.
			if targets["test"] {
				cmds["typecheck"] = "make check"
			} else {
				cmds["test"] = "make check"
			}
		}
		add("Makefile", "its own targets (they replace a language's for the same gate)", cmds)
	}
	return f
}

// personalTarget is a Makefile target whose recipe names a path in one
// person's home.
type personalTarget struct{ target, slot, path string }

// personalPath finds a path in someone's home: ~/…, $(HOME)/…, /home/…,
// /Users/….
var personalPath = regexp.MustCompile(`(?:~|\$\(HOME\)|\$\{HOME\}|\$HOME|/home/[^/\s]+|/Users/[^/\s]+)/[^\s;&|)'"]*`)

// withoutPersonal drops the test, lint and check targets whose recipes
// (with the Makefile's variables put in) run something from a home
// folder.
func withoutPersonal(mk string, targets map[string]bool) (map[string]bool, []personalTarget) {
	vars := makeVars(mk)
	var personal []personalTarget
	out := map[string]bool{}
	for t, ok := range targets {
		out[t] = ok
	}
	for _, t := range []struct{ target, slot string }{{"test", "test"}, {"lint", "lint"}, {"check", "test"}} {
		if !targets[t.target] {
			continue
		}
		recipe := expandVars(makeRecipe(mk, t.target), vars, 3)
		if p := personalPath.FindString(recipe); p != "" {
			delete(out, t.target)
			personal = append(personal, personalTarget{t.target, t.slot, p})
		}
	}
	return out, personal
}

var (
	makeVar    = regexp.MustCompile(`(?m)^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?:\?|:|::|\+)?=[ \t]*(.*)$`)
	makeVarRef = regexp.MustCompile(`\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]`)
)

// makeVars are the Makefile's variables, each with every value it is
// given anywhere (both branches of an ifeq), joined.
func makeVars(mk string) map[string]string {
	vars := map[string]string{}
	for _, m := range makeVar.FindAllStringSubmatch(mk, -1) {
		vars[m[1]] += " " + m[2]
	}
	return vars
}

// expandVars puts the variables' values into s, depth levels deep.
func expandVars(s string, vars map[string]string, depth int) string {
	for range depth {
		s = makeVarRef.ReplaceAllStringFunc(s, func(ref string) string {
			if v, ok := vars[makeVarRef.FindStringSubmatch(ref)[1]]; ok {
				return v
			}
			return ref
		})
	}
	return s
}

// makeRecipe is the recipe of a target: the tab-indented lines after its
// rule.
func makeRecipe(mk, target string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(mk, "\n") {
		if strings.HasPrefix(l, "\t") {
			if in {
				b.WriteString(l + "\n")
			}
			continue
		}
		if m := makeTarget.FindStringSubmatch(l); m != nil {
			in = false
			for _, t := range strings.Fields(m[1]) {
				in = in || t == target
			}
		} else if strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			in = false
		}
	}
	return b.String()
}

// nodePackageManager is the package manager the lock file names.
func nodePackageManager(exists func(string) bool) (pm, why string) {
	for _, l := range []struct{ file, pm string }{
		{"pnpm-lock.yaml", "pnpm"}, {"yarn.lock", "yarn"}, {"bun.lockb", "bun"}, {"bun.lock", "bun"}, {"package-lock.json", "npm"},
	} {
		if exists(l.file) {
			return l.pm, l.pm + " (" + l.file + ")"
		}
	}
	return "npm", "npm (no lock file)"
}

// npm init's default test script only prints "no test specified" and fails: it is no test.
const npmNoTest = "no test specified"

// nodeScripts maps package.json's scripts to gates: test, lint,
// typecheck (or tsc for a TypeScript project without one), build; note
// says why a script was not taken.
func nodeScripts(pkg, pm string, typescript bool) (cmds map[string]string, note string, err error) {
	var p struct {
		Scripts map[string]string `json:"scripts"`
	}
	if err := json.Unmarshal([]byte(pkg), &p); err != nil {
		return nil, "", err
	}
	run := func(script string) string {
		if pm == "npm" && script == "test" {
			return "npm test"
		}
		return pm + " run " + script
	}
	cmds = map[string]string{}
	switch s, ok := p.Scripts["test"]; {
	case ok && strings.Contains(s, npmNoTest):
		note = "its test script is npm's placeholder (" + strconv.Quote(s) + "), not a test: write a real one"
	case ok:
		cmds["test"] = run("test")
	}
	if lint, ok := p.Scripts["lint"]; ok {
		// npm test runs pretest and posttest: a lint it runs there is
		// checked by the test gate already.
		if by := runsLint(p.Scripts, lint); by != "" && cmds["test"] != "" {
			note = "lint: no gate of its own, " + run("test") + " runs it (" + by + ")"
		} else {
			cmds["lint"] = run("lint")
		}
	}
	switch {
	case p.Scripts["typecheck"] != "":
		cmds["typecheck"] = run("typecheck")
	case p.Scripts["tsc"] != "":
		cmds["typecheck"] = run("tsc")
	case typescript:
		cmds["typecheck"] = map[string]string{"npm": "npx tsc --noEmit", "pnpm": "pnpm exec tsc --noEmit", "yarn": "yarn tsc --noEmit", "bun": "bunx tsc --noEmit"}[pm]
	}
	if _, ok := p.Scripts["build"]; ok {
		cmds["build"] = run("build")
	}
	if len(cmds) == 0 && note == "" {
		note = "it has no test, lint, typecheck or build script"
	}
	return cmds, note, nil
}

// runsLint names the test script (test, pretest or posttest) that runs
// the lint script already, "" when none does.
func runsLint(scripts map[string]string, lint string) string {
	for _, name := range []string{"pretest", "test", "posttest"} {
		s := scripts[name]
		if s == "" {
			continue
		}
		for _, run := range []string{"run lint", "run-script lint", "yarn lint", "pnpm lint", "bun lint"} {
			if strings.Contains(s, run) {
				return name
			}
		}
		if strings.TrimSpace(lint) != "" && strings.Contains(s, strings.TrimSpace(lint)) {
			return name
		}
	}
	return ""
}

var makeTarget = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*::?(?:[^=]|$)`)

// makeTargets lists a Makefile's explicit targets (not variables).
func makeTargets(mk string) map[string]bool {
	out := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(mk, -1) {
		for _, t := range strings.Fields(m[1]) {
			out[t] = true
		}
	}
	return out
}
