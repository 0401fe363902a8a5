package source

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/tasks"
)

// The task files as a claim left them are what the agent's changes to
// them are judged against (tasks.ValidateChanges: the flags only a person
// sets — "critical", "allow_test_changes" — and the tree's rules). Kept
// only in memory, they were lost with ralph: an agent that set
// "allow_test_changes" on its own task and then killed ralph had the
// rerun start from its edit, and could then lose tests freely. So the
// claim's copy is also kept outside the repository, beside the run's key,
// and sealed with it (engine.RunSeal); the rerun's next claim of the same
// task, or its re-verification, judges against that copy. Verify drops it
// once it has judged (and, where needed, restored) the files.

// keptClaim is the marker naming the kept copies: the run and task they
// belong to and the hash of each file's bytes, under the run's seal.
type keptClaim struct {
	RunID     string `json:"run_id"`
	Item      string `json:"item"`
	HasActive bool   `json:"has_active"`
	HasDone   bool   `json:"has_done"`
	Active    string `json:"active_sha256"`
	Done      string `json:"done_sha256"`
	Seal      string `json:"seal"`
}

func (k keptClaim) fields() []string {
	return []string{"tasks-claim", k.RunID, k.Item, strconv.FormatBool(k.HasActive), strconv.FormatBool(k.HasDone), k.Active, k.Done}
}

func sum256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// keptClaimPath is the marker's path; the copies are beside it with
// ".active" and ".done" appended.
func (s *Tasks) keptClaimPath() (string, error) {
	return engine.KeptOutside(engine.Paths{Root: s.Root}, "tasks-claim.json")
}

// keepClaim keeps snap (the files as the claim of item left them) for
// run runID. The copies go first, so the marker never names bytes that
// are not there; no fsync: this guards against ralph being killed, and
// a marker whose copies do not hash to its sums is ignored.
func (s *Tasks) keepClaim(runID, item string, snap fileSnap) error {
	if runID == "" {
		return nil
	}
	path, err := s.keptClaimPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	k := keptClaim{RunID: runID, Item: item, HasActive: snap.HasActive, HasDone: snap.HasDone,
		Active: sum256(snap.Active), Done: sum256(snap.Done)}
	if k.Seal, err = engine.RunSeal(engine.Paths{Root: s.Root}, runID, k.fields()...); err != nil {
		return err
	}
	for _, c := range []struct {
		suffix string
		data   []byte
	}{{".active", snap.Active}, {".done", snap.Done}} {
		if err := store.WriteFileNoSync(path+c.suffix, c.data, 0o600); err != nil {
			return err
		}
	}
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return store.WriteFileNoSync(path, b, 0o600)
}

// errKeptClaimForged: a marker for this run and task whose seal or bytes
// do not match (someone but ralph wrote it).
var errKeptClaimForged = errors.New("the kept copy of the task files does not carry the run's seal")

// keptClaimOf returns the files as the claim of item in run runID left
// them, when ralph kept them (ok false: no copy for this run and task).
func (s *Tasks) keptClaimOf(runID, item string) (fileSnap, bool, error) {
	path, err := s.keptClaimPath()
	if err != nil || runID == "" {
		return fileSnap{}, false, err
	}
	var k keptClaim
	if err := store.ReadJSON(path, &k); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fileSnap{}, false, nil
		}
		return fileSnap{}, false, fmt.Errorf("%w (%v)", errKeptClaimForged, err)
	}
	if k.RunID != runID || k.Item != item {
		return fileSnap{}, false, nil // another run's or task's: the claim was not cut short
	}
	ok, err := engine.RunSealed(engine.Paths{Root: s.Root}, runID, k.Seal, k.fields()...)
	if err != nil {
		return fileSnap{}, false, err
	}
	if !ok {
		return fileSnap{}, false, errKeptClaimForged
	}
	snap := fileSnap{ActivePath: s.File, DonePath: s.Store.DonePath, HasActive: k.HasActive, HasDone: k.HasDone}
	if snap.Active, err = os.ReadFile(path + ".active"); err != nil {
		return fileSnap{}, false, fmt.Errorf("%w (%v)", errKeptClaimForged, err)
	}
	if snap.Done, err = os.ReadFile(path + ".done"); err != nil {
		return fileSnap{}, false, fmt.Errorf("%w (%v)", errKeptClaimForged, err)
	}
	if sum256(snap.Active) != k.Active || sum256(snap.Done) != k.Done {
		return fileSnap{}, false, errKeptClaimForged
	}
	if !snap.HasActive {
		snap.Active = nil
	}
	if !snap.HasDone {
		snap.Done = nil
	}
	return snap, true, nil
}

// dropKeptClaim removes the kept copy once Verify has judged against it.
func (s *Tasks) dropKeptClaim() {
	path, err := s.keptClaimPath()
	if err != nil {
		return
	}
	for _, p := range []string{path, path + ".active", path + ".done"} {
		_ = os.Remove(p)
	}
}

// claimAgain is the claim of a task an earlier iteration of this run
// claimed and never saw verified (ralph was killed while its agent ran):
// the iteration starts from the files as that claim left them, and the
// agent's edits since, when they break the rules, are undone now and
// reported with the next verdict. ok false: there is no such claim.
func (s *Tasks) claimAgain(runID, item string) (ok bool) {
	ok, err := s.judgeAgainstKept(runID, item)
	if err != nil {
		s.carried = append(s.carried, fmt.Sprintf("the task files were judged as they are: %v", err))
		return false
	}
	if !ok {
		return false
	}
	now, err := s.Store.Load()
	if err == nil {
		err = tasks.ValidateChanges(s.beforeSet, now)
	}
	if err != nil {
		if rerr := s.restoreSnap(s.before); rerr != nil {
			s.carried = append(s.carried, fmt.Sprintf("restoring %s failed: %v", filepath.Base(s.File), rerr))
			return true
		}
		s.carried = append(s.carried, fmt.Sprintf("invalid changes to %s made before ralph was stopped were undone: %v", filepath.Base(s.File), firstLine(err.Error())))
	}
	return true
}

// judgeAgainstKept sets the iteration's "before" to the claim of item
// that ralph kept for run runID, when an iteration of it was cut short:
// the agent's edits of the task files since that claim are then judged
// (and undone) like any other. It reports whether there was such a copy;
// a forged one is an error the caller reports as tampering.
func (s *Tasks) judgeAgainstKept(runID, item string) (bool, error) {
	snap, ok, err := s.keptClaimOf(runID, item)
	if err != nil || !ok {
		return false, err
	}
	set, err := s.Store.LoadBytes(snap.Active, snap.Done)
	if err != nil {
		return false, err
	}
	s.before, s.beforeSet = snap, set
	return true, nil
}
