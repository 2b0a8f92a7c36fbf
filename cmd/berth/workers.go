package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/cluster"
)

func (a *app) workersCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "workers", Short: "See and drain a cluster's workers, and make their credentials (needs an admin key on HQ)"}
	var asJSON bool

	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the workers HQ's configuration names, with their lease, capabilities and load",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListWorkers(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(list)
			}
			if list.Role != "hq" {
				fmt.Fprintf(a.stderr, "no workers: this daemon runs alone (role %s); a cluster's HQ (serve --role hq) lists its workers\n", list.Role)
			}
			now := time.Now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tTENANT\tURL\tLEASE\tRUNTIMES\tBROWSER\tSANDBOXES\tSESSIONS\tACTIONS")
			for _, w := range list.Workers {
				cp := w.Capabilities
				actions := "-"
				if w.LeaseExpiresAt != nil {
					actions = strconv.Itoa(len(cp.Actions)) // sandbox job actions it runs now (workers get shows them)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", w.ID, w.Status, dashIfEmpty(w.Tenant), w.URL, leaseLine(w, now),
					dashIfEmpty(strings.Join(cp.Runtimes, ",")), browserOf(w),
					placedOf(w.Placed.Sandboxes, cp.MaxSandboxes), placedOf(w.Placed.BrowserSessions, cp.MaxBrowserSessions), actions)
			}
			return tw.Flush()
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Print one worker as JSON: its configuration, lease, capabilities, load and what HQ placed there",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			w, err := c.GetWorker(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printJSON(w)
		},
	}

	// drain and undrain answer the worker as it is after the change.
	change := func(use, short string, do func(*cobra.Command, string) (apitype.Worker, error)) *cobra.Command {
		sub := &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				w, err := do(cmd, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return a.printJSON(w)
				}
				fmt.Fprintf(a.stdout, "%s: %s\n", w.ID, w.Status)
				return nil
			},
		}
		sub.Flags().BoolVar(&asJSON, "json", false, "print the worker as JSON")
		return sub
	}
	drain := change("drain", "Take no new work on a worker (placements, commands, browser actions); inspection, cancel and delete still work",
		func(cmd *cobra.Command, id string) (apitype.Worker, error) {
			c, err := a.client()
			if err != nil {
				return apitype.Worker{}, err
			}
			return c.DrainWorker(cmd.Context(), id)
		})
	undrain := change("undrain", "Let a drained worker take new work again",
		func(cmd *cobra.Command, id string) (apitype.Worker, error) {
			c, err := a.client()
			if err != nil {
				return apitype.Worker{}, err
			}
			return c.UndrainWorker(cmd.Context(), id)
		})

	var secretFile string
	credential := &cobra.Command{
		Use:   "credential ID",
		Short: "Print worker ID's credential, made from HQ's secret (offline; save it 0600 as the worker's --service-token-file)",
		Long: "Print worker ID's credential, derived from HQ's service secret (the file HQ's --service-token-file names)\n" +
			"and the worker's ID. It needs no daemon. Write it to a file only the worker's user can read:\n\n" +
			"  (umask 077; berth workers credential w1 --service-token-file hq.token > w1.token)",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if secretFile == "" {
				return usageError{errors.New("--service-token-file is required: the file of HQ's service secret")}
			}
			if err := cluster.ValidWorkerID(args[0]); err != nil {
				return err
			}
			secret, err := cluster.ReadSecret(secretFile)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, cluster.WorkerCredential(secret, args[0]))
			if f, ok := a.stdout.(*os.File); ok {
				if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
					fmt.Fprintf(a.stderr, "the credential went to a file others can read (mode %v): chmod 600 it; a worker refuses such a file\n", fi.Mode().Perm())
				}
			}
			return nil
		},
	}
	credential.Flags().StringVar(&secretFile, "service-token-file", "", "HQ's service secret file (the one HQ's serve --service-token-file names)")

	cmd.AddCommand(ls, get, drain, undrain, credential)
	return cmd
}

// leaseLine says when w's lease runs out, or how long ago it did.
func leaseLine(w apitype.Worker, now time.Time) string {
	if w.LeaseExpiresAt == nil {
		return "never held"
	}
	d := w.LeaseExpiresAt.Sub(now)
	if d > 0 {
		return "expires in " + shortDuration(d)
	}
	return "ran out " + shortDuration(-d) + " ago"
}

// shortDuration rounds d to what a person reads at a glance: 7s, 4m10s,
// 3h12m, 2d5h.
func shortDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 48*3600:
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
}

// placedOf is "placed/max", max "-" when the worker never said.
func placedOf(placed, most int) string {
	if most <= 0 {
		return strconv.Itoa(placed) + "/-"
	}
	return strconv.Itoa(placed) + "/" + strconv.Itoa(most)
}

// browserOf says whether w runs browser sessions; "-" before it said.
func browserOf(w apitype.Worker) string {
	switch {
	case w.HeartbeatAt == nil:
		return "-"
	case w.Capabilities.Browser:
		return "yes"
	}
	return "no"
}

// dashIfEmpty is s, or "-" for nothing.
func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
