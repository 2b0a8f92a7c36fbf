package dashboard

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// controlTTL is how long a control lease the dashboard takes lasts; each
// click through the page renews it.
const controlTTL = 2 * time.Minute

// leases holds the control leases people took through the dashboard: the
// token stays in the daemon's memory, by dashboard session and browser
// session, and never appears in a page. Its zero value is ready to use.
type leases struct {
	mu sync.Mutex // guards m
	m  map[leaseKey]lease
}

type leaseKey struct{ sid, browser string }

type lease struct {
	token   string
	expires time.Time
}

// get returns sid's live lease of browser session id ("" when none).
func (l *leases) get(sid, id string) lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := leaseKey{sid, id}
	le := l.m[k]
	if le.token != "" && time.Now().After(le.expires) {
		delete(l.m, k)
		return lease{}
	}
	return le
}

func (l *leases) put(sid, id string, le lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[leaseKey]lease{}
	}
	// Expired leases of any session go on each put, so the map stays
	// as small as the leases that are live.
	now := time.Now()
	for k, v := range l.m {
		if now.After(v.expires) {
			delete(l.m, k)
		}
	}
	l.m[leaseKey{sid, id}] = le
}

func (l *leases) drop(sid, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, leaseKey{sid, id})
}

// browserPage is what a browser session's page shows.
type browserPage struct {
	Session apitype.BrowserSession
	Pages   []apitype.BrowserPage
	// PagesErr says why the pages could not be listed (a lease another
	// holds, a crashed session).
	PagesErr string
	Control  apitype.BrowserControl
	// Held is when this person's lease ends, if they hold control.
	Held       time.Time
	Journal    []apitype.BrowserJournalEntry
	Recordings []apitype.BrowserRecording
	// Show is the extra panel asked for: snapshot or diagnostics.
	Show        string
	Snapshot    *apitype.BrowserSnapshot
	Diagnostics *diagnostics
	ShowErr     string
}

// diagnostics is the result of the diagnostics op.
type diagnostics struct {
	Events      []apitype.BrowserEvent `json:"events"`
	Dropped     int                    `json:"dropped"`
	ConsoleText bool                   `json:"console_text"`
}

// journalShown bounds the journal entries the page shows (the latest).
const journalShown = 20

func (d *Dashboard) handleBrowserSession(rq *req) {
	id := rq.r.PathValue("id")
	s, err := rq.c.BrowserSession(rq.ctx(), id)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := browserPage{Session: s, Show: rq.r.URL.Query().Get("show")}
	le := d.leases.get(rq.sid, id)
	if ctl, err := rq.c.BrowserControlState(rq.ctx(), id); err == nil {
		p.Control = ctl
		if ctl.Mode != "human" {
			d.leases.drop(rq.sid, id)
			le = lease{}
		}
	}
	p.Held = le.expires
	if err := d.action(rq, id, apitype.BrowserAction{Op: "pages", Lease: le.token}, &p.Pages); err != nil {
		p.PagesErr = errMessage(err)
	}
	switch p.Show {
	case "snapshot":
		var snap apitype.BrowserSnapshot
		if err := d.action(rq, id, apitype.BrowserAction{Op: "snapshot", Lease: le.token}, &snap); err != nil {
			p.ShowErr = errMessage(err)
		} else {
			p.Snapshot = &snap
		}
	case "diagnostics":
		var diag diagnostics
		if err := d.action(rq, id, apitype.BrowserAction{Op: "diagnostics", Lease: le.token}, &diag); err != nil {
			p.ShowErr = errMessage(err)
		} else {
			slices.Reverse(diag.Events) // newest first
			p.Diagnostics = &diag
		}
	}
	// The journal's latest entries: a session that ran no action has none
	// (404), which shows as an empty journal.
	if all, err := rq.c.BrowserJournalAll(rq.ctx(), id); err == nil {
		if len(all) > journalShown {
			all = all[len(all)-journalShown:]
		}
		slices.Reverse(all)
		p.Journal = all
	}
	if recs, err := rq.c.Recordings(rq.ctx()); err == nil {
		for _, r := range recs {
			if r.SessionID == id {
				p.Recordings = append(p.Recordings, r)
			}
		}
		slices.Reverse(p.Recordings)
	}
	rq.render(d, "browser", p)
}

// busyRetries and busyWait bound how long a person's action waits out
// another (409 busy): a read of the session (GET, which reads its title
// between actions) or a recording's capture holds it for a moment, and a
// click or a navigation should not be lost to that.
const (
	busyRetries = 10
	busyWait    = 100 * time.Millisecond
)

// action runs a on session id with this person's lease, if they hold one,
// retrying while the session is busy for about a second.
func (d *Dashboard) action(rq *req, id string, a apitype.BrowserAction, out any) error {
	if a.Lease == "" {
		a.Lease = d.leases.get(rq.sid, id).token
	}
	for i := 0; ; i++ {
		err := rq.c.BrowserAction(rq.ctx(), id, a, out)
		if i == busyRetries || !errcode.Has(err, errcode.Busy) {
			return err
		}
		select {
		case <-rq.ctx().Done():
			return err
		case <-time.After(busyWait):
		}
	}
}

func (d *Dashboard) handleBrowserNavigate(rq *req) {
	id := rq.r.PathValue("id")
	if err := d.action(rq, id, apitype.BrowserAction{Op: "navigate", URL: rq.r.PostFormValue("url")}, nil); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers/" + url.PathEscape(id))
}

// handleBrowserPages selects, opens or closes a page (the pages op).
func (d *Dashboard) handleBrowserPages(rq *req) {
	id := rq.r.PathValue("id")
	a := apitype.BrowserAction{Op: "pages", Action: rq.r.PostFormValue("action"), URL: rq.r.PostFormValue("url")}
	if v := rq.r.PostFormValue("index"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			d.fail(rq.w, rq.r, errcode.BodyInvalid.New("index %q is not a number", v))
			return
		}
		a.Index = &n
	}
	if err := d.action(rq, id, a, nil); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers/" + url.PathEscape(id))
}

// handleBrowserScreenshot answers the session's current page as a PNG (the
// screenshot op, journaled, with this person's lease if they hold one).
func (d *Dashboard) handleBrowserScreenshot(rq *req) {
	var img apitype.Image
	if err := d.action(rq, rq.r.PathValue("id"), apitype.BrowserAction{Op: "screenshot", Format: "png"}, &img); err != nil {
		d.apiFailed(rq, err)
		return
	}
	b, err := base64.StdEncoding.DecodeString(img.Base64)
	if err != nil {
		d.fail(rq.w, rq.r, errcode.Wrap(errcode.Internal, err, "the screenshot is malformed"))
		return
	}
	writeImage(rq.w, b)
}

// handleBrowserFrame answers the session's current page as a PNG from the
// live frame route: not an action, so neither journaled nor stopped by a
// lease. The page's live panel polls it.
func (d *Dashboard) handleBrowserFrame(rq *req) {
	b, _, err := rq.c.BrowserLiveFrame(rq.ctx(), rq.r.PathValue("id"))
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	writeImage(rq.w, b)
}

// writeImage answers a PNG the API made: its own type, never sniffed,
// under a policy that runs nothing.
func writeImage(w http.ResponseWriter, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", rawCSP)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// handleTakeControl acquires the session's control lease for this person
// (the token is kept by the dashboard); while it is held, automation's
// actions are refused and the page's live panel sends clicks.
func (d *Dashboard) handleTakeControl(rq *req) {
	id := rq.r.PathValue("id")
	l, err := rq.c.AcquireBrowserControl(rq.ctx(), id, controlTTL)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	d.leases.put(rq.sid, id, lease{token: l.Token, expires: l.ExpiresAt})
	rq.redirect("/ui/browsers/" + url.PathEscape(id))
}

// handleReleaseControl releases this person's lease: automation acts
// again at once.
func (d *Dashboard) handleReleaseControl(rq *req) {
	id := rq.r.PathValue("id")
	le := d.leases.get(rq.sid, id)
	if le.token == "" {
		d.fail(rq.w, rq.r, errcode.ControlNotHeld.New("you do not hold control of this session (it expired, or another person holds it)"))
		return
	}
	d.leases.drop(rq.sid, id)
	if err := rq.c.ReleaseBrowserControl(rq.ctx(), id, le.token); err != nil && !client.IsCode(err, errcode.Conflict) {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers/" + url.PathEscape(id))
}

// clickRequest is a click on the live panel, in the page's CSS pixels.
type clickRequest struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// handleBrowserClick clicks where the person clicked the live panel (a
// mouseClick action with their lease), and renews the lease. Only the
// holder of a lease taken here clicks: automation has its own API.
func (d *Dashboard) handleBrowserClick(rq *req) {
	id := rq.r.PathValue("id")
	le := d.leases.get(rq.sid, id)
	if le.token == "" {
		d.fail(rq.w, rq.r, errcode.ControlNotHeld.New("take control of the session before clicking in it"))
		return
	}
	var c clickRequest
	if err := json.NewDecoder(http.MaxBytesReader(rq.w, rq.r.Body, maxForm)).Decode(&c); err != nil {
		d.fail(rq.w, rq.r, errcode.BodyInvalid.New("the click is not JSON {x, y}: %v", err))
		return
	}
	if err := d.action(rq, id, apitype.BrowserAction{Op: "mouseClick", X: c.X, Y: c.Y, Lease: le.token}, nil); err != nil {
		d.apiFailed(rq, err)
		return
	}
	if l, err := rq.c.RenewBrowserControl(rq.ctx(), id, le.token, controlTTL); err == nil {
		d.leases.put(rq.sid, id, lease{token: l.Token, expires: l.ExpiresAt})
	}
	rq.w.WriteHeader(http.StatusNoContent)
}

func (d *Dashboard) handleCreateCheckpoint(rq *req) {
	if _, err := rq.c.CheckpointBrowserSession(rq.ctx(), rq.r.PathValue("id")); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers#checkpoints")
}

// handleResumeCheckpoint opens a new session from a checkpoint and shows
// it.
func (d *Dashboard) handleResumeCheckpoint(rq *req) {
	s, err := rq.c.ResumeBrowserCheckpoint(rq.ctx(), rq.r.PathValue("id"))
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers/" + url.PathEscape(s.ID))
}

func (d *Dashboard) handleDeleteCheckpoint(rq *req) {
	if err := rq.c.DeleteBrowserCheckpoint(rq.ctx(), rq.r.PathValue("id")); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers#checkpoints")
}

func (d *Dashboard) handleStartRecording(rq *req) {
	id := rq.r.PathValue("id")
	var req apitype.StartRecordingRequest
	if v := rq.r.PostFormValue("interval_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			d.fail(rq.w, rq.r, errcode.BodyInvalid.New("interval %q is not a number of milliseconds", v))
			return
		}
		req.IntervalMS = n
	}
	if _, err := rq.c.StartRecording(rq.ctx(), id, req); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers/" + url.PathEscape(id))
}

// recordingBack is where a recording's buttons go back to: the session's
// page when the form says so, else the sessions page.
func recordingBack(rq *req) string {
	if s := rq.r.PostFormValue("session"); s != "" {
		return "/ui/browsers/" + url.PathEscape(s)
	}
	return "/ui/browsers#recordings"
}

func (d *Dashboard) handleStopRecording(rq *req) {
	if _, err := rq.c.StopRecording(rq.ctx(), rq.r.PathValue("id")); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect(recordingBack(rq))
}

func (d *Dashboard) handleDeleteRecording(rq *req) {
	if err := rq.c.DeleteRecording(rq.ctx(), rq.r.PathValue("id")); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers#recordings")
}

// handleRecording is a recording's player: its frames, one at a time,
// with play, pause and a scrub bar (static/player.js).
func (d *Dashboard) handleRecording(rq *req) {
	r, err := rq.c.Recording(rq.ctx(), rq.r.PathValue("id"))
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.render(d, "recording", r)
}

// handleRecordingFrame answers frame n of a recording as its PNG.
func (d *Dashboard) handleRecordingFrame(rq *req) {
	n, err := strconv.Atoi(rq.r.PathValue("n"))
	if err != nil || n < 0 {
		d.fail(rq.w, rq.r, errcode.RecordingFrameNotFound.New("frame %q is not a frame number", rq.r.PathValue("n")))
		return
	}
	b, err := rq.c.RecordingFrame(rq.ctx(), rq.r.PathValue("id"), n)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	writeImage(rq.w, b)
}
