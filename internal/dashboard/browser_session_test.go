package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// hostileTitle is a page title that would run script if a page put it in
// as markup.
const hostileTitle = `<img src=x onerror=alert(1)>`

// sessionPages serves what the browser session drives: a page whose
// button, clicked, changes its title; two pages of other colours (the
// frames of a recording); and a page with a hostile title. The browser's
// host sessions reach loopback, as the daemon's own browser tests use.
func sessionPages(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Berth test page</title><body style="margin:0">
<button id=b style="position:absolute;left:0;top:0;width:400px;height:300px" onclick="document.title = 'clicked'; document.body.style.background = 'rgb(200,40,40)'">Press</button>`)
	})
	mux.HandleFunc("/colour/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Colour</title><body style="background:%s"><h1>%s</h1>`, r.URL.Path[len("/colour/"):], r.URL.Path)
	})
	mux.HandleFunc("/hostile", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>`+strings.ReplaceAll(hostileTitle, "<", "&lt;")+`</title><p>hostile`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDashboardBrowserSession drives a browser session's pages in real
// Chromium against the real daemon: open, navigate, screenshot, live view,
// control, checkpoints, recordings and their player, and a hostile title.
func TestDashboardBrowserSession(t *testing.T) {
	testenv.OnePass(t)
	d := testenv.StartDaemon(t, nil)
	root := startChromium(t)
	ctx := context.Background()
	site := sessionPages(t)
	c := d.Client

	a := newBrowser(t, root)
	a.signIn(t, d.URL, d.Token)

	a.run(t, "opening browsers", chromedp.Navigate(d.URL+"/ui/browsers"), chromedp.WaitVisible(chromedp.ID("open-browser")))
	if off := get(t, a, "reading", chromedp.Evaluate[bool](`!!document.getElementById("browsers-off")`)); off {
		testenv.Missing(t, "browser sessions are off here: %s", text(t, a, "#browsers-off"))
	}
	var id string
	t.Run("open", func(t *testing.T) {
		a.navigateBy(t, "opening a session", chromedp.Click(chromedp.CSS("#open-browser button")))
		a.run(t, "listing sessions", chromedp.WaitVisible(chromedp.ID("sessions")))
		a.navigateBy(t, "opening its page", chromedp.Click(chromedp.CSS(`#sessions a[href^="/ui/browsers/brs_"]`)))
		id = text(t, a, "#browser-id")
		if !strings.HasPrefix(id, "brs_") {
			t.Fatalf("session page shows ID %q, want brs_...", id)
		}
	})
	if id == "" {
		t.Fatal("no session")
	}
	t.Cleanup(func() { _ = c.CloseBrowserSession(context.Background(), id) })
	sessURL := d.URL + "/ui/browsers/" + id

	t.Run("navigate and screenshot", func(t *testing.T) {
		a.navigateBy(t, "navigating",
			chromedp.SetValue(chromedp.ID("navigate-url"), site+"/page"),
			chromedp.Click(chromedp.ID("navigate-button")))
		if title := text(t, a, "#browser-title"); title != "Berth test page" {
			t.Errorf("session page title = %q, want Berth test page", title)
		}
		if pages := text(t, a, "#pages"); !strings.Contains(pages, site+"/page") {
			t.Errorf("pages = %q, want the page's URL", pages)
		}
		if journal := text(t, a, "#journal"); !strings.Contains(journal, "navigate") {
			t.Errorf("journal = %q, want the navigate action", journal)
		}
		shot := a.fetch(t, "/ui/browsers/"+id+"/screenshot", `{}`)
		if shot.Status != 200 || shot.ContentType != "image/png" || shot.NoSniff != "nosniff" || !strings.HasPrefix(shot.Body, "\ufffdPNG") {
			t.Errorf("screenshot = %d %q nosniff=%q %.8q, want a PNG with nosniff", shot.Status, shot.ContentType, shot.NoSniff, shot.Body)
		}
		a.run(t, "showing the screenshot", chromedp.Navigate(sessURL+"?show=screenshot"),
			void(chromedp.Poll[bool](`document.getElementById("screenshot").naturalWidth > 0`, chromedp.WithPollingTimeout(10*time.Second))))
		a.run(t, "showing the snapshot", chromedp.Navigate(sessURL+"?show=snapshot"), chromedp.WaitVisible(chromedp.ID("snapshot")))
		if snap := text(t, a, "#snapshot"); !strings.Contains(snap, `button "Press"`) {
			t.Errorf("snapshot = %q, want the button", snap)
		}
		a.run(t, "showing diagnostics", chromedp.Navigate(sessURL+"?show=diagnostics"), chromedp.WaitVisible(chromedp.ID("diagnostics")))
	})

	t.Run("live view and control", func(t *testing.T) {
		a.run(t, "opening the page", chromedp.Navigate(sessURL), chromedp.WaitVisible(chromedp.ID("control-automation")))
		a.run(t, "waiting for live frames", void(chromedp.Poll[bool](`Number(document.getElementById("live").dataset.frames || 0) >= 2`,
			chromedp.WithPollingTimeout(15*time.Second))))
		a.navigateBy(t, "taking control", chromedp.Click(chromedp.ID("take-control")))
		a.run(t, "reading control", chromedp.WaitVisible(chromedp.ID("control-mine")))
		if st, err := c.BrowserControlState(ctx, id); err != nil || st.Mode != "human" {
			t.Errorf("control = %+v, %v; want human", st, err)
		}
		// Automation waits while the person holds control.
		if err := c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "reload"}, nil); !errcode.Has(err, errcode.ControlHeld) {
			t.Errorf("an automation action under the lease = %v, want control_held", err)
		}
		// A click on the live panel is a click in the page: the button
		// covers its top left, and changes the title.
		a.run(t, "waiting for a frame", void(chromedp.Poll[bool](`Number(document.getElementById("live").dataset.frames || 0) >= 1`,
			chromedp.WithPollingTimeout(15*time.Second))))
		before, _, err := c.BrowserLiveFrame(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		a.run(t, "clicking in the live view", void(chromedp.Evaluate[any](`(() => { const r = document.getElementById("live-frame").getBoundingClientRect();
			document.getElementById("live-frame").dispatchEvent(new MouseEvent("click", {bubbles: true, clientX: r.left + 20, clientY: r.top + 20})); })()`)))
		defer func() {
			if t.Failed() {
				t.Logf("live panel status: %q; %q", text(t, a, "#live-status"), get(t, a, "refused", chromedp.Evaluate[string](`document.getElementById("live-refused").textContent`)))
				s, err := c.BrowserSession(ctx, id)
				t.Logf("session: title %q url %q viewport %+v, %v", s.Title, s.URL, s.Viewport, err)
				j, _ := c.BrowserJournalAll(ctx, id)
				for _, e := range j[max(0, len(j)-5):] {
					t.Logf("journal: %+v", e)
				}
				t.Logf("live data: %q", get(t, a, "live", chromedp.Evaluate[string](`JSON.stringify({...document.getElementById("live").dataset, w: document.getElementById("live-frame").naturalWidth, r: document.getElementById("live-frame").getBoundingClientRect()})`)))
			}
		}()
		a.run(t, "waiting for the click's answer", void(chromedp.Poll[bool](`document.getElementById("live").dataset.clickStatus === "204"`,
			chromedp.WithPollingTimeout(10*time.Second))))
		testenv.Eventually(t, 10*time.Second, "the click changes the page's title", func() bool {
			s, err := c.BrowserSession(ctx, id)
			return err == nil && s.Title == "clicked"
		})
		testenv.Eventually(t, 10*time.Second, "the live frame changes after the click", func() bool {
			after, _, err := c.BrowserLiveFrame(ctx, id)
			return err == nil && !bytes.Equal(before, after)
		})
		a.navigateBy(t, "releasing", chromedp.Click(chromedp.ID("release-control")))
		a.run(t, "reading control", chromedp.WaitVisible(chromedp.ID("control-automation")))
		if err := c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "navigate", URL: site + "/page"}, nil); err != nil {
			t.Errorf("an automation action after release = %v, want it to run", err)
		}
		// A lease someone else holds (taken through the API) shows as
		// another person's, and the page offers no click.
		l, err := c.AcquireBrowserControl(ctx, id, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		a.run(t, "reading control", chromedp.Navigate(sessURL), chromedp.WaitVisible(chromedp.ID("control-other")))
		if held := get(t, a, "held", chromedp.Evaluate[string](`document.getElementById("live").dataset.held`)); held != "" {
			t.Errorf("live panel held = %q under another's lease, want none", held)
		}
		if err := c.ReleaseBrowserControl(ctx, id, l.Token); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("checkpoint and resume", func(t *testing.T) {
		a.run(t, "opening the page", chromedp.Navigate(sessURL), chromedp.WaitVisible(chromedp.ID("make-checkpoint")))
		a.navigateBy(t, "making a checkpoint", chromedp.Click(chromedp.ID("make-checkpoint")))
		a.run(t, "listing checkpoints", chromedp.WaitVisible(chromedp.ID("checkpoint-list")))
		if list := text(t, a, "#checkpoint-list"); !strings.Contains(list, site+"/page") {
			t.Errorf("checkpoints = %q, want one at the page", list)
		}
		a.navigateBy(t, "resuming", chromedp.Click(chromedp.CSS("#checkpoint-list .resume-checkpoint")))
		resumed := text(t, a, "#browser-id")
		if resumed == id || !strings.HasPrefix(resumed, "brs_") {
			t.Fatalf("resumed session = %q, want a new session", resumed)
		}
		t.Cleanup(func() { _ = c.CloseBrowserSession(context.Background(), resumed) })
		if u := text(t, a, "#browser-url"); u != site+"/page" {
			t.Errorf("resumed session at %q, want %s/page", u, site)
		}
		a.run(t, "listing checkpoints", chromedp.Navigate(d.URL+"/ui/browsers"), chromedp.WaitVisible(chromedp.ID("checkpoint-list")))
		a.navigateBy(t, "deleting the checkpoint", chromedp.Click(chromedp.CSS(`#checkpoint-list form[action$="/delete"] button`)))
		if cps, err := c.BrowserCheckpoints(ctx); err != nil || len(cps) != 0 {
			t.Errorf("checkpoints after the delete = %d, %v; want none", len(cps), err)
		}
	})

	t.Run("record and play", func(t *testing.T) {
		a.run(t, "opening the page", chromedp.Navigate(sessURL), chromedp.WaitVisible(chromedp.ID("start-recording")))
		a.navigateBy(t, "starting a recording",
			chromedp.SetValue(chromedp.CSS(`#start-recording input[name="interval_ms"]`), "200"),
			chromedp.Click(chromedp.CSS("#start-recording button")))
		for _, colour := range []string{"red", "blue", "green"} {
			if err := c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "navigate", URL: site + "/colour/" + colour}, nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // a few frames of each colour
		}
		a.navigateBy(t, "stopping it", chromedp.Click(chromedp.CSS("#recordings .stop-recording")))
		a.navigateBy(t, "opening the player", chromedp.Click(chromedp.CSS(`#recordings a.button`)))
		rid := text(t, a, "#recording-id")
		rec, err := c.Recording(ctx, rid)
		if err != nil || len(rec.Frames) < 3 {
			t.Fatalf("recording = %d frames, %v; want at least 3", len(rec.Frames), err)
		}
		first, _ := c.RecordingFrame(ctx, rid, 0)
		last, _ := c.RecordingFrame(ctx, rid, len(rec.Frames)-1)
		if bytes.Equal(first, last) {
			t.Error("the first and last frames are the same image, want the colours to differ")
		}
		a.run(t, "playing", chromedp.Click(chromedp.ID("play")),
			void(chromedp.Poll[bool](`document.getElementById("scrub").value === document.getElementById("scrub").max`,
				chromedp.WithPollingTimeout(20*time.Second))))
		src := get(t, a, "frame src", chromedp.Evaluate[string](`document.getElementById("player-frame").src`))
		if want := fmt.Sprintf("/frames/%d", len(rec.Frames)-1); !strings.HasSuffix(src, want) {
			t.Errorf("after playing the frame is %s, want ...%s", src, want)
		}
		a.run(t, "scrubbing", void(chromedp.Evaluate[any](`(() => { const s = document.getElementById("scrub"); s.value = "1"; s.dispatchEvent(new Event("input")); })()`)),
			void(chromedp.Poll[bool](`document.getElementById("player-frame").complete && document.getElementById("player-frame").naturalWidth > 0`,
				chromedp.WithPollingTimeout(10*time.Second))))
		if idx := text(t, a, "#frame-index"); idx != "1" {
			t.Errorf("after scrubbing to 1 the player shows frame %q", idx)
		}
		if src := get(t, a, "frame src", chromedp.Evaluate[string](`document.getElementById("player-frame").src`)); !strings.HasSuffix(src, "/frames/1") {
			t.Errorf("after scrubbing the frame is %s, want .../frames/1", src)
		}
		a.run(t, "listing recordings", chromedp.Navigate(d.URL+"/ui/browsers"), chromedp.WaitVisible(chromedp.ID("recording-list")))
		a.navigateBy(t, "deleting the recording", chromedp.Click(chromedp.CSS(`#recording-list form[action$="/delete"] button`)))
		if _, err := c.Recording(ctx, rid); !errcode.Has(err, errcode.RecordingNotFound) {
			t.Errorf("the recording after the delete: %v, want recording_not_found", err)
		}
	})

	t.Run("hostile title", func(t *testing.T) {
		if err := c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "navigate", URL: site + "/hostile"}, nil); err != nil {
			t.Fatal(err)
		}
		a.run(t, "opening the page", chromedp.Navigate(sessURL), chromedp.WaitVisible(chromedp.ID("browser-title")))
		if title := text(t, a, "#browser-title"); title != hostileTitle {
			t.Errorf("session page title = %q, want the hostile title as text", title)
		}
		a.run(t, "opening the list", chromedp.Navigate(d.URL+"/ui/browsers"), chromedp.WaitVisible(chromedp.ID("sessions")))
		if list := text(t, a, "#sessions"); !strings.Contains(list, hostileTitle) {
			t.Errorf("sessions = %q, want the hostile title as text", list)
		}
		if n := a.alerts.Load(); n != 0 {
			t.Errorf("%d alert dialogs opened: a page title ran as script", n)
		}
		// Positive control: an alert the test raises itself is seen.
		get(t, a, "raising an alert", chromedp.Evaluate[any](`setTimeout(() => alert("control"), 0)`))
		testenv.Eventually(t, 5*time.Second, "the control alert is detected", func() bool { return a.alerts.Load() == 1 })
	})
}

// void drops an action's value, to run it among steps.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}
