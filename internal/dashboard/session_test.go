package dashboard

import (
	"testing"
	"time"
)

// TestSessionExpiry checks the idle and the absolute expiry with an
// injected clock, and that signing out ends a session.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ss := newSessions(30*time.Minute, 12*time.Hour)
	ss.now = func() time.Time { return now }

	idle, _ := ss.create("bk_idle")
	busy, _ := ss.create("bk_busy")
	gone, _ := ss.create("bk_gone")
	ss.end(gone)
	if ss.get(gone) != nil {
		t.Error("a signed-out session is still live")
	}
	if ss.get("not-a-session") != nil || ss.get("") != nil {
		t.Error("an unknown cookie value finds a session")
	}

	// Used every 20 minutes, busy outlives the idle expiry; idle does not.
	for range 3 {
		now = now.Add(20 * time.Minute)
		if ss.get(busy) == nil {
			t.Fatalf("a session used every 20 minutes expired at %s", now)
		}
	}
	if ss.get(idle) != nil {
		t.Error("a session unused for an hour is still live (idle expiry 30 minutes)")
	}

	// Whatever its use, busy ends 12 hours after sign-in.
	for now.Before(time.Date(2026, 1, 1, 11, 50, 0, 0, time.UTC)) {
		now = now.Add(20 * time.Minute)
		if ss.get(busy) == nil {
			t.Fatalf("a session used every 20 minutes expired at %s, before its 12 hours", now)
		}
	}
	now = now.Add(20 * time.Minute)
	if ss.get(busy) != nil {
		t.Errorf("a session is live at %s, past its 12 hours", now)
	}
}

// TestSessionsBounded checks that past maxSessions the least recently
// used session ends, and the rest stay.
func TestSessionsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ss := newSessions(time.Hour, 12*time.Hour)
	ss.now = func() time.Time { return now }
	first, _ := ss.create("bk_first")
	var ids []string
	for range maxSessions - 1 {
		now = now.Add(time.Millisecond)
		id, _ := ss.create("bk_x")
		ids = append(ids, id)
	}
	now = now.Add(time.Millisecond)
	ss.create("bk_last")
	if ss.get(first) != nil {
		t.Error("the least recently used session survived a full table")
	}
	if ss.get(ids[0]) == nil || ss.get(ids[len(ids)-1]) == nil {
		t.Error("a more recent session ended")
	}
}
