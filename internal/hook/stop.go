package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// Input is what Claude Code (and Codex) send a Stop hook on stdin.
type Input struct {
	SessionID            string `json:"session_id"`
	TranscriptPath       string `json:"transcript_path"`
	Cwd                  string `json:"cwd"`
	HookEventName        string `json:"hook_event_name"`
	StopHookActive       bool   `json:"stop_hook_active"`
	LastAssistantMessage string `json:"last_assistant_message"`
}

// ReadInput parses the hook's stdin (bounded: a hook must never hang or
// balloon on odd input).
func ReadInput(r io.Reader) (Input, error) {
	var in Input
	b, err := io.ReadAll(io.LimitReader(r, 32<<20))
	if err != nil {
		return in, fmt.Errorf("reading hook input: %w", err)
	}
	if len(b) == 0 {
		return in, errors.New("empty hook input (expected the Stop hook's JSON on stdin)")
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("hook input is not JSON: %w", err)
	}
	if in.HookEventName != "" && in.HookEventName != "Stop" && in.HookEventName != "SubagentStop" {
		return in, fmt.Errorf("hook input is for %q, not Stop", in.HookEventName)
	}
	return in, nil
}

// Armed is .ralph/hook.json: a loop armed for the Stop hook.
type Armed struct {
	Kind              string    `json:"kind"` // loop | prd | pipeline
	Path              string    `json:"path,omitempty"`
	Prompt            string    `json:"prompt,omitempty"`
	Promise           string    `json:"promise"`
	MaxIterations     int       `json:"max_iterations"`
	Checks            []string  `json:"checks,omitempty"`
	SessionID         string    `json:"session_id,omitempty"` // recorded at the first hook call
	ConsecutiveBlocks int       `json:"consecutive_blocks"`
	LimitReached      bool      `json:"claude_block_limit_reached,omitempty"`
	ArmedAt           time.Time `json:"armed_at"`
	Agent             string    `json:"agent,omitempty"`
	// AllowFailingBaseline is read from the files older versions wrote; a
	// failing base is work now, never blamed on any story, and it does
	// nothing.
	AllowFailingBaseline bool `json:"allow_failing_baseline,omitempty"`
	// NoSandbox: the loop was armed with --no-sandbox, so its gates run
	// unconfined.
	NoSandbox bool `json:"no_sandbox,omitempty"`
	// TrustMarks: the loop was armed with --trust-marks: a PRD's stories
	// marked passed by hand count as passed.
	TrustMarks bool `json:"trust_marks,omitempty"`
}

// claudeBlockLimit is how many consecutive blocks Claude Code accepts
// before it stops on its own.
const claudeBlockLimit = 8

// ArmedPath is where the armed loop lives in a repo.
func ArmedPath(root string) string { return filepath.Join(root, ".ralph", "hook.json") }

// LoadArmed returns the armed loop, or nil.
func LoadArmed(root string) (*Armed, error) {
	var a Armed
	err := store.ReadJSON(ArmedPath(root), &a)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Save writes the armed loop atomically.
func (a *Armed) Save(root string) error { return store.WriteJSON(ArmedPath(root), a) }

// Disarm removes the armed loop.
func Disarm(root string) error {
	err := os.Remove(ArmedPath(root))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Scope decides whether a hook call belongs to the armed loop. The first
// call records its session; another session is never blocked — except
// right after Claude's block limit stopped the loop's session, when the
// next session (`claude -p --continue`) takes the loop over. A call
// without a session id never changes the owner: it belongs to the loop
// only while the loop has none.
func (a *Armed) Scope(sessionID string) (mine bool, adopted bool) {
	switch {
	case sessionID == "":
		return a.SessionID == "", false
	case a.SessionID == "":
		a.SessionID = sessionID
		return true, false
	case a.SessionID == sessionID:
		return true, false
	case a.LimitReached:
		a.SessionID = sessionID
		a.LimitReached = false
		a.ConsecutiveBlocks = 0
		return true, true
	}
	return false, false
}

// Blocked records one more block; stopHookActive false means the user
// spoke in between, which resets Claude's count.
func (a *Armed) Blocked(stopHookActive bool) {
	if !stopHookActive {
		a.ConsecutiveBlocks = 0
	}
	a.ConsecutiveBlocks++
	a.LimitReached = a.ConsecutiveBlocks >= claudeBlockLimit
}

// Decision is the block reply (Claude Code and Codex read the same shape).
type Decision struct {
	Decision      string `json:"decision"`
	Reason        string `json:"reason"`
	SystemMessage string `json:"systemMessage,omitempty"`
}
