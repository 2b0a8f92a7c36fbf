package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/berthdev/berth/internal/mcpserver"
)

func (a *app) mcpCommand() *cobra.Command {
	var toolset string
	var keep bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve Berth's tools to an agent over MCP on stdio",
		Long: `Serve Berth's MCP tools (sandboxes, browser sessions, conversions) on
standard input and output, for agent hosts that start a server as a command:

  claude mcp add berth -- berth mcp

Calls go to the daemon at --url / BERTH_URL with the key --token /
BERTH_TOKEN; the model never sees or chooses the key. The process is one
toolset: its tools reach only the sandboxes, sessions and outputs it made,
and when its input closes it closes what it opened (a browser session a
person has taken control of stays open), unless --keep. With --toolset NAME
a later "berth mcp --toolset NAME" with the same key reaches the same
sandboxes. The daemon serves the same tools at /mcp (streamable HTTP).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id := "mcp-stdio-" + randomHex(10)
			if toolset != "" {
				sum := sha256.Sum256([]byte(toolset))
				id = "mcp-named-" + hex.EncodeToString(sum[:10])
			}
			ts := mcpserver.NewToolset(id, c)
			srv := mcpserver.New(func(context.Context, *mcp.RequestExtra) (*mcpserver.Toolset, error) { return ts, nil },
				mcpserver.Options{Version: version})
			runErr := srv.Run(cmd.Context(), &mcp.IOTransport{Reader: nopCloser{a.stdin}, Writer: nopWriteCloser{a.stdout}})
			if !keep {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				rep := ts.Close(ctx)
				b, _ := json.Marshal(rep)
				fmt.Fprintf(a.stderr, "berth mcp: closed the toolset: %s\n", b)
			}
			if runErr != nil && cmd.Context().Err() == nil {
				return runErr
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&toolset, "toolset", "", "name the toolset, so a later `berth mcp --toolset NAME` reaches its sandboxes")
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the toolset's sandboxes and browser sessions when the input closes")
	return cmd
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// nopCloser and nopWriteCloser hand the CLI's standard streams to the MCP
// transport without letting it close them.
type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
