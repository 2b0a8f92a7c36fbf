package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/apitype"
)

func (a *app) fsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "fs", Short: "Read and write files in a sandbox's workspace"}

	var lsJSON bool
	ls := &cobra.Command{
		Use:   "ls SANDBOX [DIR]",
		Short: "List a directory (all pages)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			dir := "."
			if len(args) == 2 {
				dir = args[1]
			}
			var all []apitype.FileInfo
			cursor := ""
			for {
				page, err := c.ListFiles(cmd.Context(), args[0], dir, cursor, 0)
				if err != nil {
					return err
				}
				all = append(all, page.Entries...)
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			if lsJSON {
				return a.printJSON(all)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, e := range all {
				name := e.Name
				if e.Type == "dir" {
					name += "/"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", e.Mode, e.Size, e.ModifiedAt.Local().Format(time.DateTime), name)
			}
			return tw.Flush()
		},
	}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")

	cat := &cobra.Command{
		Use:   "cat SANDBOX PATH",
		Short: "Print a file",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			rc, err := c.ReadFile(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(a.stdout, rc)
			return err
		},
	}

	var mode uint32
	put := &cobra.Command{
		Use:   "put SANDBOX LOCAL_FILE PATH",
		Short: "Upload a local file (- for standard input) to PATH",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var r io.Reader = a.stdin
			if args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			fi, err := c.WriteFile(cmd.Context(), args[0], args[2], r, mode)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "wrote %s (%d bytes)\n", fi.Path, fi.Size)
			return nil
		},
	}
	put.Flags().Uint32Var(&mode, "mode", 0, "permission bits, in octal (0644 by default)")

	get := &cobra.Command{
		Use:   "get SANDBOX PATH [LOCAL_FILE]",
		Short: "Download PATH to a local file (default: its base name here)",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			dst := filepath.Base(args[1])
			if len(args) == 3 {
				dst = args[2]
			}
			rc, err := c.ReadFile(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			defer rc.Close()
			return saveFile(dst, rc)
		},
	}

	var recursive bool
	rm := &cobra.Command{
		Use:   "rm SANDBOX PATH",
		Short: "Remove a file or (with -r) a directory tree",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.Remove(cmd.Context(), args[0], args[1], recursive)
		},
	}
	rm.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove directories and their contents")

	mkdir := &cobra.Command{
		Use:   "mkdir SANDBOX PATH",
		Short: "Create a directory and its parents",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.Mkdir(cmd.Context(), args[0], args[1])
		},
	}

	var overwrite bool
	mv := &cobra.Command{
		Use:   "mv SANDBOX FROM TO",
		Short: "Move or rename a file or directory",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.Move(cmd.Context(), args[0], apitype.MoveRequest{From: args[1], To: args[2], Overwrite: overwrite})
		},
	}
	mv.Flags().BoolVarP(&overwrite, "force", "f", false, "replace TO if it exists")

	cmd.AddCommand(ls, cat, put, get, rm, mkdir, mv)
	return cmd
}

// saveFile writes what r yields to the local file path (mode 0644)
// through a temporary file beside it and a rename: a failed or cut
// download leaves no partial file.
func saveFile(path string, r io.Reader) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".berth-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
