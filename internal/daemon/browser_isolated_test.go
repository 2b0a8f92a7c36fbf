package daemon_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/egress"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// Isolated browser sessions, end to end: the real daemon with a real
// Chromium in a real crun (or runsc) sandbox on the egress network, and
// the test internet of testenv.Internet as the web. make test runs these
// in its container and gvisor passes (BERTH_TEST_RUNTIME).

// needIsolatedBrowser skips (fails under CI) unless the suite runs on an
// isolated runtime with Chromium installed.
func needIsolatedBrowser(t *testing.T) {
	t.Helper()
	if testenv.Runtime() == "process" {
		t.Skip("isolated browser sessions need an isolated runtime; make test runs them on container and gvisor")
	}
	testenv.NeedChromium(t)
}

// isolatedDaemon starts a daemon on the test internet whose isolated
// browsers run on the suite's runtime, warm keeping that many started.
func isolatedDaemon(t *testing.T, in *testenv.Internet, warm int, tweak func(*daemon.Config)) *testenv.Daemon {
	t.Helper()
	return testenv.StartDaemon(t, func(cfg *daemon.Config) {
		in.Apply(cfg)
		cfg.BrowserIsolatedRuntime = testenv.Runtime()
		cfg.BrowserIsolatedWarm = warm
		if tweak != nil {
			tweak(cfg)
		}
	})
}

// openIsolated opens an isolated session through c.
func openIsolated(t *testing.T, c *client.Client, req apitype.CreateBrowserSessionRequest) apitype.BrowserSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req.Mode = apitype.BrowserModeIsolated
	s, err := c.OpenBrowserSession(ctx, req)
	if err != nil {
		t.Fatalf("opening an isolated session: %v", err)
	}
	if s.Mode != apitype.BrowserModeIsolated || s.SandboxID == "" {
		t.Fatalf("isolated session = %+v, want mode isolated and its sandbox", s)
	}
	return s
}

// sandboxGone checks that nothing of sandbox id is left: no process, no
// directory, no mount (its network namespace is pinned by one), no record.
func sandboxGone(t *testing.T, d *testenv.Daemon, id string) {
	t.Helper()
	// The record goes last, after the processes, mounts and files: all
	// four are waited for.
	testenv.Eventually(t, 60*time.Second, "sandbox "+id+" to be gone (processes, files, mounts, record)", func() bool {
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		_, err := os.Stat(filepath.Join(d.DataDir, "sandboxes", id))
		_, getErr := d.Client.GetSandbox(context.Background(), id)
		return len(d.SandboxProcesses(id)) == 0 && os.IsNotExist(err) && !bytes.Contains(mounts, []byte(id)) &&
			errcode.Is(getErr, errcode.NotFound)
	})
}

// sandboxSh runs a shell command in sandbox id (an admin may, in a
// browser's internal sandbox too) and returns its stdout.
func sandboxSh(t *testing.T, d *testenv.Daemon, id, cmd string) string {
	t.Helper()
	c := run(t, d, id, apitype.CreateCommandRequest{Command: cmd, TimeoutMS: 30000})
	if c.ExitCode == nil || *c.ExitCode != 0 {
		t.Fatalf("%s in %s: %+v", cmd, id, c)
	}
	return c.Stdout
}

// cdpConn is a raw CDP client on a WebSocket.
type cdpConn struct {
	t    *testing.T
	conn *websocket.Conn
	next int
}

// dialCDP connects to a session's CDP endpoint with key.
func dialCDP(t *testing.T, ctx context.Context, d *testenv.Daemon, id, key string) *cdpConn {
	t.Helper()
	endpoint := strings.Replace(d.URL, "http://", "ws://", 1) + "/v1/browser/sessions/" + id + "/cdp"
	conn, _, err := websocket.Dial(ctx, endpoint, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatalf("dialing the CDP endpoint: %v", err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	conn.SetReadLimit(64 << 20)
	return &cdpConn{t: t, conn: conn}
}

// call sends a CDP command and returns its answer (result or error).
func (c *cdpConn) call(ctx context.Context, method, session string, params any) map[string]any {
	c.t.Helper()
	c.next++
	id := c.next
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	for {
		_, b, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("%s: %v", method, err)
		}
		var r map[string]any
		_ = json.Unmarshal(b, &r)
		if r["id"] == float64(id) {
			return r
		}
	}
}

// page attaches to a new page target and returns its CDP session.
func (c *cdpConn) page(ctx context.Context) string {
	c.t.Helper()
	r := c.call(ctx, "Target.createTarget", "", map[string]any{"url": "about:blank"})
	target, _ := r["result"].(map[string]any)["targetId"].(string)
	r = c.call(ctx, "Target.attachToTarget", "", map[string]any{"targetId": target, "flatten": true})
	sid, _ := r["result"].(map[string]any)["sessionId"].(string)
	if sid == "" {
		c.t.Fatalf("attaching to a new page: %v", r)
	}
	return sid
}

// text navigates the page of CDP session sid to u and returns its body's
// text ("" when the navigation failed).
func (c *cdpConn) text(ctx context.Context, sid, u string) string {
	c.t.Helper()
	r := c.call(ctx, "Page.navigate", sid, map[string]any{"url": u})
	if res, _ := r["result"].(map[string]any); res == nil || res["errorText"] != nil {
		return ""
	}
	var out string
	for range 600 { // up to a minute: a page loads slowly on a loaded machine
		r = c.call(ctx, "Runtime.evaluate", sid, map[string]any{"expression": "document.readyState + '\\n' + (document.body ? document.body.innerText : '')", "returnByValue": true})
		v, _ := r["result"].(map[string]any)["result"].(map[string]any)["value"].(string)
		if state, body, _ := strings.Cut(v, "\n"); state == "complete" {
			return body
		} else {
			out = body
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out
}

// hostService is an HTTP server standing for a service of the host: every
// request it serves is counted, and it answers a secret.
type hostService struct {
	addr   string
	secret string
	hits   atomic.Int64
}

func newHostService(t *testing.T, ln net.Listener) *hostService {
	t.Helper()
	h := &hostService{addr: ln.Addr().String(), secret: "host-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		_, _ = io.WriteString(w, h.secret)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return h
}

// TestBrowserIsolated opens isolated sessions and drives them: a page of
// the test internet through Berth's egress, snapshot, click, screenshot;
// the CDP endpoint; Chromium as the sandbox's user; the sandbox gone,
// with everything in it, after close and after idle expiry.
func TestBrowserIsolated(t *testing.T) {
	needIsolatedBrowser(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	d := isolatedDaemon(t, in, 1, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := openIsolated(t, c, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 800, Height: 600}})

	t.Run("ops on a page of the internet", func(t *testing.T) {
		var nav struct {
			URL    string `json:"url"`
			Status int    `json:"status"`
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: "http://www.test.example/"}, &nav)
		if nav.Status != http.StatusOK {
			t.Fatalf("navigate = %+v, want 200", nav)
		}
		if got := evalString(t, c, s.ID, "document.body.innerText"); !strings.Contains(got, "hello from the test internet") {
			t.Fatalf("page text = %q", got)
		}
		logHas(t, d, s.SandboxID, func(e apitype.NetworkLogEntry) bool {
			return e.Decision == "allow" && e.Domain == "www.test.example" && e.IP == testenv.InternetHTTPIP
		})
		evalString(t, c, s.ID, `document.body.innerHTML = '<h1>Isolated</h1><button onclick="this.textContent = \'Clicked \' + (++window.n)">Go</button>'; window.n = 0; ""`)
		var snap struct {
			YAML string `json:"yaml"`
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "snapshot"}, &snap)
		if !strings.Contains(snap.YAML, `button "Go"`) || !strings.Contains(snap.YAML, "Isolated") {
			t.Fatalf("snapshot = %q, want the heading and the button", snap.YAML)
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "click", Target: &apitype.BrowserTarget{By: "role", Role: "button", Name: "Go"}}, nil)
		if got := evalString(t, c, s.ID, "document.querySelector('button').textContent"); got != "Clicked 1" {
			t.Errorf("button after a click = %q, want Clicked 1", got)
		}
		b, err := c.BrowserScreenshot(ctx, s.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("screenshot is no PNG: %v", err)
		}
		if w := img.Bounds().Dx(); w != 800 {
			t.Errorf("screenshot width = %d, want the viewport's 800", w)
		}
		var shot apitype.Image
		act(t, c, s.ID, apitype.BrowserAction{Op: "screenshot", Format: "jpeg"}, &shot)
		if raw, err := base64.StdEncoding.DecodeString(shot.Base64); err != nil || len(raw) < 100 || shot.MimeType != "image/jpeg" {
			t.Errorf("screenshot op = %s, %d bytes, %v", shot.MimeType, len(raw), err)
		}
	})

	t.Run("CDP endpoint", func(t *testing.T) {
		cdp := dialCDP(t, ctx, d, s.ID, d.Token)
		r := cdp.call(ctx, "Browser.getVersion", "", map[string]any{})
		product, _ := r["result"].(map[string]any)["product"].(string)
		if !strings.Contains(product, "Chrome") {
			t.Fatalf("Browser.getVersion = %v", r)
		}
		// The session's own page is among the browser's targets.
		r = cdp.call(ctx, "Target.getTargets", "", map[string]any{})
		found := false
		for _, ti := range r["result"].(map[string]any)["targetInfos"].([]any) {
			if m := ti.(map[string]any); m["type"] == "page" && strings.HasPrefix(m["url"].(string), "http://www.test.example/") {
				found = true
			}
		}
		if !found {
			t.Errorf("targets through CDP = %v, want the session's page", r)
		}
		// Negative, with the control above: no key is 401.
		resp, err := http.Get(d.URL + "/v1/browser/sessions/" + s.ID + "/cdp")
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("CDP endpoint without a key = %v, %v; want 401", resp, err)
		}
	})

	t.Run("live view, recording and trace", func(t *testing.T) {
		b, _, err := c.BrowserLiveFrame(ctx, s.ID)
		if err != nil {
			t.Fatalf("live frame: %v", err)
		}
		if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Errorf("live frame is no PNG: %v", err)
		}
		live, err := c.DialBrowserLive(ctx, s.ID)
		if err != nil {
			t.Fatalf("live view: %v", err)
		}
		lctx, lcancel := context.WithTimeout(ctx, 60*time.Second)
		for {
			m, err := live.Next(lctx)
			if err != nil {
				t.Fatalf("live view: no frame: %v", err)
			}
			if m.Type == apitype.LiveMsgFrame && m.Data != "" {
				break
			}
		}
		lcancel()
		live.Close()

		rec, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{IntervalMS: 100})
		if err != nil {
			t.Fatalf("start recording: %v", err)
		}
		testenv.Eventually(t, 60*time.Second, "two recorded frames", func() bool {
			r, err := c.Recording(ctx, rec.ID)
			return err == nil && len(r.Frames) >= 2
		})
		if _, err := c.StopRecording(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		frame, err := c.RecordingFrame(ctx, rec.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(frame)); err != nil {
			t.Errorf("recorded frame is no PNG: %v", err)
		}
		_ = c.DeleteRecording(ctx, rec.ID)

		act(t, c, s.ID, apitype.BrowserAction{Op: "traceStart"}, nil)
		act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
		var art struct {
			ID   string `json:"id"`
			Kind string `json:"kind"`
			Size int64  `json:"size"`
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "traceStop"}, &art)
		if art.Kind != "trace" || art.Size == 0 {
			t.Errorf("traceStop = %+v, want a trace artifact", art)
		}
	})

	t.Run("Chromium runs as the sandbox's user", func(t *testing.T) {
		// The uid of each Chromium process, as the sandbox sees it, and
		// the sandbox's own user.
		out := sandboxSh(t, d, s.SandboxID, `for p in /proc/[0-9]*; do
			if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q -- '--remote-debugging-port=9222'; then awk '/^Uid:/{print $2}' $p/status; fi
		done; echo user $(id -u)`)
		lines := strings.Fields(out)
		if len(lines) < 3 || lines[len(lines)-2] != "user" {
			t.Fatalf("Chromium's uids in the sandbox: %q", out)
		}
		user := lines[len(lines)-1]
		for _, uid := range lines[:len(lines)-2] {
			if uid != user {
				t.Errorf("a Chromium process runs as uid %s, not the sandbox's %s", uid, user)
			}
		}
		if user == "0" || user == strconv.Itoa(os.Getuid()) {
			t.Errorf("the sandbox's user is %s: the daemon's (%d) or root", user, os.Getuid())
		}
		if testenv.Runtime() == "container" {
			// On the host too: the container's processes are the host's.
			n := 0
			for _, pid := range testenv.ProcessesUnder("--remote-debugging-port=9222") {
				if cg, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup"); !bytes.Contains(cg, []byte(s.SandboxID)) {
					continue // another test's
				}
				n++
				status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
				for line := range strings.Lines(string(status)) {
					if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && (f[1] == "0" || f[1] == strconv.Itoa(os.Getuid())) {
						t.Errorf("Chromium process %d runs as host uid %s, the daemon's or root", pid, f[1])
					}
				}
			}
			if n == 0 {
				t.Error("no Chromium process in the sandbox's cgroup on the host")
			}
		}
		// The profile is in the sandbox's workspace, so its quota holds it.
		if _, err := os.Stat(filepath.Join(d.HostWorkspace(s.SandboxID), ".berth-browser", "Default")); err != nil {
			t.Errorf("the profile is not in the sandbox's workspace: %v", err)
		}
	})

	t.Run("close deletes the sandbox", func(t *testing.T) {
		if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		sandboxGone(t, d, s.SandboxID)
		if _, err := c.BrowserSession(ctx, s.ID); errcode.ReasonOf(err) != "session_not_found" {
			t.Errorf("the closed session: %v, want session_not_found", err)
		}
	})

	t.Run("idle expiry deletes the sandbox", func(t *testing.T) {
		s := openIsolated(t, c, apitype.CreateBrowserSessionRequest{IdleTimeoutMS: 1500})
		if s.SandboxID == "" {
			t.Fatal("no sandbox")
		}
		testenv.Eventually(t, 60*time.Second, "the idle session to expire", func() bool {
			_, err := c.BrowserSession(ctx, s.ID)
			return errcode.ReasonOf(err) == "session_not_found"
		})
		sandboxGone(t, d, s.SandboxID)
	})

	t.Run("profiles are refused", func(t *testing.T) {
		_, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeIsolated, Profile: "kept"})
		var ce *errcode.Error
		if !errors.As(err, &ce) || ce.Problems["profile"] == "" {
			t.Errorf("an isolated session with a profile: %v, want a problem with profile", err)
		}
	})
}

// TestBrowserIsolatedNetwork holds isolated sessions to the cases of
// SECURITY.md for a browser (NET-08, 09, 11, 12, 19): the browser reaches
// the public test internet through Berth's egress, and never a private,
// loopback or metadata address or a service of the host. Every refusal
// has its positive control: the same probe, to a public destination (or
// inside the sandbox), succeeding.
func TestBrowserIsolatedNetwork(t *testing.T) {
	needIsolatedBrowser(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	d := isolatedDaemon(t, in, 0, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Services of the host: one on its loopback, one on the address the
	// daemon's outbound connections leave from (the test internet's
	// gateway plays the host's address). The test reaches both itself.
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostLo := newHostService(t, lo)
	var gwLn net.Listener
	if err := egress.InNetNS(in.Out, func() (err error) {
		gwLn, err = net.Listen("tcp", testenv.InternetGateway+":80")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	hostGW := newHostService(t, gwLn)
	var gwBody []byte
	if err := egress.InNetNS(in.Out, func() error {
		// Dialed on this thread, which is in the namespace (an
		// http.Client would dial on another).
		conn, err := net.DialTimeout("tcp", testenv.InternetGateway+":80", 5*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: host\r\n\r\n"); err != nil {
			return err
		}
		gwBody, err = io.ReadAll(conn)
		return err
	}); err != nil || !strings.HasSuffix(string(gwBody), hostGW.secret) {
		t.Fatalf("control: the host's service on the gateway answers %q, %v", gwBody, err)
	}
	hostGW.hits.Store(0)
	_, loPort, _ := net.SplitHostPort(hostLo.addr)

	s := openIsolated(t, c, apitype.CreateBrowserSessionRequest{})
	navigate := func(u string) (int, error) {
		var nav struct {
			Status int `json:"status"`
		}
		err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: u}, &nav)
		return nav.Status, err
	}
	// refused says that the sandbox's log has a refusal of ip and no
	// connection to it allowed.
	neverAllowed := func(t *testing.T, ip string) {
		t.Helper()
		entries, err := c.NetworkLog(ctx, s.SandboxID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IP == ip && e.Decision == "allow" {
				t.Errorf("a connection to %s was allowed: %+v", ip, e)
			}
		}
	}
	refused := func(t *testing.T, ip string, since time.Time) {
		t.Helper()
		denied := false
		for start := time.Now(); !denied && time.Since(start) < 60*time.Second; time.Sleep(50 * time.Millisecond) {
			entries, err := c.NetworkLog(ctx, s.SandboxID, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.IP == ip && e.Decision == "allow" {
					t.Fatalf("a connection to %s was allowed: %+v", ip, e)
				}
				denied = denied || (e.IP == ip && e.Decision == "deny" && !e.Time.Before(since))
			}
		}
		if !denied {
			entries, _ := c.NetworkLog(ctx, s.SandboxID, 0)
			t.Errorf("no refusal of %s since %s in the sandbox's network log: %+v", ip, since, entries)
		}
	}
	noHostHits := func(t *testing.T) {
		t.Helper()
		if n := hostLo.hits.Load(); n != 0 {
			t.Errorf("the host's loopback service was reached %d times", n)
		}
		if n := hostGW.hits.Load(); n != 0 {
			t.Errorf("the host's service on its outbound address was reached %d times", n)
		}
	}

	t.Run("NET-08 subresources to private addresses", func(t *testing.T) {
		start := time.Now()
		if st, err := navigate("http://www.test.example/"); err != nil || st != http.StatusOK {
			t.Fatalf("navigate: %d, %v", st, err)
		}
		before := in.Requests()
		targets := []string{"169.254.169.254", "10.0.0.1", "192.168.1.1", testenv.InternetGateway, "127.0.0.1:" + loPort,
			"localhost:" + loPort, "meta.test.example", "host.test.example",
			"other.test.example"} // the control: public
		script := `(async () => {
			const targets = ` + mustJSON(targets) + `;
			const results = {};
			for (const h of targets) {
				const u = 'http://' + h;
				const img = new Image(); img.src = u + '/img.png'; document.body.appendChild(img);
				const f = document.createElement('iframe'); f.src = u + '/frame'; document.body.appendChild(f);
				for (const rel of ['prefetch', 'preconnect', 'stylesheet']) {
					const l = document.createElement('link'); l.rel = rel; l.href = u + '/' + rel; document.head.appendChild(l);
				}
				const st = document.createElement('style');
				st.textContent = '@import url(' + u + '/import.css); @font-face { font-family: f' + targets.indexOf(h) + '; src: url(' + u + '/font.woff); }';
				document.head.appendChild(st);
				try { new WebSocket('ws://' + h + '/ws'); } catch (e) {}
				try { new EventSource(u + '/events'); } catch (e) {}
				try { navigator.sendBeacon(u + '/beacon', 'x'); } catch (e) {}
				results[h] = await fetch(u + '/fetch', {mode: 'no-cors'}).then(() => 'answered', () => 'failed');
			}
			await new Promise(r => setTimeout(r, 3000));
			return JSON.stringify(results);
		})()`
		out := evalString(t, c, s.ID, script)
		var results map[string]string
		_ = json.Unmarshal([]byte(out), &results)
		if results["other.test.example"] != "answered" {
			t.Fatalf("control: a public destination from the page = %q (all: %s)", results["other.test.example"], out)
		}
		logHas(t, d, s.SandboxID, func(e apitype.NetworkLogEntry) bool {
			return e.IP == testenv.InternetOtherIP && e.Decision == "allow"
		})
		if in.Requests() <= before {
			t.Error("control: the test internet served nothing to the page")
		}
		// Two walls. Chromium's own (Local Network Access) refuses a public
		// page's requests to private and link-local addresses before any
		// connection; its refusals are in the session's diagnostics. An
		// address Chromium takes for public (the host's outbound one here)
		// meets Berth's egress, which refuses and logs it; NET-09 shows
		// Berth refusing the others too, where Chromium lets them through.
		refused(t, testenv.InternetGateway, start)
		for _, ip := range []string{"169.254.169.254", "10.0.0.1", "192.168.1.1"} {
			neverAllowed(t, ip)
		}
		var diag struct {
			Events []apitype.BrowserEvent `json:"events"`
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "diagnostics"}, &diag)
		if !strings.Contains(mustJSON(diag), "ERR_BLOCKED_BY_LOCAL_NETWORK_ACCESS_CHECKS") {
			t.Errorf("no request refused by Chromium's local network checks in the diagnostics: %s", mustJSON(diag))
		}
		noHostHits(t)
		var content struct {
			HTML string `json:"html"`
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "content"}, &content)
		if strings.Contains(content.HTML, hostLo.secret) || strings.Contains(content.HTML, hostGW.secret) {
			t.Error("the page holds a host service's answer")
		}
	})

	t.Run("NET-09 navigations to metadata and the host's loopback", func(t *testing.T) {
		start := time.Now()
		if st, err := navigate("http://www.test.example/"); err != nil || st != http.StatusOK { // control
			t.Fatalf("navigate to the internet: %d, %v", st, err)
		}
		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://192.168.1.1/", "http://localhost:" + loPort + "/",
			"http://127.0.0.1:" + loPort + "/", "http://host.test.example/", "http://www.test.example/redirect"} {
			st, err := navigate(u)
			if err == nil && st == http.StatusOK {
				t.Errorf("navigate %s = 200", u)
			}
			text := evalString(t, c, s.ID, "document.body ? document.body.innerText : ''")
			if strings.Contains(text, hostLo.secret) || strings.Contains(text, hostGW.secret) {
				t.Errorf("navigate %s showed a host service's answer", u)
			}
		}
		for _, ip := range []string{"169.254.169.254", "10.0.0.1", "192.168.1.1", testenv.InternetGateway} {
			refused(t, ip, start)
		}
		noHostHits(t)
	})

	t.Run("NET-11 other schemes", func(t *testing.T) {
		for _, u := range []string{"file:///etc/passwd", "file:///proc/self/environ", "view-source:file:///etc/passwd", "chrome://version",
			"devtools://devtools/bundled/inspector.html", "ftp://www.test.example/", "data:text/html,<script>location='file:///etc/passwd'</script>",
			"javascript:alert(1)", "blob:http://www.test.example/x"} {
			if _, err := navigate(u); errcode.ReasonOf(err) != "url_blocked" {
				t.Errorf("navigate %s: %v, want url_blocked", u, err)
			}
		}
		// Through CDP a client may open any URL: the sandbox has no host
		// files for a file: URL to show.
		marker := filepath.Join(d.DataDir, "host-only-file")
		secret := "host-file-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		if err := os.WriteFile(marker, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		cdp := dialCDP(t, ctx, d, s.ID, d.Token)
		sid := cdp.page(ctx)
		if got := cdp.text(ctx, sid, "file:///etc/os-release"); !strings.Contains(got, "NAME=") { // control: file: URLs work here
			t.Fatalf("control: file:///etc/os-release through CDP = %q", got)
		}
		if got := cdp.text(ctx, sid, "file://"+marker); strings.Contains(got, secret) {
			t.Errorf("a host file was read in the isolated browser: %q", got)
		}
		if os.Getenv("BERTH_TEST_RUNTIME") == "" {
			t.Fatal("control: the test's environment lacks BERTH_TEST_RUNTIME")
		}
		if got := cdp.text(ctx, sid, "file:///proc/self/environ"); strings.Contains(got, "BERTH_TEST_RUNTIME") {
			t.Errorf("the browser sees the daemon's environment: %q", got)
		}
	})

	t.Run("NET-12 injected HTML", func(t *testing.T) {
		start := time.Now()
		if st, err := navigate("http://www.test.example/"); err != nil || st != http.StatusOK {
			t.Fatalf("navigate: %d, %v", st, err)
		}
		evalString(t, c, s.ID, `document.open(); document.write(
			'<iframe src="http://169.254.169.254/latest/meta-data/iam/security-credentials/"></iframe>' +
			'<iframe src="http://host.test.example/"></iframe>' +
			'<link rel="stylesheet" href="file:///etc/passwd"><img src="http://10.0.0.1/x.png">' +
			'<iframe src="http://other.test.example/"></iframe>'); document.close(); ""`)
		var shot apitype.Image
		act(t, c, s.ID, apitype.BrowserAction{Op: "screenshot"}, &shot)
		if shot.Base64 == "" {
			t.Error("no screenshot of the injected page")
		}
		evalString(t, c, s.ID, `document.open(); document.write('<meta http-equiv="refresh" content="0;url=http://169.254.169.254/latest/meta-data/">'); document.close(); ""`)
		refused(t, "169.254.169.254", start) // the refresh, a navigation: waited for before the page moves on
		evalString(t, c, s.ID, `location = 'http://127.0.0.1:`+loPort+`/'; ""`)
		time.Sleep(time.Second)
		refused(t, testenv.InternetGateway, start)                       // host.test.example's address, left out of its DNS answer
		neverAllowed(t, "10.0.0.1")                                      // the image: Chromium's local network checks refuse it first
		logHas(t, d, s.SandboxID, func(e apitype.NetworkLogEntry) bool { // control: the public frame loaded
			return e.IP == testenv.InternetOtherIP && e.Decision == "allow"
		})
		noHostHits(t)
	})

	t.Run("NET-19 the DevTools port", func(t *testing.T) {
		// Control: Chromium listens on 9222 in its sandbox.
		version := sandboxSh(t, d, s.SandboxID, "curl -sS -m 5 http://127.0.0.1:9222/json/version")
		var v struct {
			WS string `json:"webSocketDebuggerUrl"`
		}
		if err := json.Unmarshal([]byte(version), &v); err != nil || !strings.Contains(v.WS, "/devtools/browser/") {
			t.Fatalf("control: /json/version in the sandbox = %q, %v", version, err)
		}
		guid := v.WS[strings.LastIndex(v.WS, "/")+1:]
		addr := strings.TrimSpace(sandboxSh(t, d, s.SandboxID,
			`python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("`+testenv.InternetHTTPIP+`", 80)); print(s.getsockname()[0])'`))

		// From the host's network: neither its loopback nor the sandbox's
		// address has it.
		hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil}}
		for _, u := range []string{"http://127.0.0.1:9222/json/version", "http://" + addr + ":9222/json/version"} {
			if resp, err := hc.Get(u); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if strings.Contains(string(b), guid) {
					t.Errorf("the isolated browser's DevTools answered the host at %s", u)
				}
			}
		}
		// The host's listeners on loopback (the daemon's, the session's CDP
		// bridge among them, which the endpoint below goes through) give
		// nothing of it without the bridge's secret path. The control: a
		// process session's browser, whose DevTools port is on loopback, is
		// found by the same probe.
		if found := devToolsOnLoopback(t, hc, guid); len(found) > 0 {
			t.Errorf("the isolated browser answered on the host's loopback: %v", found)
		}
		ps, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeProcess})
		if err != nil {
			t.Fatal(err)
		}
		if found := devToolsOnLoopback(t, hc, ""); len(found) == 0 {
			t.Error("control: the probe finds no DevTools port on loopback, not even a process session's")
		}
		_ = c.CloseBrowserSession(ctx, ps.ID)
		// From another sandbox: every sandbox's address is its own.
		other := egressSandbox(t, d, apitype.Network{})
		mustSh(t, d, other.ID, "curl -sS -m 10 http://www.test.example/", "hello from the test internet") // control
		for _, u := range []string{"http://" + addr + ":9222/json/version", "http://127.0.0.1:9222/json/version"} {
			if out, _ := sh(t, d, other.ID, "curl -sS -m 5 "+u); strings.Contains(out, guid) {
				t.Errorf("another sandbox reached the isolated browser's DevTools at %s: %q", u, out)
			}
		}
		// From a page: Chromium refuses a WebSocket that carries an Origin
		// (every page's does); the same URL without one, through Berth's
		// authenticated CDP endpoint, is the control.
		if st, err := navigate("http://www.test.example/"); err != nil || st != http.StatusOK {
			t.Fatalf("navigate: %d, %v", st, err)
		}
		got := evalString(t, c, s.ID, `new Promise(r => {
			const ws = new WebSocket('ws://127.0.0.1:9222/devtools/browser/`+guid+`');
			ws.onopen = () => r('open'); ws.onerror = () => r('error'); setTimeout(() => r('timeout'), 5000);
		})`)
		if got == "open" {
			t.Error("a page opened the browser's own DevTools WebSocket")
		}
		cdp := dialCDP(t, ctx, d, s.ID, d.Token)
		if r := cdp.call(ctx, "Browser.getVersion", "", map[string]any{}); r["result"] == nil {
			t.Errorf("control: CDP through the endpoint = %v", r)
		}

		// Through the API: the CDP endpoint needs the owner's key.
		_, acme := tenantKey(t, d, "acme", auth.ScopeExecution)
		_, globex := tenantKey(t, d, "globex", auth.ScopeExecution)
		mine := openIsolated(t, client.New(d.URL, acme.Secret), apitype.CreateBrowserSessionRequest{})
		for _, p := range []struct {
			key  string
			want int
		}{{"", http.StatusUnauthorized}, {"brk_not-a-key", http.StatusUnauthorized}, {globex.Secret, http.StatusNotFound}} {
			req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/browser/sessions/"+mine.ID+"/cdp", nil)
			if p.key != "" {
				req.Header.Set("Authorization", "Bearer "+p.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != p.want {
				t.Errorf("CDP endpoint of acme's session with key %.8q = %v, %v; want %d", p.key, resp, err, p.want)
			}
		}
		cdp = dialCDP(t, ctx, d, mine.ID, acme.Secret) // control: the owner's key
		if r := cdp.call(ctx, "Browser.getVersion", "", map[string]any{}); r["result"] == nil {
			t.Errorf("control: CDP with the owner's key = %v", r)
		}
	})
}

// TestBrowserIsolatedTenantMode: in tenant mode isolated sessions are the
// only ones a key may open; the others are refused with tenant_mode.
func TestBrowserIsolatedTenantMode(t *testing.T) {
	needIsolatedBrowser(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	d := isolatedDaemon(t, in, 0, func(cfg *daemon.Config) {
		cfg.TenantMode = true
		cfg.DefaultRuntime = testenv.Runtime()
	})
	_, k := tenantKey(t, d, "acme", auth.ScopeExecution)
	for _, who := range []struct{ name, secret string }{{"admin key", d.Token}, {"tenant key", k.Secret}} {
		for _, body := range []string{`{}`, `{"mode":"context"}`, `{"mode":"process"}`, `{"mode":"remote","cdp_url":"ws://127.0.0.1:9/devtools/browser/x"}`} {
			r := sendProbe(t, d, httpProbe{method: "POST", path: "/v1/browser/sessions", auth: bearerAuth(who.secret), body: body})
			r.wantError(t, body+" in tenant mode ("+who.name+")", http.StatusForbidden, errcode.PermissionDenied, "tenant_mode")
			if !strings.Contains(string(r.body), "isolated") {
				t.Errorf("%s refused without naming isolated mode: %s", body, r.body)
			}
		}
	}
	if list, err := d.Client.BrowserSessions(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("sessions after the refusals = %v, %v; want none", list, err)
	}
	// Control: an isolated session opens and browses.
	c := client.New(d.URL, k.Secret)
	s := openIsolated(t, c, apitype.CreateBrowserSessionRequest{})
	var nav struct {
		Status int `json:"status"`
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: "http://www.test.example/"}, &nav)
	if nav.Status != http.StatusOK {
		t.Errorf("navigate in tenant mode = %d", nav.Status)
	}
	if ids := sandboxIDs(t, c); len(ids) != 0 {
		t.Errorf("the tenant sees sandboxes %v: the browser's is internal", ids)
	}
}

// TestBrowserIsolatedWarmPool: sessions claim warm browsers, each its own,
// and the pool refills; a claimed browser is never another session's.
func TestBrowserIsolatedWarmPool(t *testing.T) {
	needIsolatedBrowser(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	d := isolatedDaemon(t, in, 1, nil)
	c := d.Client
	ctx := context.Background()
	sandboxDirs := func() int {
		entries, _ := os.ReadDir(filepath.Join(d.DataDir, "sandboxes"))
		return len(entries)
	}
	testenv.Eventually(t, 90*time.Second, "the pool to fill", func() bool { return sandboxDirs() == 1 })
	a := openIsolated(t, c, apitype.CreateBrowserSessionRequest{})
	testenv.Eventually(t, 90*time.Second, "the pool to refill", func() bool { return sandboxDirs() == 2 })
	act(t, c, a.ID, apitype.BrowserAction{Op: "navigate", URL: "http://www.test.example/"}, nil)
	evalString(t, c, a.ID, `document.cookie = "who=a; max-age=3600"; localStorage.setItem("who", "a"); document.cookie`)
	b := openIsolated(t, c, apitype.CreateBrowserSessionRequest{})
	if a.SandboxID == b.SandboxID {
		t.Fatalf("two sessions share sandbox %s", a.SandboxID)
	}
	act(t, c, b.ID, apitype.BrowserAction{Op: "navigate", URL: "http://www.test.example/"}, nil)
	if got := evalString(t, c, b.ID, `document.cookie + "|" + (localStorage.getItem("who") || "")`); got != "|" {
		t.Errorf("a fresh session sees %q of another's state", got)
	}
	if err := c.CloseBrowserSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	sandboxGone(t, d, a.SandboxID)
	c2 := openIsolated(t, c, apitype.CreateBrowserSessionRequest{})
	if c2.SandboxID == a.SandboxID || c2.SandboxID == b.SandboxID {
		t.Errorf("a new session got a used sandbox %s", c2.SandboxID)
	}
}

// devToolsOnLoopback asks every listener on the host's 127.0.0.1 for
// Chromium's /json/version and for the browser WebSocket of guid, and
// returns those that answer: a version document naming a browser
// WebSocket (guid's, or any with guid ""), or the WebSocket itself.
func devToolsOnLoopback(t *testing.T, hc *http.Client, guid string) []string {
	t.Helper()
	var found []string
	for _, port := range loopbackListeners(t) {
		base := "http://127.0.0.1:" + port
		if resp, err := hc.Get(base + "/json/version"); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "/devtools/browser/"+guid) {
				found = append(found, base+"/json/version")
			}
		}
		if guid == "" {
			continue
		}
		req, _ := http.NewRequest(http.MethodGet, base+"/devtools/browser/"+guid, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusSwitchingProtocols {
				found = append(found, base+"/devtools/browser/"+guid)
			}
		}
	}
	return found
}

// loopbackListeners returns the TCP ports listening on 127.0.0.1 in this
// network namespace. It reads its own thread's table: /proc/net is the
// main thread's, and the main thread may be in a sandbox's namespace for
// a moment (egress.InNetNS runs on whatever thread it is given, for a
// parallel test's sandbox).
func loopbackListeners(t *testing.T) []string {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile("/proc/thread-self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" || !strings.HasPrefix(f[1], "0100007F:") { // LISTEN on 127.0.0.1
			continue
		}
		p, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0100007F:"), 16, 16)
		if err == nil {
			ports = append(ports, strconv.FormatUint(p, 10))
		}
	}
	if len(ports) == 0 {
		t.Fatal("control: no listener on 127.0.0.1, not even the daemon's")
	}
	return ports
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestBrowserIsolatedDaemonKilled: a daemon killed with isolated browsers
// open (a session's and the pool's) leaves them running; the next daemon
// deletes them all at start, and opens new ones.
func TestBrowserIsolatedDaemonKilled(t *testing.T) {
	needIsolatedBrowser(t)
	t.Parallel()
	in := testenv.NewInternet(t)
	data := filepath.Join(testenv.ShortTempDir(t), "d")
	t.Cleanup(func() { testenv.CheckNoProcesses(t, data) })
	args := append(in.Args(), "--browser-isolated-runtime", testenv.Runtime(), "--browser-isolated-warm", "1")
	d := testenv.StartDaemonProcess(t, data, args...)
	s := openIsolated(t, d.Client, apitype.CreateBrowserSessionRequest{})
	var left []string
	testenv.Eventually(t, 90*time.Second, "the pool to refill", func() bool {
		entries, _ := os.ReadDir(filepath.Join(data, "sandboxes"))
		left = left[:0]
		for _, e := range entries {
			left = append(left, e.Name())
		}
		return len(left) == 2
	})
	d.Kill9(t)
	if len(d.SandboxProcesses(s.SandboxID)) == 0 {
		t.Fatal("control: the killed daemon's isolated browser is not running")
	}

	d = testenv.StartDaemonProcess(t, data, args...)
	for _, id := range left {
		sandboxGone(t, d, id)
	}
	if _, err := d.Client.BrowserSession(context.Background(), s.ID); errcode.ReasonOf(err) != "session_not_found" {
		t.Errorf("the killed daemon's session: %v, want session_not_found", err)
	}
	s2 := openIsolated(t, d.Client, apitype.CreateBrowserSessionRequest{})
	act(t, d.Client, s2.ID, apitype.BrowserAction{Op: "navigate", URL: "http://www.test.example/"}, nil)
	if err := d.Client.CloseBrowserSession(context.Background(), s2.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(t); err != nil {
		t.Errorf("daemon stop: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(data, "sandboxes"))
	if len(entries) != 0 {
		t.Errorf("sandboxes left after a graceful stop: %d", len(entries))
	}
}
