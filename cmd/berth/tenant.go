package main

import (
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
)

// limitFlags are the quota flags of tenant create and set.
type limitFlags struct {
	sandboxes, running, browsers, jobs int
	memory, disk                       int64
	cpus                               float64
}

func (l *limitFlags) register(f *pflag.FlagSet) {
	f.IntVar(&l.sandboxes, "max-sandboxes", 0, "most sandboxes the tenant holds (0: no limit of its own)")
	f.IntVar(&l.running, "max-running-sandboxes", 0, "most of its sandboxes running or paused at once")
	f.Int64Var(&l.memory, "max-memory-mb", 0, "most memory (MiB) its running sandboxes may be given in all")
	f.Float64Var(&l.cpus, "max-cpus", 0, "most CPUs its running sandboxes may be given in all")
	f.Int64Var(&l.disk, "max-disk-mb", 0, "most disk (MiB) its sandboxes may be given in all")
	f.IntVar(&l.browsers, "max-browser-sessions", 0, "most browser sessions it has open")
	f.IntVar(&l.jobs, "jobs", 0, "most of its jobs running at once (0: the daemon's --jobs-max-per-tenant)")
}

func (a *app) tenantCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "Manage tenants: who owns what, and their quotas (needs an admin key)"}
	var lf limitFlags
	var asJSON bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.CreateTenant(cmd.Context(), apitype.CreateTenantRequest{Name: args[0], Limits: apitype.TenantLimits{
				MaxSandboxes: lf.sandboxes, MaxRunningSandboxes: lf.running, MaxMemoryMB: lf.memory, MaxCPUs: lf.cpus,
				MaxDiskMB: lf.disk, MaxBrowserSessions: lf.browsers, Jobs: lf.jobs}})
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(t)
			}
			fmt.Fprintln(a.stdout, t.ID)
			return nil
		},
	}
	lf.register(create.Flags())
	create.Flags().BoolVar(&asJSON, "json", false, "print the tenant as JSON")

	ls := &cobra.Command{
		Use:   "ls",
		Short: "List tenants",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListTenants(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tLIMITS\tCREATED")
			for _, t := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Name, limitsLine(t.Limits), t.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	get := &cobra.Command{
		Use:   "get TENANT",
		Short: "Show a tenant's limits and what it uses now (a tenant's key: its own)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.GetTenant(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(t)
			}
			u, l := t.Usage, t.Limits
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "tenant\t%s (%s)\n", t.Name, t.ID)
			row := func(name string, use any, limit float64) {
				lim := "no limit"
				if limit > 0 {
					lim = strconv.FormatFloat(limit, 'f', -1, 64)
				}
				fmt.Fprintf(tw, "%s\t%v / %s\n", name, use, lim)
			}
			row("sandboxes", u.Sandboxes, float64(l.MaxSandboxes))
			row("running sandboxes", u.RunningSandboxes, float64(l.MaxRunningSandboxes))
			row("memory MiB", u.MemoryMB, float64(l.MaxMemoryMB))
			row("CPUs", u.CPUs, l.MaxCPUs)
			row("disk MiB", u.DiskMB, float64(l.MaxDiskMB))
			row("browser sessions", u.BrowserSessions, float64(l.MaxBrowserSessions))
			row("running jobs", u.Jobs, float64(l.Jobs))
			return tw.Flush()
		},
	}
	get.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	set := &cobra.Command{
		Use:   "set TENANT",
		Short: "Change a tenant's limits (only the flags given; 0 removes a limit)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req apitype.SetTenantRequest
			f := cmd.Flags()
			changed := false
			intp := func(name string, v int) *int {
				if !f.Changed(name) {
					return nil
				}
				changed = true
				return &v
			}
			int64p := func(name string, v int64) *int64 {
				if !f.Changed(name) {
					return nil
				}
				changed = true
				return &v
			}
			req.MaxSandboxes = intp("max-sandboxes", lf.sandboxes)
			req.MaxRunningSandboxes = intp("max-running-sandboxes", lf.running)
			req.MaxBrowserSessions = intp("max-browser-sessions", lf.browsers)
			req.Jobs = intp("jobs", lf.jobs)
			req.MaxMemoryMB = int64p("max-memory-mb", lf.memory)
			req.MaxDiskMB = int64p("max-disk-mb", lf.disk)
			if f.Changed("max-cpus") {
				changed, req.MaxCPUs = true, &lf.cpus
			}
			if !changed {
				return usageError{errors.New("give at least one limit to change, such as --max-sandboxes 50")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.SetTenant(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(t)
			}
			fmt.Fprintf(a.stdout, "%s: %s\n", t.Name, limitsLine(t.Limits))
			return nil
		},
	}
	lf.register(set.Flags())
	set.Flags().BoolVar(&asJSON, "json", false, "print the tenant as JSON")

	rm := &cobra.Command{
		Use:   "rm TENANT",
		Short: "Remove a tenant that owns nothing live; its keys are revoked",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.DeleteTenant(cmd.Context(), args[0])
		},
	}
	cmd.AddCommand(create, ls, get, set, rm)
	return cmd
}

func limitsLine(l apitype.TenantLimits) string {
	s := ""
	add := func(name string, v float64) {
		if v > 0 {
			if s != "" {
				s += " "
			}
			s += name + "=" + strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	add("sandboxes", float64(l.MaxSandboxes))
	add("running", float64(l.MaxRunningSandboxes))
	add("memory_mb", float64(l.MaxMemoryMB))
	add("cpus", l.MaxCPUs)
	add("disk_mb", float64(l.MaxDiskMB))
	add("browser_sessions", float64(l.MaxBrowserSessions))
	add("jobs", float64(l.Jobs))
	if s == "" {
		return "none"
	}
	return s
}

func (a *app) auditCommand() *cobra.Command {
	var limit int
	var cursor, tenant string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List mutating calls, newest first (a tenant's key: its tenant's; an admin key: all, or --tenant)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			q := client.AuditQuery{Limit: limit, Cursor: cursor}
			if cmd.Flags().Changed("tenant") {
				q.Tenant = &tenant
			}
			page, err := c.Audit(cmd.Context(), q)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(page)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tTENANT\tKEY\tCALL\tRESOURCE\tSTATUS\tREQUEST")
			for _, e := range page.Entries {
				status := strconv.Itoa(e.Status)
				if e.Reason != "" {
					status += " " + e.Reason
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), e.Tenant, e.KeyName,
					e.Route, e.Resource, status, e.RequestID)
			}
			if page.NextCursor != "" {
				fmt.Fprintf(tw, "# more: --cursor %s\n", page.NextCursor)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "entries per page (1-1000)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "go on from the page that printed it")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's calls (admin key; \"\" for the operator's own)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
