package dashboard

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

type browsersPage struct {
	Sessions    []apitype.BrowserSession
	Checkpoints []apitype.BrowserCheckpoint
	Recordings  []apitype.BrowserRecording
	// Off says why browser sessions cannot open here, if so.
	Off string
}

func (d *Dashboard) handleBrowsers(rq *req) {
	var p browsersPage
	sessions, err := rq.c.BrowserSessions(rq.ctx())
	if d.unavailable(rq, err, &p.Off) {
		return
	}
	p.Sessions = sessions
	// Checkpoints and recordings outlive their sessions: the key's
	// tenant's, newest first.
	if cps, err := rq.c.BrowserCheckpoints(rq.ctx()); err == nil {
		slices.Reverse(cps)
		p.Checkpoints = cps
	}
	if recs, err := rq.c.Recordings(rq.ctx()); err == nil {
		slices.Reverse(recs)
		p.Recordings = recs
	}
	if p.Off == "" {
		if sys, err := rq.c.System(rq.ctx()); err == nil && !sys.Browser.Available {
			p.Off = sys.Browser.Reason
		}
	}
	rq.render(d, "browsers", p)
}

func (d *Dashboard) handleOpenBrowser(rq *req) {
	if _, err := rq.c.OpenBrowserSession(rq.ctx(), apitype.CreateBrowserSessionRequest{Mode: rq.r.PostFormValue("mode")}); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers")
}

func (d *Dashboard) handleCloseBrowser(rq *req) {
	if err := rq.c.CloseBrowserSession(rq.ctx(), rq.r.PathValue("id")); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/browsers")
}

// handleLiveView mints a view link of the session (POST .../live/links)
// and opens it: the daemon's own live view page (/live/{token}), whose
// token is its capability for ten minutes. The link's path is kept, so
// the page opens on the origin the person uses.
func (d *Dashboard) handleLiveView(rq *req) {
	link, err := rq.c.BrowserLiveLink(rq.ctx(), rq.r.PathValue("id"))
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	u, err := url.Parse(link.URL)
	if err != nil {
		d.fail(rq.w, rq.r, errcode.Wrap(errcode.Internal, err, "the live view link is malformed"))
		return
	}
	http.Redirect(rq.w, rq.r, u.EscapedPath(), http.StatusSeeOther)
}

type templatesPage struct {
	Templates []apitype.Template
	Pools     []apitype.Pool
	Off       string
}

func (d *Dashboard) handleTemplates(rq *req) {
	var p templatesPage
	tpls, err := rq.c.Templates(rq.ctx())
	if d.unavailable(rq, err, &p.Off) {
		return
	}
	p.Templates = tpls
	if sys, err := rq.c.System(rq.ctx()); err == nil {
		p.Pools = sys.Pools
	}
	rq.render(d, "templates", p)
}
