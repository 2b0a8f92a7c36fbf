package main

import (
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/store"
)

// The commands here work on the local data directory (--data), not
// through the API: they are for the operator of the host.

func (a *app) backupCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the data directory's database to FILE, consistently, even while the daemon runs",
		Long: `Backup writes a consistent copy of the database in --data to the new file FILE
(mode 0600) with SQLite's VACUUM INTO. It reads one snapshot, so it is safe
while a daemon runs, and unlike a copy of berth.db it holds what the
write-ahead log (berth.db-wal) holds. FILE must not exist.

The backup is the database only: sandbox workspaces stay in the data
directory, and admin.key and preview.key are files beside it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := daemon.Backup(cmd.Context(), a.dataDir(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "backed up %s to %s: %s\n", filepath.Join(a.dataDir(), daemon.DBFile), args[0], summary(s))
			return nil
		},
	}
}

func (a *app) restoreCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the data directory's database with a backup (daemon stopped)",
		Long: `Restore puts the backup FILE (made by berth backup) in place as the database of
--data. The daemon must be stopped: restore refuses while one holds the data
directory. It checks that FILE is a whole Berth database, keeps the current
berth.db (and its -wal and -shm) as berth.db.before-restore-TIME, and
replaces berth.db atomically. A FILE that fails the check changes nothing.

On the next start the daemon re-adopts the sandboxes the backup knows whose
directories are in place (berth quarantine restore puts quarantined ones
back) and marks those whose agent is gone failed (agent_lost).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := daemon.Restore(cmd.Context(), a.dataDir(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "restored %s from %s: %s\n", filepath.Join(a.dataDir(), daemon.DBFile), args[0], summary(r.Summary))
			if r.Previous != "" {
				fmt.Fprintf(a.stderr, "the previous database is kept as %s\n", r.Previous)
			}
			return nil
		},
	}
}

func summary(s store.Summary) string {
	return fmt.Sprintf("%d sandboxes, %d keys, %d templates, %d jobs", s.Sandboxes, s.Keys, s.Templates, s.Jobs)
}

func (a *app) quarantineCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quarantine",
		Short: "List, restore or purge sandbox directories the daemon moved aside",
		Long: `At start the daemon moves sandbox directories its database does not know into
<data>/quarantine/TIME-SANDBOX_ID, after stopping what ran there, instead of
deleting them. These commands work on the data directory (--data); restore
and purge refuse while a daemon runs on it.`,
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List quarantined sandbox directories",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			list, err := daemon.Quarantine(a.dataDir())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ENTRY\tSANDBOX\tQUARANTINED\tPATH")
			for _, q := range list {
				at := ""
				if !q.At.IsZero() {
					at = q.At.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", q.Name, q.SandboxID, at, q.Path)
			}
			return tw.Flush()
		},
	}
	restore := &cobra.Command{
		Use:   "restore ENTRY",
		Short: "Move a quarantined directory back, for a database that knows its sandbox",
		Long: `Restore moves ENTRY back to <data>/sandboxes/SANDBOX_ID, so that the next
start adopts the sandbox. It does so only if the data directory's database
knows the sandbox (otherwise the next start would move it aside again:
berth restore a backup that knows it first) and the sandbox has no
directory already.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := daemon.RestoreQuarantined(cmd.Context(), a.dataDir(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "restored %s to %s\n", args[0], dir)
			return nil
		},
	}
	purge := &cobra.Command{
		Use:   "purge ENTRY...",
		Short: "Delete quarantined directories for good",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			purged, err := daemon.PurgeQuarantined(a.dataDir(), args)
			for _, path := range purged {
				fmt.Fprintf(a.stderr, "purged %s\n", path)
			}
			return err
		},
	}
	cmd.AddCommand(ls, restore, purge)
	return cmd
}
