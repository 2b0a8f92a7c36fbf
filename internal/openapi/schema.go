package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Schema is a JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1), with
// the keywords this document uses. An empty Schema accepts any JSON value.
type Schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	Type                 any                `json:"type,omitempty"` // a string, or a list of them
	Format               string             `json:"format,omitempty"`
	ContentEncoding      string             `json:"contentEncoding,omitempty"`
	Description          string             `json:"description,omitempty"`
	Enum                 []string           `json:"enum,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	Maximum              *float64           `json:"maximum,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	AnyOf                []*Schema          `json:"anyOf,omitempty"`
}

// refPrefix is where component schemas live.
const refPrefix = "#/components/schemas/"

// schemas turns Go wire types into component schemas, one per named
// struct type, following encoding/json's rules: json tags name the
// properties, fields without omitempty (or omitzero) are required,
// embedded structs' fields are promoted, time.Time is a date-time string,
// []byte a base64 string, maps objects, and a pointer that is encoded
// even when nil may be null.
type schemas struct {
	defs  map[string]*Schema
	types map[string]reflect.Type // which Go type took each name
	// optional lists fields that requests may leave out though they carry
	// no omitempty (answers always have them), as "Type.field".
	optional map[string]bool
}

func newSchemas(optional []string) *schemas {
	s := &schemas{defs: map[string]*Schema{}, types: map[string]reflect.Type{}, optional: map[string]bool{}}
	for _, o := range optional {
		s.optional[o] = true
	}
	return s
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// of returns the schema of t: a $ref for named structs (defined once in
// defs), inline otherwise.
func (s *schemas) of(t reflect.Type) (*Schema, error) {
	switch {
	case t == timeType:
		return &Schema{Type: "string", Format: "date-time"}, nil
	case t == rawType:
		return &Schema{Description: "any JSON value"}, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return s.of(t.Elem())
	case reflect.String:
		return &Schema{Type: "string"}, nil
	case reflect.Bool:
		return &Schema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int64:
		return &Schema{Type: "integer", Format: "int64"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return &Schema{Type: "integer", Format: "int32"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &Schema{Type: "integer", Minimum: ptr(0)}, nil
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}, nil
	case reflect.Interface:
		return &Schema{}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &Schema{Type: "string", ContentEncoding: "base64"}, nil
		}
		items, err := s.of(t.Elem())
		if err != nil {
			return nil, err
		}
		return &Schema{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map %s: only string keys are JSON objects", t)
		}
		values, err := s.of(t.Elem())
		if err != nil {
			return nil, err
		}
		return &Schema{Type: "object", AdditionalProperties: values}, nil
	case reflect.Struct:
		return s.object(t)
	}
	return nil, fmt.Errorf("type %s (%s) has no JSON schema", t, t.Kind())
}

// object returns a struct's schema: a reference to its component when the
// type has a name, the object itself otherwise.
func (s *schemas) object(t reflect.Type) (*Schema, error) {
	name := t.Name()
	if name == "" {
		return s.fields(t, "")
	}
	if prev, ok := s.types[name]; ok {
		if prev != t {
			return nil, fmt.Errorf("two wire types are named %s: %s and %s", name, prev, t)
		}
		return &Schema{Ref: refPrefix + name}, nil
	}
	s.types[name] = t // before the fields: a type may refer to itself
	obj, err := s.fields(t, name)
	if err != nil {
		return nil, err
	}
	obj.Description = docOf(t, name)
	s.defs[name] = obj
	return &Schema{Ref: refPrefix + name}, nil
}

// fields builds the object schema of struct t, promoting embedded structs'
// fields as encoding/json does.
func (s *schemas) fields(t reflect.Type, name string) (*Schema, error) {
	obj := &Schema{Type: "object", Properties: map[string]*Schema{}}
	if err := s.addFields(obj, t, name); err != nil {
		return nil, err
	}
	slices.Sort(obj.Required)
	return obj, nil
}

func (s *schemas) addFields(obj *Schema, t reflect.Type, name string) error {
	for f := range t.Fields() {
		tag, hasTag := f.Tag.Lookup("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		prop, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && prop == "" && (ft.Kind() == reflect.Struct || ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct) {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if err := s.addFields(obj, ft, name); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if !hasTag || prop == "" {
			prop = f.Name
		}
		fs, err := s.of(ft)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		omit := hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero")
		if hasOpt(opts, "string") {
			fs = &Schema{Type: "string"}
		}
		if ft.Kind() == reflect.Pointer && !omit {
			fs = &Schema{AnyOf: []*Schema{fs, {Type: "null"}}}
		}
		if d := docOf(t, t.Name()+"."+prop); d != "" && t.Name() != "" {
			fs.Description = d
		}
		obj.Properties[prop] = fs
		if !omit && !s.optional[name+"."+prop] {
			obj.Required = append(obj.Required, prop)
		}
	}
	return nil
}

// apitypePath is the package whose comments apitype_docs.go holds.
const apitypePath = "github.com/berthdev/berth/internal/apitype"

// docOf is the doc comment of key ("Type" or "Type.field") when t is one
// of apitype's types.
func docOf(t reflect.Type, key string) string {
	if t.PkgPath() != apitypePath {
		return ""
	}
	return apitypeDocs[key]
}

func hasOpt(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

func ptr(f float64) *float64 { return &f }
