package openapi

// ---------------------------------------------------------------------
// PLANNED ROUTES (issue 15): the Station-compatible method API and MCP
// over streamable HTTP, described while others wrote them. The lead
// adjusts this block at integration: an entry whose route is not in
// routes.go makes TestOpenAPIMatchesRoutes fail with "operation without
// route", a route without an entry with "route without operation".
// After a change, regenerate docs/openapi.json (make openapi).
// ---------------------------------------------------------------------

// plannedOperations describes the issue-15 routes (now in routes.go).
func plannedOperations() map[string]op {
	stationBody := &body{content: []media{{typ: "application/json", schema: named("StationMethodRequest")}}}
	stationOK := []result{{status: 200, desc: `{"data": ...}: the method's result.`,
		content: []media{{typ: "application/json", schema: named("StationMethodResponse")}}}}
	describe := []result{{status: 200, content: []media{{typ: "application/json", schema: named("StationDescription")}}}}
	return map[string]op{
		// Station method API (owner-routed, the seed's bodies and field names).
		"POST /api/v1/stations/{stationId}/execution/{primitive}": {id: "stationExecute",
			summary: "Call a Station method of a primitive (sandbox or browser)",
			desc: "The Station-compatible method API: the body names the method and carries its fields as the seed defines them. " +
				"Each method needs the scope of the REST route it stands for (docs/api.md, Station method API).",
			body: stationBody, ok: stationOK},
		"GET /api/v1/execution": {id: "describeStation",
			summary: "Describe this station: identity, status, capabilities, backends, availability",
			desc:    "The answer is Station's station list, of this one station.",
			ok:      describe},
		"POST /api/v1/tenant/stations/{stationId}/execution/{primitive}": {id: "tenantStationExecute",
			summary: "Call a Station method of a primitive, as the key's tenant",
			body:    stationBody, ok: stationOK},
		"GET /api/v1/tenant/execution": {id: "describeTenantStation",
			summary: "Describe this station as the key's tenant sees it",
			ok:      describe},

		// MCP, streamable HTTP transport (JSON-RPC 2.0).
		"POST /mcp": {id: "mcpPost", summary: "Send MCP JSON-RPC messages (streamable HTTP)",
			desc:    "Each tool call needs the scope of the routes it calls (docs/mcp.md).",
			headers: mcpHeaders,
			body:    &body{required: true, content: []media{{typ: "application/json", schema: named("JSONRPCMessage")}}},
			ok: []result{
				{status: 200, desc: "The JSON-RPC response (the server is stateless and answers JSON).",
					content: []media{{typ: "application/json", schema: named("JSONRPCMessage")}}},
				{status: 202, desc: "Accepted: the body held only notifications or responses."},
			}},
		"GET /mcp": {id: "mcpStream", summary: "No server stream: the server is stateless",
			headers: mcpHeaders,
			ok:      []result{{status: 405, desc: "Method Not Allowed: a stateless server opens no stream (the MCP SDK's answer)."}}},
		"DELETE /mcp": {id: "mcpCloseToolset",
			summary: "Close the toolset of this key and name: its browser sessions (not those a person holds) and its sandboxes",
			desc:    "Needs an execution key (else 403 scope_insufficient).",
			headers: mcpHeaders,
			ok: []result{{status: 200, desc: "What closing the toolset did.",
				content: []media{{typ: "application/json", schema: named("MCPCloseReport")}}}}},
	}
}

var mcpHeaders = []param{
	{name: "Berth-Toolset", desc: "The toolset's name (default: default): what its tools made is reachable only through it.",
		schema: &Schema{Type: "string", Pattern: "^[A-Za-z0-9._-]{1,64}$"}},
	qString("MCP-Protocol-Version", "The negotiated MCP protocol revision."),
}

// namedSchemas are component schemas that are not Go types of apitype:
// the planned routes' bodies. (The station's answer types are httpapi's
// own, unexported; moved to apitype they could be reflected instead.)
// Build adds those an operation refers to.
func namedSchemas() map[string]*Schema {
	str, strs := &Schema{Type: "string"}, &Schema{Type: "array", Items: &Schema{Type: "string"}}
	slots := &Schema{Type: "object", Required: []string{"available", "active", "max"}, Properties: map[string]*Schema{
		"available": {Type: "boolean"}, "reason": str, "active": {Type: "integer"}, "max": {Type: "integer"}}}
	primitive := &Schema{Type: "object", Required: []string{"methods"}, Properties: map[string]*Schema{"methods": strs, "modes": strs}}
	return map[string]*Schema{
		"StationMethodRequest": {Type: "object", Required: []string{"method"},
			Description: "A Station method call: method and the method's own fields, in the seed's camelCase " +
				"(timeoutMs, runId, ttlMs, ...). Sandbox methods: create, exec, command, cancel, destroy, list, get; " +
				"browser methods: open, execute, action, liveFrame, controlAcquire, controlRenew, controlRelease, " +
				"control, checkpoint, resume, close, list, recordingStart, recordingStop, recording, recordingDelete, " +
				"recordings, recordingFrame. Station methods Berth does not carry answer 501 " +
				"station_method_unimplemented. docs/api.md has the mapping to REST.",
			Properties:           map[string]*Schema{"method": str},
			AdditionalProperties: &Schema{}},
		"StationMethodResponse": {Type: "object", Required: []string{"data"},
			Properties: map[string]*Schema{"data": {Description: "The method's result: the REST answer with camelCase names."}}},
		"StationDescription": {Type: "object", Required: []string{"data"}, Properties: map[string]*Schema{
			"data": {Type: "object", Required: []string{"stations"}, Properties: map[string]*Schema{
				"stations": {Type: "array", Items: &Schema{Type: "object",
					Required: []string{"stationId", "status", "version", "capabilities", "backends", "availability"},
					Properties: map[string]*Schema{
						"stationId": str,
						"status":    {Type: "string", Enum: []string{"online", "degraded"}},
						"version":   str,
						"capabilities": {Type: "object", Required: []string{"primitives", "sandbox", "runtimes"},
							Properties: map[string]*Schema{"primitives": strs, "sandbox": primitive, "browser": primitive,
								"runtimes": {Type: "array", Items: &Schema{Ref: refPrefix + "RuntimeInfo"}}}},
						"backends": {Type: "object", Required: []string{"sandbox", "browser"},
							Properties: map[string]*Schema{"sandbox": strs, "browser": strs}},
						"availability": {Type: "object", Required: []string{"sandbox", "browser"},
							Properties: map[string]*Schema{"sandbox": slots, "browser": slots}},
					}}},
			}},
		}},
		"MCPCloseReport": {Type: "object", Required: []string{"sandboxes_deleted", "browsers_closed"},
			Description: "What closing a toolset did (internal/mcpserver's CloseReport).",
			Properties: map[string]*Schema{"sandboxes_deleted": strs, "browsers_closed": strs,
				"browsers_kept": {Type: "array", Items: str, Description: "Sessions a person holds under a control lease: they stay open."},
				"errors":        strs}},
		"JSONRPCMessage": {Description: "A JSON-RPC 2.0 message (request, notification or response), or a batch of them.",
			AnyOf: []*Schema{
				{Type: "object", Required: []string{"jsonrpc"}, Properties: map[string]*Schema{
					"jsonrpc": {Type: "string", Enum: []string{"2.0"}},
					"id":      {Type: []string{"string", "integer"}},
					"method":  str, "params": {}, "result": {}, "error": {Type: "object"},
				}},
				{Type: "array", Items: &Schema{Type: "object"}},
			}},
	}
}

// named refers to a schema of namedSchemas.
func named(name string) *Schema { return &Schema{Ref: refPrefix + name} }
