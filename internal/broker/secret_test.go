package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretRedacts(t *testing.T) {
	t.Parallel()
	s := Secret{Host: "api.example.com", Header: "Authorization", Value: "Bearer sk-live-1234"}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%10.3v"} {
		for _, arg := range []any{s, &s, []Secret{s}, struct{ S Secret }{s}} {
			got := fmt.Sprintf(format, arg)
			if strings.Contains(got, "sk-live") {
				t.Errorf("Sprintf(%q, %T) = %q, contains the value", format, arg, got)
			}
		}
	}
	if b, err := json.Marshal([]Secret{s}); err != nil || strings.Contains(string(b), "sk-live") {
		t.Errorf("json.Marshal = %s, %v; want the value redacted", b, err)
	}
	if got := s.String(); !strings.Contains(got, "REDACTED") || !strings.Contains(got, "api.example.com") {
		t.Errorf("String() = %q, want host and REDACTED", got)
	}

	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("secret bound", "secret", s, "secrets", []Secret{s})
	if got := buf.String(); strings.Contains(got, "sk-live") || !strings.Contains(got, `"value":"REDACTED"`) {
		t.Errorf("slog output = %s, want the value REDACTED", got)
	}
	// Positive control: the probe sees a value that is not redacted.
	buf.Reset()
	log.Info("probe", "value", s.Value)
	if !strings.Contains(buf.String(), "sk-live") {
		t.Errorf("slog probe output = %s, want the plain value", buf.String())
	}
}

func TestSecretProblem(t *testing.T) {
	for _, tc := range []struct {
		s     Secret
		field string
	}{
		{Secret{Host: "api.example.com", Header: "Authorization", Value: "Bearer x"}, ""},
		{Secret{Host: "api.example.com", Header: "X-Api-Key", Value: "a\tb"}, ""},
		{Secret{Host: "*.example.com", Header: "A", Value: "v"}, "host"},
		{Secret{Host: "API.example.com", Header: "A", Value: "v"}, "host"},
		{Secret{Host: "10.0.0.1", Header: "A", Value: "v"}, "host"},
		{Secret{Host: "", Header: "A", Value: "v"}, "host"},
		{Secret{Host: "x.com", Header: "Host", Value: "v"}, "header"},
		{Secret{Host: "x.com", Header: "transfer-encoding", Value: "v"}, "header"},
		{Secret{Host: "x.com", Header: "Bad Header", Value: "v"}, "header"},
		{Secret{Host: "x.com", Header: "A", Value: ""}, "value"},
		{Secret{Host: "x.com", Header: "A", Value: "v\r\nInjected: 1"}, "value"},
		{Secret{Host: "x.com", Header: "A", Value: strings.Repeat("v", MaxValue+1)}, "value"},
		{Secret{Host: "x.com", Header: "A", Value: strings.Repeat("v", MaxValue)}, ""},
	} {
		field, why := tc.s.Problem()
		if field != tc.field {
			t.Errorf("Problem(%q %q, %d bytes) = %q %q, want field %q", tc.s.Host, tc.s.Header, len(tc.s.Value), field, why, tc.field)
		}
		if strings.Contains(why, "Injected") || strings.Contains(why, "Bearer") {
			t.Errorf("Problem quotes the value: %q", why)
		}
	}
}
