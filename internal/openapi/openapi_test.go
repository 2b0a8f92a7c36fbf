package openapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/openapi"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json from the route table")

// golden is the committed document, from this package's directory.
var golden = filepath.Join("..", "..", "docs", "openapi.json")

// routes is the daemon's route table. The server is built without
// dependencies: only its table is used.
func routes(t *testing.T) []openapi.Route {
	t.Helper()
	rs := httpapi.New(httpapi.Config{}).OpenAPIRoutes()
	if len(rs) < 10 {
		t.Fatalf("httpapi routes = %d, want the whole table", len(rs))
	}
	return rs
}

// TestOpenAPIMatchesRoutes: every route of routes.go has an operation in
// the table, and every operation a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	for _, p := range openapi.Check(routes(t)) {
		t.Error(p)
	}
}

// TestOpenAPICheckFindsDifferences: Check reports a route the table lacks
// and an operation whose route is gone, each by its key; the control is
// the same route list unchanged, where neither is reported.
func TestOpenAPICheckFindsDifferences(t *testing.T) {
	t.Parallel()
	rs := routes(t)
	const extra, gone = "GET /v1/no-such-route", "GET /v1/system"
	control := strings.Join(openapi.Check(rs), "\n")
	if strings.Contains(control, extra) || strings.Contains(control, gone) {
		t.Fatalf("Check(route table) = %s, want neither %s nor %s", control, extra, gone)
	}
	changed := []openapi.Route{{Method: "GET", Path: "/v1/no-such-route", Access: openapi.Read}}
	for _, r := range rs {
		if r.Key() != gone {
			changed = append(changed, r)
		}
	}
	got := openapi.Check(changed)
	for _, want := range []string{"route without operation: " + extra, "operation without route: " + gone} {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, want+" ") }) {
			t.Errorf("Check(table with %s, without %s) = %q, want a line starting %q", extra, gone, got, want)
		}
	}
	// The document still covers the extra route, and drops the gone one.
	doc, err := openapi.Build(changed)
	if err != nil {
		t.Fatal(err)
	}
	if op := doc.Paths["/v1/no-such-route"]["get"]; op == nil || op.OperationID == "" {
		t.Errorf("Build: undocumented route's operation = %+v, want one with an operationId", op)
	}
	if doc.Paths["/v1/system"] != nil {
		t.Errorf("Build: /v1/system without its route = %+v, want absent", doc.Paths["/v1/system"])
	}
}

// TestOpenAPIGolden: docs/openapi.json is the document of the route table
// (go test ./internal/openapi -run TestOpenAPIGolden -update, or make
// openapi, rewrites it), so every API change shows in its diff.
func TestOpenAPIGolden(t *testing.T) {
	t.Parallel()
	got, err := openapi.JSON(routes(t))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading %s: %v (make openapi writes it)", golden, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/openapi.json differs from the document of the route table at line %d; "+
			"run make openapi and review the diff", firstDiffLine(got, want))
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// TestOpenAPIDocumentShape checks the document as generic JSON: version
// 3.1.0; every $ref resolves; every operation has a unique operationId,
// one tag, a parameter for each of its path's template parameters and
// none other,
// a description on each response, security (none only on public routes,
// a 401 on every other) and the error shape on its 4XX and 5XX answers.
func TestOpenAPIDocumentShape(t *testing.T) {
	t.Parallel()
	b, err := openapi.JSON(routes(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range shapeProblems(t, b) {
		t.Error(p)
	}
}

// TestOpenAPIShapeCheckFails is the shape check's control: documents
// broken in each way it looks for are reported.
func TestOpenAPIShapeCheckFails(t *testing.T) {
	t.Parallel()
	b, err := openapi.JSON(routes(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, from, to, want string }{
		{"version", `"openapi": "3.1.0"`, `"openapi": "3.0.3"`, "openapi ="},
		{"dangling ref", `"$ref": "#/components/schemas/Sandbox"`, `"$ref": "#/components/schemas/Sandboxx"`, "does not resolve"},
		{"duplicate operationId", `"operationId": "getSandbox"`, `"operationId": "listSandboxes"`, "operationId listSandboxes"},
		{"path parameter missing", `"/v1/sandboxes/{id}/pause"`, `"/v1/sandboxes/{sid}/pause"`, "path parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Contains(b, []byte(tt.from)) {
				t.Fatalf("document lacks %s", tt.from)
			}
			broken := bytes.Replace(b, []byte(tt.from), []byte(tt.to), 1)
			got := shapeProblems(t, broken)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("shapeProblems(%s) = %q, want one containing %q", tt.name, got, tt.want)
			}
		})
	}
}

var templateParam = regexp.MustCompile(`\{([^}]+)\}`)

// shapeProblems lists what is wrong with document b.
func shapeProblems(t *testing.T, b []byte) []string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("document is not JSON: %v", err)
	}
	var out []string
	if doc["openapi"] != "3.1.0" {
		out = append(out, fmt.Sprintf("openapi = %v, want 3.1.0", doc["openapi"]))
	}
	walkRefs(doc, "#", func(at, ref string) {
		if _, ok := resolve(doc, ref); !ok {
			out = append(out, fmt.Sprintf("%s: $ref %s does not resolve", at, ref))
		}
	})
	ids := map[string]string{}
	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		out = append(out, "no paths")
	}
	for path, item := range paths {
		var want []string
		for _, m := range templateParam.FindAllStringSubmatch(path, -1) {
			want = append(want, m[1])
		}
		slices.Sort(want)
		for method, v := range item.(map[string]any) {
			op := v.(map[string]any)
			where := strings.ToUpper(method) + " " + path
			id, _ := op["operationId"].(string)
			if prev, dup := ids[id]; dup || id == "" {
				out = append(out, fmt.Sprintf("%s: operationId %s is empty or also %s's", where, id, prev))
			}
			ids[id] = where
			if tags, _ := op["tags"].([]any); len(tags) != 1 || tags[0] == "" {
				out = append(out, fmt.Sprintf("%s: tags %v, want one", where, op["tags"]))
			}
			out = append(out, opProblems(doc, where, op, want)...)
		}
	}
	return out
}

// opProblems checks one operation: its path parameters (want, sorted),
// responses and security.
func opProblems(doc map[string]any, where string, op map[string]any, want []string) []string {
	var out []string
	var got []string
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		p := p.(map[string]any)
		if p["in"] == "path" {
			got = append(got, p["name"].(string))
			if p["required"] != true {
				out = append(out, fmt.Sprintf("%s: path parameter %s is not required", where, p["name"]))
			}
		}
		if p["schema"] == nil {
			out = append(out, fmt.Sprintf("%s: parameter %s has no schema", where, p["name"]))
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		out = append(out, fmt.Sprintf("%s: path parameters %q, want %q (one per template parameter)", where, got, want))
	}
	responses, _ := op["responses"].(map[string]any)
	if len(responses) == 0 {
		out = append(out, where+": no responses")
	}
	for status, v := range responses {
		r := v.(map[string]any)
		if ref, ok := r["$ref"].(string); ok {
			r, _ = resolveMap(doc, ref)
		}
		if r["description"] == nil || r["description"] == "" {
			out = append(out, fmt.Sprintf("%s: response %s has no description", where, status))
		}
	}
	for _, status := range []string{"4XX", "5XX"} {
		r, _ := responses[status].(map[string]any)
		ref, _ := r["$ref"].(string)
		errResp, _ := resolveMap(doc, ref)
		if !strings.Contains(fmt.Sprint(errResp["content"]), "#/components/schemas/ErrorBody") {
			out = append(out, fmt.Sprintf("%s: response %s is not the error shape (ErrorBody)", where, status))
		}
	}
	security, ok := op["security"].([]any)
	switch access := op["x-berth-access"]; {
	case !ok:
		out = append(out, where+": no security")
	case access == "public" && len(security) != 0:
		out = append(out, fmt.Sprintf("%s: public route with security %v", where, security))
	case access != "public" && (len(security) != 1 || responses["401"] == nil):
		out = append(out, fmt.Sprintf("%s: %v route without the bearer key or a 401", where, access))
	case access != "public":
		scopes := security[0].(map[string]any)["bearerKey"]
		if fmt.Sprint(scopes) != fmt.Sprintf("[%v]", access) {
			out = append(out, fmt.Sprintf("%s: security scopes %v, want [%v]", where, scopes, access))
		}
	}
	return out
}

// walkRefs calls f with every $ref in v and where it is.
func walkRefs(v any, at string, f func(at, ref string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if ref, ok := e.(string); ok && k == "$ref" {
				f(at, ref)
				continue
			}
			walkRefs(e, at+"/"+k, f)
		}
	case []any:
		for i, e := range v {
			walkRefs(e, fmt.Sprintf("%s/%d", at, i), f)
		}
	}
}

// resolve follows a local JSON pointer reference.
func resolve(doc map[string]any, ref string) (any, bool) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func resolveMap(doc map[string]any, ref string) (map[string]any, bool) {
	v, ok := resolve(doc, ref)
	m, _ := v.(map[string]any)
	return m, ok && m != nil
}
