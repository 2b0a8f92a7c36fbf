package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
)

func (a *app) serviceCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "service", Aliases: []string{"services", "svc"}, Short: "Run supervised services in a sandbox"}

	var spec apitype.ServiceSpec
	var env []string
	var readyTCP bool
	var readyHTTP string
	var readyTimeout time.Duration
	var asJSON bool
	run := &cobra.Command{
		Use:   "run SANDBOX NAME -- COMMAND [ARG...]",
		Short: "Start (or replace) a service; it restarts by policy and again when the sandbox wakes",
		Long: "Start a service. One argument after -- runs under /bin/sh -c; several run as argv.\n" +
			"Example: berth service run sbx_... web --port 8000 --ready-tcp -- python3 -m http.server 8000",
		Args: cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			spec.Name = args[1]
			if rest := args[2:]; len(rest) == 1 {
				spec.Command = rest[0]
			} else {
				spec.Argv = rest
			}
			if spec.Env, err = parseKV(env, "--env"); err != nil {
				return err
			}
			if readyTCP || readyHTTP != "" {
				spec.Ready = &apitype.Readiness{TCP: readyTCP, HTTPPath: readyHTTP, TimeoutMS: readyTimeout.Milliseconds()}
			}
			svc, err := c.PutService(cmd.Context(), args[0], spec)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(svc)
			}
			fmt.Fprintf(a.stdout, "%s %s\n", svc.Name, svc.Status)
			return nil
		},
	}
	f := run.Flags()
	f.StringVar(&spec.Restart.Policy, "restart", "on-failure", "restart policy: never, on-failure or always")
	f.IntVar(&spec.Restart.MaxRestarts, "max-restarts", 0, "give up after this many restarts (0: never give up)")
	f.Int64Var(&spec.Restart.DelayMS, "restart-delay-ms", 0, "first restart delay, doubled per consecutive failure (default 1000)")
	f.IntVar(&spec.Port, "port", 0, "TCP port the service listens on inside the sandbox")
	f.BoolVar(&readyTCP, "ready-tcp", false, "ready once --port accepts a connection")
	f.StringVar(&readyHTTP, "ready-http", "", "ready once GET of this path on --port answers below 500")
	f.DurationVar(&readyTimeout, "ready-timeout", 0, "how long a start may take to become ready (default 60s)")
	f.StringVar(&spec.Cwd, "cwd", "", "working directory (default: the workspace)")
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print the service as JSON")

	var lsJSON bool
	ls := &cobra.Command{
		Use: "ls SANDBOX", Aliases: []string{"list"}, Short: "List a sandbox's services", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.Services(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if lsJSON {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATUS\tPID\tREADY\tRESTARTS\tPORT\tLAST EXIT")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%d\t%s\t%s\n", s.Name, withReason(s.Status, s.Reason),
					orDash(s.PID), s.Ready, s.Restarts, orDash(s.Spec.Port), lastExit(s.LastExit))
			}
			return tw.Flush()
		},
	}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")

	var follow bool
	logs := &cobra.Command{
		Use: "logs SANDBOX NAME", Short: "Print a service's output (stdout and stderr, across restarts)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var off int64
			for {
				q := client.LogQuery{Offset: off}
				if follow {
					q.WaitMS = 30_000
				}
				l, err := c.ServiceLogs(cmd.Context(), args[0], args[1], q)
				if err != nil {
					return err
				}
				b, err := client.LogData(l)
				if err != nil {
					return err
				}
				if _, err := a.stdout.Write(b); err != nil {
					return err
				}
				off = l.NextOffset
				if len(b) == 0 && (!follow || l.Done) {
					return nil
				}
			}
		},
	}
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the service ends for good")

	// one makes a command on one service. The CLI's convention: get prints
	// the record as JSON; a change prints a short line (name and status),
	// and the record with --json.
	one := func(use, short string, record bool, do func(c *client.Client, cmd *cobra.Command, sb, name string) (apitype.Service, error)) *cobra.Command {
		var asJSON bool
		cmd := &cobra.Command{
			Use: use + " SANDBOX NAME", Short: short, Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := a.client()
				if err != nil {
					return err
				}
				svc, err := do(c, cmd, args[0], args[1])
				if err != nil {
					return err
				}
				if record || asJSON {
					return a.printJSON(svc)
				}
				fmt.Fprintf(a.stdout, "%s %s\n", svc.Name, svc.Status)
				return nil
			},
		}
		if !record {
			cmd.Flags().BoolVar(&asJSON, "json", false, "print the service as JSON")
		}
		return cmd
	}
	get := one("get", "Print a service as JSON", true, func(c *client.Client, cmd *cobra.Command, sb, name string) (apitype.Service, error) {
		return c.Service(cmd.Context(), sb, name)
	})
	stop := one("stop", "Stop a service; it stays stopped across wakes until started", false, func(c *client.Client, cmd *cobra.Command, sb, name string) (apitype.Service, error) {
		return c.StopService(cmd.Context(), sb, name)
	})
	start := one("start", "Start a stopped, exited or failed service", false, func(c *client.Client, cmd *cobra.Command, sb, name string) (apitype.Service, error) {
		return c.StartService(cmd.Context(), sb, name)
	})
	rm := &cobra.Command{
		Use: "rm SANDBOX NAME", Aliases: []string{"delete"}, Short: "Stop a service and forget it", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteService(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, args[1])
			return nil
		},
	}
	cmd.AddCommand(run, ls, get, logs, stop, start, rm)
	return cmd
}

func withReason(status, reason string) string {
	if reason == "" {
		return status
	}
	return status + " (" + reason + ")"
}

func orDash(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func lastExit(e *apitype.ServiceExit) string {
	switch {
	case e == nil:
		return "-"
	case e.Signal != "":
		return e.Signal
	case e.ExitCode != nil:
		return "code " + strconv.Itoa(*e.ExitCode)
	}
	return e.Reason
}
