package browser

import (
	"context"
	"fmt"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Bounds of the accessibility op: the seed's ARIA snapshot, at most 1 MiB
// of YAML and depth 20, and the boxes of at most maxAccessibilityBoxes
// refs.
const (
	maxAccessibilityDepth = 20
	maxAccessibilityBytes = 1 << 20
	maxAccessibilityBoxes = 5000
)

// Boxes answers the boxes of the refs of the latest snapshot (at most max),
// in top-viewport CSS pixels, without scrolling; truncated when there were
// more.
func (d *DOM) Boxes(ctx context.Context, max int) (map[string][4]float64, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var res struct {
		Boxes     map[string][4]float64 `json:"boxes"`
		Truncated bool                  `json:"truncated"`
	}
	if err := d.callValue(ctx, "boxes", map[string]int{"max": max}, &res); err != nil {
		return nil, false, fmt.Errorf("measuring boxes: %w", err)
	}
	return res.Boxes, res.Truncated, nil
}

// accessibility answers the page's ARIA snapshot (the snapshot op's YAML
// and refs), bounded by depth (default and at most 20) and 1 MiB, with
// each ref's box when asked.
func (s *Session) accessibility(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	depth := a.Depth
	switch {
	case depth < 0 || depth > maxAccessibilityDepth:
		return nil, errcode.InvalidFields(map[string]string{"depth": fmt.Sprintf("must be between 1 and %d (0: %d)", maxAccessibilityDepth, maxAccessibilityDepth)})
	case depth == 0:
		depth = maxAccessibilityDepth
	}
	snap, err := t.dom.Snapshot(ctx, SnapshotOptions{MaxDepth: depth, MaxElements: a.MaxElements, MaxBytes: maxAccessibilityBytes})
	if err != nil {
		return nil, err
	}
	out := map[string]any{"url": snap.URL, "title": snap.Title, "yaml": snap.YAML, "refs": snap.Refs, "truncated": snap.Truncated,
		"depth": depth, "max_bytes": maxAccessibilityBytes}
	if a.Boxes {
		boxes, cut, err := t.dom.Boxes(ctx, maxAccessibilityBoxes)
		if err != nil {
			return nil, err
		}
		if boxes == nil {
			boxes = map[string][4]float64{}
		}
		out["boxes"], out["boxes_truncated"] = boxes, cut
		out["coordinate_space"] = "main_viewport"
	}
	return out, nil
}
