//go:build !linux

package agent

import "syscall"

// becomeSubreaper is a no-op off Linux: the agent runs only on Linux; this
// file keeps the package building elsewhere.
func becomeSubreaper() {}

func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func terminalAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true, Setctty: true} }

func resetOOMScore(int) {}
