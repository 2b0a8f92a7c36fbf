package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// Terminals: a page runs xterm.js (vendored, static/vendor/) and talks to
// the API's terminal routes through the dashboard: output by long polls
// (GET .../output?offset=N), keystrokes and resizes by POSTs with the
// session's CSRF token. The API's WebSocket is not used: the in-process
// transport cannot upgrade.

// terminalCSP is a terminal page's policy: the pages' own, plus inline
// styles, which xterm.js's DOM renderer writes into <style> elements it
// makes (its theme, its row sizes). Scripts stay 'self' only, and the
// terminal's output is drawn as text.
const terminalCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// maxTerminalInput bounds one keystroke batch a page sends.
const maxTerminalInput = 64 << 10

func (d *Dashboard) handleCreateTerminal(rq *req) {
	id := rq.r.PathValue("id")
	term, err := rq.c.CreateTerminal(rq.ctx(), id, apitype.CreateTerminalRequest{Cols: 100, Rows: 30})
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/sandboxes/" + url.PathEscape(id) + "/terminals/" + url.PathEscape(term.ID))
}

type terminalPage struct {
	SandboxID string
	Terminal  apitype.Terminal
	Base      string
}

func (d *Dashboard) handleTerminal(rq *req) {
	id, tid := rq.r.PathValue("id"), rq.r.PathValue("tid")
	terms, err := rq.c.Terminals(rq.ctx(), id)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := terminalPage{SandboxID: id, Base: "/ui/sandboxes/" + url.PathEscape(id) + "/terminals/" + url.PathEscape(tid)}
	found := false
	for _, t := range terms {
		if t.ID == tid {
			p.Terminal, found = t, true
		}
	}
	if !found {
		d.fail(rq.w, rq.r, errcode.TerminalNotFound.New("no terminal %s in sandbox %s", tid, id))
		return
	}
	rq.w.Header().Set("Content-Security-Policy", terminalCSP)
	rq.render(d, "terminal", p)
}

// handleTerminalOutput answers the terminal's output past ?offset=, once
// there is some (a long poll of up to 20 s), as the API's JSON.
func (d *Dashboard) handleTerminalOutput(rq *req) {
	var off int64
	if v := rq.r.URL.Query().Get("offset"); v != "" {
		if err := json.Unmarshal([]byte(v), &off); err != nil || off < 0 {
			d.fail(rq.w, rq.r, errcode.QueryInvalid.New("offset must be a non-negative integer"))
			return
		}
	}
	out, err := rq.c.TerminalOutput(rq.ctx(), rq.r.PathValue("id"), rq.r.PathValue("tid"),
		client.TerminalQuery{Offset: off, WaitMS: 20000})
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	wire.Encode(rq.w, http.StatusOK, out)
}

// handleTerminalInput types the request's body (raw bytes) into the
// terminal.
func (d *Dashboard) handleTerminalInput(rq *req) {
	data, err := io.ReadAll(http.MaxBytesReader(rq.w, rq.r.Body, maxTerminalInput))
	if err != nil {
		d.fail(rq.w, rq.r, errcode.BodyTooLarge.New("terminal input is at most %d bytes at a time", maxTerminalInput))
		return
	}
	if err := rq.c.TerminalInput(rq.ctx(), rq.r.PathValue("id"), rq.r.PathValue("tid"), data); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.w.WriteHeader(http.StatusNoContent)
}

func (d *Dashboard) handleTerminalResize(rq *req) {
	var size apitype.ResizeTerminalRequest
	if err := json.NewDecoder(http.MaxBytesReader(rq.w, rq.r.Body, maxForm)).Decode(&size); err != nil {
		d.fail(rq.w, rq.r, errcode.BodyInvalid.New("a resize is {\"cols\": N, \"rows\": N}"))
		return
	}
	if _, err := rq.c.ResizeTerminal(rq.ctx(), rq.r.PathValue("id"), rq.r.PathValue("tid"), size.Cols, size.Rows); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.w.WriteHeader(http.StatusNoContent)
}
