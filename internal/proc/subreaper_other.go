//go:build !linux

package proc

// BecomeSubreaper reports false: only Linux lets a process adopt its
// descendants' orphans (prctl PR_SET_CHILD_SUBREAPER), so elsewhere only
// the agent's process group is killed when its iteration ends.
func BecomeSubreaper() bool { return false }
