package engine

import "time"

// Event is one line of .ralph/events.jsonl and of `ralph run --json`.
type Event struct {
	Time      time.Time      `json:"time"`
	Type      string         `json:"type"`
	RunID     string         `json:"run_id,omitempty"`
	Iteration int            `json:"iteration,omitempty"`
	Item      string         `json:"item,omitempty"`
	Attempt   int            `json:"attempt,omitempty"`
	Message   string         `json:"message,omitempty"`
	Data      map[string]any `json:"data,omitempty"`
}
