package browser

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Human control: a person takes a session over for a while (a login, a
// CAPTCHA) with a lease, and automation waits until it is released or
// expires. A lease lives in the daemon's memory only: a restart ends it
// with the session. It excludes actions, the live view's input and the
// input of CDP clients that do not present it; it does not hold the
// session open (idle expiry and the maximum duration still close it).

// Lease bounds.
const (
	DefaultLeaseTTL = 30 * time.Second
	MinLeaseTTL     = time.Second
	MaxLeaseTTL     = 120 * time.Second
	leasePrefix     = "bcl_"
)

var leaseB32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// control is a session's human-control lease.
type control struct {
	// mu guards token and expires; no other lock is taken under it.
	mu      sync.Mutex
	token   string // "" when no lease was ever held or it was released
	expires time.Time
}

// live reports whether a lease is held at now, and its token.
func (c *control) live(now time.Time) (string, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == "" || !now.Before(c.expires) {
		return "", time.Time{}, false
	}
	return c.token, c.expires, true
}

// blocks returns 409 control_held when a lease is held and token is not
// its token, nil otherwise.
func (c *control) blocks(token string) error {
	held, exp, ok := c.live(time.Now())
	if ok && subtle.ConstantTimeCompare([]byte(held), []byte(token)) != 1 {
		return errcode.ControlHeld.New("a person holds control of this session until %s; automation waits (send the lease token to act)",
			exp.UTC().Format(time.RFC3339))
	}
	return nil
}

// admitControl lets an action with lease token run: any action runs when
// no lease is held; while one is, only an action carrying its token does.
// A token when no lease is held (released, expired) is 409
// control_not_held: the caller thinks it holds control and does not.
func (s *Session) admitControl(token string) error {
	if err := s.ctl.blocks(token); err != nil {
		return err
	}
	if _, _, ok := s.ctl.live(time.Now()); !ok && token != "" {
		return errcode.ControlNotHeld.New("no control lease is held on this session (released or expired); acquire one, or act without a lease")
	}
	return nil
}

// leaseTTL reads a lease's ttl_ms: 0 is the default.
func leaseTTL(ms int64) (time.Duration, error) {
	if ms == 0 {
		return DefaultLeaseTTL, nil
	}
	d := time.Duration(ms) * time.Millisecond
	if d < MinLeaseTTL || d > MaxLeaseTTL {
		return 0, errcode.InvalidFields(map[string]string{"ttl_ms": "must be between 1000 and 120000 (default 30000)"})
	}
	return d, nil
}

func newLeaseToken() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return leasePrefix + strings.ToLower(leaseB32.EncodeToString(b))
}

// AcquireControl gives the caller an exclusive lease on session id for
// ttlMS (0: 30 s). A lease held by someone else is 409 control_held.
func (m *Manager) AcquireControl(id string, ttlMS int64) (apitype.BrowserControlLease, error) {
	ttl, err := leaseTTL(ttlMS)
	if err != nil {
		return apitype.BrowserControlLease{}, err
	}
	s, err := m.Get(id)
	if err != nil {
		return apitype.BrowserControlLease{}, err
	}
	if err := s.alive(); err != nil {
		return apitype.BrowserControlLease{}, err
	}
	now := time.Now()
	s.ctl.mu.Lock()
	if s.ctl.token != "" && now.Before(s.ctl.expires) {
		exp := s.ctl.expires
		s.ctl.mu.Unlock()
		return apitype.BrowserControlLease{}, errcode.ControlHeld.New("control of this session is held until %s; wait for its release or expiry",
			exp.UTC().Format(time.RFC3339))
	}
	s.ctl.token, s.ctl.expires = newLeaseToken(), now.Add(ttl)
	out := apitype.BrowserControlLease{Token: s.ctl.token, ExpiresAt: s.ctl.expires.UTC()}
	s.ctl.mu.Unlock()
	s.touch()
	m.log.Info("browser control acquired", "session_id", id, "ttl_ms", ttl.Milliseconds())
	return out, nil
}

// holder checks that token is the live lease of s: 409 control_not_held
// when none is held, control_held when it is another's.
func (s *Session) holder(token string) error {
	if _, _, ok := s.ctl.live(time.Now()); !ok {
		return errcode.ControlNotHeld.New("no control lease is held on this session (released or expired)")
	}
	return s.ctl.blocks(token)
}

// RenewControl extends the lease token of session id to ttlMS from now.
func (m *Manager) RenewControl(id, token string, ttlMS int64) (apitype.BrowserControlLease, error) {
	ttl, err := leaseTTL(ttlMS)
	if err != nil {
		return apitype.BrowserControlLease{}, err
	}
	s, err := m.Get(id)
	if err != nil {
		return apitype.BrowserControlLease{}, err
	}
	if err := s.holder(token); err != nil {
		return apitype.BrowserControlLease{}, err
	}
	s.ctl.mu.Lock()
	s.ctl.expires = time.Now().Add(ttl)
	out := apitype.BrowserControlLease{Token: s.ctl.token, ExpiresAt: s.ctl.expires.UTC()}
	s.ctl.mu.Unlock()
	s.touch()
	return out, nil
}

// ReleaseControl ends the lease token of session id: automation acts
// again at once.
func (m *Manager) ReleaseControl(id, token string) error {
	s, err := m.Get(id)
	if err != nil {
		return err
	}
	if err := s.holder(token); err != nil {
		return err
	}
	s.ctl.mu.Lock()
	s.ctl.token, s.ctl.expires = "", time.Time{}
	s.ctl.mu.Unlock()
	s.touch()
	m.log.Info("browser control released", "session_id", id)
	return nil
}

// Control reports who drives session id, without the token.
func (m *Manager) Control(id string) (apitype.BrowserControl, error) {
	s, err := m.Get(id)
	if err != nil {
		return apitype.BrowserControl{}, err
	}
	if _, exp, ok := s.ctl.live(time.Now()); ok {
		exp = exp.UTC()
		return apitype.BrowserControl{Mode: apitype.ControlHuman, ExpiresAt: &exp}, nil
	}
	return apitype.BrowserControl{Mode: apitype.ControlAutomation}, nil
}

// CloseBy closes session id for a client: while a lease is held, only a
// client presenting its token may (409 control_held). The daemon's own
// expiry and shutdown close sessions without asking.
func (m *Manager) CloseBy(id, lease string) error {
	s, err := m.Get(id)
	if err != nil {
		return err
	}
	if err := s.ctl.blocks(lease); err != nil {
		return err
	}
	return m.Close(id)
}

// touch marks the session used now: a person acting on it.
func (s *Session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}
