package runfolder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/ralph-loop/ralph/internal/store"
)

// The control files of the worker/reviewer cadence, in a run folder.
const (
	Orchestration = "orchestration.json" // the scheme: {"scheme": "W5R"}
	LoopState     = "loop_state.json"    // the control plane ralph writes
	Control       = "control.json"       // {"review_requested": true}: an ad-hoc review
	WorkerResult  = "output/worker_result.json"
	Review        = "review.md"
	Steering      = "steering.md"
	ControlPlane  = "CONTROL_PLANE.md"
)

// defaultScheme is the cadence of a run folder whose orchestration.json
// names none: five worker iterations, then one review.
const defaultScheme = "W5R"

// Orchestration is a run folder's orchestration.json.
type OrchestrationFile struct {
	Scheme       string `json:"scheme"`
	LoopSettings struct {
		ForceSteering bool `json:"force_steering"`
	} `json:"loop_settings"`
	// Workers and Reviewers are the scheme's numbers: after Workers
	// worker iterations, Reviewers review iterations.
	Workers, Reviewers int `json:"-"`
}

var schemeRE = regexp.MustCompile(`^W([1-9][0-9]{0,3})R([1-9][0-9]{0,2})?$`)

// parseScheme reads "W<n>R<m>" (R alone is R1).
func parseScheme(s string) (workers, reviewers int, err error) {
	m := schemeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fmt.Errorf("scheme %q: want W<n>R<m> (n worker iterations, then m reviews; R alone is R1), like W5R or W2R1", s)
	}
	workers, _ = strconv.Atoi(m[1])
	reviewers = 1
	if m[2] != "" {
		reviewers, _ = strconv.Atoi(m[2])
	}
	return workers, reviewers, nil
}

// ReadOrchestration reads dir's orchestration.json; nil when there is none.
// A malformed file is an error naming the file and the place.
func ReadOrchestration(dir string) (*OrchestrationFile, error) {
	p := filepath.Join(dir, Orchestration)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var o OrchestrationFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("%s: %s", p, jsonProblem(b, err))
	}
	if o.Scheme == "" {
		o.Scheme = defaultScheme
	}
	if o.Workers, o.Reviewers, err = parseScheme(o.Scheme); err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	return &o, nil
}

// jsonProblem says what is wrong with a JSON document, with the line and
// column when the decoder knows the offset.
func jsonProblem(b []byte, err error) string {
	line, col, ok := store.JSONErrorPos(b, err)
	if !ok {
		return err.Error()
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("line %d, column %d: %q must be %s, not %s", line, col, te.Field, te.Type, te.Value)
	}
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}

// LoopStateFile is loop_state.json, the run's control plane: ralph writes
// it before every iteration; a review may set SteeringRequested and
// nothing else; a worker or a steering iteration may not edit it
// (CONTROL_PLANE.md).
type LoopStateFile struct {
	Scheme             string `json:"scheme"`
	Phase              string `json:"phase"` // worker | review | steering
	Item               string `json:"item"`  // the item of the current or last iteration
	ReviewMode         string `json:"review_mode,omitempty"`
	WorkersSinceReview int    `json:"workers_since_review"`
	ReviewsLeft        int    `json:"reviews_left"` // periodic reviews still due in this round
	Reviews            int    `json:"reviews"`      // reviews done (review-1 … review-N)
	Steerings          int    `json:"steerings"`    // steering iterations done
	SteeringDue        bool   `json:"steering_due"` // a review said STEERING_NEEDED: yes
	SteeringRequested  bool   `json:"steering_requested"`
}

// ControlFile is control.json: a person (or a tool) asks for a review.
type ControlFile struct {
	ReviewRequested bool `json:"review_requested"`
}

// WorkerResultFile is output/worker_result.json: a worker says the run's
// work is done, which asks for a final review.
type WorkerResultFile struct {
	Complete bool   `json:"complete"`
	Reason   string `json:"reason"`
}

// ReadJSON reads one of the control files into v: false when it does not
// exist, an error naming the file and place when it is malformed.
func ReadJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %s", path, jsonProblem(b, err))
	}
	return true, nil
}

// controlPlane is CONTROL_PLANE.md: who may change which control file.
const controlPlane = `# Control plane

ralph runs this folder's stories with a worker/reviewer cadence
(` + "`orchestration.json`" + `, ` + "`{\"scheme\": \"W5R\"}`" + `: five worker iterations, then one
review). These files steer it; ralph keeps them out of git.

| file | ralph | worker | reviewer | steering | a person |
|---|---|---|---|---|---|
| ` + "`loop_state.json`" + ` | writes it before every iteration | must not edit | may set ` + "`steering_requested`" + ` only | must not edit | reads it |
| ` + "`control.json`" + ` | clears ` + "`review_requested`" + ` when it serves the review | — | — | — | sets ` + "`{\"review_requested\": true}`" + ` for an ad-hoc review |
| ` + "`output/worker_result.json`" + ` | removes it when it serves the final review | writes ` + "`{\"complete\": true, \"reason\": \"worker_done\"}`" + ` | — | — | — |
| ` + "`review.md`" + ` | commits it with the review | — | writes it, with ` + "`STEERING_NEEDED: yes`" + ` or ` + "`no`" + ` | — | reads it |
| ` + "`prd.json`" + ` | marks ` + "`passes`" + ` | claims its story | — | adds, splits, reorders, rewords stories (never ` + "`passes`" + `) | edits between runs |
| ` + "`steering.md`" + ` | records each accepted steering diff | — | — | — | reads it |

An edit a role may not make is reverted and reported as tampering, and the
iteration does not pass.
`
