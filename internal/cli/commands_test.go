package cli

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/proc"
)

// testFactory fails the test on any process it would start: flag parsing
// alone must run nothing.
func testFactory(t *testing.T) *Factory {
	ios, _, _, _ := iostreams.Test()
	return &Factory{IO: ios, Getwd: func() (string, error) { return t.TempDir(), nil }, Runner: proc.NewFakeRunner(t)}
}

// parse runs cmd with args; runF has captured the options.
func parse(t *testing.T, cmd *cobra.Command, args ...string) {
	t.Helper()
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%s %v: %v", cmd.Name(), args, err)
	}
}

func TestRunFlags(t *testing.T) {
	f := testFactory(t)
	var got *RunOptions
	parse(t, newCmdRun(f, func(o *RunOptions) error { got = o; return nil }),
		"ralph/runs/r1", "--prd", "p.json", "--agent", "cmd", "--agent-cmd", "python3 a.py", "--agent-arg", "-x", "--agent-arg", "-y",
		"--max-iterations", "7", "--max-attempts", "2", "--iteration-timeout", "90s", "--parallel", "3", "--breaker", "0",
		"--max-cost", "1.5", "--max-tokens", "1000", "--promise", "DONE", "--dry-run", "--json", "--allow-dirty",
		"--tasks", "t.jsonl", "--watch", "--interval", "5s", "--gate", "test=go test ./...")
	if got.RunDir != "ralph/runs/r1" || got.PRD != "p.json" || got.Agent != "cmd" || got.AgentCmd != "python3 a.py" ||
		strings.Join(got.AgentArgs, " ") != "-x -y" || got.MaxIterations != 7 || got.MaxAttempts != 2 ||
		got.IterationTimeout != 90*time.Second || got.Parallel != 3 || got.Breaker != 0 || got.MaxCost != 1.5 ||
		got.MaxTokens != 1000 || got.Promise != "DONE" || !got.DryRun || !got.JSON || !got.AllowDirty ||
		got.Tasks != "t.jsonl" || !got.Watch || got.Interval != 5*time.Second || strings.Join(got.Gates, ",") != "test=go test ./..." {
		t.Fatalf("options %+v", got)
	}
	if !got.flagSet("parallel") || got.flagSet("model") {
		t.Fatal("flagSet does not tell given flags from defaults")
	}
	parse(t, newCmdRun(f, func(o *RunOptions) error { got = o; return nil }))
	if got.Parallel != 1 || got.Breaker != 5 || got.Interval != 30*time.Second || got.Watch {
		t.Fatalf("defaults %+v", got)
	}
}

func TestSmallCommandFlags(t *testing.T) {
	f := testFactory(t)
	var status *StatusOptions
	parse(t, newCmdStatus(f, func(o *StatusOptions) error { status = o; return nil }), "--json")
	var stop *StopOptions
	parse(t, newCmdStop(f, func(o *StopOptions) error { stop = o; return nil }))
	var clean *CleanOptions
	parse(t, newCmdClean(f, func(o *CleanOptions) error { clean = o; return nil }), "--force", "--dry-run")
	var demo *DemoOptions
	parse(t, newCmdDemo(f, func(o *DemoOptions) error { demo = o; return nil }), "--dir", "/tmp/d")
	var ini *InitOptions
	parse(t, newCmdInit(f, func(o *InitOptions) error { ini = o; return nil }), "--force")
	if !status.JSON || stop == nil || !clean.Force || !clean.DryRun || demo.Dir != "/tmp/d" || !ini.Force {
		t.Fatalf("status %+v stop %v clean %+v demo %+v init %+v", status, stop, clean, demo, ini)
	}
}

func TestPRDFlags(t *testing.T) {
	f := testFactory(t)
	var n *PRDNewOptions
	parse(t, newCmdPRDNew(f, func(o *PRDNewOptions) error { n = o; return nil }), "--project", "p", "--feature", "x", "-o", "-", "--force")
	var v *PRDValidateOptions
	parse(t, newCmdPRDValidate(f, func(o *PRDValidateOptions) error { v = o; return nil }), "other.json")
	var im *PRDImportOptions
	parse(t, newCmdPRDImport(f, func(o *PRDImportOptions) error { im = o; return nil }), "spec.md", "-o", "out.json", "--dry-run", "--force", "--agent", "codex", "--model", "m", "--timeout", "90s")
	if n.Project != "p" || n.Feature != "x" || n.Output != "-" || !n.Force || v.File != "other.json" {
		t.Fatalf("new %+v validate %+v", n, v)
	}
	if im.Input != "spec.md" || im.Output != "out.json" || !im.DryRun || !im.Force || im.Agent != "codex" || im.Model != "m" || im.Timeout != 90*time.Second {
		t.Fatalf("import %+v", im)
	}
	if names := subcommands(newCmdPRD(f)); names != "import new validate" {
		t.Fatalf("prd subcommands %q", names)
	}
}

func TestTaskFlags(t *testing.T) {
	f := testFactory(t)
	var got *TaskOptions
	capture := func(o *TaskOptions) error { got = o; return nil }
	for _, tc := range []struct {
		cmd   *cobra.Command
		args  []string
		check func(o *TaskOptions) bool
	}{
		{newCmdTaskAdd(f, capture), []string{"A.3", "add logout", "--parent", "A", "--json", "--file", "t.jsonl"}, func(o *TaskOptions) bool {
			return o.ID == "A.3" && o.Title == "add logout" && o.Parent == "A" && o.JSON && o.File == "t.jsonl"
		}},
		{newCmdTaskAdd(f, capture), []string{"write docs"}, func(o *TaskOptions) bool { return o.ID == "" && o.Title == "write docs" }},
		{newCmdTaskSplit(f, capture), []string{"A.2", "one", "two"}, func(o *TaskOptions) bool {
			return o.ID == "A.2" && strings.Join(o.Titles, "|") == "one|two"
		}},
		{newCmdTaskClaim(f, capture), []string{"A.1"}, func(o *TaskOptions) bool { return o.ID == "A.1" }},
		{newCmdTaskComplete(f, capture), []string{"A.1", "--commit", "abc"}, func(o *TaskOptions) bool { return o.ID == "A.1" && o.Commit == "abc" }},
		{newCmdTaskBlock(f, capture), []string{"A.1", "--reason", "needs a key"}, func(o *TaskOptions) bool { return o.Reason == "needs a key" }},
		{newCmdTaskRelease(f, capture), []string{"A.1"}, func(o *TaskOptions) bool { return o.ID == "A.1" }},
		{newCmdTaskList(f, capture), []string{"--status", "pending", "--json"}, func(o *TaskOptions) bool { return o.Status == "pending" && o.JSON }},
		{newCmdTaskTree(f, capture), nil, func(o *TaskOptions) bool { return o != nil }},
		{newCmdTaskNext(f, capture), []string{"--json"}, func(o *TaskOptions) bool { return o.JSON }},
		{newCmdTaskShow(f, capture), []string{"A", "--json"}, func(o *TaskOptions) bool { return o.ID == "A" && o.JSON }},
	} {
		got = nil
		parse(t, tc.cmd, tc.args...)
		if got == nil || !tc.check(got) {
			t.Errorf("%s %v: options %+v", tc.cmd.Name(), tc.args, got)
		}
	}
	if names := subcommands(newCmdTask(f)); names != "add block claim complete list next release show split tree" {
		t.Fatalf("task subcommands %q", names)
	}
}

func TestPipelineFlags(t *testing.T) {
	f := testFactory(t)
	var ini *PipelineInitOptions
	parse(t, newCmdPipelineInit(f, func(o *PipelineInitOptions) error { ini = o; return nil }), "pagent", "--prd", "spec.md", "--dir", "d", "--force")
	var validated, shown, shownDefault *PipelineFileOptions
	parse(t, newCmdPipelineValidate(f, func(o *PipelineFileOptions) error { validated = o; return nil }), "p.yaml")
	parse(t, newCmdPipelineShow(f, func(o *PipelineFileOptions) error { shown = o; return nil }), "q.yaml")
	parse(t, newCmdPipelineShow(f, func(o *PipelineFileOptions) error { shownDefault = o; return nil }))
	var start, startDefault *LoopStartOptions
	parse(t, newCmdPipelineStart(f, func(o *LoopStartOptions) error { start = o; return nil }), "pagent", "--max-iterations", "9")
	parse(t, newCmdPipelineStart(f, func(o *LoopStartOptions) error { startDefault = o; return nil }))
	if ini.Preset != "pagent" || ini.PRD != "spec.md" || ini.Dir != "d" || !ini.Force || validated.File != "p.yaml" ||
		shown.File != "q.yaml" || shownDefault.File != "" || start.Pipeline != "pagent" || start.MaxIterations != 9 ||
		startDefault.Pipeline != ".ralph/pipeline.yaml" || startDefault.MaxIterations != 50 {
		t.Fatalf("init %+v validate %+v show %+v / %+v start %+v / %+v", ini, validated, shown, shownDefault, start, startDefault)
	}
	if names := subcommands(newCmdPipeline(f)); names != "init show start validate" {
		t.Fatalf("pipeline subcommands %q", names)
	}
}

func TestHookAndLoopFlags(t *testing.T) {
	f := testFactory(t)
	var inst, uninst *HookInstallOptions
	parse(t, newCmdHookInstall(f, func(o *HookInstallOptions) error { inst = o; return nil }), "--codex", "--scope", "user", "--command", "ralph hook stop")
	parse(t, newCmdHookUninstall(f, func(o *HookInstallOptions) error { uninst = o; return nil }), "--claude")
	var plugin *HookPluginOptions
	parse(t, newCmdHookPlugin(f, func(o *HookPluginOptions) error { plugin = o; return nil }), "plug", "--command", "/bin/ralph")
	var stop *HookStopOptions
	parse(t, newCmdHookStop(f, func(o *HookStopOptions) error { stop = o; return nil }), "--timeout", "2m")
	var start *LoopStartOptions
	parse(t, newCmdLoopStart(f, func(o *LoopStartOptions) error { start = o; return nil }), "fix the bug", "--max-iterations", "4", "--completion-promise", "FIXED", "--check", "make test")
	var cancel *LoopCancelOptions
	parse(t, newCmdLoopCancel(f, func(o *LoopCancelOptions) error { cancel = o; return nil }))
	if !inst.Codex || inst.Scope != "user" || inst.Command != "ralph hook stop" || !uninst.Claude || !uninst.Remove ||
		plugin.Dir != "plug" || plugin.Command != "/bin/ralph" || stop.Timeout != 2*time.Minute ||
		start.Prompt != "fix the bug" || start.MaxIterations != 4 || start.Promise != "FIXED" || strings.Join(start.Checks, "") != "make test" || cancel == nil {
		t.Fatalf("install %+v uninstall %+v plugin %+v stop %+v start %+v", inst, uninst, plugin, stop, start)
	}
	if names := subcommands(newCmdHook(f)); names != "install plugin stop uninstall" {
		t.Fatalf("hook subcommands %q", names)
	}
	if names := subcommands(newCmdLoop(f)); names != "cancel start" {
		t.Fatalf("loop subcommands %q", names)
	}
}

func subcommands(c *cobra.Command) string {
	var names []string
	for _, s := range c.Commands() {
		names = append(names, s.Name())
	}
	return strings.Join(names, " ")
}

// The root lists every command, each in a group.
func TestRootListsEveryCommandInAGroup(t *testing.T) {
	root := newCmdRoot(testFactory(t))
	want := map[string]string{"run": groupWork, "status": groupWork, "log": groupWork, "watch": groupWork, "serve": groupWork, "pause": groupWork, "resume": groupWork, "stop": groupWork, "approve": groupWork, "reject": groupWork, "answer": groupWork, "review": groupWork, "plan": groupWork, "guide": groupWork, "retry": groupWork, "clean": groupWork, "demo": groupWork, "init": groupWork, "doctor": groupWork, "config": groupWork, "coordinator": groupWork, "worker": groupWork, "cluster": groupWork,
		"prd": groupFiles, "create-prd": groupFiles, "runs": groupFiles, "task": groupFiles, "pipeline": groupFiles, "roles": groupFiles, "hook": groupIntegrations, "loop": groupIntegrations, "mcp": groupIntegrations, "ask": groupIntegrations}
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if want[c.Name()] != c.GroupID {
			t.Errorf("%s is in group %q, want %q", c.Name(), c.GroupID, want[c.Name()])
		}
		delete(want, c.Name())
	}
	if len(want) != 0 {
		t.Errorf("missing commands: %v", want)
	}
}

// Command-line mistakes are one error type, exit 2, and point to the
// failing command's own help; nothing else gets that pointer.
func TestCommandLineErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
		help string
	}{
		{[]string{"run", "--nope"}, "unknown flag: --nope", "ralph run --help"},
		{[]string{"run", "--parallel", "x"}, `invalid argument "x" for "--parallel"`, "ralph run --help"},
		{[]string{"run", "a", "b"}, "accepts at most 1 arg(s), received 2", "ralph run --help"},
		{[]string{"frob"}, `unknown command "frob" for "ralph"`, "ralph --help"},
		{[]string{"task", "frob"}, `unknown command "frob" for "ralph task"`, "ralph task --help"},
		{[]string{"hook", "frob"}, `unknown command "frob" for "ralph hook"`, "ralph hook --help"},
		{[]string{"task", "comlete", "A"}, `unknown command "comlete" for "ralph task"; did you mean complete?`, "ralph task --help"},
		{[]string{"pipeline", "show", "a", "b"}, "accepts at most 1 arg(s), received 2", "ralph pipeline show --help"},
		{[]string{"loop", "start", "--max-iterations", "many"}, `invalid argument "many" for "--max-iterations"`, "ralph loop start --help"},
		{[]string{"prd", "new"}, "missing required flags --project, --feature", "ralph prd new --help"},
		{[]string{"task", "block", "A"}, "missing required flag --reason", "ralph task block --help"},
	} {
		ios, _, _, errb := iostreams.Test()
		f := &Factory{IO: ios, Getwd: func() (string, error) { return t.TempDir(), nil }, Runner: proc.NewFakeRunner(t)}
		code := run(f, tc.args)
		out := errb.String()
		if code != exitUsage || !strings.Contains(out, tc.msg) || !strings.Contains(out, "Run '"+tc.help+"' for usage.") {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, out)
		}
		if strings.Contains(out, "usage: ") {
			t.Errorf("%v: message prefixed with usage: %q", tc.args, out)
		}
	}
	// An input error is exit 2 without the pointer (it is not the command
	// line's fault), and no message starts with "usage:".
	ios, _, _, errb := iostreams.Test()
	dir := t.TempDir()
	f := &Factory{IO: ios, Getwd: func() (string, error) { return dir, nil }}
	if code := run(f, []string{"status"}); code != exitUsage || strings.Contains(errb.String(), "--help") || strings.Contains(errb.String(), "usage:") {
		t.Errorf("status outside a repo: exit %d, %q", code, errb.String())
	}
	var ce *commandLineError
	if errors.As(errors.New("unknown flag: --x"), &ce) {
		t.Fatal("a plain error became a command-line error")
	}
}

// `ralph run --help` shows each value flag with its value's name and a
// boolean flag with none.
func TestRunHelpPlaceholders(t *testing.T) {
	ios, _, out, _ := iostreams.Test()
	f := &Factory{IO: ios, Getwd: func() (string, error) { return t.TempDir(), nil }, Runner: proc.NewFakeRunner(t)}
	if code := run(f, []string{"run", "--help"}); code != exitOK {
		t.Fatalf("ralph run --help: exit %d", code)
	}
	help := out.String()
	for flag, want := range map[string]string{
		"pipeline": "--pipeline FILE", "prd": "--prd FILE", "tasks": "--tasks FILE", "interval": "--interval DURATION",
		"agent": "--agent NAME", "agent-cmd": "--agent-cmd ARGV", "script": "--script FILE", "model": "--model NAME",
		"gate": "--gate NAME=COMMAND", "max-iterations": "--max-iterations N", "max-cost": "--max-cost USD",
		"iteration-timeout": "--iteration-timeout DURATION",
		"watch":             "--watch", "dry-run": "--dry-run", "json": "--json", "allow-dirty": "--allow-dirty",
	} {
		if got := flagColumn(help, flag); got != want {
			t.Errorf("ralph run --help shows %q, want %q", got, want)
		}
	}
}

// flagColumn is the flag part of --name's line in help ("--name VALUE"):
// the text before the gap that starts the description.
func flagColumn(help, name string) string {
	for _, line := range strings.Split(help, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "--"+name+" ") {
			continue
		}
		col, _, _ := strings.Cut(line, "  ")
		return col
	}
	return ""
}

// Across the whole tree, a value flag's name in help is a placeholder
// written in its usage (pflag otherwise shows the Go type: "string",
// "duration"), and a boolean flag shows none.
func TestEveryFlagHasAPlaceholder(t *testing.T) {
	placeholder := regexp.MustCompile(`^[A-Z][A-Z0-9_=]*$`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(fl)
			switch {
			case fl.Name == "help" || fl.Name == "version":
			case fl.Value.Type() == "bool" && name != "":
				t.Errorf("%s --%s is a boolean but shows the value name %q", c.CommandPath(), fl.Name, name)
			case fl.Value.Type() != "bool" && !placeholder.MatchString(name):
				t.Errorf("%s --%s shows %q, not a placeholder", c.CommandPath(), fl.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newCmdRoot(testFactory(t)))
}
