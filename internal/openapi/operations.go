package openapi

import (
	"maps"
	"strings"

	"github.com/berthdev/berth/internal/apitype"
)

// operations is the whole table: the described routes and the planned
// block (planned.go). Keys are "METHOD /path" exactly as routes.go writes
// them.
func operations() map[string]op {
	all := described()
	for k, v := range plannedOperations() {
		if _, dup := all[k]; !dup {
			all[k] = v
		}
	}
	return all
}

// optionalInRequests are fields without omitempty (answers always carry
// them) that a request may leave out, as "Type.field".
var optionalInRequests = []string{
	"ServiceSpec.restart",
	"CreateTenantRequest.limits",
	"CreateJobRequest.action", // POST /v1/convert/{action} takes it from the path
	"CreateJobRequest.inputs",
	"Idle.pause_after_ms", "Idle.hibernate_after_ms", "Idle.delete_after_ms",
	"Network.mode",
}

// health is the body of the health checks.
type health struct {
	Status string `json:"status"`
}

// portMethods are the methods of the port route (httpapi's portMethods).
var portMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// described describes every route of routes.go (but the planned ones).
func described() map[string]op {
	ops := map[string]op{
		// Health, metrics, system.
		"GET /healthz": {id: "getHealth", summary: "Liveness: the daemon answers",
			ok: []result{jsonOut[health](200, `{"status": "ok"}`)}},
		"GET /readyz": {id: "getReady", summary: "Readiness: the daemon's database answers",
			ok: []result{jsonOut[health](200, `{"status": "ready"}`)}},
		"GET /metrics": {id: "getMetrics", summary: "Prometheus metrics",
			ok: []result{rawOut(200, "The Prometheus text exposition format.", "text/plain")}},
		"GET /v1/system": {id: "getSystem", summary: "The daemon's version, runtimes, limits, pools, browser and jobs",
			ok: []result{jsonOut[apitype.System](200, "")}},
		"GET /v1/openapi.json": {id: "getOpenAPI", summary: "This OpenAPI 3.1 document",
			desc: "The whole REST surface, generated from the route table; the same bytes as docs/openapi.json.",
			ok:   []result{{status: 200, content: []media{{typ: "application/json", schema: &Schema{Type: "object"}}}}}},

		// Sandboxes.
		"POST /v1/sandboxes": {id: "createSandbox", summary: "Create a sandbox (or get the one of this name)",
			headers: []param{idemKey}, body: jsonIn[apitype.CreateSandboxRequest](),
			ok: []result{jsonOut[apitype.Sandbox](201, "Created."), jsonOut[apitype.Sandbox](200, "A sandbox of this name exists: it is answered.")}},
		"GET /v1/sandboxes": {id: "listSandboxes", summary: "List sandboxes, oldest first",
			query: []param{qString("state", "Keep only sandboxes in this state."), limitParam, cursorParam},
			ok:    []result{jsonOut[apitype.SandboxList](200, "")}},
		"GET /v1/sandboxes/{id}": {id: "getSandbox", summary: "Get a sandbox",
			ok: []result{jsonOut[apitype.Sandbox](200, "")}},
		"DELETE /v1/sandboxes/{id}": {id: "deleteSandbox", summary: "Delete a sandbox and everything in it",
			ok: []result{noContent(204)}},
		"POST /v1/sandboxes/{id}/pause": {id: "pauseSandbox", summary: "Pause (freeze) a sandbox",
			ok: []result{jsonOut[apitype.Sandbox](200, "")}},
		"POST /v1/sandboxes/{id}/resume": {id: "resumeSandbox", summary: "Resume a paused sandbox",
			ok: []result{jsonOut[apitype.Sandbox](200, "")}},
		"POST /v1/sandboxes/{id}/hibernate": {id: "hibernateSandbox", summary: "Hibernate a sandbox: stop it, keep its files",
			ok: []result{jsonOut[apitype.Sandbox](200, "")}},

		// Commands.
		"POST /v1/sandboxes/{id}/commands": {id: "createCommand", summary: "Run a command",
			query: outputQuery, body: jsonIn[apitype.CreateCommandRequest](),
			ok: []result{jsonOut[apitype.Command](202, "The command's record (with output when wait_ms was given); "+
				"Location names it.")}},
		"GET /v1/sandboxes/{id}/commands": {id: "listCommands", summary: "List a sandbox's commands, newest first, without output",
			query: []param{qString("status", "Keep only commands with this status.")},
			ok:    []result{jsonOut[apitype.CommandList](200, "")}},
		"GET /v1/sandboxes/{id}/commands/{cid}": {id: "getCommand", summary: "Get a command with a window of its output",
			query: outputQuery, ok: []result{jsonOut[apitype.Command](200, "")}},
		"GET /v1/sandboxes/{id}/commands/{cid}/stream": {id: "streamCommand", summary: "Stream a command's output as Server-Sent Events",
			query: []param{outputQuery[1], outputQuery[2], outputQuery[4]},
			ok: []result{sseOut[apitype.StreamEvent]("Events stdout, stderr (data: offset and data or data_base64) " +
				"and exit (data: the final command record), until the command ends.")}},
		"POST /v1/sandboxes/{id}/commands/{cid}/cancel": {id: "cancelCommand", summary: "Cancel a command (SIGTERM, then SIGKILL)",
			ok: []result{jsonOut[apitype.Command](200, "The record, without output.")}},
		"POST /v1/sandboxes/{id}/commands/{cid}/stdin": {id: "writeCommandStdin", summary: "Write to a command's standard input",
			body: jsonIn[apitype.StdinRequest](), ok: []result{noContent(204)}},

		// Files.
		"GET /v1/sandboxes/{id}/files": {id: "listFiles", summary: "List a directory, one page at a time",
			query: []param{qString("path", "The directory (default .)."),
				qInt("limit", "Entries per page (default 1000, at most 10000)."),
				qString("cursor", "The next_cursor of the previous page.")},
			ok: []result{jsonOut[apitype.FileList](200, "")}},
		"DELETE /v1/sandboxes/{id}/files": {id: "deleteFile", summary: "Remove a file, a symlink or a directory",
			query: []param{required(qString("path", "What to remove.")),
				qBool("recursive", "true removes a directory and everything in it.")},
			ok: []result{noContent(204)}},
		"GET /v1/sandboxes/{id}/files/content": {id: "readFile", summary: "Download a file",
			query: []param{required(qString("path", "The file."))},
			ok:    []result{rawOut(200, "The file's bytes, with Content-Length and Last-Modified.", "application/octet-stream")}},
		"PUT /v1/sandboxes/{id}/files/content": {id: "writeFile", summary: "Upload a file (written whole, atomically)",
			query: []param{required(qString("path", "The file.")),
				{name: "mode", desc: "Octal permission bits (default 644).", schema: &Schema{Type: "string", Pattern: "^[0-7]{1,4}$"}}},
			body: rawIn("The file's bytes.", "application/octet-stream"),
			ok:   []result{jsonOut[apitype.FileInfo](200, "")}},
		"POST /v1/sandboxes/{id}/files/mkdir": {id: "makeDirectory", summary: "Create a directory and its parents",
			body: jsonIn[apitype.MkdirRequest](), ok: []result{jsonOut[apitype.FileInfo](200, "")}},
		"POST /v1/sandboxes/{id}/files/move": {id: "moveFile", summary: "Rename a file or directory",
			body: jsonIn[apitype.MoveRequest](), ok: []result{noContent(204)}},

		// Terminals.
		"POST /v1/sandboxes/{id}/terminals": {id: "createTerminal", summary: "Start a terminal (a process on a PTY)",
			body: jsonIn[apitype.CreateTerminalRequest](), ok: []result{jsonOut[apitype.Terminal](201, "")}},
		"GET /v1/sandboxes/{id}/terminals": {id: "listTerminals", summary: "List terminals, newest first",
			ok: []result{jsonOut[apitype.TerminalList](200, "")}},
		"GET /v1/sandboxes/{id}/terminals/{tid}/output": {id: "readTerminalOutput", summary: "A window of a terminal's output",
			query: windowQuery, ok: []result{jsonOut[apitype.TerminalOutput](200, "")}},
		"POST /v1/sandboxes/{id}/terminals/{tid}/input": {id: "writeTerminalInput", summary: "Type into a terminal",
			body: jsonIn[apitype.TerminalInputRequest](), ok: []result{noContent(204)}},
		"POST /v1/sandboxes/{id}/terminals/{tid}/resize": {id: "resizeTerminal", summary: "Resize a terminal",
			body: jsonIn[apitype.ResizeTerminalRequest](), ok: []result{jsonOut[apitype.Terminal](200, "")}},
		"DELETE /v1/sandboxes/{id}/terminals/{tid}": {id: "deleteTerminal", summary: "Hang a terminal up and forget it",
			ok: []result{noContent(204)}},
		"GET /v1/sandboxes/{id}/terminals/{tid}/ws": {id: "attachTerminal", summary: "Attach to a terminal over a WebSocket",
			query: []param{qInt("offset", "Where the output replay starts.")},
			ok: []result{webSocket("Binary messages carry output (server to client) and input (client to server); "+
				"text messages are JSON control messages.", typeOf[apitype.TerminalMessage]())}},

		// Services.
		"POST /v1/sandboxes/{id}/services": {id: "putService", summary: "Start (or update) a supervised service",
			body: jsonIn[apitype.ServiceSpec](),
			ok:   []result{jsonOut[apitype.Service](201, "Started."), jsonOut[apitype.Service](200, "Unchanged: the same spec runs.")}},
		"GET /v1/sandboxes/{id}/services": {id: "listServices", summary: "List a sandbox's services",
			ok: []result{jsonOut[apitype.ServiceList](200, "")}},
		"GET /v1/sandboxes/{id}/services/{name}": {id: "getService", summary: "Get a service",
			ok: []result{jsonOut[apitype.Service](200, "")}},
		"GET /v1/sandboxes/{id}/services/{name}/logs": {id: "readServiceLogs", summary: "A window of a service's log",
			query: windowQuery, ok: []result{jsonOut[apitype.ServiceLogs](200, "")}},
		"POST /v1/sandboxes/{id}/services/{name}/stop": {id: "stopService", summary: "Stop a service",
			ok: []result{jsonOut[apitype.Service](200, "")}},
		"POST /v1/sandboxes/{id}/services/{name}/start": {id: "startService", summary: "Start a stopped service",
			ok: []result{jsonOut[apitype.Service](200, "")}},
		"DELETE /v1/sandboxes/{id}/services/{name}": {id: "deleteService", summary: "Stop and remove a service",
			ok: []result{noContent(204)}},

		// Previews and network.
		"GET /v1/sandboxes/{id}/previews/{port}": {id: "getPreview", summary: "How to reach a port from a browser",
			query: []param{{name: "ttl_s", desc: "How long the signed link is valid (default 900).",
				schema: &Schema{Type: "integer", Minimum: ptr(1), Maximum: ptr(604800)}}},
			ok: []result{jsonOut[apitype.Preview](200, "")}},
		"GET /v1/sandboxes/{id}/network": {id: "getNetwork", summary: "Get a sandbox's network policy",
			ok: []result{jsonOut[apitype.Network](200, "")}},
		"PUT /v1/sandboxes/{id}/network": {id: "putNetwork", summary: "Set a sandbox's network policy",
			body: jsonIn[apitype.Network](), ok: []result{jsonOut[apitype.Network](200, "")}},
		"GET /v1/sandboxes/{id}/network/log": {id: "getNetworkLog", summary: "A sandbox's network log, newest first",
			query: []param{qInt("limit", "At most this many entries (default all kept).")},
			ok:    []result{jsonOut[apitype.NetworkLog](200, "")}},
		"GET /v1/sandboxes/{id}/secrets": {id: "listSecrets", summary: "List a sandbox's secrets, without values",
			ok: []result{jsonOut[apitype.SecretList](200, "")}},
		"PUT /v1/sandboxes/{id}/secrets": {id: "putSecrets", summary: "Replace every secret of a sandbox",
			body: jsonIn[apitype.SecretList](), ok: []result{jsonOut[apitype.SecretList](200, "")}},
		"POST /v1/sandboxes/{id}/secrets": {id: "addSecret", summary: "Bind one secret (replacing the one of the same host and header)",
			body: jsonIn[apitype.Secret](), ok: []result{jsonOut[apitype.SecretList](200, "")}},
		"DELETE /v1/sandboxes/{id}/secrets": {id: "deleteSecrets", summary: "Remove a host's secrets (or one header's)",
			query: []param{required(qString("host", "The host.")), qString("header", "Only this header's secret.")},
			ok:    []result{jsonOut[apitype.SecretList](200, "")}},

		// Templates.
		"GET /v1/templates": {id: "listTemplates", summary: "List templates",
			ok: []result{jsonOut[apitype.TemplateList](200, "")}},
		"GET /v1/templates/{name}": {id: "getTemplate", summary: "Get a template",
			ok: []result{jsonOut[apitype.Template](200, "")}},
		"GET /v1/templates/{name}/log": {id: "getTemplateLog", summary: "A template's build log",
			ok: []result{rawOut(200, "The log as UTF-8 text.", "text/plain")}},
		"POST /v1/templates": {id: "buildTemplate", summary: "Build a template (in the background)",
			headers: []param{idemKey}, body: jsonIn[apitype.BuildTemplateRequest](),
			ok: []result{jsonOut[apitype.Template](202, "The template, building.")}},
		"POST /v1/templates/import": {id: "importTemplate", summary: "Import a container image archive as a template",
			query: []param{required(qString("name", "The template's name.")),
				qString("ref", "Which image of the archive: a tag or a sha256: digest.")},
			body: rawIn("An uncompressed tar: an OCI image layout or a docker save tarball.", "application/x-tar"),
			ok:   []result{jsonOut[apitype.Template](201, "The template, ready.")}},
		"DELETE /v1/templates/{name}": {id: "deleteTemplate", summary: "Delete a template",
			ok: []result{noContent(204)}},

		// Jobs.
		"GET /v1/actions": {id: "listActions", summary: "List job actions and whether each is available",
			ok: []result{jsonOut[apitype.Actions](200, "")}},
		"GET /v1/actions/{name}": {id: "getAction", summary: "Get a job action",
			ok: []result{jsonOut[apitype.ActionHealth](200, "")}},
		"POST /v1/files": {id: "uploadFile", summary: "Store a job input",
			query: []param{qString("name", "The file's name (helps tell its type).")},
			body:  rawIn("The file's bytes (at most 350 MiB).", "application/octet-stream"),
			ok:    []result{jsonOut[apitype.FileRef](201, "")}},
		"GET /v1/files/{sha256}": {id: "downloadFile", summary: "Download a stored file (a job's input or output)",
			ok: []result{rawOut(200, "The file, with its type as Content-Type, an ETag and range support.", "application/octet-stream")}},
		"POST /v1/jobs": {id: "createJob", summary: "Queue a job",
			headers: []param{idemKey, userHeader}, body: jsonIn[apitype.CreateJobRequest](),
			ok: []result{jsonOut[apitype.Job](202, "Queued."), jsonOut[apitype.Job](200, "A repeat of the same business_id and request: the earlier job.")}},
		"GET /v1/jobs": {id: "listJobs", summary: "List jobs, newest first",
			query: []param{qString("state", "Keep only jobs in this state."), qString("action", "Keep only jobs of this action."),
				limitParam, cursorParam},
			ok: []result{jsonOut[apitype.Jobs](200, "")}},
		"GET /v1/jobs/{id}": {id: "getJob", summary: "Get a job",
			ok: []result{jsonOut[apitype.Job](200, "")}},
		"GET /v1/jobs/{id}/events": {id: "streamJobEvents", summary: "A job's events as Server-Sent Events",
			query:   []param{qInt("after", "Start after this event sequence number.")},
			headers: []param{qString("Last-Event-ID", "Start after this event sequence number (as after).")},
			ok:      []result{sseOut[apitype.JobEvent]("One event per state change or progress report, until the job ends.")}},
		"POST /v1/jobs/{id}/cancel": {id: "cancelJob", summary: "Cancel a job",
			ok: []result{jsonOut[apitype.Job](200, "")}},
		"POST /v1/convert/{action}": {id: "convert", summary: "Run a job and answer its output file",
			headers: []param{userHeader},
			body: &body{desc: "The body of POST /v1/jobs (the action from the path), or a form whose files are the inputs.",
				content: []media{{typ: "application/json", goType: typeOf[apitype.CreateJobRequest]()},
					{typ: "multipart/form-data", schema: &Schema{Type: "object",
						Description: "Files are the inputs (by file name); the field options holds JSON options, " +
							"business_id the business ID, and any other field is one option.",
						AdditionalProperties: &Schema{}}}}},
			ok: []result{{status: 200, desc: "The output file, named in Content-Disposition.",
				content: []media{{typ: "application/octet-stream"}},
				headers: map[string]string{"Berth-Job-Id": "The job's ID."}}}},

		// Keys, tenants, audit.
		"POST /v1/keys": {id: "createKey", summary: "Create an API key",
			headers: []param{idemKey}, body: jsonIn[apitype.CreateKeyRequest](),
			ok: []result{jsonOut[apitype.Key](201, "The key, with its secret (shown only here).")}},
		"GET /v1/keys": {id: "listKeys", summary: "List API keys, without secrets",
			query: []param{qString("tenant", "Only this tenant's keys (ID or name).")},
			ok:    []result{jsonOut[apitype.KeyList](200, "")}},
		"DELETE /v1/keys/{id}": {id: "revokeKey", summary: "Revoke an API key",
			ok: []result{noContent(204)}},
		"POST /v1/tenants": {id: "createTenant", summary: "Create a tenant",
			headers: []param{idemKey}, body: jsonIn[apitype.CreateTenantRequest](),
			ok: []result{jsonOut[apitype.Tenant](201, "")}},
		"GET /v1/tenants": {id: "listTenants", summary: "List tenants",
			ok: []result{jsonOut[apitype.TenantList](200, "")}},
		"GET /v1/tenants/{id}": {id: "getTenant", summary: "Get a tenant with its usage",
			ok: []result{jsonOut[apitype.Tenant](200, "")}},
		"PATCH /v1/tenants/{id}": {id: "setTenant", summary: "Change a tenant's limits",
			body: jsonIn[apitype.SetTenantRequest](), ok: []result{jsonOut[apitype.Tenant](200, "")}},
		"DELETE /v1/tenants/{id}": {id: "deleteTenant", summary: "Delete an empty tenant",
			ok: []result{noContent(204)}},
		"GET /v1/audit": {id: "getAuditLog", summary: "The audit log, newest first",
			query: []param{qString("tenant", "Admin keys: only this tenant's entries (empty: the operator's own)."),
				limitParam, cursorParam},
			ok: []result{jsonOut[apitype.AuditLog](200, "")}},

		// A cluster's workers, as its Headquarters sees them.
		"GET /v1/workers": {id: "listWorkers", summary: "List a cluster's workers: identity, status, lease, capabilities, load",
			desc: "HQ (serve --role hq) lists the workers its configuration names, by ID; a single daemon " +
				"(berth serve alone) answers role single and no workers.",
			ok: []result{jsonOut[apitype.WorkerList](200, "")}},
		"GET /v1/workers/{id}": {id: "getWorker", summary: "Get a worker",
			desc: "404 worker_not_found for an ID HQ's configuration does not name (every ID on a single daemon).",
			ok:   []result{jsonOut[apitype.Worker](200, "")}},
		"POST /v1/workers/{id}/drain": {id: "drainWorker", summary: "Drain a worker: no new work there",
			desc: "No new sandbox or browser session is placed there, and what would start new work on its resources " +
				"(a command, a browser action, a resume, a file write) answers 503 worker_draining; reading, cancel, stop, " +
				"pause, hibernate, delete and close still work. Draining a draining worker changes nothing.",
			ok: []result{jsonOut[apitype.Worker](200, "The worker, draining.")}},
		"POST /v1/workers/{id}/undrain": {id: "undrainWorker", summary: "Let a drained worker take new work again",
			ok: []result{jsonOut[apitype.Worker](200, "The worker, no longer draining.")}},
	}
	maps.Copy(ops, browserOperations())
	maps.Copy(ops, gotenbergOperations())
	for _, m := range portMethods {
		ops[m+" /v1/sandboxes/{id}/ports/{port}/{path...}"] = op{
			id:      "port" + m[:1] + strings.ToLower(m[1:]),
			summary: "Forward a request to a port in the sandbox",
			desc: "Forwards to /{path} on the port; HEAD is taken as GET's. Berth's own refusals " +
				"have the error shape; anything else is the app's answer.",
			body: &body{desc: "Whatever the app takes.", content: []media{{typ: "*/*"}}},
			ok:   []result{rawOut(200, "The app's answer, whatever its status and type.", "*/*")},
		}
	}
	return ops
}

// browserOperations describes the browser routes.
func browserOperations() map[string]op {
	return map[string]op{
		"POST /v1/browser/sessions": {id: "openBrowserSession", summary: "Open a browser session",
			headers: []param{idemKey}, body: jsonIn[apitype.CreateBrowserSessionRequest](),
			ok: []result{jsonOut[apitype.BrowserSession](201, "")}},
		"GET /v1/browser/sessions": {id: "listBrowserSessions", summary: "List browser sessions",
			ok: []result{jsonOut[apitype.BrowserSessionList](200, "")}},
		"GET /v1/browser/sessions/{id}": {id: "getBrowserSession", summary: "Get a browser session",
			ok: []result{jsonOut[apitype.BrowserSession](200, "")}},
		"DELETE /v1/browser/sessions/{id}": {id: "closeBrowserSession", summary: "Close a browser session",
			ok: []result{noContent(204)}},
		"POST /v1/browser/sessions/{id}/actions": {id: "browserAction", summary: "Run one action (op) in a browser session",
			desc: "Each op reads the fields it needs; docs/api.md lists the ops and their results.",
			body: jsonIn[apitype.BrowserAction](),
			ok:   []result{jsonOut[apitype.BrowserActionResult](200, "The op's result.")}},
		"GET /v1/browser/sessions/{id}/screenshot": {id: "browserScreenshot", summary: "The current page as an image",
			query: []param{qEnum("format", "png (default) or jpeg.", "png", "jpeg"),
				{name: "quality", desc: "JPEG quality.", schema: &Schema{Type: "integer", Minimum: ptr(1), Maximum: ptr(100)}},
				qBool("full_page", "The whole page, not only the viewport."),
				qString("selector", "Only this element (CSS)."),
				qString("lease", "The control lease's token (or the Berth-Control-Lease header).")},
			headers: []param{leaseHeader},
			ok:      []result{rawOut(200, "", "image/png", "image/jpeg")}},
		"GET /v1/browser/sessions/{id}/cdp": {id: "browserCDP", summary: "The session's Chrome DevTools Protocol WebSocket",
			ok: []result{webSocket("Messages are CDP's own JSON.", nil)}},
		"GET /v1/browser/sessions/{id}/artifacts/{artifact}": {id: "getBrowserArtifact", summary: "Download a session artifact (a download or a trace)",
			ok: []result{rawOut(200, "The artifact's bytes, with its MIME type.", "application/octet-stream")}},
		"GET /v1/browser/sessions/{id}/live": {id: "browserLive", summary: "Watch (and, with the lease, drive) a session live",
			ok: []result{webSocket("JSON text messages: frames from the server, input from a viewer holding the lease.",
				typeOf[apitype.LiveMessage]())}},
		"GET /v1/browser/sessions/{id}/live/frame": {id: "browserLiveFrame", summary: "The current page as a PNG",
			ok: []result{{status: 200, content: []media{{typ: "image/png"}},
				headers: map[string]string{"Berth-Frame-Time": "When the frame was taken (RFC 3339)."}}}},
		"POST /v1/browser/sessions/{id}/live/links": {id: "createBrowserLiveLink", summary: "Mint a view link (a short-lived capability URL)",
			ok: []result{jsonOut[apitype.BrowserLiveLink](201, "")}},
		"GET /v1/browser/sessions/{id}/control": {id: "getBrowserControl", summary: "Who drives the session: automation or a human",
			ok: []result{jsonOut[apitype.BrowserControl](200, "")}},
		"POST /v1/browser/sessions/{id}/control": {id: "acquireBrowserControl", summary: "Acquire the human-control lease",
			body: jsonIn[apitype.BrowserControlRequest](), ok: []result{jsonOut[apitype.BrowserControlLease](201, "")}},
		"POST /v1/browser/sessions/{id}/control/renew": {id: "renewBrowserControl", summary: "Renew the control lease",
			body: jsonIn[apitype.BrowserControlRequest](), ok: []result{jsonOut[apitype.BrowserControlLease](200, "")}},
		"POST /v1/browser/sessions/{id}/control/release": {id: "releaseBrowserControl", summary: "Release the control lease",
			body: jsonIn[apitype.BrowserControlRequest](), ok: []result{noContent(204)}},
		"GET /live/{token}": {id: "getLiveLinkPage", summary: "A view link's page",
			ok: []result{rawOut(200, "", "text/html")}},
		"GET /live/{token}/live.js": {id: "getLiveLinkScript", summary: "A view link's script",
			ok: []result{rawOut(200, "", "text/javascript")}},
		"GET /live/{token}/ws": {id: "liveLinkSocket", summary: "A view link's WebSocket (from its page's origin)",
			ok: []result{webSocket("As GET /v1/browser/sessions/{id}/live, until the link expires.", typeOf[apitype.LiveMessage]())}},
		"GET /v1/browser/sessions/{id}/journal": {id: "getBrowserJournal", summary: "A session's action journal",
			query: []param{qInt("after_seq", "Start after this sequence number."),
				{name: "limit", desc: "At most this many entries (default 1000).", schema: &Schema{Type: "integer", Minimum: ptr(1), Maximum: ptr(1000)}}},
			ok: []result{jsonOut[apitype.BrowserJournal](200, "")}},
		"POST /v1/browser/sessions/{id}/checkpoints": {id: "createBrowserCheckpoint", summary: "Record a checkpoint of a session",
			ok: []result{jsonOut[apitype.BrowserCheckpoint](201, "")}},
		"GET /v1/browser/checkpoints": {id: "listBrowserCheckpoints", summary: "List checkpoints, oldest first",
			ok: []result{jsonOut[apitype.BrowserCheckpointList](200, "")}},
		"GET /v1/browser/checkpoints/{id}": {id: "getBrowserCheckpoint", summary: "Get a checkpoint",
			ok: []result{jsonOut[apitype.BrowserCheckpoint](200, "")}},
		"DELETE /v1/browser/checkpoints/{id}": {id: "deleteBrowserCheckpoint", summary: "Delete a checkpoint",
			ok: []result{noContent(204)}},
		"POST /v1/browser/checkpoints/{id}/resume": {id: "resumeBrowserCheckpoint", summary: "Open a new session like the checkpoint",
			ok: []result{jsonOut[apitype.BrowserSession](201, "The new session.")}},
		"POST /v1/browser/sessions/{id}/recordings": {id: "startBrowserRecording", summary: "Start recording a session",
			body: jsonIn[apitype.StartRecordingRequest](), ok: []result{jsonOut[apitype.BrowserRecording](201, "")}},
		"GET /v1/browser/recordings": {id: "listBrowserRecordings", summary: "List recordings, oldest first",
			ok: []result{jsonOut[apitype.BrowserRecordingList](200, "")}},
		"GET /v1/browser/recordings/{id}": {id: "getBrowserRecording", summary: "Get a recording",
			ok: []result{jsonOut[apitype.BrowserRecording](200, "")}},
		"POST /v1/browser/recordings/{id}/stop": {id: "stopBrowserRecording", summary: "Stop a recording",
			ok: []result{jsonOut[apitype.BrowserRecording](200, "")}},
		"DELETE /v1/browser/recordings/{id}": {id: "deleteBrowserRecording", summary: "Delete a recording and its frames",
			ok: []result{noContent(204)}},
		"GET /v1/browser/recordings/{id}/frames/{n}": {id: "getBrowserRecordingFrame", summary: "One frame of a recording",
			ok: []result{rawOut(200, "", "image/png")}},
		"GET /v1/browser/recordings/{id}/export": {id: "exportBrowserRecording", summary: "Export a recording as a ZIP of frames or an MP4",
			query: []param{qEnum("format", "zip (default) or mp4.", "zip", "mp4")},
			ok:    []result{rawOut(200, "", "application/zip", "video/mp4")}},
	}
}
