package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// The browser journal and checkpoints: berth browser journal, checkpoint
// (ls, rm) and resume.

func (a *app) browserStateCommands() []*cobra.Command {
	journal := &cobra.Command{
		Use: "journal SESSION", Short: "List a session's actions: seq, op, started, finished or unknown", Args: cobra.ExactArgs(1),
		Long: "List every action of a session's journal, oldest first: its sequence number, op, summary, when it started\n" +
			"and how it ended (ok, error with its reason, running, or unknown: started and never finished, never replayed).\n" +
			"The session may be closed, or of an earlier run of the daemon.",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			entries, err := c.BrowserJournalAll(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tOP\tSTARTED\tFINISHED\tOUTCOME\tSUMMARY")
			for _, e := range entries {
				finished := "-"
				if e.FinishedAt != nil {
					finished = e.FinishedAt.Local().Format(time.DateTime + ".000")
				}
				outcome := e.Outcome
				if e.Reason != "" {
					outcome += " (" + e.Reason + ")"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Op, e.StartedAt.Local().Format(time.DateTime+".000"), finished, outcome, e.Summary)
			}
			return tw.Flush()
		},
	}

	checkpoint := &cobra.Command{
		Use: "checkpoint SESSION", Short: "Record a session's mode, options and pages' URLs; print the checkpoint's id", Args: cobra.ExactArgs(1),
		Long: "Record a session in a checkpoint: its mode, open options, its pages' URLs (scheme, host and path only)\n" +
			"and which page is selected. No cookies or page state. `berth browser resume` opens a new session from it.",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			cp, err := c.CheckpointBrowserSession(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, cp.ID)
			return nil
		},
	}
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List checkpoints", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.BrowserCheckpoints(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tMODE\tPAGES\tSELECTED\tCREATED")
			for _, cp := range list {
				sel := ""
				if cp.Selected < len(cp.URLs) {
					sel = cp.URLs[cp.Selected]
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", cp.ID, cp.Mode, len(cp.URLs), sel, cp.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use: "rm CHECKPOINT...", Aliases: []string{"delete"}, Short: "Delete checkpoints", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var failed []string
			for _, id := range args {
				if err := c.DeleteBrowserCheckpoint(cmd.Context(), id); err != nil {
					fmt.Fprintf(a.stderr, "%s: %v\n", id, err)
					failed = append(failed, id)
				}
			}
			if len(failed) > 0 {
				return fmt.Errorf("not deleted: %s", strings.Join(failed, " "))
			}
			return nil
		},
	}
	checkpoint.AddCommand(ls, rm)

	resume := &cobra.Command{
		Use: "resume CHECKPOINT", Short: "Open a new session like a checkpoint and print its id", Args: cobra.ExactArgs(1),
		Long: "Open a new session on the checkpoint's mode with its options, open its pages at their URLs and select\n" +
			"the page that was selected. Nothing else is restored, and nothing resumes unless asked.",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.ResumeBrowserCheckpoint(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, s.ID)
			return nil
		},
	}
	return []*cobra.Command{journal, checkpoint, resume}
}
