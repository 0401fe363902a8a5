package engine

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ralph-loop/ralph/internal/git"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// A decision on a plan must come from a person. Two things keep an agent
// from making one:
//
//  1. `ralph approve` and `ralph reject` refuse to run inside an
//     iteration's process tree (fromIteration): the caller's environment,
//     and that of each of its ancestors, must not carry the variables ralph
//     gives every process it starts, and no ancestor may be the running
//     loop (the kernel's holder of the run lock) or an iteration's agent.
//     An agent can unset variables for its children, but not the record of
//     what it was itself started with (/proc/<pid>/environ), and ralph is
//     a subreaper: what an agent detaches with setsid or a double fork
//     stays below the loop.
//  2. The decision file is sealed with an HMAC whose key is a secret of the
//     run kept outside the repository, owner-only under
//     $XDG_STATE_HOME/ralph/keys, and never named to an agent. A decision
//     file an agent writes — or edits, or copies from an earlier plan —
//     does not carry a seal that matches; the run reports it and drops it.
//
// Signing files rather than keeping decisions in state.json keeps the
// channel between `ralph approve` and a running loop what it was (a file
// the loop reads before it next picks an item) without a second writer of
// the run's state, and a file in .ralph/ is exactly what an agent can
// write: the seal is what it cannot make. Without a sandbox an agent runs
// as the user and could go looking for the key; these checks make that a
// deliberate attack on ralph rather than a file it writes, and the
// refusal and the forged file are both recorded as tamper_detected events.

// decisionKeyFile is where the run's decision key is kept: outside the
// repository, one per repository and run id.
func decisionKeyFile(p Paths, runID string) (string, error) {
	return keptOutside(p, "\x00"+runID, ".key")
}

// KeptOutside is where ralph keeps a file of its own about the repository
// at p outside it, beside the run keys, so that an agent working in the
// repository does not come across it (the policy a run pinned).
func KeptOutside(p Paths, name string) (string, error) {
	return keptOutside(p, "", "."+name)
}

// keptOutside is $XDG_STATE_HOME/ralph/keys/<hash of the repository's
// identity, its root and tag><suffix>: a new repository at the path of an
// old one never finds the old one's keys or pinned policy.
func keptOutside(p Paths, tag, suffix string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no place for ralph's keys: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	root, err := filepath.Abs(p.Root)
	if err != nil {
		return "", err
	}
	at := func(id string) string {
		sum := sha256.Sum256([]byte(id + "\x00" + root + tag))
		return filepath.Join(base, "ralph", "keys", hex.EncodeToString(sum[:16])+suffix)
	}
	id := repoIdentity(root)
	path := at(id)
	if dir, rootCommit, _ := strings.Cut(id, "\x00"); rootCommit != "" {
		// What was kept before the repository's first commit stays its
		// own (an in-session loop in a new repository, say).
		if _, err := os.Stat(path); err != nil {
			if early := at(dir + "\x00"); fileExists(early) {
				return early, nil
			}
		}
	}
	return path, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// decisionKey reads the run's decision key, making it the first time
// (`ralph run` and `ralph approve` may each be first; a link that fails
// because the other made it meanwhile reads theirs).
func decisionKey(p Paths, runID string) ([]byte, error) {
	path, err := decisionKeyFile(p, runID)
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(path); err == nil && len(b) == 64 {
		return b, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(key))
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 64 {
		return nil, fmt.Errorf("reading ralph's decision key %s: %v", path, errors.Join(err, errors.New("not a key")))
	}
	return b, nil
}

// sealOf is the HMAC of fields under key, each field framed by its
// length so that no two lists of fields share a seal.
func sealOf(key []byte, fields ...string) string {
	m := hmac.New(sha256.New, key)
	for _, f := range fields {
		fmt.Fprintf(m, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// sealMatches reports whether seal is the seal of fields under key.
func sealMatches(key []byte, seal string, fields ...string) bool {
	got, err := hex.DecodeString(seal)
	want, _ := hex.DecodeString(sealOf(key, fields...))
	return err == nil && hmac.Equal(got, want)
}

// seal is the HMAC of everything a decision says, under the run's key.
func (d PlanDecision) seal(key []byte) string {
	return sealOf(key, d.Item, strconv.Itoa(d.Rev), strconv.FormatBool(d.Approve), d.Reason, d.At.UTC().Format(time.RFC3339Nano))
}

// sealed reports whether d carries the seal of the run's key.
func (d PlanDecision) sealed(key []byte) bool {
	return sealMatches(key, d.Seal, d.Item, strconv.Itoa(d.Rev), strconv.FormatBool(d.Approve), d.Reason, d.At.UTC().Format(time.RFC3339Nano))
}

// RunSeal seals fields with the run's key the way plan decisions are
// sealed: other files the run must be able to trust after a crash (the
// policy it started with, internal/policy) use it.
func RunSeal(p Paths, runID string, fields ...string) (string, error) {
	key, err := decisionKey(p, runID)
	if err != nil {
		return "", err
	}
	return sealOf(key, fields...), nil
}

// RunSealed reports whether seal is the run's seal of fields.
func RunSealed(p Paths, runID, seal string, fields ...string) (bool, error) {
	key, err := decisionKey(p, runID)
	if err != nil {
		return false, err
	}
	return sealMatches(key, seal, fields...), nil
}

// fromIteration says why the calling process is part of an iteration of
// the run (an agent, or something an agent started), or "" when it is not.
func fromIteration(p Paths, st *State) string {
	for _, k := range []string{"RALPH_RUN_ID", proc.TagEnv} {
		if os.Getenv(k) != "" {
			return k + " is set: it runs inside a ralph iteration"
		}
	}
	agents := map[int]int{}
	for _, c := range st.Current {
		if c.AgentPID > 0 {
			agents[c.AgentPID] = c.Iteration
		}
	}
	running, holder := ActiveRun(p)
	for _, pid := range proc.Ancestors(os.Getpid()) {
		switch {
		case running && pid == holder.PID:
			return fmt.Sprintf("it runs under the ralph run itself, pid %d", pid)
		case agents[pid] > 0:
			return fmt.Sprintf("it runs under the agent of iteration %d, pid %d", agents[pid], pid)
		case proc.EnvHasKey(pid, "RALPH_RUN_ID") || proc.EnvHasKey(pid, proc.TagEnv):
			return fmt.Sprintf("its ancestor pid %d was started by a ralph run", pid)
		}
	}
	return ""
}

// FromIteration says why this process runs inside an iteration of the
// run at p, or under the run itself ("" when it does not): what only a
// person may do (a worker's key) is refused there.
func FromIteration(p Paths) string {
	st, _, _ := LoadOrRebuildState(p)
	if st == nil {
		st = &State{}
	}
	return fromIteration(p, st)
}

// refuseFromIteration refuses a decision asked for from inside an
// iteration and records the attempt in the run's events.
func refuseFromIteration(p Paths, st *State, item string, approve bool) error {
	why := fromIteration(p, st)
	if why == "" {
		return nil
	}
	cmd := "ralph reject"
	if approve {
		cmd = "ralph approve"
	}
	msg := fmt.Sprintf("%s %s was called from inside an iteration (%s); refused: only a person decides on a plan", cmd, item, why)
	_ = store.AppendJSONL(p.Events, Event{Time: time.Now().UTC(), RunID: st.RunID, Type: "tamper_detected", Item: item, Message: msg})
	return usage.Errorf("%s", msg)
}

// identities caches each root's repository identity for the process.
var identities sync.Map

// repoIdentity is the identity (git.Repo.RepoID) of the repository at
// root, read once per process once it has a commit.
func repoIdentity(root string) string {
	if v, ok := identities.Load(root); ok {
		return v.(string)
	}
	id := (&git.Repo{Dir: root, Runner: proc.Exec{}}).RepoID(context.Background())
	if !strings.HasSuffix(id, "\x00") {
		identities.Store(root, id)
	}
	return id
}
