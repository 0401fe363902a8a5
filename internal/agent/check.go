package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// Checker is an agent that can tell, before a run writes anything, whether
// it can start: its program is installed (and which version), its key or
// script is there. Check returns what it found; its error says how to fix
// what is missing.
type Checker interface {
	Check(ctx context.Context, model string) (found string, err error)
}

// Check runs the CLI's --version: installed, and which version.
func (b *cliBase) Check(ctx context.Context, _ string) (string, error) {
	argv := b.argvPrefix()
	path := argv[0]
	if len(b.Command) == 0 {
		p, err := FindAgentBinary(b.info.bin)
		if err != nil {
			return "", fmt.Errorf("%s is not installed (not in %s or $PATH): npm install -g %s", b.info.bin, AgentsBinDir(), b.info.pkg)
		}
		path = p
	} else if _, err := lookProgram(path, ""); err != nil {
		return "", err
	}
	r := b.Runner
	if r == nil {
		r = proc.Exec{}
	}
	var out, errOut strings.Builder
	res, err := r.Run(ctx, proc.Cmd{Argv: []string{path, "--version"}, Stdout: &out, Stderr: &errOut, Timeout: versionTimeout})
	if err == nil && res.ExitCode != 0 && !res.TimedOut {
		err = &proc.ExitError{Cmd: path + " --version", Code: res.ExitCode, Stderr: strings.TrimSpace(errOut.String()), Stdout: out.String()}
	}
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case res.TimedOut:
		// Installed, only slow to start (a loaded machine, a CLI that
		// checks for updates first): not a reason to refuse the run.
		return fmt.Sprintf("%s (%s): its --version did not answer within %s, so its version is unknown (a slow start, not a missing CLI)",
			b.info.bin, path, versionTimeout), nil
	case err != nil:
		return "", fmt.Errorf("%s --version failed (%v): reinstall it with npm install -g %s", path, err, b.info.pkg)
	}
	return fmt.Sprintf("%s %s (%s)", b.info.bin, firstLineOf(out.String()), path), nil
}

// versionTimeout bounds a CLI's --version in the preflight.
var versionTimeout = 20 * time.Second

// Check finds the command's program.
func (c *cmd) Check(context.Context, string) (string, error) {
	p, err := lookProgram(c.Argv[0], "")
	if err != nil {
		return "", err
	}
	return "command " + p, nil
}

// Check reads the script.
func (s *scripted) Check(context.Context, string) (string, error) {
	if s.Path == "" {
		return "built-in script", nil
	}
	if _, err := os.Stat(s.Path); err != nil {
		return "", fmt.Errorf("the script %s: %v", s.Path, err)
	}
	return "script " + s.Path, nil
}

// Check resolves the provider, model and key as a run would.
func (n *Native) Check(_ context.Context, model string) (string, error) {
	r, err := n.resolve(Request{Model: model})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s model %s at %s", r.provider, r.model, r.baseURL), nil
}

// lookProgram finds argv0 as a shell would: a path (relative to dir when
// not absolute) must exist and be executable; a bare name must be on
// $PATH. The error says what to do.
func lookProgram(argv0, dir string) (string, error) {
	if strings.ContainsRune(argv0, '/') {
		p := argv0
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		st, err := os.Stat(p)
		switch {
		case err != nil:
			return "", fmt.Errorf("%s does not exist", argv0)
		case st.IsDir():
			return "", fmt.Errorf("%s is a folder, not a program", argv0)
		case st.Mode()&0o111 == 0:
			return "", fmt.Errorf("%s is not executable: chmod +x %s", argv0, argv0)
		}
		return p, nil
	}
	p, err := exec.LookPath(argv0)
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%s is not on $PATH: install it, or put its folder on $PATH", argv0)
	}
	return p, err
}

// LookProgram is lookProgram for the preflight of gate commands.
func LookProgram(argv0, dir string) (string, error) { return lookProgram(argv0, dir) }

func firstLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
