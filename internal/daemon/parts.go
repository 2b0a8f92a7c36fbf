package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// A part is a long-lived component of the daemon, in the one shape every
// component has: start returns once the part is ready for the parts
// started after it (what it runs in the background lives until stop, not
// until start's ctx ends); stop ends what start began and waits for it.
type part struct {
	name  string
	start func(context.Context) error
	stop  func(context.Context) error
	// stopTimeout bounds stop: its ctx ends then, and stop must return.
	stopTimeout time.Duration
}

// parts starts parts in order and stops the started ones in reverse
// order: the API stops taking requests before the jobs it would submit
// stop, and jobs stop before the sandbox manager drains its pools.
type parts struct {
	log     *slog.Logger
	started []part
}

// start starts each part in order. When one fails, the parts started
// before it are stopped (in reverse order) and every error is returned.
func (p *parts) start(ctx context.Context, all ...part) error {
	for _, pt := range all {
		t0 := time.Now()
		if err := pt.start(ctx); err != nil {
			return errors.Join(fmt.Errorf("starting %s: %w", pt.name, err), p.stop())
		}
		p.started = append(p.started, pt)
		p.log.Debug("started", "part", pt.name, "ms", time.Since(t0).Milliseconds())
	}
	return nil
}

// stop stops the started parts in reverse order, each within its timeout,
// and returns every error: none is dropped.
func (p *parts) stop() error {
	var errs []error
	for _, pt := range slices.Backward(p.started) {
		ctx, cancel := context.WithTimeout(context.Background(), pt.stopTimeout)
		t0 := time.Now()
		if err := pt.stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", pt.name, err))
		}
		cancel()
		p.log.Debug("stopped", "part", pt.name, "ms", time.Since(t0).Milliseconds())
	}
	p.started = nil
	return errors.Join(errs...)
}
