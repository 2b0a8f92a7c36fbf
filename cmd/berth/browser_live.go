package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// browserLiveCommands are `berth browser live` and `berth browser
// control ...`: watching a session, and taking it over from automation.
func (a *app) browserLiveCommands() []*cobra.Command {
	live := &cobra.Command{
		Use: "live SESSION", Short: "Print a link that shows the session live in a browser (valid 10 minutes, view only)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			link, err := c.BrowserLiveLink(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, link.URL)
			fmt.Fprintf(a.stderr, "anyone with this link can watch until %s; paste a lease token (berth browser control acquire) into the page to take control\n",
				link.ExpiresAt.Local().Format(time.DateTime))
			return nil
		},
	}

	control := &cobra.Command{Use: "control", Short: "Take a session over from automation for a while (a human-control lease)"}
	var ttl time.Duration
	ttlMS := func() (time.Duration, error) {
		if ttl != 0 && (ttl < time.Second || ttl > 2*time.Minute) {
			return 0, usageError{fmt.Errorf("--ttl %s must be between 1s and 2m", ttl)}
		}
		return ttl, nil
	}
	acquire := &cobra.Command{
		Use: "acquire SESSION", Short: "Acquire control and print the lease token (automation gets 409 control_held until release or expiry)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := ttlMS()
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.AcquireBrowserControl(cmd.Context(), args[0], d)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, l.Token)
			fmt.Fprintf(a.stderr, "control held until %s\n", l.ExpiresAt.Local().Format(time.TimeOnly))
			return nil
		},
	}
	acquire.Flags().DurationVar(&ttl, "ttl", 0, "how long the lease lasts, 1s-2m (default 30s)")
	renew := &cobra.Command{
		Use: "renew SESSION TOKEN", Short: "Extend a lease", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := ttlMS()
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.RenewBrowserControl(cmd.Context(), args[0], args[1], d)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "control held until %s\n", l.ExpiresAt.Local().Format(time.TimeOnly))
			return nil
		},
	}
	renew.Flags().DurationVar(&ttl, "ttl", 0, "how long from now, 1s-2m (default 30s)")
	release := &cobra.Command{
		Use: "release SESSION TOKEN", Short: "Release a lease: automation acts again", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.ReleaseBrowserControl(cmd.Context(), args[0], args[1])
		},
	}
	status := &cobra.Command{
		Use: "status SESSION", Short: "Print who drives the session: automation, or human until a time", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			st, err := c.BrowserControlState(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if st.ExpiresAt != nil {
				fmt.Fprintf(a.stdout, "%s until %s\n", st.Mode, st.ExpiresAt.Local().Format(time.TimeOnly))
				return nil
			}
			fmt.Fprintln(a.stdout, st.Mode)
			return nil
		},
	}
	control.AddCommand(acquire, renew, release, status)
	return []*cobra.Command{live, control}
}
