package tasks

import (
	"slices"
	"strings"
	"testing"
)

func TestMergeEdits(t *testing.T) {
	const (
		a  = `{"id":"1","title":"a","status":"active"}`
		aC = `{"id":"1","title":"a","status":"complete"}`
		aH = `{"id":"1","title":"a, said a person","status":"active"}`
		b  = `{"id":"2","title":"b"}`
		bH = `{"id":"2","title":"b, edited by a person"}`
		c  = `{"id":"3","title":"c"}`
		n1 = `{"id":"1.1","parent":"1","title":"added by the agent"}`
		h  = `{"id":"4","title":"added by a person"}`
		nc = `{"title":"not canonical","id":"5"}`
	)
	file := func(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }
	for _, tc := range []struct {
		name           string
		sent, got, cur []byte
		want           []byte
		conflicts      []string
	}{
		{"nobody else wrote", file(a, b), file(aC, b, n1), file(a, b), file(aC, b, n1), nil},
		{"the agent wrote nothing", file(a, b), file(a, b), file(a, b, h), file(a, b, h), nil},
		{"both, different tasks", file(a, b, c), file(aC, b, c, n1, nc), file(a, bH, c, h), file(aC, bH, c, h, n1, nc), nil},
		{"the agent removed a task", file(a, b, c), file(a, c), file(a, b, c, h), file(a, c, h), nil},
		{"both changed one task", file(a, b), file(aC, b), file(aH, b, h), file(aH, b, h), []string{"1"}},
		{"a person removed what the agent changed", file(a, b), file(aC, b), file(b, h), file(b, h), []string{"1"}},
		{"both added the same id", file(a), file(a, n1), file(a, `{"id":"1.1","title":"other"}`), file(a, `{"id":"1.1","title":"other"}`), []string{"1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, conflicts := MergeEdits(tc.sent, tc.got, tc.cur)
			if string(got) != string(tc.want) {
				t.Fatalf("merged:\n%s\nwant:\n%s", got, tc.want)
			}
			if !slices.Equal(conflicts, tc.conflicts) {
				t.Fatalf("conflicts %q, want %q", conflicts, tc.conflicts)
			}
		})
	}
}
