package dashboard

import (
	"github.com/berthdev/berth/internal/apitype"
)

// systemPage is the system page: GET /v1/system, and each job action's
// health (GET /v1/actions), which is what berth doctor reads from a
// daemon; doctor's host checks run in the CLI on the daemon's machine.
type systemPage struct {
	apitype.System
	Actions []apitype.ActionHealth
	// ActionsOff says why the actions could not be read (jobs off here).
	ActionsOff string
}

func (d *Dashboard) handleSystem(rq *req) {
	sys, err := rq.c.System(rq.ctx())
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := systemPage{System: sys}
	if p.Actions, err = rq.c.Actions(rq.ctx()); err != nil {
		p.ActionsOff = errMessage(err)
	}
	rq.render(d, "system", p)
}
