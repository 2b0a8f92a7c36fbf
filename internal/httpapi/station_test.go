package httpapi

import (
	"bytes"
	"encoding/json"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/internal/wire"
)

func TestStationNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ snake, camel string }{
		{"timeout_ms", "timeoutMs"}, {"exit_code", "exitCode"}, {"finished_at", "finishedAt"},
		{"sandbox_id", "sandboxId"}, {"next_stdout_offset", "nextStdoutOffset"}, {"mime_type", "mimeType"},
		{"id", "id"}, {"ttl_ms", "ttlMs"},
	} {
		if got := snakeToCamel(tc.snake); got != tc.camel {
			t.Errorf("snakeToCamel(%q) = %q, want %q", tc.snake, got, tc.camel)
		}
		if got := camelToSnake(tc.camel); got != tc.snake {
			t.Errorf("camelToSnake(%q) = %q, want %q", tc.camel, got, tc.snake)
		}
	}
}

func TestStationCamelKeysKeepsData(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"created_at": "t", "labels": map[string]any{"team_name": "a"},
		"nodes": []any{map[string]any{"tag_name": "p", "attributes": map[string]any{"data_x_y": "1"}}},
	}
	want := map[string]any{
		"createdAt": "t", "labels": map[string]any{"team_name": "a"},
		"nodes": []any{map[string]any{"tagName": "p", "attributes": map[string]any{"data_x_y": "1"}}},
	}
	if diff := cmp.Diff(want, camelKeys(in, nil)); diff != "" {
		t.Errorf("camelKeys (-want +got):\n%s", diff)
	}
}

// FuzzStationMethods: no body makes a method panic, and every REST call a
// method makes stays on a clean /v1/ path (an ID cannot climb out of its
// route).
func FuzzStationMethods(f *testing.F) {
	for _, seed := range []string{
		`{"method":"exec","id":"sbx_1","command":"node --version","timeoutMs":30000}`,
		`{"method":"command","id":"sbx_1","runId":"cmd_1"}`,
		`{"method":"execute","id":"brs_1","command":{"op":"inspect","target":{"by":"testId","value":"x"}}}`,
		`{"method":"action","id":"brs_1","action":"navigate","value":"https://example.com"}`,
		`{"method":"recordingFrame","id":"rec_1","frameId":"3"}`,
		`{"method":"get","id":"../keys"}`,
		`{"method":"open","profileId":"research","viewport":{"width":10}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b methodBody
		if wire.DecodeJSON(bytes.NewReader(body), &b) != nil {
			return
		}
		for _, primitive := range []string{primitiveSandbox, primitiveBrowser} {
			for name, m := range stationMethods(primitive) {
				call, err := m(b)
				if err != nil {
					continue
				}
				if _, err := json.Marshal(call.body); err != nil {
					t.Errorf("%s %s: body does not encode: %v", primitive, name, err)
				}
				p, err := url.PathUnescape(call.path)
				if err != nil || !strings.HasPrefix(call.path, "/v1/") || path.Clean(call.path) != call.path ||
					strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
					t.Errorf("%s %s: REST path %q is not a clean /v1/ path", primitive, name, call.path)
				}
			}
		}
	})
}
