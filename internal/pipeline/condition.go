package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
)

// Condition is a stage's exit condition: exactly one of its fields is set.
type Condition struct {
	FileLines *FileLines  `yaml:"file_lines,omitempty"`
	DirFiles  *DirFiles   `yaml:"dir_files,omitempty"`
	Promise   *string     `yaml:"promise,omitempty"`
	Command   []string    `yaml:"command,omitempty"` // argv, never a shell string
	All       []Condition `yaml:"all,omitempty"`
	Any       []Condition `yaml:"any,omitempty"`
}

// FileLines is met when the file has at least Min lines.
type FileLines struct {
	Path string `yaml:"path"`
	Min  int    `yaml:"min"`
}

// DirFiles is met when the folder holds at least Min files (recursively)
// whose names match Glob (default every file).
type DirFiles struct {
	Path string `yaml:"path"`
	Min  int    `yaml:"min"`
	Glob string `yaml:"glob,omitempty"`
}

// Env is what a condition is evaluated against.
type Env struct {
	Dir       string // the work tree; condition paths are relative to it
	FinalText string // the agent's final message (promise conditions)
	Prompt    string // the prompt it was given (echoed promises do not count)
	Runner    proc.Runner
	Timeout   time.Duration // per command; 0 = 10 minutes
	Log       io.Writer     // command output goes here too
}

func (c *Condition) kinds() []string {
	var k []string
	if c.FileLines != nil {
		k = append(k, "file_lines")
	}
	if c.DirFiles != nil {
		k = append(k, "dir_files")
	}
	if c.Promise != nil {
		k = append(k, "promise")
	}
	if c.Command != nil {
		k = append(k, "command")
	}
	if c.All != nil {
		k = append(k, "all")
	}
	if c.Any != nil {
		k = append(k, "any")
	}
	return k
}

func (c *Condition) validate(v *validator, at, stage, field string) {
	k := c.kinds()
	if len(k) == 0 {
		v.add(at, stage, field, "needs one of file_lines, dir_files, promise, command, all, any")
		return
	}
	if len(k) > 1 {
		v.add(at, stage, field, "has %s: give exactly one condition (combine them with all: or any:)", strings.Join(k, " and "))
		return
	}
	switch k[0] {
	case "file_lines":
		checkPath(v, at+".file_lines.path", stage, field+".file_lines.path", c.FileLines.Path)
		if c.FileLines.Min < 1 {
			v.add(at+".file_lines.min", stage, field+".file_lines.min", "must be ≥ 1")
		}
	case "dir_files":
		checkPath(v, at+".dir_files.path", stage, field+".dir_files.path", c.DirFiles.Path)
		if c.DirFiles.Min < 1 {
			v.add(at+".dir_files.min", stage, field+".dir_files.min", "must be ≥ 1")
		}
		if c.DirFiles.Glob != "" {
			if _, err := filepath.Match(c.DirFiles.Glob, "x"); err != nil {
				v.add(at+".dir_files.glob", stage, field+".dir_files.glob", "%q is not a valid glob: %v", c.DirFiles.Glob, err)
			}
		}
	case "promise":
		p := strings.TrimSpace(*c.Promise)
		if p == "" {
			v.add(at+".promise", stage, field+".promise", "must not be empty")
		} else if strings.ContainsAny(p, "<>\n") {
			v.add(at+".promise", stage, field+".promise", "is the text inside the tags (DONE, not <promise>DONE</promise>) and fits on one line")
		}
	case "command":
		if len(c.Command) == 0 || strings.TrimSpace(c.Command[0]) == "" {
			v.add(at+".command", stage, field+".command", "must be an argv list with the program first, e.g. [go, test, ./...]")
		}
	case "all", "any":
		list := c.All
		if k[0] == "any" {
			list = c.Any
		}
		if len(list) == 0 {
			v.add(at+"."+k[0], stage, field+"."+k[0], "must list at least one condition")
		}
		for i := range list {
			list[i].validate(v, fmt.Sprintf("%s.%s[%d]", at, k[0], i), stage, fmt.Sprintf("%s.%s[%d]", field, k[0], i))
		}
	}
}

func checkPath(v *validator, at, stage, field, p string) {
	switch {
	case strings.TrimSpace(p) == "":
		v.add(at, stage, field, "is required")
	case filepath.IsAbs(p):
		v.add(at, stage, field, "%q must be relative to the repository root", p)
	case filepath.Clean(p) == ".." || strings.HasPrefix(filepath.Clean(p), ".."+string(filepath.Separator)):
		v.add(at, stage, field, "%q leaves the repository", p)
	}
}

// Promises returns the promise texts the condition looks for.
func (c *Condition) Promises() []string {
	if c == nil {
		return nil
	}
	var out []string
	if c.Promise != nil {
		out = append(out, strings.TrimSpace(*c.Promise))
	}
	for i := range c.All {
		out = append(out, c.All[i].Promises()...)
	}
	for i := range c.Any {
		out = append(out, c.Any[i].Promises()...)
	}
	return out
}

// Commands lists the command conditions' command lines (argv quoted as a
// shell would read them), in and under c.
func (c *Condition) Commands() []string {
	if c == nil {
		return nil
	}
	var out []string
	if c.Command != nil {
		out = append(out, proc.QuoteArgv(c.Command))
	}
	for i := range c.All {
		out = append(out, c.All[i].Commands()...)
	}
	for i := range c.Any {
		out = append(out, c.Any[i].Commands()...)
	}
	return out
}

// Describe renders the condition for people (`ralph pipeline show`, the
// prompt's acceptance criteria).
func (c *Condition) Describe() string {
	switch {
	case c == nil:
		return "(none)"
	case c.FileLines != nil:
		return fmt.Sprintf("%s has at least %d lines", c.FileLines.Path, c.FileLines.Min)
	case c.DirFiles != nil:
		g := ""
		if c.DirFiles.Glob != "" && c.DirFiles.Glob != "*" {
			g = " matching " + c.DirFiles.Glob
		}
		return fmt.Sprintf("%s/ holds at least %d files%s", strings.TrimSuffix(c.DirFiles.Path, "/"), c.DirFiles.Min, g)
	case c.Promise != nil:
		return fmt.Sprintf("the final message ends with <promise>%s</promise>", strings.TrimSpace(*c.Promise))
	case c.Command != nil:
		return fmt.Sprintf("`%s` exits 0", proc.QuoteArgv(c.Command))
	case c.All != nil:
		return "all of: " + joinDescribe(c.All)
	case c.Any != nil:
		return "any of: " + joinDescribe(c.Any)
	}
	return "(none)"
}

func joinDescribe(list []Condition) string {
	var parts []string
	for i := range list {
		d := list[i].Describe()
		if list[i].All != nil || list[i].Any != nil {
			d = "(" + d + ")"
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, "; ")
}

// Eval checks the condition. detail says why it is met, or what is
// missing: the retry context of the next iteration ("architecture.md has
// 12 lines, needs 50").
func (c *Condition) Eval(ctx context.Context, env Env) (met bool, detail string) {
	switch {
	case c == nil:
		return true, "no exit condition"
	case c.FileLines != nil:
		return evalFileLines(env, c.FileLines)
	case c.DirFiles != nil:
		return evalDirFiles(env, c.DirFiles)
	case c.Promise != nil:
		want := strings.TrimSpace(*c.Promise)
		if engine.DetectPromise(env.FinalText, want, env.Prompt) {
			return true, fmt.Sprintf("the final message carries <promise>%s</promise>", want)
		}
		return false, fmt.Sprintf("the final message does not end with <promise>%s</promise> (it is looked for in the last message only, outside code blocks)", want)
	case c.Command != nil:
		return evalCommand(ctx, env, c.Command)
	case c.All != nil:
		var fails, oks []string
		for i := range c.All {
			ok, d := c.All[i].Eval(ctx, env)
			if ok {
				oks = append(oks, d)
			} else {
				fails = append(fails, d)
			}
		}
		if len(fails) > 0 {
			return false, strings.Join(fails, "\n")
		}
		return true, strings.Join(oks, "; ")
	case c.Any != nil:
		var fails []string
		for i := range c.Any {
			ok, d := c.Any[i].Eval(ctx, env)
			if ok {
				return true, d
			}
			fails = append(fails, d)
		}
		return false, "none of these holds:\n- " + strings.Join(fails, "\n- ")
	}
	return false, "empty condition"
}

func evalFileLines(env Env, fl *FileLines) (bool, string) {
	b, err := store.ReadFileLimit(filepath.Join(env.Dir, fl.Path), 64<<20)
	if err != nil {
		if os.IsNotExist(err) {
			return false, fmt.Sprintf("%s does not exist, needs %d lines", fl.Path, fl.Min)
		}
		return false, fmt.Sprintf("%s cannot be read (%v), needs %d lines", fl.Path, unwrapPathErr(err), fl.Min)
	}
	n := countLines(b)
	if n >= fl.Min {
		return true, fmt.Sprintf("%s has %d lines (≥ %d)", fl.Path, n, fl.Min)
	}
	return false, fmt.Sprintf("%s has %d %s, needs %d", fl.Path, n, plural(n, "line"), fl.Min)
}

// countLines counts lines as `wc -l` would, plus a last line without a
// newline.
func countLines(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

func evalDirFiles(env Env, df *DirFiles) (bool, string) {
	root := filepath.Join(env.Dir, df.Path)
	glob := df.Glob
	if glob == "" {
		glob = "*"
	}
	st, err := os.Stat(root)
	if err != nil || !st.IsDir() {
		return false, fmt.Sprintf("%s/ does not exist, needs %d files", strings.TrimSuffix(df.Path, "/"), df.Min)
	}
	n := 0
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			if ok, _ := filepath.Match(glob, d.Name()); ok {
				n++
			}
		}
		return nil
	})
	what := "files"
	if glob != "*" {
		what = "files matching " + glob
	}
	name := strings.TrimSuffix(df.Path, "/") + "/"
	if n >= df.Min {
		return true, fmt.Sprintf("%s holds %d %s (≥ %d)", name, n, what, df.Min)
	}
	return false, fmt.Sprintf("%s holds %d %s, needs %d", name, n, what, df.Min)
}

func evalCommand(ctx context.Context, env Env, argv []string) (bool, string) {
	if env.Runner == nil {
		env.Runner = proc.Exec{}
	}
	timeout := env.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	var out bytes.Buffer
	var w io.Writer = &out
	if env.Log != nil {
		fmt.Fprintf(env.Log, "\n[ralph] exit condition: %s\n", proc.QuoteArgv(argv))
		w = io.MultiWriter(&out, env.Log)
	}
	r, err := env.Runner.Run(ctx, proc.Cmd{Argv: argv, Dir: env.Dir, Stdout: w, Stderr: w, Stdin: strings.NewReader(""), Timeout: timeout})
	q := proc.QuoteArgv(argv)
	if err != nil {
		return false, fmt.Sprintf("`%s` could not run: %v", q, err)
	}
	if r.TimedOut {
		return false, fmt.Sprintf("`%s` timed out after %s:\n%s", q, timeout, gate.Trim(out.String(), 2000))
	}
	if r.ExitCode != 0 {
		return false, fmt.Sprintf("`%s` exited %d:\n%s", q, r.ExitCode, gate.Trim(out.String(), 2000))
	}
	return true, fmt.Sprintf("`%s` exited 0", q)
}

func plural(n int, w string) string {
	if n == 1 {
		return w
	}
	return w + "s"
}
