package daemon_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/mcpserver"
	"github.com/berthdev/berth/internal/testenv"
)

// keyHeader adds a key and a toolset name to every request of an MCP
// client, as an agent host configured with them does.
type keyHeader struct {
	token, toolset string
}

func (k keyHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.token)
	if k.toolset != "" {
		r.Header.Set("Berth-Toolset", k.toolset)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpHTTP connects the Go SDK's client to the daemon's /mcp.
func mcpHTTP(t *testing.T, d *testenv.Daemon, token, toolset string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "berth-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp",
		HTTPClient: &http.Client{Transport: keyHeader{token, toolset}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool that must succeed and returns its result.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res := callToolResult(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s(%v) failed: %s", name, args, resultText(res))
	}
	return res
}

// callToolResult calls a tool and returns its result, failed or not.
func callToolResult(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	return res
}

// toolError calls a tool that must fail and returns its message.
func toolError(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res := callToolResult(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("%s(%v) = %s, want an error", name, args, resultText(res))
	}
	return resultText(res)
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured decodes a result's structured content.
func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return out
}

var mcpTools = []string{"sandbox_open", "sandbox_list", "sandbox_exec", "sandbox_read_file", "sandbox_write_file",
	"sandbox_list_files", "sandbox_delete_file", "sandbox_start_service", "sandbox_hibernate", "sandbox_delete",
	"browser_open", "browser_navigate", "browser_snapshot", "browser_click", "browser_hover", "browser_fill",
	"browser_type", "browser_press", "browser_select", "browser_check", "browser_scroll", "browser_wait",
	"browser_screenshot", "browser_pages", "browser_checkpoint", "browser_resume", "browser_close", "convert"}

func checkTools(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	have := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		have[tool.Name] = tool
	}
	for _, name := range mcpTools {
		tool, ok := have[name]
		if !ok {
			t.Errorf("tool %s missing (have %d tools)", name, len(res.Tools))
			continue
		}
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("tool %s has no description or input schema", name)
		}
	}
	if len(have) != len(mcpTools) {
		t.Errorf("%d tools, want %d", len(have), len(mcpTools))
	}
}

func TestMCPSandboxTools(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	cs := mcpHTTP(t, d, d.Token, "")
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the Go SDK's client negotiated %q, want the stateless 2026-07-28", v)
	}
	checkTools(t, cs)
	t.Run("protocol", func(t *testing.T) {
		hc := &http.Client{Transport: keyHeader{token: d.Token}}
		post := func(hc *http.Client, version string) (*http.Response, string) {
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version +
				`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
			req, _ := http.NewRequest(http.MethodPost, d.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			return resp, b.String()
		}
		// An older revision is negotiated for a client that asks for it.
		for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
			if resp, body := post(hc, v); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"protocolVersion":"`+v+`"`) {
				t.Errorf("initialize asking %s: %s %s", v, resp.Status, body)
			}
		}
		// Without a key: 401, like every route.
		if resp, _ := post(http.DefaultClient, "2025-06-18"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("without a key: %s", resp.Status)
		}
		// A toolset name that is not one.
		bad := &http.Client{Transport: keyHeader{token: d.Token, toolset: "../x"}}
		if resp, body := post(bad, "2025-06-18"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Berth-Toolset") {
			t.Errorf("a bad Berth-Toolset: %s %s", resp.Status, body)
		}
		// Stateless: no stream to GET.
		if resp, err := hc.Get(d.URL + "/mcp"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET /mcp: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
	})

	open := structured[struct {
		ID      string `json:"id"`
		Created bool   `json:"created"`
	}](t, callTool(t, cs, "sandbox_open", map[string]any{"name": "mcp-work", "runtime": testenv.Runtime()}))
	if !strings.HasPrefix(open.ID, "sbx_") || !open.Created {
		t.Fatalf("sandbox_open = %+v, want a new sbx_", open)
	}
	again := structured[struct {
		ID      string `json:"id"`
		Created bool   `json:"created"`
	}](t, callTool(t, cs, "sandbox_open", map[string]any{"name": "mcp-work"}))
	if again.ID != open.ID || again.Created {
		t.Fatalf("sandbox_open again = %+v, want %s, not created", again, open.ID)
	}
	sb := open.ID

	t.Run("exec", func(t *testing.T) {
		res := callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "echo out; echo err >&2; exit 3"})
		text := resultText(res)
		if !strings.Contains(text, "exit code 3") || !strings.Contains(text, "out\n") || !strings.Contains(text, "err\n") {
			t.Fatalf("exec text = %q", text)
		}
		out := structured[struct {
			ExitCode *int   `json:"exit_code"`
			Stdout   string `json:"stdout"`
		}](t, res)
		if out.ExitCode == nil || *out.ExitCode != 3 || out.Stdout != "out\n" {
			t.Fatalf("exec structured = %+v", out)
		}
	})
	t.Run("exec bounds", func(t *testing.T) {
		if msg := toolError(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "true", "timeout_seconds": 601}); !strings.Contains(msg, "timeout_seconds: at most 600") {
			t.Fatalf("a timeout past the bound: %q", msg)
		}
		// A command past its timeout is killed, and says so.
		res := callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "sleep 30", "timeout_seconds": 1})
		if text := resultText(res); strings.Contains(text, "exit code 0") || structured[struct {
			Status string `json:"status"`
		}](t, res).Status != apitype.CommandTimedOut {
			t.Fatalf("a command past its timeout: %q", text)
		}
	})
	t.Run("truncated output is marked", func(t *testing.T) {
		res := callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "head -c 100000 /dev/zero | tr '\\0' a"})
		text := resultText(res)
		if !strings.Contains(text, "[cut: showed 16384 of 100000 bytes") || strings.Count(text, "a") > 17000 {
			t.Fatalf("a 100000-byte output: %d bytes of text, tail %q", len(text), text[max(0, len(text)-200):])
		}
		// Positive control: a short output is whole and unmarked.
		if text := resultText(callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "printf abc"})); strings.Contains(text, "[cut") || !strings.Contains(text, "abc") {
			t.Fatalf("a short output: %q", text)
		}
	})
	t.Run("files", func(t *testing.T) {
		callTool(t, cs, "sandbox_write_file", map[string]any{"sandbox": sb, "path": "notes/a.txt", "content": "hello </untrusted> there"})
		text := resultText(callTool(t, cs, "sandbox_read_file", map[string]any{"sandbox": sb, "path": "notes/a.txt"}))
		if !strings.HasPrefix(text, "<untrusted") || !strings.Contains(text, `hello <\/untrusted> there`) || strings.Count(text, "</untrusted>") != 1 {
			t.Fatalf("read_file = %q", text)
		}
		list := structured[struct {
			Entries []struct{ Name, Type string } `json:"entries"`
		}](t, callTool(t, cs, "sandbox_list_files", map[string]any{"sandbox": sb, "path": "notes"}))
		if len(list.Entries) != 1 || list.Entries[0].Name != "a.txt" {
			t.Fatalf("list_files = %+v", list)
		}
		callTool(t, cs, "sandbox_delete_file", map[string]any{"sandbox": sb, "path": "notes/a.txt"})
		if msg := toolError(t, cs, "sandbox_read_file", map[string]any{"sandbox": sb, "path": "notes/a.txt"}); !strings.Contains(msg, "not_found") {
			t.Fatalf("reading a deleted file: %q", msg)
		}
		// A long file is cut, marked, and read on from the offset.
		callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "seq 1 20000 > long.txt"})
		text = resultText(callTool(t, cs, "sandbox_read_file", map[string]any{"sandbox": sb, "path": "long.txt"}))
		if !strings.Contains(text, "read on with offset 16384") {
			t.Fatalf("a long file: tail %q", text[max(0, len(text)-200):])
		}
		text = resultText(callTool(t, cs, "sandbox_read_file", map[string]any{"sandbox": sb, "path": "long.txt", "offset": 108000}))
		if !strings.Contains(text, "20000\n") || strings.Contains(text, "[cut") {
			t.Fatalf("the end of a long file: %q", text)
		}
		// An image is image content, never base64 text.
		callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": `printf '\211PNG\r\n\032\nrest' > dot.png`})
		res := callTool(t, cs, "sandbox_read_file", map[string]any{"sandbox": sb, "path": "dot.png"})
		img, ok := res.Content[0].(*mcp.ImageContent)
		if !ok || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG")) {
			t.Fatalf("reading a PNG: %#v", res.Content[0])
		}
	})
	t.Run("service and preview", func(t *testing.T) {
		out := structured[struct {
			PreviewURL string `json:"preview_url"`
			APIURL     string `json:"api_url"`
		}](t, callTool(t, cs, "sandbox_start_service", map[string]any{"sandbox": sb, "name": "web",
			"command": "mkdir -p site && echo served-by-mcp > site/index.html && exec python3 -m http.server 8000 --directory site", "port": 8000}))
		// Preview hosts are off in tests: the port through the API.
		if out.PreviewURL != "" || !strings.HasPrefix(out.APIURL, d.URL+"/v1/sandboxes/"+sb+"/ports/8000") {
			t.Fatalf("service links %+v", out)
		}
		hc := &http.Client{Transport: keyHeader{token: d.Token}}
		testenv.Eventually(t, 60*time.Second, "the preview serves the page", func() bool {
			resp, err := hc.Get(out.APIURL)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			return strings.Contains(b.String(), "served-by-mcp")
		})
	})

	t.Run("outside the toolset", func(t *testing.T) {
		// A sandbox the same key made through REST is not the toolset's.
		other, err := d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Runtime: testenv.Runtime()})
		if err != nil {
			t.Fatal(err)
		}
		for tool, args := range map[string]map[string]any{
			"sandbox_exec":      {"sandbox": other.ID, "command": "touch x"},
			"sandbox_read_file": {"sandbox": other.ID, "path": "x"},
			"sandbox_delete":    {"sandbox": other.ID},
			"sandbox_hibernate": {"sandbox": other.ID},
		} {
			msg := toolError(t, cs, tool, args)
			if !strings.Contains(msg, "not_found") || !strings.Contains(msg, "in this toolset") {
				t.Errorf("%s on a sandbox outside the toolset: %q", tool, msg)
			}
		}
		if _, err := d.Client.GetSandbox(context.Background(), other.ID); err != nil {
			t.Fatalf("the outside sandbox after the refused calls: %v", err)
		}
		// Nor is a name another client took.
		if _, err := d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Name: "taken", Runtime: testenv.Runtime()}); err != nil {
			t.Fatal(err)
		}
		if msg := toolError(t, cs, "sandbox_open", map[string]any{"name": "taken"}); !strings.Contains(msg, "outside this toolset") {
			t.Fatalf("opening a name outside the toolset: %q", msg)
		}
		// Another toolset of the same key does not see this one's
		// sandbox; this one does (the positive control).
		cs2 := mcpHTTP(t, d, d.Token, "second")
		if msg := toolError(t, cs2, "sandbox_exec", map[string]any{"sandbox": sb, "command": "true"}); !strings.Contains(msg, "not_found") {
			t.Fatalf("another toolset's sandbox: %q", msg)
		}
		callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "true"})
		list := structured[struct {
			Sandboxes []struct{ ID string } `json:"sandboxes"`
		}](t, callTool(t, cs2, "sandbox_list", nil))
		if len(list.Sandboxes) != 0 {
			t.Fatalf("the second toolset lists %+v", list)
		}
	})
	t.Run("a read key cannot change anything", func(t *testing.T) {
		k, err := d.Client.CreateKey(context.Background(), apitype.CreateKeyRequest{Name: "mcp-reader", Scope: "read"})
		if err != nil {
			t.Fatal(err)
		}
		reader := mcpHTTP(t, d, k.Secret, "")
		if msg := toolError(t, reader, "sandbox_open", map[string]any{"name": "by-reader"}); !strings.Contains(msg, "scope_insufficient") {
			t.Fatalf("sandbox_open with a read key: %q", msg)
		}
	})
	t.Run("hibernate and delete", func(t *testing.T) {
		callTool(t, cs, "sandbox_hibernate", map[string]any{"sandbox": sb})
		text := resultText(callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "cat site/index.html"}))
		if !strings.Contains(text, "served-by-mcp") {
			t.Fatalf("after hibernate: %q", text)
		}
	})
	t.Run("closing the toolset deletes what it made", func(t *testing.T) {
		tmp := structured[struct {
			ID string `json:"id"`
		}](t, callTool(t, cs, "sandbox_open", map[string]any{"name": "mcp-temp", "runtime": testenv.Runtime()}))
		rep := closeToolset(t, d, d.Token, "")
		if !slices.Contains(rep.SandboxesDeleted, sb) || !slices.Contains(rep.SandboxesDeleted, tmp.ID) {
			t.Fatalf("close report %+v, want %s and %s deleted", rep, sb, tmp.ID)
		}
		for _, id := range []string{sb, tmp.ID} {
			if _, err := d.Client.GetSandbox(context.Background(), id); !client.IsCode(err, errcode.NotFound) {
				t.Fatalf("sandbox %s after the toolset closed: %v", id, err)
			}
		}
	})
}

// closeToolset closes a toolset with DELETE /mcp.
func closeToolset(t *testing.T, d *testenv.Daemon, token, toolset string) mcpserver.CloseReport {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, d.URL+"/mcp", nil)
	resp, err := (&http.Client{Transport: keyHeader{token, toolset}, Timeout: 3 * time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep mcpserver.CloseReport
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /mcp: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestMCPStdio drives `berth mcp` (the real binary) over stdio: the
// process is one toolset, and its sandboxes go when its input closes.
func TestMCPStdio(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	cmd := exec.Command(testenv.Binary(t), "mcp")
	cmd.Env = append(cmd.Environ(), "BERTH_URL="+d.URL, "BERTH_TOKEN="+d.Token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "berth-test", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Minute}, nil)
	if err != nil {
		t.Fatalf("starting berth mcp: %v", err)
	}
	checkTools(t, cs)
	sb := structured[struct {
		ID string `json:"id"`
	}](t, callTool(t, cs, "sandbox_open", map[string]any{"name": "stdio-work", "runtime": testenv.Runtime()})).ID
	if text := resultText(callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": sb, "command": "echo via-stdio"})); !strings.Contains(text, "via-stdio") {
		t.Fatalf("exec over stdio: %q", text)
	}
	// The toolset over HTTP with the same key does not reach it.
	if msg := toolError(t, mcpHTTP(t, d, d.Token, ""), "sandbox_exec", map[string]any{"sandbox": sb, "command": "true"}); !strings.Contains(msg, "not_found") {
		t.Fatalf("the stdio toolset's sandbox over HTTP: %q", msg)
	}
	if err := cs.Close(); err != nil {
		t.Logf("closing: %v (stderr %s)", err, stderr.String())
	}
	if _, err := d.Client.GetSandbox(context.Background(), sb); !client.IsCode(err, errcode.NotFound) {
		t.Fatalf("the stdio toolset's sandbox after its input closed: %v (stderr %s)", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "closed the toolset") {
		t.Fatalf("berth mcp's stderr: %s", stderr.String())
	}
}

func TestMCPBrowserTools(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	cs := mcpHTTP(t, d, d.Token, "browser")
	base := pages(t)
	open := func() string {
		out := structured[struct {
			Session string `json:"session"`
		}](t, callTool(t, cs, "browser_open", nil))
		if !strings.HasPrefix(out.Session, "brs_") {
			t.Fatalf("browser_open = %+v", out)
		}
		return out.Session
	}
	s := open()
	text := resultText(callTool(t, cs, "browser_navigate", map[string]any{"session": s, "url": base + "/form.html"}))
	if !strings.Contains(text, "HTTP 200") || !strings.Contains(text, "Sign up") {
		t.Fatalf("navigate: %q", text)
	}
	snap := resultText(callTool(t, cs, "browser_snapshot", map[string]any{"session": s}))
	if !strings.Contains(snap, "<untrusted source=\"page "+base) || !strings.Contains(snap, "[ref=") {
		t.Fatalf("snapshot: %q", snap)
	}
	ref := refOf(t, snap, `textbox "Name"`)
	callTool(t, cs, "browser_fill", map[string]any{"session": s, "ref": ref, "value": "Ada"})
	callTool(t, cs, "browser_click", map[string]any{"session": s, "label": "Email"})
	callTool(t, cs, "browser_type", map[string]any{"session": s, "text": "ada@example.com"})
	callTool(t, cs, "browser_check", map[string]any{"session": s, "label": "Subscribe"})
	callTool(t, cs, "browser_select", map[string]any{"session": s, "selector": "#plan", "values": []string{"Pro"}})
	callTool(t, cs, "browser_hover", map[string]any{"session": s, "role": "button", "name": "Submit"})
	callTool(t, cs, "browser_scroll", map[string]any{"session": s, "delta_y": 100})
	callTool(t, cs, "browser_press", map[string]any{"session": s, "selector": "#name", "key": "Enter"})
	callTool(t, cs, "browser_wait", map[string]any{"session": s, "text": "Ada|ada@example.com|true|pro"})
	if msg := toolError(t, cs, "browser_click", map[string]any{"session": s, "ref": "e1", "selector": "#go"}); !strings.Contains(msg, "exactly one") {
		t.Fatalf("two targets: %q", msg)
	}

	res := callTool(t, cs, "browser_screenshot", map[string]any{"session": s})
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG")) || len(res.Content) != 1 {
		t.Fatalf("screenshot content: %#v", res.Content)
	}
	if text := resultText(callTool(t, cs, "browser_pages", map[string]any{"session": s})); !strings.Contains(text, "* 0 "+base+"/form.html") {
		t.Fatalf("pages: %q", text)
	}

	cp := structured[struct {
		Checkpoint string `json:"checkpoint"`
	}](t, callTool(t, cs, "browser_checkpoint", map[string]any{"session": s})).Checkpoint
	resumed := structured[struct {
		Session string `json:"session"`
		URL     string `json:"url"`
	}](t, callTool(t, cs, "browser_resume", map[string]any{"checkpoint": cp}))
	if resumed.Session == "" || resumed.Session == s {
		t.Fatalf("resume = %+v", resumed)
	}

	// IDs from outside the toolset: a session the key opened through
	// REST, another toolset's session and checkpoint.
	other, err := d.Client.OpenBrowserSession(context.Background(), apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Client.CloseBrowserSession(context.Background(), other.ID)
	for _, id := range []string{other.ID, "brs_doesnotexist"} {
		if msg := toolError(t, cs, "browser_navigate", map[string]any{"session": id, "url": base + "/docs.html"}); !strings.Contains(msg, "not_found") {
			t.Fatalf("navigate %s outside the toolset: %q", id, msg)
		}
	}
	cs2 := mcpHTTP(t, d, d.Token, "browser-2")
	if msg := toolError(t, cs2, "browser_screenshot", map[string]any{"session": s}); !strings.Contains(msg, "not_found") {
		t.Fatalf("another toolset's session: %q", msg)
	}
	if msg := toolError(t, cs2, "browser_resume", map[string]any{"checkpoint": cp}); !strings.Contains(msg, "not_found") {
		t.Fatalf("another toolset's checkpoint: %q", msg)
	}

	// A person takes control of the resumed session: the toolset's tools
	// cannot act on it, and closing the toolset leaves it open.
	lease, err := d.Client.AcquireBrowserControl(context.Background(), resumed.Session, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if msg := toolError(t, cs, "browser_click", map[string]any{"session": resumed.Session, "selector": "#go"}); !strings.Contains(msg, "control_held") {
		t.Fatalf("an action on a held session: %q", msg)
	}
	closed := structured[struct {
		Closed bool `json:"closed"`
	}](t, callTool(t, cs, "browser_close", map[string]any{"session": s}))
	if !closed.Closed {
		t.Fatalf("browser_close of an unheld session: %+v", closed)
	}
	third := open()
	rep := closeToolset(t, d, d.Token, "browser")
	if !slices.Contains(rep.BrowsersClosed, third) || !slices.Contains(rep.BrowsersKept, resumed.Session) || slices.Contains(rep.BrowsersClosed, resumed.Session) {
		t.Fatalf("close report %+v: want %s closed and %s kept", rep, third, resumed.Session)
	}
	if _, err := d.Client.BrowserSession(context.Background(), resumed.Session); err != nil {
		t.Fatalf("the held session after the toolset closed: %v", err)
	}
	if _, err := d.Client.BrowserSession(context.Background(), third); !client.IsCode(err, errcode.NotFound) {
		t.Fatalf("the toolset's session after it closed: %v", err)
	}
	if err := d.Client.CloseBrowserSessionLease(context.Background(), resumed.Session, lease.Token); err != nil {
		t.Fatal(err)
	}
}

// refOf finds the ref of the snapshot line that contains what.
func refOf(t *testing.T, snap, what string) string {
	t.Helper()
	for _, line := range strings.Split(snap, "\n") {
		if strings.Contains(line, what) {
			if i := strings.Index(line, "[ref="); i >= 0 {
				return strings.SplitN(line[i+5:], "]", 2)[0]
			}
		}
	}
	t.Fatalf("no ref for %q in %s", what, snap)
	return ""
}

func TestMCPConvert(t *testing.T) {
	t.Parallel()
	needJobs(t)
	d := testenv.StartDaemon(t, nil)
	cs := mcpHTTP(t, d, d.Token, "")
	res := callTool(t, cs, "convert", map[string]any{"action": "html-pdf", "content": "<h1>Hello from MCP</h1>"})
	out := structured[struct {
		Output string `json:"output"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	}](t, res)
	var link *mcp.ResourceLink
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			link = l
		}
	}
	if link == nil || link.URI != out.Output || link.Size == nil || *link.Size != out.Size || link.MIMEType != "application/pdf" {
		t.Fatalf("convert content %#v, structured %+v", res.Content, out)
	}
	read, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: out.Output})
	if err != nil {
		t.Fatal(err)
	}
	blob := read.Contents[0].Blob
	if read.Contents[0].MIMEType != "application/pdf" {
		t.Fatalf("the output's MIME type: %q", read.Contents[0].MIMEType)
	}
	sum := sha256.Sum256(blob)
	if !bytes.HasPrefix(blob, []byte("%PDF")) || int64(len(blob)) != out.Size || hex.EncodeToString(sum[:]) != out.SHA256 {
		t.Fatalf("the output: %d bytes, sha256 %x; the tool said %d, %s", len(blob), sum, out.Size, out.SHA256)
	}
	// Another toolset cannot read it.
	if _, err := mcpHTTP(t, d, d.Token, "other").ReadResource(context.Background(), &mcp.ReadResourceParams{URI: out.Output}); err == nil {
		t.Fatal("another toolset read the output")
	}
	if msg := toolError(t, cs, "convert", map[string]any{"action": "html-docx", "content": "x"}); !strings.Contains(msg, "action") {
		t.Fatalf("an unknown action: %q", msg)
	}
}

// dropFirst forwards requests to the daemon, but for the first request
// matching drop it lets the daemon act and then cuts the client's
// connection instead of answering: an outcome the client cannot know.
type dropFirst struct {
	target  string
	drop    func(*http.Request) bool
	dropped bool
}

func (p *dropFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if !p.dropped && p.drop(r) {
		p.dropped = true
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	_, _ = w.Write(b.Bytes())
}

// TestMCPUnknownOutcome: a browser_open whose answer is lost is reported
// as unknown, and the next browser_open learns its outcome (the session it
// made) instead of making another.
func TestMCPUnknownOutcome(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	proxy := &dropFirst{target: d.URL, drop: func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Path == "/v1/browser/sessions"
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	ts := mcpserver.NewToolset("mcp-unknown-test", client.New(srv.URL, d.Token))
	server := mcpserver.New(func(context.Context, *mcp.RequestExtra) (*mcpserver.Toolset, error) { return ts, nil }, mcpserver.Options{})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	if msg := toolError(t, cs, "browser_open", nil); !strings.Contains(msg, "outcome of this browser_open is unknown") {
		t.Fatalf("a lost answer: %q", msg)
	}
	// The daemon did open it.
	var made []apitype.BrowserSession
	testenv.Eventually(t, 30*time.Second, "the lost open's session", func() bool {
		made, _ = d.Client.BrowserSessions(ctx)
		return len(made) == 1
	})
	res := callTool(t, cs, "browser_open", nil)
	got := structured[struct {
		Session string `json:"session"`
	}](t, res)
	if got.Session != made[0].ID || !strings.Contains(resultText(res), "earlier browser_open") {
		t.Fatalf("the next open: %+v %q, want the lost open's %s", got, resultText(res), made[0].ID)
	}
	// Reconciled: the next open makes a new session (the positive control).
	next := structured[struct {
		Session string `json:"session"`
	}](t, callTool(t, cs, "browser_open", nil))
	if next.Session == "" || next.Session == got.Session {
		t.Fatalf("an open after reconciling: %+v", next)
	}
	if all, _ := d.Client.BrowserSessions(ctx); len(all) != 2 {
		t.Fatalf("%d sessions, want 2", len(all))
	}
	rep := ts.Close(ctx)
	if len(rep.BrowsersClosed) != 2 {
		t.Fatalf("close: %+v", rep)
	}
}
