package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/apitype"
)

// parseTarget reads a target as the CLI takes it: ref=e12, text=Sign in,
// label=Email, testid=submit, role=button or role=button:Continue, and
// anything else as a CSS selector.
func parseTarget(s string) *apitype.BrowserTarget {
	kind, v, ok := strings.Cut(s, "=")
	if ok {
		switch kind {
		case "ref", "text", "label":
			return &apitype.BrowserTarget{By: kind, Value: v}
		case "testid", "test_id":
			return &apitype.BrowserTarget{By: "test_id", Value: v}
		case "role":
			role, name, _ := strings.Cut(v, ":")
			return &apitype.BrowserTarget{By: "role", Role: role, Name: name}
		}
	}
	return &apitype.BrowserTarget{Selector: s}
}

func (a *app) browserCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "browser", Aliases: []string{"br"}, Short: "Drive browser sessions (headless Chromium)",
		Long: "Drive browser sessions. TARGET is a CSS selector, or ref=e12 (from snapshot), text=..., label=...,\ntestid=..., role=button or role=button:Name."}

	var timeout time.Duration
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 0, "how long an action may take, waits for its target included (default 30s, at most 2m)")
	var lease string
	cmd.PersistentFlags().StringVar(&lease, "lease", "", "the human-control lease token to act with while control is held (berth browser control acquire)")
	var mode, viewport, provider string
	open := &cobra.Command{
		Use: "open", Short: "Open a session and print its id", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			req := apitype.CreateBrowserSessionRequest{Mode: mode, Provider: provider}
			if viewport != "" {
				w, h, ok := strings.Cut(viewport, "x")
				wi, werr := strconv.Atoi(w)
				hi, herr := strconv.Atoi(h)
				if !ok || werr != nil || herr != nil {
					return usageError{fmt.Errorf("--viewport %q must be WIDTHxHEIGHT", viewport)}
				}
				req.Viewport = &apitype.Viewport{Width: wi, Height: hi}
			}
			s, err := c.OpenBrowserSession(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, s.ID)
			if s.Mode == apitype.BrowserModeProcess || s.Mode == apitype.BrowserModeIsolated {
				// What a Playwright or Puppeteer user needs next.
				ws := "ws" + strings.TrimPrefix(c.BaseURL(), "http") + "/v1/browser/sessions/" + s.ID + "/cdp"
				fmt.Fprintf(a.stderr, "cdp: %s\n  (send the API key as Authorization: Bearer; Playwright: chromium.connectOverCDP(url, {headers}))\n", ws)
			}
			return nil
		},
	}
	open.Flags().StringVar(&mode, "mode", "", "context (default: a browser context in a shared browser), process (a browser of its own) or isolated (a browser in a sandbox of its own)")
	open.Flags().StringVar(&provider, "provider", "", "browserbase or steel: a remote session at a provider configured on the daemon (implies --mode remote)")
	open.Flags().StringVar(&viewport, "viewport", "", "viewport as WIDTHxHEIGHT (default 800x600)")

	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List sessions", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.BrowserSessions(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tMODE\tSTATE\tPAGES\tURL\tCREATED")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, s.Mode, withReason(s.State, s.Reason), s.Pages, s.URL,
					s.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}

	// action makes a subcommand that runs one action and prints its result.
	action := func(use, short string, nargs int, build func(args []string) apitype.BrowserAction) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: cobra.ExactArgs(nargs),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := a.client()
				if err != nil {
					return err
				}
				act := build(args)
				act.TimeoutMS = timeout.Milliseconds()
				act.Lease = lease
				var res json.RawMessage
				if err := c.BrowserAction(cmd.Context(), args[0], act, &res); err != nil {
					return err
				}
				if len(res) > 0 {
					fmt.Fprintln(a.stdout, string(res))
				}
				return nil
			},
		}
	}
	goTo := action("goto SESSION URL", "Navigate to URL", 2, func(args []string) apitype.BrowserAction {
		return apitype.BrowserAction{Op: "navigate", URL: args[1]}
	})
	click := action("click SESSION TARGET", "Click an element", 2, func(args []string) apitype.BrowserAction {
		return apitype.BrowserAction{Op: "click", Target: parseTarget(args[1])}
	})
	fill := action("fill SESSION TARGET VALUE", "Replace a field's value", 3, func(args []string) apitype.BrowserAction {
		return apitype.BrowserAction{Op: "fill", Target: parseTarget(args[1]), Value: args[2]}
	})
	press := action("press SESSION KEY", "Press a key or chord (Enter, Tab, Control+A) on the focused element", 2, func(args []string) apitype.BrowserAction {
		return apitype.BrowserAction{Op: "press", Value: args[1]}
	})
	eval := action("eval SESSION EXPRESSION", "Evaluate JavaScript in the page and print the JSON result", 2, func(args []string) apitype.BrowserAction {
		return apitype.BrowserAction{Op: "evaluate", Expression: args[1]}
	})

	snapshot := &cobra.Command{
		Use: "snapshot SESSION", Short: "Print the page as YAML with refs for click, fill...", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var snap apitype.BrowserSnapshot
			if err := c.BrowserAction(cmd.Context(), args[0], apitype.BrowserAction{Op: "snapshot", Lease: lease}, &snap); err != nil {
				return err
			}
			fmt.Fprint(a.stdout, snap.YAML)
			if !strings.HasSuffix(snap.YAML, "\n") {
				fmt.Fprintln(a.stdout)
			}
			return nil
		},
	}

	var full bool
	shot := &cobra.Command{
		Use: "shot SESSION FILE", Short: "Write a PNG screenshot of the page to FILE", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			png, err := c.BrowserScreenshot(cmd.Context(), args[0], full)
			if err != nil {
				return err
			}
			return saveFile(args[1], bytes.NewReader(png))
		},
	}
	shot.Flags().BoolVar(&full, "full", false, "the whole page, not just the viewport")

	closeCmd := &cobra.Command{
		Use: "close SESSION", Short: "Close a session", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return c.CloseBrowserSessionLease(cmd.Context(), args[0], lease)
		},
	}
	cmd.AddCommand(open, ls, goTo, click, fill, press, snapshot, shot, eval, closeCmd)
	cmd.AddCommand(a.browserLiveCommands()...)
	cmd.AddCommand(a.browserRecordCommand())
	cmd.AddCommand(a.browserStateCommands()...)
	cmd.AddCommand(a.browserTraceCommand())
	return cmd
}
