package browser

// Remote providers: a remote-mode session whose browser is a session of a
// hosted browser service (Browserbase, Steel), created and released
// through the service's REST API with credentials from the daemon's
// configuration only. See docs/api.md "Remote providers".

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Provider is a hosted browser service. Two implement it (Browserbase and
// Steel); internal/daemon's provider tests run both through one suite
// against fakes of their documented APIs (internal/testenv/providerfake).
// Every method is safe for concurrent use, bounded in time by ctx and by
// the provider's own call timeout, and never puts a credential in an
// error or a log.
type Provider interface {
	// Name is the provider's name in requests: browserbase or steel.
	Name() string
	// Create starts a session tagged with tag (Berth's session ID) that
	// ends by itself after at most maxDuration, and returns its ID and
	// the CDP WebSocket URL to connect to. The URL is a secret: it
	// carries the credential the provider checks. An error wrapping
	// ErrOutcomeUnknown means the request may have created a session
	// whose answer was lost: look it up with Find.
	Create(ctx context.Context, tag string, maxDuration time.Duration) (id, connectURL string, err error)
	// Release ends session id. A session that has already ended is
	// released.
	Release(ctx context.Context, id string) error
	// Find returns the IDs of the running sessions tagged with tag.
	Find(ctx context.Context, tag string) ([]string, error)
}

// createAnswer classifies the answer of a provider's create: an error of
// 5xx may come from a gateway that passed the request on, and an answer
// without a session ID does not say whether one was made; both are
// ErrOutcomeUnknown, for the caller to reconcile.
func createAnswer(err error, id string) error {
	var he *httpError
	switch {
	case errors.As(err, &he) && he.status >= 500:
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	case err != nil:
		return err
	case id == "":
		return fmt.Errorf("%w: the answer has no session ID", ErrOutcomeUnknown)
	}
	return nil
}

// releaseUnusable releases session id, made but unusable for why (its
// connect URL): the caller gets no ID to release it with.
func releaseUnusable(ctx context.Context, p Provider, id string, why error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return errors.Join(why, p.Release(rctx, id))
}

// ErrOutcomeUnknown marks a Create whose request may have reached the
// provider while its answer did not reach Berth (a timeout, a connection
// closed after sending, an answer Berth could not read).
var ErrOutcomeUnknown = errors.New("the outcome is unknown")

// Provider names.
const (
	ProviderBrowserbase = "browserbase"
	ProviderSteel       = "steel"
)

// Provider call bounds.
const (
	// DefaultProviderTimeout bounds one call to a provider's API.
	DefaultProviderTimeout = 30 * time.Second
	// releaseTimeout bounds a release (and the look-up before it) when a
	// session closes.
	releaseTimeout = 10 * time.Second
	// pendingFor is how long Berth keeps trying to release a provider
	// session it could not release (or whose creation's outcome it does
	// not know); the session's own timeout at the provider ends it
	// anyway.
	pendingFor = 10 * time.Minute
	// maxProviderAnswer bounds an answer read from a provider.
	maxProviderAnswer = 1 << 20
	// maxPending bounds the releases waiting for a retry.
	maxPending = 1024
)

// Secret is a credential: it prints, and logs, as REDACTED.
type Secret string

// String hides the secret from fmt.
func (Secret) String() string { return "REDACTED" }

// GoString hides the secret from %#v.
func (Secret) GoString() string { return "REDACTED" }

// LogValue hides the secret from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// MarshalText hides the secret from encoders (a config logged as JSON).
func (Secret) MarshalText() ([]byte, error) { return []byte("REDACTED"), nil }

// providerHTTP is the client of every provider: no redirect is followed
// (a 3xx is an error: a credential header must not travel to another
// host), and each call is bounded by its context.
func providerHTTP() *http.Client {
	return &http.Client{
		Transport:     http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// providerCall is one JSON call to a provider's API.
type providerCall struct {
	client  *http.Client
	header  string // the credential header
	key     Secret
	timeout time.Duration
}

// httpError is an answer outside 2xx.
type httpError struct {
	status int
	body   string // a bounded, credential-free excerpt, for the log
}

func (e *httpError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.status, e.body)
}

// do sends in (when not nil) as JSON to method url and decodes a 2xx
// answer into out (when not nil). A failure before the request could have
// left Berth (a refused connection, an unknown host) is a plain error; one
// after it may have is wrapped with ErrOutcomeUnknown (the caller decides
// whether that matters).
func (c providerCall) do(ctx context.Context, method, u string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set(c.header, string(c.key))
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		err = c.scrub(err)
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return err // never sent
		}
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderAnswer))
	if err != nil {
		return fmt.Errorf("%w: reading the answer: %w", ErrOutcomeUnknown, c.scrub(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt := string(b)
		if len(excerpt) > 512 {
			excerpt = excerpt[:512]
		}
		return &httpError{status: resp.StatusCode, body: c.scrubString(excerpt)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%w: decoding the answer: %w", ErrOutcomeUnknown, err)
		}
	}
	return nil
}

// scrub returns err with every occurrence of the credential replaced.
func (c providerCall) scrub(err error) error {
	if err == nil || c.key == "" {
		return err
	}
	s := err.Error()
	if t := c.scrubString(s); t != s {
		return errors.New(t)
	}
	return err
}

func (c providerCall) scrubString(s string) string {
	return scrubSecrets(s, string(c.key))
}

// scrubSecrets replaces each secret in s, as it is and query-escaped,
// with REDACTED.
func scrubSecrets(s string, secrets ...string) string {
	for _, v := range secrets {
		if len(v) < 4 {
			continue
		}
		s = strings.ReplaceAll(s, v, "REDACTED")
		s = strings.ReplaceAll(s, url.QueryEscape(v), "REDACTED")
	}
	return s
}

// failure turns an error of provider p's API into the client's error: the
// provider refusing (an HTTP status), or not answering.
func providerFailure(p, what string, err error) error {
	var he *httpError
	if errors.As(err, &he) {
		hint := ""
		switch he.status {
		case http.StatusUnauthorized, http.StatusForbidden:
			hint = ": check the daemon's " + p + " credentials"
		case http.StatusTooManyRequests:
			hint = ": the account's session or rate limit is reached"
		}
		return errcode.ProviderFailed.Wrap(err, "%s refused to %s (HTTP %d)%s", p, what, he.status, hint)
	}
	return errcode.ProviderFailed.Wrap(err, "%s did not answer the request to %s", p, what)
}

// baseURL checks a provider's API base URL: http or https, no
// credentials, no query; "" is def.
func baseURL(raw, def string) (string, error) {
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http or https base URL without credentials or query", RedactURL(raw))
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// checkConnectURL accepts a connect URL a provider answered: wss, or ws
// when the API itself is plain http (a local or test deployment), so that
// a credential never travels in clear text to a provider reached over
// https.
func checkConnectURL(p, raw, api string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("%s answered a connect URL that is not a URL", p)
	case u.Scheme == "wss", u.Scheme == "ws" && strings.HasPrefix(api, "http://"):
		return nil
	}
	return fmt.Errorf("%s answered a connect URL of scheme %q, not wss", p, u.Scheme)
}

// providerState is a session's session at its provider.
type providerState struct {
	p          Provider
	id         string // the provider's session ID; "" once released
	connectURL string // secret
}

// createProviderSession creates the session's provider session and
// returns its connect URL. A creation whose outcome is unknown is looked
// up by the session's ID and released; what cannot be released now is
// left to the manager's retries.
func (s *Session) createProviderSession(ctx context.Context) (string, error) {
	p := s.m.cfg.Providers[s.req.Provider]
	id, connectURL, err := p.Create(ctx, s.id, s.maxDur)
	if err == nil {
		s.mu.Lock()
		s.provider = providerState{p: p, id: id, connectURL: connectURL}
		closed := s.state != apitype.BrowserOpen // closed meanwhile (an expiry, the daemon stopping)
		s.mu.Unlock()
		s.m.log.Info("provider session created", "session_id", s.id, "provider", p.Name(), "provider_session_id", id)
		if closed {
			s.releaseProvider("closed_while_opening")
			return "", errcode.SessionClosed.New("browser session %s was closed while it opened", s.id)
		}
		return connectURL, nil
	}
	if !errors.Is(err, ErrOutcomeUnknown) {
		s.m.log.Warn("provider session not created", "session_id", s.id, "provider", p.Name(), "err", err)
		return "", providerFailure(p.Name(), "create a session", err)
	}
	s.m.log.Warn("provider session creation outcome unknown; reconciling", "session_id", s.id, "provider", p.Name(), "err", err)
	if n, rerr := s.m.reconcile(p, s.id, s.tenant); rerr != nil {
		s.m.pending.add(pendingRelease{p: p, tag: s.id, tenant: s.tenant})
		return "", errcode.ProviderFailed.Wrap(err, "%s did not answer the request to create a session, and looking for a session it may have made failed too; "+
			"Berth keeps trying to release it for %s (the provider ends it at its timeout anyway)", p.Name(), pendingFor)
	} else if n > 0 {
		return "", errcode.ProviderFailed.Wrap(err, "%s did not answer the request to create a session; the session it had made was released", p.Name())
	}
	return "", errcode.ProviderFailed.Wrap(err, "%s did not answer the request to create a session; it has no session of this one", p.Name())
}

// connectFailure reports that the provider session could not be reached,
// with the connect URL (a secret) scrubbed from the cause. Errors of the
// caller's making pass as they are.
func (s *Session) connectFailure(err error) error {
	s.mu.Lock()
	ps := s.provider
	s.mu.Unlock()
	if ps.p == nil || err == nil {
		return err
	}
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return err
	}
	secrets := []string{ps.connectURL}
	if u, perr := url.Parse(ps.connectURL); perr == nil {
		for _, vs := range u.Query() { // a signing key, an API key
			secrets = append(secrets, vs...)
		}
	}
	return errcode.ProviderFailed.Wrap(errors.New(scrubSecrets(err.Error(), secrets...)),
		"connecting to the %s session failed", ps.p.Name())
}

// releaseProvider releases the session's provider session, once, bounded;
// a failure is logged and left to the manager's retries.
func (s *Session) releaseProvider(reason string) {
	s.mu.Lock()
	ps := s.provider
	s.provider.id, s.provider.connectURL = "", ""
	s.mu.Unlock()
	if ps.p == nil || ps.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := ps.p.Release(ctx, ps.id); err != nil {
		s.m.log.Warn("releasing the provider session failed; retrying in the background", "session_id", s.id,
			"provider", ps.p.Name(), "provider_session_id", ps.id, "reason", reason, "err", err)
		s.m.pending.add(pendingRelease{p: ps.p, id: ps.id, tenant: s.tenant})
		return
	}
	s.m.log.Info("provider session released", "session_id", s.id, "provider", ps.p.Name(), "provider_session_id", ps.id, "reason", reason)
}

// reconcile releases the running sessions of p tagged with tag and
// returns how many it released.
func (m *Manager) reconcile(p Provider, tag, tenant string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*releaseTimeout)
	defer cancel()
	ids, err := p.Find(ctx, tag)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, id := range ids {
		if err := p.Release(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		m.log.Info("provider session released", "session_id", tag, "tenant", tenant, "provider", p.Name(), "provider_session_id", id, "reason", "reconciled")
	}
	return len(ids), errors.Join(errs...)
}

// pendingRelease is a provider session to release later: by ID, or, when
// its creation's outcome was unknown, by the tag it was created with.
type pendingRelease struct {
	p       Provider
	id, tag string
	tenant  string
	until   time.Time     // given up after
	next    time.Time     // next attempt
	wait    time.Duration // before the attempt after next
}

// pendingReleases are the releases the manager retries.
type pendingReleases struct {
	mu    sync.Mutex // guards items
	items []pendingRelease
}

func (q *pendingReleases) add(r pendingRelease) {
	now := time.Now()
	r.until, r.next, r.wait = now.Add(pendingFor), now.Add(time.Second), 2*time.Second
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= maxPending {
		q.items = q.items[1:] // the oldest has had the most tries
	}
	q.items = append(q.items, r)
}

// due takes the releases whose next attempt is due.
func (q *pendingReleases) due(now time.Time) []pendingRelease {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []pendingRelease
	keep := q.items[:0]
	for _, r := range q.items {
		if !now.Before(r.next) {
			out = append(out, r)
		} else {
			keep = append(keep, r)
		}
	}
	q.items = keep
	return out
}

func (q *pendingReleases) requeue(r pendingRelease) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, r)
}

// retryReleases retries the pending releases until ctx ends, backing off
// each from 1 s to 30 s, and gives one up after pendingFor.
func (m *Manager) retryReleases(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, r := range m.pending.due(now) {
				m.retryRelease(r, now)
			}
		}
	}
}

// retryRelease makes one attempt at r, and requeues it or gives it up.
func (m *Manager) retryRelease(r pendingRelease, now time.Time) bool {
	var err error
	if r.id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		err = r.p.Release(ctx, r.id)
		cancel()
		if err == nil {
			m.log.Info("provider session released", "tenant", r.tenant, "provider", r.p.Name(), "provider_session_id", r.id, "reason", "retried")
		}
	} else {
		_, err = m.reconcile(r.p, r.tag, r.tenant)
	}
	if err == nil {
		return true
	}
	if now.After(r.until) {
		m.log.Error("gave up releasing a provider session; its timeout at the provider ends it", "tenant", r.tenant,
			"provider", r.p.Name(), "provider_session_id", r.id, "session_id", r.tag, "err", err)
		return false
	}
	r.next, r.wait = now.Add(r.wait), min(2*r.wait, 30*time.Second)
	m.pending.requeue(r)
	return false
}

// flushReleases makes a last attempt at every pending release when the
// daemon stops, and logs what stays.
func (m *Manager) flushReleases() {
	items := m.pending.due(time.Now().Add(pendingFor))
	var wg sync.WaitGroup
	for _, r := range items {
		wg.Go(func() {
			r.until = time.Time{} // no retry after this one
			m.retryRelease(r, time.Now())
		})
	}
	wg.Wait()
}

// ProviderNames lists the providers configured on this daemon.
func (m *Manager) ProviderNames() []string {
	var out []string
	for _, n := range []string{ProviderBrowserbase, ProviderSteel} {
		if m.cfg.Providers[n] != nil {
			out = append(out, n)
		}
	}
	return out
}

// releaseProviders releases the provider sessions of every session at
// once (a daemon stopping must not wait for them one by one).
func (m *Manager) releaseProviders(reason string) {
	var wg sync.WaitGroup
	for _, s := range m.List() {
		wg.Go(func() { s.releaseProvider(reason) })
	}
	wg.Wait()
}
