package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
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
			checks := hostChecks()
			checks = append(checks, a.daemonCheck(cmd.Context()))
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

func hostChecks() []check {
	var out []check
	out = append(out, check{name: "runtime process", ok: true,
		detail: "available (default; NOT isolated: trusted code only)"})

	oci, found := lookFirst("crun", "runc")
	c := check{name: "runtime container", detail: "not available in this build: the container runtime is not implemented yet"}
	if !found {
		c.detail += "; neither crun nor runc is installed"
		c.fix = "apt-get install crun"
	} else {
		c.detail += "; found " + oci
	}
	out = append(out, c)

	runsc, found := lookFirst("runsc")
	c = check{name: "runtime gvisor", detail: "not available in this build: the gvisor runtime is not implemented yet"}
	if found {
		c.detail += "; found " + runsc
	} else {
		c.fix = "CGO_ENABLED=0 go install gvisor.dev/gvisor/runsc@v0.0.0-20260905035102-160fafc42237"
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

func (a *app) daemonCheck(ctx context.Context) check {
	c := check{name: "daemon"}
	cl, err := a.client()
	if err != nil {
		c.detail, c.fix = err.Error(), "start it with: berth serve (or make run)"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	sys, err := cl.System(ctx)
	if err != nil {
		c.detail, c.fix = fmt.Sprintf("%s: %v", cl.BaseURL(), err), "start it with: berth serve (or make run)"
		return c
	}
	var rts []string
	for _, rt := range sys.Runtimes {
		if rt.Available {
			rts = append(rts, rt.Name)
		}
	}
	c.ok = true
	c.detail = fmt.Sprintf("%s version %s, runtimes: %s, %d sandboxes", cl.BaseURL(), sys.Version, strings.Join(rts, ", "), sys.Counts.Sandboxes)
	return c
}
