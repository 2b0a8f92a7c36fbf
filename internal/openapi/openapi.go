package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Access is the least key scope a route needs.
type Access string

// The accesses of routes, from none to the operator's.
const (
	Public    Access = "public"    // no key
	Read      Access = "read"      // any valid key
	Execution Access = "execution" // an execution or admin key
	Admin     Access = "admin"     // an admin key
)

// Route is one line of the HTTP surface, as the route table has it. Path
// is a net/http pattern path: {name} and {name...} wildcards.
type Route struct {
	Method, Path string
	Access       Access
}

// Key is the route's "METHOD /path", as the route table writes it.
func (r Route) Key() string { return r.Method + " " + r.Path }

// Document is an OpenAPI 3.1 document.
type Document struct {
	OpenAPI    string                           `json:"openapi"`
	Info       Info                             `json:"info"`
	Paths      map[string]map[string]*Operation `json:"paths"`
	Components Components                       `json:"components"`
}

// Info is the document's title and version.
type Info struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

// Operation is one method on one path.
type Operation struct {
	OperationID string               `json:"operationId"`
	Summary     string               `json:"summary"`
	Description string               `json:"description,omitempty"`
	Tags        []string             `json:"tags"`
	Parameters  []*Parameter         `json:"parameters,omitempty"`
	RequestBody *RequestBody         `json:"requestBody,omitempty"`
	Responses   map[string]*Response `json:"responses"`
	// Security is empty for public routes; otherwise the bearer key with
	// the least scope the route needs (OpenAPI 3.1 lets a non-OAuth scheme
	// list the roles it requires).
	Security []map[string][]string `json:"security"`
	// Access repeats that scope: public, read, execution or admin.
	Access Access `json:"x-berth-access"`
}

// Parameter is a path, query or header parameter.
type Parameter struct {
	Name        string  `json:"name"`
	In          string  `json:"in"`
	Required    bool    `json:"required,omitempty"`
	Description string  `json:"description,omitempty"`
	Schema      *Schema `json:"schema"`
}

// RequestBody is an operation's request body, by media type.
type RequestBody struct {
	Description string                `json:"description,omitempty"`
	Required    bool                  `json:"required,omitempty"`
	Content     map[string]*MediaType `json:"content"`
}

// MediaType is a body of one media type. A body of raw bytes has no schema.
type MediaType struct {
	Schema *Schema `json:"schema,omitempty"`
}

// Response is one answer of an operation, or a reference to a shared one.
type Response struct {
	Ref         string                `json:"$ref,omitempty"`
	Description string                `json:"description,omitempty"`
	Headers     map[string]*Header    `json:"headers,omitempty"`
	Content     map[string]*MediaType `json:"content,omitempty"`
	// EventData is the schema of each Server-Sent Event's data, for
	// text/event-stream answers.
	EventData *Schema `json:"x-berth-event-data,omitempty"`
	// Messages is the schema of a WebSocket's JSON text messages, for 101
	// answers.
	Messages *Schema `json:"x-berth-websocket-messages,omitempty"`
}

// Header is a response header.
type Header struct {
	Description string  `json:"description,omitempty"`
	Schema      *Schema `json:"schema"`
}

// Components holds what operations refer to.
type Components struct {
	Schemas         map[string]*Schema         `json:"schemas"`
	Responses       map[string]*Response       `json:"responses"`
	SecuritySchemes map[string]*SecurityScheme `json:"securitySchemes"`
}

// SecurityScheme is how a request authenticates.
type SecurityScheme struct {
	Type         string `json:"type"`
	Scheme       string `json:"scheme"`
	BearerFormat string `json:"bearerFormat,omitempty"`
	Description  string `json:"description,omitempty"`
}

// bearer names the API key scheme.
const bearer = "bearerKey"

// Build returns the document of routes: one operation per route, described
// by the operations table. A route the table lacks still gets an operation
// (marked undocumented) and an entry of the table without a route is left
// out, so the document never shows a route the daemon does not serve;
// Check reports both.
func Build(routes []Route) (*Document, error) {
	sc := newSchemas(optionalInRequests)
	doc := &Document{
		OpenAPI: "3.1.0",
		Info: Info{
			Title:   "Berth API",
			Version: "v1",
			Description: "The HTTP API of the Berth daemon, generated from its route table " +
				"(internal/httpapi/routes.go); docs/api.md describes every route. " +
				"Every response carries X-Request-Id; every error has one shape (ErrorBody).",
		},
		Paths: map[string]map[string]*Operation{},
	}
	table := operations()
	for _, r := range routes {
		o, ok := table[r.Key()]
		if !ok {
			o = op{summary: "Undocumented route"}
		}
		operation, err := o.build(sc, r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Key(), err)
		}
		p := openAPIPath(r.Path)
		if doc.Paths[p] == nil {
			doc.Paths[p] = map[string]*Operation{}
		}
		m := strings.ToLower(r.Method)
		if _, dup := doc.Paths[p][m]; dup {
			return nil, fmt.Errorf("route %s appears twice", r.Key())
		}
		doc.Paths[p][m] = operation
	}
	if _, err := sc.of(reflectErrorBody); err != nil {
		return nil, err
	}
	codes := make([]string, 0, len(errcode.All))
	for _, c := range errcode.All {
		codes = append(codes, string(c))
	}
	sc.defs["ErrorDetail"].Properties["code"].Enum = codes
	if err := addNamed(sc, doc.Paths); err != nil {
		return nil, err
	}
	doc.Components = Components{
		Schemas:         sc.defs,
		Responses:       errorResponses(),
		SecuritySchemes: map[string]*SecurityScheme{bearer: bearerScheme()},
	}
	return doc, nil
}

// JSON returns the document of routes as indented JSON, ending in a
// newline: the bytes of docs/openapi.json and of GET /v1/openapi.json.
func JSON(routes []Route) ([]byte, error) {
	doc, err := Build(routes)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding the OpenAPI document: %w", err)
	}
	return buf.Bytes(), nil
}

// Check compares routes with the operations table and returns one line
// per difference: a route without an operation, an operation without a
// route. None means the document describes exactly the route table.
func Check(routes []Route) []string {
	table := operations()
	seen := map[string]bool{}
	var out []string
	for _, r := range routes {
		seen[r.Key()] = true
		if _, ok := table[r.Key()]; !ok {
			out = append(out, fmt.Sprintf("route without operation: %s (routes.go has it; describe it in internal/openapi/operations.go)", r.Key()))
		}
	}
	planned := plannedOperations()
	for k := range table {
		if seen[k] {
			continue
		}
		where := "internal/openapi/operations.go"
		if _, ok := planned[k]; ok {
			where = "the planned block, internal/openapi/planned.go"
		}
		out = append(out, fmt.Sprintf("operation without route: %s (described in %s, not in routes.go: remove it there or add the route)", k, where))
	}
	slices.Sort(out)
	return out
}

// addNamed adds the named schemas that paths refer to.
func addNamed(sc *schemas, paths map[string]map[string]*Operation) error {
	b, err := json.Marshal(paths)
	if err != nil {
		return err
	}
	for name, s := range namedSchemas() {
		if !bytes.Contains(b, []byte(`"`+refPrefix+name+`"`)) {
			continue
		}
		if _, taken := sc.defs[name]; taken {
			return fmt.Errorf("schema %s is both a Go type and a named schema", name)
		}
		sc.defs[name] = s
	}
	return nil
}

var wildcard = regexp.MustCompile(`\{([A-Za-z0-9_]+)(\.\.\.)?\}`)

// openAPIPath writes a net/http pattern path as an OpenAPI path: a
// {name...} wildcard becomes {name}.
func openAPIPath(p string) string { return wildcard.ReplaceAllString(p, "{$1}") }

// pathParams lists the wildcards of a pattern path, in order, and whether
// each takes the rest of the path.
func pathParams(p string) (names []string, rest []bool) {
	for _, m := range wildcard.FindAllStringSubmatch(p, -1) {
		names = append(names, m[1])
		rest = append(rest, m[2] != "")
	}
	return names, rest
}

// build turns a table entry into the operation of route r.
func (o op) build(sc *schemas, r Route) (*Operation, error) {
	out := &Operation{
		OperationID: o.id,
		Summary:     o.summary,
		Description: strings.TrimSpace(o.desc + "\n\n" + accessText[r.Access]),
		Tags:        []string{tagOf(r.Path)},
		Responses:   map[string]*Response{},
		Security:    []map[string][]string{},
		Access:      r.Access,
	}
	if out.OperationID == "" {
		out.OperationID = fallbackID(r)
	}
	if _, ok := accessText[r.Access]; !ok {
		return nil, fmt.Errorf("unknown access %q", r.Access)
	}
	if r.Access != Public {
		out.Security = append(out.Security, map[string][]string{bearer: {string(r.Access)}})
	}
	names, rest := pathParams(r.Path)
	for i, n := range names {
		out.Parameters = append(out.Parameters, pathParam(r.Path, n, rest[i]))
	}
	for _, p := range o.query {
		out.Parameters = append(out.Parameters, &Parameter{Name: p.name, In: "query", Required: p.required,
			Description: p.desc, Schema: p.schema})
	}
	for _, p := range o.headers {
		out.Parameters = append(out.Parameters, &Parameter{Name: p.name, In: "header", Required: p.required,
			Description: p.desc, Schema: p.schema})
	}
	if o.body != nil {
		rb, err := o.body.build(sc)
		if err != nil {
			return nil, fmt.Errorf("request body: %w", err)
		}
		out.RequestBody = rb
	}
	if len(o.ok) == 0 {
		out.Responses["default"] = &Response{Description: "Not described yet."}
	}
	for _, res := range o.ok {
		resp, err := res.build(sc)
		if err != nil {
			return nil, fmt.Errorf("response %d: %w", res.status, err)
		}
		out.Responses[res.code()] = resp
	}
	if r.Access != Public {
		out.Responses["401"] = &Response{Ref: "#/components/responses/Unauthenticated"}
	}
	if r.Access == Execution || r.Access == Admin {
		out.Responses["403"] = &Response{Ref: "#/components/responses/PermissionDenied"}
	}
	out.Responses["4XX"] = &Response{Ref: "#/components/responses/Error"}
	out.Responses["5XX"] = &Response{Ref: "#/components/responses/Error"}
	return out, nil
}

var accessText = map[Access]string{
	Public:    "Access: public (no key).",
	Read:      "Access: any valid key (read, execution or admin).",
	Execution: "Access: an execution or admin key (a read key gets 403 scope_insufficient).",
	Admin:     "Access: an admin key.",
}

// fallbackID names an undocumented route's operation from its method and
// path, so that the document stays valid until the table describes it.
func fallbackID(r Route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Method))
	for _, part := range strings.FieldsFunc(r.Path, func(c rune) bool { return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// tagOf groups an operation by the resource its path names.
func tagOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		return "station"
	case len(parts) > 0 && parts[0] == "mcp":
		return "mcp"
	case len(parts) > 0 && parts[0] == "live":
		return "browser"
	case len(parts) < 2 || parts[0] != "v1":
		return "system"
	}
	switch parts[1] {
	case "sandboxes":
		if len(parts) > 3 {
			if tag, ok := map[string]string{"commands": "commands", "files": "files", "terminals": "terminals",
				"services": "services", "ports": "ports", "previews": "ports", "network": "network",
				"secrets": "network"}[parts[3]]; ok {
				return tag
			}
		}
		return "sandboxes"
	case "actions", "files", "jobs", "convert":
		return "jobs"
	case "audit":
		return "tenants"
	case "openapi.json":
		return "system"
	}
	return parts[1]
}

// pathParam describes wildcard name of path.
func pathParam(path, name string, rest bool) *Parameter {
	p := &Parameter{Name: name, In: "path", Required: true, Schema: &Schema{Type: "string"}}
	switch name {
	case "id":
		p.Description = idOf(path)
	case "cid":
		p.Description = "The command's ID (cmd_...)."
	case "tid":
		p.Description = "The terminal's ID (term_...)."
	case "name":
		switch {
		case strings.HasPrefix(path, "/v1/templates/"):
			p.Description = "The template's name or ID."
		case strings.HasPrefix(path, "/v1/actions/"):
			p.Description = "The action's name."
		default:
			p.Description = "The service's name."
		}
	case "port":
		p.Description = "A TCP port in the sandbox, 1-65535, without sign or leading zeros."
		p.Schema = &Schema{Type: "integer", Minimum: ptr(1), Maximum: ptr(65535)}
	case "n":
		p.Description = "The frame's index, from 0."
		p.Schema = &Schema{Type: "integer", Minimum: ptr(0)}
	case "sha256":
		p.Description = "The file's SHA-256, lower-case hex."
		p.Schema = &Schema{Type: "string", Pattern: "^[0-9a-f]{64}$"}
	case "action":
		p.Description = "The action's name (html-pdf, html-pptx, markdown-pdf, office-pdf, ...)."
	case "artifact":
		p.Description = "The artifact's ID (art_...)."
	case "token":
		p.Description = "A view link's signed token: the link's capability."
	case "stationId":
		p.Description = "The station's ID (serve --station-id, default local); any other is 404."
	case "primitive":
		p.Description = "The primitive whose method is called."
		p.Schema = &Schema{Type: "string", Enum: []string{"sandbox", "browser"}}
	}
	if rest {
		p.Description = "The rest of the path: any number of segments, slashes included (net/http's {" + name + "...})."
	}
	return p
}

// idOf says what the {id} of path names.
func idOf(path string) string {
	for _, k := range []struct{ prefix, what string }{
		{"/v1/sandboxes/", "The sandbox's ID (sbx_...)."},
		{"/v1/browser/sessions/", "The browser session's ID (brs_...)."},
		{"/v1/browser/checkpoints/", "The checkpoint's ID (bcp_...)."},
		{"/v1/browser/recordings/", "The recording's ID (rec_...)."},
		{"/v1/jobs/", "The job's ID (job_...)."},
		{"/v1/keys/", "The key's ID (key_...)."},
		{"/v1/tenants/", "The tenant's ID (ten_...) or name."},
		{"/v1/workers/", "The worker's ID (serve --worker-id; 1-63 of a-z, 0-9 and '-')."},
	} {
		if strings.HasPrefix(path, k.prefix) {
			return k.what
		}
	}
	return "The resource's ID."
}

// errorResponses are the shared error answers: every one is an ErrorBody.
func errorResponses() map[string]*Response {
	errResp := func(desc string) *Response {
		return &Response{
			Description: desc,
			Headers: map[string]*Header{"X-Request-Id": {Description: "The request's ID, repeated as error.request_id.",
				Schema: &Schema{Type: "string"}}},
			Content: map[string]*MediaType{"application/json": {Schema: &Schema{Ref: refPrefix + "ErrorBody"}}},
		}
	}
	return map[string]*Response{
		"Error": errResp("An error. error.code decides the status (invalid 400, unauthenticated 401, " +
			"permission_denied 403, not_found 404, conflict 409, payload_too_large 413, unprocessable 422, " +
			"resource_exhausted 429, canceled 499, internal 500, unimplemented 501, unavailable 503, " +
			"deadline_exceeded 504; a method a path does not take is 405 method_not_allowed); error.reason, " +
			"when set, is the specific cause (docs/api.md lists them)."),
		"Unauthenticated": errResp("A missing, malformed, unknown or revoked key (code unauthenticated; " +
			"WWW-Authenticate: Bearer realm=\"berth\")."),
		"PermissionDenied": errResp("The key's scope is less than the route needs (reason scope_insufficient)."),
	}
}

func bearerScheme() *SecurityScheme {
	return &SecurityScheme{Type: "http", Scheme: "bearer", BearerFormat: "bk_ followed by 52 base32 characters",
		Description: "An API key: Authorization: Bearer <key>. Keys have a scope (read, execution or admin); " +
			"each operation's security lists the least scope it needs."}
}

// code is the response's status as OpenAPI keys it.
func (r result) code() string { return strconv.Itoa(r.status) }

// describe returns the status's description unless r has its own.
func (r result) describe() string {
	if r.desc != "" {
		return r.desc
	}
	return http.StatusText(r.status) + "."
}

var reflectErrorBody = typeOf[apitype.ErrorBody]()
