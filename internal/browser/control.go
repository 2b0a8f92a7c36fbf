package browser

// Human control: a person takes a session over for a while (a login, a
// CAPTCHA) with a lease, and automation waits until it is released or
// expires.

// admitControl lets an action with lease token run: any action runs when
// no lease is held; while one is, only an action carrying its token does.
// (Stub: leases are not built yet, so every action runs.)
func (s *Session) admitControl(token string) error { return nil }
