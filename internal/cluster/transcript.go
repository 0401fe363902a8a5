package cluster

import "strings"

// The lines a coordinator's transcript names a job's worker by: the
// remote agent writes them when a worker takes the job and when its
// report is accepted; the dashboards read them (WorkerOfLine) to draw
// each worker machine's iterations.
const (
	takenLine = "[ralph] job %s taken by worker %s on %s\n"
	ranLine   = "[ralph] worker %s on %s ran job %s\n"
)

// WorkerOfLine is the worker and host a transcript line names, from
// either of the remote agent's lines.
func WorkerOfLine(l string) (worker, host string, ok bool) {
	if rest, found := strings.CutPrefix(l, "[ralph] job "); found {
		if _, who, found := strings.Cut(rest, " taken by worker "); found {
			return strings.Cut(who, " on ")
		}
		return "", "", false
	}
	if rest, found := strings.CutPrefix(l, "[ralph] worker "); found {
		if who, _, found := strings.Cut(rest, " ran job "); found {
			return strings.Cut(who, " on ")
		}
	}
	return "", "", false
}
