package dashboard

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// handleCreateService starts a service from the sandbox page's form
// (PUT semantics of POST /v1/sandboxes/{id}/services: a service of the
// same name is replaced): a name, a shell command and the port it
// listens on, which gives it a readiness check (a TCP connect) and a
// preview link.
func (d *Dashboard) handleCreateService(rq *req) {
	id := rq.r.PathValue("id")
	spec := apitype.ServiceSpec{Name: strings.TrimSpace(rq.r.PostFormValue("name")), Command: strings.TrimSpace(rq.r.PostFormValue("command"))}
	if p := strings.TrimSpace(rq.r.PostFormValue("port")); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil {
			d.fail(rq.w, rq.r, errcode.PortInvalid.New("port %q is not a number", p))
			return
		}
		// A port gives the service a readiness check (a TCP connect),
		// so the page can say when its preview answers.
		spec.Port, spec.Ready = port, &apitype.Readiness{TCP: true}
	}
	if _, err := rq.c.PutService(rq.ctx(), id, spec); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/sandboxes/" + url.PathEscape(id))
}
