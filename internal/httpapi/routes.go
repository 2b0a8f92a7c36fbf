package httpapi

import "net/http"

// route is one line of the HTTP surface.
type route struct {
	pattern string // method and path, as http.ServeMux takes them
	access  access
	handler http.Handler
}

// access says who may call a route: the least scope its key needs.
type access int

const (
	public    access = iota // no key: health only
	read                    // any valid key: list and read
	execution               // an execution (or admin) key: use and change
	admin                   // an admin key: the operator's
)

// routes is the whole HTTP surface of the daemon, one line per route.
func (s *Server) routes() []route {
	mcpH := s.handleMCP()
	drain, undrain := true, false
	rs := []route{
		{"GET /healthz", public, s.handleHealthz()},
		{"GET /readyz", public, s.handleReadyz()},
		{"GET /metrics", admin, s.handleMetrics()},
		{"GET /v1/system", read, s.handleSystem()},
		{"GET /v1/openapi.json", public, s.handleOpenAPI()},

		{"POST /v1/sandboxes", execution, s.handleCreateSandbox()},
		{"GET /v1/sandboxes", read, s.handleListSandboxes()},
		{"GET /v1/sandboxes/{id}", read, s.handleGetSandbox()},
		{"DELETE /v1/sandboxes/{id}", execution, s.handleDeleteSandbox()},
		{"POST /v1/sandboxes/{id}/pause", execution, s.handleLifecycle(s.cfg.Sandboxes.Pause)},
		{"POST /v1/sandboxes/{id}/resume", execution, s.handleLifecycle(s.cfg.Sandboxes.Resume)},
		{"POST /v1/sandboxes/{id}/hibernate", execution, s.handleLifecycle(s.cfg.Sandboxes.Hibernate)},

		{"POST /v1/sandboxes/{id}/commands", execution, s.handleExec()},
		{"GET /v1/sandboxes/{id}/commands", read, s.handleListCommands()},
		{"GET /v1/sandboxes/{id}/commands/{cid}", read, s.handleGetCommand()},
		{"GET /v1/sandboxes/{id}/commands/{cid}/stream", read, s.proxyToAgent("/v1/commands/{cid}/stream", 0)},
		{"POST /v1/sandboxes/{id}/commands/{cid}/cancel", execution, s.proxyToAgent("/v1/commands/{cid}/cancel", 0)},
		{"POST /v1/sandboxes/{id}/commands/{cid}/stdin", execution, s.proxyToAgent("/v1/commands/{cid}/stdin", maxJSON)},

		{"GET /v1/sandboxes/{id}/files", read, s.proxyToAgent("/v1/files", 0)},
		{"DELETE /v1/sandboxes/{id}/files", execution, s.proxyToAgent("/v1/files", 0)},
		{"GET /v1/sandboxes/{id}/files/content", read, s.proxyToAgent("/v1/files/content", 0)},
		{"PUT /v1/sandboxes/{id}/files/content", execution, s.proxyToAgent("/v1/files/content", s.cfg.MaxUpload)},
		{"POST /v1/sandboxes/{id}/files/mkdir", execution, s.proxyToAgent("/v1/files/mkdir", maxJSON)},
		{"POST /v1/sandboxes/{id}/files/move", execution, s.proxyToAgent("/v1/files/move", maxJSON)},

		{"POST /v1/sandboxes/{id}/terminals", execution, s.handleCreateTerminal()},
		{"GET /v1/sandboxes/{id}/terminals", read, s.proxyToAgent("/v1/terminals", 0)},
		{"GET /v1/sandboxes/{id}/terminals/{tid}/output", read, s.proxyToAgent("/v1/terminals/{tid}/output", 0)},
		{"POST /v1/sandboxes/{id}/terminals/{tid}/input", execution, s.proxyToAgent("/v1/terminals/{tid}/input", maxJSON)},
		{"POST /v1/sandboxes/{id}/terminals/{tid}/resize", execution, s.proxyToAgent("/v1/terminals/{tid}/resize", maxJSON)},
		{"DELETE /v1/sandboxes/{id}/terminals/{tid}", execution, s.proxyToAgent("/v1/terminals/{tid}", 0)},
		{"GET /v1/sandboxes/{id}/terminals/{tid}/ws", execution, s.handleAttachTerminal()},

		{"POST /v1/sandboxes/{id}/services", execution, s.handlePutService()},
		{"GET /v1/sandboxes/{id}/services", read, s.handleListServices()},
		{"GET /v1/sandboxes/{id}/services/{name}", read, s.handleService(s.cfg.Sandboxes.Service)},
		{"GET /v1/sandboxes/{id}/services/{name}/logs", read, s.proxyToAgent("/v1/services/{name}/logs", 0)},
		{"POST /v1/sandboxes/{id}/services/{name}/stop", execution, s.handleService(s.cfg.Sandboxes.StopService)},
		{"POST /v1/sandboxes/{id}/services/{name}/start", execution, s.handleService(s.cfg.Sandboxes.StartService)},
		{"DELETE /v1/sandboxes/{id}/services/{name}", execution, s.handleDeleteService()},

		{"GET /v1/sandboxes/{id}/previews/{port}", read, s.handlePreviewInfo()},

		{"GET /v1/sandboxes/{id}/network", read, s.handleGetNetwork()},
		{"PUT /v1/sandboxes/{id}/network", execution, s.handlePutNetwork()},
		{"GET /v1/sandboxes/{id}/network/log", read, s.handleNetworkLog()},
		{"GET /v1/sandboxes/{id}/secrets", read, s.handleListSecrets()},
		{"PUT /v1/sandboxes/{id}/secrets", execution, s.handlePutSecrets()},
		{"POST /v1/sandboxes/{id}/secrets", execution, s.handlePostSecret()},
		{"DELETE /v1/sandboxes/{id}/secrets", execution, s.handleDeleteSecret()},

		{"GET /v1/templates", read, s.handleListTemplates()},
		{"GET /v1/templates/{name}", read, s.handleGetTemplate()},
		{"GET /v1/templates/{name}/log", read, s.handleTemplateLog()},
		{"POST /v1/templates", execution, s.handleBuildTemplate()},
		{"POST /v1/templates/import", admin, s.handleImportTemplate()},
		{"DELETE /v1/templates/{name}", execution, s.handleDeleteTemplate()},

		{"POST /v1/browser/sessions", execution, s.handleOpenBrowserSession()},
		{"GET /v1/browser/sessions", read, s.handleListBrowserSessions()},
		{"GET /v1/browser/sessions/{id}", read, s.handleGetBrowserSession()},
		{"DELETE /v1/browser/sessions/{id}", execution, s.handleCloseBrowserSession()},
		{"POST /v1/browser/sessions/{id}/actions", execution, s.handleBrowserAction()},
		{"GET /v1/browser/sessions/{id}/screenshot", read, s.handleBrowserScreenshot()},
		{"GET /v1/browser/sessions/{id}/cdp", execution, s.handleBrowserCDP()},
		{"GET /v1/browser/sessions/{id}/artifacts/{artifact}", read, s.handleBrowserArtifact()},
		{"GET /v1/browser/sessions/{id}/live", read, s.handleBrowserLive()},
		{"GET /v1/browser/sessions/{id}/live/frame", read, s.handleBrowserLiveFrame()},
		{"POST /v1/browser/sessions/{id}/live/links", execution, s.handleBrowserLiveLink()},
		{"GET /v1/browser/sessions/{id}/control", read, s.handleGetControl()},
		{"POST /v1/browser/sessions/{id}/control", execution, s.handleAcquireControl()},
		{"POST /v1/browser/sessions/{id}/control/renew", execution, s.handleRenewControl()},
		{"POST /v1/browser/sessions/{id}/control/release", execution, s.handleReleaseControl()},
		// A view link's page and socket: the token in the path is the
		// capability (browser_live.go).
		{"GET /live/{token}", public, s.handleLivePage("live.html")},
		{"GET /live/{token}/live.js", public, s.handleLivePage("live.js")},
		{"GET /live/{token}/ws", public, s.handleLiveSocket()},
		{"GET /v1/browser/sessions/{id}/journal", read, s.handleBrowserJournal()},
		{"POST /v1/browser/sessions/{id}/checkpoints", execution, s.handleCreateBrowserCheckpoint()},
		{"GET /v1/browser/checkpoints", read, s.handleListBrowserCheckpoints()},
		{"GET /v1/browser/checkpoints/{id}", read, s.handleGetBrowserCheckpoint()},
		{"DELETE /v1/browser/checkpoints/{id}", execution, s.handleDeleteBrowserCheckpoint()},
		{"POST /v1/browser/checkpoints/{id}/resume", execution, s.handleResumeBrowserCheckpoint()},
		{"POST /v1/browser/sessions/{id}/recordings", execution, s.handleStartRecording()},
		{"GET /v1/browser/recordings", read, s.handleListRecordings()},
		{"GET /v1/browser/recordings/{id}", read, s.handleGetRecording()},
		{"POST /v1/browser/recordings/{id}/stop", execution, s.handleStopRecording()},
		{"DELETE /v1/browser/recordings/{id}", execution, s.handleDeleteRecording()},
		{"GET /v1/browser/recordings/{id}/frames/{n}", read, s.handleRecordingFrame()},
		{"GET /v1/browser/recordings/{id}/export", read, s.handleExportRecording()},

		{"GET /v1/actions", read, s.handleListActions()},
		{"GET /v1/actions/{name}", read, s.handleGetAction()},
		{"POST /v1/files", execution, s.handleUploadFile()},
		{"GET /v1/files/{sha256}", read, s.handleDownloadFile()},
		{"POST /v1/jobs", execution, s.handleCreateJob()},
		{"GET /v1/jobs", read, s.handleListJobs()},
		{"GET /v1/jobs/{id}", read, s.handleGetJob()},
		{"GET /v1/jobs/{id}/events", read, s.handleJobEvents()},
		{"POST /v1/jobs/{id}/cancel", execution, s.handleCancelJob()},
		{"POST /v1/convert/{action}", execution, s.handleConvert()},

		// Gotenberg 8's routes (gotenberg.go): its fields, headers and
		// plain-text errors, each request run as jobs.
		{"GET /health", public, s.handleGotenbergHealth()},
		{"POST /forms/chromium/convert/html", execution, s.handleGotenberg(gotChromiumHTML)},
		{"POST /forms/chromium/convert/markdown", execution, s.handleGotenberg(gotChromiumMarkdown)},
		{"POST /forms/chromium/convert/url", execution, s.handleGotenberg(gotChromiumURL)},
		{"POST /forms/chromium/screenshot/html", execution, s.handleGotenberg(gotScreenshotHTML)},
		{"POST /forms/chromium/screenshot/markdown", execution, s.handleGotenberg(gotScreenshotMarkdown)},
		{"POST /forms/chromium/screenshot/url", execution, s.handleGotenberg(gotScreenshotURL)},
		{"POST /forms/libreoffice/convert", execution, s.handleGotenberg(gotLibreOffice)},
		{"POST /forms/pdfengines/merge", execution, s.handleGotenberg(gotMerge)},
		{"POST /forms/pdfengines/split", execution, s.handleGotenberg(gotSplit)},
		{"POST /forms/pdfengines/metadata/read", execution, s.handleGotenberg(gotMetadataRead)},
		{"POST /forms/pdfengines/metadata/write", execution, s.handleGotenberg(gotMetadataWrite)},

		{"POST /v1/keys", admin, s.handleCreateKey()},
		{"GET /v1/keys", admin, s.handleListKeys()},
		{"DELETE /v1/keys/{id}", admin, s.handleRevokeKey()},

		{"POST /v1/tenants", admin, s.handleCreateTenant()},
		{"GET /v1/tenants", admin, s.handleListTenants()},
		{"GET /v1/tenants/{id}", read, s.handleGetTenant()},
		{"PATCH /v1/tenants/{id}", admin, s.handleSetTenant()},
		{"DELETE /v1/tenants/{id}", admin, s.handleDeleteTenant()},
		{"GET /v1/audit", read, s.handleAudit()},

		// A cluster's workers (cluster.go): HQ's view of them.
		{"GET /v1/workers", admin, s.handleListWorkers()},
		{"GET /v1/workers/{id}", admin, s.handleWorker(nil)},
		{"POST /v1/workers/{id}/drain", admin, s.handleWorker(&drain)},
		{"POST /v1/workers/{id}/undrain", admin, s.handleWorker(&undrain)},

		// MCP over streamable HTTP (mcp.go); each tool call needs the
		// scope of the routes it calls.
		{"POST /mcp", read, mcpH},
		{"GET /mcp", read, mcpH},
		{"DELETE /mcp", execution, mcpH}, // closes the key's toolset

		// The Station-compatible method API (station.go): each method is
		// dispatched into the routes above as the caller.
		{"GET /api/v1/execution", admin, s.handleStationInfo()},
		{"POST /api/v1/stations/{stationId}/execution/{primitive}", read, s.handleStationMethod()},
		{"GET /api/v1/tenant/execution", read, s.handleStationInfo()},
		{"POST /api/v1/tenant/stations/{stationId}/execution/{primitive}", read, s.handleStationMethod()},
	}
	// Ports take every method an app may serve.
	for _, m := range portMethods {
		rs = append(rs, route{m + " /v1/sandboxes/{id}/ports/{port}/{path...}", execution, s.handlePort()})
	}
	return rs
}

// dashboardPaths are where the web dashboard (internal/dashboard,
// Config.Dashboard) is mounted. They are not API routes: the dashboard
// signs people in with a session cookie of its own and calls the routes
// above in process with the session's key, so every scope, tenancy and
// audit check is the API's.
var dashboardPaths = []string{"GET /{$}", "POST /login", "POST /logout", "/ui/"}

// Route describes a route for tests and documentation.
type Route struct {
	Method, Path string
	Public       bool
	AdminOnly    bool
	// ReadOnly routes take a read key.
	ReadOnly bool
	// Owner is the kind of resource the route's ID names ("" for none):
	// what a tenant's key must own to reach it.
	Owner string
}

// Routes lists the daemon's routes. Tests generate their auth, tenancy and
// error checks from it, so a new route cannot be skipped.
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.routes() {
		method, path, _ := cutSpace(r.pattern)
		out = append(out, Route{Method: method, Path: path, Public: r.access == public, AdminOnly: r.access == admin,
			ReadOnly: r.access == read, Owner: string(ownerOf(path))})
	}
	return out
}

func cutSpace(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}
