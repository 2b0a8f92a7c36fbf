package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
)

// BenchmarkBrowserJournal measures what the journal adds to every browser
// action: its two SQLite commits (the start before the action, the finish
// and pruning after, synchronous=FULL as the daemon runs them) on a real
// database, against the floor of a whole action, an evaluate of `1`
// through the API on the real daemon (journal included: it is always on).
// The ratio is the journal's share of the cheapest action.
func BenchmarkBrowserJournal(b *testing.B) {
	testenv.NeedChromium(b)
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "berth.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	d := testenv.StartDaemon(b, nil)
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseBrowserSession(ctx, s.ID)

	n := min(b.N, 300)
	var seq int64
	writes := measure(b, n, func() error {
		seq++
		e := browser.JournalEntry{Tenant: "ten_default", Session: "brs_bench", Seq: seq, Op: "navigate",
			Summary: "url=http://127.0.0.1:8080/form.html", Started: time.Now()}
		if err := db.BeginBrowserAction(ctx, e); err != nil {
			return err
		}
		// Pruning as with the default retention, once past it.
		return db.FinishBrowserAction(ctx, e.Tenant, e.Session, seq, time.Now(), browser.OutcomeOK, "", max(seq-browser.DefaultJournalEntries+1, 0))
	})
	actions := measure(b, n, func() error {
		return c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
	})
	report(b, "journal begin+finish (two SQLite commits)", writes, "evaluate `1` through the API, journal included", actions, "")
}
