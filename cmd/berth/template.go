package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/apitype"
)

func (a *app) templateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "template", Aliases: []string{"templates", "tpl"}, Short: "Build, import, list and remove sandbox templates"}

	var lsJSON bool
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List templates", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.Templates(cmd.Context())
			if err != nil {
				return err
			}
			if lsJSON {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSOURCE\tSTATE\tBASE\tSEED\tSIZE")
			for _, t := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\n", t.Name, t.Source, withReason(t.State, t.Reason),
					firstNonEmpty(t.Base, "-"), t.Seed, humanBytes(t.SizeBytes))
			}
			return tw.Flush()
		},
	}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")

	get := &cobra.Command{
		Use: "get NAME", Short: "Print a template as JSON", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.Template(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printJSON(t)
		},
	}

	var from string
	var runs, copies, env []string
	var noWait bool
	var network string
	build := &cobra.Command{
		Use:   "build NAME --run CMD [--run CMD...] [--copy LOCAL:PATH...]",
		Short: "Build a template: run steps in a sandbox of --from and freeze the result",
		Long: `Build a template. Steps run in order in a fresh container sandbox of --from:
--copy LOCAL:PATH puts a local file at PATH in the workspace, --run runs a shell
command there (give each as often as needed; copies run before commands).
What the steps leave in /workspace becomes the template's seed, mounted
read-only at /template in every sandbox made from it; what they install in
/opt (and /usr/local on imported images) becomes a read-only layer.

  berth template build web --network egress --copy package.json:package.json --run 'npm install'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			req := apitype.BuildTemplateRequest{Name: args[0], From: from, Network: network}
			if req.Env, err = parseKV(env, "--env"); err != nil {
				return err
			}
			for _, cp := range copies {
				local, dest, ok := strings.Cut(cp, ":")
				if !ok || local == "" || dest == "" {
					return usageError{fmt.Errorf("--copy %q must be LOCAL:PATH", cp)}
				}
				b, err := os.ReadFile(local)
				if err != nil {
					return err
				}
				fi, _ := os.Stat(local)
				req.Steps = append(req.Steps, apitype.TemplateStep{Copy: &apitype.CopyStep{Path: dest,
					ContentBase64: base64.StdEncoding.EncodeToString(b), Mode: uint32(fi.Mode().Perm())}})
			}
			for _, r := range runs {
				req.Steps = append(req.Steps, apitype.TemplateStep{Run: r})
			}
			t, err := c.BuildTemplate(cmd.Context(), req)
			if err != nil {
				return err
			}
			if noWait {
				fmt.Fprintln(a.stdout, t.Name, t.State)
				return nil
			}
			fmt.Fprintf(a.stderr, "building %s", t.Name)
			for t.State == apitype.TemplateBuilding {
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(500 * time.Millisecond):
				}
				fmt.Fprint(a.stderr, ".")
				if t, err = c.Template(cmd.Context(), t.Name); err != nil {
					return err
				}
			}
			fmt.Fprintln(a.stderr)
			if t.State != apitype.TemplateReady {
				if log, err := c.TemplateLog(cmd.Context(), t.Name); err == nil {
					fmt.Fprint(a.stderr, log)
				}
				return fmt.Errorf("template %s failed: %s", t.Name, t.Reason)
			}
			fmt.Fprintf(a.stdout, "%s ready (%s)\n", t.Name, humanBytes(t.SizeBytes))
			return nil
		},
	}
	bf := build.Flags()
	bf.StringVar(&from, "from", "", "template to start from (default base)")
	bf.StringArrayVar(&runs, "run", nil, "shell command to run (repeatable, in order)")
	bf.StringArrayVar(&copies, "copy", nil, "LOCAL:PATH file to put in the workspace first (repeatable)")
	bf.StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE for the steps and the template's sandboxes (repeatable)")
	bf.BoolVar(&noWait, "no-wait", false, "return once the build has started")
	bf.StringVar(&network, "network", "", "network of the build: none (default) or egress (the daemon's default policy), so steps can fetch dependencies")

	var ref string
	imp := &cobra.Command{
		Use:   "import NAME ARCHIVE",
		Short: "Make a template from an OCI image layout tar or a docker save tarball",
		Long:  "Import an image: `docker save IMAGE -o img.tar` (or an OCI layout tar) on any machine, then\n  berth template import myimage img.tar",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			f, err := os.Open(args[1])
			if err != nil {
				return err
			}
			defer f.Close()
			t, err := c.ImportTemplate(cmd.Context(), args[0], ref, f)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s ready (%s)\n", t.Name, humanBytes(t.SizeBytes))
			return nil
		},
	}
	imp.Flags().StringVar(&ref, "ref", "", "image to take when the archive holds several (tag or sha256 digest)")

	logCmd := &cobra.Command{
		Use: "log NAME", Short: "Print a built template's build log", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			log, err := c.TemplateLog(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(a.stdout, log)
			return err
		},
	}
	rm := &cobra.Command{
		Use: "rm NAME...", Aliases: []string{"delete"}, Short: "Remove templates no sandbox uses", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			for _, name := range args {
				if err := c.DeleteTemplate(cmd.Context(), name); err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, name)
			}
			return nil
		},
	}
	cmd.AddCommand(ls, get, build, imp, logCmd, rm)
	return cmd
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
