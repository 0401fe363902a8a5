package proc

import "syscall"

// prctl(PR_SET_CHILD_SUBREAPER): Linux only.
const prSetChildSubreaper = 36

// BecomeSubreaper makes this process the reaper of its descendants'
// orphans: a process that an agent started with setsid, nohup & or a
// double fork stays a descendant of ralph instead of going to init, so it
// can be found when its iteration ends. It reports whether that worked.
func BecomeSubreaper() bool {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	return errno == 0
}
