package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/mcpserver"
	"github.com/berthdev/berth/internal/wire"
)

// The MCP endpoint: Berth's tools (internal/mcpserver) as streamable HTTP
// at /mcp, stateless (each POST stands alone, as the 2026-07-28 revision
// has it; older revisions negotiate on initialize as they ask). The tools
// call the daemon's own routes in process with the request's key, so they
// can do exactly what the key can.
//
// A toolset is one key and the name in the Berth-Toolset header ("default"
// without one): its sandboxes carry a label derived from both (so they stay
// its own across restarts), and its browser sessions, checkpoints and
// outputs are remembered here. DELETE /mcp closes the toolset.

// ToolsetHeader names the toolset an MCP request acts for.
const ToolsetHeader = "Berth-Toolset"

// maxToolsets bounds the toolsets the daemon remembers; past it the least
// recently used is forgotten (its sandboxes stay reachable by label; its
// browser sessions idle out).
const maxToolsets = 4096

var toolsetName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// toolsets holds the daemon's MCP toolsets.
type toolsets struct {
	mu sync.Mutex
	m  map[string]*toolsetEntry
}

type toolsetEntry struct {
	ts   *mcpserver.Toolset
	used time.Time
}

// get returns the toolset of key and name, calling through c.
func (t *toolsets) get(keyID, name string, c *client.Client) *mcpserver.Toolset {
	return t.base(keyID, name).WithClient(c)
}

func (t *toolsets) base(keyID, name string) *mcpserver.Toolset {
	sum := sha256.Sum256([]byte(keyID + "\x00" + name))
	id := "mcp-" + hex.EncodeToString(sum[:10])
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*toolsetEntry{}
	}
	e, ok := t.m[id]
	if !ok {
		if len(t.m) >= maxToolsets {
			t.evictOldest()
		}
		e = &toolsetEntry{ts: mcpserver.NewToolset(id, nil)}
		t.m[id] = e
	}
	e.used = time.Now()
	return e.ts
}

func (t *toolsets) forget(ts *mcpserver.Toolset) {
	t.mu.Lock()
	delete(t.m, ts.ID())
	t.mu.Unlock()
}

func (t *toolsets) evictOldest() {
	var oldest string
	var at time.Time
	for id, e := range t.m {
		if oldest == "" || e.used.Before(at) {
			oldest, at = id, e.used
		}
	}
	delete(t.m, oldest)
}

// toolsetInfo is what the MCP handler passes to the tools, through the
// SDK's token info.
const toolsetInfo = "berth.toolset"

type toolsetCtxKey struct{}

func (s *Server) handleMCP() http.Handler {
	// The server (its tools' schemas) is built on the first request: a
	// daemon that serves no MCP pays nothing for it.
	server := sync.OnceValue(func() *mcp.Server {
		return mcpserver.New(func(_ context.Context, extra *mcp.RequestExtra) (*mcpserver.Toolset, error) {
			if extra != nil && extra.TokenInfo != nil {
				if ts, ok := extra.TokenInfo.Extra[toolsetInfo].(*mcpserver.Toolset); ok {
					return ts, nil
				}
			}
			return nil, errcode.New(errcode.Internal, "this MCP request carries no toolset")
		}, mcpserver.Options{Version: s.cfg.Version})
	})
	stream := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server() },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.log})
	// The SDK hands token info to the tools; the key was checked already
	// (authenticate), so the verifier only passes the toolset along.
	authed := mcpauth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*mcpauth.TokenInfo, error) {
		ts, _ := r.Context().Value(toolsetCtxKey{}).(*mcpserver.Toolset)
		return &mcpauth.TokenInfo{UserID: principalOf(r).KeyID, Expiration: time.Now().Add(time.Hour),
			Extra: map[string]any{toolsetInfo: ts}}, nil
	}, nil)(stream)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get(ToolsetHeader)
		if name == "" {
			name = "default"
		}
		if !toolsetName.MatchString(name) {
			s.fail(w, r, errcode.InvalidFields(map[string]string{ToolsetHeader: "1 to 64 letters, digits, dot, dash or underscore"}))
			return
		}
		p := principalOf(r)
		// The tools' REST requests are this request's: its ID, and the
		// rate limits it paid (creates' limits still apply).
		outer := requestID(r)
		inner := func(ctx context.Context) context.Context { return asInner(ctx, outer) }
		opts := []client.Option{client.WithHTTPClient(&http.Client{Transport: wire.InProcess{Handler: s, RemoteAddr: r.RemoteAddr, Context: inner}})}
		if u := r.Header.Get("Berth-User"); u != "" {
			opts = append(opts, client.WithUser(u))
		}
		// authenticate took the header, so it is "Bearer KEY".
		key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		c := client.New("http://"+r.Host, key, opts...)
		ts := s.toolsets.get(p.KeyID, name, c)
		if r.Method == http.MethodDelete {
			rep := ts.Close(r.Context())
			s.toolsets.forget(ts)
			wire.Encode(w, http.StatusOK, rep)
			return
		}
		ew := &mcpErrors{w: w, header: http.Header{}}
		authed.ServeHTTP(ew, r.WithContext(context.WithValue(r.Context(), toolsetCtxKey{}, ts)))
		switch {
		case ew.failed && ew.status == http.StatusMethodNotAllowed:
			w.Header().Set("Allow", "POST, DELETE")
			d := wire.Detail(errcode.MethodNotAllowed.New("%s is not allowed on /mcp: the endpoint is stateless and takes POST (and DELETE to close a toolset)", r.Method), requestID(r))
			wire.Encode(w, http.StatusMethodNotAllowed, apitype.ErrorBody{Error: d})
		case ew.failed:
			s.fail(w, r, ew.err())
		}
	})
}

// mcpErrors passes the MCP transport's answers through, except its HTTP
// errors (plain text, or a JSON-RPC error with a 4xx status), which it
// turns into Berth's error body so that every error of every route has
// one shape, code, reason and request ID. Tool errors are answers (200)
// and pass.
type mcpErrors struct {
	w      http.ResponseWriter
	header http.Header
	status int
	failed bool
	body   bytes.Buffer
}

func (e *mcpErrors) Header() http.Header { return e.header }

func (e *mcpErrors) WriteHeader(status int) {
	if e.status != 0 {
		return
	}
	e.status = status
	if status >= 400 {
		e.failed = true
		return
	}
	for k, v := range e.header {
		e.w.Header()[k] = v
	}
	e.w.WriteHeader(status)
}

func (e *mcpErrors) Write(p []byte) (int, error) {
	if e.status == 0 {
		e.WriteHeader(http.StatusOK)
	}
	if e.failed {
		if e.body.Len() < 4096 {
			e.body.Write(p[:min(len(p), 4096-e.body.Len())])
		}
		return len(p), nil
	}
	return e.w.Write(p)
}

func (e *mcpErrors) Flush() {
	if f, ok := e.w.(http.Flusher); ok && !e.failed && e.status != 0 {
		f.Flush()
	}
}

// err is the transport's refusal as a Berth error.
func (e *mcpErrors) err() error {
	msg := strings.TrimSpace(e.body.String())
	var rpc struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(e.body.Bytes(), &rpc) == nil && rpc.Error.Message != "" {
		msg = rpc.Error.Message
	}
	if msg == "" {
		msg = http.StatusText(e.status)
	}
	switch e.status {
	case http.StatusForbidden:
		return errcode.MCPHostForbidden.New("the MCP endpoint refused the request: %s", msg)
	}
	if e.status >= 500 {
		return errcode.New(errcode.Internal, "the MCP transport failed: %s", msg)
	}
	return errcode.MCPRequestInvalid.New("the MCP transport refused the request: %s", msg)
}
