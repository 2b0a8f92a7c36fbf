package dashboard

import (
	"net/url"
	"strings"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// maxBuildLog bounds the build log a template's page shows; the API's
// GET /v1/templates/{name}/log has the whole of it.
const maxBuildLog = 64 << 10

// templatePage is a template's page: the template, its build log (or why
// there is none), and the warm pools that keep sandboxes of it.
type templatePage struct {
	Template apitype.Template
	Log      string
	LogCut   bool
	NoLog    string
	Pools    []apitype.Pool
	Building bool
}

// handleBuildTemplate builds a template from the templates page's form
// (POST /v1/templates): name, base, environment (KEY=VALUE a line), run
// steps (a shell command a line) and the build's network. The API builds
// in the background and answers at once with state building; the
// template's page follows the build.
func (d *Dashboard) handleBuildTemplate(rq *req) {
	f := rq.r.PostForm
	req := apitype.BuildTemplateRequest{Name: strings.TrimSpace(f.Get("name")), From: strings.TrimSpace(f.Get("from"))}
	for line := range strings.Lines(f.Get("env")) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			d.fail(rq.w, rq.r, errcode.InvalidFields(map[string]string{"env": "each line is KEY=VALUE, not " + line}))
			return
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	for line := range strings.Lines(f.Get("steps")) {
		if line = strings.TrimSpace(line); line != "" {
			req.Steps = append(req.Steps, apitype.TemplateStep{Run: line})
		}
	}
	if f.Get("egress") != "" {
		req.Network = "egress"
	}
	t, err := rq.c.BuildTemplate(rq.ctx(), req)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/templates/" + url.PathEscape(t.Name))
}

// handleTemplate shows a template: its state (while it builds, the page's
// script reloads it every two seconds until it is ready or failed), its
// build log and its warm pools.
func (d *Dashboard) handleTemplate(rq *req) {
	name := rq.r.PathValue("name")
	t, err := rq.c.Template(rq.ctx(), name)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := templatePage{Template: t, Building: t.State == apitype.TemplateBuilding}
	if t.Source == apitype.TemplateBuilt && !p.Building {
		log, err := rq.c.TemplateLog(rq.ctx(), name)
		switch {
		case err != nil:
			p.NoLog = errMessage(err)
		case len(log) > maxBuildLog:
			p.Log, p.LogCut = log[len(log)-maxBuildLog:], true
		default:
			p.Log = log
		}
	}
	if sys, err := rq.c.System(rq.ctx()); err == nil {
		for _, pl := range sys.Pools {
			if pl.Template == t.Name {
				p.Pools = append(p.Pools, pl)
			}
		}
	}
	rq.render(d, "template", p)
}

// handleDeleteTemplate deletes a template (DELETE /v1/templates/{name});
// the API refuses while a sandbox, a template or a warm pool uses it, and
// the page shows why.
func (d *Dashboard) handleDeleteTemplate(rq *req) {
	if err := rq.c.DeleteTemplate(rq.ctx(), rq.r.PathValue("name")); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/templates")
}
