package dashboard_test

import (
	"context"
	"flag"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/dashboard"
	"github.com/berthdev/berth/internal/testenv"
)

var screenshotDir = flag.String("screenshots", "", "write PNGs of the dashboard's main pages into this directory (make screenshots)")

// TestScreenshots makes the screenshots of docs/dashboard.md: a real
// daemon with a sandbox, a command, a few files and a job, its pages shot
// at 1280x800 by Chromium. It runs only with -screenshots=DIR (make
// screenshots), so make test writes no files.
func TestScreenshots(t *testing.T) {
	if *screenshotDir == "" {
		t.Skip("writes files: run with -screenshots=DIR (make screenshots)")
	}
	d := testenv.StartDaemon(t, nil)
	root := startChromium(t)
	ctx := context.Background()
	b := newBrowser(t, root)
	b.run(t, "sizing the viewport", chromedp.EmulateViewport(1280, 800))
	b.signIn(t, d.URL, d.Token)

	c := d.Client
	sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"app.py":     []byte("import json\n\n\ndef handler(event):\n    \"\"\"Answer an event with its name.\"\"\"\n    return json.dumps({\"hello\": event.get(\"name\", \"world\")})\n\n\nif __name__ == \"__main__\":\n    print(handler({\"name\": \"berth\"}))\n"),
		"app_v2.py":  []byte("import json\n\n\ndef handler(event):\n    \"\"\"Answer an event with its name and a greeting.\"\"\"\n    name = event.get(\"name\", \"world\")\n    return json.dumps({\"hello\": name, \"greeting\": f\"hi {name}\"})\n\n\nif __name__ == \"__main__\":\n    print(handler({\"name\": \"berth\"}))\n"),
		"README.md":  []byte("# Demo\n\nA sandbox with a **small app** and its data.\n\n- `app.py` answers events\n- `scores.csv` holds results\n"),
		"scores.csv": []byte("name,score,city\nalice,42,Lisbon\nbob,37,Oslo\ncarol,51,Quito\n"),
		"sheet.xlsx": dashboard.MakeXLSX(t, "Q1", `<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>`+
			`<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2"><v>1200.5</v></c></row><row r="3"><c r="A3" t="s"><v>3</v></c><c r="B3"><v>980</v></c></row>`,
			"region", "revenue", "north", "south"),
	}
	for name, body := range files {
		if _, err := c.WriteFile(ctx, sb.ID, name, strings.NewReader(string(body)), 0); err != nil {
			t.Fatal(err)
		}
	}
	cmd, err := c.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "python3 app.py 2>/dev/null || echo '{\"hello\": \"berth\"}'; ls -l"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the command ends", func() bool {
		got, err := c.Command(ctx, sb.ID, cmd.ID, client.CommandQuery{})
		return err == nil && got.Status != apitype.CommandRunning
	})
	var jobID string
	if a, err := c.Action(ctx, "html-pdf"); err == nil && a.Available {
		ref, err := c.UploadFile(ctx, strings.NewReader("<h1>Quarterly report</h1><p>Made by a Berth job.</p>"), "index.html")
		if err != nil {
			t.Fatal(err)
		}
		job, err := c.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf", Inputs: map[string]apitype.JobInput{"index.html": {SHA256: ref.SHA256}}})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if _, err := c.WaitJob(wctx, job.ID); err != nil {
			t.Fatal(err)
		}
		jobID = job.ID
	} else {
		t.Logf("no job: html-pdf is not available here (%+v, %v)", a, err)
	}

	sbx := "/ui/sandboxes/" + sb.ID
	shots := []struct{ name, path, wait string }{
		{"sandboxes", "/ui/sandboxes", "#sandboxes"},
		{"sandbox", sbx, "#sandbox-id"},
		{"command", sbx + "/commands/" + cmd.ID, "#stdout"},
		{"files", sbx + "/files", "#files"},
		{"preview-code", sbx + "/files/view?path=app.py", "#preview .hljs-keyword"},
		{"preview-markdown", sbx + "/files/view?path=README.md", "#preview h1"},
		{"preview-xlsx", sbx + "/files/view?path=sheet.xlsx", "#sheet-name"},
		{"diff", sbx + "/files/diff?a=app.py&b=app_v2.py", "#diff"},
		{"jobs", "/ui/jobs", "main h1"},
		{"system", "/ui/system", "#runtimes"},
		{"keys", "/ui/keys", "#keys"},
		{"tenants", "/ui/tenants", "#tenants"},
		{"audit", "/ui/audit", "#audit"},
	}
	if jobID != "" {
		shots = append(shots, struct{ name, path, wait string }{"job", "/ui/jobs/" + jobID, "#outputs a"})
	}
	shots = append(shots, struct{ name, path, wait string }{"templates", "/ui/templates", "#build-template"})
	var sessionShots []struct{ name, path, wait string }
	if sys, err := c.System(ctx); err == nil && sys.Browser.Available {
		sessionShots = browserSessionShots(t, c)
	} else {
		t.Logf("no browser session pages: browser sessions are off here (%+v, %v)", sys.Browser, err)
	}
	if _, err := c.CreateTenant(ctx, apitype.CreateTenantRequest{Name: "team-a", Limits: apitype.TenantLimits{MaxSandboxes: 10, MaxMemoryMB: 8192}}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(*screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range shots {
		b.run(t, "opening "+s.name, chromedp.Navigate(d.URL+s.path), chromedp.WaitVisible(chromedp.CSS(s.wait)))
		png := get(t, b, "shooting "+s.name, chromedp.CaptureScreenshot())
		if err := os.WriteFile(filepath.Join(*screenshotDir, s.name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s.png: %d bytes", s.name, len(png))
	}
	// The browser session's page waits for its live panel's first frame,
	// the player for its frame.
	for _, s := range sessionShots {
		b.run(t, "opening "+s.name, chromedp.Navigate(d.URL+s.path), void(chromedp.Poll[bool](s.wait, chromedp.WithPollingTimeout(15*time.Second))))
		png := get(t, b, "shooting "+s.name, chromedp.CaptureScreenshot())
		if err := os.WriteFile(filepath.Join(*screenshotDir, s.name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s.png: %d bytes", s.name, len(png))
	}
}

// browserSessionShots opens a browser session on a small page, records
// it through three pages and returns the session page and the recording's
// player to shoot, each with a script condition that its image is drawn.
func browserSessionShots(t *testing.T, c *client.Client) []struct{ name, path, wait string } {
	t.Helper()
	ctx := context.Background()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		colour := strings.TrimPrefix(r.URL.Path, "/")
		if colour == "" {
			colour = "#f6f8fa"
		}
		fmt.Fprintf(w, `<!doctype html><title>Order %s</title><body style="font:18px system-ui;background:%s;margin:40px">
<h1>Orders</h1><p>An agent works through this page.</p><button style="font-size:18px;padding:8px 20px">Approve</button>`, html.EscapeString(colour), html.EscapeString(colour))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	bs, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseBrowserSession(context.Background(), bs.ID) })
	if err := c.BrowserAction(ctx, bs.ID, apitype.BrowserAction{Op: "navigate", URL: srv.URL + "/"}, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := c.StartRecording(ctx, bs.ID, apitype.StartRecordingRequest{IntervalMS: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, colour := range []string{"lightyellow", "lightblue", "honeydew"} {
		if err := c.BrowserAction(ctx, bs.ID, apitype.BrowserAction{Op: "navigate", URL: srv.URL + "/" + colour}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond) // a frame or two of each page
	}
	if _, err := c.StopRecording(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	return []struct{ name, path, wait string }{
		{"browser-session", "/ui/browsers/" + bs.ID, `Number(document.getElementById("live").dataset.frames || 0) >= 1`},
		{"recording", "/ui/recordings/" + rec.ID, `document.getElementById("player-frame").naturalWidth > 0`},
	}
}
