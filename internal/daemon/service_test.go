package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// waitService polls a service until cond holds, bounded.
func waitService(t *testing.T, c *client.Client, sbID, name, what string, cond func(apitype.Service) bool) apitype.Service {
	t.Helper()
	var last apitype.Service
	var lastErr error
	testenv.Eventually(t, 60*time.Second, what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		last, lastErr = c.Service(ctx, sbID, name)
		return lastErr == nil && cond(last)
	})
	return last
}

func serviceLogs(t *testing.T, c *client.Client, sbID, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.ServiceLogs(ctx, sbID, name, client.LogQuery{})
	if err != nil {
		t.Fatalf("ServiceLogs(%s): %v", name, err)
	}
	b, err := client.LogData(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// httpServer is a service running python3's HTTP server in the workspace.
func httpServer(port int) apitype.ServiceSpec {
	return apitype.ServiceSpec{
		Name: "web", Argv: []string{"python3", "-m", "http.server", fmt.Sprint(port), "--bind", "127.0.0.1"},
		Port: port, Ready: &apitype.Readiness{HTTPPath: "/"},
		Restart: apitype.RestartPolicy{Policy: apitype.RestartAlways, DelayMS: 100},
	}
}

func TestServiceLifecycle(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "python3")
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Env: map[string]string{"SANDBOX_VAR": "from-sandbox"}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the sandbox's env reaches services, and is not echoed", func(t *testing.T) {
		svc, err := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{Name: "env", Command: "echo $SANDBOX_VAR $OWN_VAR; sleep 600",
			Env: map[string]string{"OWN_VAR": "own"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, leaked := svc.Spec.Env["SANDBOX_VAR"]; leaked || svc.Spec.Env["OWN_VAR"] != "own" {
			t.Errorf("service spec env = %v, want the service's own only", svc.Spec.Env)
		}
		testenv.Eventually(t, 30*time.Second, "the service's output", func() bool {
			return strings.Contains(serviceLogs(t, d.Client, sb.ID, "env"), "from-sandbox own\n")
		})
		list, err := d.Client.Services(ctx, sb.ID)
		if err != nil || len(list) != 1 || list[0].Spec.Env["SANDBOX_VAR"] != "" {
			t.Errorf("Services = %+v, %v; want one, without the sandbox's env", list, err)
		}
		if err := d.Client.DeleteService(ctx, sb.ID, "env"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("crash loop gives up after max_restarts", func(t *testing.T) {
		svc, err := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{
			Name: "crash", Command: "echo boom; exit 3",
			Restart: apitype.RestartPolicy{Policy: apitype.RestartOnFailure, MaxRestarts: 2, DelayMS: 50},
		})
		if err != nil || svc.Name != "crash" || svc.SandboxID != sb.ID {
			t.Fatalf("PutService = %+v, %v", svc, err)
		}
		got := waitService(t, d.Client, sb.ID, "crash", "the crash loop to give up", func(s apitype.Service) bool {
			return s.Status == apitype.ServiceFailed
		})
		if got.Restarts != 2 || got.LastExit == nil || got.LastExit.ExitCode == nil || *got.LastExit.ExitCode != 3 || got.PID != 0 {
			t.Errorf("given-up service = %+v (last exit %+v), want 2 restarts, last exit code 3, no pid", got, got.LastExit)
		}
		if logs := serviceLogs(t, d.Client, sb.ID, "crash"); strings.Count(logs, "boom\n") != 3 {
			t.Errorf("logs = %q, want three runs' output", logs)
		}
	})

	t.Run("restart policies", func(t *testing.T) {
		for _, tc := range []struct {
			policy, command string
			want            string
		}{
			{apitype.RestartNever, "exit 1", apitype.ServiceExited},
			{apitype.RestartOnFailure, "exit 0", apitype.ServiceExited},
		} {
			name := strings.ReplaceAll(tc.policy, "-", "") + "-" + tc.command[len(tc.command)-1:]
			if _, err := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{Name: name, Command: tc.command,
				Restart: apitype.RestartPolicy{Policy: tc.policy, DelayMS: 50}}); err != nil {
				t.Fatal(err)
			}
			got := waitService(t, d.Client, sb.ID, name, name+" to end", func(s apitype.Service) bool { return s.Status == tc.want })
			if got.Restarts != 0 {
				t.Errorf("%s: restarts = %d, want 0", name, got.Restarts)
			}
		}
		// always restarts even a clean exit.
		if _, err := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{Name: "always", Command: "echo run; sleep 0.1",
			Restart: apitype.RestartPolicy{Policy: apitype.RestartAlways, DelayMS: 50}}); err != nil {
			t.Fatal(err)
		}
		waitService(t, d.Client, sb.ID, "always", "an always service to restart twice", func(s apitype.Service) bool { return s.Restarts >= 2 })
		if err := d.Client.DeleteService(ctx, sb.ID, "always"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Client.Service(ctx, sb.ID, "always"); !errcode.Is(err, errcode.NotFound) {
			t.Errorf("Service after delete: %v, want not_found", err)
		}
	})

	t.Run("readiness, idempotent put, stop and start", func(t *testing.T) {
		port := testenv.FreePort(t)
		spec := httpServer(port)
		if _, err := d.Client.PutService(ctx, sb.ID, spec); err != nil {
			t.Fatal(err)
		}
		ready := waitService(t, d.Client, sb.ID, "web", "the web service to be ready", func(s apitype.Service) bool {
			return s.Status == apitype.ServiceRunning && s.Ready
		})
		again, err := d.Client.PutService(ctx, sb.ID, spec)
		if err != nil || again.PID != ready.PID {
			t.Errorf("identical PutService = pid %d, %v; want the same process %d", again.PID, err, ready.PID)
		}
		stopped, err := d.Client.StopService(ctx, sb.ID, "web")
		if err != nil || stopped.Status != apitype.ServiceStopped || stopped.PID != 0 {
			t.Fatalf("StopService = %+v, %v", stopped, err)
		}
		started, err := d.Client.StartService(ctx, sb.ID, "web")
		if err != nil {
			t.Fatal(err)
		}
		if started.PID == ready.PID {
			t.Errorf("started service kept pid %d, want a new process", started.PID)
		}
		waitService(t, d.Client, sb.ID, "web", "the web service to be ready again", func(s apitype.Service) bool { return s.Ready })
	})

	t.Run("at most 32 services", func(t *testing.T) {
		sb2, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range apitype.MaxServices {
			if _, err := d.Client.PutService(ctx, sb2.ID, apitype.ServiceSpec{Name: fmt.Sprintf("s%d", i), Command: "true",
				Restart: apitype.RestartPolicy{Policy: apitype.RestartNever}}); err != nil {
				t.Fatalf("service %d: %v", i, err)
			}
		}
		if _, err := d.Client.PutService(ctx, sb2.ID, apitype.ServiceSpec{Name: "one-more", Command: "true"}); errcode.ReasonOf(err) != "too_many_services" {
			t.Errorf("service %d: %v, want too_many_services", apitype.MaxServices+1, err)
		}
		// Replacing one that exists is not one more.
		if _, err := d.Client.PutService(ctx, sb2.ID, apitype.ServiceSpec{Name: "s0", Command: "exit 0",
			Restart: apitype.RestartPolicy{Policy: apitype.RestartNever}}); err != nil {
			t.Errorf("replacing a service at the limit: %v", err)
		}
	})

	t.Run("bad specs", func(t *testing.T) {
		for _, spec := range []apitype.ServiceSpec{
			{Name: "Bad Name", Command: "true"},
			{Name: "x"},
			{Name: "x", Command: "true", Restart: apitype.RestartPolicy{Policy: "sometimes"}},
			{Name: "x", Command: "true", Ready: &apitype.Readiness{TCP: true}},
			{Name: "x", Command: "true", Port: 70000},
		} {
			if _, err := d.Client.PutService(ctx, sb.ID, spec); !errcode.Is(err, errcode.Invalid) {
				t.Errorf("PutService(%+v) = %v, want invalid", spec, err)
			}
		}
		list, err := d.Client.Services(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.Name == "x" {
				t.Errorf("an invalid spec left service %+v", s)
			}
		}
	})
}

// TestServicesComeBackAfterWake hibernates a sandbox with a running
// service and a stopped one: the first runs again after the wake, the
// stopped one stays stopped.
func TestServicesComeBackAfterWake(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "python3")
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	if _, err := d.Client.PutService(ctx, sb.ID, httpServer(port)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{Name: "idle", Command: "sleep 600"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.StopService(ctx, sb.ID, "idle"); err != nil {
		t.Fatal(err)
	}
	before := waitService(t, d.Client, sb.ID, "web", "web to be ready", func(s apitype.Service) bool { return s.Ready })
	if _, err := d.Client.HibernateSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// Any call wakes it; the service comes back by itself.
	after := waitService(t, d.Client, sb.ID, "web", "web to be ready after the wake", func(s apitype.Service) bool { return s.Ready })
	if after.PID == 0 || after.Restarts != 0 {
		t.Errorf("web after wake = %+v, want a fresh ready run", after)
	}
	_ = before
	idle, err := d.Client.Service(ctx, sb.ID, "idle")
	if err != nil || idle.Status != apitype.ServiceStopped {
		t.Errorf("stopped service after wake = %+v, %v; want stopped", idle, err)
	}
	body := getPort(t, d, sb.ID, port, "/")
	if !strings.Contains(body, "Directory listing") {
		t.Errorf("GET through the port after wake = %q, want python's listing", body)
	}
}

// TestServicesSurviveDaemonKill9 kills the daemon with services running:
// they keep running under the agent, the next daemon shows them, and
// nothing starts twice.
func TestServicesSurviveDaemonKill9(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{Name: "ticker",
		Command: "while :; do echo tick; sleep 0.2; done"}); err != nil {
		t.Fatal(err)
	}
	before := waitService(t, d.Client, sb.ID, "ticker", "ticker to run", func(s apitype.Service) bool {
		return s.Status == apitype.ServiceRunning && s.PID > 0
	})
	d.Kill9(t)
	d2 := testenv.StartDaemonProcess(t, dataDir)
	t.Cleanup(func() { d2.DeleteAll(t) })
	after, err := d2.Client.Service(ctx, sb.ID, "ticker")
	if err != nil || after.PID != before.PID || after.Restarts != 0 || after.Status != apitype.ServiceRunning {
		t.Fatalf("ticker after the daemon's kill -9 = %+v, %v; want the same process %d still running", after, err, before.PID)
	}
	l1, err := d2.Client.ServiceLogs(ctx, sb.ID, "ticker", client.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := d2.Client.ServiceLogs(ctx, sb.ID, "ticker", client.LogQuery{Offset: l1.NextOffset, WaitMS: 5000})
	if err != nil || !strings.Contains(l2.Data, "tick") {
		t.Errorf("logs after restart from %d = %+v, %v; want new ticks", l1.NextOffset, l2, err)
	}
}

// getPort GETs path of port in sandbox sbID through the API's port proxy.
func getPort(t *testing.T, d *testenv.Daemon, sbID string, port int, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d%s", d.URL, sbID, port, path), nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", req.URL, resp.StatusCode, b)
	}
	return string(b)
}

// TestPortsAndPreviews serves a real HTTP server inside the sandbox and
// reaches it through the API route (API key) and the host-based preview
// (preview token, signed link and cookie), with WebSocket passing through;
// Berth's credentials never reach the app.
func TestPortsAndPreviews(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "python3")
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.PreviewDomain = "preview.test" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	// An app that echoes what it was sent, and speaks WebSocket echo on
	// /ws (python3's standard library only).
	if _, err := d.Client.WriteFile(ctx, sb.ID, "app.py", strings.NewReader(echoApp), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{Name: "app", Argv: []string{"python3", "app.py", fmt.Sprint(port)},
		Port: port, Ready: &apitype.Readiness{TCP: true}}); err != nil {
		t.Fatal(err)
	}
	waitService(t, d.Client, sb.ID, "app", "the app to be ready", func(s apitype.Service) bool { return s.Ready })

	// The API route: the key is stripped, the path and query kept.
	body := getPort(t, d, sb.ID, port, "/some/path?x=1")
	if !strings.Contains(body, "path=/some/path?x=1") {
		t.Errorf("app saw %q, want path=/some/path?x=1", body)
	}
	if strings.Contains(body, d.Token) || strings.Contains(strings.ToLower(body), "authorization") {
		t.Errorf("app saw Berth's credentials: %q", body)
	}

	// Nothing listening: a specific error.
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d/", d.URL, sb.ID, testenv.FreePort(t)), nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET of a port nothing listens on = %v, %v; want 503 port_unreachable", resp, err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "port_unreachable") {
			t.Errorf("GET of a closed port = %s, want reason port_unreachable", b)
		}
	}

	// Host-based preview.
	info, err := d.Client.Preview(ctx, sb.ID, port, 0)
	if err != nil || info.Token == "" || info.AuthURL == "" || !strings.Contains(info.URL, fmt.Sprintf("%d-sbx-", port)) {
		t.Fatalf("Preview = %+v, %v", info, err)
	}
	addr := strings.TrimPrefix(d.URL, "http://")
	// Every preview host resolves to the daemon.
	dialer := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, addr)
	}}
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(c *http.Client, u string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Negative: no token, a wrong token, the API key, another sandbox's host.
	for _, hdr := range []map[string]string{nil, {"X-Berth-Preview-Token": "bpv_wrong"}, {"Authorization": "Bearer " + d.Token}} {
		if code, b := get(hc, info.URL, hdr); code != http.StatusUnauthorized || !strings.Contains(b, "preview_token_required") {
			t.Errorf("preview with %v = %d %s, want 401 preview_token_required", hdr, code, b)
		}
	}
	other, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	otherURL := strings.Replace(info.URL, strings.Replace(sb.ID, "_", "-", 1), strings.Replace(other.ID, "_", "-", 1), 1)
	if code, _ := get(hc, otherURL, map[string]string{"X-Berth-Preview-Token": info.Token}); code != http.StatusUnauthorized {
		t.Errorf("sandbox A's token on sandbox B's preview = %d, want 401", code)
	}
	// Positive: the header; the app keeps its own Authorization.
	code, b := get(hc, info.URL+"hello", map[string]string{"X-Berth-Preview-Token": info.Token, "Authorization": "Basic YXBwOnB3"})
	if code != http.StatusOK || !strings.Contains(b, "path=/hello") || !strings.Contains(b, "auth=Basic YXBwOnB3") || strings.Contains(b, info.Token) {
		t.Errorf("preview with the token = %d %q, want the app's answer with its own Authorization and no token", code, b)
	}
	// Positive: the signed link sets a cookie the browser then sends.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Transport: tr, Jar: jar}
	code, b = get(browser, info.AuthURL, nil)
	if code != http.StatusOK || !strings.Contains(b, "path=/") || strings.Contains(b, "berth_preview") {
		t.Errorf("following the signed link = %d %q, want the app's root without Berth's cookie", code, b)
	}
	if code, b := get(browser, info.URL+"again", nil); code != http.StatusOK || !strings.Contains(b, "path=/again") {
		t.Errorf("preview with the cookie = %d %q", code, b)
	}
	// The host with the sandbox ID as printed (sbx_) is the same sandbox.
	underscored := strings.Replace(info.URL, strings.Replace(sb.ID, "_", "-", 1), sb.ID, 1)
	if code, b := get(hc, underscored+"u", map[string]string{"X-Berth-Preview-Token": info.Token}); code != http.StatusOK || !strings.Contains(b, "path=/u") {
		t.Errorf("preview at %s = %d %q, want the app's answer", underscored, code, b)
	}
	// A tampered link does nothing.
	if code, _ := get(hc, strings.Replace(info.AuthURL, "sig=", "sig=x", 1), nil); code != http.StatusUnauthorized {
		t.Errorf("tampered signed link = %d, want 401", code)
	}

	// WebSocket through the preview host.
	wsURL := strings.Replace(info.URL, "http://", "ws://", 1) + "ws"
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr},
		HTTPHeader: http.Header{"X-Berth-Preview-Token": {info.Token}}})
	if err != nil {
		t.Fatalf("WebSocket through the preview: %v", err)
	}
	if err := conn.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := conn.Read(ctx); err != nil || string(msg) != "echo:ping" {
		t.Errorf("WebSocket echo = %q, %v", msg, err)
	}
	conn.Close(websocket.StatusNormalClosure, "")

	// A preview request to a hibernated sandbox wakes it.
	if _, err := d.Client.HibernateSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the preview to wake the sandbox and reach the app", func() bool {
		code, b := get(hc, info.URL+"woken", map[string]string{"X-Berth-Preview-Token": info.Token})
		return code == http.StatusOK && strings.Contains(b, "path=/woken")
	})
}

// echoApp answers GETs with what it saw and echoes WebSocket text frames
// on /ws, with nothing but python3's standard library.
const echoApp = `import base64, hashlib, http.server, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/ws":
            key = self.headers["Sec-WebSocket-Key"]
            acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", acc)
            self.end_headers()
            self.wfile.flush()
            hdr = self.rfile.read(2)
            n = hdr[1] & 0x7f
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            out = b"echo:" + data
            self.wfile.write(bytes([0x81, len(out)]) + out)
            self.wfile.flush()
            self.rfile.read(2)
            return
        body = ("path=%s\nauth=%s\ncookie=%s\nhost=%s\n" % (self.path, self.headers.get("Authorization", ""),
            self.headers.get("Cookie", ""), self.headers.get("Host", ""))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// TestPreviewWaitsForWake: the first request to a hibernated sandbox's
// port, through the API route or a preview host, wakes it and gets the
// app's answer, not a 503 while its service starts again. A browser that
// asks a port nothing listens on gets a page that retries, not JSON; an
// API client still gets port_unreachable (the control that the agent does
// answer so, which the wait hides).
func TestPreviewWaitsForWake(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "python3")
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.PreviewDomain = "localhost" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	if _, err := d.Client.PutService(ctx, sb.ID, httpServer(port)); err != nil {
		t.Fatal(err)
	}
	waitService(t, d.Client, sb.ID, "web", "web to be ready", func(s apitype.Service) bool { return s.Ready })

	// The API route: the first request after hibernating is answered.
	if _, err := d.Client.HibernateSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if body := getPort(t, d, sb.ID, port, "/"); !strings.Contains(body, "Directory listing") {
		t.Errorf("first GET through the port after hibernating = %q, want python's listing", body)
	}

	// A preview host, as a browser asks.
	info, err := d.Client.Preview(ctx, sb.ID, port, 0)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(d.URL, "http://")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	browse := func(u, accept string) (int, string, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header.Set("X-Berth-Preview-Token", info.Token)
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	const html = "text/html,application/xhtml+xml,*/*;q=0.8"
	if _, err := d.Client.HibernateSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if code, _, b := browse(info.URL, html); code != http.StatusOK || !strings.Contains(b, "Directory listing") {
		t.Errorf("first preview after hibernating = %d %q, want the app's page", code, b)
	}

	// Nothing listens: a browser gets a page that retries, a client JSON.
	closed := testenv.FreePort(t)
	otherURL := strings.Replace(info.URL, fmt.Sprintf("%d-", port), fmt.Sprintf("%d-", closed), 1)
	if code, ct, b := browse(otherURL, html); code != http.StatusServiceUnavailable || !strings.HasPrefix(ct, "text/html") ||
		!strings.Contains(b, `http-equiv="refresh"`) {
		t.Errorf("browser preview of a closed port = %d %s %q, want 503 with a page that retries", code, ct, b)
	}
	if code, _, b := browse(otherURL, "application/json"); code != http.StatusServiceUnavailable || !strings.Contains(b, "port_unreachable") {
		t.Errorf("client preview of a closed port = %d %q, want 503 port_unreachable", code, b)
	}
}
