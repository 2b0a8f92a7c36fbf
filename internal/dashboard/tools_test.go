package dashboard_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/dashboard"
	"github.com/berthdev/berth/internal/testenv"
)

// TestDashboardTools drives the keys, tenants and audit pages, the diff
// of two files, an XLSX preview and a job followed by its events, in real
// Chromium against the real daemon.
func TestDashboardTools(t *testing.T) {
	testenv.OnePass(t)
	d := testenv.StartDaemon(t, nil)
	root := startChromium(t)
	ctx := context.Background()
	admin := newBrowser(t, root)
	admin.signIn(t, d.URL, d.Token)

	var tenantID string
	t.Run("tenant created and its limit edited", func(t *testing.T) {
		admin.run(t, "opening tenants", chromedp.Navigate(d.URL+"/ui/tenants"), chromedp.WaitVisible(chromedp.ID("create-tenant")))
		admin.navigateBy(t, "creating a tenant",
			chromedp.SetValue(chromedp.ID("tenant-name"), "ten-one"),
			chromedp.SetValue(chromedp.CSS(`#create-tenant input[name="max_sandboxes"]`), "3"),
			chromedp.Submit(chromedp.ID("create-tenant")),
		)
		admin.run(t, "the tenant's page", chromedp.WaitVisible(chromedp.ID("tenant-usage")))
		tenantID = text(t, admin, "#tenant-id")
		if row := text(t, admin, "#tenant-usage tbody tr:first-child"); !strings.Contains(row, "3") {
			t.Errorf("tenant usage row = %q, want the limit 3", row)
		}
		admin.navigateBy(t, "editing the limit",
			chromedp.SetValue(chromedp.CSS(`#edit-tenant input[name="max_sandboxes"]`), "5"),
			chromedp.Submit(chromedp.ID("edit-tenant")),
		)
		ten, err := d.Client.GetTenant(ctx, tenantID)
		if err != nil || ten.Limits.MaxSandboxes != 5 {
			t.Errorf("tenant after the edit = %+v, %v; want max_sandboxes 5", ten.Limits, err)
		}
		admin.run(t, "the list", chromedp.Navigate(d.URL+"/ui/tenants"), chromedp.WaitVisible(chromedp.ID("tenants")))
		if list := text(t, admin, "#tenants"); !strings.Contains(list, "ten-one") || !strings.Contains(list, "0 / 5") {
			t.Errorf("tenants list = %q, want ten-one with 0 / 5 sandboxes", list)
		}
	})

	var secret string
	t.Run("a key's secret is shown once", func(t *testing.T) {
		admin.run(t, "opening keys", chromedp.Navigate(d.URL+"/ui/keys"), chromedp.WaitVisible(chromedp.ID("create-key")))
		admin.navigateBy(t, "creating a key",
			chromedp.SetValue(chromedp.ID("key-name"), "made-in-page"),
			chromedp.SetValue(chromedp.ID("key-scope"), "execution"),
			chromedp.SetValue(chromedp.ID("key-tenant"), "ten-one"),
			chromedp.Submit(chromedp.ID("create-key")),
		)
		admin.run(t, "the new key", chromedp.WaitVisible(chromedp.ID("key-secret")))
		secret = text(t, admin, "#key-secret")
		if !strings.HasPrefix(secret, auth.KeyPrefix) {
			t.Fatalf("the page shows secret %q, want a %s key", secret, auth.KeyPrefix)
		}
		if loc := get(t, admin, "location", chromedp.Location()); strings.Contains(loc, secret) {
			t.Errorf("the secret is in the URL %s", loc)
		}
		if _, err := client.New(d.URL, secret).System(ctx); err != nil {
			t.Errorf("the shown secret is not a working key: %v", err)
		}
		admin.run(t, "reloading", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("secret-gone")))
		if html := get(t, admin, "page", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, secret) {
			t.Error("the reloaded key page still shows the secret")
		}
		admin.run(t, "the list", chromedp.Navigate(d.URL+"/ui/keys"), chromedp.WaitVisible(chromedp.ID("keys")))
		if html := get(t, admin, "page", chromedp.OuterHTML(chromedp.CSS("html"))); !strings.Contains(html, "made-in-page") || strings.Contains(html, secret) {
			t.Errorf("keys list: want made-in-page listed without its secret")
		}
		// Creating a key without the form's CSRF token is refused and
		// makes nothing (the form above, with it, is the control).
		refused := admin.fetch(t, "/ui/keys", `{method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "name=forged&scope=admin"}`)
		if refused.Status != 403 || !strings.Contains(refused.Body, "csrf_invalid") {
			t.Errorf("POST /ui/keys without the token = %d %.200s, want 403 csrf_invalid", refused.Status, refused.Body)
		}
		keys, err := d.Client.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.Name == "forged" {
				t.Errorf("a key was made without the CSRF token: %+v", k)
			}
		}
	})
	if secret == "" {
		t.Fatal("no tenant key")
	}

	t.Run("a tenant's key sees no keys", func(t *testing.T) {
		ten := newBrowser(t, root)
		ten.signIn(t, d.URL, secret)
		for _, page := range []string{"/ui/keys", "/ui/tenants"} {
			ten.run(t, "opening "+page, chromedp.Navigate(d.URL+page), chromedp.WaitVisible(chromedp.ID("admin-refused")))
			if msg := text(t, ten, "#admin-refused"); !strings.Contains(msg, "admin") {
				t.Errorf("%s refusal = %q, want the API's admin-only message", page, msg)
			}
			if main := text(t, ten, "main"); strings.Contains(main, "made-in-page") || strings.Contains(main, "ten-one") {
				t.Errorf("a tenant's %s shows admin data: %q", page, main)
			}
		}
		// The control: the admin sees both.
		admin.run(t, "admin keys", chromedp.Navigate(d.URL+"/ui/keys"), chromedp.WaitVisible(chromedp.ID("keys")))
		if main := text(t, admin, "#keys"); !strings.Contains(main, "made-in-page") {
			t.Errorf("admin keys page = %q, want made-in-page", main)
		}
		admin.run(t, "audit", chromedp.Navigate(d.URL+"/ui/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
		if log := text(t, admin, "#audit"); !strings.Contains(log, "POST /v1/keys") || !strings.Contains(log, "PATCH /v1/tenants/{id}") {
			t.Errorf("audit page = %.500q, want the key's and the tenant's calls", log)
		}
	})

	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "tools"})
	if err != nil {
		t.Fatal(err)
	}
	sbxURL := d.URL + "/ui/sandboxes/" + sb.ID
	write := func(t *testing.T, name string, body []byte) {
		t.Helper()
		if _, err := d.Client.WriteFile(ctx, sb.ID, name, bytes.NewReader(body), 0); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("diff", func(t *testing.T) {
		write(t, "old.txt", []byte("one\ntwo\nremoved line\nthree\n<b>four</b>\n"))
		write(t, "new.txt", []byte("one\ntwo\nthree\nadded line\n<b>four</b>\n"))
		admin.run(t, "opening files", chromedp.Navigate(sbxURL+"/files"), chromedp.WaitVisible(chromedp.ID("compare")))
		admin.navigateBy(t, "comparing",
			chromedp.SetValue(chromedp.ID("diff-a"), "old.txt"),
			chromedp.SetValue(chromedp.ID("diff-b"), "new.txt"),
			chromedp.Submit(chromedp.ID("compare")),
		)
		admin.run(t, "the diff", chromedp.WaitVisible(chromedp.ID("diff")))
		if got := text(t, admin, "#diff .diff-add"); got != "+added line" {
			t.Errorf("added line = %q, want +added line", got)
		}
		if got := text(t, admin, "#diff .diff-del"); got != "-removed line" {
			t.Errorf("removed line = %q, want -removed line", got)
		}
		if got := text(t, admin, "#diff"); !strings.Contains(got, " <b>four</b>") {
			t.Errorf("diff = %q, want the markup as text", got)
		}
	})

	t.Run("xlsx", func(t *testing.T) {
		write(t, "book.xlsx", dashboard.MakeXLSX(t, "Scores",
			`<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row><row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2"><v>42</v></c></row>`,
			"name", "score", "alice"))
		admin.run(t, "previewing", chromedp.Navigate(sbxURL+"/files/view?path=book.xlsx"), chromedp.WaitVisible(chromedp.ID("sheet-name")))
		if cell := text(t, admin, "#preview tr:nth-child(2) td:first-child"); cell != "alice" {
			t.Errorf("XLSX cell A2 = %q, want alice", cell)
		}
		if cell := text(t, admin, "#preview tr:nth-child(2) td:nth-child(2)"); cell != "42" {
			t.Errorf("XLSX cell B2 = %q, want 42", cell)
		}
		write(t, "broken.xlsx", []byte("PK\x03\x04 this is not a workbook"))
		admin.run(t, "previewing a broken one", chromedp.Navigate(sbxURL+"/files/view?path=broken.xlsx"), chromedp.WaitVisible(chromedp.ID("preview")))
		if msg := text(t, admin, "#preview"); !strings.Contains(msg, "not a valid XLSX") {
			t.Errorf("a corrupt XLSX's preview = %q, want not a valid XLSX", msg)
		}
	})

	t.Run("a job's page follows its events", func(t *testing.T) {
		if a, err := d.Client.Action(ctx, "html-pdf"); err != nil || !a.Available {
			testenv.Missing(t, "html-pdf jobs are not available here: %+v %v", a, err)
		}
		ref, err := d.Client.UploadFile(ctx, strings.NewReader("<h1>followed</h1>"), "index.html")
		if err != nil {
			t.Fatal(err)
		}
		job, err := d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf", Inputs: map[string]apitype.JobInput{"index.html": {SHA256: ref.SHA256}}})
		if err != nil {
			t.Fatal(err)
		}
		admin.run(t, "opening the job", chromedp.Navigate(d.URL+"/ui/jobs/"+job.ID), chromedp.WaitVisible(chromedp.ID("job-state")))
		following := get(t, admin, "reading", chromedp.Evaluate[bool](`!!document.getElementById("job-state").dataset.events`))
		if !following {
			t.Fatalf("the job had finished before its page loaded (%s): nothing to follow", text(t, admin, "#job-state"))
		}
		// A mark on the page: a reload would drop it, so a page that
		// shows the end with the mark got there by events.
		get(t, admin, "marking", chromedp.Evaluate[bool](`window.followMark = true`))
		wctx, cancel := context.WithTimeout(admin.ctx, 90*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.getElementById("job-state").dataset.ended === "1"`, chromedp.WithPollingTimeout(90*time.Second))(ctx, tg)
			return err
		})); err != nil {
			admin.fatal(t, "waiting for the job's end", err)
		}
		if st := text(t, admin, "#job-state-name"); st != apitype.JobSucceeded {
			t.Errorf("job state on the page = %q, want succeeded", st)
		}
		if pct := text(t, admin, "#job-percent"); pct != "100%" {
			t.Errorf("job progress on the page = %q, want 100%%", pct)
		}
		if marked := get(t, admin, "reading", chromedp.Evaluate[bool](`window.followMark === true`)); !marked {
			t.Error("the page reloaded instead of following events")
		}
		if out := text(t, admin, "#outputs"); !strings.Contains(out, "application/pdf") {
			t.Errorf("outputs after the end = %q, want the PDF", out)
		}
	})
}
