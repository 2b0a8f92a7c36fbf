package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// The Station-compatible method API: POST /api/v1/stations/{stationId}/
// execution/{sandbox|browser} with a JSON body {"method": ..., ...}, as
// Station's clients send it, answered {"data": ...}. Every method is
// dispatched in-process into the daemon's own REST route (the same
// handler chain a client reaches over the network, with the caller's
// headers), so authentication, scopes, tenancy, audit, quotas, limits and
// idempotency are exactly the REST ones; this file only translates the
// body into the REST request and the REST answer into Station's shape:
// camelCase field names (timeout_ms is timeoutMs), images as
// {mimeType, base64}. docs/api.md ("Station method API") has the mapping.

// DefaultStationID is the station ID of a daemon that is given none.
const DefaultStationID = "local"

const (
	// stationMaxBody caps a method body, as Station caps ordinary
	// operations.
	stationMaxBody = wire.MaxJSONBody
	// stationMaxAnswer caps what a method answers (Station: 33 MiB with
	// the JSON and base64 overhead), so a REST answer is cut below it.
	stationMaxAnswer = 24 << 20
)

// Station primitives.
const (
	primitiveSandbox = "sandbox"
	primitiveBrowser = "browser"
)

// stationID is this daemon's station ID.
func (s *Server) stationID() string {
	if s.cfg.StationID != "" {
		return s.cfg.StationID
	}
	return DefaultStationID
}

// innerKey marks the context of a request the method API dispatches
// in-process into a REST route: it keeps the outer request's ID, and is
// not counted again against the per-key and per-source rate limits the
// outer request already paid (creates' limits still apply).
type innerKey struct{}

// asInner marks ctx as an inner request's, carrying the outer one's ID
// (the method API's and the MCP endpoint's REST requests).
func asInner(ctx context.Context, requestID string) context.Context {
	return context.WithValue(context.WithValue(ctx, innerKey{}, true), requestIDKey, requestID)
}

func isInner(r *http.Request) bool {
	v, _ := r.Context().Value(innerKey{}).(bool)
	return v
}

// stationCall is the REST request a method becomes, and how its answer
// is reshaped.
type stationCall struct {
	method, path string
	query        url.Values
	body         any    // marshaled as the JSON body; nil sends none
	lease        string // a control lease token, as Berth-Control-Lease
	shape        func(a *innerAnswer) (any, error)
}

// methodBody is a method's decoded body: its fields by name.
type methodBody map[string]json.RawMessage

// stationMethod turns a method body into its REST call.
type stationMethod func(b methodBody) (stationCall, error)

// stationUnmapped are Station methods Berth's method API does not carry
// yet: their capability exists only as REST routes (or not at all), so
// they answer station_method_unimplemented, never a made-up result.
var stationUnmapped = map[string][]string{
	primitiveSandbox: {"writeFile", "readFile", "listFiles", "upload", "openTerminal", "terminalInput",
		"terminal", "resizeTerminal", "closeTerminal", "startService", "stopService", "services"},
	primitiveBrowser: {"perform", "deleteCheckpoint", "checkpoints", "audit", "profiles", "diagnostics"},
}

// stationMethods maps each primitive's methods to their REST calls.
func stationMethods(primitive string) map[string]stationMethod {
	switch primitive {
	case primitiveSandbox:
		return map[string]stationMethod{
			"create": sandboxCreate, "exec": sandboxExec, "command": sandboxCommand,
			"cancel": sandboxCancel, "destroy": sandboxDestroy, "list": sandboxList, "get": sandboxGet,
		}
	case primitiveBrowser:
		return map[string]stationMethod{
			"open": browserOpen, "execute": browserExecute, "action": browserActionMethod,
			"liveFrame": browserLiveFrame, "controlAcquire": browserControlAcquire,
			"controlRenew": browserControlRenew, "controlRelease": browserControlRelease,
			"control": browserControl, "checkpoint": browserCheckpoint, "resume": browserResume,
			"close": browserClose, "list": browserList,
			"recordingStart": recordingStart, "recordingStop": recordingStop, "recording": recordingGet,
			"recordingDelete": recordingDelete, "recordings": recordingList, "recordingFrame": recordingFrame,
		}
	}
	return nil
}

// failStation writes a method's failure: a REST route's error answer as
// the route gave it, any other error as Berth's error body.
func (s *Server) failStation(w http.ResponseWriter, r *http.Request, err error) {
	var ie *innerError
	if errorsAs(err, &ie) {
		ie.write(w)
		return
	}
	s.fail(w, r, err)
}

// handleStationMethod serves POST .../stations/{stationId}/execution/{primitive}.
func (s *Server) handleStationMethod() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := s.stationMethod(w, r)
		if err != nil {
			s.failStation(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, stationAnswer{Data: data})
	})
}

// stationAnswer is every successful answer of the method API.
type stationAnswer struct {
	Data any `json:"data"`
}

func (s *Server) stationMethod(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.cfg.Cluster != nil {
		// On a Headquarters each worker is a station: the call goes to
		// exactly that owner (cluster.go).
		id := r.PathValue("stationId")
		if _, err := s.cfg.Cluster.Status(r.Context(), id); err != nil {
			if errcode.Is(err, errcode.NotFound) {
				err = errcode.StationNotFound.New("station %q is not a worker of this HQ (GET /api/v1/execution lists them)", id)
			}
			return nil, err
		}
		r = r.WithContext(context.WithValue(r.Context(), stationKey, id))
	} else if id := r.PathValue("stationId"); id != s.stationID() {
		return nil, errcode.StationNotFound.New("station %q is not this daemon's; its station ID is %q", id, s.stationID())
	}
	primitive := r.PathValue("primitive")
	methods := stationMethods(primitive)
	if methods == nil {
		return nil, errcode.RouteNotFound.New("no execution primitive %q: use sandbox or browser", primitive)
	}
	var b methodBody
	if err := wire.DecodeJSON(http.MaxBytesReader(w, r.Body, stationMaxBody), &b); err != nil {
		return nil, err
	}
	name, err := b.str("method", true)
	if err != nil {
		return nil, err
	}
	m, ok := methods[name]
	if !ok {
		if slices.Contains(stationUnmapped[primitive], name) {
			return nil, errcode.StationMethodUnimplemented.New(
				"%s method %q is not in Berth's method API yet; use the REST API (docs/api.md)", primitive, name)
		}
		return nil, errcode.StationMethodUnknown.New("%s has no method %q (methods: %s)", primitive, name, methodNames(methods))
	}
	call, err := m(b)
	if err != nil {
		return nil, err
	}
	a, err := s.dispatch(r, call)
	if err != nil {
		return nil, err
	}
	if v := a.header.Get("Idempotent-Replayed"); v != "" {
		w.Header().Set("Idempotent-Replayed", v) // a create's retry: the first answer again
	}
	if call.shape == nil {
		return a.camel(nil)
	}
	return call.shape(a)
}

func methodNames(m map[string]stationMethod) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// forwardHeaders are the caller's headers a dispatched REST request
// carries: who it is, whom it acts for, its retry key, and where it came
// from (for the per-source limits and trusted proxies).
var forwardHeaders = []string{"Authorization", UserHeader, IdempotencyHeader, "X-Forwarded-For", "User-Agent"}

// dispatch serves call through the server's whole handler chain, as the
// caller, and returns its successful answer; a REST error comes back as
// an *innerError that is written to the caller unchanged.
func (s *Server) dispatch(r *http.Request, call stationCall) (*innerAnswer, error) {
	var body io.Reader = http.NoBody
	if call.body != nil {
		payload, err := json.Marshal(call.body)
		if err != nil {
			return nil, errcode.Wrap(errcode.Internal, err, "encoding a method's REST body")
		}
		body = bytes.NewReader(payload)
	}
	u := url.URL{Path: call.path, RawQuery: call.query.Encode()}
	ctx := asInner(r.Context(), requestID(r))
	in, err := http.NewRequestWithContext(ctx, call.method, u.RequestURI(), body)
	if err != nil {
		return nil, errcode.Wrap(errcode.Internal, err, "building a method's REST request")
	}
	if call.body != nil {
		in.Header.Set("Content-Type", "application/json")
	}
	in.Host, in.RemoteAddr, in.TLS, in.Proto, in.RequestURI = r.Host, r.RemoteAddr, r.TLS, r.Proto, u.RequestURI()
	for _, h := range forwardHeaders {
		for _, v := range r.Header.Values(h) {
			in.Header.Add(h, v)
		}
	}
	if call.lease != "" {
		in.Header.Set(browser.ControlLeaseHeader, call.lease)
	}
	rec := &innerWriter{header: http.Header{}}
	s.handler.ServeHTTP(rec, in)
	a := &innerAnswer{status: rec.status(), header: rec.header, body: rec.body.Bytes()}
	switch {
	case rec.overflow:
		return nil, errcode.ResultTooLarge.New("the answer is larger than the method API's limit of %d bytes; use the REST route", stationMaxAnswer)
	case a.status >= 400:
		return nil, &innerError{a}
	case a.status >= 300:
		// ServeMux cleaning a path: an ID that is not one.
		return nil, errcode.RouteNotFound.New("no resource at %s", call.path)
	}
	return a, nil
}

// innerWriter keeps a dispatched request's answer, up to stationMaxAnswer.
type innerWriter struct {
	header   http.Header
	code     int
	body     bytes.Buffer
	overflow bool
}

func (w *innerWriter) Header() http.Header { return w.header }

func (w *innerWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *innerWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len()+len(b) > stationMaxAnswer {
		w.overflow = true
		return len(b), nil
	}
	return w.body.Write(b)
}

func (w *innerWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// innerAnswer is a dispatched request's successful answer.
type innerAnswer struct {
	status int
	header http.Header
	body   []byte
}

// value decodes the answer's JSON (numbers kept exact).
func (a *innerAnswer) value() (any, error) {
	if len(bytes.TrimSpace(a.body)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errcode.Wrap(errcode.Internal, err, "decoding a REST answer")
	}
	return v, nil
}

// camel decodes the answer and renames its fields to camelCase; opaque
// names the extra fields whose values are data, kept as they are.
func (a *innerAnswer) camel(opaque map[string]bool) (any, error) {
	v, err := a.value()
	if err != nil {
		return nil, err
	}
	return camelKeys(v, opaque), nil
}

// image answers a binary image as {mimeType, base64}.
func (a *innerAnswer) image(extra map[string]any) (any, error) {
	out := map[string]any{"mimeType": mimeOf(a.header.Get("Content-Type")), "base64": base64.StdEncoding.EncodeToString(a.body)}
	for k, v := range extra {
		out[k] = v
	}
	return out, nil
}

func mimeOf(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if ct == "" {
		return "application/octet-stream"
	}
	return strings.TrimSpace(ct)
}

// innerError is a REST error answer, passed to the caller as it is: the
// same status, body (errcode, reason, message, request ID) and headers.
type innerError struct{ a *innerAnswer }

func (e *innerError) Error() string { return "REST answer " + strconv.Itoa(e.a.status) }

func (e *innerError) write(w http.ResponseWriter) {
	for _, h := range []string{"Content-Type", "Retry-After", "WWW-Authenticate", "X-Content-Type-Options"} {
		if v := e.a.header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(e.a.status)
	_, _ = w.Write(e.a.body)
}

// alwaysOpaque are fields whose values are data (names a user chose,
// HTML attribute names), never renamed.
var alwaysOpaque = map[string]bool{"labels": true, "env": true, "attributes": true, "problems": true, "boxes": true, "headers": true}

// camelKeys renames v's object members from snake_case to camelCase, at
// every depth, except the values of opaque and alwaysOpaque members.
func camelKeys(v any, opaque map[string]bool) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if opaque[k] || alwaysOpaque[k] {
				out[snakeToCamel(k)] = val
				continue
			}
			out[snakeToCamel(k)] = camelKeys(val, opaque)
		}
		return out
	case []any:
		for i := range t {
			t[i] = camelKeys(t[i], opaque)
		}
		return t
	}
	return v
}

func snakeToCamel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	parts := strings.Split(s, "_")
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		if p == "" {
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

func camelToSnake(s string) string {
	var b strings.Builder
	for i, c := range s {
		if unicode.IsUpper(c) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// snakeKeys renames a request's members from camelCase to snake_case, at
// every depth, for the REST body (maxElements is max_elements).
func snakeKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[camelToSnake(k)] = snakeKeys(val)
		}
		return out
	case []any:
		for i := range t {
			t[i] = snakeKeys(t[i])
		}
		return t
	}
	return v
}

// resourceID matches what can be a resource ID (or a station ID) in a
// path.
var resourceID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidStationID reports whether id can be a station ID: 1-128 letters,
// digits, '_', '-' or '.', starting with a letter or digit.
func ValidStationID(id string) bool { return resourceID.MatchString(id) }

// str reads string field name; required says it must be there.
func (b methodBody) str(name string, required bool) (string, error) {
	raw, ok := b[name]
	if !ok || string(raw) == "null" {
		if required {
			return "", errcode.InvalidFields(map[string]string{name: "required"})
		}
		return "", nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", errcode.InvalidFields(map[string]string{name: "must be a string"})
	}
	if required && v == "" {
		return "", errcode.InvalidFields(map[string]string{name: "required"})
	}
	return v, nil
}

// id reads a resource ID field.
func (b methodBody) id(name string) (string, error) {
	v, err := b.str(name, true)
	if err != nil {
		return "", err
	}
	if !resourceID.MatchString(v) {
		return "", errcode.InvalidFields(map[string]string{name: "must be a resource ID"})
	}
	return url.PathEscape(v), nil
}

// int reads an integer field (0 when absent).
func (b methodBody) int(name string) (int64, error) {
	raw, ok := b[name]
	if !ok || string(raw) == "null" {
		return 0, nil
	}
	var v int64
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, errcode.InvalidFields(map[string]string{name: "must be an integer"})
	}
	return v, nil
}

// only refuses fields a method does not take ("method" is always taken).
func (b methodBody) only(method string, allowed ...string) error {
	problems := map[string]string{}
	for k := range b {
		if k != "method" && !slices.Contains(allowed, k) {
			problems[k] = "unknown field for method " + method
		}
	}
	if len(problems) > 0 {
		return &errcode.Error{Code: errcode.Invalid, Reason: errcode.BodyInvalid.String(),
			Message: "method " + method + " does not take " + strings.Join(sortedKeys(problems), ", "), Problems: problems}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// options is the body's fields but except, in snake_case: the options
// of a create or an open. rename maps Station's names to Berth's.
func (b methodBody) options(rename map[string]string, except ...string) (map[string]any, error) {
	out := map[string]any{}
	for k, raw := range b {
		if k == "method" || slices.Contains(except, k) {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errcode.InvalidFields(map[string]string{k: "is not JSON"})
		}
		if n, ok := rename[k]; ok {
			k = n
		}
		out[camelToSnake(k)] = snakeKeys(v)
	}
	return out, nil
}

// done answers a REST call that answers 204 with what it did.
func done(fields map[string]any) func(*innerAnswer) (any, error) {
	return func(*innerAnswer) (any, error) { return fields, nil }
}

func sandboxCreate(b methodBody) (stationCall, error) {
	opts, err := b.options(nil)
	if err != nil {
		return stationCall{}, err
	}
	return stationCall{method: http.MethodPost, path: "/v1/sandboxes", body: opts}, nil
}

func sandboxExec(b methodBody) (stationCall, error) {
	if err := b.only("exec", "id", "command", "argv", "cwd", "env", "timeoutMs", "stdin", "waitMs"); err != nil {
		return stationCall{}, err
	}
	id, err := b.id("id")
	if err != nil {
		return stationCall{}, err
	}
	wait, err := b.int("waitMs")
	if err != nil {
		return stationCall{}, err
	}
	opts, err := b.options(nil, "id", "waitMs")
	if err != nil {
		return stationCall{}, err
	}
	var q url.Values
	if wait > 0 {
		q = url.Values{"wait_ms": {strconv.FormatInt(wait, 10)}}
	}
	return stationCall{method: http.MethodPost, path: "/v1/sandboxes/" + id + "/commands", query: q, body: opts}, nil
}

// sandboxRun reads a method body naming a sandbox and a command.
func sandboxRun(method string, b methodBody) (string, string, error) {
	if err := b.only(method, "id", "runId"); err != nil {
		return "", "", err
	}
	id, err := b.id("id")
	if err != nil {
		return "", "", err
	}
	run, err := b.id("runId")
	return id, run, err
}

func sandboxCommand(b methodBody) (stationCall, error) {
	id, run, err := sandboxRun("command", b)
	return stationCall{method: http.MethodGet, path: "/v1/sandboxes/" + id + "/commands/" + run}, err
}

func sandboxCancel(b methodBody) (stationCall, error) {
	id, run, err := sandboxRun("cancel", b)
	return stationCall{method: http.MethodPost, path: "/v1/sandboxes/" + id + "/commands/" + run + "/cancel"}, err
}

// oneID is a method that names one resource by id and takes nothing else.
func oneID(method string, b methodBody) (string, error) {
	if err := b.only(method, "id"); err != nil {
		return "", err
	}
	return b.id("id")
}

func sandboxDestroy(b methodBody) (stationCall, error) {
	id, err := oneID("destroy", b)
	return stationCall{method: http.MethodDelete, path: "/v1/sandboxes/" + id,
		shape: done(map[string]any{"id": id, "destroyed": true})}, err
}

func sandboxList(b methodBody) (stationCall, error) {
	return stationCall{method: http.MethodGet, path: "/v1/sandboxes"}, b.only("list")
}

func sandboxGet(b methodBody) (stationCall, error) {
	id, err := oneID("get", b)
	return stationCall{method: http.MethodGet, path: "/v1/sandboxes/" + id}, err
}

func browserOpen(b methodBody) (stationCall, error) {
	opts, err := b.options(map[string]string{"profileId": "profile"})
	if err != nil {
		return stationCall{}, err
	}
	return stationCall{method: http.MethodPost, path: "/v1/browser/sessions", body: opts}, nil
}

// actionResult answers an action with its result, renamed unless the
// result is a page's own value (evaluate).
func actionResult(op string) func(*innerAnswer) (any, error) {
	return func(a *innerAnswer) (any, error) {
		var res apitype.BrowserActionResult
		dec := json.NewDecoder(bytes.NewReader(a.body))
		dec.UseNumber()
		if err := dec.Decode(&res); err != nil {
			return nil, errcode.Wrap(errcode.Internal, err, "decoding an action's answer")
		}
		if op == "evaluate" {
			return res.Result, nil
		}
		return camelKeys(res.Result, nil), nil
	}
}

// stationOps are Station op names Berth spells otherwise.
var stationOps = map[string]func(map[string]any){
	"newPage": func(c map[string]any) { c["op"], c["action"] = "pages", "new" },
}

func browserExecute(b methodBody) (stationCall, error) {
	if err := b.only("execute", "id", "command", "lease"); err != nil {
		return stationCall{}, err
	}
	id, err := b.id("id")
	if err != nil {
		return stationCall{}, err
	}
	var cmd map[string]any
	if raw, ok := b["command"]; !ok || json.Unmarshal(raw, &cmd) != nil || cmd == nil {
		return stationCall{}, errcode.InvalidFields(map[string]string{"command": "must be an object {op, ...}"})
	}
	body, _ := snakeKeys(cmd).(map[string]any)
	op, _ := body["op"].(string)
	if op == "" {
		return stationCall{}, errcode.InvalidFields(map[string]string{"command.op": "required"})
	}
	if alias, ok := stationOps[op]; ok {
		alias(body)
	}
	stationTargets(body)
	lease, err := b.str("lease", false)
	if err != nil {
		return stationCall{}, err
	}
	if lease != "" {
		body["lease"] = lease
	}
	return stationCall{method: http.MethodPost, path: "/v1/browser/sessions/" + id + "/actions", body: body,
		shape: actionResult(op)}, nil
}

// stationTargets spells Station's target kinds as Berth does (testId is
// test_id).
func stationTargets(body map[string]any) {
	for _, k := range []string{"target", "to"} {
		if t, ok := body[k].(map[string]any); ok && t["by"] == "testId" {
			t["by"] = "test_id"
		}
	}
}

// stationActions map the action method's action and value to an op.
var stationActions = map[string]string{
	"navigate": "url", "evaluate": "expression", "click": "selector", "dblclick": "selector", "hover": "selector",
	"focus": "selector", "type": "value", "press": "value", "screenshot": "", "back": "", "forward": "",
	"reload": "", "content": "", "snapshot": "",
}

func browserActionMethod(b methodBody) (stationCall, error) {
	if err := b.only("action", "id", "action", "value", "lease"); err != nil {
		return stationCall{}, err
	}
	id, err := b.id("id")
	if err != nil {
		return stationCall{}, err
	}
	action, err := b.str("action", true)
	if err != nil {
		return stationCall{}, err
	}
	field, ok := stationActions[action]
	if !ok {
		return stationCall{}, errcode.StationActionUnknown.New("no browser action %q (actions: %s)", action, actionNames())
	}
	value, err := b.str("value", false)
	if err != nil {
		return stationCall{}, err
	}
	body := map[string]any{"op": action}
	switch {
	case field != "" && value == "" && action != "type":
		return stationCall{}, errcode.InvalidFields(map[string]string{"value": "required for action " + action})
	case field == "" && value != "":
		return stationCall{}, errcode.InvalidFields(map[string]string{"value": "action " + action + " takes no value"})
	case field != "":
		body[field] = value
	}
	if lease, _ := b.str("lease", false); lease != "" {
		body["lease"] = lease
	}
	return stationCall{method: http.MethodPost, path: "/v1/browser/sessions/" + id + "/actions", body: body,
		shape: actionResult(action)}, nil
}

func actionNames() string {
	names := make([]string, 0, len(stationActions))
	for n := range stationActions {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func browserLiveFrame(b methodBody) (stationCall, error) {
	id, err := oneID("liveFrame", b)
	return stationCall{method: http.MethodGet, path: "/v1/browser/sessions/" + id + "/live/frame",
		shape: func(a *innerAnswer) (any, error) {
			return a.image(map[string]any{"capturedAt": a.header.Get(liveFrameTimeHdr)})
		}}, err
}

// control reads a control method's body: the session, and the lease
// token and TTL where the method takes them.
func control(method string, b methodBody, fields ...string) (string, apitype.BrowserControlRequest, error) {
	var req apitype.BrowserControlRequest
	if err := b.only(method, append(fields, "id")...); err != nil {
		return "", req, err
	}
	id, err := b.id("id")
	if err != nil {
		return "", req, err
	}
	if req.TTLMS, err = b.int("ttlMs"); err != nil {
		return "", req, err
	}
	req.Token, err = b.str("token", slices.Contains(fields, "token"))
	return id, req, err
}

func browserControlAcquire(b methodBody) (stationCall, error) {
	id, req, err := control("controlAcquire", b, "ttlMs")
	return stationCall{method: http.MethodPost, path: "/v1/browser/sessions/" + id + "/control", body: req}, err
}

func browserControlRenew(b methodBody) (stationCall, error) {
	id, req, err := control("controlRenew", b, "ttlMs", "token")
	return stationCall{method: http.MethodPost, path: "/v1/browser/sessions/" + id + "/control/renew", body: req}, err
}

func browserControlRelease(b methodBody) (stationCall, error) {
	id, req, err := control("controlRelease", b, "token")
	return stationCall{method: http.MethodPost, path: "/v1/browser/sessions/" + id + "/control/release", body: req,
		shape: done(map[string]any{"id": id, "mode": apitype.ControlAutomation})}, err
}

func browserControl(b methodBody) (stationCall, error) {
	id, err := oneID("control", b)
	return stationCall{method: http.MethodGet, path: "/v1/browser/sessions/" + id + "/control"}, err
}

func browserCheckpoint(b methodBody) (stationCall, error) {
	id, err := oneID("checkpoint", b)
	return stationCall{method: http.MethodPost, path: "/v1/browser/sessions/" + id + "/checkpoints"}, err
}

func browserResume(b methodBody) (stationCall, error) {
	id, err := oneID("resume", b)
	return stationCall{method: http.MethodPost, path: "/v1/browser/checkpoints/" + id + "/resume"}, err
}

func browserClose(b methodBody) (stationCall, error) {
	if err := b.only("close", "id", "lease"); err != nil {
		return stationCall{}, err
	}
	id, err := b.id("id")
	if err != nil {
		return stationCall{}, err
	}
	lease, err := b.str("lease", false)
	return stationCall{method: http.MethodDelete, path: "/v1/browser/sessions/" + id, lease: lease,
		shape: done(map[string]any{"id": id, "closed": true})}, err
}

func browserList(b methodBody) (stationCall, error) {
	return stationCall{method: http.MethodGet, path: "/v1/browser/sessions"}, b.only("list")
}

func recordingStart(b methodBody) (stationCall, error) {
	if err := b.only("recordingStart", "id", "intervalMs"); err != nil {
		return stationCall{}, err
	}
	id, err := b.id("id")
	if err != nil {
		return stationCall{}, err
	}
	interval, err := b.int("intervalMs")
	return stationCall{method: http.MethodPost, path: "/v1/browser/sessions/" + id + "/recordings",
		body: apitype.StartRecordingRequest{IntervalMS: interval}, shape: recordingShape}, err
}

// recordingShape answers a recording's metadata; each frame also has an
// id (its index), which recordingFrame takes as frameId.
func recordingShape(a *innerAnswer) (any, error) {
	v, err := a.camel(nil)
	if err != nil {
		return nil, err
	}
	frameIDs(v)
	return v, nil
}

func frameIDs(v any) {
	rec, ok := v.(map[string]any)
	if !ok {
		return
	}
	if list, ok := rec["recordings"].([]any); ok {
		for _, r := range list {
			frameIDs(r)
		}
	}
	frames, _ := rec["frames"].([]any)
	for _, f := range frames {
		if fm, ok := f.(map[string]any); ok {
			fm["id"] = fm["index"]
		}
	}
}

func recordingStop(b methodBody) (stationCall, error) {
	id, err := oneID("recordingStop", b)
	return stationCall{method: http.MethodPost, path: "/v1/browser/recordings/" + id + "/stop", shape: recordingShape}, err
}

func recordingGet(b methodBody) (stationCall, error) {
	id, err := oneID("recording", b)
	return stationCall{method: http.MethodGet, path: "/v1/browser/recordings/" + id, shape: recordingShape}, err
}

func recordingDelete(b methodBody) (stationCall, error) {
	id, err := oneID("recordingDelete", b)
	return stationCall{method: http.MethodDelete, path: "/v1/browser/recordings/" + id,
		shape: done(map[string]any{"id": id, "deleted": true})}, err
}

func recordingList(b methodBody) (stationCall, error) {
	return stationCall{method: http.MethodGet, path: "/v1/browser/recordings", shape: recordingShape}, b.only("recordings")
}

func recordingFrame(b methodBody) (stationCall, error) {
	if err := b.only("recordingFrame", "id", "frameId"); err != nil {
		return stationCall{}, err
	}
	id, err := b.id("id")
	if err != nil {
		return stationCall{}, err
	}
	n, err := frameID(b)
	if err != nil {
		return stationCall{}, err
	}
	return stationCall{method: http.MethodGet, path: "/v1/browser/recordings/" + id + "/frames/" + strconv.Itoa(n),
		shape: func(a *innerAnswer) (any, error) { return a.image(map[string]any{"frameId": n}) }}, nil
}

// frameID reads frameId: a frame's index, as a number or a string.
func frameID(b methodBody) (int, error) {
	raw, ok := b["frameId"]
	if !ok {
		return 0, errcode.InvalidFields(map[string]string{"frameId": "required"})
	}
	var n int
	if json.Unmarshal(raw, &n) == nil && n >= 0 {
		return n, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return n, nil
		}
	}
	return 0, errcode.InvalidFields(map[string]string{"frameId": "must be a frame's id (its index) from the recording's frames"})
}

// stationInfo describes this station for GET /api/v1/execution: who it
// is, whether it serves, what it can run and on what.
type stationInfo struct {
	StationID    string              `json:"stationId"`
	Status       string              `json:"status"` // online, or degraded when no sandbox runtime is available
	Version      string              `json:"version"`
	Capabilities stationCapabilities `json:"capabilities"`
	Backends     stationBackends     `json:"backends"`
	Availability stationAvailability `json:"availability"`
}

type stationCapabilities struct {
	Primitives []string              `json:"primitives"`
	Sandbox    stationPrimitive      `json:"sandbox"`
	Browser    *stationPrimitive     `json:"browser,omitempty"`
	Runtimes   []apitype.RuntimeInfo `json:"runtimes"`
}

// stationPrimitive is what one primitive offers: its methods, and for
// the browser its session modes.
type stationPrimitive struct {
	Methods []string `json:"methods"`
	Modes   []string `json:"modes,omitempty"`
}

type stationBackends struct {
	Sandbox []string `json:"sandbox"` // available runtimes, the default first
	Browser []string `json:"browser"` // chromium, and remote providers
}

type stationAvailability struct {
	Sandbox stationSlots `json:"sandbox"`
	Browser stationSlots `json:"browser"`
}

// stationSlots says whether a primitive takes new work and how full it is.
type stationSlots struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	Active    int    `json:"active"`
	Max       int    `json:"max"`
}

// stationList is the answer of GET /api/v1/execution: the stations this
// endpoint reaches (a single daemon is one).
type stationList struct {
	Stations []stationInfo `json:"stations"`
}

// handleStationInfo serves GET /api/v1/execution (and the tenant one):
// it reads GET /v1/system as the caller and describes the station.
func (s *Server) handleStationInfo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Cluster != nil {
			s.hqStations(w, r)
			return
		}
		a, err := s.dispatch(r, stationCall{method: http.MethodGet, path: "/v1/system"})
		if err != nil {
			s.failStation(w, r, err)
			return
		}
		var sys apitype.System
		if err := json.Unmarshal(a.body, &sys); err != nil {
			s.fail(w, r, errcode.Wrap(errcode.Internal, err, "decoding the system answer"))
			return
		}
		wire.Encode(w, http.StatusOK, stationAnswer{Data: stationList{Stations: []stationInfo{s.describe(sys)}}})
	})
}

// describe turns the system's description into the station's.
func (s *Server) describe(sys apitype.System) stationInfo {
	info := stationInfo{StationID: s.stationID(), Status: "online", Version: sys.Version,
		Capabilities: stationCapabilities{Primitives: []string{primitiveSandbox}, Runtimes: sys.Runtimes,
			Sandbox: stationPrimitive{Methods: methodList(primitiveSandbox)}},
		Backends: stationBackends{Sandbox: []string{}, Browser: []string{}},
	}
	for _, rt := range sys.Runtimes {
		if !rt.Available || (s.cfg.TenantMode && !rt.Isolated) {
			continue
		}
		if rt.Default {
			info.Backends.Sandbox = append([]string{rt.Name}, info.Backends.Sandbox...)
		} else {
			info.Backends.Sandbox = append(info.Backends.Sandbox, rt.Name)
		}
	}
	info.Availability.Sandbox = stationSlots{Available: len(info.Backends.Sandbox) > 0,
		Active: sys.Counts.Sandboxes, Max: sys.Limits.MaxSandboxes}
	if !info.Availability.Sandbox.Available {
		info.Status, info.Availability.Sandbox.Reason = "degraded", "no sandbox runtime is available"
	}
	b := sys.Browser
	info.Availability.Browser = stationSlots{Available: b.Available, Reason: b.Reason, Active: b.Sessions, Max: b.MaxSessions}
	if s.cfg.Browsers == nil {
		info.Availability.Browser = stationSlots{Reason: "browser sessions are off on this daemon"}
		return info
	}
	var modes []string
	if !s.cfg.TenantMode {
		modes = append(modes, apitype.BrowserModeContext, apitype.BrowserModeProcess, apitype.BrowserModeRemote)
		info.Backends.Browser = append(info.Backends.Browser, "chromium")
		info.Backends.Browser = append(info.Backends.Browser, b.Providers...)
	}
	if b.IsolatedAvailable {
		modes = append(modes, apitype.BrowserModeIsolated)
		info.Backends.Browser = append(info.Backends.Browser, "chromium-isolated")
	}
	info.Capabilities.Primitives = append(info.Capabilities.Primitives, primitiveBrowser)
	info.Capabilities.Browser = &stationPrimitive{Methods: methodList(primitiveBrowser), Modes: modes}
	return info
}

func methodList(primitive string) []string {
	return strings.Split(methodNames(stationMethods(primitive)), ", ")
}
