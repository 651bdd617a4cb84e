//go:build !linux

package pgcluster

import "syscall"

// serverProcAttr runs the server as runAs. Outside Linux there is no parent
// death signal: a process killed before Stop leaves its server running.
func serverProcAttr(runAs *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: runAs}
}
