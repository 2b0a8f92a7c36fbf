package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/apitype"
)

// browserTraceCommand is "berth browser trace start|stop".
func (a *app) browserTraceCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "trace", Short: "Record a CDP trace of a session (mode process) into a ZIP",
		Long: "Record a trace: the CDP trace (open it in Chrome DevTools' Performance panel), a screenshot after each\n" +
			"action and the action log, in one ZIP. A trace runs at most 60s and within a byte budget; past either it\n" +
			"is discarded whole. Traces can hold what the pages show: keep them as you would the pages."}
	leaseOf := func(cmd *cobra.Command) string {
		if f := cmd.Flag("lease"); f != nil {
			return f.Value.String()
		}
		return ""
	}
	start := &cobra.Command{
		Use: "start SESSION", Short: "Start a trace", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.BrowserAction(cmd.Context(), args[0], apitype.BrowserAction{Op: "traceStart", Lease: leaseOf(cmd)}, nil)
		},
	}
	var keep bool
	stop := &cobra.Command{
		Use: "stop SESSION FILE", Short: "Stop the trace and write its ZIP to FILE", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var tr apitype.BrowserTrace
			if err := c.BrowserAction(cmd.Context(), args[0], apitype.BrowserAction{Op: "traceStop", Lease: leaseOf(cmd)}, &tr); err != nil {
				return err
			}
			// Streamed to a temporary file beside FILE, renamed once whole.
			f, err := os.CreateTemp(filepath.Dir(args[1]), ".berth-trace-*")
			if err != nil {
				return err
			}
			_, err = c.BrowserArtifact(cmd.Context(), args[0], tr.ID, f)
			if err == nil {
				err = f.Chmod(0o600) // a trace holds what the pages showed
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(f.Name(), args[1])
			}
			if err != nil {
				os.Remove(f.Name())
				return fmt.Errorf("writing the trace (artifact %s stays in the session): %w", tr.ID, err)
			}
			if !keep {
				if err := c.DeleteBrowserArtifact(cmd.Context(), args[0], tr.ID); err != nil {
					return err
				}
			}
			fmt.Fprintf(a.stderr, "trace: %d bytes, %d actions, %d screenshots, sha256 %s\n", tr.Size, tr.Actions, tr.Screenshots, tr.SHA256)
			return nil
		},
	}
	stop.Flags().BoolVar(&keep, "keep", false, "keep the ZIP in the session as an artifact too (by default it is deleted once written)")
	cmd.AddCommand(start, stop)
	return cmd
}
