package pgcluster

import "syscall"

// serverProcAttr runs the server as runAs and has the kernel stop it (SIGQUIT:
// immediate shutdown) when this process dies without calling Stop, such as a
// test binary killed by a panic or a timeout.
func serverProcAttr(runAs *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: runAs, Pdeathsig: syscall.SIGQUIT}
}
