package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/apitype"
)

func (a *app) keysCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage API keys (needs an admin key)"}
	var scope string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a key and print its secret (shown only once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			k, err := c.CreateKey(cmd.Context(), apitype.CreateKeyRequest{Name: args[0], Scope: scope})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "created %s (%s, scope %s); store the secret now, it is not shown again\n", k.ID, k.Name, k.Scope)
			fmt.Fprintln(a.stdout, k.Secret)
			return nil
		},
	}
	create.Flags().StringVar(&scope, "scope", "execution", "scope: execution or admin")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			keys, err := c.ListKeys(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tPREFIX\tCREATED\tREVOKED")
			for _, k := range keys {
				revoked := ""
				if k.RevokedAt != nil {
					revoked = k.RevokedAt.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s…\t%s\t%s\n", k.ID, k.Name, k.Scope, k.Prefix, k.CreatedAt.Local().Format(time.DateTime), revoked)
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke a key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.RevokeKey(cmd.Context(), args[0])
		},
	}
	cmd.AddCommand(create, ls, revoke)
	return cmd
}
