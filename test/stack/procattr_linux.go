package stack

import "syscall"

// procAttr puts the child in its own process group (a signal to the test
// runner does not reach it, and Stop can signal it without touching the
// runner) and has the kernel kill it if the process that started it dies
// without stopping it (a test binary killed by a timeout), so no worker,
// router or Envoy outlives its test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
