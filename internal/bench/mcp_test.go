package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// bearer adds a key to every request of the MCP client.
type bearer string

func (k bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

// BenchmarkMCPExec measures `true` in a running sandbox through the MCP
// tool sandbox_exec over streamable HTTP (the Go SDK's client against
// /mcp), against the same command through the REST call (one POST with
// wait_ms), interleaved in the same run. The MCP call does what the REST
// one does plus JSON-RPC, schema validation, the toolset's ownership check
// and an in-process hop to the REST route.
func BenchmarkMCPExec(b *testing.B) {
	d := testenv.StartDaemon(b, nil)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer(d.Token)}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_open", Arguments: map[string]any{"name": "bench", "runtime": "process"}})
	if err != nil || res.IsError {
		b.Fatalf("sandbox_open: %v %+v", err, res)
	}
	sbID := res.StructuredContent.(map[string]any)["id"].(string)

	viaMCP := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_exec", Arguments: map[string]any{"sandbox": sbID, "command": "true"}})
		if err != nil {
			return err
		}
		if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || !strings.HasPrefix(text, "exit code 0") {
			return fmt.Errorf("sandbox_exec: %q", text)
		}
		return nil
	}
	viaREST := func() error {
		cmd, err := d.Client.ExecWait(ctx, sbID, apitype.CreateCommandRequest{Command: "true"}, client.CommandQuery{WaitMS: 60000, MaxBytes: 16 << 10})
		if err == nil && (cmd.ExitCode == nil || *cmd.ExitCode != 0) {
			err = fmt.Errorf("true: %+v", cmd)
		}
		return err
	}
	for range 5 {
		if err := viaMCP(); err != nil {
			b.Fatal(err)
		}
		if err := viaREST(); err != nil {
			b.Fatal(err)
		}
	}
	n := b.N
	got, floor := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		for _, m := range []struct {
			fn  func() error
			out *[]time.Duration
		}{{viaMCP, &got}, {viaREST, &floor}} {
			start := time.Now()
			if err := m.fn(); err != nil {
				b.Fatal(err)
			}
			*m.out = append(*m.out, time.Since(start))
		}
	}
	b.StopTimer()
	report(b, "exec true via MCP (streamable HTTP)", got, "the REST call", floor, "<= 1.3x at p50")
}
