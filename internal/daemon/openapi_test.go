package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/openapi"
	"github.com/berthdev/berth/internal/testenv"
)

// TestOpenAPIServedWithoutKey: a real daemon serves the OpenAPI document
// of its route table at GET /v1/openapi.json to a request without a key
// (and to one with a bad key: public routes ignore keys), as JSON; and
// what the daemon answers matches it: real answers of a few routes, and
// an error, validate against the schemas the document gives them. The
// control: /v1/system on the same daemon without a key is 401.
func TestOpenAPIServedWithoutKey(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)

	sendProbe(t, d, httpProbe{method: "GET", path: "/v1/system"}).
		wantError(t, "GET /v1/system without a key", http.StatusUnauthorized, "unauthenticated", "")
	var served string
	for _, auth := range []string{"", "Bearer x", unknownKey()} {
		r := sendProbe(t, d, httpProbe{method: "GET", path: "/v1/openapi.json", auth: auth})
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET /v1/openapi.json (Authorization %q) = %d %s %.200s, want 200 application/json",
				auth, r.status, r.header.Get("Content-Type"), r.body)
		}
		served = r.body
	}
	want, err := openapi.JSON(httpapi.New(httpapi.Config{}).OpenAPIRoutes())
	if err != nil {
		t.Fatal(err)
	}
	if served != string(want) {
		t.Errorf("GET /v1/openapi.json is not the document of the route table (%d bytes, want %d)", len(served), len(want))
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(served), &doc); err != nil {
		t.Fatalf("GET /v1/openapi.json: %v", err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}

	sb, err := d.Client.CreateSandbox(t.Context(), apitype.CreateSandboxRequest{Name: "openapi", Lazy: true,
		Runtime: testenv.Runtime()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path, docPath string
		status                int
		body                  string
	}{
		{"GET", "/v1/system", "/v1/system", 200, ""},
		{"GET", "/v1/sandboxes", "/v1/sandboxes", 200, ""},
		{"GET", "/v1/sandboxes/" + sb.ID, "/v1/sandboxes/{id}", 200, ""},
		{"GET", "/v1/sandboxes/" + sb.ID + "/network", "/v1/sandboxes/{id}/network", 200, ""},
		{"GET", "/v1/sandboxes/" + sb.ID + "/secrets", "/v1/sandboxes/{id}/secrets", 409, ""}, // network none
		{"GET", "/v1/sandboxes/" + sb.ID + "/previews/8000", "/v1/sandboxes/{id}/previews/{port}", 200, ""},
		{"GET", "/v1/templates", "/v1/templates", 200, ""},
		{"GET", "/v1/keys", "/v1/keys", 200, ""},
		{"GET", "/v1/tenants/ten_default", "/v1/tenants/{id}", 200, ""},
		{"GET", "/healthz", "/healthz", 200, ""},
		{"GET", "/v1/sandboxes/" + ident.New("sbx_"), "/v1/sandboxes/{id}", 404, ""},
		{"GET", "/api/v1/execution", "/api/v1/execution", 200, ""},
		{"POST", "/api/v1/stations/local/execution/sandbox", "/api/v1/stations/{stationId}/execution/{primitive}", 200,
			`{"method": "list"}`},
		{"POST", "/api/v1/stations/elsewhere/execution/sandbox", "/api/v1/stations/{stationId}/execution/{primitive}", 404,
			`{"method": "list"}`},
	}
	for _, tt := range tests {
		r := sendProbe(t, d, httpProbe{method: tt.method, path: tt.path, auth: bearerAuth(d.Token), body: tt.body})
		if r.status != tt.status {
			t.Errorf("%s %s = %d %.300s, want %d", tt.method, tt.path, r.status, r.body, tt.status)
			continue
		}
		schema, err := answerSchema(doc, tt.docPath, tt.method, r.status)
		if err != nil {
			t.Errorf("%s %s: %v", tt.method, tt.path, err)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			t.Errorf("%s %s: %v", tt.method, tt.path, err)
			continue
		}
		for _, p := range validate(doc, schema, v, "$") {
			t.Errorf("%s %s = %d, not as the document says: %s", tt.method, tt.path, r.status, p)
		}
	}
	// The validator's control: the system answer checked against the
	// sandbox's schema fails.
	sys := sendProbe(t, d, httpProbe{method: "GET", path: "/v1/system", auth: bearerAuth(d.Token)})
	var sysv any
	if err := json.Unmarshal([]byte(sys.body), &sysv); err != nil {
		t.Fatal(err)
	}
	if s, err := answerSchema(doc, "/v1/sandboxes/{id}", "GET", 200); err != nil || len(validate(doc, s, sysv, "$")) == 0 {
		t.Errorf("validate(system answer, Sandbox schema) found no problem (%v): the check cannot fail", err)
	}
}

// answerSchema returns the JSON schema the document gives the answer of
// status to method path: its own, or for an error the 4XX/5XX one.
func answerSchema(doc map[string]any, path, method string, status int) (map[string]any, error) {
	op, ok := dig(doc, "paths", path, strings.ToLower(method)).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the document has no %s %s", method, path)
	}
	responses, _ := op["responses"].(map[string]any)
	r, ok := responses[strconv.Itoa(status)].(map[string]any)
	if !ok {
		r, ok = responses[fmt.Sprintf("%dXX", status/100)].(map[string]any)
	}
	if !ok {
		return nil, fmt.Errorf("the document gives %s %s no answer %d", method, path, status)
	}
	if ref, ok := r["$ref"].(string); ok {
		r, _ = deref(doc, ref).(map[string]any)
	}
	s, ok := dig(r, "content", "application/json", "schema").(map[string]any)
	if !ok {
		return nil, fmt.Errorf("answer %d of %s %s has no JSON schema", status, method, path)
	}
	return s, nil
}

// validate checks v against schema with the keywords the document uses:
// $ref, anyOf, type, enum, properties, required, additionalProperties,
// items. It returns one line per problem, with where in v it is.
// Unlike JSON Schema, an object with properties and no
// additionalProperties admits no others.
func validate(doc, schema map[string]any, v any, at string) []string {
	if ref, ok := schema["$ref"].(string); ok {
		target, ok := deref(doc, ref).(map[string]any)
		if !ok {
			return []string{at + ": $ref " + ref + " does not resolve"}
		}
		return validate(doc, target, v, at)
	}
	if anyOf, ok := schema["anyOf"].([]any); ok {
		for _, s := range anyOf {
			if len(validate(doc, s.(map[string]any), v, at)) == 0 {
				return nil
			}
		}
		return []string{fmt.Sprintf("%s: %v matches none of anyOf", at, v)}
	}
	if typ, ok := schema["type"]; ok && !typeMatches(typ, v) {
		return []string{fmt.Sprintf("%s: %T %v, want type %v", at, v, v, typ)}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, v) {
		return []string{fmt.Sprintf("%s: %v, want one of %v", at, v, enum)}
	}
	var out []string
	switch v := v.(type) {
	case map[string]any:
		props, closed := schema["properties"].(map[string]any)
		required, _ := schema["required"].([]any)
		for _, r := range required {
			if _, ok := v[r.(string)]; !ok {
				out = append(out, fmt.Sprintf("%s: required %s missing", at, r))
			}
		}
		for k, e := range v {
			s, ok := props[k].(map[string]any)
			if !ok {
				s, ok = schema["additionalProperties"].(map[string]any)
			}
			if !ok && closed {
				// Stricter than JSON Schema: an object whose properties
				// are listed has no others, so an answer's field the
				// document lacks is found.
				out = append(out, fmt.Sprintf("%s: %s is not in the schema", at, k))
				continue
			}
			if !ok {
				continue // a free-form object
			}
			out = append(out, validate(doc, s, e, at+"."+k)...)
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range v {
				out = append(out, validate(doc, items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return out
}

func typeMatches(typ, v any) bool {
	if list, ok := typ.([]any); ok {
		return slices.ContainsFunc(list, func(t any) bool { return typeMatches(t, v) })
	}
	switch v := v.(type) {
	case nil:
		return typ == "null"
	case bool:
		return typ == "boolean"
	case string:
		return typ == "string"
	case float64:
		return typ == "number" || typ == "integer" && v == float64(int64(v))
	case []any:
		return typ == "array"
	case map[string]any:
		return typ == "object"
	}
	return false
}

// dig follows keys through nested objects.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// deref resolves a local reference (#/a/b).
func deref(doc map[string]any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	return dig(doc, strings.Split(rest, "/")...)
}
