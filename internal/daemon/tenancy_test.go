package daemon_test

// Tenancy (SECURITY.md AUTH and API groups) against the real daemon: every
// route that names a resource, generated from the route table, answers
// another tenant's resource as a missing one and changes nothing; lists,
// cursors and names stay within a tenant; a read key changes nothing; a
// revoked key's streams close; quotas refuse with their numbers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/testenv"
)

// tenantKey creates tenant name and a key of scope in it.
func tenantKey(t *testing.T, d *testenv.Daemon, name, scope string) (apitype.Tenant, apitype.Key) {
	t.Helper()
	ctx := context.Background()
	ten, err := d.Client.GetTenant(ctx, name)
	if errcode.Is(err, errcode.NotFound) {
		ten, err = d.Client.CreateTenant(ctx, apitype.CreateTenantRequest{Name: name})
	}
	if err != nil {
		t.Fatalf("tenant %s: %v", name, err)
	}
	k, err := d.Client.CreateKey(ctx, apitype.CreateKeyRequest{Name: name + "-" + scope, Scope: scope, Tenant: name})
	if err != nil {
		t.Fatalf("CreateKey(%s, %s): %v", name, scope, err)
	}
	if k.Tenant != ten.ID {
		t.Fatalf("key of %s has tenant %q, want %q", name, k.Tenant, ten.ID)
	}
	return ten, k
}

// ownedObjects are tenant A's resources the route table's IDs are filled
// with.
type ownedObjects struct {
	sandbox, command, terminal, browser, job, file, template, tenant string
	checkpoint                                                       string
}

// ownerNotFound is the reason a route of kind answers for a resource of
// another tenant: the same as for one that never existed.
var ownerNotFound = map[string]string{
	"sandbox": "sandbox_not_found", "browser_session": "session_not_found", "job": "job_not_found",
	"file": "file_not_found", "template": "template_not_found", "tenant": "tenant_not_found",
	"browser_checkpoint": "checkpoint_not_found",
}

func (o ownedObjects) fill(rt httpapi.Route) (string, bool) {
	id := map[string]string{"sandbox": o.sandbox, "browser_session": o.browser, "job": o.job, "template": o.template,
		"tenant": o.tenant, "browser_checkpoint": o.checkpoint}[rt.Owner]
	if rt.Owner == "file" {
		id = o.file
	}
	if id == "" {
		return "", false
	}
	p := strings.NewReplacer("{id}", id, "{name}", id, "{sha256}", id, "{cid}", o.command, "{tid}", o.terminal,
		"{port}", "8000", "{path...}", "x", "{artifact}", "art_none").Replace(rt.Path)
	if strings.HasPrefix(rt.Path, "/v1/sandboxes/{id}/services/{name}") {
		p = strings.Replace(strings.Replace(rt.Path, "{id}", o.sandbox, 1), "{name}", "web", 1)
	}
	return p, true
}

// TestTenancyEveryRoute: for every route that names a resource, tenant B's
// key on tenant A's resource gets the 404 a missing one gets and changes
// nothing; tenant A's key (the positive control) gets past the check.
func TestTenancyEveryRoute(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	testenv.NeedChromium(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tenA, keyA := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, keyB := tenantKey(t, d, "globex", auth.ScopeExecution)
	ca := client.New(d.URL, keyA.Secret)

	var o ownedObjects
	o.tenant = tenA.ID
	sb, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "chat-42", Env: map[string]string{"OWNER": "acme"}})
	if err != nil {
		t.Fatalf("CreateSandbox as acme: %v", err)
	}
	o.sandbox = sb.ID
	cmd, err := ca.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo acme > owned.txt; echo ran"})
	if err != nil || cmd.Stdout != "ran\n" {
		t.Fatalf("Run as acme = %q, %v", cmd.Stdout, err)
	}
	o.command = cmd.ID
	term, err := ca.CreateTerminal(ctx, sb.ID, apitype.CreateTerminalRequest{Cols: 80, Rows: 24, Command: "cat"})
	if err != nil {
		t.Fatalf("CreateTerminal as acme: %v", err)
	}
	o.terminal = term.ID
	ref, err := ca.UploadFile(ctx, strings.NewReader("<p>acme's</p>"), "index.html")
	if err != nil {
		t.Fatalf("UploadFile as acme: %v", err)
	}
	o.file = ref.SHA256
	sess, err := ca.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatalf("OpenBrowserSession as acme: %v", err)
	}
	o.browser = sess.ID
	defer ca.CloseBrowserSession(context.WithoutCancel(ctx), sess.ID)
	bcp, err := ca.CheckpointBrowserSession(ctx, sess.ID)
	if err != nil {
		t.Fatalf("CheckpointBrowserSession as acme: %v", err)
	}
	o.checkpoint = bcp.ID
	j, err := ca.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf",
		Inputs: map[string]apitype.JobInput{"index.html": {SHA256: ref.SHA256}}})
	if err != nil {
		// Jobs run in container sandboxes: without them here, the job
		// routes go unchecked, which CI does not allow.
		testenv.Missing(t, "a job to check the job routes on (%v)", err)
	}
	o.job = j.ID

	before := snapshotOwned(t, ca, o)
	checked := map[string]bool{}
	for _, rt := range routeTable(t) {
		if rt.Owner == "" || rt.AdminOnly {
			continue
		}
		path, ok := o.fill(rt)
		if !ok {
			continue
		}
		checked[rt.Owner] = true
		what := fmt.Sprintf("%s %s", rt.Method, rt.Path)
		r := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: bearerAuth(keyB.Secret), body: probeBody(rt)})
		e := r.wantError(t, what+" (other tenant's key)", http.StatusNotFound, errcode.NotFound, ownerNotFound[rt.Owner])
		if strings.Contains(r.body, "acme") || strings.Contains(r.body, "chat-42") {
			t.Errorf("%s (other tenant's key): the answer names the owner: %s", what, r.body)
		}
		// The same answer as for a resource that never existed: only
		// the ID differs.
		real := idOf(rt, o)
		fake := missingLike(real)
		missing := strings.Replace(path, real, fake, 1)
		if m := sendProbe(t, d, httpProbe{method: rt.Method, path: missing, auth: bearerAuth(keyB.Secret), body: probeBody(rt)}); m.status != r.status ||
			strings.ReplaceAll(decodeError(m.body).Message, fake, "ID") != strings.ReplaceAll(e.Message, real, "ID") {
			t.Errorf("%s: another tenant's resource answers %d %q, a missing one %d %q: they must read the same",
				what, r.status, e.Message, m.status, decodeError(m.body).Message)
		}
		// Positive control: the owner's key is not told it is missing.
		// Deletes and state changes are left out: they would change what
		// the other routes are checked on (the snapshot below covers them).
		if rt.Method == http.MethodDelete || strings.HasSuffix(rt.Path, "/pause") || strings.HasSuffix(rt.Path, "/hibernate") ||
			strings.HasSuffix(rt.Path, "/cancel") && rt.Owner == "job" || strings.HasSuffix(rt.Path, "/resume") && rt.Owner == "browser_checkpoint" {
			continue
		}
		ra := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: bearerAuth(keyA.Secret), body: probeBody(rt)})
		if decodeError(ra.body).Reason == ownerNotFound[rt.Owner] {
			t.Errorf("%s with the owner's key = %d %s, want past the ownership check", what, ra.status, ra.body)
		}
	}
	for _, kind := range []string{"sandbox", "browser_session", "browser_checkpoint", "job", "file", "tenant"} {
		if !checked[kind] {
			t.Errorf("no route of kind %s was checked; the route table or fill lost them", kind)
		}
	}
	if after := snapshotOwned(t, ca, o); after != before {
		t.Errorf("acme's resources changed under the other tenant's calls:\nbefore %s\nafter  %s", before, after)
	}
}

func idOf(rt httpapi.Route, o ownedObjects) string {
	switch rt.Owner {
	case "sandbox":
		return o.sandbox
	case "browser_session":
		return o.browser
	case "job":
		return o.job
	case "file":
		return o.file
	case "template":
		return o.template
	case "tenant":
		return o.tenant
	case "browser_checkpoint":
		return o.checkpoint
	}
	return ""
}

// missingLike returns an ID of id's shape that names nothing.
func missingLike(id string) string {
	if len(id) == 64 && strings.Trim(id, "0123456789abcdef") == "" {
		return strings.Repeat("0", 64)
	}
	if prefix, rest, ok := strings.Cut(id, "_"); ok {
		return prefix + "_" + strings.Repeat("a", len(rest))
	}
	return id + "-missing"
}

func decodeError(body string) apitype.ErrorDetail {
	var eb apitype.ErrorBody
	_ = json.Unmarshal([]byte(body), &eb)
	return eb.Error
}

// snapshotOwned describes A's resources, as A sees them, to compare.
func snapshotOwned(t *testing.T, c *client.Client, o ownedObjects) string {
	t.Helper()
	ctx := context.Background()
	sb, err := c.GetSandbox(ctx, o.sandbox)
	if err != nil {
		t.Fatalf("GetSandbox as the owner: %v", err)
	}
	cmds, err := c.Commands(ctx, o.sandbox)
	if err != nil {
		t.Fatalf("Commands as the owner: %v", err)
	}
	terms, err := c.Terminals(ctx, o.sandbox)
	if err != nil {
		t.Fatalf("Terminals as the owner: %v", err)
	}
	f := readSandboxFile(t, c, o.sandbox, "owned.txt")
	s := fmt.Sprintf("sandbox %s %s %s; %d commands; %d terminals; owned.txt %q", sb.ID, sb.Name, sb.State, len(cmds), len(terms), f)
	if o.browser != "" {
		sess, err := c.BrowserSession(ctx, o.browser)
		if err != nil {
			t.Fatalf("GetBrowserSession as the owner: %v", err)
		}
		s += "; browser " + sess.State
	}
	if o.checkpoint != "" {
		if _, err := c.BrowserCheckpoint(ctx, o.checkpoint); err != nil {
			t.Fatalf("BrowserCheckpoint as the owner: %v", err)
		}
		s += "; checkpoint"
	}
	if o.job != "" {
		if _, err := c.Job(ctx, o.job); err != nil {
			t.Fatalf("GetJob as the owner: %v", err)
		}
		s += "; job"
	}
	return s
}

// TestTenancyListsNamesCursors: two tenants may both own chat-42; each
// lists only its own; a page's cursor is its tenant's alone.
func TestTenancyListsNamesCursors(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, keyA := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, keyB := tenantKey(t, d, "globex", auth.ScopeExecution)
	ca, cb := client.New(d.URL, keyA.Secret), client.New(d.URL, keyB.Secret)

	a1, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "chat-42", Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := cb.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "chat-42", Lazy: true})
	if err != nil {
		t.Fatalf("CreateSandbox chat-42 as the second tenant: %v (names are per tenant)", err)
	}
	if a1.ID == b1.ID {
		t.Fatalf("both tenants' chat-42 are %s; want two sandboxes", a1.ID)
	}
	// The same name again in one tenant is that tenant's sandbox.
	if again, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "chat-42", Lazy: true}); err != nil || again.ID != a1.ID {
		t.Errorf("CreateSandbox chat-42 again as acme = %s, %v, want %s", again.ID, err, a1.ID)
	}
	var mine []string
	for i := range 4 {
		sb, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: fmt.Sprintf("a-%d", i), Lazy: true})
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, sb.ID)
	}
	mine = append([]string{a1.ID}, mine...)

	listA, err := ca.ListSandboxes(ctx)
	if err != nil || len(listA) != len(mine) {
		t.Fatalf("ListSandboxes as acme = %d, %v, want %d", len(listA), err, len(mine))
	}
	for _, sb := range listA {
		if sb.ID == b1.ID {
			t.Errorf("acme's list holds globex's sandbox %s", sb.ID)
		}
	}
	listB, err := cb.ListSandboxes(ctx)
	if err != nil || len(listB) != 1 || listB[0].ID != b1.ID {
		t.Errorf("ListSandboxes as globex = %v, %v, want only %s", listB, err, b1.ID)
	}
	all, err := d.Client.ListSandboxes(ctx)
	if err != nil || len(all) != len(mine)+1 {
		t.Errorf("ListSandboxes as admin = %d, %v, want %d (every tenant's)", len(all), err, len(mine)+1)
	}

	// Pages of 2 walk acme's sandboxes once each, in order.
	var walked []string
	cursor := ""
	var firstCursor string
	for range 10 {
		page, err := ca.ListSandboxesPage(ctx, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range page.Sandboxes {
			walked = append(walked, sb.ID)
		}
		if firstCursor == "" {
			firstCursor = page.NextCursor
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if strings.Join(walked, ",") != strings.Join(mine, ",") {
		t.Errorf("pages walked %v, want %v", walked, mine)
	}
	if firstCursor == "" {
		t.Fatal("a page of 2 of 5 sandboxes has no next cursor")
	}
	// Another tenant's use of the cursor is refused, not answered with a page.
	_, err = cb.ListSandboxesPage(ctx, 2, firstCursor)
	if !client.IsReason(err, "cursor_invalid") {
		t.Errorf("acme's cursor with globex's key = %v, want 400 cursor_invalid", err)
	}
	if _, err := ca.ListSandboxesPage(ctx, 2, firstCursor+"x"); !client.IsReason(err, "cursor_invalid") {
		t.Errorf("a tampered cursor = %v, want cursor_invalid", err)
	}
}

// TestTenancyReadScope: a read key lists and reads its tenant's resources
// and every route that changes anything refuses it.
func TestTenancyReadScope(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, exe := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, ro := tenantKey(t, d, "acme", auth.ScopeRead)
	ce, cr := client.New(d.URL, exe.Secret), client.New(d.URL, ro.Secret)
	sb, err := ce.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := ce.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo hi > f.txt"})
	if err != nil {
		t.Fatal(err)
	}
	// Reads work.
	if _, err := cr.GetSandbox(ctx, sb.ID); err != nil {
		t.Errorf("GetSandbox with the read key: %v", err)
	}
	if got := readSandboxFile(t, cr, sb.ID, "f.txt"); got != "hi\n" {
		t.Errorf("f.txt with the read key = %q", got)
	}
	if list, err := cr.ListSandboxes(ctx); err != nil || len(list) != 1 {
		t.Errorf("ListSandboxes with the read key = %d, %v, want 1", len(list), err)
	}
	// Everything else is refused, before it does anything.
	o := ownedObjects{sandbox: sb.ID, command: cmd.ID, terminal: "term_x", tenant: "acme"}
	refused := 0
	for _, rt := range routeTable(t) {
		if rt.Public || rt.ReadOnly {
			continue
		}
		path, ok := o.fill(rt)
		if !ok {
			path = fillPath(t, rt, sb.ID, cmd.ID)
		}
		r := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: bearerAuth(ro.Secret), body: probeBody(rt)})
		r.wantError(t, rt.Method+" "+rt.Path+" (read key)", http.StatusForbidden, errcode.PermissionDenied, "scope_insufficient")
		refused++
	}
	if refused < 20 {
		t.Errorf("only %d routes refuse a read key; the table lost its scopes", refused)
	}
	after, err := ce.GetSandbox(ctx, sb.ID)
	if err != nil || after.State != apitype.StateRunning {
		t.Errorf("sandbox after the read key's attempts = %+v, %v, want running", after, err)
	}
	if got := readSandboxFile(t, ce, sb.ID, "f.txt"); got != "hi\n" {
		t.Errorf("f.txt after the read key's attempts = %q", got)
	}
}

// TestTenancyRevocationClosesStreams: what a key has open (an exec stream,
// a terminal WebSocket) closes within 5 s of its revocation; another key's
// stream (the control) stays open.
func TestTenancyRevocationClosesStreams(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, doomed := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, kept := tenantKey(t, d, "acme", auth.ScopeExecution)
	cd, ck := client.New(d.URL, doomed.Secret), client.New(d.URL, kept.Secret)
	sb, err := ck.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := ck.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "while true; do echo tick; sleep 0.2; done", TimeoutMS: 120000})
	if err != nil {
		t.Fatal(err)
	}
	term, err := ck.CreateTerminal(ctx, sb.ID, apitype.CreateTerminalRequest{Cols: 80, Rows: 24, Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}

	// Each stream reports when it ended.
	type ended struct {
		what string
		at   time.Time
		err  error
	}
	ends := make(chan ended, 4)
	stream := func(c *client.Client, what string) {
		_, err := c.Stream(ctx, sb.ID, cmd.ID, 0, 0, func(client.Event) error { return nil })
		ends <- ended{what, time.Now(), err}
	}
	ws := func(c *client.Client, what string) {
		conn, err := c.AttachTerminal(ctx, sb.ID, term.ID, 0)
		if err != nil {
			ends <- ended{what, time.Now(), err}
			return
		}
		defer conn.CloseNow()
		for {
			if _, _, err := conn.Read(ctx); err != nil {
				ends <- ended{what, time.Now(), err}
				return
			}
		}
	}
	go stream(cd, "doomed exec stream")
	go ws(cd, "doomed terminal")
	go stream(ck, "kept exec stream")
	go ws(ck, "kept terminal")
	time.Sleep(time.Second) // all four open
	select {
	case e := <-ends:
		t.Fatalf("%s ended before the revocation: %v", e.what, e.err)
	default:
	}
	revoked := time.Now()
	if err := d.Client.RevokeKey(ctx, doomed.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case e := <-ends:
			if !strings.HasPrefix(e.what, "doomed") {
				t.Errorf("%s ended after another key's revocation: %v", e.what, e.err)
			}
			if d := e.at.Sub(revoked); d > 5*time.Second {
				t.Errorf("%s ended %v after the revocation, want within 5s", e.what, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a revoked key's stream is still open 10s after the revocation")
		}
	}
	// The other key's streams are still open.
	select {
	case e := <-ends:
		t.Errorf("%s ended: %v", e.what, e.err)
	case <-time.After(time.Second):
	}
	// And the revoked key opens nothing new.
	if _, err := cd.GetSandbox(ctx, sb.ID); !client.IsCode(err, errcode.Unauthenticated) {
		t.Errorf("GetSandbox with the revoked key = %v, want unauthenticated", err)
	}
}

// TestTenancyQuotas: a tenant's quota refuses with 429 quota_exceeded
// naming the quota, its limit and its use, and GET /v1/tenants/{id} shows
// use against limits; another tenant is not limited by it.
func TestTenancyQuotas(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ten, keyA := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, keyB := tenantKey(t, d, "globex", auth.ScopeExecution)
	ca, cb := client.New(d.URL, keyA.Secret), client.New(d.URL, keyB.Secret)
	two := 2
	if _, err := d.Client.SetTenant(ctx, "acme", apitype.SetTenantRequest{MaxSandboxes: &two}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{Lazy: true}); err != nil {
			t.Fatalf("sandbox %d of 2: %v", i+1, err)
		}
	}
	_, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{Lazy: true})
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Reason != "quota_exceeded" || !strings.Contains(ce.Message, "max_sandboxes is 2") ||
		!strings.Contains(ce.Message, "2 is in use") {
		t.Fatalf("third sandbox with max_sandboxes 2 = %v, want 429 quota_exceeded naming max_sandboxes, 2 and 2", err)
	}
	if list, _ := ca.ListSandboxes(ctx); len(list) != 2 {
		t.Errorf("acme has %d sandboxes after the refusal, want 2", len(list))
	}
	// Positive control: another tenant creates freely.
	for range 3 {
		if _, err := cb.CreateSandbox(ctx, apitype.CreateSandboxRequest{Lazy: true}); err != nil {
			t.Errorf("globex's create: %v", err)
		}
	}
	got, err := ca.GetTenant(ctx, ten.ID)
	if err != nil {
		t.Fatalf("GetTenant with the tenant's own key: %v", err)
	}
	if got.Usage == nil || got.Usage.Sandboxes != 2 || got.Limits.MaxSandboxes != 2 {
		t.Errorf("GetTenant = %+v usage %+v, want 2 of 2 sandboxes", got, got.Usage)
	}
	if _, err := cb.GetTenant(ctx, ten.ID); !client.IsCode(err, errcode.NotFound) {
		t.Errorf("GetTenant of acme with globex's key = %v, want not_found", err)
	}
	// Raising the limit lets the next create through.
	three := 3
	if _, err := d.Client.SetTenant(ctx, "acme", apitype.SetTenantRequest{MaxSandboxes: &three}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{Lazy: true}); err != nil {
		t.Errorf("create after raising max_sandboxes to 3: %v", err)
	}
	// A tenant that owns sandboxes is not removed.
	if err := d.Client.DeleteTenant(ctx, "acme"); !client.IsReason(err, "tenant_not_empty") {
		t.Errorf("DeleteTenant of a tenant with sandboxes = %v, want tenant_not_empty", err)
	}
}

// TestTenancyRemoveTenant: removing a tenant that owns nothing revokes its
// keys; the default tenant stays.
func TestTenancyRemoveTenant(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx := context.Background()
	_, k := tenantKey(t, d, "shortlived", auth.ScopeExecution)
	c := client.New(d.URL, k.Secret)
	if _, err := c.ListSandboxes(ctx); err != nil {
		t.Fatalf("the key before its tenant's removal: %v", err)
	}
	if err := d.Client.DeleteTenant(ctx, "shortlived"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListSandboxes(ctx); !client.IsCode(err, errcode.Unauthenticated) {
		t.Errorf("the key after its tenant's removal = %v, want unauthenticated", err)
	}
	if _, err := d.Client.GetTenant(ctx, "shortlived"); !client.IsCode(err, errcode.NotFound) {
		t.Errorf("GetTenant after removal = %v, want not_found", err)
	}
	if err := d.Client.DeleteTenant(ctx, "default"); !client.IsReason(err, "tenant_default") {
		t.Errorf("DeleteTenant(default) = %v, want tenant_default", err)
	}
}

func readSandboxFile(t *testing.T, c *client.Client, id, path string) string {
	t.Helper()
	rc, err := c.ReadFile(context.Background(), id, path)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", path, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", path, err)
	}
	return string(b)
}

// TestTenancyNoisyNeighbour is AUTH-13: tenant A floods creates, commands
// and deletes at its quota and rate limits, from its own address, for a
// bounded time; tenant B's commands meanwhile all succeed. (B's latency
// under the flood is BenchmarkTenancyNoisyNeighbour's.)
func TestTenancyNoisyNeighbour(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		rl := httpapi.DefaultRateLimits
		c.RateLimits = &rl
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, keyA := tenantKey(t, d, "noisy", auth.ScopeExecution)
	_, keyB := tenantKey(t, d, "quiet", auth.ScopeExecution)
	two := 2
	if _, err := d.Client.SetTenant(ctx, "noisy", apitype.SetTenantRequest{MaxSandboxes: &two}); err != nil {
		t.Fatal(err)
	}
	// Each tenant from an address of its own (on Linux all of 127/8 is
	// this machine's), as two customers would be.
	ca := client.New(d.URL, keyA.Secret, client.WithHTTPClient(sourceClient(t, "127.0.0.11")))
	cb := client.New(d.URL, keyB.Secret, client.WithHTTPClient(sourceClient(t, "127.0.0.12")))
	sbA, err := ca.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sbB, err := cb.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}

	// Bounded, and light enough not to starve the suite's other tests
	// (job tests run beside it): two flooders for five seconds still meet
	// A's quota.
	flood, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	var mu sync.Mutex
	refused := map[string]int{}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; flood.Err() == nil; i++ {
				var err error
				switch (w + i) % 3 {
				case 0:
					var sb apitype.Sandbox
					if sb, err = ca.CreateSandbox(flood, apitype.CreateSandboxRequest{Lazy: true}); err == nil {
						// Finished even when the flood's time is up, so
						// nothing is half deleted at cleanup.
						err = ca.DeleteSandbox(context.WithoutCancel(flood), sb.ID)
					}
				case 1:
					_, err = ca.Run(flood, sbA.ID, apitype.CreateCommandRequest{Command: "true"})
				default:
					_, err = ca.ListSandboxes(flood)
				}
				var ce *errcode.Error
				if errors.As(err, &ce) && ce.Code == errcode.ResourceExhausted {
					mu.Lock()
					refused[ce.Reason]++
					mu.Unlock()
					time.Sleep(10 * time.Millisecond) // refused, not spinning
				}
			}
		})
	}
	calls, failed := 0, 0
	for flood.Err() == nil {
		c, err := cb.Run(ctx, sbB.ID, apitype.CreateCommandRequest{Command: "echo quiet"})
		calls++
		if err != nil || c.Stdout != "quiet\n" {
			failed++
			t.Errorf("tenant B's command during the flood = %q, %v", c.Stdout, err)
		}
	}
	wg.Wait()
	t.Logf("tenant B: %d commands, %d failed; tenant A refused: %v", calls, failed, refused)
	if calls < 5 {
		t.Errorf("tenant B ran only %d commands in 5s of flood", calls)
	}
	// The flood was one: A met its limits.
	if refused["quota_exceeded"]+refused["rate_limited"] == 0 {
		t.Errorf("tenant A was never refused (%v): the flood did not reach its limits, so this test shows nothing", refused)
	}
}

// TestTenancyRevocationClosesCDP: a CDP WebSocket of a process-mode
// session closes within 5 s of its key's revocation.
func TestTenancyRevocationClosesCDP(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	testenv.NeedChromium(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, doomed := tenantKey(t, d, "acme", auth.ScopeExecution)
	cd := client.New(d.URL, doomed.Secret)
	s, err := cd.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: "process"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Client.CloseBrowserSession(context.WithoutCancel(ctx), s.ID)
	endpoint := strings.Replace(d.URL, "http://", "ws://", 1) + "/v1/browser/sessions/" + s.ID + "/cdp"
	conn, _, err := websocket.Dial(ctx, endpoint, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + doomed.Secret}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	// The control: the connection works before the revocation.
	if _, err := cdpVersion(ctx, conn); err != nil {
		t.Fatalf("CDP before the revocation: %v", err)
	}
	revoked := time.Now()
	if err := d.Client.RevokeKey(ctx, doomed.ID); err != nil {
		t.Fatal(err)
	}
	readCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	for {
		if _, _, err := conn.Read(readCtx); err != nil {
			if readCtx.Err() != nil {
				t.Fatal("the revoked key's CDP connection is still open 10s after the revocation")
			}
			break
		}
	}
	if d := time.Since(revoked); d > 5*time.Second {
		t.Errorf("the CDP connection closed %v after the revocation, want within 5s", d)
	}
}

// cdpVersion sends Browser.getVersion (id 1) on a CDP connection and
// returns its answer, skipping the events before it.
func cdpVersion(ctx context.Context, conn *websocket.Conn) ([]byte, error) {
	if err := conn.Write(ctx, websocket.MessageText, []byte(`{"id":1,"method":"Browser.getVersion"}`)); err != nil {
		return nil, err
	}
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return nil, err
		}
		if strings.Contains(string(b), `"id":1`) {
			return b, nil
		}
	}
}
