package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestStrictJSONBodies sends, through the real daemon, bodies that
// encoding/json alone takes without a word: a repeated member (the last
// would run), a field name in the wrong case, invalid UTF-8 (it would
// become U+FFFD). Each is refused with its reason and runs nothing; the
// same body written correctly (the control) is accepted and runs, on the
// daemon's own routes and on one the agent decodes.
func TestStrictJSONBodies(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	auth := bearerAuth(d.Token)

	// Creating a sandbox: "Runtime" would be taken as "runtime".
	sbPath := "/v1/sandboxes"
	r := sendProbe(t, d, httpProbe{method: http.MethodPost, path: sbPath, auth: auth, body: `{"Runtime":"` + testenv.Runtime() + `"}`})
	if e := r.wantError(t, "create with Runtime", http.StatusBadRequest, errcode.Invalid, "body_field_case"); e.Problems["Runtime"] == "" {
		t.Errorf("create with Runtime: problems %v, want one for Runtime", e.Problems)
	}
	r = sendProbe(t, d, httpProbe{method: http.MethodPost, path: sbPath, auth: auth, body: `{"runtime":"` + testenv.Runtime() + `"}`})
	if r.status != http.StatusCreated {
		t.Fatalf("create (control) = %d %s, want 201", r.status, r.body)
	}
	var sb apitype.Sandbox
	if err := json.Unmarshal([]byte(r.body), &sb); err != nil {
		t.Fatal(err)
	}
	if list, _ := d.Client.ListSandboxes(ctx); len(list) != 1 {
		t.Errorf("sandboxes = %+v, want only the control's", list)
	}

	cmdPath := "/v1/sandboxes/" + sb.ID + "/commands?wait_ms=30000"
	for _, tt := range []struct{ name, body, reason, field string }{
		{"repeated command", `{"command":"echo first","command":"echo second"}`, "body_duplicate_field", "command"},
		{"repeated env key", `{"command":"echo $A","env":{"A":"first","A":"second"}}`, "body_duplicate_field", "env.A"},
		{"Command", `{"Command":"echo second"}`, "body_field_case", "Command"},
		{"invalid UTF-8", "{\"command\":\"echo second\xff\"}", "body_invalid_utf8", "command"},
		{"lone surrogate", `{"command":"echo second\ud800"}`, "body_invalid_utf8", "command"},
	} {
		r := sendProbe(t, d, httpProbe{method: http.MethodPost, path: cmdPath, auth: auth, body: tt.body})
		if e := r.wantError(t, tt.name, http.StatusBadRequest, errcode.Invalid, tt.reason); e.Problems[tt.field] == "" {
			t.Errorf("%s: problems %v, want one for %q", tt.name, e.Problems, tt.field)
		}
	}
	if cmds, err := d.Client.Commands(ctx, sb.ID); err != nil || len(cmds) != 0 {
		t.Errorf("commands after the refusals = %+v, %v; want none", cmds, err)
	}
	r = sendProbe(t, d, httpProbe{method: http.MethodPost, path: cmdPath, auth: auth, body: `{"command":"echo second"}`})
	var rec apitype.Command
	if err := json.Unmarshal([]byte(r.body), &rec); err != nil || r.status/100 != 2 || rec.Stdout != "second\n" {
		t.Errorf("exec (control) = %d %s, want 2xx with stdout second", r.status, r.body)
	}

	// A body the daemon forwards and the agent decodes: mkdir.
	mkPath := "/v1/sandboxes/" + sb.ID + "/files/mkdir"
	r = sendProbe(t, d, httpProbe{method: http.MethodPost, path: mkPath, auth: auth, body: `{"path":"first","path":"second"}`})
	r.wantError(t, "mkdir with a repeated path", http.StatusBadRequest, errcode.Invalid, "body_duplicate_field")
	r = sendProbe(t, d, httpProbe{method: http.MethodPost, path: mkPath, auth: auth, body: `{"path":"second"}`})
	if r.status/100 != 2 {
		t.Errorf("mkdir (control) = %d %s, want 2xx", r.status, r.body)
	}
	list, err := d.Client.ListFiles(ctx, sb.ID, ".", "", 0)
	var names []string
	for _, f := range list.Entries {
		names = append(names, f.Name)
	}
	if err != nil || strings.Join(names, ",") != "second" {
		t.Errorf("workspace = %v, %v; want only the control's directory", names, err)
	}
}
