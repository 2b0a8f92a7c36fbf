package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
)

// TestBrowserJournal: entries begin and finish, an unfinished one stays
// unfinished, pruning deletes below a sequence number, and every change
// is scoped by the tenant.
func TestBrowserJournal(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		db := open(t)
		ctx := context.Background()
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
		for seq := int64(1); seq <= 4; seq++ {
			e := browser.JournalEntry{Tenant: "ten_a", Session: "brs_1", Seq: seq, Op: "navigate", Summary: "url=http://x/", Started: t0.Add(time.Duration(seq) * time.Second)}
			if err := db.BeginBrowserAction(ctx, e); err != nil {
				t.Fatalf("BeginBrowserAction(%d): %v", seq, err)
			}
			if seq == 4 {
				break // left unfinished
			}
			outcome, reason := "ok", ""
			if seq == 2 {
				outcome, reason = "error", "url_blocked: no"
			}
			if err := db.FinishBrowserAction(ctx, "ten_a", "brs_1", seq, e.Started.Add(time.Millisecond), outcome, reason, 0); err != nil {
				t.Fatalf("FinishBrowserAction(%d): %v", seq, err)
			}
		}
		// The same sequence number twice is refused: entries are never
		// overwritten.
		if err := db.BeginBrowserAction(ctx, browser.JournalEntry{Tenant: "ten_a", Session: "brs_1", Seq: 2, Op: "x", Started: t0}); err == nil {
			t.Error("BeginBrowserAction of an existing seq succeeded")
		}
		tenant, got, err := db.BrowserJournal(ctx, "brs_1", 0, 100)
		if err != nil || tenant != "ten_a" {
			t.Fatalf("BrowserJournal = %q, %v", tenant, err)
		}
		want := []browser.JournalEntry{
			{Tenant: "ten_a", Session: "brs_1", Seq: 1, Op: "navigate", Summary: "url=http://x/", Started: t0.Add(time.Second), Finished: t0.Add(time.Second + time.Millisecond), Outcome: "ok"},
			{Tenant: "ten_a", Session: "brs_1", Seq: 2, Op: "navigate", Summary: "url=http://x/", Started: t0.Add(2 * time.Second), Finished: t0.Add(2*time.Second + time.Millisecond), Outcome: "error", Reason: "url_blocked: no"},
			{Tenant: "ten_a", Session: "brs_1", Seq: 3, Op: "navigate", Summary: "url=http://x/", Started: t0.Add(3 * time.Second), Finished: t0.Add(3*time.Second + time.Millisecond), Outcome: "ok"},
			{Tenant: "ten_a", Session: "brs_1", Seq: 4, Op: "navigate", Summary: "url=http://x/", Started: t0.Add(4 * time.Second)},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("BrowserJournal (-want +got):\n%s", diff)
		}
		if _, page, _ := db.BrowserJournal(ctx, "brs_1", 2, 1); len(page) != 1 || page[0].Seq != 3 {
			t.Errorf("BrowserJournal(after 2, limit 1) = %+v, want seq 3", page)
		}
		if tenant, none, err := db.BrowserJournal(ctx, "brs_none", 0, 10); tenant != "" || len(none) != 0 || err != nil {
			t.Errorf("BrowserJournal(unknown) = %q, %v, %v", tenant, none, err)
		}

		// Another tenant can neither finish nor prune the entries.
		if err := db.FinishBrowserAction(ctx, "ten_b", "brs_1", 4, t0, "ok", "", 4); err == nil {
			t.Error("FinishBrowserAction as another tenant succeeded")
		}
		if _, got, _ := db.BrowserJournal(ctx, "brs_1", 0, 100); len(got) != 4 || !got[3].Finished.IsZero() {
			t.Errorf("after another tenant's finish: %+v, want 4 entries, the last unfinished", got)
		}
		// Its owner finishes it and prunes below 3.
		if err := db.FinishBrowserAction(ctx, "ten_a", "brs_1", 4, t0.Add(5*time.Second), "ok", "", 3); err != nil {
			t.Fatal(err)
		}
		_, got, _ = db.BrowserJournal(ctx, "brs_1", 0, 100)
		var seqs []int64
		for _, e := range got {
			seqs = append(seqs, e.Seq)
		}
		if diff := cmp.Diff([]int64{3, 4}, seqs); diff != "" {
			t.Errorf("after pruning below 3 (-want +got):\n%s", diff)
		}
		// A finished entry is not finished again.
		if err := db.FinishBrowserAction(ctx, "ten_a", "brs_1", 4, t0, "error", "x", 0); err == nil {
			t.Error("finishing a finished entry succeeded")
		}
	})
}

// TestBrowserCheckpoints: put, get, list and delete by tenant scope, and
// the per-tenant limit.
func TestBrowserCheckpoints(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		db := open(t)
		ctx := context.Background()
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		mk := func(id, tenant string, i int) browser.Checkpoint {
			return browser.Checkpoint{ID: id, Tenant: tenant, Mode: "context", Selected: 1,
				Options: apitype.CreateBrowserSessionRequest{Mode: "context", Viewport: &apitype.Viewport{Width: 800, Height: 600}, Locale: "fr-FR"},
				URLs:    []string{"about:blank", "http://127.0.0.1:1/a"}, Created: t0.Add(time.Duration(i) * time.Second)}
		}
		for i, c := range []browser.Checkpoint{mk("bcp_1", "ten_a", 1), mk("bcp_2", "ten_a", 2), mk("bcp_3", "ten_b", 3)} {
			if err := db.PutBrowserCheckpoint(ctx, c, 2); err != nil {
				t.Fatalf("PutBrowserCheckpoint(%d): %v", i, err)
			}
		}
		if err := db.PutBrowserCheckpoint(ctx, mk("bcp_4", "ten_a", 4), 2); !errcode.Has(err, errcode.CheckpointLimit) {
			t.Errorf("a third checkpoint of ten_a = %v, want checkpoint_limit", err)
		}
		got, err := db.BrowserCheckpoint(ctx, "ten_a", "bcp_2")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(mk("bcp_2", "ten_a", 2), got); diff != "" {
			t.Errorf("BrowserCheckpoint (-want +got):\n%s", diff)
		}
		if _, err := db.BrowserCheckpoint(ctx, "ten_b", "bcp_2"); !errcode.Has(err, errcode.CheckpointNotFound) {
			t.Errorf("another tenant's BrowserCheckpoint = %v, want checkpoint_not_found", err)
		}
		if _, err := db.BrowserCheckpoint(ctx, browser.AnyTenant, "bcp_2"); err != nil {
			t.Errorf("an admin's BrowserCheckpoint = %v", err)
		}
		ids := func(scope string) []string {
			l, err := db.BrowserCheckpoints(ctx, scope)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, c := range l {
				out = append(out, c.ID)
			}
			return out
		}
		for scope, want := range map[string][]string{"ten_a": {"bcp_1", "bcp_2"}, "ten_b": {"bcp_3"}, browser.AnyTenant: {"bcp_1", "bcp_2", "bcp_3"}, "ten_c": nil} {
			if diff := cmp.Diff(want, ids(scope)); diff != "" {
				t.Errorf("BrowserCheckpoints(%s) (-want +got):\n%s", scope, diff)
			}
		}
		if err := db.DeleteBrowserCheckpoint(ctx, "ten_b", "bcp_1"); !errcode.Has(err, errcode.CheckpointNotFound) {
			t.Errorf("another tenant's delete = %v, want checkpoint_not_found", err)
		}
		if err := db.DeleteBrowserCheckpoint(ctx, "ten_a", "bcp_1"); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteBrowserCheckpoint(ctx, "ten_a", "bcp_1"); !errcode.Has(err, errcode.CheckpointNotFound) {
			t.Errorf("a second delete = %v, want checkpoint_not_found", err)
		}
		// Room again for ten_a.
		if err := db.PutBrowserCheckpoint(ctx, mk("bcp_4", "ten_a", 4), 2); err != nil {
			t.Errorf("a checkpoint after a delete: %v", err)
		}
	})
}
