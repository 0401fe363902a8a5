// Package pipeline reads pipeline files: an ordered list of stages, each
// with a prompt template and an exit condition the harness checks in the
// tree after every iteration (the built-in pagent pipeline: architect → qa
// → security → implementer → verifier). Files are strict YAML; every problem names the
// file, line and column where the YAML parser knows them, the stage and the
// field.
package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/ralph-loop/ralph/internal/engine"
)

// DefaultFile is where `ralph run --pipeline` and `ralph pipeline` look
// when no file is given, relative to the repository root.
const DefaultFile = ".ralph/pipeline.yaml"

// Pipeline is a parsed pipeline file.
type Pipeline struct {
	Name   string  `yaml:"name"`
	PRD    string  `yaml:"prd,omitempty"` // relative to the repository root (or absolute)
	Stages []Stage `yaml:"stages"`

	// File is the path it was read from ("pagent (built-in)" for a preset).
	File string `yaml:"-"`
}

// Stage is one step of the pipeline. Its name is the work item id.
type Stage struct {
	Name          string     `yaml:"name"`
	Title         string     `yaml:"title,omitempty"`
	Prompt        string     `yaml:"prompt,omitempty"`
	PromptFile    string     `yaml:"prompt_file,omitempty"` // relative to the pipeline file's folder
	Exit          *Condition `yaml:"exit"`
	MaxIterations int        `yaml:"max_iterations,omitempty"` // 0 = the run's --max-attempts

	// Template is the prompt text (inline or read from PromptFile).
	Template string `yaml:"-"`
}

// DisplayTitle is the title, or the name when there is none.
func (s *Stage) DisplayTitle() string {
	if s.Title != "" {
		return s.Title
	}
	return s.Name
}

// Stage returns the stage called name, or nil.
func (p *Pipeline) Stage(name string) *Stage {
	for i := range p.Stages {
		if p.Stages[i].Name == name {
			return &p.Stages[i]
		}
	}
	return nil
}

// Render executes the stage's prompt template with d (engine.PromptData
// field names: {{.PRDPath}}, {{.Stage}}, {{.Iteration}}, …).
func (s *Stage) Render(d engine.PromptData) (string, error) {
	t, err := template.New(s.Name).Option("missingkey=error").Parse(s.Template)
	if err != nil {
		return "", fmt.Errorf("stage %q: prompt template: %w", s.Name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("stage %q: prompt template: %w", s.Name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// parseError is a YAML syntax or shape error (exit 2).
type parseError struct {
	File string
	Line int
	Col  int
	Msg  string
}

func (e *parseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// UsageError marks bad input for the exit-code table.
func (e *parseError) UsageError() bool { return true }

// Problem is one broken rule.
type Problem struct {
	Line, Col int
	Stage     string // "" for pipeline-level problems
	Field     string // e.g. exit.file_lines.min
	Msg       string
}

// validationError lists every broken rule of a pipeline file (exit 2).
type validationError struct {
	File     string
	Problems []Problem
}

func (e *validationError) Error() string {
	var lines []string
	for _, p := range e.Problems {
		where := e.File
		if p.Line > 0 {
			where = fmt.Sprintf("%s:%d:%d", e.File, p.Line, p.Col)
		}
		what := p.Msg
		if p.Field != "" {
			what = p.Field + " " + p.Msg
		}
		if p.Stage != "" {
			what = fmt.Sprintf("stage %q: %s", p.Stage, what)
		}
		lines = append(lines, where+": "+what)
	}
	return strings.Join(lines, "\n")
}

// UsageError marks bad input for the exit-code table.
func (e *validationError) UsageError() bool { return true }

// Load reads and validates path; prompt files are read relative to its
// folder.
func Load(path string) (*Pipeline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &parseError{File: path, Msg: err.Error()}
	}
	dir := filepath.Dir(path)
	return parse(path, b, func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return os.ReadFile(name)
	})
}

// parse parses and validates pipeline text. name is used in errors;
// readFile reads a stage's prompt_file (nil: prompt files are an error).
func parse(name string, b []byte, readFile func(string) ([]byte, error)) (*Pipeline, error) {
	var p Pipeline
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &parseError{File: name, Msg: "the file is empty (it needs name and stages)"}
	}
	if err := yaml.UnmarshalWithOptions(b, &p, yaml.Strict()); err != nil {
		pe := &parseError{File: name, Msg: err.Error()}
		var ye yaml.Error
		if errors.As(err, &ye) {
			pe.Msg = strings.TrimSpace(ye.GetMessage())
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				pe.Line, pe.Col = tk.Position.Line, tk.Position.Column
			}
		}
		return nil, pe
	}
	p.File = name
	f, _ := parser.ParseBytes(b, 0)
	v := &validator{file: f}
	p.validate(v, readFile)
	if len(v.problems) > 0 {
		return nil, &validationError{File: name, Problems: v.problems}
	}
	return &p, nil
}

type validator struct {
	file     *ast.File
	problems []Problem
}

// add records a problem at the YAML node of path (or the nearest parent
// that exists).
func (v *validator) add(path, stage, field, format string, a ...any) {
	pr := Problem{Stage: stage, Field: field, Msg: fmt.Sprintf(format, a...)}
	pr.Line, pr.Col = v.pos(path)
	v.problems = append(v.problems, pr)
}

func (v *validator) pos(path string) (int, int) {
	if v.file == nil {
		return 0, 0
	}
	for p := path; p != "" && p != "$"; p = parentPath(p) {
		yp, err := yaml.PathString(p)
		if err != nil {
			continue
		}
		n, err := yp.FilterFile(v.file)
		if err != nil || n == nil {
			continue
		}
		if tk := n.GetToken(); tk != nil && tk.Position != nil {
			return tk.Position.Line, tk.Position.Column
		}
	}
	return 0, 0
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

var stageName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func (p *Pipeline) validate(v *validator, readFile func(string) ([]byte, error)) {
	if strings.TrimSpace(p.Name) == "" {
		v.add("$", "", "name", "is required")
	}
	if len(p.Stages) == 0 {
		v.add("$.stages", "", "stages", "must list at least one stage")
	}
	seen := map[string]bool{}
	for i := range p.Stages {
		s := &p.Stages[i]
		at := fmt.Sprintf("$.stages[%d]", i)
		id := s.Name
		if id == "" {
			id = fmt.Sprintf("#%d", i+1)
			v.add(at, id, "name", "is required")
		} else if !stageName.MatchString(s.Name) {
			v.add(at+".name", id, "name", "must be letters, digits, '-', '_' or '.' (it names commits and transcripts)")
		} else if seen[s.Name] {
			v.add(at+".name", id, "name", "is used by an earlier stage (stage names must be unique)")
		}
		seen[s.Name] = true
		switch {
		case s.Prompt != "" && s.PromptFile != "":
			v.add(at+".prompt_file", id, "prompt", "and prompt_file are both set: give one")
		case s.Prompt == "" && s.PromptFile == "":
			v.add(at, id, "prompt", "is required (inline text, or prompt_file)")
		case s.PromptFile != "":
			if readFile == nil {
				v.add(at+".prompt_file", id, "prompt_file", "cannot be read here")
				break
			}
			b, err := readFile(s.PromptFile)
			if err != nil {
				v.add(at+".prompt_file", id, "prompt_file", "%q cannot be read: %v", s.PromptFile, unwrapPathErr(err))
				break
			}
			s.Template = string(b)
			if strings.HasSuffix(s.PromptFile, ".txt") {
				s.Template = PRDPathTemplate(s.Template)
			}
		default:
			s.Template = s.Prompt
		}
		if s.Template != "" {
			field, path := "prompt", at+".prompt"
			if s.PromptFile != "" {
				field, path = "prompt_file", at+".prompt_file"
			}
			if _, err := s.Render(engine.PromptData{Stage: s.Name}); err != nil {
				v.add(path, id, field, "template: %s", strings.TrimPrefix(err.Error(), fmt.Sprintf("stage %q: prompt template: ", s.Name)))
			}
		}
		if s.MaxIterations < 0 {
			v.add(at+".max_iterations", id, "max_iterations", "must be ≥ 1 (or left out for the run's --max-attempts)")
		}
		if s.Exit == nil {
			v.add(at, id, "exit", "is required (file_lines, dir_files, promise, command, all or any)")
			continue
		}
		s.Exit.validate(v, at+".exit", id, "exit")
	}
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
