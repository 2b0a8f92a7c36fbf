package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/probe"
)

// probeCommand runs security probes (internal/probe) where it is started:
// the adversarial tests run it inside sandboxes, and unsandboxed as their
// positive control. People may run it too, to see what a sandbox lets
// through.
func (a *app) probeCommand() *cobra.Command {
	var (
		cfg      probe.Config
		jsonOut  bool
		serve    string
		serveFor time.Duration
	)
	cmd := &cobra.Command{
		Use:   "probe [flags] ID...",
		Short: "Run security probes here and print one result per attempt",
		Long: `Run security probes (SECURITY.md section 2) where berth runs, and print one
result per attempt: "allowed", or the errno that denied it. Each ID is a
catalogue case (ESC-04, NET-01, ...); "all" runs every probe but the heavy
ones (RES-01, RES-03, RES-04, RES-07), which exhaust a resource and must be
named. The probes are harmless even where everything is allowed.

With --serve ADDR, listen on ADDR instead (for NET-17) for --serve-for.`,
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			emit := probe.WriteText(a.stdout)
			if jsonOut {
				emit = probe.WriteJSON(a.stdout)
			}
			if serve != "" {
				return probe.Serve(cmd.Context(), serve, serveFor, emit)
			}
			if len(args) == 0 {
				return usageError{errors.New("name the probes to run, or all")}
			}
			ps, err := probe.Select(args)
			if err != nil {
				return usageError{err}
			}
			return probe.Run(cmd.Context(), cfg, ps, emit)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&jsonOut, "json", false, "print JSON lines")
	f.IntVar(&cfg.DaemonPort, "daemon-port", 0, "the daemon's TCP port on 127.0.0.1")
	f.StringVar(&cfg.HostIP, "host-ip", "", "a non-loopback address of the host")
	f.IntVar(&cfg.DaemonPID, "daemon-pid", 0, "the daemon's PID on the host")
	f.IntSliceVar(&cfg.OtherPIDs, "other-pid", nil, "host PIDs of other tenants' processes")
	f.StringVar(&cfg.DataDir, "data-dir", "", "the daemon's data directory on the host")
	f.IntVar(&cfg.PeerPort, "peer-port", 0, "a port another sandbox listens on (NET-17)")
	f.IntVar(&cfg.ForkMax, "fork-max", 0, "RES-01: most children to start (default 5000)")
	f.IntVar(&cfg.MemoryMaxMB, "memory-max-mb", 0, "RES-03: most MiB to allocate (default 4096)")
	f.IntVar(&cfg.DiskMaxMB, "disk-max-mb", 0, "RES-04: most MiB to write (default 4096)")
	f.IntVar(&cfg.FDMax, "fd-max", 0, "RES-07: most descriptors to open (default 1048576)")
	f.DurationVar(&cfg.Timeout, "timeout", 0, "bound of each network attempt (default 3s)")
	f.StringVar(&serve, "serve", "", "listen on this TCP address instead of probing")
	f.DurationVar(&serveFor, "serve-for", time.Minute, "how long --serve listens")
	return cmd
}
