package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/apitype"
)

// networkFlags are the policy flags of sandbox create and network set.
type networkFlags struct {
	mode                   string
	allow, deny, allowOnly []string
	ports                  []int
}

func (nf *networkFlags) add(cmd *cobra.Command, withMode bool) {
	f := cmd.Flags()
	if withMode {
		f.StringVar(&nf.mode, "network", "", "network mode: none (loopback only, the default) or egress (public internet through Berth)")
	}
	f.StringSliceVar(&nf.allow, "allow", nil, "destinations to add, usually with a port: github.com:22, 10.0.0.0/8 (comma-separated, repeatable)")
	f.StringSliceVar(&nf.deny, "deny", nil, "destinations refused: example.com, *.example.com, 1.2.3.4, 10.0.0.0/8[:port]")
	f.StringSliceVar(&nf.allowOnly, "allow-only", nil, "only these destinations are reachable (an allowlist)")
	f.IntSliceVar(&nf.ports, "port", nil, "ports any allowed destination may be reached on (default 80,443)")
}

// policy returns the policy the flags give, starting from base: each
// given flag replaces its list.
func (nf *networkFlags) policy(cmd *cobra.Command, base apitype.Network) apitype.Network {
	f := cmd.Flags()
	if nf.mode != "" {
		base.Mode = nf.mode
	}
	if f.Changed("allow") {
		base.Allow = nf.allow
	}
	if f.Changed("deny") {
		base.Deny = nf.deny
	}
	if f.Changed("allow-only") {
		base.AllowOnly = nf.allowOnly
	}
	if f.Changed("port") {
		base.Ports = nf.ports
	}
	return base
}

func (nf *networkFlags) changed(cmd *cobra.Command) bool {
	f := cmd.Flags()
	return nf.mode != "" || f.Changed("allow") || f.Changed("deny") || f.Changed("allow-only") || f.Changed("port")
}

func (a *app) networkCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "network", Short: "Show and change a sandbox's network policy, and read its connection log"}

	get := &cobra.Command{
		Use:   "get SANDBOX",
		Short: "Print a sandbox's network policy as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.GetNetwork(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printJSON(p)
		},
	}

	var nf networkFlags
	var clear bool
	set := &cobra.Command{
		Use:   "set SANDBOX",
		Short: "Change a running sandbox's network policy: new connections obey at once",
		Long: `Change a sandbox's network policy. Each flag given replaces its list; lists not
given are kept (--clear starts from an empty policy). New connections obey at
once; open connections the new policy refuses are closed.`,
		Example: `  berth sandbox network set $SB --allow-only 'registry.npmjs.org,*.github.com'
  berth sandbox network set $SB --deny '*.example.com' --allow github.com:22`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			base, err := c.GetNetwork(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if clear {
				base = apitype.Network{Mode: base.Mode}
			}
			p, err := c.SetNetwork(cmd.Context(), args[0], nf.policy(cmd, base))
			if err != nil {
				return err
			}
			return a.printJSON(p)
		},
	}
	nf.add(set, false)
	set.Flags().BoolVar(&clear, "clear", false, "start from an empty policy (public destinations on the default ports)")

	var limit int
	var asJSON bool
	log := &cobra.Command{
		Use:   "log SANDBOX",
		Short: "Print a sandbox's connection log, newest first: time, name, dialed IP:port, decision, bytes, reason",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			entries, err := c.NetworkLog(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(entries)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tNAME\tDESTINATION\tDECISION\tUP\tDOWN\tREASON")
			for _, e := range entries {
				dst := e.IP
				if e.Port != 0 {
					dst = fmt.Sprintf("%s:%d", e.IP, e.Port)
				}
				if e.Proto == "dns" {
					dst = "dns " + e.IP
				}
				why := e.Reason
				if e.Detail != "" {
					why = strings.TrimSpace(why + " " + e.Detail)
				}
				dec := e.Decision
				if e.Secret {
					dec += "+secret"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", e.Time.Local().Format(time.TimeOnly), e.Domain, dst, dec, e.BytesUp, e.BytesDown, why)
			}
			return tw.Flush()
		},
	}
	log.Flags().IntVar(&limit, "limit", 100, "entries to print (0: all kept)")
	log.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(get, set, log)
	return cmd
}

func (a *app) secretCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "secret", Aliases: []string{"secrets"}, Short: "Bind credentials to a sandbox's outbound HTTPS: set on the way out, never inside the sandbox"}

	var host, header, value, valueFile string
	set := &cobra.Command{
		Use:   "set SANDBOX --host HOST --header NAME (--value VALUE | --value-file FILE)",
		Short: "Set a header on every HTTPS request the sandbox sends to HOST",
		Long: `Bind a header to a host. For HTTPS to that host Berth terminates TLS with the
sandbox's own CA, verifies the real server, sets the header and forwards: the
value never enters the sandbox. --value-file - reads the value from stdin.`,
		Example: `  berth secret set $SB --host api.openai.com --header Authorization --value "Bearer $KEY"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (value == "") == (valueFile == "") {
				return usageError{fmt.Errorf("give the value with exactly one of --value and --value-file")}
			}
			if valueFile != "" {
				var b []byte
				var err error
				if valueFile == "-" {
					b, err = readAllLimited(a.stdin, 8<<10+1)
				} else {
					b, err = os.ReadFile(valueFile)
				}
				if err != nil {
					return err
				}
				value = strings.TrimRight(string(b), "\r\n")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.PutSecret(cmd.Context(), args[0], apitype.Secret{Host: host, Header: header, Value: value})
			if err != nil {
				return err
			}
			return a.printSecrets(list)
		},
	}
	set.Flags().StringVar(&host, "host", "", "the exact host name, e.g. api.openai.com")
	set.Flags().StringVar(&header, "header", "", "the header to set, e.g. Authorization")
	set.Flags().StringVar(&value, "value", "", "the header's value")
	set.Flags().StringVar(&valueFile, "value-file", "", "read the value from a file (- for stdin)")
	_ = set.MarkFlagRequired("host")
	_ = set.MarkFlagRequired("header")

	ls := &cobra.Command{
		Use:     "ls SANDBOX",
		Aliases: []string{"list"},
		Short:   "List a sandbox's secrets (hosts and headers; values are never shown)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.Secrets(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printSecrets(list)
		},
	}

	var rmHost, rmHeader string
	rm := &cobra.Command{
		Use:   "rm SANDBOX --host HOST [--header NAME]",
		Short: "Remove the secrets bound to a host (or only one header's)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.DeleteSecret(cmd.Context(), args[0], rmHost, rmHeader)
			if err != nil {
				return err
			}
			return a.printSecrets(list)
		},
	}
	rm.Flags().StringVar(&rmHost, "host", "", "the host")
	rm.Flags().StringVar(&rmHeader, "header", "", "only this header")
	_ = rm.MarkFlagRequired("host")
	cmd.AddCommand(set, ls, rm)
	return cmd
}

func (a *app) printSecrets(list []apitype.Secret) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tHEADER")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\n", s.Host, s.Header)
	}
	return tw.Flush()
}

// readAllLimited reads r whole, refusing more than n-1 bytes.
func readAllLimited(r io.Reader, n int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) >= n {
		return nil, usageError{fmt.Errorf("the value is longer than %d bytes", n-1)}
	}
	return b, nil
}
