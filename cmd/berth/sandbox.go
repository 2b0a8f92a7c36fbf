package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
)

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parseKV(pairs []string, what string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("%s %q must be KEY=VALUE", what, p)}
		}
		m[k] = v
	}
	return m, nil
}

func (a *app) sandboxCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Aliases: []string{"sandboxes", "sb"}, Short: "Create, list, inspect and delete sandboxes"}

	var runtime, name, template string
	var env, labels []string
	var asJSON bool
	var res apitype.Resources
	var lazy bool
	var pauseAfter, hibernateAfter, deleteAfter time.Duration
	var nf networkFlags
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			envMap, err := parseKV(env, "--env")
			if err != nil {
				return err
			}
			labelMap, err := parseKV(labels, "--label")
			if err != nil {
				return err
			}
			req := apitype.CreateSandboxRequest{Runtime: runtime, Name: name, Env: envMap, Labels: labelMap, Lazy: lazy, Template: template}
			if res != (apitype.Resources{}) {
				req.Resources = &res
			}
			if nf.changed(cmd) {
				p := nf.policy(cmd, apitype.Network{})
				req.Network = &p
			}
			if f := cmd.Flags(); f.Changed("pause-after") || f.Changed("hibernate-after") || f.Changed("delete-after") {
				req.Idle = &apitype.Idle{PauseAfterMS: pauseAfter.Milliseconds(),
					HibernateAfterMS: hibernateAfter.Milliseconds(), DeleteAfterMS: deleteAfter.Milliseconds()}
			}
			sb, err := c.CreateSandbox(cmd.Context(), req)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(sb)
			}
			fmt.Fprintln(a.stdout, sb.ID)
			return nil
		},
	}
	create.Flags().StringVar(&runtime, "runtime", "", "runtime: container, gvisor or process (default: the daemon's)")
	create.Flags().StringVar(&template, "template", "", "template to start from (default base; see berth template ls)")
	create.Flags().BoolVar(&lazy, "lazy", false, "record it now, start it at its first command or file call")
	create.Flags().DurationVar(&pauseAfter, "pause-after", 10*time.Minute, "pause when unused this long (0: never; isolated runtimes)")
	create.Flags().DurationVar(&hibernateAfter, "hibernate-after", time.Hour, "hibernate when unused this long (0: never)")
	create.Flags().DurationVar(&deleteAfter, "delete-after", 0, "delete when unused this long (0: never)")
	create.Flags().Float64Var(&res.CPUs, "cpus", 0, "CPUs (isolated runtimes; default: the daemon's)")
	create.Flags().Int64Var(&res.MemoryMB, "memory-mb", 0, "memory limit in MiB (isolated runtimes)")
	create.Flags().Int64Var(&res.Pids, "pids", 0, "process and thread limit (isolated runtimes)")
	create.Flags().Int64Var(&res.DiskMB, "disk-mb", 0, "workspace size in MiB (isolated runtimes)")
	create.Flags().StringVar(&name, "name", "", "unique name; an existing sandbox with it is returned")
	create.Flags().StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	create.Flags().StringArrayVarP(&labels, "label", "l", nil, "label KEY=VALUE (repeatable)")
	create.Flags().BoolVar(&asJSON, "json", false, "print the whole record as JSON")
	nf.add(create, true)

	var lsJSON bool
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListSandboxes(cmd.Context())
			if err != nil {
				return err
			}
			if lsJSON {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tRUNTIME\tSTATE\tCREATED")
			for _, sb := range list {
				state := sb.State
				if sb.Reason != "" {
					state += " (" + sb.Reason + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", sb.ID, sb.Name, sb.Runtime, state, sb.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")

	get := &cobra.Command{
		Use:   "get SANDBOX",
		Short: "Print a sandbox as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			sb, err := c.GetSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printJSON(sb)
		},
	}

	rm := &cobra.Command{
		Use:     "rm SANDBOX...",
		Aliases: []string{"delete"},
		Short:   "Delete sandboxes and everything in them",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := c.DeleteSandbox(cmd.Context(), id); err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, id)
			}
			return nil
		},
	}
	lifecycle := func(use, short string, do func(*client.Client, context.Context, string) (apitype.Sandbox, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " SANDBOX...",
			Short: short,
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := a.client()
				if err != nil {
					return err
				}
				for _, id := range args {
					sb, err := do(c, cmd.Context(), id)
					if err != nil {
						return err
					}
					fmt.Fprintf(a.stdout, "%s\t%s\n", sb.ID, sb.State)
				}
				return nil
			},
		}
	}
	pause := lifecycle("pause", "Freeze sandboxes (memory kept, no CPU; any call resumes them)", (*client.Client).PauseSandbox)
	resume := lifecycle("resume", "Thaw paused sandboxes", (*client.Client).ResumeSandbox)
	hibernate := lifecycle("hibernate", "Stop sandboxes' processes and keep their files (any call wakes them)", (*client.Client).HibernateSandbox)
	var ttl time.Duration
	var previewJSON bool
	preview := &cobra.Command{
		Use:   "preview SANDBOX PORT",
		Short: "Print a browser link to a port of the sandbox (it sets the preview cookie)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[1])
			if err != nil {
				return usageError{fmt.Errorf("PORT %q is not a number", args[1])}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.Preview(cmd.Context(), args[0], port, ttl)
			if err != nil {
				return err
			}
			if previewJSON {
				return a.printJSON(p)
			}
			if p.AuthURL == "" {
				fmt.Fprintln(a.stdout, p.PathURL)
				fmt.Fprintln(a.stderr, "host-based previews are off (berth serve --preview-domain); this URL takes an API key")
				return nil
			}
			fmt.Fprintln(a.stdout, p.AuthURL)
			fmt.Fprintf(a.stderr, "open the link before %s; then %s works in that browser\n",
				p.ExpiresAt.Local().Format(time.DateTime), p.URL)
			return nil
		},
	}
	preview.Flags().DurationVar(&ttl, "ttl", 15*time.Minute, "how long the link is valid (at most 168h)")
	preview.Flags().BoolVar(&previewJSON, "json", false, "print URL, token and link as JSON")
	cmd.AddCommand(create, ls, get, rm, pause, resume, hibernate, preview, a.networkCommand())
	return cmd
}
