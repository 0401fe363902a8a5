// Package roles holds the role texts an iteration may get appended to its
// prompt and the triggers that choose one between iterations: conditions
// over facts the harness measured (commits on the branch, the last gate
// results, …), never over what the agent says about itself.
//
// Texts come from the built-in set, then roles/<name>.md (the role-triggers
// layout), then .ralph/roles/<name>.md, each overriding the one before.
// Triggers and per-role agents come from .ralph/roles.yaml or the role-triggers
// config/roles.yaml.
package roles

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

//go:embed builtin/*.md
var builtin embed.FS

// BuiltinFrom is the From of a role ralph ships.
const BuiltinFrom = "built-in"

// Role is one role's text and where it came from.
type Role struct {
	Name string
	Text string
	From string // BuiltinFrom or the file's path
}

// Trigger is one entry of roles.yaml: when Condition holds, the iteration
// gets Role.
type Trigger struct {
	Condition string
	Role      string
	Line      int // of the condition in the triggers file
	// OnReady: the condition mentions task_marked_ready_to_complete, so the
	// trigger is a completion gate, asked when an iteration's claim has
	// passed the gates: the item passes only when its role approves.
	OnReady bool
	prog    *vm.Program
	facts   []string // the names the condition refers to, found once at load
}

// AgentSpec is the agent that runs one role's iterations.
type AgentSpec struct {
	Agent    string `yaml:"agent"`
	Model    string `yaml:"model"`
	AgentCmd string `yaml:"agent_cmd"` // for agent cmd: the argv, split like a shell would
}

// Set is what is in force in a repository.
type Set struct {
	roles        map[string]Role
	Triggers     []Trigger
	TriggersFrom string // the triggers file, "" when there is none
	Agents       map[string]AgentSpec
	AgentsLine   map[string]int // where each agent entry is, for errors
	// Council are the rules (roles.yaml council:) that make an item need a
	// council's majority, besides its own critical field.
	Council []Trigger
}

// Env is what a condition can see: the facts of the item the next
// iteration works on, measured by the harness. Every kind of item (story,
// task, stage) fills task_id and task_title.
type Env struct {
	Iteration                 int    `expr:"iteration"`      // the run's iteration about to start
	ItemIteration             int    `expr:"item_iteration"` // the item's own iteration about to start (1 = first)
	Attempt                   int    `expr:"attempt"`
	ItemKind                  string `expr:"item_kind"` // story, task, stage or loop
	TaskID                    string `expr:"task_id"`
	TaskTitle                 string `expr:"task_title"`
	BranchCommits             int    `expr:"branch_commits"` // commits for the item since its first iteration began
	FilesChanged              int    `expr:"files_changed"`  // files the item's last iteration left changed
	LastIterationFailed       bool   `expr:"last_iteration_failed"`
	ConsecutiveFailures       int    `expr:"consecutive_failures"`
	TaskMarkedReadyToComplete bool   `expr:"task_marked_ready_to_complete"`
	LastRole                  string `expr:"last_role"` // the role of the item's last iteration ("" for none)
	// gate_failed("test"): the gate of that name failed in the item's last
	// iteration.
	GateFailed func(name string) bool `expr:"gate_failed"`
	// iterations_since_role("documenter"): iterations of the run since that
	// role last served (all of them when it never did).
	IterationsSinceRole func(role string) int `expr:"iterations_since_role"`
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// Load reads the roles and triggers in force under root.
func Load(root string) (*Set, error) {
	s := &Set{roles: map[string]Role{}}
	entries, err := builtin.ReadDir("builtin")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := builtin.ReadFile("builtin/" + e.Name())
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(e.Name(), ".md")
		s.roles[name] = Role{Name: name, Text: string(b), From: BuiltinFrom}
	}
	for _, dir := range []string{filepath.Join(root, "roles"), filepath.Join(root, ".ralph", "roles")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.md"))
		if err != nil {
			return nil, err
		}
		for _, p := range files {
			name := strings.TrimSuffix(filepath.Base(p), ".md")
			if !nameRE.MatchString(name) {
				return nil, fmt.Errorf("%s: a role's file name is its name: lower-case letters, digits, - and _ (like reviewer.md)", p)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			if strings.TrimSpace(string(b)) == "" {
				return nil, fmt.Errorf("%s: the role's text is empty", p)
			}
			s.roles[name] = Role{Name: name, Text: string(b), From: p}
		}
	}
	var found []string
	for _, p := range []string{filepath.Join(root, ".ralph", "roles.yaml"), filepath.Join(root, "config", "roles.yaml")} {
		if _, err := os.Stat(p); err == nil {
			found = append(found, p)
		}
	}
	if len(found) > 1 {
		return nil, fmt.Errorf("both %s and %s exist: keep the triggers in one of them", found[0], found[1])
	}
	if len(found) == 1 {
		b, err := os.ReadFile(found[0])
		if err != nil {
			return nil, err
		}
		if err := s.parseTriggers(found[0], b); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// file is roles.yaml.
type fileShape struct {
	Triggers []struct {
		Condition string `yaml:"condition"`
		Role      string `yaml:"role"`
	} `yaml:"triggers"`
	Agents  map[string]AgentSpec `yaml:"agents"`
	Council []struct {
		Condition string `yaml:"condition"`
	} `yaml:"council"`
}

// parseError is a problem in roles.yaml at a place.
type parseError struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *parseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

func (s *Set) parseTriggers(name string, b []byte) error {
	var f fileShape
	if err := yaml.UnmarshalWithOptions(b, &f, yaml.Strict()); err != nil {
		pe := &parseError{File: name, Msg: err.Error()}
		var ye yaml.Error
		if errors.As(err, &ye) {
			pe.Msg = strings.TrimSpace(ye.GetMessage())
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				pe.Line, pe.Col = tk.Position.Line, tk.Position.Column
			}
		}
		return pe
	}
	doc, _ := parser.ParseBytes(b, 0)
	pos := func(path string) (int, int) {
		if doc == nil {
			return 0, 0
		}
		yp, err := yaml.PathString(path)
		if err != nil {
			return 0, 0
		}
		n, err := yp.FilterFile(doc)
		if err != nil || n == nil {
			return 0, 0
		}
		tk := n.GetToken()
		if tk == nil || tk.Position == nil {
			return 0, 0
		}
		col := tk.Position.Column
		if tk.Type == token.DoubleQuoteType || tk.Type == token.SingleQuoteType {
			col++ // the expression starts after the opening quote
		}
		return tk.Position.Line, col
	}
	s.TriggersFrom = name
	for i, t := range f.Triggers {
		at := fmt.Sprintf("$.triggers[%d]", i)
		line, col := pos(at + ".condition")
		what := fmt.Sprintf("trigger %d", i+1)
		if strings.TrimSpace(t.Condition) == "" {
			l, c := pos(at)
			return &parseError{File: name, Line: l, Col: c, Msg: what + ": condition is required (an expression such as \"branch_commits >= 5\")"}
		}
		if t.Role == "" {
			l, c := pos(at)
			return &parseError{File: name, Line: l, Col: c, Msg: what + ": role is required"}
		}
		if _, ok := s.roles[t.Role]; !ok {
			l, c := pos(at + ".role")
			return &parseError{File: name, Line: l, Col: c, Msg: fmt.Sprintf("%s: no role %q: the roles in force are %s (add roles/%s.md or .ralph/roles/%s.md)", what, t.Role, strings.Join(s.Names(), ", "), t.Role, t.Role)}
		}
		prog, err := compileCondition(name, what, t.Condition, line, col)
		if err != nil {
			return err
		}
		tr := Trigger{Condition: t.Condition, Role: t.Role, Line: line, prog: prog, facts: identifiers(prog)}
		tr.OnReady = slices.Contains(tr.facts, "task_marked_ready_to_complete")
		s.Triggers = append(s.Triggers, tr)
	}
	for i, c := range f.Council {
		at := fmt.Sprintf("$.council[%d]", i)
		what := fmt.Sprintf("council rule %d", i+1)
		if strings.TrimSpace(c.Condition) == "" {
			l, col := pos(at)
			return &parseError{File: name, Line: l, Col: col, Msg: what + ": condition is required (an expression such as \"task_title contains 'auth'\")"}
		}
		line, col := pos(at + ".condition")
		prog, err := compileCondition(name, what, c.Condition, line, col)
		if err != nil {
			return err
		}
		s.Council = append(s.Council, Trigger{Condition: c.Condition, Role: "council", Line: line, prog: prog, facts: identifiers(prog)})
	}
	s.Agents = map[string]AgentSpec{}
	s.AgentsLine = map[string]int{}
	for r, a := range f.Agents {
		l, c := pos("$.agents." + r)
		if _, ok := s.roles[r]; !ok {
			return &parseError{File: name, Line: l, Col: c, Msg: fmt.Sprintf("agents: no role %q: the roles in force are %s", r, strings.Join(s.Names(), ", "))}
		}
		if a.Agent == "" && a.Model == "" && a.AgentCmd == "" {
			return &parseError{File: name, Line: l, Col: c, Msg: fmt.Sprintf("agents.%s: give agent, model or agent_cmd", r)}
		}
		s.Agents[r] = a
		s.AgentsLine[r] = l
	}
	return nil
}

// compileCondition compiles a condition found at line:col of file name;
// an error names the place of the mistake inside the expression.
func compileCondition(name, what, cond string, line, col int) (*vm.Program, error) {
	prog, err := expr.Compile(cond, expr.Env(Env{}), expr.AsBool())
	if err == nil {
		return prog, nil
	}
	msg := err.Error()
	var fe *file.Error
	if errors.As(err, &fe) {
		msg = fe.Message
		if fe.Line > 1 {
			line += fe.Line - 1
			col = fe.Column + 1
		} else {
			col += fe.Column
		}
	}
	return nil, &parseError{File: name, Line: line, Col: col, Msg: fmt.Sprintf("%s: condition %q: %s (the facts a condition can use: %s)", what, cond, msg, strings.Join(Facts(), ", "))}
}

// CouncilRule is the first council rule that holds for env, or nil.
func (s *Set) CouncilRule(env Env) (*Trigger, error) {
	if s == nil {
		return nil, nil
	}
	env.TaskMarkedReadyToComplete = true // asked once a claim passed the gates
	return s.first(s.Council, env, "council condition", nil)
}

// identifiers lists the names a compiled condition refers to.
func identifiers(p *vm.Program) []string {
	v := &idVisitor{}
	n := p.Node()
	ast.Walk(&n, v)
	return v.ids
}

type idVisitor struct{ ids []string }

func (v *idVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok && !slices.Contains(v.ids, id.Value) {
		v.ids = append(v.ids, id.Value)
	}
}

// Facts lists the names a condition can use.
func Facts() []string {
	return []string{"iteration", "item_iteration", "attempt", "item_kind", "task_id", "task_title", "branch_commits", "files_changed",
		"last_iteration_failed", "consecutive_failures", "task_marked_ready_to_complete", "last_role", "gate_failed(NAME)", "iterations_since_role(ROLE)"}
}

// Names lists the roles in force, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.roles))
	for n := range s.roles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Get is the role called name.
func (s *Set) Get(name string) (Role, bool) {
	if s == nil {
		return Role{}, false
	}
	r, ok := s.roles[name]
	return r, ok
}

// Text is the prompt text of the role called name, or an error naming the
// roles in force and where the missing one's file goes.
func (s *Set) Text(name string) (string, error) {
	r, ok := s.Get(name)
	if !ok {
		var names []string
		if s != nil {
			names = s.Names()
		}
		return "", fmt.Errorf("role %q is not in force (the roles are %v): restore roles/%s.md or .ralph/roles/%s.md", name, names, name, name)
	}
	return r.Text, nil
}

// HasCompletionGates reports whether any trigger is a completion gate.
func (s *Set) HasCompletionGates() bool {
	if s == nil {
		return false
	}
	for _, t := range s.Triggers {
		if t.OnReady {
			return true
		}
	}
	return false
}

// Uses reports whether any trigger's condition refers to fact, so that a
// fact that costs a git call is measured only when something reads it.
func (s *Set) Uses(fact string) bool {
	if s == nil {
		return false
	}
	for _, t := range s.Triggers {
		if slices.Contains(t.facts, fact) {
			return true
		}
	}
	return false
}

// Choose evaluates the triggers in order and returns the first that holds,
// or nil. ready selects the completion gates (triggers with OnReady),
// asked once an iteration's claim has passed the gates; otherwise every
// trigger is asked, between iterations.
func (s *Set) Choose(env Env, ready bool) (*Trigger, error) {
	if s == nil {
		return nil, nil
	}
	env.TaskMarkedReadyToComplete = ready
	return s.first(s.Triggers, env, "condition", func(t *Trigger) bool { return ready && !t.OnReady })
}

// first is the first of list, not skipped, whose condition holds for env.
func (s *Set) first(list []Trigger, env Env, what string, skip func(*Trigger) bool) (*Trigger, error) {
	if env.GateFailed == nil {
		env.GateFailed = func(string) bool { return false }
	}
	if env.IterationsSinceRole == nil {
		env.IterationsSinceRole = func(string) int { return 0 }
	}
	for i := range list {
		t := &list[i]
		if skip != nil && skip(t) {
			continue
		}
		out, err := expr.Run(t.prog, env)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s %q: %v", s.TriggersFrom, t.Line, what, t.Condition, err)
		}
		if ok, _ := out.(bool); ok {
			return t, nil
		}
	}
	return nil, nil
}
