package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/wire"
)

// Live view and human-control wire types, under names code outside this
// module can use.
type (
	BrowserControl      = apitype.BrowserControl
	BrowserControlLease = apitype.BrowserControlLease
	BrowserLiveLink     = apitype.BrowserLiveLink
	LiveMessage         = apitype.LiveMessage
	LiveEvent           = apitype.LiveEvent
)

// ControlLeaseHeader carries a lease token on a session's DELETE and on
// the CDP endpoint's handshake.
const ControlLeaseHeader = "Berth-Control-Lease"

// AcquireBrowserControl takes session id over for ttl (0: 30 s; 1 s to
// 2 min): until it is released or expires, only calls carrying the
// returned token act on the session.
func (c *Client) AcquireBrowserControl(ctx context.Context, id string, ttl time.Duration) (apitype.BrowserControlLease, error) {
	var out apitype.BrowserControlLease
	err := c.doJSON(ctx, http.MethodPost, brsPath(id, "control"), nil, apitype.BrowserControlRequest{TTLMS: ttl.Milliseconds()}, &out)
	return out, err
}

// RenewBrowserControl extends lease token to ttl from now (0: 30 s).
func (c *Client) RenewBrowserControl(ctx context.Context, id, token string, ttl time.Duration) (apitype.BrowserControlLease, error) {
	var out apitype.BrowserControlLease
	err := c.doJSON(ctx, http.MethodPost, brsPath(id, "control", "renew"), nil,
		apitype.BrowserControlRequest{Token: token, TTLMS: ttl.Milliseconds()}, &out)
	return out, err
}

// ReleaseBrowserControl ends lease token: automation acts again.
func (c *Client) ReleaseBrowserControl(ctx context.Context, id, token string) error {
	return c.doJSON(ctx, http.MethodPost, brsPath(id, "control", "release"), nil, apitype.BrowserControlRequest{Token: token}, nil)
}

// BrowserControlState reports who drives session id (never the token).
func (c *Client) BrowserControlState(ctx context.Context, id string) (apitype.BrowserControl, error) {
	var out apitype.BrowserControl
	err := c.doJSON(ctx, http.MethodGet, brsPath(id, "control"), nil, nil, &out)
	return out, err
}

// CloseBrowserSessionLease closes a session while its lease is held, with
// the lease's token ("" is CloseBrowserSession).
func (c *Client) CloseBrowserSessionLease(ctx context.Context, id, lease string) error {
	if lease == "" {
		return c.CloseBrowserSession(ctx, id)
	}
	cl := *c
	cl.header = c.header.Clone()
	if cl.header == nil {
		cl.header = http.Header{}
	}
	cl.header.Set(ControlLeaseHeader, lease)
	return cl.CloseBrowserSession(ctx, id)
}

// BrowserLiveLink mints a view link of session id: a URL that shows the
// session live in a browser for 10 minutes, without the API key.
func (c *Client) BrowserLiveLink(ctx context.Context, id string) (apitype.BrowserLiveLink, error) {
	var out apitype.BrowserLiveLink
	err := c.doJSON(ctx, http.MethodPost, brsPath(id, "live", "links"), nil, nil, &out)
	return out, err
}

// BrowserLiveFrame returns a PNG of session id's current page and when it
// was taken (a frame taken earlier, when a capture was already running).
func (c *Client) BrowserLiveFrame(ctx context.Context, id string) ([]byte, time.Time, error) {
	resp, err := c.do(ctx, http.MethodGet, brsPath(id, "live", "frame"), nil, nil, "")
	if err != nil {
		return nil, time.Time{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, time.Time{}, err
	}
	at, _ := time.Parse(time.RFC3339Nano, resp.Header.Get("Berth-Frame-Time"))
	return b, at, nil
}

// LiveConn is a live viewer's connection: frames in, input out. A
// goroutine reads ahead a few messages, so a Next that gives up waiting
// leaves the connection open (coder/websocket closes a connection whose
// read is canceled).
type LiveConn struct {
	conn *websocket.Conn
	msgs chan []byte
	done chan struct{} // closed when the reader ends; err is then set
	err  error
	stop context.CancelFunc
}

func newLiveConn(conn *websocket.Conn) *LiveConn {
	ctx, stop := context.WithCancel(context.Background())
	l := &LiveConn{conn: conn, msgs: make(chan []byte, 8), done: make(chan struct{}), stop: stop}
	go func() {
		defer close(l.done)
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				l.err = err
				return
			}
			select {
			case l.msgs <- b:
			case <-ctx.Done():
				l.err = ctx.Err()
				return
			}
		}
	}()
	return l
}

// DialBrowserLive opens a live view of session id.
func (c *Client) DialBrowserLive(ctx context.Context, id string) (*LiveConn, error) {
	u := "ws" + strings.TrimPrefix(c.base, "http") + brsPath(id, "live")
	h := c.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Authorization", "Bearer "+c.token)
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			// The daemon's error, decoded as every other call's.
			if werr := wire.ErrorFromResponse(resp); werr != nil {
				return nil, werr
			}
		}
		return nil, err
	}
	conn.SetReadLimit(32 << 20)
	return newLiveConn(conn), nil
}

// Next reads the next message: a frame, or the answer to an input. When
// ctx ends first, the connection stays open; when the connection has
// ended, the error says how (websocket.CloseStatus reads its status).
func (l *LiveConn) Next(ctx context.Context) (apitype.LiveMessage, error) {
	var m apitype.LiveMessage
	var b []byte
	select {
	case b = <-l.msgs:
	case <-ctx.Done():
		return m, ctx.Err()
	case <-l.done:
		select {
		case b = <-l.msgs: // what came before the end
		default:
			return m, l.err
		}
	}
	err := json.Unmarshal(b, &m)
	return m, err
}

// Input sends an input event with lease token; a non-zero id asks for an
// ack (errors are always answered, with the id).
func (l *LiveConn) Input(ctx context.Context, id int64, lease string, ev apitype.LiveEvent) error {
	b, err := json.Marshal(apitype.LiveMessage{Type: apitype.LiveMsgInput, ID: id, Lease: lease, Event: &ev})
	if err != nil {
		return err
	}
	return l.conn.Write(ctx, websocket.MessageText, b)
}

// Close closes the connection.
func (l *LiveConn) Close() error {
	err := l.conn.Close(websocket.StatusNormalClosure, "")
	l.stop()
	<-l.done
	return err
}
