package openapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	N int `json:"n"`
}

type embedded struct {
	Promoted string `json:"promoted"`
}

type sample struct {
	embedded
	Name     string            `json:"name"`
	Opt      string            `json:"opt,omitempty"`
	Zero     int32             `json:"zero,omitzero"`
	At       time.Time         `json:"at"`
	Maybe    *time.Time        `json:"maybe,omitempty"`
	Nullable *inner            `json:"nullable"`
	Bytes    []byte            `json:"bytes"`
	Labels   map[string]string `json:"labels,omitempty"`
	List     []inner           `json:"list"`
	Raw      json.RawMessage   `json:"raw,omitempty"`
	Any      any               `json:"any"`
	Mode     uint32            `json:"mode"`
	Ratio    float64           `json:"ratio"`
	Skipped  string            `json:"-"`
	Untagged bool
	//lint:ignore U1000 an unexported field, which the schema leaves out
	hidden int
}

// TestSchemaOfStruct: a struct's schema follows encoding/json: tags name
// properties, omitempty and omitzero fields are optional, embedded fields
// are promoted, times are date-time strings, bytes base64, pointers
// encoded when nil may be null, named structs are references.
func TestSchemaOfStruct(t *testing.T) {
	t.Parallel()
	sc := newSchemas([]string{"sample.ratio"})
	ref, err := sc.of(reflect.TypeFor[*sample]())
	if err != nil {
		t.Fatal(err)
	}
	if ref.Ref != refPrefix+"sample" {
		t.Fatalf("of(*sample) = %+v, want a reference to sample", ref)
	}
	innerRef := &Schema{Ref: refPrefix + "inner"}
	want := &Schema{Type: "object",
		Properties: map[string]*Schema{
			"promoted": {Type: "string"},
			"name":     {Type: "string"},
			"opt":      {Type: "string"},
			"zero":     {Type: "integer", Format: "int32"},
			"at":       {Type: "string", Format: "date-time"},
			"maybe":    {Type: "string", Format: "date-time"},
			"nullable": {AnyOf: []*Schema{innerRef, {Type: "null"}}},
			"bytes":    {Type: "string", ContentEncoding: "base64"},
			"labels":   {Type: "object", AdditionalProperties: &Schema{Type: "string"}},
			"list":     {Type: "array", Items: innerRef},
			"raw":      {Description: "any JSON value"},
			"any":      {},
			"mode":     {Type: "integer", Minimum: ptr(0)},
			"ratio":    {Type: "number"},
			"Untagged": {Type: "boolean"},
		},
		Required: []string{"Untagged", "any", "at", "bytes", "list", "mode", "name", "nullable", "promoted"},
	}
	if diff := cmp.Diff(want, sc.defs["sample"]); diff != "" {
		t.Errorf("schema of sample (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&Schema{Type: "object", Properties: map[string]*Schema{"n": {Type: "integer", Format: "int64"}},
		Required: []string{"n"}}, sc.defs["inner"]); diff != "" {
		t.Errorf("schema of inner (-want +got):\n%s", diff)
	}
}

// TestSchemaRefusesWhatJSONCannotSay: a map with non-string keys, a
// channel and two types of one name are errors, not wrong schemas.
func TestSchemaRefusesWhatJSONCannotSay(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		t    reflect.Type
		want string
	}{
		{"int keys", reflect.TypeFor[map[int]string](), "string keys"},
		{"channel", reflect.TypeFor[chan int](), "no JSON schema"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newSchemas(nil).of(tt.t)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("of(%s) = %v, want an error with %q", tt.t, err, tt.want)
			}
		})
	}
	sc := newSchemas(nil)
	if _, err := sc.of(reflect.TypeFor[inner]()); err != nil {
		t.Fatal(err)
	}
	type inner struct{ Y string } // the same name, another type
	if _, err := sc.of(reflect.TypeFor[inner]()); err == nil || !strings.Contains(err.Error(), "two wire types") {
		t.Errorf("of(a second inner) = %v, want a name clash", err)
	}
}

// TestOperationsTable: operationIds are unique over the whole table
// (planned entries included), described and planned entries do not
// overlap, and every key is "METHOD /path".
func TestOperationsTable(t *testing.T) {
	t.Parallel()
	ids := map[string]string{}
	for k, o := range operations() {
		method, path, ok := strings.Cut(k, " ")
		if !ok || method != strings.ToUpper(method) || !strings.HasPrefix(path, "/") {
			t.Errorf("table key %q, want METHOD /path", k)
		}
		if prev, dup := ids[o.id]; dup || o.id == "" {
			t.Errorf("%s: operationId %q is empty or also %s's", k, o.id, prev)
		}
		ids[o.id] = k
		if o.summary == "" || len(o.ok) == 0 {
			t.Errorf("%s: want a summary and at least one success answer", k)
		}
	}
	d := described()
	for k := range plannedOperations() {
		if _, dup := d[k]; dup {
			t.Errorf("%s is both described and planned: keep one", k)
		}
	}
}
