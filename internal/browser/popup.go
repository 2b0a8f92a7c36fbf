package browser

import (
	"context"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/apitype"
)

// watchPopups enforces the URL guard on pages that pages open (popups,
// target=_blank links): one whose URL is not allowed is closed and the
// block recorded in diagnostics; an allowed one becomes a page of the
// session (not the current one), up to the page limit.
func (s *Session) watchPopups() {
	s.mu.Lock()
	root := s.root
	s.mu.Unlock()
	c := chromedp.FromContext(root)
	if c == nil {
		return
	}
	bctx := c.BrowserContextID
	_ = chromedp.ListenBrowser(root, func(ev any) {
		var info *target.Info
		switch e := ev.(type) {
		case *target.EventTargetCreated:
			info = e.TargetInfo
		case *target.EventTargetInfoChanged:
			info = e.TargetInfo
		}
		if info == nil || info.Type != "page" || info.OpenerID == "" || (bctx != "" && info.BrowserContextID != bctx) {
			return
		}
		// No CDP call may run in a listener: hand it over.
		go s.onPopup(root, *info)
	})
}

func (s *Session) onPopup(root context.Context, info target.Info) {
	ctx, cancel := context.WithTimeout(root, 10*time.Second)
	defer cancel()
	closeIt := func(why string) {
		_, _ = chromedp.CallBrowser(ctx, target.CloseTarget, target.CloseTargetParams{TargetID: info.TargetID})
		s.diag.add(apitype.BrowserEvent{Kind: "blocked", URL: RedactURL(info.URL), Text: why})
		s.dropPage(info.TargetID)
	}
	if info.URL != "" && allowedURL(info.URL) != nil {
		closeIt("popup to a URL that is not allowed")
		return
	}
	s.mu.Lock()
	if s.state != apitype.BrowserOpen || s.adopted[info.TargetID] {
		s.mu.Unlock()
		return
	}
	if len(s.pages) >= maxPages {
		s.mu.Unlock()
		closeIt("popup past the page limit")
		return
	}
	s.adopted[info.TargetID] = true
	s.mu.Unlock()
	t, err := makeTab(root, chromedp.WithTargetID(info.TargetID))
	if err == nil {
		err = s.attach(ctx, t)
	}
	if err != nil {
		return // it closed before we got to it
	}
	t.id = info.TargetID
	s.mu.Lock()
	if s.state == apitype.BrowserOpen {
		s.pages = append(s.pages, t)
		t = nil
	}
	s.mu.Unlock()
	if t != nil {
		t.cancel()
	}
}

// dropPage forgets a page the browser closed.
func (s *Session) dropPage(id target.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.pages {
		if i > 0 && p.id == id {
			s.pages = append(s.pages[:i], s.pages[i+1:]...)
			if s.current >= len(s.pages) || s.current == i {
				s.current = 0
			}
			return
		}
	}
}
