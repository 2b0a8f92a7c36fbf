package daemon_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
)

// hitServer is a loopback website that counts the requests for each path,
// so a test can tell whether an action ran.
type hitServer struct {
	URL  string
	mu   sync.Mutex
	hits map[string]int
}

func newHitServer(t *testing.T) *hitServer {
	t.Helper()
	h := &hitServer{hits: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!doctype html><title>%s</title><p id=p>%s</p>", r.URL.Path, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

func (h *hitServer) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path]
}

// stateCLI runs the berth CLI against d with key token and returns its
// standard output.
func stateCLI(t *testing.T, d *testenv.Daemon, token string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), args...)
	cmd.Env = append(os.Environ(), "BERTH_URL="+d.URL, "BERTH_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("berth %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

func journalOf(t *testing.T, c *client.Client, id string) []apitype.BrowserJournalEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	es, err := c.BrowserJournalAll(ctx, id)
	if err != nil {
		t.Fatalf("journal of %s: %v", id, err)
	}
	return es
}

func seqsOf(es []apitype.BrowserJournalEntry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// TestBrowserJournal: a series of actions is journaled in order with
// sequence numbers from 1, each with its outcome, a failed one with its
// reason, and without the secrets an action carries; the journal is the
// owner's alone (another tenant's key gets 404, like an unknown session),
// outlives the session, and keeps only the latest entries within the
// byte budget, while sequence numbers keep increasing.
func TestBrowserJournal(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.BrowserJournalEntries = 20
		c.BrowserJournalBytes = browser.MinJournalBytes
	})
	site := newHitServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, keyA := tenantKey(t, d, "acme", "execution")
	_, keyB := tenantKey(t, d, "other", "execution")
	ca, cb := client.New(d.URL, keyA.Secret), client.New(d.URL, keyB.Secret)

	s, err := ca.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	act(t, ca, s.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/form?token=hunter2#frag"}, nil)
	act(t, ca, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: `document.body.innerHTML += '<input id=pw>'; "sekrit-expression"`}, nil)
	act(t, ca, s.ID, apitype.BrowserAction{Op: "fill", Selector: "#pw", Value: "sekrit-value"}, nil)
	err = ca.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: "file:///etc/passwd"}, nil)
	if !errcode.Has(err, errcode.URLBlocked) {
		t.Fatalf("navigate to file: = %v, want url_blocked", err)
	}
	err = ca.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "click", Selector: "#missing", TimeoutMS: 300}, nil)
	if err == nil {
		t.Fatal("click on a missing element succeeded")
	}
	clickReason := errcode.ReasonOf(err)

	es := journalOf(t, ca, s.ID)
	type row struct {
		Seq         int64
		Op, Outcome string
	}
	var got []row
	for _, e := range es {
		got = append(got, row{e.Seq, e.Op, e.Outcome})
		if e.StartedAt.IsZero() || e.FinishedAt == nil || e.FinishedAt.Before(e.StartedAt) {
			t.Errorf("entry %d: started %v, finished %v", e.Seq, e.StartedAt, e.FinishedAt)
		}
	}
	want := []row{{1, "navigate", "ok"}, {2, "evaluate", "ok"}, {3, "fill", "ok"}, {4, "navigate", "error"}, {5, "click", "error"}}
	if !slices.Equal(got, want) {
		t.Fatalf("journal = %+v, want %+v", got, want)
	}
	if !strings.HasPrefix(es[3].Reason, "url_blocked: ") || !strings.HasPrefix(es[4].Reason, clickReason+": ") {
		t.Errorf("reasons = %q, %q; want url_blocked and %s", es[3].Reason, es[4].Reason, clickReason)
	}
	if es[0].Summary != "url="+site.URL+"/form" || es[4].Summary != "target=#missing timeout_ms=300" {
		t.Errorf("summaries = %q, %q", es[0].Summary, es[4].Summary)
	}
	for _, e := range es {
		for _, secret := range []string{"hunter2", "frag", "sekrit"} {
			if strings.Contains(e.Summary+e.Reason, secret) {
				t.Errorf("entry %d keeps %q: %+v", e.Seq, secret, e)
			}
		}
	}

	// Another tenant: 404 like an unknown session, live or closed; the
	// owner (and the CLI with its key) reads it.
	checkForeign := func(when string) {
		t.Helper()
		if _, err := cb.BrowserJournal(ctx, s.ID, 0, 0); !errcode.Has(err, errcode.SessionNotFound) {
			t.Errorf("%s: another tenant's journal read = %v, want session_not_found", when, err)
		}
		if _, err := ca.BrowserJournal(ctx, "brs_aaaaaaaaaaaaaaaaaaaaaaaaaa", 0, 0); !errcode.Has(err, errcode.SessionNotFound) {
			t.Errorf("%s: an unknown session's journal = %v, want session_not_found", when, err)
		}
		if got := journalOf(t, ca, s.ID); len(got) != 5 {
			t.Errorf("%s: the owner reads %d entries, want 5", when, len(got))
		}
		if _, err := d.Client.BrowserJournal(ctx, s.ID, 0, 0); err != nil {
			t.Errorf("%s: an admin's journal read: %v", when, err)
		}
	}
	checkForeign("live")
	if err := ca.CloseBrowserSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	checkForeign("closed")
	out, err := stateCLI(t, d, keyA.Secret, "browser", "journal", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "SEQ") || !strings.HasPrefix(lines[1], "1 ") ||
		!strings.Contains(lines[4], "error (url_blocked: ") || !strings.HasPrefix(lines[5], "5 ") {
		t.Errorf("berth browser journal:\n%s", out)
	}
	if _, err := stateCLI(t, d, keyB.Secret, "browser", "journal", s.ID); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("berth browser journal as another tenant = %v, want not found", err)
	}

	// Paging: after_seq and limit.
	page, err := ca.BrowserJournal(ctx, s.ID, 2, 2)
	if err != nil || !slices.Equal(seqsOf(page.Entries), []int64{3, 4}) || page.NextAfterSeq != 4 {
		t.Errorf("journal page after 2, limit 2 = %+v, %v", page, err)
	}

	// Retention: the latest 20 entries of short actions...
	s2, err := ca.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer ca.CloseBrowserSession(context.WithoutCancel(ctx), s2.ID)
	for range 25 {
		act(t, ca, s2.ID, apitype.BrowserAction{Op: "evaluate", Expression: `1`}, nil)
	}
	if got, want := seqsOf(journalOf(t, ca, s2.ID)), seqRange(6, 25); !slices.Equal(got, want) {
		t.Errorf("after 25 actions with 20 kept: seqs %v, want %v", got, want)
	}
	// ... and fewer of long ones: the byte budget (4 KiB) binds first.
	long := site.URL + "/" + strings.Repeat("p", 400)
	for range 15 {
		act(t, ca, s2.ID, apitype.BrowserAction{Op: "navigate", URL: long}, nil)
	}
	es = journalOf(t, ca, s2.ID)
	var bytes int
	for _, e := range es {
		bytes += len(e.Op) + len(e.Summary) + len(e.Reason) + 64
	}
	if n := len(es); n >= 15 || n < 5 || bytes > browser.MinJournalBytes || es[n-1].Seq != 40 || !slices.Equal(seqsOf(es), seqRange(41-int64(n), 40)) {
		t.Errorf("after 15 long actions: %d entries of %d bytes, seqs %v; want fewer than 15, within %d bytes, ending at 40, no gaps",
			n, bytes, seqsOf(es), browser.MinJournalBytes)
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestBrowserJournalWriteFailure: when the database refuses the journal's
// write, the action is refused with journal_unavailable and does not run,
// and the session admits nothing more even once writes work again; a
// failed finish leaves the entry unknown and stops the session too. The
// database really refuses: the test installs a trigger that aborts the
// write through its own connection to the daemon's database file.
// Positive controls: the same actions run before the failure, and in a
// new session after it.
func TestBrowserJournalWriteFailure(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	site := newHitServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := d.Client
	db, err := sql.Open("sqlite", store.DSN(filepath.Join(d.DataDir, daemon.DBFile)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseBrowserSession(context.WithoutCancel(ctx), s.ID)
	act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/before"}, nil)
	if site.count("/before") != 1 {
		t.Fatalf("the positive control's navigation reached the site %d times, want 1", site.count("/before"))
	}

	run(`CREATE TRIGGER test_refuse_begin BEFORE INSERT ON browser_journal BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`)
	err = c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/during"}, nil)
	if !errcode.Has(err, errcode.JournalUnavailable) {
		t.Fatalf("navigate while the journal cannot be written = %v, want journal_unavailable", err)
	}
	run(`DROP TRIGGER test_refuse_begin`)
	err = c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/after"}, nil)
	if !errcode.Has(err, errcode.JournalUnavailable) {
		t.Errorf("navigate once writes work again = %v, want journal_unavailable (the session stays stopped)", err)
	}
	if n, m := site.count("/during"), site.count("/after"); n != 0 || m != 0 {
		t.Errorf("refused navigations reached the site %d and %d times, want 0", n, m)
	}
	if got := seqsOf(journalOf(t, c, s.ID)); !slices.Equal(got, []int64{1}) {
		t.Errorf("journal after the refusal: seqs %v, want [1]", got)
	}

	// A new session works (positive control)...
	s2, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseBrowserSession(context.WithoutCancel(ctx), s2.ID)
	act(t, c, s2.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/new-session"}, nil)
	if site.count("/new-session") != 1 {
		t.Errorf("a new session's navigation reached the site %d times, want 1", site.count("/new-session"))
	}
	// ... until its finish cannot be written: the action ran, its entry
	// reads unknown, and the session admits nothing more.
	run(`CREATE TRIGGER test_refuse_finish BEFORE UPDATE ON browser_journal BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`)
	act(t, c, s2.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/unfinished"}, nil)
	run(`DROP TRIGGER test_refuse_finish`)
	if site.count("/unfinished") != 1 {
		t.Errorf("the navigation whose finish failed reached the site %d times, want 1", site.count("/unfinished"))
	}
	es := journalOf(t, c, s2.ID)
	if len(es) != 2 || es[0].Outcome != "ok" || es[1].Outcome != "unknown" || es[1].FinishedAt != nil {
		t.Errorf("journal after a failed finish = %+v, want ok then unknown", es)
	}
	err = c.BrowserAction(ctx, s2.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/later"}, nil)
	if !errcode.Has(err, errcode.JournalUnavailable) || site.count("/later") != 0 {
		t.Errorf("navigate after a failed finish = %v (reached the site %d times), want journal_unavailable", err, site.count("/later"))
	}
}

// TestBrowserJournalKill9: the daemon dies (kill -9) under a running
// action; after a restart on the same data directory the entry reads
// unknown, nothing replays it, no session is open (nothing resumes at
// start-up, though a checkpoint was kept), and the checkpoint resumes
// when asked.
func TestBrowserJournalKill9(t *testing.T) {
	t.Parallel()
	needChromium(t)
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	site := newHitServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	s, err := d.Client.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	act(t, d.Client, s.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/start?q=1"}, nil)
	cp, err := d.Client.CheckpointBrowserSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	// An action that never ends, and that the site sees run.
	go func() {
		_ = d.Client.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "evaluate", TimeoutMS: 110000,
			Expression: `fetch("/ran"); new Promise(() => {})`}, nil)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		es := journalOf(t, d.Client, s.ID)
		if len(es) == 2 && es[1].Outcome == "running" && site.count("/ran") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the long action did not start: journal %+v, site hits %d", es, site.count("/ran"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.Kill9(t)

	d2 := testenv.StartDaemonProcess(t, dataDir)
	es := journalOf(t, d2.Client, s.ID)
	if len(es) != 2 || es[0].Outcome != "ok" || es[1].Seq != 2 || es[1].Op != "evaluate" || es[1].Outcome != "unknown" || es[1].FinishedAt != nil {
		t.Fatalf("journal after kill -9 and restart = %+v, want ok then evaluate unknown", es)
	}
	if sessions, err := d2.Client.BrowserSessions(ctx); err != nil || len(sessions) != 0 {
		t.Errorf("sessions after the restart = %+v, %v; want none (nothing resumes at start-up)", sessions, err)
	}
	// Give a replay, if there were one, time to reach the site.
	time.Sleep(2 * time.Second)
	if n := site.count("/ran"); n != 1 {
		t.Errorf("the unknown action reached the site %d times, want 1 (never replayed)", n)
	}
	if got := journalOf(t, d2.Client, s.ID); len(got) != 2 || got[1].Outcome != "unknown" {
		t.Errorf("journal a while after the restart = %+v", got)
	}
	if cps, err := d2.Client.BrowserCheckpoints(ctx); err != nil || len(cps) != 1 || cps[0].ID != cp.ID {
		t.Errorf("checkpoints after the restart = %+v, %v; want %s", cps, err, cp.ID)
	}

	// Resuming is explicit, and works after the restart.
	rs, err := d2.Client.ResumeBrowserCheckpoint(ctx, cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rs.URL != site.URL+"/start" || site.count("/start") != 2 {
		t.Errorf("resumed session at %q (site hits %d), want %s/start", rs.URL, site.count("/start"), site.URL)
	}
	if err := d2.Client.CloseBrowserSession(ctx, rs.ID); err != nil {
		t.Fatal(err)
	}
	if err := d2.Stop(t); err != nil {
		t.Errorf("daemon stop: %v", err)
	}
	testenv.CheckNoProcesses(t, dataDir)
}

// TestBrowserCheckpoints: a checkpoint records the mode, options, the
// pages' URLs without query, fragment or credentials, and the selected
// page; resume opens a new session like it; a tenant keeps at most the
// configured number (then checkpoint_limit); delete; another tenant's
// checkpoint is 404 like an unknown one, and its list shows only its own.
func TestBrowserCheckpoints(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.BrowserMaxCheckpoints = 3 })
	site := newHitServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, keyA := tenantKey(t, d, "acme", "execution")
	_, keyB := tenantKey(t, d, "other", "execution")
	ca, cb := client.New(d.URL, keyA.Secret), client.New(d.URL, keyB.Secret)

	s, err := ca.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process", Viewport: &apitype.Viewport{Width: 900, Height: 650}, Locale: "fr-FR"})
	if err != nil {
		t.Fatal(err)
	}
	defer ca.CloseBrowserSession(context.WithoutCancel(ctx), s.ID)
	act(t, ca, s.ID, apitype.BrowserAction{Op: "navigate", URL: site.URL + "/path/one?q=secret#frag"}, nil)
	act(t, ca, s.ID, apitype.BrowserAction{Op: "pages", Action: "new", URL: site.URL + "/two?token=secret"}, nil)
	act(t, ca, s.ID, apitype.BrowserAction{Op: "pages", Action: "new"}, nil)
	act(t, ca, s.ID, apitype.BrowserAction{Op: "pages", Action: "select", Index: ptrInt(1)}, nil)

	out, err := stateCLI(t, d, keyA.Secret, "browser", "checkpoint", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	cp, err := ca.BrowserCheckpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantURLs := []string{site.URL + "/path/one", site.URL + "/two", "about:blank"}
	if !strings.HasPrefix(cp.ID, "bcp_") || cp.Mode != "process" || !slices.Equal(cp.URLs, wantURLs) || cp.Selected != 1 ||
		cp.Options.Viewport == nil || *cp.Options.Viewport != (apitype.Viewport{Width: 900, Height: 650}) || cp.Options.Locale != "fr-FR" {
		t.Errorf("checkpoint = %+v, want process, URLs %v, selected 1, the viewport and locale", cp, wantURLs)
	}
	if raw := fmt.Sprintf("%+v", cp); strings.Contains(raw, "secret") || strings.Contains(raw, "frag") {
		t.Errorf("checkpoint keeps a query or fragment: %s", raw)
	}

	// A remote session (here at the process session's own browser) is
	// refused: resuming it would need its CDP URL, never stored.
	port, err := os.ReadFile(filepath.Join(d.DataDir, "browser", "profile-"+s.ID, "DevToolsActivePort"))
	lines := strings.Split(strings.TrimSpace(string(port)), "\n")
	if err != nil || len(lines) != 2 {
		t.Fatalf("DevToolsActivePort = %q, %v", port, err)
	}
	rm, err := ca.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "remote", CDPURL: "ws://127.0.0.1:" + lines[0] + lines[1]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.CheckpointBrowserSession(ctx, rm.ID); !errcode.Has(err, errcode.CheckpointUnsupported) {
		t.Errorf("checkpoint of a remote session = %v, want checkpoint_unsupported", err)
	}
	if err := ca.CloseBrowserSession(ctx, rm.ID); err != nil {
		t.Fatal(err)
	}

	// Another tenant: 404 like an unknown checkpoint, and nothing
	// happens to it; its list is its own.
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := cb.BrowserCheckpoint(ctx, id); return err },
		"delete": func() error { return cb.DeleteBrowserCheckpoint(ctx, id) },
		"resume": func() error { _, err := cb.ResumeBrowserCheckpoint(ctx, id); return err },
	} {
		if err := call(); !errcode.Has(err, errcode.CheckpointNotFound) {
			t.Errorf("another tenant's %s = %v, want checkpoint_not_found", name, err)
		}
	}
	if _, err := ca.BrowserCheckpoint(ctx, "bcp_aaaaaaaaaaaaaaaaaaaaaaaaaa"); !errcode.Has(err, errcode.CheckpointNotFound) {
		t.Errorf("an unknown checkpoint = %v, want checkpoint_not_found", err)
	}
	if _, err := cb.CheckpointBrowserSession(ctx, s.ID); !errcode.Has(err, errcode.SessionNotFound) {
		t.Errorf("another tenant's checkpoint of the session = %v, want session_not_found", err)
	}
	if l, err := cb.BrowserCheckpoints(ctx); err != nil || len(l) != 0 {
		t.Errorf("another tenant's list = %+v, %v; want none", l, err)
	}
	if l, err := ca.BrowserCheckpoints(ctx); err != nil || len(l) != 1 || l[0].ID != id {
		t.Errorf("the owner's list = %+v, %v; want %s", l, err, id)
	}

	// Resume: a new session on the same mode, the same pages, the same
	// page selected (by the CLI, with the owner's key).
	out, err = stateCLI(t, d, keyA.Secret, "browser", "resume", id)
	if err != nil {
		t.Fatal(err)
	}
	rid := strings.TrimSpace(out)
	defer ca.CloseBrowserSession(context.WithoutCancel(ctx), rid)
	rs, err := ca.BrowserSession(ctx, rid)
	if err != nil || rid == s.ID || rs.Mode != "process" || rs.Pages != 3 || rs.Viewport != (apitype.Viewport{Width: 900, Height: 650}) {
		t.Fatalf("resumed session %s = %+v, %v; want a new process session with 3 pages at 900x650", rid, rs, err)
	}
	var pages []apitype.BrowserPage
	act(t, ca, rid, apitype.BrowserAction{Op: "pages"}, &pages)
	var urls []string
	cur := -1
	for _, p := range pages {
		urls = append(urls, p.URL)
		if p.Current {
			cur = p.Index
		}
	}
	if !slices.Equal(urls, wantURLs) || cur != 1 {
		t.Errorf("resumed pages = %v, current %d; want %v, current 1", urls, cur, wantURLs)
	}
	if lang := evalString(t, ca, rid, `navigator.language`); lang != "fr-FR" {
		t.Errorf("resumed session's language = %q, want fr-FR", lang)
	}
	if es := journalOf(t, ca, rid); len(es) < 3 || es[0].Op != "navigate" || es[1].Op != "pages" {
		t.Errorf("resumed session's journal = %+v, want its navigations", es)
	}

	// At most 3 per tenant, then checkpoint_limit; another tenant's count
	// is its own.
	for range 2 {
		if _, err := ca.CheckpointBrowserSession(ctx, rid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ca.CheckpointBrowserSession(ctx, rid); !errcode.Has(err, errcode.CheckpointLimit) {
		t.Errorf("a fourth checkpoint = %v, want checkpoint_limit", err)
	}
	sb, err := cb.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.CloseBrowserSession(context.WithoutCancel(ctx), sb.ID)
	if _, err := cb.CheckpointBrowserSession(ctx, sb.ID); err != nil {
		t.Errorf("another tenant's first checkpoint: %v", err)
	}

	// ls and rm by the CLI; then there is room again.
	out, err = stateCLI(t, d, keyA.Secret, "browser", "checkpoint", "ls")
	if err != nil || strings.Count(out, "bcp_") != 3 || !strings.Contains(out, id) {
		t.Errorf("berth browser checkpoint ls = %q, %v; want 3 checkpoints", out, err)
	}
	if _, err := stateCLI(t, d, keyA.Secret, "browser", "checkpoint", "rm", id); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.BrowserCheckpoint(ctx, id); !errcode.Has(err, errcode.CheckpointNotFound) {
		t.Errorf("a deleted checkpoint = %v, want checkpoint_not_found", err)
	}
	if _, err := ca.CheckpointBrowserSession(ctx, rid); err != nil {
		t.Errorf("a checkpoint after a delete: %v", err)
	}
}

func ptrInt(i int) *int { return &i }
