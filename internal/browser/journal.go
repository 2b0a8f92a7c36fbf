package browser

import (
	"context"

	"github.com/berthdev/berth/internal/apitype"
)

// The durable journal of a session's actions.

// journalBegin records that action a starts and returns the function that
// records its end. (Stub: the journal is not built yet.)
func (s *Session) journalBegin(ctx context.Context, a apitype.BrowserAction) (finish func(error), err error) {
	return func(error) {}, nil
}
