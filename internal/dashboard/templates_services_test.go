package dashboard_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestDashboardTemplatesAndPreviews drives the last pages of the
// dashboard in real Chromium against the real daemon (with preview hosts
// under localhost): building a template from its form, following the
// build and deleting it, a read key's refusal; a service started from the
// sandbox page and its preview on its own host; a diff from a file's
// preview; a table cut by columns; the system page's doctor part.
func TestDashboardTemplatesAndPreviews(t *testing.T) {
	testenv.OnePass(t)
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.PreviewDomain = "localhost" })
	root := startChromium(t)
	ctx := context.Background()
	c := d.Client
	a := newBrowser(t, root)
	a.signIn(t, d.URL, d.Token)

	sys, err := c.System(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("system page says what doctor reads", func(t *testing.T) {
		a.run(t, "opening system", chromedp.Navigate(d.URL+"/ui/system"), chromedp.WaitVisible(chromedp.ID("doctor-note")))
		if note := text(t, a, "#doctor-note"); !strings.Contains(note, "berth doctor") || !strings.Contains(note, "CLI") {
			t.Errorf("doctor note = %q, want it to say the host checks are the CLI's", note)
		}
		if rts := text(t, a, "#runtimes"); !strings.Contains(rts, "process") {
			t.Errorf("runtimes = %q, want process", rts)
		}
		// Each action's health, or why the actions cannot be read.
		if got := get(t, a, "reading actions", chromedp.Evaluate[bool](`!!(document.getElementById("doctor-actions") || document.getElementById("actions-off"))`)); !got {
			t.Error("the system page shows neither the actions' health nor why not")
		}
	})

	t.Run("a file's preview links a diff; a table cut by columns says so", func(t *testing.T) {
		sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "diffs"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
		var wide strings.Builder
		for row := range 2 {
			for col := range 105 {
				if col > 0 {
					wide.WriteByte(',')
				}
				fmt.Fprintf(&wide, "r%dc%d", row, col)
			}
			wide.WriteByte('\n')
		}
		for name, body := range map[string]string{"one.txt": "alpha\nbeta\ngamma\n", "two.txt": "alpha\nBETA\ngamma\n", "wide.csv": wide.String(), "narrow.csv": "a,b\n1,2\n"} {
			if _, err := c.WriteFile(ctx, sb.ID, name, strings.NewReader(body), 0); err != nil {
				t.Fatal(err)
			}
		}
		sbx := d.URL + "/ui/sandboxes/" + sb.ID
		a.run(t, "previewing one.txt", chromedp.Navigate(sbx+"/files/view?path=one.txt"), chromedp.WaitVisible(chromedp.ID("diff-with")))
		a.navigateBy(t, "comparing with two.txt",
			chromedp.SetValue(chromedp.ID("diff-with-path"), "two.txt"),
			chromedp.Submit(chromedp.ID("diff-with")))
		a.run(t, "the diff", chromedp.WaitVisible(chromedp.ID("diff")))
		if del, add := text(t, a, "#diff .diff-del"), text(t, a, "#diff .diff-add"); !strings.Contains(del, "beta") || !strings.Contains(add, "BETA") {
			t.Errorf("diff from the preview: removed %q, added %q; want beta and BETA", del, add)
		}
		a.run(t, "previewing wide.csv", chromedp.Navigate(sbx+"/files/view?path=wide.csv"), chromedp.WaitVisible(chromedp.ID("table-cut")))
		if note := text(t, a, "#table-cut"); note != "Only the first 100 columns are shown." {
			t.Errorf("cut note = %q, want the columns named (no row was cut)", note)
		}
		if cells := get(t, a, "counting cells", chromedp.Evaluate[int](`document.querySelectorAll("#preview tr:first-child td").length`)); cells != 100 {
			t.Errorf("first row has %d cells, want 100", cells)
		}
		// The control: a table cut by nothing has no note.
		a.run(t, "previewing a narrow table", chromedp.Navigate(sbx+"/files/view?path=narrow.csv"), chromedp.WaitVisible(chromedp.ID("preview")))
		if cut := get(t, a, "reading", chromedp.Evaluate[bool](`!!document.getElementById("table-cut")`)); cut {
			t.Errorf("a whole table says %q", text(t, a, "#table-cut"))
		}
	})

	t.Run("a service started from the page opens on its preview host", func(t *testing.T) {
		testenv.NeedCommand(t, "python3")
		sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "served"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
		if _, err := c.WriteFile(ctx, sb.ID, "served-by-python.txt", strings.NewReader("hello"), 0); err != nil {
			t.Fatal(err)
		}
		port := testenv.FreePort(t)
		sbx := d.URL + "/ui/sandboxes/" + sb.ID
		a.run(t, "opening the sandbox", chromedp.Navigate(sbx), chromedp.WaitVisible(chromedp.ID("start-service")))
		a.navigateBy(t, "starting a service",
			chromedp.SetValue(chromedp.ID("service-name"), "web"),
			chromedp.SetValue(chromedp.ID("service-command"), "python3 -m http.server "+strconv.Itoa(port)),
			chromedp.SetValue(chromedp.ID("service-port"), strconv.Itoa(port)),
			chromedp.Submit(chromedp.ID("start-service")))
		var last apitype.Service
		defer func() {
			if t.Failed() {
				logs, _ := c.ServiceLogs(ctx, sb.ID, "web", client.LogQuery{})
				t.Logf("service: %+v; log %+v", last, logs)
			}
		}()
		testenv.Eventually(t, 30*time.Second, "the service to be ready", func() bool {
			s, err := c.Service(ctx, sb.ID, "web")
			last = s
			return err == nil && s.Ready
		})
		a.run(t, "reloading", chromedp.Navigate(sbx), chromedp.WaitVisible(chromedp.ID("start-service")))
		if svcs := text(t, a, "#services"); !strings.Contains(svcs, "web") || !strings.Contains(svcs, "(ready)") {
			t.Errorf("services = %q, want web (ready)", svcs)
		}
		link := fmt.Sprintf(`a[href="/ui/sandboxes/%s/previews/%d"]`, sb.ID, port)
		if target := get(t, a, "the preview link", chromedp.Evaluate[string](`document.querySelector(`+jsString(link)+`).target`)); target != "_blank" {
			t.Errorf("preview link target = %q, want _blank", target)
		}
		a.run(t, "opening the preview", chromedp.Navigate(d.URL+fmt.Sprintf("/ui/sandboxes/%s/previews/%d", sb.ID, port)),
			chromedp.WaitVisible(chromedp.CSS("body")))
		testenv.Eventually(t, 20*time.Second, "the app's page", func() bool {
			body, err := chromedp.Run(a.ctx, chromedp.Text(chromedp.CSS("body")))
			return err == nil && strings.Contains(body, "served-by-python.txt")
		})
		loc, err := url.Parse(get(t, a, "location", chromedp.Location()))
		if err != nil {
			t.Fatal(err)
		}
		dash, _ := url.Parse(d.URL)
		if want := fmt.Sprintf("%d-", port); !strings.HasPrefix(loc.Hostname(), want) || !strings.HasSuffix(loc.Hostname(), ".localhost") || loc.Host == dash.Host {
			t.Errorf("the preview opened at %s, want its own host %s...localhost, not the dashboard's %s", loc, want, dash.Host)
		}
	})

	t.Run("a template built from the page, followed and deleted", func(t *testing.T) {
		isolated := false
		for _, rt := range sys.Runtimes {
			isolated = isolated || (rt.Available && rt.Isolated)
		}
		if !isolated {
			testenv.Missing(t, "templates need an isolated runtime: %+v", sys.Runtimes)
		}
		// A read key's build is refused with the API's message, and
		// nothing is built (the admin's build below is the control).
		ten, err := c.CreateTenant(ctx, apitype.CreateTenantRequest{Name: "readers"})
		if err != nil {
			t.Fatal(err)
		}
		rk, err := c.CreateKey(ctx, apitype.CreateKeyRequest{Name: "reader", Scope: auth.ScopeRead, Tenant: ten.ID})
		if err != nil {
			t.Fatal(err)
		}
		r := newBrowser(t, root)
		r.signIn(t, d.URL, rk.Secret)
		r.run(t, "opening templates", chromedp.Navigate(d.URL+"/ui/templates"), chromedp.WaitVisible(chromedp.ID("build-template")))
		r.navigateBy(t, "building as a reader",
			chromedp.SetValue(chromedp.ID("template-build-name"), "not-built"),
			chromedp.SetValue(chromedp.ID("template-steps"), "true"),
			chromedp.Submit(chromedp.ID("build-template")))
		r.run(t, "the refusal", chromedp.WaitVisible(chromedp.ID("error-message")))
		if reason, msg := text(t, r, "#error-reason"), text(t, r, "#error-message"); reason != "scope_insufficient" || !strings.Contains(msg, "execution key") {
			t.Errorf("a reader's build shows %s %q, want the API's refusal scope_insufficient", reason, msg)
		}
		if _, err := c.Template(ctx, "not-built"); !errcode.Has(err, errcode.TemplateNotFound) {
			t.Errorf("template after a reader's build: %v, want template_not_found", err)
		}

		a.run(t, "opening templates", chromedp.Navigate(d.URL+"/ui/templates"), chromedp.WaitVisible(chromedp.ID("build-template")))
		a.navigateBy(t, "building",
			chromedp.SetValue(chromedp.ID("template-build-name"), "dash-built"),
			chromedp.SetValue(chromedp.ID("template-steps"), "echo step-ran-in-build\necho hi > greeting.txt"),
			chromedp.SetValue(chromedp.ID("template-env"), "GREETING=hi"),
			chromedp.Submit(chromedp.ID("build-template")))
		if name := text(t, a, "#template-name"); name != "dash-built" {
			t.Fatalf("build answered the page of %q, want dash-built", name)
		}
		// The page follows the build by reloading itself until it ends.
		testenv.Eventually(t, 90*time.Second, "the page to show the build's end", func() bool {
			st, err := chromedp.Run(a.ctx, chromedp.Evaluate[string](`(document.getElementById("template-state") || {}).textContent || ""`))
			return err == nil && (st == apitype.TemplateReady || st == apitype.TemplateFailed)
		})
		a.run(t, "the built template", chromedp.WaitVisible(chromedp.ID("build-log")))
		if st := text(t, a, "#template-state"); st != apitype.TemplateReady {
			t.Fatalf("template state = %q (%s), want ready", st, text(t, a, "main"))
		}
		if log := text(t, a, "#build-log"); !strings.Contains(log, "step-ran-in-build") {
			t.Errorf("build log = %q, want the step's output", log)
		}
		if tpl, err := c.Template(ctx, "dash-built"); err != nil || !tpl.Seed || tpl.Env["GREETING"] != "hi" {
			t.Errorf("template through the API = %+v, %v; want a seed and GREETING=hi", tpl, err)
		}
		a.run(t, "the list", chromedp.Navigate(d.URL+"/ui/templates"), chromedp.WaitVisible(chromedp.ID("templates")))
		if list := text(t, a, "#templates"); !strings.Contains(list, "dash-built") {
			t.Errorf("templates = %q, want dash-built", list)
		}
		a.run(t, "its page", chromedp.Navigate(d.URL+"/ui/templates/dash-built"), chromedp.WaitVisible(chromedp.ID("delete-template")))
		a.navigateBy(t, "deleting", chromedp.Submit(chromedp.ID("delete-template")))
		a.run(t, "back on the list", chromedp.WaitVisible(chromedp.ID("templates")))
		if _, err := c.Template(ctx, "dash-built"); !errcode.Has(err, errcode.TemplateNotFound) {
			t.Errorf("template after the delete: %v, want template_not_found", err)
		}
	})
}
