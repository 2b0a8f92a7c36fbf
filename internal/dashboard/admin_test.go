package dashboard

import (
	"fmt"
	"testing"
	"time"
)

// TestSecretShelf checks that a new key's secret is given once, to the
// session that made it only, and that the shelf stays bounded.
func TestSecretShelf(t *testing.T) {
	t.Parallel()
	var s secretShelf
	mine, other := &session{}, &session{}
	s.put(mine, "key_1", "bk_secret")
	if got := s.take(other, "key_1"); got != "" {
		t.Errorf("another session took %q, want nothing", got)
	}
	if got := s.take(mine, "key_1"); got != "bk_secret" {
		t.Errorf("take = %q, want the secret (the control)", got)
	}
	if got := s.take(mine, "key_1"); got != "" {
		t.Errorf("second take = %q, want nothing", got)
	}
	s.put(mine, "key_2", "bk_old")
	s.m[shelfKey{mine, "key_2"}] = shelved{secret: "bk_old", at: time.Now().Add(-2 * secretTTL)}
	if got := s.take(mine, "key_2"); got != "" {
		t.Errorf("a stale secret was taken: %q", got)
	}
	for i := range maxSecrets + 10 {
		s.put(mine, fmt.Sprint("key_", i), "x")
	}
	if len(s.m) > maxSecrets {
		t.Errorf("the shelf holds %d secrets, over %d", len(s.m), maxSecrets)
	}
}
