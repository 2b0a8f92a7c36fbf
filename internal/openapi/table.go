package openapi

import (
	"fmt"
	"reflect"
)

// op describes one route for the document: what the route table does not
// say.
type op struct {
	id      string // operationId: unique, lowerCamelCase
	summary string
	desc    string
	query   []param
	headers []param
	body    *body
	ok      []result // success answers (errors are added to every operation)
}

// param is a query or header parameter.
type param struct {
	name, desc string
	required   bool
	schema     *Schema
}

// body is a request body in one or more media types.
type body struct {
	desc     string
	required bool
	content  []media
}

// media is one media type of a body: a Go type (JSON), a schema, or
// neither (raw bytes).
type media struct {
	typ    string
	goType reflect.Type
	schema *Schema
}

// result is a success answer.
type result struct {
	status    int
	desc      string
	content   []media
	headers   map[string]string // name: description (string values)
	eventData reflect.Type      // text/event-stream: each event's data
	messages  reflect.Type      // WebSocket: its JSON text messages
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// Query parameters.

func qString(name, desc string) param {
	return param{name: name, desc: desc, schema: &Schema{Type: "string"}}
}

func qInt(name, desc string) param {
	return param{name: name, desc: desc, schema: &Schema{Type: "integer", Minimum: ptr(0)}}
}

func qBool(name, desc string) param {
	return param{name: name, desc: desc, schema: &Schema{Type: "boolean"}}
}

func qEnum(name, desc string, values ...string) param {
	return param{name: name, desc: desc, schema: &Schema{Type: "string", Enum: values}}
}

func required(p param) param { p.required = true; return p }

// Shared parameters.
var (
	limitParam  = param{name: "limit", desc: "Page size, 1-1000.", schema: &Schema{Type: "integer", Minimum: ptr(1), Maximum: ptr(1000)}}
	cursorParam = qString("cursor", "The next_cursor of the previous page (bound to the key's tenant).")
	idemKey     = param{name: "Idempotency-Key", desc: "1-255 printable ASCII characters: a retry with the same key and body " +
		"gets the first answer again (Idempotent-Replayed: true) and makes nothing.", schema: &Schema{Type: "string"}}
	leaseHeader = qString("Berth-Control-Lease", "The token of the session's human-control lease, while one is held.")
	userHeader  = qString("Berth-User", "The end user the tenant's application acts for (jobs count capacity per user).")
	outputQuery = []param{
		qInt("wait_ms", "Wait up to this long (at most 60000) for the command to finish before answering."),
		qInt("stdout_offset", "Where the stdout window starts."),
		qInt("stderr_offset", "Where the stderr window starts."),
		qInt("max_bytes", "Most bytes per stream in the window (default 1048576, at most 8 MiB)."),
		qEnum("encoding", "How output is written: utf8 (default) or base64.", "utf8", "utf-8", "base64"),
	}
	windowQuery = []param{
		qInt("offset", "Where the window starts."),
		qInt("wait_ms", "Wait up to this long (at most 60000) for bytes past offset, or the end, before answering."),
		qInt("max_bytes", "Most bytes in the window (default 1048576, at most 8 MiB)."),
	}
)

// Request bodies.

// jsonIn is a JSON request body of type T. An empty body is {}.
func jsonIn[T any]() *body {
	return &body{content: []media{{typ: "application/json", goType: typeOf[T]()}}}
}

// rawIn is a request body of raw bytes.
func rawIn(desc string, types ...string) *body {
	b := &body{desc: desc, required: true}
	for _, t := range types {
		b.content = append(b.content, media{typ: t})
	}
	return b
}

// Answers.

// jsonOut answers status with a JSON body of type T.
func jsonOut[T any](status int, desc string) result {
	return result{status: status, desc: desc, content: []media{{typ: "application/json", goType: typeOf[T]()}}}
}

// noContent answers status without a body.
func noContent(status int) result { return result{status: status} }

// rawOut answers status with raw bytes of one of types.
func rawOut(status int, desc string, types ...string) result {
	r := result{status: status, desc: desc}
	for _, t := range types {
		r.content = append(r.content, media{typ: t})
	}
	return r
}

// sseOut answers 200 with Server-Sent Events whose data is a T.
func sseOut[T any](desc string) result {
	return result{status: 200, desc: desc, content: []media{{typ: "text/event-stream", schema: &Schema{Type: "string"}}},
		eventData: typeOf[T]()}
}

// webSocket answers 101: a WebSocket. messages is the type of its JSON
// text messages, nil when it has none of Berth's.
func webSocket(desc string, messages reflect.Type) result {
	return result{status: 101, desc: "Switching Protocols: a WebSocket (RFC 6455). " + desc, messages: messages}
}

func (b *body) build(sc *schemas) (*RequestBody, error) {
	content, err := buildContent(sc, b.content)
	if err != nil {
		return nil, err
	}
	return &RequestBody{Description: b.desc, Required: b.required, Content: content}, nil
}

func (r result) build(sc *schemas) (*Response, error) {
	content, err := buildContent(sc, r.content)
	if err != nil {
		return nil, err
	}
	out := &Response{Description: r.describe(), Content: content}
	if len(r.headers) > 0 {
		out.Headers = map[string]*Header{}
		for name, desc := range r.headers {
			out.Headers[name] = &Header{Description: desc, Schema: &Schema{Type: "string"}}
		}
	}
	if r.eventData != nil {
		if out.EventData, err = sc.of(r.eventData); err != nil {
			return nil, err
		}
	}
	if r.messages != nil {
		if out.Messages, err = sc.of(r.messages); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func buildContent(sc *schemas, ms []media) (map[string]*MediaType, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	out := map[string]*MediaType{}
	for _, m := range ms {
		mt := &MediaType{Schema: m.schema}
		if m.goType != nil {
			s, err := sc.of(m.goType)
			if err != nil {
				return nil, err
			}
			mt.Schema = s
		}
		if _, dup := out[m.typ]; dup {
			return nil, fmt.Errorf("media type %s twice", m.typ)
		}
		out[m.typ] = mt
	}
	return out, nil
}
