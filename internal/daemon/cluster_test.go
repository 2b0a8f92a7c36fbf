package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// testCluster is testenv's cluster with what these tests ask of it.
type testCluster struct {
	*testenv.Cluster
	t *testing.T
}

// owner is the worker HQ recorded for sandbox id, read from the workers'
// own answers: a worker answers only for what it holds.
func (c *testCluster) owner(id string) string {
	c.t.Helper()
	for wid := range c.Workers {
		r := c.direct(wid, http.MethodGet, "/v1/sandboxes/"+id, cluster.Caller{Principal: auth.Principal{KeyID: "test", Scope: auth.ScopeAdmin}})
		if r.status == http.StatusOK {
			return wid
		}
	}
	c.t.Fatalf("no worker holds sandbox %s", id)
	return ""
}

// station posts a Station method call for the sandbox primitive to HQ as
// key, naming worker as the station; it returns the status and the body.
func (c *testCluster) station(key, worker, body string) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.HQ.URL+"/api/v1/stations/"+worker+"/execution/sandbox", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type directReply struct {
	status int
	body   string
}

// directAs sends a request straight to worker wid with an assertion made
// at at from credFor's credential (another worker's, to test refusals);
// header, when set, replaces the assertion ("-" sends none), and a header
// starting "Bearer " is sent as Authorization instead.
func (c *testCluster) directAs(wid, credFor, method, path string, as cluster.Caller, at time.Time, header string) directReply {
	c.t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", c.Ports[wid], path), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	switch {
	case header == "":
		req.Header.Set(cluster.AssertionHeader, cluster.Assert(c.Cred(credFor), credFor, as, method, req.URL.RequestURI(), at))
	case strings.HasPrefix(header, "Bearer "):
		req.Header.Set("Authorization", header)
	case header != "-":
		req.Header.Set(cluster.AssertionHeader, header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return directReply{resp.StatusCode, string(b)}
}

// direct sends a request straight to worker wid with HQ's assertion for it.
func (c *testCluster) direct(wid, method, path string, as cluster.Caller) directReply {
	return c.directAs(wid, wid, method, path, as, time.Now(), "")
}

// TestCluster runs HQ and three workers as separate processes over a real
// Postgres: placement, every kind of request routed through HQ, the
// service credential's refusals (each with its positive control), tenant
// dedication checked by HQ and by the worker, draining, and a worker killed
// with SIGKILL: owner_unavailable, then resource_lost, and back when it
// restarts.
func TestCluster(t *testing.T) {
	testenv.OnePass(t)
	testenv.NeedRoot(t)
	testenv.NeedRuntime(t, "container")
	ctx := context.Background()
	var acmeKey, betaKey string
	c := &testCluster{t: t, Cluster: testenv.StartCluster(t, testenv.ClusterSpec{
		Workers: map[string]string{"w1": "", "w2": "", "w3": "acme"}, LostAfter: 4 * time.Second,
		// acme's worker runs in tenant mode: isolated runtimes only.
		DedicatedArgs: []string{"--default-runtime", "container"},
		BeforeWorkers: func(c *testenv.Cluster) {
			// A dedicated worker's tenant must exist before the worker starts.
			for _, name := range []string{"acme", "beta"} {
				if _, err := c.HQ.Client.CreateTenant(ctx, apitype.CreateTenantRequest{Name: name}); err != nil {
					t.Fatal(err)
				}
				k, err := c.HQ.Client.CreateKey(ctx, apitype.CreateKeyRequest{Name: name, Tenant: name})
				if err != nil {
					t.Fatal(err)
				}
				if name == "acme" {
					acmeKey = k.Secret
				} else {
					betaKey = k.Secret
				}
			}
		}})}
	hq := c.HQ.Client
	acme, beta := client.New(c.HQ.URL, acmeKey), client.New(c.HQ.URL, betaKey)

	var ids []string
	t.Run("placement", func(t *testing.T) {
		on := map[string]int{}
		for range 4 {
			sb, err := hq.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, sb.ID)
			on[c.owner(sb.ID)]++
		}
		// The least loaded first: two each on w1 and w2, none on acme's w3.
		if on["w1"] != 2 || on["w2"] != 2 || on["w3"] != 0 {
			t.Errorf("admin sandboxes placed %v, want 2 on w1, 2 on w2, none on w3", on)
		}
		sb, err := acme.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if o := c.owner(sb.ID); o != "w3" {
			t.Errorf("acme's sandbox is on %s, want its dedicated w3", o)
		}
		bsb, err := beta.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if o := c.owner(bsb.ID); o == "w3" {
			t.Errorf("beta's sandbox is on acme's w3")
		}
		// Tenancy through HQ: beta never sees acme's, acme does.
		if _, err := beta.GetSandbox(ctx, sb.ID); errcode.ReasonOf(err) != "sandbox_not_found" {
			t.Errorf("beta GET acme's sandbox = %v, want sandbox_not_found", err)
		}
		if _, err := acme.GetSandbox(ctx, sb.ID); err != nil {
			t.Errorf("acme GET its sandbox: %v", err)
		}
		l, err := beta.ListSandboxes(ctx)
		if err != nil || len(l) != 1 || l[0].ID != bsb.ID {
			t.Errorf("beta's list = %v, %v; want only %s", l, err, bsb.ID)
		}
		ids = append(ids, sb.ID, bsb.ID)
		// A tenant's limit holds across workers: beta may hold one
		// sandbox, and a second is refused even on the worker where beta
		// has none (pinned there through the method API), which alone
		// would take it.
		one := 1
		if _, err := hq.SetTenant(ctx, "beta", apitype.SetTenantRequest{MaxSandboxes: &one}); err != nil {
			t.Fatal(err)
		}
		other := map[string]string{"w1": "w2", "w2": "w1"}[c.owner(bsb.ID)]
		if status, b := c.station(betaKey, other, `{"method":"create"}`); status != 429 || !strings.Contains(string(b), "quota_exceeded") {
			t.Errorf("beta's second sandbox, on %s = %d %s; want 429 quota_exceeded", other, status, b)
		}
		zero := 0
		if _, err := hq.SetTenant(ctx, "beta", apitype.SetTenantRequest{MaxSandboxes: &zero}); err != nil {
			t.Fatal(err)
		}
		l, err = hq.ListSandboxes(ctx)
		if err != nil || len(l) != len(ids) {
			t.Fatalf("admin's list through HQ = %d sandboxes, %v; want %d", len(l), err, len(ids))
		}
		// Pages across workers: 4 then 2, in creation order.
		p1, err := hq.ListSandboxesPage(ctx, 4, "")
		if err != nil || len(p1.Sandboxes) != 4 || p1.NextCursor == "" {
			t.Fatalf("page 1 = %d, cursor %q, %v", len(p1.Sandboxes), p1.NextCursor, err)
		}
		p2, err := hq.ListSandboxesPage(ctx, 4, p1.NextCursor)
		if err != nil || len(p2.Sandboxes) != 2 || p2.NextCursor != "" {
			t.Fatalf("page 2 = %d, cursor %q, %v", len(p2.Sandboxes), p2.NextCursor, err)
		}
		for i, sb := range append(p1.Sandboxes, p2.Sandboxes...) {
			if sb.ID != l[i].ID {
				t.Errorf("paged list[%d] = %s, want %s", i, sb.ID, l[i].ID)
			}
		}
	})

	sbID := ids[0]
	t.Run("routed", func(t *testing.T) {
		cmd, err := hq.Run(ctx, sbID, apitype.CreateCommandRequest{Command: "echo routed-$((6*7))"})
		if err != nil || strings.TrimSpace(cmd.Stdout) != "routed-42" {
			t.Fatalf("exec through HQ = %+v, %v", cmd, err)
		}
		// A stream (SSE) through HQ.
		cmd, err = hq.Exec(ctx, sbID, apitype.CreateCommandRequest{Command: "for i in 1 2 3; do echo line$i; sleep 0.2; done"})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if _, err := hq.Stream(ctx, sbID, cmd.ID, 0, 0, func(e client.Event) error {
			if e.Name == "stdout" {
				out.WriteString(e.Data)
			}
			return nil
		}); err != nil || out.String() != "line1\nline2\nline3\n" {
			t.Errorf("stream through HQ = %q, %v", out.String(), err)
		}
		// Files both ways.
		if _, err := hq.WriteFile(ctx, sbID, "notes/a.txt", strings.NewReader("through hq"), 0o644); err != nil {
			t.Fatal(err)
		}
		rc, err := hq.ReadFile(ctx, sbID, "notes/a.txt")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "through hq" {
			t.Errorf("file read through HQ = %q", b)
		}
		// A terminal's WebSocket through HQ.
		term := newTerminal(t, c.HQ, sbID, apitype.CreateTerminalRequest{})
		ws := attach(t, c.HQ, sbID, term.ID, 0)
		if err := hq.TerminalInput(ctx, sbID, term.ID, []byte("echo term-$((40+2))\n")); err != nil {
			t.Fatal(err)
		}
		ws.until(regexp.MustCompile(`term-42`))
		// A port through HQ.
		if _, err := hq.PutService(ctx, sbID, apitype.ServiceSpec{Name: "web", Command: "python3 -m http.server 8000", Port: 8000}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "the service answers through HQ", func() bool {
			resp, err := hqGet(c, "/v1/sandboxes/"+sbID+"/ports/8000/notes/a.txt")
			return err == nil && resp == "through hq"
		})
		// A preview host through HQ: HQ routes it by its Host to the owner,
		// which checks the preview token (its positive control first).
		pv, err := hq.Preview(ctx, sbID, 8000, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{pv.Token, "wrong"} {
			req, _ := http.NewRequest("GET", c.HQ.URL+"/notes/a.txt", nil)
			u, _ := url.Parse(pv.URL)
			req.Host = u.Host
			req.Header.Set("X-Berth-Preview-Token", tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ok := resp.StatusCode == 200 && string(b) == "through hq"; ok != (tok == pv.Token) {
				t.Errorf("preview host %s through HQ with token %q = %d %q", u.Host, tok, resp.StatusCode, b)
			}
		}
		if sb, err := hq.GetSandbox(ctx, sbID); err != nil || sb.State != "running" {
			t.Errorf("GET through HQ = %v, %v", sb.State, err)
		}
	})

	t.Run("browser", func(t *testing.T) {
		testenv.NeedChromium(t)
		sess, err := hq.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process"})
		if err != nil {
			t.Fatal(err)
		}
		page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "<title>through-hq</title><p>hi</p>")
		}))
		defer page.Close()
		var nav map[string]any
		if err := hq.BrowserAction(ctx, sess.ID, apitype.BrowserAction{Op: "navigate", URL: page.URL}, &nav); err != nil {
			t.Fatal(err)
		}
		if got, err := hq.BrowserSession(ctx, sess.ID); err != nil || !strings.Contains(fmt.Sprint(got), "through-hq") {
			t.Errorf("session through HQ = %+v, %v; want its title", got, err)
		}
		if png, err := hq.BrowserScreenshot(ctx, sess.ID, false); err != nil || len(png) < 100 {
			t.Errorf("screenshot through HQ: %d bytes, %v", len(png), err)
		}
		// The CDP WebSocket through HQ.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, resp, err := websocket.Dial(wctx, strings.Replace(c.HQ.URL, "http", "ws", 1)+"/v1/browser/sessions/"+sess.ID+"/cdp",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + c.HQ.Token}}})
		if err != nil {
			var body []byte
			if resp != nil {
				body, _ = io.ReadAll(resp.Body)
			}
			t.Fatalf("CDP through HQ: %v %s", err, body)
		}
		conn.SetReadLimit(1 << 20)
		if b, err := cdpVersion(wctx, conn); err != nil || !strings.Contains(string(b), "product") {
			t.Errorf("Browser.getVersion through HQ = %s, %v", b, err)
		}
		conn.Close(websocket.StatusNormalClosure, "")
		// A view link through HQ: its page answers on HQ's address.
		link, err := hq.BrowserLiveLink(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(link.URL, c.HQ.URL) {
			t.Errorf("view link %s is not on HQ's address %s", link.URL, c.HQ.URL)
		}
		resp, err = http.Get(link.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("view link through HQ = %d", resp.StatusCode)
		}
		// Positive control above; a forged token is refused.
		resp, err = http.Get(c.HQ.URL + "/live/" + sess.ID + ".9999999999.forged")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("a forged view link through HQ = %d, want 401", resp.StatusCode)
		}
		if l, err := hq.BrowserSessions(ctx); err != nil || len(l) != 1 {
			t.Errorf("sessions through HQ = %d, %v", len(l), err)
		}
		if err := hq.CloseBrowserSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := hq.BrowserSession(ctx, sess.ID); errcode.ReasonOf(err) != "session_not_found" {
			t.Errorf("a closed session through HQ = %v, want session_not_found", err)
		}
	})

	t.Run("station API", func(t *testing.T) {
		post := func(station, body string) (int, map[string]any) {
			status, b := c.station(c.HQ.Token, station, body)
			var out map[string]any
			_ = json.Unmarshal(b, &out)
			return status, out
		}
		body, err := hqGet(c, "/api/v1/execution")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"w1", "w2", "w3"} {
			if !strings.Contains(body, `"stationId":"`+w+`"`) {
				t.Errorf("GET /api/v1/execution does not list %s: %s", w, body)
			}
		}
		if !strings.Contains(body, `"status":"online"`) || !strings.Contains(body, `"sandbox":["`+testenv.Runtime()) {
			t.Errorf("GET /api/v1/execution = %s, want online stations with their runtimes", body)
		}
		// A create on station w2 lands on w2, and w2 is where its calls go.
		status, out := post("w2", `{"method":"create"}`)
		data, _ := out["data"].(map[string]any)
		id, _ := data["id"].(string)
		if status != 200 || id == "" {
			t.Fatalf("create on station w2 = %d %v", status, out)
		}
		ids = append(ids, id)
		if o := c.owner(id); o != "w2" {
			t.Errorf("the create on station w2 is on %s", o)
		}
		if status, out := post("w2", `{"method":"exec","id":"`+id+`","command":"echo on-w2"}`); status != 200 || !strings.Contains(fmt.Sprint(out), "on-w2") {
			t.Errorf("exec on station w2 = %d %v", status, out)
		}
		// Its ID on another station is not found there: no routing around
		// the owner the caller named.
		if status, out := post("w1", `{"method":"exec","id":"`+id+`","command":"true"}`); status != 404 {
			t.Errorf("exec of w2's sandbox on station w1 = %d %v, want 404", status, out)
		}
		if status, out := post("w9", `{"method":"create"}`); status != 404 || !strings.Contains(fmt.Sprint(out), "station_not_found") {
			t.Errorf("create on unknown station w9 = %d %v, want station_not_found", status, out)
		}
	})

	t.Run("mcp", func(t *testing.T) {
		// HQ's MCP endpoint: the tools' calls take HQ's routes, so a
		// sandbox an agent opens is placed on a worker and reached there.
		cs := mcpHTTP(t, c.HQ, c.HQ.Token, "agent")
		open := structured[struct {
			ID      string `json:"id"`
			Created bool   `json:"created"`
		}](t, callTool(t, cs, "sandbox_open", map[string]any{"name": "mcp-hq"}))
		if !open.Created || !strings.HasPrefix(open.ID, "sbx_") {
			t.Fatalf("sandbox_open through HQ = %+v", open)
		}
		if w := c.owner(open.ID); w == "w3" {
			t.Errorf("the admin's MCP sandbox is on acme's w3")
		}
		if text := resultText(callTool(t, cs, "sandbox_exec", map[string]any{"sandbox": open.ID, "command": "echo from the agent"})); !strings.Contains(text, "from the agent") {
			t.Errorf("sandbox_exec through HQ = %q", text)
		}
		again := structured[struct {
			ID string `json:"id"`
		}](t, callTool(t, cs, "sandbox_open", map[string]any{"name": "mcp-hq"}))
		if again.ID != open.ID {
			t.Errorf("sandbox_open again through HQ = %s, want %s (found by its label across the workers)", again.ID, open.ID)
		}
		if err := hq.DeleteSandbox(ctx, open.ID); err != nil {
			t.Errorf("delete the MCP sandbox: %v", err)
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		// HQ's dashboard calls HQ's routes, so its pages show what the
		// workers hold.
		cookie := func(resp *http.Response, name string) string {
			for _, ck := range resp.Cookies() {
				if strings.TrimPrefix(ck.Name, "__Host-") == name {
					return ck.Name + "=" + ck.Value
				}
			}
			t.Fatalf("no %s cookie in %v", name, resp.Header["Set-Cookie"])
			return ""
		}
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noRedirect.Get(c.HQ.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		login := cookie(resp, "berth_login")
		form := url.Values{"csrf": {strings.SplitN(login, "=", 2)[1]}, "key": {c.HQ.Token}}
		req, _ := http.NewRequest("POST", c.HQ.URL+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Cookie", login)
		resp, err = noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in on HQ = %d", resp.StatusCode)
		}
		session := cookie(resp, "berth_session")
		req, _ = http.NewRequest("GET", c.HQ.URL+"/ui/sandboxes", nil)
		req.Header.Set("Cookie", session)
		resp, err = noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), sbID) {
			t.Errorf("HQ's sandboxes page = %d, without %s", resp.StatusCode, sbID)
		}
	})

	t.Run("caps", func(t *testing.T) {
		// HQ bounds what it forwards as one daemon does: 128 KiB of JSON.
		big := `{"command":"true","env":{"X":"` + strings.Repeat("x", 200<<10) + `"}}`
		req, _ := http.NewRequest("POST", c.HQ.URL+"/v1/sandboxes/"+sbID+"/commands", strings.NewReader(big))
		req.Header.Set("Authorization", "Bearer "+c.HQ.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), "body_too_large") {
			t.Errorf("a 200 KiB exec body through HQ = %d %s, want 413 body_too_large", resp.StatusCode, b)
		}
		if _, err := hq.Run(ctx, sbID, apitype.CreateCommandRequest{Command: "true", Env: map[string]string{"X": "small"}}); err != nil {
			t.Errorf("a small exec body through HQ: %v", err)
		}
	})

	t.Run("credentials", func(t *testing.T) {
		admin := cluster.Caller{Principal: auth.Principal{KeyID: "k", Scope: auth.ScopeAdmin}}
		w := c.owner(sbID)
		other := "w1"
		if w == "w1" {
			other = "w2"
		}
		path := "/v1/sandboxes/" + sbID
		// Positive control: HQ's assertion for this worker opens it.
		if r := c.directAs(w, w, "GET", path, admin, time.Now(), ""); r.status != 200 {
			t.Fatalf("a good assertion = %d %s", r.status, r.body)
		}
		for name, r := range map[string]directReply{
			"no assertion":             c.directAs(w, w, "GET", path, admin, time.Now(), "-"),
			"another worker's":         c.directAs(w, other, "GET", path, admin, time.Now(), ""),
			"expired":                  c.directAs(w, w, "GET", path, admin, time.Now().Add(-time.Minute), ""),
			"made for another path":    c.directAs(w, w, "GET", path, admin, time.Now(), cluster.Assert(c.Cred(w), w, admin, "GET", "/v1/sandboxes", time.Now())),
			"the client's key instead": c.directAs(w, w, "GET", path, admin, time.Now(), "Bearer "+c.HQ.Token),
		} {
			if r.status != 401 || !strings.Contains(r.body, "service_credential_invalid") {
				t.Errorf("%s: %d %s, want 401 service_credential_invalid", name, r.status, r.body)
			}
		}
		// A replay: the same assertion twice; the first passes.
		a := cluster.Assert(c.Cred(w), w, admin, "GET", path, time.Now())
		if r := c.directAs(w, w, "GET", path, admin, time.Now(), a); r.status != 200 {
			t.Errorf("first use = %d %s", r.status, r.body)
		}
		if r := c.directAs(w, w, "GET", path, admin, time.Now(), a); r.status != 401 {
			t.Errorf("replay = %d %s, want 401", r.status, r.body)
		}
		// The dedicated worker checks the tenant itself too.
		acmeT, err := hq.GetTenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		betaT, err := hq.GetTenant(ctx, "beta")
		if err != nil {
			t.Fatal(err)
		}
		asAcme := cluster.Caller{Principal: auth.Principal{KeyID: "k", Scope: auth.ScopeExecution, Tenant: acmeT.ID}, TenantName: "acme"}
		asBeta := cluster.Caller{Principal: auth.Principal{KeyID: "k", Scope: auth.ScopeExecution, Tenant: betaT.ID}, TenantName: "beta"}
		if r := c.direct("w3", "GET", "/v1/sandboxes", asAcme); r.status != 200 {
			t.Errorf("w3 as acme = %d %s", r.status, r.body)
		}
		// acme's worker runs in tenant mode: HQ never asks it for the
		// process runtime, and it refuses one itself.
		if _, err := acme.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "process"}); errcode.ReasonOf(err) != "no_worker_available" {
			t.Errorf("acme's process sandbox through HQ = %v, want no_worker_available", err)
		}
		if _, err := c.WorkerClient("w3", asAcme).CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "process"}); errcode.ReasonOf(err) != "tenant_mode" {
			t.Errorf("acme's process sandbox straight to w3 = %v, want tenant_mode", err)
		}
		if r := c.direct("w3", "GET", "/v1/sandboxes", asBeta); !strings.Contains(r.body, `"tenant_bound"`) {
			t.Errorf("w3 as beta = %d %s, want tenant_bound", r.status, r.body)
		}
	})

	t.Run("templates", func(t *testing.T) {
		admin := cluster.Caller{Principal: auth.Principal{KeyID: "test", Scope: auth.ScopeAdmin}}
		steps := []apitype.TemplateStep{{Run: "echo seeded > seed.txt"}}
		tpl, err := hq.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "tools", Steps: steps})
		if err != nil || tpl.State != apitype.TemplateBuilding {
			t.Fatalf("BuildTemplate through HQ = %+v, %v", tpl, err)
		}
		if tpl = waitTemplate(t, hq, "tools"); tpl.State != apitype.TemplateReady || tpl.Reason != "" {
			log, _ := hq.TemplateLog(ctx, "tools")
			t.Fatalf("template through HQ = %+v\nlog:\n%s", tpl, log)
		}
		// Made on every worker, so a sandbox from it starts wherever it is placed.
		for wid := range c.Workers {
			if r := c.direct(wid, "GET", "/v1/templates/tools", admin); r.status != http.StatusOK || !strings.Contains(r.body, `"ready"`) {
				t.Errorf("template tools on %s = %d %s", wid, r.status, r.body)
			}
		}
		if log, err := hq.TemplateLog(ctx, "tools"); err != nil || !strings.Contains(log, "==> step 1") {
			t.Errorf("the build log through HQ = %q, %v", log, err)
		}
		list, err := hq.Templates(ctx)
		if err != nil || !slices.ContainsFunc(list, func(t apitype.Template) bool { return t.Name == "tools" && t.State == apitype.TemplateReady }) {
			t.Errorf("templates through HQ = %+v, %v; want tools, ready, once", list, err)
		}
		if n := len(slices.DeleteFunc(list, func(t apitype.Template) bool { return t.Name != "tools" })); n != 1 {
			t.Errorf("tools listed %d times through HQ, want once", n)
		}
		var made []string
		for range 2 {
			sb, err := hq.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "tools", Runtime: "container"})
			if err != nil {
				var e *errcode.Error
				errors.As(err, &e)
				t.Fatalf("CreateSandbox(template tools) through HQ: %v %v", err, e.Problems)
			}
			made = append(made, sb.ID)
			rec, err := hq.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "cat /template/seed.txt"})
			if err != nil || rec.Stdout != "seeded\n" {
				t.Errorf("in a sandbox of tools on %s: %+v, %v", c.owner(sb.ID), rec, err)
			}
		}
		// A name a worker has already is refused before any worker builds it.
		w2 := c.WorkerClient("w2", admin)
		if _, err := w2.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "taken", Steps: steps}); err != nil {
			t.Fatal(err)
		}
		waitTemplate(t, w2, "taken")
		if _, err := hq.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "taken", Steps: steps}); errcode.ReasonOf(err) != "template_exists" || !strings.Contains(err.Error(), "w2") {
			t.Errorf("BuildTemplate through HQ of a name w2 has = %v, want template_exists naming w2", err)
		}
		if r := c.direct("w1", "GET", "/v1/templates/taken", admin); r.status != http.StatusNotFound {
			t.Errorf("w1 has template taken after HQ refused it: %d %s", r.status, r.body)
		}
		// A build one worker refuses (its base is on w2 only) is undone
		// where it was taken, once that build ends.
		if _, err := hq.BuildTemplate(ctx, apitype.BuildTemplateRequest{Name: "child", From: "taken", Steps: steps}); errcode.ReasonOf(err) != "template_not_found" {
			t.Errorf("BuildTemplate through HQ from a base only w2 has = %v, want template_not_found", err)
		}
		testenv.Eventually(t, 2*time.Minute, "the refused build undone on w2", func() bool {
			return c.direct("w2", "GET", "/v1/templates/child", admin).status == http.StatusNotFound
		})
		// Through HQ it shows where it is missing.
		if got, err := hq.Template(ctx, "taken"); err != nil || !strings.Contains(got.Reason, "not on worker w1") {
			t.Errorf("template taken through HQ = %+v, %v; want it said missing on w1", got, err)
		}
		// An import is spooled on HQ once and sent to every worker; a
		// broken archive is refused and leaves nothing anywhere.
		archive := ociLayout(t, []map[string]string{{"etc/": "", "etc/motd": "from the image\n"}}, nil)
		if tpl, err := hq.ImportTemplate(ctx, "imported", "", bytes.NewReader(archive)); err != nil || tpl.State != apitype.TemplateReady {
			t.Errorf("ImportTemplate through HQ = %+v, %v", tpl, err)
		}
		if _, err := hq.ImportTemplate(ctx, "corrupt", "", bytes.NewReader(archive[:len(archive)/2])); err == nil {
			t.Error("importing a truncated archive through HQ succeeded")
		}
		for wid := range c.Workers {
			if r := c.direct(wid, "GET", "/v1/templates/imported", admin); r.status != http.StatusOK {
				t.Errorf("imported template on %s = %d %s", wid, r.status, r.body)
			}
			if r := c.direct(wid, "GET", "/v1/templates/corrupt", admin); r.status != http.StatusNotFound {
				t.Errorf("a refused import on %s = %d %s, want 404", wid, r.status, r.body)
			}
		}
		if spools, _ := filepath.Glob(filepath.Join(c.HQ.DataDir, "templates", "import-*")); len(spools) != 0 {
			t.Errorf("HQ kept its import spools: %v", spools)
		}
		// Deleted everywhere, once its sandboxes are gone.
		if err := hq.DeleteTemplate(ctx, "tools"); errcode.ReasonOf(err) != "template_in_use" {
			t.Errorf("DeleteTemplate in use through HQ = %v, want template_in_use", err)
		}
		for _, id := range made {
			if err := hq.DeleteSandbox(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"tools", "taken", "imported"} {
			if err := hq.DeleteTemplate(ctx, name); err != nil {
				t.Errorf("DeleteTemplate(%s) through HQ: %v", name, err)
			}
			if _, err := hq.Template(ctx, name); errcode.ReasonOf(err) != "template_not_found" {
				t.Errorf("template %s after its delete through HQ: %v", name, err)
			}
		}
	})

	t.Run("drain", func(t *testing.T) {
		w := c.owner(sbID)
		if _, err := hq.DrainWorker(ctx, w); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			sb, err := hq.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, sb.ID)
			if o := c.owner(sb.ID); o == w {
				t.Errorf("a create went to draining %s", w)
			}
		}
		if _, err := hq.Exec(ctx, sbID, apitype.CreateCommandRequest{Command: "true"}); errcode.ReasonOf(err) != "worker_draining" {
			t.Errorf("exec on a draining worker = %v, want worker_draining", err)
		}
		if _, err := hq.GetSandbox(ctx, sbID); err != nil {
			t.Errorf("GET on a draining worker: %v", err)
		}
		if _, err := hq.UndrainWorker(ctx, w); err != nil {
			t.Fatal(err)
		}
		if _, err := hq.Run(ctx, sbID, apitype.CreateCommandRequest{Command: "true"}); err != nil {
			t.Errorf("exec after undrain: %v", err)
		}
	})

	t.Run("owner killed", func(t *testing.T) {
		w := c.owner(sbID)
		admin := cluster.Caller{Principal: auth.Principal{KeyID: "test", Scope: auth.ScopeAdmin}}
		// A second sandbox there, to be deleted while its owner is lost.
		status, b := c.station(c.HQ.Token, w, `{"method":"create"}`)
		var created struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &created)
		lostID := created.Data.ID
		if lostID == "" {
			t.Fatalf("create on station %s = %d %s", w, status, b)
		}
		c.Workers[w].Kill9(t)
		c.WaitStatus(cluster.StatusOffline, w)
		_, err := hq.Run(ctx, sbID, apitype.CreateCommandRequest{Command: "true"})
		if errcode.ReasonOf(err) != "owner_unavailable" || !strings.Contains(err.Error(), w) {
			t.Errorf("exec on a dead owner = %v, want owner_unavailable naming %s", err, w)
		}
		c.WaitStatus(cluster.StatusLost, w)
		if _, err := hq.Run(ctx, sbID, apitype.CreateCommandRequest{Command: "true"}); errcode.ReasonOf(err) != "resource_lost" {
			t.Errorf("exec on a lost owner = %v, want resource_lost", err)
		}
		// Deleting a lost resource forgets it: its owner does not answer.
		if err := hq.DeleteSandbox(ctx, lostID); err != nil {
			t.Errorf("delete of a lost sandbox: %v", err)
		}
		// Nothing moved: the others still answer, and the owner re-adopts
		// its own when it comes back.
		c.StartWorker(w)
		c.WaitStatus(cluster.StatusLive, w)
		if _, err := hq.GetSandbox(ctx, lostID); errcode.ReasonOf(err) != "sandbox_not_found" {
			t.Errorf("a forgotten sandbox through HQ = %v, want sandbox_not_found", err)
		}
		// HQ deletes it on the worker once the worker answers again; the
		// sandbox it re-adopted stays (positive control).
		testenv.Eventually(t, 30*time.Second, "the sandbox deleted while "+w+" was lost gone from it", func() bool {
			_, err := c.WorkerClient(w, admin).GetSandbox(ctx, lostID)
			return errcode.ReasonOf(err) == "sandbox_not_found"
		})
		if _, err := c.WorkerClient(w, admin).GetSandbox(ctx, sbID); err != nil {
			t.Errorf("the sandbox %s re-adopted: %v", w, err)
		}
		cmd, err := hq.Run(ctx, sbID, apitype.CreateCommandRequest{Command: "cat notes/a.txt"})
		if err != nil || cmd.Stdout != "through hq" {
			t.Errorf("after the owner restarted = %q, %v", cmd.Stdout, err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		for _, id := range ids {
			if err := hq.DeleteSandbox(ctx, id); err != nil {
				t.Errorf("delete %s through HQ: %v", id, err)
			}
		}
		if l, err := hq.ListSandboxes(ctx); err != nil || len(l) != 0 {
			t.Errorf("after deleting all: %d left, %v", len(l), err)
		}
		ws, err := hq.ListWorkers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws.Workers {
			if w.Placed.Sandboxes != 0 {
				t.Errorf("worker %s still has %d placed", w.ID, w.Placed.Sandboxes)
			}
		}
	})
}

func hqGet(c *testCluster, path string) (string, error) {
	req, err := http.NewRequest("GET", c.HQ.URL+path, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.HQ.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	return string(b), err
}

// TestClusterPostgresOutage stops the cluster's Postgres for 10 s: every
// request answers within its deadline, with 503 once HQ needs the database
// (a forward may still pass on what HQ read just before), never a hang or a
// 500; when the database is back, everything works again without a restart.
func TestClusterPostgresOutage(t *testing.T) {
	testenv.OnePass(t)
	testenv.NeedRoot(t)
	srv := testenv.NewPostgresServer(t)
	c := testenv.StartCluster(t, testenv.ClusterSpec{Workers: map[string]string{"w1": ""}, DSN: srv.DSN()})
	hq := c.HQ.Client
	ctx := context.Background()
	sb, err := hq.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hq.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	unavailable := 0
	for time.Since(stopped) < 10*time.Second {
		for name, call := range map[string]func(context.Context) error{
			"exec": func(ctx context.Context) error {
				_, err := hq.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "true"})
				return err
			},
			"create": func(ctx context.Context) error {
				sb, err := hq.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
				if err == nil {
					t.Errorf("a create while the database is down was made: %s", sb.ID)
				}
				return err
			},
			"workers": func(ctx context.Context) error { _, err := hq.ListWorkers(ctx); return err },
		} {
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			start := time.Now()
			err := call(cctx)
			cancel()
			switch {
			case time.Since(start) > 10*time.Second:
				t.Errorf("%s took %v while the database was down", name, time.Since(start))
			case err == nil:
			case client.IsCode(err, errcode.Unavailable):
				unavailable++
			default:
				t.Errorf("%s while the database is down = %v, want a 503", name, err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if unavailable == 0 {
		t.Error("no request answered 503 while the database was down")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	c.WaitStatus(cluster.StatusLive, "w1")
	testenv.Eventually(t, 30*time.Second, "exec through HQ again", func() bool {
		_, err := hq.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "true"})
		return err == nil
	})
	sb2, err := hq.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatalf("a create after the database came back: %v", err)
	}
	for _, id := range []string{sb.ID, sb2.ID} {
		if err := hq.DeleteSandbox(ctx, id); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	}
}
