package daemon_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// needChromium skips (fails under CI) without Debian's Chromium.
func needChromium(t *testing.T) {
	t.Helper()
	if testenv.Runtime() != "process" {
		// Browser sessions do not use sandboxes: once is enough.
		t.Skip("browser tests run in the process-runtime pass of make test")
	}
	testenv.NeedChromium(t)
}

// pages serves testdata/browser on a loopback httptest server.
func pages(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir("testdata/browser")))
	t.Cleanup(srv.Close)
	return srv.URL
}

// act runs one browser action and decodes its result.
func act(t *testing.T, c *client.Client, id string, a apitype.BrowserAction, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.BrowserAction(ctx, id, a, out); err != nil {
		t.Fatalf("%s %+v: %v", a.Op, a, err)
	}
}

func evalString(t *testing.T, c *client.Client, id, expr string) string {
	t.Helper()
	var s string
	act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: expr}, &s)
	return s
}

// chromiumProcesses lists the Chromium processes whose profile is under
// the daemon's data directory.
func chromiumProcesses(d *testenv.Daemon) []int {
	return testenv.ProcessesUnder("--user-data-dir=" + d.DataDir + "/browser/")
}

// TestBrowserSessionOps drives a real page through the API: snapshot,
// fill by label, check by role, select, click by ref, evaluate, keys,
// screenshot, pages, dialogs, waits, and the errors of bad input.
func TestBrowserSessionOps(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	base := pages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := d.Client

	if sys, err := c.System(ctx); err != nil || !sys.Browser.Available || sys.Browser.Chromium == "" || sys.Browser.MaxSessions == 0 {
		t.Errorf("system browser = %+v, %v", sys.Browser, err)
	}
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 1024, Height: 700}})
	if err != nil || !regexp.MustCompile(`^brs_[a-z2-7]{26}$`).MatchString(s.ID) || s.State != apitype.BrowserOpen || s.Mode != "context" {
		t.Fatalf("OpenBrowserSession = %+v, %v", s, err)
	}
	var nav map[string]any
	act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/form.html"}, &nav)
	if nav["status"] != float64(200) {
		t.Errorf("navigate = %v, want status 200", nav)
	}

	var snap apitype.BrowserSnapshot
	act(t, c, s.ID, apitype.BrowserAction{Op: "snapshot"}, &snap)
	for _, want := range []string{`textbox "Name"`, `button "Submit" [ref=`, `checkbox "Subscribe"`, `heading "Sign up"`, `link "Docs"`} {
		if !strings.Contains(snap.YAML, want) {
			t.Errorf("snapshot lacks %q:\n%s", want, snap.YAML)
		}
	}
	if strings.Contains(snap.YAML, "Hidden") || snap.Title != "Sign up" {
		t.Errorf("snapshot shows a hidden button, or title %q:\n%s", snap.Title, snap.YAML)
	}
	ref := regexp.MustCompile(`button "Submit" \[ref=(e\d+)\]`).FindStringSubmatch(snap.YAML)
	if ref == nil {
		t.Fatalf("no ref for Submit in\n%s", snap.YAML)
	}

	act(t, c, s.ID, apitype.BrowserAction{Op: "fill", Target: &apitype.BrowserTarget{By: "label", Value: "Name"}, Value: "Ada"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "type", Selector: "#email", Value: "ada@example.com"}, nil)
	var checked map[string]bool
	act(t, c, s.ID, apitype.BrowserAction{Op: "check", Target: &apitype.BrowserTarget{By: "role", Role: "checkbox", Name: "Subscribe"}}, &checked)
	if !checked["checked"] {
		t.Errorf("check = %v", checked)
	}
	var sel map[string][]string
	act(t, c, s.ID, apitype.BrowserAction{Op: "select", Selector: "#plan", Value: "Pro"}, &sel)
	if got := evalString(t, c, s.ID, `document.getElementById('plan').value`); got != "pro" || len(sel["selected"]) != 1 {
		t.Errorf("after select: value %q, result %v", got, sel)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "click", Target: &apitype.BrowserTarget{By: "ref", Value: ref[1]}}, nil)
	if got := evalString(t, c, s.ID, `document.getElementById('out').textContent`); got != "Ada|ada@example.com|true|pro" {
		t.Errorf("after the form: %q", got)
	}
	// Fill replaces; press submits from the focused field.
	act(t, c, s.ID, apitype.BrowserAction{Op: "fill", Selector: "#name", Value: "Grace"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "press", Selector: "#name", Value: "Enter"}, nil)
	if got := evalString(t, c, s.ID, `document.getElementById('out').textContent`); !strings.HasPrefix(got, "Grace|") {
		t.Errorf("after fill and Enter: %q", got)
	}
	var n float64
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: `Promise.resolve(6 * 7)`}, &n)
	if n != 42 {
		t.Errorf("evaluate of a promise = %v, want 42", n)
	}

	// Errors: each specific, and the session keeps working.
	for _, tc := range []struct {
		a      apitype.BrowserAction
		reason string
	}{
		{apitype.BrowserAction{Op: "click", Selector: "button"}, "target_ambiguous"},
		{apitype.BrowserAction{Op: "click", Selector: "#nope", TimeoutMS: 300}, "target_not_found"},
		{apitype.BrowserAction{Op: "fly"}, "op_unknown"},
		{apitype.BrowserAction{Op: "evaluate", Expression: "throw new Error('boom')"}, "script_error"},
		{apitype.BrowserAction{Op: "press", Value: "Hyper+Q"}, ""},
		{apitype.BrowserAction{Op: "navigate", URL: "file:///etc/passwd"}, "url_blocked"},
		{apitype.BrowserAction{Op: "navigate", URL: "javascript:alert(1)"}, "url_blocked"},
		{apitype.BrowserAction{Op: "navigate", URL: "chrome://version"}, "url_blocked"},
		{apitype.BrowserAction{Op: "navigate", URL: "http://user:pw@127.0.0.1/"}, "url_blocked"},
		{apitype.BrowserAction{Op: "waitFor", Selector: "#never", TimeoutMS: 300}, "wait_timeout"},
	} {
		err := c.BrowserAction(ctx, s.ID, tc.a, nil)
		if err == nil || (tc.reason != "" && errcode.ReasonOf(err) != tc.reason) {
			t.Errorf("%s %+v: %v, want reason %q", tc.a.Op, tc.a, err, tc.reason)
		}
	}
	if got := evalString(t, c, s.ID, `location.pathname`); got != "/form.html" {
		t.Errorf("after the refused navigations the page is %q", got)
	}

	// Screenshot: a real PNG of the viewport, by the action and raw.
	var img apitype.Image
	act(t, c, s.ID, apitype.BrowserAction{Op: "screenshot"}, &img)
	raw, _ := base64.StdEncoding.DecodeString(img.Base64)
	if cfg, err := png.DecodeConfig(bytes.NewReader(raw)); err != nil || img.MimeType != "image/png" || cfg.Width != 1024 || cfg.Height != 700 {
		t.Errorf("screenshot = %s %v %+v, want a 1024x700 PNG", img.MimeType, err, cfg)
	}
	if shot, err := c.BrowserScreenshot(ctx, s.ID, true); err != nil || !bytes.HasPrefix(shot, []byte("\x89PNG")) {
		t.Errorf("GET .../screenshot = %d bytes, %v", len(shot), err)
	}

	// Dialogs: dismissed unless a policy says otherwise.
	act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/dialog.html"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "click", Selector: "#c"}, nil)
	if got := evalString(t, c, s.ID, `document.getElementById('out').textContent`); got != "confirm:false" {
		t.Errorf("confirm without a policy: %q, want dismissed", got)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "dialog", Accept: true, PromptText: "Lin"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "click", Selector: "#p"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "waitFor", Target: &apitype.BrowserTarget{By: "text", Value: "prompt:Lin"}}, nil)
	// A popup to file: never shows the file.
	act(t, c, s.ID, apitype.BrowserAction{Op: "click", Selector: "#w"}, nil)
	time.Sleep(300 * time.Millisecond)
	var list []apitype.BrowserPage
	act(t, c, s.ID, apitype.BrowserAction{Op: "pages"}, &list)
	for _, p := range list {
		if strings.HasPrefix(p.URL, "file:") {
			t.Errorf("a page shows %s", p.URL)
		}
	}

	// Pages: a second page, select, close.
	act(t, c, s.ID, apitype.BrowserAction{Op: "pages", Action: "new", URL: base + "/docs.html"}, &list)
	if len(list) != 2 || !list[1].Current || list[1].Title != "Docs" {
		t.Errorf("pages after new = %+v", list)
	}
	zero := 0
	act(t, c, s.ID, apitype.BrowserAction{Op: "pages", Action: "select", Index: &zero}, &list)
	if got := evalString(t, c, s.ID, `document.title`); got != "Dialogs" {
		t.Errorf("after selecting page 0 the title is %q", got)
	}
	one := 1
	act(t, c, s.ID, apitype.BrowserAction{Op: "pages", Action: "close", Index: &one}, &list)
	if len(list) != 1 {
		t.Errorf("pages after close = %+v", list)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "back"}, nil)
	if got := evalString(t, c, s.ID, `location.pathname`); got != "/form.html" {
		t.Errorf("after back: %q", got)
	}

	got, err := c.BrowserSession(ctx, s.ID)
	if err != nil || !strings.HasSuffix(got.URL, "/form.html") || got.Title != "Sign up" || got.Pages != 1 {
		t.Errorf("BrowserSession = %+v, %v", got, err)
	}
	if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BrowserSession(ctx, s.ID); errcode.ReasonOf(err) != "session_not_found" {
		t.Errorf("session after close: %v, want session_not_found", err)
	}
}

// TestBrowserBusy: a second action while one runs gets 409 busy.
func TestBrowserBusy(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	ctx := context.Background()
	s, err := d.Client.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		close(started)
		for {
			err := d.Client.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "waitFor", Selector: "#never", TimeoutMS: 5000}, nil)
			if errcode.ReasonOf(err) == "busy" {
				continue // a probe below came first: try again
			}
			if errcode.ReasonOf(err) != "wait_timeout" {
				t.Errorf("the long action: %v, want wait_timeout", err)
			}
			return
		}
	})
	<-started
	testenv.Eventually(t, 10*time.Second, "a concurrent action to be refused busy", func() bool {
		err := d.Client.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
		return errcode.ReasonOf(err) == "busy"
	})
	wg.Wait()
	act(t, d.Client, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil) // positive control
}

// TestBrowserProcessModeCrash kills a process-mode session's browser with
// SIGKILL: the session reports crashed, nothing is left, and a new session
// works. Then 50 sessions open and close leaving no process behind.
func TestBrowserProcessModeCrash(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.MaxBrowserSessions = 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process"})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
	procs := testenv.ProcessesUnder("--user-data-dir=" + d.DataDir + "/browser/profile-" + s.ID)
	if len(procs) == 0 {
		t.Fatal("no Chromium process with the session's profile")
	}
	for _, pid := range procs {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	testenv.Eventually(t, 20*time.Second, "the session to report its crash", func() bool {
		err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
		return errcode.ReasonOf(err) == "session_crashed"
	})
	got, err := c.BrowserSession(ctx, s.ID)
	if err != nil || got.State != apitype.BrowserCrashed || got.Reason == "" {
		t.Errorf("crashed session = %+v, %v", got, err)
	}
	if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}

	// The limit holds, and 50 sessions leave nothing behind.
	for i := range 50 {
		mode := "context"
		if i%10 == 0 {
			mode = "process"
		}
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: mode})
		if err != nil {
			t.Fatalf("session %d (%s): %v", i, mode, err)
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: strconv.Itoa(i)}, nil)
		if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for range 4 {
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	if _, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{}); errcode.ReasonOf(err) != "session_limit" {
		t.Errorf("a fifth session with --max-browser-sessions 4: %v, want session_limit", err)
	}
	for _, id := range ids {
		_ = c.CloseBrowserSession(ctx, id)
	}
	// Only the shared browser remains: its profile, and no other.
	testenv.Eventually(t, 20*time.Second, "process-mode browsers to be gone", func() bool {
		for _, pid := range chromiumProcesses(d) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if strings.Contains(string(b), "/browser/profile-") {
				return false
			}
		}
		return true
	})
	if z := zombies(); len(z) > 0 {
		t.Errorf("zombie processes left: %v", z)
	}
}

// zombies lists this process's zombie children.
func zombies() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[0] == "Z" && f[1] == me {
			pid, _ := strconv.Atoi(e.Name())
			out = append(out, pid)
		}
	}
	return out
}

// playwrightVersion is the playwright-core the CDP test installs from npm.
const playwrightVersion = "1.65.1"

// playwrightDir installs playwright-core into tools/playwright once (npm,
// no browser download: it connects) and returns the directory.
func playwrightDir(t *testing.T) string {
	t.Helper()
	node := testenv.NeedCommand(t, "node")
	npm := testenv.NeedCommand(t, "npm")
	out, err := exec.Command(node, "--version").Output()
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if err != nil || major < 20 {
		testenv.Missing(t, "playwright-core %s needs Node.js 20 or newer; node --version says %q", playwrightVersion, out)
	}
	root, err := filepath.Abs("../../tools/playwright")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "playwright-core", "package.json")); err == nil {
		return root
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--prefix", root, "playwright-core@"+playwrightVersion)
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		testenv.Missing(t, "npm install playwright-core@%s: %v\n%s", playwrightVersion, err, out)
	}
	return root
}

// TestBrowserCDPWithPlaywright drives a process-mode session with a real
// Playwright client through Berth's authenticated CDP endpoint; the
// endpoint refuses a missing key and context-mode sessions.
func TestBrowserCDPWithPlaywright(t *testing.T) {
	t.Parallel()
	needChromium(t)
	dir := playwrightDir(t)
	d := testenv.StartDaemon(t, nil)
	base := pages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := d.Client.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process"})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := strings.Replace(d.URL, "http://", "ws://", 1) + "/v1/browser/sessions/" + s.ID + "/cdp"

	// Negative: no key; a context-mode session.
	resp, err := http.Get(strings.Replace(endpoint, "ws://", "http://", 1))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("CDP endpoint without a key = %v, %v; want 401", resp, err)
	}
	cs, err := d.Client.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/browser/sessions/"+cs.ID+"/cdp", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusConflict {
		t.Errorf("CDP endpoint of a context session = %v, %v; want 409 cdp_needs_process_mode", resp, err)
	}

	script, _ := filepath.Abs("testdata/playwright/cdp.mjs")
	cmd := exec.CommandContext(ctx, "node", script, endpoint, d.Token, base+"/form.html")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Dir = dir // node resolves playwright-core from here
	linkScript := filepath.Join(dir, "cdp.mjs")
	b, _ := os.ReadFile(script)
	if err := os.WriteFile(linkScript, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Args[1] = linkScript
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Playwright||true|free") {
		t.Fatalf("Playwright through the CDP endpoint: %v\n%s", err, out)
	}
	// The session is still Berth's.
	if got, err := d.Client.BrowserSession(ctx, s.ID); err != nil || got.State == apitype.BrowserClosed {
		t.Errorf("session after the Playwright client left = %+v, %v", got, err)
	}
}

// TestBrowserFilesDragInspectDiagnostics: upload into a file input (with
// caps), a download caught whole, a mouse drag, bounded inspection that
// never shows a password, and the diagnostics ring without console text
// unless asked.
func TestBrowserFilesDragInspectDiagnostics(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	base := pages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 800, Height: 600}})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/files.html"}, nil)

	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	act(t, c, s.ID, apitype.BrowserAction{Op: "upload", Selector: "#up", Files: []apitype.BrowserFile{
		{Name: "a.txt", ContentBase64: b64("hello")}, {Name: "b.csv", ContentBase64: b64("1,2,3\n")}}}, nil)
	if got := evalString(t, c, s.ID, `document.getElementById('out').textContent`); got != "a.txt:5,b.csv:6" {
		t.Errorf("after upload the page saw %q", got)
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, 4<<20+1))
	for _, tc := range []struct {
		a      apitype.BrowserAction
		reason string
	}{
		{apitype.BrowserAction{Op: "upload", Selector: "#up", Files: []apitype.BrowserFile{{Name: "big", ContentBase64: big}}}, "upload_too_large"},
		{apitype.BrowserAction{Op: "upload", Selector: "#up", Files: []apitype.BrowserFile{{Name: "../x", ContentBase64: ""}}}, ""},
		{apitype.BrowserAction{Op: "upload", Selector: "#pw", Files: []apitype.BrowserFile{{Name: "a", ContentBase64: ""}}}, "not_file_input"},
	} {
		if err := c.BrowserAction(ctx, s.ID, tc.a, nil); err == nil || (tc.reason != "" && errcode.ReasonOf(err) != tc.reason) {
			t.Errorf("upload %s: %v, want %q", tc.a.Files[0].Name, err, tc.reason)
		}
	}

	var dl apitype.BrowserDownload
	act(t, c, s.ID, apitype.BrowserAction{Op: "download", Selector: "#dl"}, &dl)
	if raw, _ := base64.StdEncoding.DecodeString(dl.Base64); string(raw) != "quarterly numbers\n" || dl.Filename != "report.txt" || dl.Size != 18 {
		t.Errorf("download = %+v (%q)", dl, raw)
	}

	act(t, c, s.ID, apitype.BrowserAction{Op: "drag", Selector: "#box", To: &apitype.BrowserTarget{Selector: "#zone"}}, nil)
	if got := evalString(t, c, s.ID, `document.getElementById('out').textContent`); got != "dropped" {
		t.Errorf("after drag: %q", got)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "dragCoordinates", X: 350, Y: 250, ToX: 10, ToY: 10}, nil)

	var insp struct {
		Nodes []struct {
			Tag        string            `json:"tag"`
			Attributes map[string]string `json:"attributes"`
			Value      *string           `json:"value"`
		} `json:"nodes"`
		Truncated bool `json:"truncated"`
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "inspect", MaxElements: 5}, &insp)
	if len(insp.Nodes) != 5 || !insp.Truncated || insp.Nodes[0].Tag != "body" {
		t.Errorf("inspect of body, 5 at most = %d nodes, truncated %t", len(insp.Nodes), insp.Truncated)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "inspect", Selector: "#pw"}, &insp)
	if len(insp.Nodes) != 1 || insp.Nodes[0].Value != nil || insp.Nodes[0].Attributes["value"] != "" || insp.Nodes[0].Attributes["type"] != "password" {
		t.Errorf("inspect of a password field shows its value: %+v", insp.Nodes)
	}

	var diag struct {
		Events []apitype.BrowserEvent `json:"events"`
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "diagnostics"}, &diag)
	sawConsole := false
	for _, e := range diag.Events {
		if e.Kind == "console" {
			sawConsole = true
			if e.Text != "" {
				t.Errorf("console text kept without capture_console: %+v", e)
			}
		}
	}
	if !sawConsole {
		t.Errorf("diagnostics = %+v, want the page's console message", diag.Events)
	}
	// Positive control: a session that captures console text has it.
	s2, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{CaptureConsole: true})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, s2.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/files.html"}, nil)
	act(t, c, s2.ID, apitype.BrowserAction{Op: "diagnostics"}, &diag)
	found := false
	for _, e := range diag.Events {
		found = found || strings.Contains(e.Text, "page says secret-token-123")
	}
	if !found {
		t.Errorf("diagnostics with capture_console = %+v, want the text", diag.Events)
	}
}

// TestBrowserMoreOps covers the ops the other tests leave out: forward,
// reload, dblclick, hover, focus, uncheck, scroll, content, mouse ops,
// element and JPEG screenshots; and that two sessions share no cookies.
func TestBrowserMoreOps(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	base := pages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/docs.html"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/events.html"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "back"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "forward"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "reload"}, nil)
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "forward"}, nil); errcode.ReasonOf(err) != "no_history" {
		t.Errorf("forward at the end of history: %v, want no_history", err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "hover", Selector: "#b"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "dblclick", Selector: "#b"}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "focus", Selector: "#i"}, nil)
	if got := evalString(t, c, s.ID, `berthLog.join(',')`); got != "mouseover,click,click,dblclick,focus" {
		t.Errorf("events = %q", got)
	}
	var ch map[string]bool
	act(t, c, s.ID, apitype.BrowserAction{Op: "uncheck", Selector: "#c"}, &ch)
	if ch["checked"] {
		t.Errorf("uncheck = %v", ch)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "scroll", Selector: "#far"}, nil)
	var y float64
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "scrollY"}, &y)
	if y < 1000 {
		t.Errorf("after scrolling to #far, scrollY = %v", y)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "scroll", DeltaY: -5000}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "scrollY"}, &y)
	if y != 0 {
		t.Errorf("after scrolling up by 5000, scrollY = %v", y)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "mouseMove", X: 300, Y: 400}, nil)
	act(t, c, s.ID, apitype.BrowserAction{Op: "mouseClick", X: 500, Y: 500}, nil)
	if got := evalString(t, c, s.ID, `lastMove.join(',') + '|' + berthLog.at(-1)`); got != "500,500|bodyclick" {
		t.Errorf("after mouse ops: %q", got)
	}
	var content struct {
		HTML      string `json:"html"`
		Truncated bool   `json:"truncated"`
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "content"}, &content)
	if !strings.Contains(content.HTML, `<button id="b"`) || content.Truncated {
		t.Errorf("content = %.200q", content.HTML)
	}
	var img apitype.Image
	act(t, c, s.ID, apitype.BrowserAction{Op: "screenshot", Selector: "#b"}, &img)
	raw, _ := base64.StdEncoding.DecodeString(img.Base64)
	if cfg, err := png.DecodeConfig(bytes.NewReader(raw)); err != nil || cfg.Width != 120 || cfg.Height != 40 {
		t.Errorf("element screenshot = %+v, %v; want 120x40", cfg, err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "screenshot", Format: "jpeg", Quality: 50}, &img)
	if raw, _ := base64.StdEncoding.DecodeString(img.Base64); img.MimeType != "image/jpeg" || !bytes.HasPrefix(raw, []byte{0xff, 0xd8}) {
		t.Errorf("jpeg screenshot = %s, %x", img.MimeType, raw[:min(4, len(raw))])
	}

	// Popups: an allowed one becomes a page; one with credentials in its
	// URL is closed and reported.
	act(t, c, s.ID, apitype.BrowserAction{Op: "click", Selector: "#pop-ok"}, nil)
	testenv.Eventually(t, 10*time.Second, "the popup to become a page", func() bool {
		var list []apitype.BrowserPage
		act(t, c, s.ID, apitype.BrowserAction{Op: "pages"}, &list)
		return len(list) == 2 && strings.HasSuffix(list[1].URL, "/docs.html") && !list[1].Current
	})
	act(t, c, s.ID, apitype.BrowserAction{Op: "click", Selector: "#pop-cred"}, nil)
	testenv.Eventually(t, 10*time.Second, "the popup with credentials to be blocked", func() bool {
		var diag struct {
			Events []apitype.BrowserEvent `json:"events"`
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "diagnostics"}, &diag)
		for _, e := range diag.Events {
			if e.Kind == "blocked" && strings.HasSuffix(e.URL, "/docs.html") && !strings.Contains(e.URL, "pw@") {
				return true
			}
		}
		return false
	})
	var list []apitype.BrowserPage
	act(t, c, s.ID, apitype.BrowserAction{Op: "pages"}, &list)
	for _, p := range list {
		if strings.Contains(p.URL, "@") {
			t.Errorf("a page with credentials is open: %+v", list)
		}
	}

	// Browser contexts are apart: a cookie of one session is not another's.
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: `document.cookie = "who=first; path=/"`}, nil)
	s2, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, s2.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/events.html"}, nil)
	if got := evalString(t, c, s2.ID, `document.cookie`); got != "" {
		t.Errorf("second session sees cookie %q", got)
	}
	if got := evalString(t, c, s.ID, `document.cookie`); got != "who=first" { // positive control
		t.Errorf("first session's cookie = %q", got)
	}
}

// TestBrowserRendererCrash crashes the session's renderer (Page.crash,
// sent through the CDP endpoint): the session reports crashed with the
// reason, and a new session works.
func TestBrowserRendererCrash(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process"})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
	endpoint := strings.Replace(d.URL, "http://", "ws://", 1) + "/v1/browser/sessions/" + s.ID + "/cdp"
	conn, _, err := websocket.Dial(ctx, endpoint, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + d.Token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	call := func(id int, method, session string, params any) map[string]any {
		msg := map[string]any{"id": id, "method": method, "params": params}
		if session != "" {
			msg["sessionId"] = session
		}
		b, _ := json.Marshal(msg)
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			var r map[string]any
			_ = json.Unmarshal(b, &r)
			if r["id"] == float64(id) {
				return r
			}
		}
	}
	targets := call(1, "Target.getTargets", "", map[string]any{})
	var page string
	for _, ti := range targets["result"].(map[string]any)["targetInfos"].([]any) {
		if m := ti.(map[string]any); m["type"] == "page" {
			page = m["targetId"].(string)
		}
	}
	attached := call(2, "Target.attachToTarget", "", map[string]any{"targetId": page, "flatten": true})
	sid := attached["result"].(map[string]any)["sessionId"].(string)
	b, _ := json.Marshal(map[string]any{"id": 3, "method": "Page.crash", "sessionId": sid})
	_ = conn.Write(ctx, websocket.MessageText, b)

	testenv.Eventually(t, 20*time.Second, "the session to report the crash", func() bool {
		got, err := c.BrowserSession(ctx, s.ID)
		return err == nil && got.State == apitype.BrowserCrashed && got.Reason == "renderer_crashed"
	})
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil); errcode.ReasonOf(err) != "session_crashed" {
		t.Errorf("action on the crashed session: %v, want session_crashed", err)
	}
	s2, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, s2.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
}

// TestBrowserStartupSweep leaves a Chromium running on a profile under the
// data directory, as a killed daemon would, and starts the daemon: it
// kills that browser. A browser on a profile elsewhere is left alone.
func TestBrowserStartupSweep(t *testing.T) {
	t.Parallel()
	needChromium(t)
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	start := func(profile string) *exec.Cmd {
		cmd := exec.Command(browser.FindChromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--user-data-dir="+profile, "about:blank")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			browser.SweepOrphans(profile) // and whatever it started
		})
		return cmd
	}
	orphan := start(filepath.Join(dataDir, "browser", "shared-orphan"))
	other := start(filepath.Join(testenv.ShortTempDir(t), "elsewhere"))
	exited := make(chan struct{})
	go func() { _ = orphan.Wait(); close(exited) }()
	testenv.StartDaemonProcess(t, dataDir)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the orphaned browser still runs 30s after the daemon started")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("a browser outside the data directory was killed: %v", err)
	}
}

// TestBrowserProfiles: a named profile keeps cookies between sessions, one
// session at a time uses it, and it needs process mode.
func TestBrowserProfiles(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	base := pages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := d.Client
	open := func() apitype.BrowserSession {
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process", Profile: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/docs.html"}, nil)
		return s
	}
	s := open()
	if _, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process", Profile: "alice"}); errcode.ReasonOf(err) != "profile_in_use" {
		t.Errorf("a second session of the profile: %v, want profile_in_use", err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: `document.cookie = "kept=yes; max-age=3600; path=/"`}, nil)
	if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	s = open()
	testenv.Eventually(t, 10*time.Second, "the cookie in the next session of the profile", func() bool {
		return evalString(t, c, s.ID, `document.cookie`) == "kept=yes"
	})
	// Positive control: a session without the profile has no such cookie.
	o, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process"})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, o.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/docs.html"}, nil)
	if got := evalString(t, c, o.ID, `document.cookie`); got != "" {
		t.Errorf("a session without the profile sees %q", got)
	}
	for _, req := range []apitype.CreateBrowserSessionRequest{{Profile: "alice"}, {Mode: "process", Profile: "../x"}} {
		if _, err := c.OpenBrowserSession(ctx, req); !errcode.Is(err, errcode.Invalid) {
			t.Errorf("OpenBrowserSession(%+v) = %v, want invalid", req, err)
		}
	}
}

// TestBrowserExpiry: a session closes itself after its idle timeout, and
// after its maximum duration even while in use.
func TestBrowserExpiry(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	ctx := context.Background()
	c := d.Client
	idle, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{IdleTimeoutMS: 1500})
	if err != nil {
		t.Fatal(err)
	}
	short, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{MaxDurationMS: 3000})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		// short is used all along; only its maximum duration ends it.
		_ = c.BrowserAction(ctx, short.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
		_, errIdle := c.BrowserSession(ctx, idle.ID)
		_, errShort := c.BrowserSession(ctx, short.ID)
		if errcode.ReasonOf(errIdle) == "session_not_found" && errcode.ReasonOf(errShort) == "session_not_found" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, id := range []string{idle.ID, short.ID} {
		if _, err := c.BrowserSession(ctx, id); errcode.ReasonOf(err) != "session_not_found" {
			t.Errorf("session %s after its expiry: %v, want session_not_found", id, err)
		}
	}
	act(t, c, kept.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil) // positive control
}

// TestBrowserEmulation: user agent, locale and timezone of a session.
func TestBrowserEmulation(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	ctx := context.Background()
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{UserAgent: "BerthTest/1.0", Locale: "fr-FR",
		Timezone: "Asia/Tokyo", Viewport: &apitype.Viewport{Width: 900, Height: 500}})
	if err != nil {
		t.Fatal(err)
	}
	got := evalString(t, c, s.ID, `[navigator.userAgent, navigator.language, Intl.DateTimeFormat().resolvedOptions().timeZone, innerWidth + 'x' + innerHeight].join('|')`)
	if got != "BerthTest/1.0|fr-FR|Asia/Tokyo|900x500" {
		t.Errorf("emulation = %q", got)
	}
	if _, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Timezone: "Mars/Olympus"}); !errcode.Is(err, errcode.Invalid) {
		t.Errorf("an unknown timezone: %v, want invalid", err)
	}
	if list, _ := c.BrowserSessions(ctx); len(list) != 1 {
		t.Errorf("sessions after a refused open = %d, want 1", len(list))
	}
}

// TestBrowserBounds: each bound of an action answers its own error and
// leaves the session working.
func TestBrowserBounds(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/big.bin", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="big.bin"`)
		chunk := make([]byte, 1<<20)
		for range 33 { // 33 MiB: past the 32 MiB download cap
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "'x'.repeat(2 << 20)"}, nil); errcode.ReasonOf(err) != "result_too_large" {
		t.Errorf("a 2 MiB result: %v, want result_too_large", err)
	}
	var n float64
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "'x'.repeat(1000).length"}, &n) // positive control
	if n != 1000 {
		t.Errorf("a small result = %v", n)
	}
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "download", URL: srv.URL + "/big.bin"}, nil); errcode.ReasonOf(err) != "download_too_large" {
		t.Errorf("a 33 MiB download: %v, want download_too_large", err)
	}
	var list []apitype.BrowserPage
	for i := 1; i < 16; i++ {
		act(t, c, s.ID, apitype.BrowserAction{Op: "pages", Action: "new"}, &list)
	}
	if len(list) != 16 {
		t.Fatalf("pages = %d, want 16", len(list))
	}
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "pages", Action: "new"}, nil); errcode.ReasonOf(err) != "page_limit" {
		t.Errorf("a 17th page: %v, want page_limit", err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
}
