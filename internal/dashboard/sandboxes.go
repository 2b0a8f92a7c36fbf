package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// pageSize is how many sandboxes a list page shows: the API's cursor
// fetches the next, so a thousand sandboxes never render at once.
const pageSize = 50

type sandboxesPage struct {
	Sandboxes  []apitype.Sandbox
	Runtimes   []apitype.RuntimeInfo
	Cursor     string
	NextCursor string
}

func (d *Dashboard) handleSandboxes(rq *req) {
	cursor := rq.r.URL.Query().Get("cursor")
	list, err := rq.c.ListSandboxesPage(rq.ctx(), pageSize, cursor)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := sandboxesPage{Sandboxes: list.Sandboxes, Cursor: cursor, NextCursor: list.NextCursor, Runtimes: d.runtimes(rq)}
	rq.render(d, "sandboxes", p)
}

func (d *Dashboard) handleCreateSandbox(rq *req) {
	sb, err := rq.c.CreateSandbox(rq.ctx(), apitype.CreateSandboxRequest{
		Name: strings.TrimSpace(rq.r.PostFormValue("name")), Runtime: rq.r.PostFormValue("runtime")})
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/sandboxes/" + url.PathEscape(sb.ID))
}

type sandboxPage struct {
	Sandbox  apitype.Sandbox
	Running  bool
	Commands []apitype.Command
	Services []apitype.Service
	// Unavailable says why a part could not be shown.
	Unavailable string
}

func (d *Dashboard) handleSandbox(rq *req) {
	id := rq.r.PathValue("id")
	sb, err := rq.c.GetSandbox(rq.ctx(), id)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := sandboxPage{Sandbox: sb, Running: sb.State == "running"}
	// A call to a paused or hibernated sandbox wakes it: only a running
	// one's commands and services are read for the page.
	if p.Running {
		if p.Commands, err = rq.c.Commands(rq.ctx(), id); err != nil {
			p.Unavailable = errMessage(err)
		}
		if len(p.Commands) > 20 {
			p.Commands = p.Commands[:20]
		}
		if p.Services, err = rq.c.Services(rq.ctx(), id); err != nil {
			p.Unavailable = errMessage(err)
		}
	}
	rq.render(d, "sandbox", p)
}

func (d *Dashboard) handleLifecycle(rq *req) {
	id := rq.r.PathValue("id")
	var err error
	switch rq.r.PathValue("op") {
	case "pause":
		_, err = rq.c.PauseSandbox(rq.ctx(), id)
	case "resume":
		_, err = rq.c.ResumeSandbox(rq.ctx(), id)
	case "hibernate":
		_, err = rq.c.HibernateSandbox(rq.ctx(), id)
	case "delete":
		if err = rq.c.DeleteSandbox(rq.ctx(), id); err == nil {
			rq.redirect("/ui/sandboxes")
			return
		}
	default:
		err = errcode.RouteNotFound.New("no dashboard action %q", rq.r.PathValue("op"))
	}
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/sandboxes/" + url.PathEscape(id))
}

func (d *Dashboard) handleExec(rq *req) {
	id := rq.r.PathValue("id")
	cmd, err := rq.c.Exec(rq.ctx(), id, apitype.CreateCommandRequest{Command: rq.r.PostFormValue("command")})
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/sandboxes/" + url.PathEscape(id) + "/commands/" + url.PathEscape(cmd.ID))
}

type commandPage struct {
	SandboxID string
	Command   apitype.Command
	Running   bool
	StreamURL string
}

func (d *Dashboard) handleCommand(rq *req) {
	id, cid := rq.r.PathValue("id"), rq.r.PathValue("cid")
	cmd, err := rq.c.Command(rq.ctx(), id, cid, client.CommandQuery{})
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := commandPage{SandboxID: id, Command: cmd, Running: !cmd.Done()}
	if p.Running {
		q := url.Values{"stdout_offset": {strconv.FormatInt(cmd.NextStdoutOffset, 10)},
			"stderr_offset": {strconv.FormatInt(cmd.NextStderrOffset, 10)}}
		p.StreamURL = "/ui/sandboxes/" + url.PathEscape(id) + "/commands/" + url.PathEscape(cid) + "/stream?" + q.Encode()
	}
	rq.render(d, "command", p)
}

// streamEvent is one server-sent event of a command's page: output text,
// or the command's end.
type streamEvent struct {
	Data     string `json:"data,omitempty"`
	Status   string `json:"status,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// handleCommandStream follows a command's output through the API's
// stream and passes it on as server-sent events of text (the page sets
// it as text, never as HTML).
func (d *Dashboard) handleCommandStream(rq *req) {
	id, cid := rq.r.PathValue("id"), rq.r.PathValue("cid")
	q := rq.r.URL.Query()
	so, _ := strconv.ParseInt(q.Get("stdout_offset"), 10, 64)
	se, _ := strconv.ParseInt(q.Get("stderr_offset"), 10, 64)
	w := rq.w
	flusher, _ := w.(http.Flusher)
	started := false
	send := func(name string, ev streamEvent) error {
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		b, _ := json.Marshal(ev)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	final, err := rq.c.Stream(rq.ctx(), id, cid, max(so, 0), max(se, 0), func(ev client.Event) error {
		if ev.Name != "stdout" && ev.Name != "stderr" {
			return nil
		}
		return send(ev.Name, streamEvent{Data: eventText(ev.StreamEvent)})
	})
	switch {
	case err != nil && !started:
		d.apiFailed(rq, err)
	case err != nil:
		_ = send("failed", streamEvent{Data: errMessage(err)})
	case final != nil:
		_ = send("exit", streamEvent{Status: final.Status, ExitCode: final.ExitCode})
	}
}

func eventText(ev apitype.StreamEvent) string {
	if ev.DataBase64 != "" {
		if b, err := decodeBase64(ev.DataBase64); err == nil {
			return strings.ToValidUTF8(string(b), "\uFFFD")
		}
	}
	return ev.Data
}

func (d *Dashboard) handleCancel(rq *req) {
	id, cid := rq.r.PathValue("id"), rq.r.PathValue("cid")
	if _, err := rq.c.Cancel(rq.ctx(), id, cid); err != nil && !errcode.Has(err, errcode.CommandFinished) {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/sandboxes/" + url.PathEscape(id) + "/commands/" + url.PathEscape(cid))
}

func (d *Dashboard) handleServiceOp(rq *req) {
	id, name := rq.r.PathValue("id"), rq.r.PathValue("name")
	var err error
	switch rq.r.PathValue("op") {
	case "start":
		_, err = rq.c.StartService(rq.ctx(), id, name)
	case "stop":
		_, err = rq.c.StopService(rq.ctx(), id, name)
	default:
		err = errcode.RouteNotFound.New("no dashboard action %q", rq.r.PathValue("op"))
	}
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/sandboxes/" + url.PathEscape(id))
}

// handlePreview opens a port's preview: a signed link to the port's own
// preview host (never the dashboard's origin), where the app runs.
func (d *Dashboard) handlePreview(rq *req) {
	id := rq.r.PathValue("id")
	port, err := strconv.Atoi(rq.r.PathValue("port"))
	if err != nil {
		d.fail(rq.w, rq.r, errcode.PortInvalid.New("port %q is not a number", rq.r.PathValue("port")))
		return
	}
	pv, err := rq.c.Preview(rq.ctx(), id, port, time.Hour)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	to := pv.AuthURL
	if to == "" {
		to = pv.URL
	}
	if to == "" {
		d.fail(rq.w, rq.r, errcode.New(errcode.Unimplemented,
			"this daemon serves no preview hosts (berth serve --preview-domain); a port's app is reachable through the API only"))
		return
	}
	http.Redirect(rq.w, rq.r, to, http.StatusSeeOther)
}

// errMessage is err as a person reads it.
func errMessage(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// runtimesTTL is how long the create form's runtimes are kept: GET
// /v1/system counts every sandbox, which a list page of 50 need not pay.
const runtimesTTL = 30 * time.Second

// runtimeCache keeps the available runtimes, read through the API with
// the key of whoever asked first. Runtimes are the daemon's, the same for
// every key that may read GET /v1/system (any key).
type runtimeCache struct {
	mu  sync.Mutex // guards the fields below
	at  time.Time
	rts []apitype.RuntimeInfo
}

// runtimes returns the available runtimes (none if GET /v1/system fails:
// the form then offers the default only).
func (d *Dashboard) runtimes(rq *req) []apitype.RuntimeInfo {
	d.rtCache.mu.Lock()
	defer d.rtCache.mu.Unlock()
	if time.Since(d.rtCache.at) < runtimesTTL {
		return d.rtCache.rts
	}
	sys, err := rq.c.System(rq.ctx())
	if err != nil {
		return nil
	}
	var rts []apitype.RuntimeInfo
	for _, rt := range sys.Runtimes {
		if rt.Available {
			rts = append(rts, rt)
		}
	}
	d.rtCache.at, d.rtCache.rts = time.Now(), rts
	return rts
}
