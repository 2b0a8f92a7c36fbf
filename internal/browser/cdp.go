package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// maxCDPMessage bounds one CDP message through the proxy (screenshots and
// PDFs travel base64 in one message).
const maxCDPMessage = 256 << 20

// CDPURL returns the WebSocket URL of a session's browser, for the CDP
// endpoint. Only process-mode and isolated sessions have a browser of
// their own to hand out: a context-mode session's browser is shared with
// other sessions, which a CDP client could reach.
func (m *Manager) CDPURL(id string) (string, error) {
	s, err := m.Get(id)
	if err != nil {
		return "", err
	}
	if err := s.alive(); err != nil {
		return "", err
	}
	if s.mode == apitype.BrowserModeIsolated {
		s.mu.Lock()
		iso := s.iso
		s.mu.Unlock()
		if iso == nil || iso.wsURL == "" {
			return "", errcode.New(errcode.Unavailable, "the session's isolated browser has no CDP endpoint")
		}
		return iso.wsURL, nil // the loopback bridge to the DevTools port in its sandbox (isolated.go)
	}
	if s.mode != apitype.BrowserModeProcess {
		return "", errcode.CDPNeedsProcessMode.New("the CDP endpoint is for sessions with a browser of their own: open one with mode \"process\" or \"isolated\"")
	}
	// Chromium writes its port and browser path there once it listens.
	b, err := os.ReadFile(filepath.Join(s.dir, "DevToolsActivePort"))
	if err != nil {
		return "", errcode.Wrap(errcode.Unavailable, err, "the session's browser has no CDP endpoint")
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		return "", errcode.New(errcode.Unavailable, "the session's browser wrote no CDP address")
	}
	if _, err := strconv.Atoi(lines[0]); err != nil {
		return "", errcode.New(errcode.Unavailable, "the session's browser wrote a bad CDP port")
	}
	return "ws://127.0.0.1:" + lines[0] + lines[1], nil
}

// ProxyCDP serves a client's WebSocket as the session's CDP endpoint: every
// message is passed through both ways until either side closes. The
// session stays Berth's: it is kept in use while the connection lasts, and
// closing the session ends the connection.
func (m *Manager) ProxyCDP(w http.ResponseWriter, r *http.Request, id string) error {
	target, err := m.CDPURL(id)
	if err != nil {
		return err
	}
	s, _ := m.Get(id)
	dctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	upstream, _, err := websocket.Dial(dctx, target, nil)
	cancel()
	if err != nil {
		return errcode.Wrap(errcode.Unavailable, err, "connecting to the session's browser failed")
	}
	defer upstream.CloseNow()
	client, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept has answered
	}
	defer client.CloseNow()
	upstream.SetReadLimit(maxCDPMessage)
	client.SetReadLimit(maxCDPMessage)

	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	go func() { // the session closing ends the connection
		for ctx.Err() == nil {
			s.mu.Lock()
			open := s.state == apitype.BrowserOpen
			if open {
				s.lastUsed = time.Now()
			}
			s.mu.Unlock()
			if !open {
				stop()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	errc := make(chan error, 2)
	pump := func(dst, src *websocket.Conn) {
		// coder/websocket allows concurrent writes: the gate's replies
		// and the browser's messages share the client connection.
		for {
			typ, b, err := src.Read(ctx)
			if err != nil {
				errc <- err
				return
			}
			if err := dst.Write(ctx, typ, b); err != nil {
				errc <- err
				return
			}
		}
	}
	// While a person holds control, the client's input and navigation are
	// answered with a CDP error instead of reaching the browser, unless
	// the handshake presented the lease (control.go).
	lease := r.Header.Get(ControlLeaseHeader)
	go func() {
		for {
			typ, b, err := client.Read(ctx)
			if err != nil {
				errc <- err
				return
			}
			if reply := s.gateCDP(b, lease); reply != nil {
				err = client.Write(ctx, websocket.MessageText, reply)
			} else {
				err = upstream.Write(ctx, typ, b)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	go pump(client, upstream)
	err = <-errc
	stop()
	if websocket.CloseStatus(err) == websocket.StatusNormalClosure || errors.Is(err, context.Canceled) {
		return nil
	}
	client.Close(websocket.StatusGoingAway, "session ended")
	return nil
}

// ControlLeaseHeader carries a human-control lease token where a body
// cannot: the CDP endpoint's handshake, and DELETE of a session.
const ControlLeaseHeader = "Berth-Control-Lease"

// gatedCDP says whether a CDP method drives the page as a person would:
// those a lease excludes. Runtime.* is not gated: clients evaluate on
// attach and for every read, and the endpoint is the key holder's anyway;
// the lease coordinates, it is no sandbox.
func gatedCDP(method string) bool {
	switch method {
	case "Page.navigate", "Page.reload", "Page.navigateToHistoryEntry":
		return true
	}
	return strings.HasPrefix(method, "Input.")
}

// gateCDP returns the CDP error reply to message b when it is gated and a
// lease other than lease is held, nil to let it through.
func (s *Session) gateCDP(b []byte, lease string) []byte {
	var msg struct {
		ID        int64  `json:"id"`
		Method    string `json:"method"`
		SessionID string `json:"sessionId,omitempty"`
	}
	if !bytes.Contains(b, []byte(`"Input.`)) && !bytes.Contains(b, []byte(`"Page.`)) && !bytes.Contains(b, []byte(`\u`)) {
		return nil // cheaply: no gated method, even escaped
	}
	if json.Unmarshal(b, &msg) != nil || !gatedCDP(msg.Method) {
		return nil
	}
	err := s.ctl.blocks(lease)
	if err == nil {
		return nil
	}
	type cdpError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	reply, _ := json.Marshal(struct {
		ID        int64    `json:"id"`
		SessionID string   `json:"sessionId,omitempty"`
		Error     cdpError `json:"error"`
	}{msg.ID, msg.SessionID, cdpError{-32000, "control_held: " + err.Error()}})
	return reply
}
