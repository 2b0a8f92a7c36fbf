package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
)

func (a *app) jobCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Aliases: []string{"jobs"}, Short: "Run, list, inspect and cancel sandbox jobs (conversions)"}

	var ins, opts, inSandbox []string
	var out, businessID, outSandbox string
	var detach bool
	run := &cobra.Command{
		Use:   "run ACTION[@VERSION] --in FILE... [--opt KEY=VALUE...] [--out FILE]",
		Short: "Run a job and save its output",
		Long: `Run a job: upload the inputs, queue the job, follow it (a progress bar on a
terminal, one line per event otherwise) and save its output.

  berth job run html-pdf --in index.html --in style.css --opt paper=A4 --out report.pdf
  berth job run office-pdf --in letter.docx
  berth job run html-pptx --in slides.html --opt width=1280 --opt height=720
  berth job run office-pdf@1.0.0 --in-sandbox $SB:reports/q3.docx --out-sandbox $SB:exports/
  berth job run url-pdf --opt url=https://example.com/ --out example.pdf

--in takes a file (its name in the job is its base name) or NAME=FILE.
--in-sandbox SANDBOX:PATH reads an input from a sandbox's workspace;
--out-sandbox SANDBOX:PATH writes the outputs into one (a PATH ending in /
is a directory: the outputs keep their names), and then nothing is saved
here unless --out is given too. ACTION@VERSION refuses to run another
version of the action (VERSION_MISMATCH).
--opt values are JSON when they parse as JSON (true, 2.5), strings otherwise.
--out defaults to the main input's name with the output's extension.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if len(ins) == 0 && len(inSandbox) == 0 && !slices.ContainsFunc(opts, func(o string) bool { return strings.HasPrefix(o, "url=") }) {
				return usageError{fmt.Errorf("give at least one --in FILE (or --in-sandbox SANDBOX:PATH), or --opt url=URL for url-pdf and url-png")}
			}
			action, version, _ := strings.Cut(args[0], "@")
			req := apitype.CreateJobRequest{Action: action, Version: version, BusinessID: businessID, Inputs: map[string]apitype.JobInput{}}
			for _, in := range inSandbox {
				sbx, p, ok := strings.Cut(in, ":")
				if !ok || sbx == "" || p == "" {
					return usageError{fmt.Errorf("--in-sandbox %q: want SANDBOX:PATH", in)}
				}
				req.Inputs[path.Base(p)] = apitype.JobInput{Sandbox: sbx, Path: p}
			}
			if outSandbox != "" {
				sbx, p, ok := strings.Cut(outSandbox, ":")
				if !ok || sbx == "" || p == "" {
					return usageError{fmt.Errorf("--out-sandbox %q: want SANDBOX:PATH", outSandbox)}
				}
				req.Output = &apitype.WorkspaceRef{Sandbox: sbx, Path: p}
			}
			for _, in := range ins {
				name, path, ok := strings.Cut(in, "=")
				if !ok {
					name, path = filepath.Base(in), in
				}
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				ref, err := c.UploadFile(ctx, f, name)
				f.Close()
				if err != nil {
					return fmt.Errorf("uploading %s: %w", path, err)
				}
				req.Inputs[name] = apitype.JobInput{SHA256: ref.SHA256}
			}
			if len(opts) > 0 {
				m := map[string]json.RawMessage{}
				for _, o := range opts {
					k, v, ok := strings.Cut(o, "=")
					if !ok || k == "" {
						return usageError{fmt.Errorf("--opt %q: want KEY=VALUE", o)}
					}
					if json.Valid([]byte(v)) {
						m[k] = json.RawMessage(v)
					} else {
						m[k], _ = json.Marshal(v)
					}
				}
				req.Options, _ = json.Marshal(m)
			}
			j, err := c.CreateJob(ctx, req)
			if err != nil {
				return err
			}
			if detach {
				fmt.Fprintln(a.stdout, j.ID)
				return nil
			}
			fmt.Fprintf(a.stderr, "job %s %s\n", j.ID, j.State)
			j, err = a.follow(ctx, j)
			if ctx.Err() != nil {
				// Interrupted: the job is this command's, so it stops too,
				// as berth exec cancels its command.
				return a.cancelInterrupted(c, j.ID)
			}
			if err != nil {
				return err
			}
			a.reportBlocked(j)
			if j.State != apitype.JobSucceeded {
				if j.Error != nil {
					return fmt.Errorf("job %s %s: %s: %s", j.ID, j.State, j.Error.Reason, j.Error.Message)
				}
				return fmt.Errorf("job %s %s", j.ID, j.State)
			}
			for _, o := range j.Outputs {
				if o.Workspace != nil {
					fmt.Fprintf(a.stderr, "wrote %s:%s (%s)\n", o.Workspace.Sandbox, o.Workspace.Path, humanBytes(o.Size))
				}
			}
			if req.Output != nil && out == "" {
				return nil
			}
			for i, o := range j.Outputs {
				dst := out
				if dst == "" || i > 0 {
					main := "page" // a URL action's
					if len(j.Inputs) > 0 {
						main = j.Inputs[0].Name
					}
					dst = strings.TrimSuffix(filepath.Base(main), filepath.Ext(main)) + filepath.Ext(o.Name)
				}
				if err := a.download(ctx, o.SHA256, dst); err != nil {
					return err
				}
				pages := ""
				if o.Pages > 0 {
					unit := "page"
					if strings.EqualFold(filepath.Ext(o.Name), ".pptx") {
						unit = "slide"
					}
					pages = ", " + plural(o.Pages, unit)
				}
				fmt.Fprintf(a.stderr, "wrote %s (%s%s)\n", dst, humanBytes(o.Size), pages)
			}
			return nil
		},
	}
	run.Flags().StringArrayVar(&ins, "in", nil, "an input file, or NAME=FILE (repeat)")
	run.Flags().StringArrayVar(&opts, "opt", nil, "an option KEY=VALUE (repeat)")
	run.Flags().StringVar(&out, "out", "", "where to write the output")
	run.Flags().StringArrayVar(&inSandbox, "in-sandbox", nil, "an input in a sandbox's workspace, SANDBOX:PATH (repeat)")
	run.Flags().StringVar(&outSandbox, "out-sandbox", "", "write the outputs into a sandbox's workspace, SANDBOX:PATH (PATH ending in / for a directory)")
	run.Flags().StringVar(&businessID, "business-id", "", "idempotency key: a repeat returns the earlier job")
	run.Flags().BoolVar(&detach, "detach", false, "print the job's ID and return without waiting")

	var lsState, lsAction string
	var lsJSON bool
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List jobs, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.Jobs(cmd.Context(), jobFilter(lsState, lsAction))
			if err != nil {
				return err
			}
			if lsJSON {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tACTION\tSTATE\tATTEMPT\tCREATED\tOUTPUT")
			for _, j := range list {
				outTxt := "-"
				if len(j.Outputs) > 0 {
					outTxt = humanBytes(j.Outputs[0].Size)
				} else if j.Error != nil {
					outTxt = j.Error.Reason
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Action, j.State, j.Attempt, j.MaxAttempts,
					j.CreatedAt.Local().Format(time.DateTime), outTxt)
			}
			return tw.Flush()
		},
	}
	ls.Flags().StringVar(&lsState, "state", "", "only jobs in this state")
	ls.Flags().StringVar(&lsAction, "action", "", "only jobs of this action")
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")

	get := &cobra.Command{
		Use: "get ID", Short: "Print a job as JSON", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			j, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printJSON(j)
		},
	}
	cancel := &cobra.Command{
		Use: "cancel ID", Short: "Cancel a job (a running one has its sandbox killed)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			j, err := c.CancelJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, j.ID, j.State)
			return nil
		},
	}
	cmd.AddCommand(run, ls, get, cancel)
	return cmd
}

func jobFilter(state, action string) client.JobFilter {
	return client.JobFilter{State: state, Action: action}
}

// reportBlocked says which requests of the job's page were refused: a job
// reaches nothing outside its inputs, so a page that refers to remote
// assets (fonts, images, scripts) renders without them.
func (a *app) reportBlocked(j apitype.Job) {
	if len(j.Blocked) == 0 {
		return
	}
	const show = 5
	fmt.Fprintf(a.stderr, "blocked %s the page made (jobs reach only their inputs; put assets in with --in):\n",
		plural(len(j.Blocked), "request"))
	for _, u := range j.Blocked[:min(show, len(j.Blocked))] {
		fmt.Fprintf(a.stderr, "  %s\n", u)
	}
	if len(j.Blocked) > show {
		fmt.Fprintf(a.stderr, "  ... and %d more (berth job get %s)\n", len(j.Blocked)-show, j.ID)
	}
}

// follow prints a job's events until it is finished and returns it: a
// progress bar on a terminal, plain lines otherwise.
func (a *app) follow(ctx context.Context, j apitype.Job) (apitype.Job, error) {
	c, err := a.client()
	if err != nil {
		return j, err
	}
	f, isFile := a.stderr.(*os.File)
	bar := isFile && term.IsTerminal(int(f.Fd()))
	percent := map[string]int{apitype.JobQueued: 0, apitype.JobWaiting: 0, apitype.JobStarting: 5, apitype.JobRunning: 30}
	pct := 0
	err = c.JobEvents(ctx, j.ID, 0, func(ev apitype.JobEvent) error {
		if p, ok := percent[ev.Type]; ok {
			pct = max(pct, p)
		}
		if ev.Percent > 0 {
			pct = max(pct, ev.Percent)
		}
		if apitype.JobTerminal(ev.Type) && ev.Type == apitype.JobSucceeded {
			pct = 100
		}
		if bar {
			const width = 30
			n := pct * width / 100
			fmt.Fprintf(a.stderr, "\r[%s%s] %3d%% %-10s %s", strings.Repeat("#", n), strings.Repeat(" ", width-n), pct, ev.Type,
				truncate(ev.Message, 50))
			if apitype.JobTerminal(ev.Type) {
				fmt.Fprintln(a.stderr)
			}
			return nil
		}
		line := ev.At.Local().Format("15:04:05.000") + " " + ev.Type
		if ev.Percent > 0 {
			line += fmt.Sprintf(" %d%%", ev.Percent)
		}
		if ev.Message != "" {
			line += " " + ev.Message
		}
		fmt.Fprintln(a.stderr, line)
		return nil
	})
	if err != nil {
		return j, err
	}
	return c.Job(ctx, j.ID)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// download saves a stored file (a job's output) as dst.
func (a *app) download(ctx context.Context, sha, dst string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	rc, err := c.DownloadFile(ctx, sha)
	if err != nil {
		return err
	}
	defer rc.Close()
	return saveFile(dst, rc)
}

func (a *app) actionsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "actions [NAME]", Short: "Show the job actions and whether each is available, with the reason when not",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var list []apitype.ActionHealth
			var catalog apitype.Actions
			if len(args) == 1 {
				h, err := c.Action(cmd.Context(), args[0])
				if err != nil && h.Reason == "" {
					return err
				}
				list = []apitype.ActionHealth{h}
			} else if catalog, err = c.ActionCatalog(cmd.Context()); err != nil {
				return err
			} else {
				list = catalog.Actions
			}
			if asJSON {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ACTION\tVERSION\tPROFILE\tHEALTH\tRUNTIME\tDETAIL")
			for _, h := range list {
				health, detail := "available", h.Description
				if !h.Available {
					health, detail = h.Reason, h.Message
					if h.Hint != "" {
						detail += "; " + h.Hint
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, firstNonEmpty(h.Version, "-"), firstNonEmpty(h.Profile, "-"), health,
					firstNonEmpty(shortDigest(h.RuntimeDigest), "-"), detail)
			}
			if catalog.RuntimeDigest != "" {
				fmt.Fprintf(tw, "\njob runtime %s (recorded when the daemon started)\n", catalog.RuntimeDigest)
				if catalog.RuntimeDigestNow != "" {
					fmt.Fprintf(tw, "job runtime now %s: it changed under the daemon\n", catalog.RuntimeDigestNow)
				}
			}
			if err := tw.Flush(); err != nil || len(args) == 0 || len(list[0].Options) == 0 {
				return err
			}
			// One action: its options, as --opt KEY=VALUE takes them.
			fmt.Fprintln(a.stdout)
			tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "OPTION\tTYPE\tDEFAULT\tMEANING")
			for _, o := range list[0].Options {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Name, optionType(o), optionDefault(o.Default), o.Description)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// shortDigest is a runtime digest cut for a table: sha256: and 12 digits.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// optionType is an option's type with its bounds: number 0.1-2, string
// A3|A4|...
func optionType(o apitype.ActionOption) string {
	t := o.Type
	switch {
	case len(o.Enum) > 0:
		t = strings.Join(o.Enum, "|")
	case o.Min != nil && o.Max != nil:
		t += fmt.Sprintf(" %g-%g", *o.Min, *o.Max)
	case o.MaxLength > 0:
		t += fmt.Sprintf(" (max %d bytes)", o.MaxLength)
	}
	return t
}

func optionDefault(v any) string {
	if v == nil {
		return "-"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// cancelInterrupted cancels a job whose follower was interrupted (Ctrl-C)
// and ends the CLI with 130, saying what became of the job.
func (a *app) cancelInterrupted(c *client.Client, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if j, err := c.CancelJob(ctx, id); err != nil {
		fmt.Fprintf(a.stderr, "\nberth: interrupted; canceling job %s failed (%v): it may still run; berth job cancel %s\n", id, err, id)
	} else {
		fmt.Fprintf(a.stderr, "\nberth: interrupted; job %s %s\n", id, j.State)
	}
	return exitError{exitCanceled}
}

// plural is "1 page", "2 pages".
func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
