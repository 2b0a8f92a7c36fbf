package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
)

// check is one line of berth doctor's report.
type check struct {
	name   string
	ok     bool
	detail string
	fix    string
}

func (a *app) doctorCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check what this machine offers Berth and say how to fix what is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := hostChecks(a.dataDir())
			checks = append(checks, a.daemonChecks(cmd.Context())...)
			for _, c := range checks {
				mark := "ok     "
				if !c.ok {
					mark = "missing"
				}
				fmt.Fprintf(a.stdout, "%s  %-24s %s\n", mark, c.name, c.detail)
				if !c.ok && c.fix != "" {
					fmt.Fprintf(a.stdout, "         %-24s fix: %s\n", "", c.fix)
				}
			}
			return nil
		},
	}
}

func lookFirst(names ...string) (string, bool) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, true
		}
	}
	return "", false
}

func hostChecks(dataDir string) []check {
	var out []check
	out = append(out, check{name: "runtime process", ok: true})

	// The same runtimes berth serve would use, with the same reasons.
	oci := runtimes.OCIConfig{DataDir: dataDir}
	ctr := runtimes.NewContainer(oci)
	c := check{name: "runtime container", ok: ctr.Available() == nil}
	if c.ok {
		c.detail = "available (default: isolation by default), run by " + ctr.Program()
		if ctr.Program() == "crun" && hybridCgroups() {
			c.detail += " (in a private mount namespace: crun refuses this host's hybrid cgroup layout as is)"
		}
	} else {
		c.detail, c.fix = runtimeWhy(ctr.Available()), "apt-get install crun (and run berth serve as root)"
	}
	out[0].detail = "available (NOT isolated: trusted code only)"
	if !c.ok {
		out[0].detail = "available and the default, since no isolated runtime is (NOT isolated: trusted code only)"
	}
	out = append(out, c)

	gv := runtimes.NewGVisor(oci)
	c = check{name: "runtime gvisor", ok: gv.Available() == nil}
	if c.ok {
		c.detail = "available (runsc, systrap platform)"
	} else {
		c.detail, c.fix = runtimeWhy(gv.Available()), "make runsc (builds the pinned runsc into tools/, where berth finds it from bin/), or berth serve --runsc PATH"
	}
	out = append(out, c)

	for _, b := range []struct{ name, pkg string }{
		{"chromium-headless-shell", "chromium-headless-shell"},
		{"chromium", "chromium"},
		{"soffice", "libreoffice-writer-nogui"},
	} {
		p, ok := lookFirst(b.name)
		c := check{name: b.name, ok: ok, detail: p}
		if !ok {
			c.detail, c.fix = "not found (needed by browser sessions and jobs, not yet shipped)", "apt-get install "+b.pkg
		}
		out = append(out, c)
	}

	out = append(out, cgroupCheck())
	userns := check{name: "user namespaces"}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) != "0" {
		userns.ok, userns.detail = true, "enabled"
	} else {
		userns.detail, userns.fix = "disabled", "sysctl -w user.max_user_namespaces=15000"
	}
	out = append(out, userns)
	ovl := check{name: "overlayfs"}
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && strings.Contains(string(b), "overlay") {
		ovl.ok, ovl.detail = true, "available"
	} else {
		ovl.detail, ovl.fix = "not loaded", "modprobe overlay"
	}
	out = append(out, ovl)
	return out
}

func cgroupCheck() check {
	c := check{name: "cgroups"}
	_, v2err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	_, v1err := os.Stat("/sys/fs/cgroup/memory")
	_, hybridErr := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers")
	switch {
	case v2err == nil:
		c.ok, c.detail = true, "v2 (unified)"
	case v1err == nil && hybridErr == nil:
		c.ok, c.detail = true, "v1 with a v2 hierarchy at /sys/fs/cgroup/unified (hybrid)"
	case v1err == nil:
		c.ok, c.detail = true, "v1"
	default:
		c.detail, c.fix = "not mounted", "mount cgroup2 on /sys/fs/cgroup"
	}
	return c
}

// daemonChecks checks the running daemon, and each job action's health
// as the daemon reports it (the reasons of GET /v1/actions).
func (a *app) daemonChecks(ctx context.Context) []check {
	c := check{name: "daemon"}
	cl, err := a.client()
	if err != nil {
		c.detail, c.fix = err.Error(), "start it with: berth serve (or make run)"
		return []check{c}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	sys, err := cl.System(ctx)
	if err != nil {
		c.detail, c.fix = fmt.Sprintf("%s: %v", cl.BaseURL(), err), "start it with: berth serve (or make run)"
		return []check{c}
	}
	var rts []string
	for _, rt := range sys.Runtimes {
		if rt.Available {
			rts = append(rts, rt.Name)
		}
	}
	c.ok = true
	c.detail = fmt.Sprintf("%s version %s, runtimes: %s, %d sandboxes", cl.BaseURL(), sys.Version, strings.Join(rts, ", "), sys.Counts.Sandboxes)
	out := []check{c}
	actions, err := cl.Actions(ctx)
	if err != nil {
		return append(out, check{name: "job actions", detail: err.Error()})
	}
	for _, h := range actions {
		ac := check{name: "action " + h.Name, ok: h.Available, detail: "available"}
		if !h.Available {
			ac.detail, ac.fix = h.Reason+": "+h.Message, h.Hint
		}
		out = append(out, ac)
	}
	return out
}

// runtimeWhy is the message of a runtime's unavailability.
func runtimeWhy(err error) string {
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	return err.Error()
}

// hybridCgroups reports a cgroup v1 host with a v2 tree at
// /sys/fs/cgroup/unified.
func hybridCgroups() bool {
	_, v1 := os.Stat("/sys/fs/cgroup/memory")
	_, v2 := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers")
	return v1 == nil && v2 == nil
}
