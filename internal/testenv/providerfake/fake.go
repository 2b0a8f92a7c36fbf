// Package providerfake serves fakes of two hosted browser providers'
// session APIs for tests, written from their public references only:
//
// Browserbase (header X-BB-API-Key):
//   - POST /v1/sessions {projectId, userMetadata (<= 512 characters of
//     JSON), timeout (60-21600 s)} -> 201 {id, status, connectUrl, ...}:
//     https://docs.browserbase.com/reference/api/create-a-session
//   - POST /v1/sessions/{id} {projectId, status: REQUEST_RELEASE} -> 200:
//     https://docs.browserbase.com/reference/api/update-a-session
//   - GET /v1/sessions?status=&q=user_metadata['k']:'v' -> 200 [sessions]
//     (statuses PENDING, RUNNING, ERROR, TIMED_OUT, COMPLETED):
//     https://docs.browserbase.com/reference/api/list-sessions,
//     https://docs.browserbase.com/features/session-metadata
//   - the connect URL carries the session's signing key.
//
// Steel (header steel-api-key; the CDP WebSocket takes ?apiKey=):
//   - POST /v1/sessions {sessionId (a UUID), timeout (ms)} -> 200 {id,
//     status: live, websocketUrl, ...}; GET /v1/sessions/{id}; POST
//     /v1/sessions/{id}/release -> {success, message}:
//     https://docs.steel.dev/overview/authentication,
//     https://docs.steel.dev/overview/sessions-api/session-lifecycle,
//     https://github.com/steel-dev/steel-node/blob/main/src/resources/sessions/sessions.ts
//
// A provider session is a process-mode session on a real Berth daemon
// (the backend). Its connect URL points at the fake, which checks the
// credential in it and bridges the WebSocket to that session's CDP
// endpoint with the backend's key: chromedp, which a provider session is
// driven by, dials a URL and sends no headers of its own.
package providerfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
)

// Kinds of fake.
const (
	Browserbase = "browserbase"
	Steel       = "steel"
)

// Fake is one provider's fake API.
type Fake struct {
	Kind      string
	URL       string // the API's base URL
	Key       string // the API key it accepts
	ProjectID string // Browserbase: the project it knows

	srv *httptest.Server

	mu        sync.Mutex // guards the fields below
	backend   *client.Client
	backendWS string // ws://daemon
	token     string
	sessions  map[string]*session
	created   int
	released  int
	refused   int // requests refused for their credentials
	dropNext  int // creates whose answer is dropped, the session made
	failFinds int // look-ups answered 503
	refuseWS  int // WebSocket connections refused
	requests  []string
}

type session struct {
	ID        string         `json:"id"`
	Status    string         `json:"status"`
	CreatedAt time.Time      `json:"createdAt"`
	Metadata  map[string]any `json:"userMetadata,omitempty"`
	berthID   string
	secret    string // Browserbase: the signing key of its connect URL
	conns     context.CancelFunc
	ctx       context.Context
}

// New starts a fake of kind. Call SetBackend before the first create.
func New(t testing.TB, kind string) *Fake {
	t.Helper()
	f := &Fake{Kind: kind, Key: "key-" + token(), ProjectID: "proj-" + token()[:8], sessions: map[string]*session{}}
	mux := http.NewServeMux()
	switch kind {
	case Browserbase:
		mux.HandleFunc("POST /v1/sessions", f.bbCreate)
		mux.HandleFunc("GET /v1/sessions", f.bbList)
		mux.HandleFunc("GET /v1/sessions/{id}", f.get)
		mux.HandleFunc("POST /v1/sessions/{id}", f.bbUpdate)
	case Steel:
		mux.HandleFunc("POST /v1/sessions", f.steelCreate)
		mux.HandleFunc("GET /v1/sessions/{id}", f.get)
		mux.HandleFunc("POST /v1/sessions/{id}/release", f.steelRelease)
	default:
		t.Fatalf("providerfake: unknown kind %q", kind)
	}
	mux.HandleFunc("GET /connect", f.connect)
	f.srv = httptest.NewServer(f.authenticated(mux))
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// SetBackend names the daemon provider sessions are made on, and its key.
func (f *Fake) SetBackend(daemonURL, token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backend = client.New(daemonURL, token)
	f.backendWS = "ws" + strings.TrimPrefix(daemonURL, "http")
	f.token = token
}

// DropNextCreates makes the next n creates make their session and close
// the connection instead of answering.
func (f *Fake) DropNextCreates(n int) { f.mu.Lock(); f.dropNext = n; f.mu.Unlock() }

// FailNextFinds makes the next n look-ups (list, retrieve) answer 503.
func (f *Fake) FailNextFinds(n int) { f.mu.Lock(); f.failFinds = n; f.mu.Unlock() }

// RefuseNextConnects makes the next n CDP WebSocket connections fail.
func (f *Fake) RefuseNextConnects(n int) { f.mu.Lock(); f.refuseWS = n; f.mu.Unlock() }

// Counts says how many sessions were created, released and are running,
// and how many requests were refused for their credentials.
func (f *Fake) Counts() (created, released, running, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if s.Status == f.running() {
			running++
		}
	}
	return f.created, f.released, running, f.refused
}

// Requests lists the requests served, as "METHOD path".
func (f *Fake) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// BerthSession is the backend's session behind provider session id.
func (f *Fake) BerthSession(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.sessions[id]; s != nil {
		return s.berthID
	}
	return ""
}

// WaitRunning waits up to d for n running sessions.
func (f *Fake) WaitRunning(n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if _, _, r, _ := f.Counts(); r == n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *Fake) running() string {
	if f.Kind == Steel {
		return "live"
	}
	return "RUNNING"
}

// authenticated checks the API key header (the WebSocket checks its own)
// and records the request.
func (f *Fake) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		if r.URL.Path == "/connect" {
			next.ServeHTTP(w, r)
			return
		}
		header := "X-BB-API-Key"
		if f.Kind == Steel {
			header = "steel-api-key"
		}
		if r.Header.Get(header) != f.Key {
			f.mu.Lock()
			f.refused++
			f.mu.Unlock()
			msg := "Invalid Steel API Key"
			if f.Kind == Browserbase {
				msg = "Unauthorized"
			}
			answer(w, http.StatusUnauthorized, map[string]any{"statusCode": 401, "message": msg})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// open makes the provider session id: a process session on the backend.
// Its answer is dropped (the connection closed) when a drop is due.
func (f *Fake) open(w http.ResponseWriter, r *http.Request, id string, meta map[string]any) (*session, bool) {
	f.mu.Lock()
	backend := f.backend
	_, taken := f.sessions[id]
	f.mu.Unlock()
	if taken {
		answer(w, http.StatusConflict, map[string]any{"message": "a session with this ID exists"})
		return nil, false
	}
	if backend == nil {
		answer(w, http.StatusInternalServerError, map[string]any{"message": "the fake has no backend"})
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	bs, err := backend.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeProcess})
	if err != nil {
		answer(w, http.StatusInternalServerError, map[string]any{"message": "no browser: " + err.Error()})
		return nil, false
	}
	sctx, scancel := context.WithCancel(context.Background())
	s := &session{ID: id, Status: f.running(), CreatedAt: time.Now().UTC(), Metadata: meta, berthID: bs.ID, secret: token(), ctx: sctx, conns: scancel}
	f.mu.Lock()
	f.sessions[id] = s
	f.created++
	drop := f.dropNext > 0
	if drop {
		f.dropNext--
	}
	f.mu.Unlock()
	if drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return nil, false
			}
		}
		panic(http.ErrAbortHandler) // closes the connection without an answer
	}
	return s, true
}

// end ends provider session s: its bridges and its backend session.
func (f *Fake) end(s *session, status string) {
	f.mu.Lock()
	was := s.Status
	s.Status = status
	if was == f.running() {
		f.released++
	}
	backend := f.backend
	f.mu.Unlock()
	if was != f.running() {
		return
	}
	s.conns()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = backend.CloseBrowserSession(ctx, s.berthID)
}

// EndSession ends provider session id as the provider would on its own
// (a timeout): its connections close and its browser goes.
func (f *Fake) EndSession(id string) {
	if s := f.find(id); s != nil {
		status := "TIMED_OUT"
		if f.Kind == Steel {
			status = "released"
		}
		f.end(s, status)
	}
}

func (f *Fake) find(id string) *session {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions[id]
}

// failFind answers 503 when a failure is due.
func (f *Fake) failFind(w http.ResponseWriter) bool {
	f.mu.Lock()
	fail := f.failFinds > 0
	if fail {
		f.failFinds--
	}
	f.mu.Unlock()
	if fail {
		answer(w, http.StatusServiceUnavailable, map[string]any{"message": "try again"})
	}
	return fail
}

func (f *Fake) view(r *http.Request, s *session) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]any{"id": s.ID, "status": s.Status, "createdAt": s.CreatedAt, "updatedAt": s.CreatedAt}
	base := "ws://" + r.Host + "/connect"
	switch f.Kind {
	case Browserbase:
		out["projectId"], out["startedAt"], out["expiresAt"] = f.ProjectID, s.CreatedAt, s.CreatedAt.Add(time.Hour)
		out["proxyBytes"], out["keepAlive"], out["region"], out["userMetadata"] = 0, false, "us-west-2", s.Metadata
		out["connectUrl"] = base + "?signingKey=" + s.secret
		out["seleniumRemoteUrl"], out["signingKey"] = "http://"+r.Host+"/webdriver", s.secret
	case Steel:
		out["websocketUrl"] = base + "?sessionId=" + s.ID
		out["sessionViewerUrl"], out["debugUrl"] = "http://"+r.Host+"/sessions/"+s.ID, "http://"+r.Host+"/debug/"+s.ID
		out["duration"], out["eventCount"], out["creditsUsed"], out["proxyBytesUsed"], out["timeout"] = 0, 0, 0, 0, 300000
	}
	return out
}

func (f *Fake) get(w http.ResponseWriter, r *http.Request) {
	if f.failFind(w) {
		return
	}
	s := f.find(r.PathValue("id"))
	if s == nil {
		answer(w, http.StatusNotFound, map[string]any{"message": "Session not found"})
		return
	}
	answer(w, http.StatusOK, f.view(r, s))
}

func (f *Fake) bbCreate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ProjectID    string          `json:"projectId"`
		UserMetadata json.RawMessage `json:"userMetadata"`
		Timeout      *int            `json:"timeout"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		answer(w, http.StatusBadRequest, map[string]any{"message": "invalid body"})
		return
	}
	var meta map[string]any
	switch {
	case in.ProjectID == "":
		answer(w, http.StatusBadRequest, map[string]any{"message": "projectId is required"})
		return
	case in.ProjectID != f.ProjectID:
		answer(w, http.StatusNotFound, map[string]any{"message": "project not found"})
		return
	case in.Timeout != nil && (*in.Timeout < 60 || *in.Timeout > 21600):
		answer(w, http.StatusBadRequest, map[string]any{"message": "timeout must be between 60 and 21600"})
		return
	case len(in.UserMetadata) > 512:
		answer(w, http.StatusBadRequest, map[string]any{"message": "userMetadata is over 512 characters"})
		return
	case len(in.UserMetadata) > 0 && json.Unmarshal(in.UserMetadata, &meta) != nil:
		answer(w, http.StatusBadRequest, map[string]any{"message": "userMetadata must be an object"})
		return
	}
	s, ok := f.open(w, r, token()[:8]+"-"+token()[:4]+"-4"+token()[:3]+"-8"+token()[:3]+"-"+token()[:12], meta)
	if ok {
		answer(w, http.StatusCreated, f.view(r, s))
	}
}

func (f *Fake) bbUpdate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ProjectID string `json:"projectId"`
		Status    string `json:"status"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || in.Status != "REQUEST_RELEASE" ||
		(in.ProjectID != "" && in.ProjectID != f.ProjectID) {
		answer(w, http.StatusBadRequest, map[string]any{"message": "status must be REQUEST_RELEASE"})
		return
	}
	s := f.find(r.PathValue("id"))
	if s == nil {
		answer(w, http.StatusNotFound, map[string]any{"message": "Session not found"})
		return
	}
	f.end(s, "COMPLETED")
	answer(w, http.StatusOK, f.view(r, s))
}

// metadataQuery is the documented form user_metadata['a']['b']:'value'.
var metadataQuery = regexp.MustCompile(`^user_metadata((?:\['[^']+'\])+):'([^']*)'$`)

func (f *Fake) bbList(w http.ResponseWriter, r *http.Request) {
	if f.failFind(w) {
		return
	}
	var path []string
	var want string
	if q := r.URL.Query().Get("q"); q != "" {
		m := metadataQuery.FindStringSubmatch(q)
		if m == nil {
			answer(w, http.StatusBadRequest, map[string]any{"message": "invalid query"})
			return
		}
		path = strings.Split(strings.Trim(m[1], "[']"), "']['")
		want = m[2]
	}
	status := r.URL.Query().Get("status")
	f.mu.Lock()
	var match []*session
	for _, s := range f.sessions {
		if (status == "" || s.Status == status) && (path == nil || lookup(s.Metadata, path) == want) {
			match = append(match, s)
		}
	}
	f.mu.Unlock()
	out := []map[string]any{}
	for _, s := range match {
		v := f.view(r, s)
		delete(v, "connectUrl") // the list documents no connect URL
		delete(v, "signingKey")
		delete(v, "seleniumRemoteUrl")
		out = append(out, v)
	}
	answer(w, http.StatusOK, out)
}

// lookup is the string at path in m, or "" (only strings compare).
func lookup(m map[string]any, path []string) string {
	var v any = m
	for _, k := range path {
		o, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = o[k]
	}
	s, _ := v.(string)
	return s
}

func (f *Fake) steelCreate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SessionID string `json:"sessionId"`
		Timeout   *int64 `json:"timeout"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		answer(w, http.StatusBadRequest, map[string]any{"message": "invalid body"})
		return
	}
	if in.SessionID != "" && !uuidRE.MatchString(in.SessionID) {
		answer(w, http.StatusBadRequest, map[string]any{"message": "sessionId must be a UUID"})
		return
	}
	if in.Timeout != nil && *in.Timeout <= 0 {
		answer(w, http.StatusBadRequest, map[string]any{"message": "timeout must be positive"})
		return
	}
	id := in.SessionID
	if id == "" {
		id = token()[:8] + "-" + token()[:4] + "-4" + token()[:3] + "-8" + token()[:3] + "-" + token()[:12]
	}
	s, ok := f.open(w, r, id, nil)
	if ok {
		answer(w, http.StatusOK, f.view(r, s))
	}
}

func (f *Fake) steelRelease(w http.ResponseWriter, r *http.Request) {
	s := f.find(r.PathValue("id"))
	if s == nil {
		answer(w, http.StatusNotFound, map[string]any{"message": "Session not found"})
		return
	}
	f.end(s, "released")
	answer(w, http.StatusOK, map[string]any{"success": true, "message": "Session released successfully"})
}

// connect is the provider's CDP WebSocket: it checks the credential in the
// URL and bridges to the backend session's CDP endpoint.
func (f *Fake) connect(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	var s *session
	switch f.Kind {
	case Browserbase:
		for _, c := range f.sessions {
			if key := q.Get("signingKey"); key != "" && c.secret == key {
				s = c
			}
		}
	case Steel:
		if q.Get("apiKey") == f.Key {
			s = f.sessions[q.Get("sessionId")]
		}
	}
	ok := s != nil && s.Status == f.running() && f.refuseWS == 0
	if f.refuseWS > 0 {
		f.refuseWS--
	} else if !ok {
		f.refused++
	}
	backendWS, tok := f.backendWS, f.token
	f.mu.Unlock()
	if !ok {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	ctx, stop := context.WithCancel(s.ctx)
	defer stop()
	dctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	up, _, err := websocket.Dial(dctx, backendWS+"/v1/browser/sessions/"+url.PathEscape(s.berthID)+"/cdp",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	cancel()
	if err != nil {
		http.Error(w, "backend: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	down, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer down.CloseNow()
	up.SetReadLimit(256 << 20)
	down.SetReadLimit(256 << 20)
	go func() {
		select {
		case <-r.Context().Done():
		case <-ctx.Done():
		}
		stop()
	}()
	errc := make(chan error, 2)
	pump := func(dst, src *websocket.Conn) {
		for {
			typ, b, err := src.Read(ctx)
			if err == nil {
				err = dst.Write(ctx, typ, b)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}
	go pump(up, down)
	go pump(down, up)
	<-errc
	stop()
	<-errc
	if !errors.Is(ctx.Err(), context.Canceled) {
		down.Close(websocket.StatusNormalClosure, "")
	}
}
