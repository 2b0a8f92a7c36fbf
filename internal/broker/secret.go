package broker

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/textproto"
)

// redacted replaces a secret value wherever a Secret is printed or logged.
const redacted = "REDACTED"

// Secret is one header bound to a host: the Forwarder sets it on every
// request to that host.
//
// Printing a Secret with any fmt verb, logging it with slog (also inside a
// slice, which slog's JSON handler encodes with encoding/json) or encoding it
// as JSON shows REDACTED in place of Value. Store the value sealed, on its
// own.
type Secret struct {
	Host   string // exact lowercase host name
	Header string // canonical header name, e.g. "Authorization"
	Value  string
}

// String describes s without its value.
func (s Secret) String() string {
	return fmt.Sprintf("{Host:%s Header:%s Value:%s}", s.Host, s.Header, redacted)
}

// GoString describes s in Go syntax without its value, for %#v.
func (s Secret) GoString() string {
	return fmt.Sprintf("broker.Secret{Host:%q, Header:%q, Value:%q}", s.Host, s.Header, redacted)
}

// Format implements fmt.Formatter so that no verb prints the value: without
// it, verbs such as %d or %x would format the struct's fields one by one.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		io.WriteString(f, s.GoString())
		return
	}
	io.WriteString(f, s.String())
}

// LogValue implements slog.LogValuer: s logs as a group of host, header and
// a redacted value.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("host", s.Host),
		slog.String("header", s.Header),
		slog.String("value", redacted),
	)
}

// MarshalJSON encodes s as an object of host, header and a redacted value.
// A slice of secrets logged by slog's JSON handler is encoded this way.
func (s Secret) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Host   string `json:"host"`
		Header string `json:"header"`
		Value  string `json:"value"`
	}{s.Host, s.Header, redacted})
}

// MaxValue bounds a secret's value.
const MaxValue = 8 << 10

// Problem says what is wrong with s, naming the field ("host", "header"
// or "value") and why, never quoting the value; "" when s can be served.
// Host must be an exact lowercase DNS name, Header a token that neither
// frames nor routes the request, Value 1 to MaxValue bytes of no control
// characters but tab.
func (s Secret) Problem() (field, why string) {
	switch {
	case !validHost(s.Host):
		return "host", fmt.Sprintf("%q is not a host name (an exact lowercase name such as api.example.com)", s.Host)
	case !validHeaderName(s.Header) || len(s.Header) > 128:
		return "header", fmt.Sprintf("%q is not a header name", s.Header)
	case reservedHeaders[textproto.CanonicalMIMEHeaderKey(s.Header)]:
		return "header", fmt.Sprintf("%s frames or routes the request, so it cannot carry a secret", s.Header)
	case s.Value == "" || len(s.Value) > MaxValue || !validHeaderValue(s.Value):
		return "value", fmt.Sprintf("must be 1-%d bytes with no control characters but tab", MaxValue)
	}
	return "", ""
}
