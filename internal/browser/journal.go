package browser

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// The durable journal of a session's actions. Before an action runs, an
// entry saying it started is committed to the store; after it ends, the
// entry gets its finish and outcome. Sequence numbers are the session's
// own, from 1, with no gaps in what was written. A start without a finish
// is an action whose outcome nobody knows (the daemon died under it): it
// reads as outcome unknown and is never run again. A write that fails
// stops the session from admitting any further action: an action that
// cannot be journaled does not run.

// JournalStore keeps the journal and the checkpoints of browser sessions
// (satisfied by *store.DB). Every write names the owning tenant, and
// every change is scoped by it.
type JournalStore interface {
	// BeginBrowserAction stores e, an action that starts.
	BeginBrowserAction(ctx context.Context, e JournalEntry) error
	// FinishBrowserAction stores the end of the entry (tenant, session,
	// seq) and deletes the session's entries with a sequence number below
	// pruneBelow (0: none).
	FinishBrowserAction(ctx context.Context, tenant, session string, seq int64, at time.Time, outcome, reason string, pruneBelow int64) error
	// BrowserJournal returns session's entries after sequence number
	// after, at most limit, oldest first; its tenant is "" when it has
	// none.
	BrowserJournal(ctx context.Context, session string, after int64, limit int) (tenant string, entries []JournalEntry, err error)

	CheckpointStore
}

// JournalEntry is one action in a session's journal.
type JournalEntry struct {
	Tenant   string
	Session  string
	Seq      int64
	Op       string
	Summary  string // what the action was on: see journalSummary
	Started  time.Time
	Finished time.Time // zero until it finishes
	Outcome  string    // ok, error, or "" until it finishes
	Reason   string    // the error's reason and message, for outcome error
}

// Journal defaults and bounds.
const (
	DefaultJournalEntries = 1000
	MaxJournalEntries     = 10000
	DefaultJournalBytes   = 8 << 20
	// MinJournalBytes is the least byte budget: a few of the largest
	// entries.
	MinJournalBytes = 4 << 10

	maxSummary      = 256
	maxReason       = 512
	entryOverhead   = 64 // what a row costs besides its texts
	journalWriteTTL = 15 * time.Second
)

// Outcomes of journal entries.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeUnknown = "unknown" // started, never finished: never replayed
	OutcomeRunning = "running" // the action running now
)

// journal is a session's journal state. seq, sizes and bytes are guarded
// by the session's busy lock (one action at a time writes them); failed
// and running by its mu.
type journal struct {
	seq     int64
	sizes   []entrySize // the entries kept, oldest first
	bytes   int64       // their sum
	failed  error       // the first failed write: nothing is admitted after it
	running int64       // the sequence number of the action running now, 0 for none
}

type entrySize struct {
	seq  int64
	size int64
}

func entryBytes(e JournalEntry) int64 {
	return int64(len(e.Op) + len(e.Summary) + len(e.Reason) + entryOverhead)
}

// journalBegin records that action a starts and returns the function that
// records its end. It refuses the action (journal_unavailable) when the
// start cannot be written or an earlier write of the session failed. With
// no store (unit tests of this package) there is no journal.
func (s *Session) journalBegin(ctx context.Context, a apitype.BrowserAction) (finish func(error), err error) {
	st := s.m.cfg.Journal
	if st == nil {
		return func(error) {}, nil
	}
	j := &s.journal
	s.mu.Lock()
	failed := j.failed
	s.mu.Unlock()
	if failed != nil {
		return nil, errcode.JournalUnavailable.New("the journal of browser session %s could not be written, so it admits no more actions; close it and open another", s.id)
	}
	e := JournalEntry{Tenant: s.tenant, Session: s.id, Seq: j.seq + 1, Op: bounded(a.Op, 64), Summary: journalSummary(a), Started: time.Now()}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalWriteTTL)
	defer cancel()
	if err := st.BeginBrowserAction(wctx, e); err != nil {
		s.journalFailed(err)
		return nil, errcode.JournalUnavailable.Wrap(err, "the journal of browser session %s could not be written, so the action did not run and the session admits no more", s.id)
	}
	j.seq = e.Seq
	s.mu.Lock()
	j.running = e.Seq
	s.mu.Unlock()
	return func(err error) {
		s.mu.Lock()
		j.running = 0
		s.mu.Unlock()
		e.Finished, e.Outcome = time.Now(), OutcomeOK
		if err != nil {
			e.Outcome, e.Reason = OutcomeError, bounded(errorText(err), maxReason)
		}
		j.sizes = append(j.sizes, entrySize{e.Seq, entryBytes(e)})
		j.bytes += entryBytes(e)
		var pruneBelow int64
		maxN, maxB := s.m.cfg.MaxJournalEntries, s.m.cfg.MaxJournalBytes
		for len(j.sizes) > 1 && (len(j.sizes) > maxN || j.bytes > maxB) {
			j.bytes -= j.sizes[0].size
			j.sizes = j.sizes[1:]
			pruneBelow = j.sizes[0].seq
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalWriteTTL)
		defer cancel()
		if werr := st.FinishBrowserAction(wctx, e.Tenant, e.Session, e.Seq, e.Finished, e.Outcome, e.Reason, pruneBelow); werr != nil {
			s.journalFailed(werr)
		}
	}, nil
}

// journalFailed remembers the session's first failed journal write.
func (s *Session) journalFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal.failed == nil {
		s.journal.failed = err
		s.m.log.Error("browser journal write failed; the session admits no more actions", "session_id", s.id, "err", err)
	}
}

// errorText is what the journal keeps of an action's error: its reason
// and its client-safe message.
func errorText(err error) string {
	var ce *errcode.Error
	if !errors.As(err, &ce) {
		return "internal: the action failed" // the cause is logged, not kept
	}
	if ce.Reason != "" {
		return ce.Reason + ": " + ce.Message
	}
	return string(ce.Code) + ": " + ce.Message
}

// journalSummary is what the journal keeps of an action besides its op:
// its target, URL (without credentials, query or fragment) and the shape
// of its arguments, never their secrets: not the text typed or filled,
// the values selected, a prompt's text, an evaluated expression, an
// upload's contents or the lease token. At most maxSummary bytes.
func journalSummary(a apitype.BrowserAction) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	if a.URL != "" {
		add("url", RedactURL(a.URL))
	}
	add("target", targetSummary(a.Target, a.Selector))
	if a.To != nil {
		add("to", targetSummary(a.To, ""))
	}
	switch a.Op {
	case "evaluate":
		add("expression_bytes", strconv.Itoa(len(a.Expression)))
	case "fill", "type":
		add("value_chars", strconv.Itoa(utf8.RuneCountInString(a.Value)))
	case "press":
		add("key", bounded(a.Value, 32))
	case "select":
		add("values", strconv.Itoa(len(a.Values)))
	case "upload":
		names := make([]string, 0, len(a.Files))
		for _, f := range a.Files {
			names = append(names, bounded(f.Name, 64))
		}
		add("files", strings.Join(names, ","))
	case "pages":
		add("action", bounded(a.Action, 16))
		if a.Index != nil {
			add("index", strconv.Itoa(*a.Index))
		}
	case "dialog":
		add("accept", strconv.FormatBool(a.Accept))
	case "waitFor":
		add("state", bounded(a.State, 16))
		add("load_state", bounded(a.LoadState, 24))
	case "mouseClick", "mouseMove", "dragCoordinates":
		add("at", fmt.Sprintf("%g,%g", a.X, a.Y))
	case "screenshot":
		add("format", bounded(a.Format, 8))
	}
	if a.TimeoutMS != 0 {
		add("timeout_ms", strconv.FormatInt(a.TimeoutMS, 10))
	}
	return bounded(strings.Join(parts, " "), maxSummary)
}

// targetSummary names a target: a CSS selector or a semantic query, each
// part bounded.
func targetSummary(t *apitype.BrowserTarget, selector string) string {
	if t == nil {
		return bounded(selector, 96)
	}
	var b strings.Builder
	if t.Selector != "" {
		b.WriteString(bounded(t.Selector, 96))
	}
	if t.By != "" {
		b.WriteString(bounded(t.By, 16) + ":")
		if t.Role != "" {
			b.WriteString(bounded(t.Role, 24) + "/")
		}
		b.WriteString(strconv.Quote(bounded(t.Value+t.Name, 64)))
	}
	if t.Nth != nil {
		b.WriteString("#" + strconv.Itoa(*t.Nth))
	}
	if len(t.Frame) > 0 {
		b.WriteString(" in " + strconv.Itoa(len(t.Frame)) + " frames")
	}
	return b.String()
}

// bounded cuts s to at most n bytes, on a rune boundary, and replaces
// line breaks: journal texts are one line.
func bounded(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == 0 {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Journal returns session id's journal entries after sequence number
// after, at most limit, as tenant scope sees them (AnyTenant: every
// tenant's): a live session's or a closed one's, including one of an
// earlier daemon. The action running now reads as running; an entry
// started and never finished, as unknown. Another tenant's session is
// not found, like a missing one.
func (m *Manager) Journal(ctx context.Context, scope, id string, after int64, limit int) ([]apitype.BrowserJournalEntry, error) {
	st := m.cfg.Journal
	if st == nil {
		return nil, errcode.JournalUnavailable.New("this daemon keeps no browser journal")
	}
	var running int64
	live, lerr := m.Get(id)
	if lerr == nil {
		if scope != AnyTenant && live.tenant != scope {
			return nil, errcode.SessionNotFound.New("browser session %q not found", id)
		}
		live.mu.Lock()
		running = live.journal.running
		live.mu.Unlock()
	}
	tenant, entries, err := st.BrowserJournal(ctx, id, after, limit)
	if err != nil {
		return nil, err
	}
	if lerr != nil && (tenant == "" || (scope != AnyTenant && tenant != scope)) {
		return nil, errcode.SessionNotFound.New("browser session %q not found", id)
	}
	out := make([]apitype.BrowserJournalEntry, 0, len(entries))
	for _, e := range entries {
		v := apitype.BrowserJournalEntry{Seq: e.Seq, Op: e.Op, Summary: e.Summary, StartedAt: e.Started.UTC(), Outcome: e.Outcome, Reason: e.Reason}
		switch {
		case !e.Finished.IsZero():
			f := e.Finished.UTC()
			v.FinishedAt = &f
		case lerr == nil && e.Seq == running:
			v.Outcome = OutcomeRunning
		default:
			v.Outcome = OutcomeUnknown
		}
		out = append(out, v)
	}
	return out, nil
}

// JournalTenant returns the tenant of session id as its journal recorded
// it ("" when it has no journal), for a session that is no longer live.
func (m *Manager) JournalTenant(ctx context.Context, id string) (string, error) {
	if m.cfg.Journal == nil {
		return "", nil
	}
	tenant, _, err := m.cfg.Journal.BrowserJournal(ctx, id, 0, 1)
	return tenant, err
}

// clamp is v within [lo, hi], or def when v is 0.
func clamp[T int | int64](v, def, lo, hi T) T {
	if v == 0 {
		return def
	}
	return min(max(v, lo), hi)
}
