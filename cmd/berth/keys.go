package main

import (
	"cmp"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/apitype"
)

func (a *app) keysCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage API keys (needs an admin key)"}
	var scope, name, tenant string
	create := &cobra.Command{
		Use:   "create [NAME]",
		Short: "Create a key and print its secret (shown only once)",
		Long: `Create a key and print its secret (shown only once). An execution or read
key belongs to one tenant (--tenant; default: the daemon's default tenant)
and sees only that tenant's resources; an admin key is the operator's.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if name != "" && name != args[0] {
					return usageError{errors.New("give the name once: as NAME or as --name")}
				}
				name = args[0]
			}
			if name == "" {
				return usageError{errors.New("name the key: berth keys create NAME (or --name NAME)")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			k, err := c.CreateKey(cmd.Context(), apitype.CreateKeyRequest{Name: name, Scope: scope, Tenant: tenant})
			if err != nil {
				return err
			}
			owner := "the operator's"
			if k.Tenant != "" {
				owner = "tenant " + k.Tenant
			}
			fmt.Fprintf(a.stderr, "created %s (%s, scope %s, %s); store the secret now, it is not shown again\n", k.ID, k.Name, k.Scope, owner)
			fmt.Fprintln(a.stdout, k.Secret)
			return nil
		},
	}
	create.Flags().StringVar(&scope, "scope", "execution", "scope: execution (use resources), read (list and read) or admin")
	create.Flags().StringVar(&name, "name", "", "the key's name (or give it as NAME)")
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant (name or ID) the key belongs to (default: the default tenant; not for admin keys)")
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
			fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tTENANT\tPREFIX\tCREATED\tREVOKED")
			for _, k := range keys {
				revoked := ""
				if k.RevokedAt != nil {
					revoked = k.RevokedAt.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s…\t%s\t%s\n", k.ID, k.Name, k.Scope, cmp.Or(k.Tenant, "-"), k.Prefix,
					k.CreatedAt.Local().Format(time.DateTime), revoked)
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
