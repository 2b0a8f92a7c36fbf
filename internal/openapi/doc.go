// Package openapi builds the OpenAPI 3.1 document of the daemon's HTTP API
// (served at GET /v1/openapi.json and committed as docs/openapi.json).
//
// The document comes from two sources: the live route table
// (httpapi's Routes, passed in as []Route), which gives every operation's
// method, path and access, and the table in operations.go, which gives
// what the route table cannot: a summary, query parameters, the request
// body and the answers. Wire types are turned into JSON Schemas by
// reflection over their Go structs (internal/apitype), so the schemas
// follow the types; their descriptions are apitype's doc comments, kept in
// apitype_docs.go by a test. Every operation carries the one error shape
// of internal/wire.
//
// Check reports where the route table and the operations table differ; a
// test fails on any difference, so a new route cannot go undocumented.
package openapi

//go:generate go test . -count=1 -run ^TestAPITypeDocs$ -update-docs
//go:generate go test . -count=1 -run ^TestOpenAPIGolden$ -update
