package proc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
)

// Interactive runs a person's program in the foreground — their $EDITOR —
// with c's streams (the terminal): in ralph's own process group, so it may
// read the terminal, with no timeout and no confinement (it is the
// person's, not an agent's). The exit status is in Result.ExitCode.
func Interactive(ctx context.Context, c Cmd) (Result, error) {
	if len(c.Argv) == 0 {
		return Result{}, errors.New("proc: empty argv")
	}
	argv := c.Argv
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("%w: %s", ErrNotFound, argv[0])
	}
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return Result{ExitCode: ee.ExitCode()}, nil
	}
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	return Result{}, nil
}
