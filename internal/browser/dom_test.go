// The tests of the page-understanding layer drive a real Chromium over CDP
// against pages served from testdata. They live in package browser_test
// because internal/testenv imports the daemon, which imports this package.
package browser_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

func init() {
	// Other tests of the package may define -update too; share it.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// chromiumPath finds Debian's Chromium, the headless shell first.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium-headless-shell", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if p := "/usr/bin/" + name; fileExists(p) {
			return p
		}
	}
	testenv.Missing(t, "chromium (Debian's chromium-headless-shell or chromium) is not installed")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startBrowser starts a Chromium for the test, stopped at cleanup, and
// returns its browser context.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1280, 800),
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
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(bctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("starting Chromium: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Chromium did not start within 60s")
	}
	return bctx
}

// page is a tab of the test browser, its DOM, and the test server.
type page struct {
	t   *testing.T
	ctx context.Context // the tab, with the test's deadline
	dom *browser.DOM
	srv string
}

// newPage opens a tab on the browser and navigates it to path on a server
// of testdata.
func newPage(t *testing.T, bctx context.Context, srv *httptest.Server, path string) *page {
	t.Helper()
	tctx, cancelTab := chromedp.NewContext(bctx)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tctx); err != nil { // opens the tab; no deadline, as above
		t.Fatalf("opening a tab: %v", err)
	}
	ctx, cancel := context.WithTimeout(tctx, 60*time.Second)
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx, dom: browser.NewDOM(), srv: srv.URL}
	if path != "" {
		p.navigate(path)
	}
	return p
}

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir("testdata")))
	t.Cleanup(srv.Close)
	return srv
}

func (p *page) navigate(path string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Navigate(p.srv+"/"+path)); err != nil {
		p.t.Fatalf("navigating to %s: %v", path, err)
	}
}

func (p *page) snapshot(opts browser.SnapshotOptions) browser.Snapshot {
	p.t.Helper()
	s, err := p.dom.Snapshot(p.ctx, opts)
	if err != nil {
		p.t.Fatalf("Snapshot: %v", err)
	}
	return s
}

// eval runs JavaScript in the page's main world.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// refOf returns the ref of the line "- role "name" ... [ref=X]" of a
// snapshot, or fails.
func refOf(t *testing.T, yaml, role, name string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*- ` + regexp.QuoteMeta(role) + ` ` + regexp.QuoteMeta(fmt.Sprintf("%q", name)) + `.*\[ref=([a-z0-9]+)\]`)
	m := re.FindStringSubmatch(yaml)
	if m == nil {
		t.Fatalf("no ref for %s %q in:\n%s", role, name, yaml)
	}
	return m[1]
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if updating() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to write it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("snapshot of %s differs from %s (-want +got):\n%s", name, path, diff)
	}
}

func TestSnapshotGolden(t *testing.T) {
	t.Parallel()
	bctx := startBrowser(t)
	srv := newServer(t)
	for _, name := range []string{"form", "frames"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := newPage(t, bctx, srv, name+".html")
			s := p.snapshot(browser.SnapshotOptions{})
			if s.Truncated {
				t.Errorf("Snapshot(%s).Truncated = true, want false", name)
			}
			if s.URL != srv.URL+"/"+name+".html" {
				t.Errorf("Snapshot(%s).URL = %q, want %q", name, s.URL, srv.URL+"/"+name+".html")
			}
			if got := strings.Count(s.YAML, "[ref="); s.Refs != got {
				t.Errorf("Snapshot(%s).Refs = %d, want %d (refs in the YAML)", name, s.Refs, got)
			}
			yaml := strings.ReplaceAll(s.YAML, srv.URL, "http://SERVER")
			checkGolden(t, name, "# title: "+s.Title+"\n"+yaml)
		})
	}
}

// TestSnapshotContent checks what the golden files show, so that an -update
// cannot bless a regression unnoticed.
func TestSnapshotContent(t *testing.T) {
	t.Parallel()
	bctx := startBrowser(t)
	srv := newServer(t)
	p := newPage(t, bctx, srv, "form.html")
	form := p.snapshot(browser.SnapshotOptions{}).YAML
	p.navigate("frames.html")
	frames := p.snapshot(browser.SnapshotOptions{}).YAML
	for _, tc := range []struct {
		yaml string
		re   string
	}{
		{form, `(?m)^- banner:$`},
		{form, `(?m)^  - navigation "Main":$`},
		{form, `- heading "Create your account" \[level=1\]\n`},
		{form, `- heading "Profile" \[level=2\]\n`},
		{form, `- heading "Terms" \[level=3\]\n`},
		{form, `- link "Docs" \[ref=e\d+\]:\n\s+- /url: ` + regexp.QuoteMeta(srv.URL) + `/docs/\n`},
		{form, `- link "Blog" \[ref=e\d+\]:\n\s+- /url: https://example.com/blog\?tab=new\n`},
		{form, `- textbox "Email" \[required\] \[ref=e\d+\]: alice@example.com\n`},
		{form, `- textbox "Password" \[ref=e\d+\]\n`}, // no value shown
		{form, `- textbox "Nickname" \[ref=e\d+\]\n`},
		{form, `- searchbox "Find a team" \[ref=e\d+\]\n`},
		{form, `- checkbox "Remember me" \[checked\] \[ref=e\d+\]\n`},
		{form, `- checkbox "Send me news" \[ref=e\d+\]\n`},
		{form, `- group "Plan":\n\s+- radio "Free" \[checked\] \[ref=e\d+\]\n\s+- radio "Pro" \[ref=e\d+\]\n`},
		{form, `- combobox "Country" \[ref=e\d+\]:\n\s+- option "France"\n\s+- option "Germany" \[selected\]\n`},
		{form, `- textbox "Bio" \[ref=e\d+\]: Hello there\n`},
		{form, `- button "Continue" \[disabled\] \[ref=e\d+\]\n`},
		{form, `- button "Close" \[ref=e\d+\]\n`},
		{form, `- button "Save draft" \[ref=e\d+\]\n`},
		{form, `- img "Team photo"\n`},
		{form, `- text: Shown again\n`},
		{form, `- listitem: Two items\n`},
		{form, `- table "Prices":\n`},
		{form, `- columnheader "Plan"\n`},
		{form, `- cell "Pro"\n`},
		{form, `- button "Custom action" \[ref=e\d+\]\n`},
		{form, `- tab "General" \[selected\] \[ref=e\d+\]\n`},
		{form, `- button "Filters" \[expanded\] \[pressed\] \[ref=e\d+\]\n`},
		{form, `- slider "Volume" \[ref=e\d+\]: "30"\n|- slider "Volume" \[ref=e\d+\]: 30\n`},
		{form, `- textbox "Notes" \[ref=e\d+\]: Draft notes\n`},
		{form, `- text: Deeply wrapped text\n`},
		{form, `- generic \[ref=e\d+\]: Clickable span\n`},
		{form, `- button "Search" \[ref=e\d+\]\n`},
		{form, `- generic "Dismiss" \[ref=e\d+\]: x\n`},
		{form, `- img "Status: ok"\n`},
		{form, `(?m)^- contentinfo: Made with Berth$`},
		{frames, `- button "Top button" \[ref=e\d+\]\n`},
		{frames, `- iframe "Outer frame":\n\s+- paragraph: Outer frame text\n\s+- textbox "Card number" \[ref=f1e\d+\]\n\s+- iframe "Inner frame":\n\s+- paragraph: Inner frame text\n\s+- button "Pay now" \[ref=f2e\d+\]\n`},
		{frames, `- paragraph: In the shadow\n- button "Shadow button" \[ref=e\d+\]\n- text: Slotted text\n`},
		{frames, `- iframe "Elsewhere" \[cross-origin\]\n`},
	} {
		if !regexp.MustCompile(tc.re).MatchString(tc.yaml) {
			t.Errorf("snapshot does not match %s:\n%s", tc.re, tc.yaml)
		}
	}
	for _, hidden := range []string{"Hidden by display", "Hidden by visibility", "Hidden from ARIA", "Hidden attribute", "Collapsed away", "Be nice", "secret"} {
		if strings.Contains(form, hidden) {
			t.Errorf("snapshot shows %q, which is hidden:\n%s", hidden, form)
		}
	}
}

func TestSnapshotBlankTab(t *testing.T) {
	t.Parallel()
	bctx := startBrowser(t)
	p := newPage(t, bctx, newServer(t), "")
	s := p.snapshot(browser.SnapshotOptions{})
	if s.URL != "about:blank" || s.YAML != "" || s.Refs != 0 || s.Truncated {
		t.Errorf("Snapshot(new tab) = %+v, want an empty snapshot of about:blank", s)
	}
	_, err := p.dom.Locate(p.ctx, browser.Target{By: "role", Role: "button"})
	wantErr(t, "Locate(new tab)", err, errcode.NotFound, "target_not_found", "role button")
}

func TestSnapshotBounds(t *testing.T) {
	t.Parallel()
	bctx := startBrowser(t)
	srv := newServer(t)
	p := newPage(t, bctx, srv, "form.html")
	for _, tc := range []struct {
		name string
		opts browser.SnapshotOptions
	}{
		{"bytes", browser.SnapshotOptions{MaxBytes: 300}},
		{"elements", browser.SnapshotOptions{MaxElements: 5}},
		{"depth", browser.SnapshotOptions{MaxDepth: 1}},
	} {
		s := p.snapshot(tc.opts)
		t.Logf("%s:\n%s", tc.name, s.YAML)
		if !s.Truncated || !strings.HasSuffix("\n"+s.YAML, "\n- truncated\n") {
			t.Errorf("%s: Snapshot(%+v) = truncated %t, YAML:\n%s\nwant truncated, ending with - truncated", tc.name, tc.opts, s.Truncated, s.YAML)
		}
		if tc.opts.MaxBytes > 0 && len(s.YAML) > tc.opts.MaxBytes {
			t.Errorf("%s: Snapshot(%+v) is %d bytes, want at most %d", tc.name, tc.opts, len(s.YAML), tc.opts.MaxBytes)
		}
		if tc.opts.MaxDepth == 1 && strings.Contains(s.YAML, "\n  ") {
			t.Errorf("%s: Snapshot(%+v) nests deeper than 1:\n%s", tc.name, tc.opts, s.YAML)
		}
		if got := strings.Count(s.YAML, "[ref="); s.Refs != got {
			t.Errorf("%s: Snapshot(%+v).Refs = %d, want %d (refs in the YAML)", tc.name, tc.opts, s.Refs, got)
		}
	}
}

func TestSnapshotLargeTable(t *testing.T) {
	t.Parallel()
	bctx := startBrowser(t)
	srv := newServer(t)
	p := newPage(t, bctx, srv, "table.html?rows=1500")
	if n := eval[int](p, `document.querySelectorAll('#people tbody tr').length`); n != 1500 {
		t.Fatalf("the table has %d rows, want 1500", n)
	}

	small := p.snapshot(browser.SnapshotOptions{MaxElements: 500})
	if !small.Truncated || !strings.HasSuffix(small.YAML, "- truncated\n") {
		t.Errorf("Snapshot(MaxElements 500).Truncated = %t, want true and a final - truncated line", small.Truncated)
	}
	nodes := 0
	for _, line := range strings.Split(small.YAML, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "- /url:") && !strings.HasPrefix(line, "- text:") && line != "- truncated" {
			nodes++
		}
	}
	if nodes > 500 {
		t.Errorf("Snapshot(MaxElements 500) has %d nodes, want at most 500", nodes)
	}

	start := time.Now()
	full := p.snapshot(browser.SnapshotOptions{MaxElements: 100_000, MaxBytes: 8 << 20})
	took := time.Since(start)
	t.Logf("snapshot of a 1,500-row table: %s, %d bytes, %d refs", took, len(full.YAML), full.Refs)
	if full.Truncated {
		t.Errorf("Snapshot(generous bounds).Truncated = true, want false")
	}
	if full.Refs != 1500 {
		t.Errorf("Snapshot(generous bounds).Refs = %d, want 1500 (one Edit link a row)", full.Refs)
	}
	if !strings.Contains(full.YAML, `- cell "Person 1499"`) {
		t.Errorf("Snapshot(generous bounds) lacks the last row")
	}
	start = time.Now()
	again := p.snapshot(browser.SnapshotOptions{MaxElements: 100_000, MaxBytes: 8 << 20})
	t.Logf("again (refs reused): %s", time.Since(start))
	if again.YAML != full.YAML {
		t.Errorf("a second snapshot of the unchanged table differs from the first")
	}

	// Semantic locators over the whole table.
	start = time.Now()
	el, err := p.dom.Locate(p.ctx, browser.Target{By: "text", Value: "p1499@example.com", Exact: true})
	t.Logf("Locate by text on the table: %s", time.Since(start))
	if err != nil || el.Tag != "td" {
		t.Errorf("Locate(text p1499@example.com) = %+v, %v; want its cell", el, err)
	}
	start = time.Now()
	n, err := p.dom.Count(p.ctx, browser.Target{By: "role", Role: "link", Name: "Edit"})
	t.Logf("Count by role on the table: %s", time.Since(start))
	if err != nil || n != 1500 {
		t.Errorf("Count(role link Edit) = %d, %v; want 1500", n, err)
	}
}

func TestRefs(t *testing.T) {
	t.Parallel()
	bctx := startBrowser(t)
	srv := newServer(t)

	t.Run("stable", func(t *testing.T) {
		t.Parallel()
		p := newPage(t, bctx, srv, "refs.html")
		s1 := p.snapshot(browser.SnapshotOptions{})
		s2 := p.snapshot(browser.SnapshotOptions{})
		if s1.YAML != s2.YAML {
			t.Errorf("two snapshots of an unchanged page differ:\n%s\n---\n%s", s1.YAML, s2.YAML)
		}
		alpha, beta := refOf(t, s1.YAML, "button", "Alpha"), refOf(t, s1.YAML, "button", "Beta")

		// A new button and a renamed one get new refs; the others keep theirs.
		eval[bool](p, `document.getElementById('beta').textContent = 'Gamma';
			document.body.insertAdjacentHTML('afterbegin', '<button>Delta</button>'); true`)
		s3 := p.snapshot(browser.SnapshotOptions{})
		if got := refOf(t, s3.YAML, "button", "Alpha"); got != alpha {
			t.Errorf("Alpha's ref after another button changed = %s, want %s", got, alpha)
		}
		gamma := refOf(t, s3.YAML, "button", "Gamma")
		delta := refOf(t, s3.YAML, "button", "Delta")
		if gamma == beta || delta == beta || gamma == delta {
			t.Errorf("refs after the change: Gamma %s, Delta %s; want new refs, not Beta's %s", gamma, delta, beta)
		}

		el, err := p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: alpha})
		if err != nil || el.Name != "Alpha" {
			t.Errorf("Locate(ref %s) = %+v, %v; want the Alpha button", alpha, el, err)
		}
		el, err = p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: gamma})
		if err != nil || el.Name != "Gamma" {
			t.Errorf("Locate(ref %s) = %+v, %v; want the Gamma button", gamma, el, err)
		}
		_, err = p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: beta})
		wantErr(t, "Locate(old ref)", err, errcode.Conflict, "ref_stale", "take a new snapshot")
		_, err = p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: "e9999"})
		wantErr(t, "Locate(ref never issued)", err, errcode.NotFound, "target_not_found", "e9999")

		// An element removed since the snapshot: its ref is stale.
		eval[bool](p, `document.getElementById('alpha').remove(); true`)
		_, err = p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: alpha})
		wantErr(t, "Locate(ref of a removed element)", err, errcode.Conflict, "ref_stale", alpha)
		if n, err := p.dom.Count(p.ctx, browser.Target{By: "ref", Value: gamma}); err != nil || n != 1 {
			t.Errorf("Count(ref %s) = %d, %v; want 1", gamma, n, err)
		}
	})

	t.Run("frame navigation", func(t *testing.T) {
		t.Parallel()
		p := newPage(t, bctx, srv, "frames.html")
		s := p.snapshot(browser.SnapshotOptions{})
		pay, card := refOf(t, s.YAML, "button", "Pay now"), refOf(t, s.YAML, "textbox", "Card number")
		// The inner iframe loads another document: its refs go stale, the
		// outer frame's stay.
		eval[bool](p, `document.getElementById('outer').contentDocument.getElementById('inner').src = 'refs.html'; true`)
		var err error
		testenv.Eventually(t, 10*time.Second, "the ref of the inner frame's old document goes stale", func() bool {
			_, err = p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: pay})
			return errcode.ReasonOf(err) == "ref_stale"
		})
		if _, err := p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: card}); err != nil {
			t.Errorf("Locate(ref %s of the outer frame) after the inner frame navigated: %v", card, err)
		}
	})

	t.Run("navigation", func(t *testing.T) {
		t.Parallel()
		p := newPage(t, bctx, srv, "refs.html")
		s1 := p.snapshot(browser.SnapshotOptions{})
		alpha := refOf(t, s1.YAML, "button", "Alpha")
		// No Reset: the DOM notices the new document itself.
		p.navigate("refs.html?again")
		_, err := p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: alpha})
		wantErr(t, "Locate(ref from the previous document)", err, errcode.Conflict, "ref_stale", "take a new snapshot")
		s2 := p.snapshot(browser.SnapshotOptions{})
		if got := refOf(t, s2.YAML, "button", "Alpha"); got == alpha {
			t.Errorf("Alpha's ref on the new document = %s, the same as on the previous one; want a new ref", got)
		}
		_, err = p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: alpha})
		wantErr(t, "Locate(ref from the previous document, after a new snapshot)", err, errcode.Conflict, "ref_stale", "")

		// Back to the first document (from the back-forward cache or not):
		// the refs of its earlier snapshot are not those of the latest one.
		if err := chromedp.Do(p.ctx, chromedp.NavigateBack()); err != nil {
			t.Fatalf("going back: %v", err)
		}
		_, err = p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: alpha})
		wantErr(t, "Locate(ref of the first document, after going back)", err, errcode.Conflict, "ref_stale", "")
		s2 = p.snapshot(browser.SnapshotOptions{})

		// Reset forgets the refs of the current document too.
		alpha2 := refOf(t, s2.YAML, "button", "Alpha")
		p.dom.Reset()
		_, err = p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: alpha2})
		wantErr(t, "Locate(ref after Reset)", err, errcode.Conflict, "ref_stale", "")
	})
}

func wantErr(t *testing.T, what string, err error, code errcode.Code, reason, inMessage string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s = nil error, want %s/%s", what, code, reason)
		return
	}
	if errcode.CodeOf(err) != code || errcode.ReasonOf(err) != reason || !strings.Contains(err.Error(), inMessage) {
		t.Errorf("%s = %v, want %s/%s mentioning %q", what, err, code, reason, inMessage)
	}
}

func nth(i int) *int { return &i }

// tagOf calls a function on the located element, as actions do.
func (p *page) tagOf(el browser.Located) string {
	p.t.Helper()
	yes := true
	res, err := chromedp.Call(p.ctx, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		FunctionDeclaration: `function() { return this.localName; }`, ObjectID: el.ObjectID, ReturnByValue: &yes})
	if err != nil || res.ExceptionDetails != nil {
		p.t.Fatalf("calling a function on %s: %v %v", el.ObjectID, err, res.ExceptionDetails)
	}
	var tag string
	if err := json.Unmarshal(res.Result.Value, &tag); err != nil {
		p.t.Fatal(err)
	}
	return tag
}

// clickJS makes the page's documents (top and same-origin iframes) record
// what a click hits, in top.__hit, without following links.
const clickJS = `(function install(d) {
	if (!d.__recording) {
		d.__recording = true;
		d.addEventListener('click', e => {
			const t = e.composedPath()[0];
			top.__hit = (t.value || t.textContent || '').trim();
			e.preventDefault();
		}, true);
	}
	for (const f of d.querySelectorAll('iframe')) {
		try { if (f.contentDocument) install(f.contentDocument); } catch (e) {}
	}
	top.__hit = '';
	return true;
})(document)`

// click clicks at (x, y) of the top viewport with a real mouse event, and
// returns the text of the element hit.
func (p *page) click(x, y float64) string {
	p.t.Helper()
	eval[bool](p, clickJS)
	if err := chromedp.Do(p.ctx, chromedp.MouseClickXY(x, y)); err != nil {
		p.t.Fatalf("clicking at (%g, %g): %v", x, y, err)
	}
	return eval[string](p, `top.__hit`)
}

func TestLocate(t *testing.T) {
	t.Parallel()
	bctx := startBrowser(t)
	srv := newServer(t)
	for _, tc := range []struct {
		name   string
		page   string
		target browser.Target
		want   string // what a real click at the element's center hits
		tag    string
		check  func(t *testing.T, el browser.Located)
	}{
		{name: "css", page: "locate.html", target: browser.Target{Selector: "[data-testid=save]"}, want: "Save changes", tag: "button"},
		{name: "css far below", page: "locate.html", target: browser.Target{Selector: "#far"}, want: "Far below", tag: "button",
			check: func(t *testing.T, el browser.Located) {
				if el.Y < 0 || el.Y > 800 {
					t.Errorf("Y = %g, want inside the viewport after scrolling", el.Y)
				}
			}},
		{name: "role and name", page: "locate.html", target: browser.Target{By: "role", Role: "button", Name: "save"}, want: "Save changes", tag: "button"},
		{name: "role exact name", page: "locate.html", target: browser.Target{By: "role", Role: "link", Name: "Read more", Exact: true}, want: "Read more", tag: "a"},
		{name: "text", page: "locate.html", target: browser.Target{By: "text", Value: "unique sentence"}, want: "unique sentence", tag: "b"},
		{name: "text inside a button", page: "locate.html", target: browser.Target{By: "text", Value: "Wrapped label"}, want: "Wrapped label", tag: "button"},
		{name: "label", page: "locate.html", target: browser.Target{By: "label", Value: "search query"}, tag: "input",
			check: func(t *testing.T, el browser.Located) {
				if !el.Editable || !el.Enabled || el.Role != "textbox" || el.Name != "Search query" {
					t.Errorf("Locate(label) = %+v, want an editable, enabled textbox named Search query", el)
				}
			}},
		{name: "read-only", page: "locate.html", target: browser.Target{By: "label", Value: "Read only"}, tag: "input",
			check: func(t *testing.T, el browser.Located) {
				if el.Editable {
					t.Errorf("Locate(read-only field).Editable = true, want false")
				}
			}},
		{name: "test id", page: "locate.html", target: browser.Target{By: "test_id", Value: "save"}, want: "Save changes", tag: "button"},
		{name: "nth", page: "locate.html", target: browser.Target{Selector: ".dup", Nth: nth(2)}, want: "Buy", tag: "button"},
		{name: "disabled", page: "locate.html", target: browser.Target{By: "role", Role: "button", Name: "Disabled one"}, tag: "button",
			check: func(t *testing.T, el browser.Located) {
				if el.Enabled || !el.Visible {
					t.Errorf("Locate(disabled button) = enabled %t, visible %t; want disabled, visible", el.Enabled, el.Visible)
				}
			}},
		{name: "hidden by css", page: "locate.html", target: browser.Target{Selector: ".hidden-btn"}, tag: "button",
			check: func(t *testing.T, el browser.Located) {
				if el.Visible {
					t.Errorf("Locate(display:none button).Visible = true, want false")
				}
			}},
		{name: "shadow css", page: "locate.html", target: browser.Target{Selector: "button.inside"}, want: "Inside shadow", tag: "button"},
		{name: "shadow role", page: "locate.html", target: browser.Target{By: "role", Role: "button", Name: "Inside shadow"}, want: "Inside shadow", tag: "button"},
		{name: "frames", page: "frames.html", target: browser.Target{By: "test_id", Value: "inner-pay", Frame: []string{"#outer", "#inner"}}, want: "Pay now", tag: "button"},
		{name: "frame label", page: "frames.html", target: browser.Target{By: "label", Value: "Card number", Frame: []string{"iframe[title='Outer frame']"}}, tag: "input"},
		{name: "frame text", page: "frames.html", target: browser.Target{By: "text", Value: "Pay now", Frame: []string{"#outer", "#inner"}}, want: "Pay now", tag: "button"},
		{name: "shadow in frames page", page: "frames.html", target: browser.Target{By: "role", Role: "button", Name: "Shadow button"}, want: "Shadow button", tag: "button"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPage(t, bctx, srv, tc.page)
			el, err := p.dom.Locate(p.ctx, tc.target)
			if err != nil {
				t.Fatalf("Locate(%+v): %v", tc.target, err)
			}
			if el.Tag != tc.tag {
				t.Errorf("Locate(%+v).Tag = %q, want %q", tc.target, el.Tag, tc.tag)
			}
			if got := p.tagOf(el); got != tc.tag {
				t.Errorf("Locate(%+v).ObjectID is a %q, want the %s", tc.target, got, tc.tag)
			}
			if tc.want != "" {
				if !el.Visible {
					t.Errorf("Locate(%+v).Visible = false, want true", tc.target)
				}
				if got := p.click(el.X, el.Y); got != tc.want {
					t.Errorf("a click at Locate(%+v) = (%g, %g) hits %q, want %q", tc.target, el.X, el.Y, got, tc.want)
				}
			}
			if tc.check != nil {
				tc.check(t, el)
			}
		})
	}

	t.Run("ref", func(t *testing.T) {
		t.Parallel()
		p := newPage(t, bctx, srv, "frames.html")
		s := p.snapshot(browser.SnapshotOptions{})
		for _, name := range []string{"Pay now", "Shadow button", "Top button"} {
			ref := refOf(t, s.YAML, "button", name)
			el, err := p.dom.Locate(p.ctx, browser.Target{By: "ref", Value: ref})
			if err != nil {
				t.Fatalf("Locate(ref %s): %v", ref, err)
			}
			if got := p.click(el.X, el.Y); got != name {
				t.Errorf("a click at Locate(ref %s) hits %q, want %q", ref, got, name)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		p := newPage(t, bctx, srv, "frames.html")
		for _, tc := range []struct {
			target    browser.Target
			code      errcode.Code
			reason    string
			inMessage string
		}{
			{browser.Target{Selector: "#nope"}, errcode.NotFound, "target_not_found", `selector "#nope"`},
			{browser.Target{Selector: "button[", Frame: nil}, errcode.Invalid, "target_invalid", "not valid CSS"},
			{browser.Target{Selector: "button"}, errcode.Conflict, "target_ambiguous", "2 elements match"},
			{browser.Target{Selector: "button", Nth: nth(5)}, errcode.NotFound, "target_not_found", "nth 5"},
			{browser.Target{By: "role", Role: "button", Name: "Pay now"}, errcode.NotFound, "target_not_found", `role button named "Pay now"`}, // in a frame
			{browser.Target{Selector: "button", Frame: []string{"#missing"}}, errcode.NotFound, "frame_not_found", "#missing"},
			{browser.Target{Selector: "button", Frame: []string{"iframe"}}, errcode.Conflict, "target_ambiguous", "2 iframes"},
			{browser.Target{Selector: "button", Frame: []string{"#cross"}}, errcode.Unimplemented, "frame_cross_origin", "#cross"},
			{browser.Target{By: "text"}, errcode.Invalid, "target_invalid", ""},
		} {
			_, err := p.dom.Locate(p.ctx, tc.target)
			wantErr(t, fmt.Sprintf("Locate(%+v)", tc.target), err, tc.code, tc.reason, tc.inMessage)
		}
		_, err := p.dom.Locate(p.ctx, browser.Target{Selector: "button["})
		if got := errcode.ReasonOf(err); got == "target_invalid" {
			var e *errcode.Error
			if !errors.As(err, &e) || e.Problems["selector"] == "" {
				t.Errorf("Locate(bad selector) problems = %v, want one for selector", e)
			}
		}
	})

	t.Run("count", func(t *testing.T) {
		t.Parallel()
		p := newPage(t, bctx, srv, "locate.html")
		for _, tc := range []struct {
			target browser.Target
			want   int
		}{
			{browser.Target{Selector: ".dup"}, 3},
			{browser.Target{Selector: ".dup", Nth: nth(2)}, 1},
			{browser.Target{Selector: ".dup", Nth: nth(3)}, 0},
			{browser.Target{Selector: "#nope"}, 0},
			{browser.Target{By: "role", Role: "button", Name: "buy"}, 3},
			{browser.Target{By: "role", Role: "button", Name: "Hidden one"}, 0}, // display:none: not in the accessibility tree
			{browser.Target{Selector: ".hidden-btn"}, 1},                        // but CSS sees it
			{browser.Target{By: "text", Value: "Buy", Exact: true}, 3},
			{browser.Target{By: "text", Value: "buy", Exact: true}, 0},
			{browser.Target{By: "test_id", Value: "save"}, 1},
		} {
			n, err := p.dom.Count(p.ctx, tc.target)
			if err != nil || n != tc.want {
				t.Errorf("Count(%+v) = %d, %v; want %d", tc.target, n, err, tc.want)
			}
		}
	})
}

// TestIsolatedWorld: a page that breaks the DOM APIs in its own world does
// not break snapshots or locators, which run in Berth's world.
func TestIsolatedWorld(t *testing.T) {
	t.Parallel()
	bctx := startBrowser(t)
	srv := newServer(t)
	p := newPage(t, bctx, srv, "overrides.html")

	// Positive control: the page's world does see its overrides.
	if got := eval[string](p, `JSON.stringify([document.querySelectorAll('button').length,
		document.body.getBoundingClientRect().width, document.body.childNodes.length, String(globalThis.__berth)])`); got != `[0,0,0,"hijacked"]` {
		t.Fatalf("the page's overrides are not in effect in its world: %s", got)
	}

	s := p.snapshot(browser.SnapshotOptions{})
	ref := refOf(t, s.YAML, "button", "Press me")
	if !strings.Contains(s.YAML, `- heading "Hostile page" [level=1]`) {
		t.Errorf("snapshot of the hostile page lacks its heading:\n%s", s.YAML)
	}
	for _, target := range []browser.Target{
		{Selector: "#target"},
		{By: "role", Role: "button", Name: "Press me"},
		{By: "ref", Value: ref},
	} {
		el, err := p.dom.Locate(p.ctx, target)
		if err != nil {
			t.Fatalf("Locate(%+v) on the hostile page: %v", target, err)
		}
		if !el.Visible {
			t.Errorf("Locate(%+v) on the hostile page = %+v, want a visible element", target, el)
		}
		if got := p.click(el.X, el.Y); got != "Press me" {
			t.Errorf("a click at Locate(%+v) on the hostile page = (%g, %g) hits %q, want the button", target, el.X, el.Y, got)
		}
	}
}

func TestTargetValid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		target browser.Target
		want   []string // fields with problems
	}{
		{browser.Target{Selector: "button"}, nil},
		{browser.Target{By: "role", Role: "button", Name: "Save"}, nil},
		{browser.Target{By: "role", Value: "button"}, nil},
		{browser.Target{By: "text", Value: "Hello", Nth: nth(1), Frame: []string{"#f"}}, nil},
		{browser.Target{By: "ref", Value: "f2e13"}, nil},
		{browser.Target{By: "test_id", Value: "x"}, nil},
		{browser.Target{}, []string{"by"}},
		{browser.Target{Selector: "a", By: "text", Value: "x"}, []string{"selector"}},
		{browser.Target{Selector: "a", Value: "x"}, []string{"value"}},
		{browser.Target{By: "role"}, []string{"role"}},
		{browser.Target{By: "text", Name: "x"}, []string{"name", "value"}},
		{browser.Target{By: "ref", Value: "button"}, []string{"value"}},
		{browser.Target{By: "ref", Value: "e1", Frame: []string{"#f"}, Nth: nth(0)}, []string{"frame", "nth"}},
		{browser.Target{By: "css", Value: "x"}, []string{"by"}},
		{browser.Target{Selector: "a", Nth: nth(-1)}, []string{"nth"}},
		{browser.Target{Selector: "a", Frame: []string{" "}}, []string{"frame"}},
		{browser.Target{Selector: strings.Repeat("a", 5000)}, []string{"selector"}},
	} {
		var got []string
		for f := range tc.target.Valid() {
			got = append(got, f)
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%+v.Valid() fields (-want +got):\n%s", tc.target, diff)
		}
	}
}

// FuzzTargetValid: Valid never panics, names only known fields, and what it
// accepts is one selector or one well-formed query.
func FuzzTargetValid(f *testing.F) {
	f.Add("button", "", "", "", "", false, -1, "")
	f.Add("", "role", "", "button", "Save", true, 0, "#f")
	f.Add("", "ref", "f1e2", "", "", false, -1, "")
	f.Add("", "text", " ", "", "x", false, 2, " ")
	fields := map[string]bool{"selector": true, "by": true, "value": true, "role": true, "name": true, "nth": true, "frame": true}
	ref := regexp.MustCompile(`^(?:f[0-9]+)?e[0-9]+$`)
	f.Fuzz(func(t *testing.T, selector, by, value, role, name string, exact bool, n int, frame string) {
		tg := browser.Target{Selector: selector, By: by, Value: value, Role: role, Name: name, Exact: exact}
		if n >= -1 {
			tg.Nth = &n
		}
		if frame != "" {
			tg.Frame = []string{frame}
		}
		p := tg.Valid()
		for k := range p {
			if !fields[k] {
				t.Errorf("%+v.Valid() names field %q", tg, k)
			}
		}
		if p != nil {
			return
		}
		if (selector == "") == (by == "") {
			t.Errorf("%+v.Valid() = nil, want a problem: give a selector or by", tg)
		}
		if by == "ref" && !ref.MatchString(value) {
			t.Errorf("%+v.Valid() = nil for a malformed ref", tg)
		}
		if tg.Nth != nil && *tg.Nth < 0 {
			t.Errorf("%+v.Valid() = nil for a negative nth", tg)
		}
	})
}
