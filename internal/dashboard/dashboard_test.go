package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/testenv"
)

// browser is one Chromium browser context (its own cookies) with a
// counter of the alert dialogs its pages open.
type browser struct {
	ctx    context.Context
	alerts *atomic.Int32
}

// startChromium starts one Chromium for the test, stopped at cleanup.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testenv.NeedChromium(t)),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.WindowSize(1280, 900),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root otherwise
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	// The first run starts the browser and must carry no deadline: the
	// deadline would end the browser with it.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return bctx
}

// newBrowser opens a tab in a browser context of its own (its own
// cookies: another person) and counts the alert dialogs it sees,
// dismissing them.
func newBrowser(t *testing.T, root context.Context) browser {
	t.Helper()
	alerts := &atomic.Int32{}
	var ctx context.Context
	ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext(), chromedp.WithListener(func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			if d.Type == page.DialogTypeAlert {
				alerts.Add(1)
			}
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}()
		}
	}))
	t.Cleanup(cancel)
	b := browser{ctx: ctx, alerts: alerts}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return b
}

// run runs steps in b's tab within 20 seconds.
func (b browser) run(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fatal(t, what, err)
	}
}

func (b browser) fatal(t *testing.T, what string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	t.Fatalf("%s: %v (page %s: %.500s)", what, err, loc, body)
}

// navigateBy runs steps that navigate (a click on a form's button) and
// waits for the page they load.
func (b browser) navigateBy(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, steps...); err != nil {
		b.fatal(t, what, err)
	}
}

// get runs a in b's tab within 20 seconds and returns its value.
func get[T any](t *testing.T, b browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fatal(t, what, err)
	}
	return v
}

// text is the text of the element sel selects.
func text(t *testing.T, b browser, sel string) string {
	t.Helper()
	return get(t, b, "reading "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// signIn signs b in with key and lands on the sandboxes page.
func (b browser) signIn(t *testing.T, base, key string) {
	t.Helper()
	b.run(t, "signing in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("create-sandbox")),
	)
}

// fetchResult is what a fetch from the page answered.
type fetchResult struct {
	Status      int    `json:"status"`
	Type        string `json:"type"`
	ContentType string `json:"content_type"`
	Disposition string `json:"disposition"`
	NoSniff     string `json:"nosniff"`
	CSP         string `json:"csp"`
	Body        string `json:"body"`
	URL         string `json:"url"`
}

// fetch calls fetch(url, init) in b's page (its origin, its cookies).
func (b browser) fetch(t *testing.T, url, init string) fetchResult {
	t.Helper()
	js := `(async () => { const r = await fetch(` + jsString(url) + `, ` + init + `);
		return {status: r.status, type: r.type, url: r.url, content_type: r.headers.get("content-type") || "",
			disposition: r.headers.get("content-disposition") || "", nosniff: r.headers.get("x-content-type-options") || "",
			csp: r.headers.get("content-security-policy") || "", body: (await r.text()).slice(0, 2000)}; })()`
	return get(t, b, "fetch "+url, chromedp.Evaluate[fetchResult](js, chromedp.EvalAwaitPromise))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestDashboard drives the dashboard in real Chromium against the real
// daemon: sign-in, a sandbox, a command's live output, files and their
// previews, hostile names and output, CSRF and tenancy.
func TestDashboard(t *testing.T) {
	testenv.OnePass(t)
	d := testenv.StartDaemon(t, nil)
	root := startChromium(t)
	ctx := context.Background()

	_, keyA := tenantKey(t, d, "dash-a")
	_, keyB := tenantKey(t, d, "dash-b")
	a := newBrowser(t, root)
	t.Run("sign-in refusals", func(t *testing.T) {
		a.run(t, "signing in with a wrong key",
			chromedp.Navigate(d.URL+"/"),
			chromedp.SendKeys(chromedp.ID("key"), auth.KeyPrefix+strings.Repeat("a", 52)),
			chromedp.Click(chromedp.ID("signin")),
			chromedp.WaitVisible(chromedp.ID("signin-error")),
		)
		// The form's token is checked: a sign-in POST without it is
		// refused (a site cannot sign a browser in with its own key),
		// and the same POST with it gets past the check (the control).
		refused := a.fetch(t, "/login", `{method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "key=x"}`)
		if refused.Status != 403 || !strings.Contains(refused.Body, "csrf_invalid") {
			t.Errorf("POST /login without the form's token = %d %s, want 403 csrf_invalid", refused.Status, refused.Body)
		}
		a.run(t, "reloading the form", chromedp.Navigate(d.URL+"/"))
		tok := get(t, a, "reading the token", chromedp.Value(chromedp.CSS(`form.signin input[name="csrf"]`)))
		passed := a.fetch(t, "/login", `{method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: `+jsString("key=x&csrf="+tok)+`}`)
		if passed.Status != 401 {
			t.Errorf("POST /login with the form's token and a bad key = %d, want 401 (past the CSRF check)", passed.Status)
		}
	})
	a.signIn(t, d.URL, keyA.Secret)
	cA := client.New(d.URL, keyA.Secret)

	var sbxID string
	t.Run("create sandbox", func(t *testing.T) {
		a.run(t, "creating a sandbox",
			chromedp.SetValue(chromedp.ID("sandbox-name"), "dash-one"),
			chromedp.Click(chromedp.CSS("#create-sandbox button")),
			chromedp.WaitVisible(chromedp.ID("sandbox-id")),
		)
		sbxID = text(t, a, "#sandbox-id")
		if !strings.HasPrefix(sbxID, "sbx_") {
			t.Fatalf("sandbox page shows ID %q, want sbx_...", sbxID)
		}
		html := get(t, a, "reading the page", chromedp.OuterHTML(chromedp.CSS("html")))
		if strings.Contains(html, keyA.Secret) {
			t.Error("a dashboard page contains the API key")
		}
	})
	if sbxID == "" {
		t.Fatal("no sandbox")
	}
	sbxURL := d.URL + "/ui/sandboxes/" + sbxID
	waitExited := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](`document.getElementById("command-status").textContent === "exited"`,
			chromedp.WithPollingTimeout(15*time.Second))(ctx, tg)
		return err
	})

	t.Run("command output streams", func(t *testing.T) {
		// The command is still running when its page loads, so "hello"
		// and the final status arrive through the page's stream.
		a.run(t, "running a command",
			chromedp.Navigate(sbxURL),
			chromedp.SendKeys(chromedp.ID("command"), "sleep 1; echo hello"),
			chromedp.Click(chromedp.ID("run-button")),
			chromedp.WaitVisible(chromedp.ID("stdout")),
		)
		if st := text(t, a, "#command-status"); st != "running" {
			t.Logf("command status at load = %q (want running, so the stream is what shows the end)", st)
		}
		a.run(t, "waiting for the command", waitExited)
		if out := text(t, a, "#stdout"); !strings.Contains(out, "hello") {
			t.Errorf("command page output = %q, want hello", out)
		}
	})

	t.Run("hostile output and names do not run", func(t *testing.T) {
		hostile := "<img src=x onerror=alert(1)>"
		if _, err := cA.WriteFile(ctx, sbxID, hostile, strings.NewReader("x"), 0); err != nil {
			t.Fatal(err)
		}
		a.run(t, "printing a script",
			chromedp.Navigate(sbxURL),
			chromedp.SendKeys(chromedp.ID("command"), `printf '<script>alert(2)</script><img src=y onerror=alert(3)>'`),
			chromedp.Click(chromedp.ID("run-button")),
			chromedp.WaitVisible(chromedp.ID("stdout")),
			waitExited,
		)
		if out := text(t, a, "#stdout"); !strings.Contains(out, "<script>alert(2)</script>") {
			t.Errorf("command output = %q, want the script as text", out)
		}
		// The same output rendered by the server, once done.
		a.run(t, "reloading", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("stdout")))
		if out := text(t, a, "#stdout"); !strings.Contains(out, "<script>alert(2)</script>") {
			t.Errorf("command output rendered by the server = %q, want the script as text", out)
		}
		a.run(t, "listing files", chromedp.Navigate(sbxURL+"/files"), chromedp.WaitVisible(chromedp.ID("files")))
		if listing := text(t, a, "#files"); !strings.Contains(listing, hostile) {
			t.Errorf("file listing = %q, want the hostile name as text", listing)
		}
		a.run(t, "viewing the file", chromedp.Navigate(sbxURL+"/files/view?path="+url.QueryEscape(hostile)),
			chromedp.WaitVisible(chromedp.ID("file-name")))
		if title := get(t, a, "title", chromedp.Title()); !strings.Contains(title, hostile) {
			t.Errorf("title = %q, want the hostile name as text", title)
		}
		if n := a.alerts.Load(); n != 0 {
			t.Errorf("%d alert dialogs opened: sandbox output ran as script", n)
		}
		// Positive control: an alert the test raises itself is seen.
		get(t, a, "raising an alert", chromedp.Evaluate[any](`setTimeout(() => alert("control"), 0)`))
		testenv.Eventually(t, 5*time.Second, "the control alert is detected", func() bool { return a.alerts.Load() == 1 })
	})

	t.Run("previews", func(t *testing.T) {
		files := map[string][]byte{
			"data.csv":  []byte("name,score\nalice,42\n"),
			"readme.md": []byte("# Hello title\n\n<script>alert(4)</script>\n\nsome **bold** text\n"),
			"main.py":   []byte("def greet():\n    return 'hi'\n"),
			"doc.pdf":   testenv.PDF("dash", 1),
			"dot.png":   tinyPNG(),
		}
		for name, body := range files {
			if _, err := cA.WriteFile(ctx, sbxID, name, bytes.NewReader(body), 0); err != nil {
				t.Fatal(err)
			}
		}
		a.run(t, "previewing a CSV", chromedp.Navigate(sbxURL+"/files/view?path=data.csv"))
		if cell := text(t, a, "#preview tr:nth-child(2) td:first-child"); cell != "alice" {
			t.Errorf("CSV table cell = %q, want alice", cell)
		}
		a.run(t, "previewing Markdown", chromedp.Navigate(sbxURL+"/files/view?path=readme.md"), chromedp.WaitVisible(chromedp.CSS("#preview h1")))
		mdHTML := get(t, a, "reading the Markdown", chromedp.InnerHTML(chromedp.ID("preview")))
		if strings.Contains(strings.ToLower(mdHTML), "<script") || !strings.Contains(mdHTML, "Hello title") {
			t.Errorf("rendered Markdown = %q, want the title and no script", mdHTML)
		}
		if bold := text(t, a, "#preview strong"); bold != "bold" {
			t.Errorf("Markdown bold = %q, want bold", bold)
		}
		a.run(t, "previewing an image", chromedp.Navigate(sbxURL+"/files/view?path=dot.png"), chromedp.WaitVisible(chromedp.ID("preview")))
		testenv.Eventually(t, 10*time.Second, "the image preview loads", func() bool {
			return get(t, a, "reading the image's width", chromedp.Evaluate[int](`document.getElementById("preview").naturalWidth`)) == 3
		})
		a.run(t, "previewing Python", chromedp.Navigate(sbxURL+"/files/view?path=main.py"),
			chromedp.WaitVisible(chromedp.CSS("#preview .hljs-keyword")))
		if code := get(t, a, "reading the code", chromedp.OuterHTML(chromedp.ID("preview"))); !strings.Contains(code, `<span class="hljs-keyword">def</span>`) {
			t.Errorf("Python preview = %.300s, want highlighted keywords", code)
		}
		pdf := a.fetch(t, "/ui/sandboxes/"+sbxID+"/files/raw?path=doc.pdf&inline=1", "{}")
		if pdf.Status != 200 || pdf.ContentType != "application/pdf" || pdf.NoSniff != "nosniff" ||
			!strings.HasPrefix(pdf.Disposition, "inline") || !strings.Contains(pdf.CSP, "sandbox") {
			t.Errorf("PDF served as %+v, want 200 application/pdf inline, nosniff, a sandbox CSP", pdf)
		}
		// Sandbox HTML is never a page of the dashboard's origin.
		if _, err := cA.WriteFile(ctx, sbxID, "page.html", strings.NewReader("<script>alert(5)</script>"), 0); err != nil {
			t.Fatal(err)
		}
		html := a.fetch(t, "/ui/sandboxes/"+sbxID+"/files/raw?path=page.html&inline=1", "{}")
		if html.ContentType != "application/octet-stream" || !strings.HasPrefix(html.Disposition, "attachment") {
			t.Errorf("HTML file served as %q %q, want an attachment of application/octet-stream", html.ContentType, html.Disposition)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		a.run(t, "opening the sandbox", chromedp.Navigate(sbxURL))
		a.navigateBy(t, "opening a terminal", chromedp.Click(chromedp.ID("open-terminal")))
		// The shell computes 42: the typed line alone does not show it.
		a.run(t, "typing in the terminal",
			chromedp.WaitVisible(chromedp.CSS("#terminal .xterm-rows")),
			chromedp.Focus(chromedp.CSS("#terminal .xterm-helper-textarea")),
			// Text as an input method types it, then Enter as a key:
			// chromedp's SendKeys sends each character twice to xterm.js
			// (a keyDown with text, and a char event).
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				if _, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: "echo hi-$((6*7))"}); err != nil {
					return err
				}
				for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
					if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, input.DispatchKeyEventParams{
						Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13}); err != nil {
						return err
					}
				}
				return nil
			}),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := chromedp.Poll[bool](`document.querySelector("#terminal .xterm-rows").textContent.includes("hi-42")`,
					chromedp.WithPollingTimeout(10*time.Second))(ctx, tg)
				return err
			}),
		)
	})

	t.Run("upload, cancel, hibernate", func(t *testing.T) {
		local := t.TempDir() + "/notes.txt"
		if err := os.WriteFile(local, []byte("uploaded through the page"), 0o644); err != nil {
			t.Fatal(err)
		}
		a.run(t, "uploading",
			chromedp.Navigate(sbxURL+"/files"),
			chromedp.SetUploadFiles(chromedp.ID("upload-file"), []string{local}),
			chromedp.Submit(chromedp.ID("upload")),
			chromedp.WaitVisible(chromedp.Search(`//a[text()="notes.txt"]`)),
		)
		rc, err := cA.ReadFile(ctx, sbxID, "notes.txt")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != "uploaded through the page" {
			t.Errorf("uploaded file = %q", got)
		}

		a.run(t, "cancelling a command",
			chromedp.Navigate(sbxURL),
			chromedp.SendKeys(chromedp.ID("command"), "sleep 60"),
			chromedp.Click(chromedp.ID("run-button")),
			chromedp.WaitVisible(chromedp.ID("cancel")),
		)
		cmdURL := get(t, a, "location", chromedp.Location())
		a.navigateBy(t, "clicking cancel", chromedp.Click(chromedp.ID("cancel")))
		cid := cmdURL[strings.LastIndex(cmdURL, "/")+1:]
		testenv.Eventually(t, 10*time.Second, "the command is canceled", func() bool {
			c, err := cA.Command(ctx, sbxID, cid, client.CommandQuery{})
			return err == nil && c.Status == apitype.CommandCanceled
		})
		a.run(t, "reloading the command", chromedp.Navigate(cmdURL), chromedp.WaitVisible(chromedp.ID("command-status")))
		if st := text(t, a, "#command-status"); st != apitype.CommandCanceled {
			t.Errorf("command status after cancel = %q, want canceled", st)
		}

		a.run(t, "opening the sandbox", chromedp.Navigate(sbxURL))
		a.navigateBy(t, "hibernating", chromedp.Click(chromedp.ID("op-hibernate")))
		testenv.Eventually(t, 10*time.Second, "the sandbox hibernates", func() bool {
			sb, err := cA.GetSandbox(ctx, sbxID)
			return err == nil && sb.State == "hibernated"
		})
		a.run(t, "reloading the sandbox", chromedp.Navigate(sbxURL), chromedp.WaitVisible(chromedp.ID("sandbox-state")))
		if st := text(t, a, "#sandbox-state"); st != "hibernated" {
			t.Errorf("state after hibernate = %q, want hibernated", st)
		}
	})

	t.Run("jobs and system pages", func(t *testing.T) {
		a.run(t, "opening jobs", chromedp.Navigate(d.URL+"/ui/jobs"), chromedp.WaitVisible(chromedp.CSS("main h1")))
		// Either the actions with their health, or why jobs are off.
		if main := text(t, a, "main"); !strings.Contains(main, "Actions") && !strings.Contains(main, "Jobs are not available here") {
			t.Errorf("jobs page = %q, want the actions or why jobs are off", main)
		}
		a.run(t, "opening system", chromedp.Navigate(d.URL+"/ui/system"), chromedp.WaitVisible(chromedp.ID("runtimes")))
		if rts := text(t, a, "#runtimes"); !strings.Contains(rts, "process") {
			t.Errorf("system page runtimes = %q, want process", rts)
		}
		missing := a.fetch(t, "/ui/nothing-here", "{}")
		if missing.Status != 404 || !strings.Contains(missing.Body, "route_not_found") {
			t.Errorf("GET /ui/nothing-here = %d %s, want 404 route_not_found", missing.Status, missing.Body)
		}
	})

	t.Run("job submit and download", func(t *testing.T) {
		a.run(t, "opening jobs", chromedp.Navigate(d.URL+"/ui/jobs"), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if off := get(t, a, "reading", chromedp.Evaluate[bool](`!document.querySelector('select[name="action"] option[value="html-pdf"]:not([disabled])')`)); off {
			testenv.Missing(t, "html-pdf jobs are not available here: %.300s", text(t, a, "main"))
		}
		local := t.TempDir() + "/index.html"
		if err := os.WriteFile(local, []byte("<h1>dashboard job</h1>"), 0o644); err != nil {
			t.Fatal(err)
		}
		a.run(t, "filling the form",
			chromedp.SetValue(chromedp.CSS(`select[name="action"]`), "html-pdf"),
			chromedp.SetUploadFiles(chromedp.CSS(`#submit-job input[type="file"]`), []string{local}),
		)
		a.navigateBy(t, "submitting", chromedp.Submit(chromedp.ID("submit-job")))
		loc := get(t, a, "location", chromedp.Location())
		id := loc[strings.LastIndex(loc, "/")+1:]
		if !strings.HasPrefix(id, "job_") {
			t.Fatalf("after submitting the page is %s, want a job's", loc)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		job, err := cA.WaitJob(wctx, id)
		if err != nil || job.State != apitype.JobSucceeded || len(job.Outputs) != 1 {
			t.Fatalf("job %s = %+v, %v; want succeeded with one output", id, job, err)
		}
		a.run(t, "opening the job", chromedp.Navigate(loc), chromedp.WaitVisible(chromedp.CSS("#outputs a")))
		href := get(t, a, "reading the link", chromedp.Evaluate[string](`document.querySelector("#outputs a").getAttribute("href")`))
		out := a.fetch(t, href, "{}")
		if out.Status != 200 || !strings.HasPrefix(out.Disposition, "attachment") || !strings.HasPrefix(out.Body, "%PDF") {
			t.Errorf("job output = %d %q %.8q, want a PDF attachment", out.Status, out.Disposition, out.Body)
		}
	})

	t.Run("browser sessions and templates", func(t *testing.T) {
		a.run(t, "opening browsers", chromedp.Navigate(d.URL+"/ui/browsers"), chromedp.WaitVisible(chromedp.ID("open-browser")))
		if off := get(t, a, "reading", chromedp.Evaluate[bool](`!!document.getElementById("browsers-off")`)); off {
			testenv.Missing(t, "browser sessions are off here: %s", text(t, a, "#browsers-off"))
		}
		a.navigateBy(t, "opening a session", chromedp.Click(chromedp.CSS("#open-browser button")))
		a.run(t, "listing sessions", chromedp.WaitVisible(chromedp.ID("sessions")))
		list := text(t, a, "#sessions")
		i := strings.Index(list, "brs_")
		if i < 0 {
			t.Fatalf("sessions = %q, want a brs_ session", list)
		}
		id := strings.Fields(list[i:])[0]
		tok := get(t, a, "reading the token", chromedp.Value(chromedp.CSS(`#open-browser input[name="csrf"]`)))
		live := a.fetch(t, "/ui/browsers/"+id+"/live", `{method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: `+jsString("csrf="+tok)+`}`)
		if live.Status != 200 || !strings.Contains(live.URL, "/live/") || !strings.Contains(live.Body, "Berth live view") {
			t.Errorf("live view = %d at %s, want the live view page", live.Status, live.URL)
		}
		a.navigateBy(t, "closing the session", chromedp.Click(chromedp.CSS(`#sessions form[action$="/close"] button`)))
		a.run(t, "opening templates", chromedp.Navigate(d.URL+"/ui/templates"), chromedp.WaitVisible(chromedp.ID("templates")))
	})

	t.Run("csrf", func(t *testing.T) {
		a.run(t, "opening the sandbox", chromedp.Navigate(sbxURL))
		tok := get(t, a, "reading the token", chromedp.Value(chromedp.CSS(`#run input[name="csrf"]`)))
		post := func(body string) fetchResult {
			return a.fetch(t, "/ui/sandboxes/"+sbxID+"/commands",
				`{method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: `+jsString(body)+`}`)
		}
		refused := post("command=echo+refused")
		var e apitype.ErrorBody
		_ = json.Unmarshal([]byte(refused.Body), &e)
		if refused.Status != 403 || e.Error.Reason != "csrf_invalid" {
			t.Errorf("POST without the token = %d %s, want 403 csrf_invalid", refused.Status, refused.Body)
		}
		if wrong := post("command=echo+refused&csrf=" + strings.Repeat("A", len(tok))); wrong.Status != 403 {
			t.Errorf("POST with a wrong token = %d, want 403", wrong.Status)
		}
		// Positive control: the same request with the token runs.
		ok := post("command=echo+accepted&csrf=" + tok)
		if ok.Status != 200 || !strings.Contains(ok.URL, "/commands/cmd_") {
			t.Errorf("POST with the token = %d at %s, want the command's page", ok.Status, ok.URL)
		}

		// The session cookie: random, HttpOnly, Secure, SameSite=Strict.
		cookies, err := chromedp.Call(a.ctx, network.GetCookies, network.GetCookiesParams{})
		if err != nil {
			t.Fatal(err)
		}
		var sess *network.Cookie
		for _, c := range cookies.Cookies {
			if c.Name == "__Host-berth_session" {
				sess = c
			}
		}
		if sess == nil || !sess.HTTPOnly || !sess.Secure || sess.SameSite != network.CookieSameSiteStrict || sess.Value == keyA.Secret || len(sess.Value) < 40 {
			t.Fatalf("session cookie = %+v, want __Host-berth_session: random, HttpOnly, Secure, SameSite=Strict", sess)
		}
		// With the cookie and the token, a request from another origin
		// (a preview host is the same site as localhost) is refused; the
		// same request from the dashboard's origin is taken.
		origin := func(hdr map[string]string) int {
			req, _ := http.NewRequest(http.MethodPost, d.URL+"/ui/sandboxes/"+sbxID+"/commands",
				strings.NewReader(url.Values{"command": {"echo origin"}, "csrf": {tok}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(&http.Cookie{Name: sess.Name, Value: sess.Value})
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if got := origin(map[string]string{"Origin": "http://8000-" + sbxID + ".localhost:7070"}); got != 403 {
			t.Errorf("POST from another origin = %d, want 403", got)
		}
		if got := origin(map[string]string{"Sec-Fetch-Site": "same-site"}); got != 403 {
			t.Errorf("POST with Sec-Fetch-Site: same-site = %d, want 403", got)
		}
		if got := origin(map[string]string{"Origin": d.URL, "Sec-Fetch-Site": "same-origin"}); got != http.StatusSeeOther {
			t.Errorf("POST from the dashboard's origin = %d, want 303", got)
		}

		cmds, err := cA.Commands(ctx, sbxID)
		if err != nil {
			t.Fatal(err)
		}
		var ran []string
		for _, c := range cmds {
			ran = append(ran, c.Command)
		}
		if all := strings.Join(ran, "\n"); strings.Contains(all, "refused") || !strings.Contains(all, "echo accepted") {
			t.Errorf("commands run = %q, want echo accepted and nothing refused", ran)
		}
	})

	t.Run("tenant isolation", func(t *testing.T) {
		b := newBrowser(t, root)
		b.signIn(t, d.URL, keyB.Secret)
		if listB := text(t, b, "main"); strings.Contains(listB, sbxID) || strings.Contains(listB, "dash-one") {
			t.Errorf("tenant B's list shows tenant A's sandbox: %q", listB)
		}
		b.run(t, "opening A's sandbox", chromedp.Navigate(sbxURL))
		if detail := text(t, b, "main"); strings.Contains(detail, "Run a command") || !strings.Contains(detail, "sandbox_not_found") {
			t.Errorf("tenant B's view of A's sandbox = %q, want sandbox_not_found", detail)
		}
		// Positive control: A's own list shows it.
		a.run(t, "listing as tenant A", chromedp.Navigate(d.URL+"/ui/sandboxes"))
		if listA := text(t, a, "#sandboxes"); !strings.Contains(listA, sbxID) {
			t.Errorf("tenant A's list = %q, want its sandbox %s", listA, sbxID)
		}
	})

	t.Run("sign out", func(t *testing.T) {
		a.run(t, "signing out",
			chromedp.Click(chromedp.CSS(".signout button")),
			chromedp.WaitVisible(chromedp.ID("key")),
			chromedp.Navigate(d.URL+"/ui/sandboxes"),
			chromedp.WaitVisible(chromedp.ID("key")),
		)
		if loc := get(t, a, "location", chromedp.Location()); strings.Contains(loc, "/ui/") {
			t.Errorf("after sign-out /ui/sandboxes is at %s, want the sign-in page", loc)
		}
	})
}

// tenantKey creates tenant name and an execution key in it.
func tenantKey(t *testing.T, d *testenv.Daemon, name string) (apitype.Tenant, apitype.Key) {
	t.Helper()
	ctx := context.Background()
	ten, err := d.Client.CreateTenant(ctx, apitype.CreateTenantRequest{Name: name})
	if err != nil {
		t.Fatalf("CreateTenant(%s): %v", name, err)
	}
	k, err := d.Client.CreateKey(ctx, apitype.CreateKeyRequest{Name: name, Scope: auth.ScopeExecution, Tenant: name})
	if err != nil {
		t.Fatalf("CreateKey(%s): %v", name, err)
	}
	return ten, k
}

// tinyPNG is a 3x2 PNG.
func tinyPNG() []byte {
	var buf bytes.Buffer
	_ = png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 3, 2)))
	return buf.Bytes()
}
