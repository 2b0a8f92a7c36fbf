// Package dashboard is Berth's web dashboard, served by the daemon at /:
// server-rendered pages (html/template and go:embed) for sandboxes,
// commands, files with previews, services and jobs, with small JavaScript
// modules served from the binary under a strict Content-Security-Policy.
//
// A person signs in with an API key, which is exchanged for a random
// session ID in a cookie; the key stays in the daemon's memory. Every page
// calls the daemon's own HTTP API in process (wire.InProcess) with the
// session's key through the Go client, so what a page shows and changes is
// exactly what the key may see and do: scopes, tenancy, quotas, rate limits
// and the audit log are the API's. The dashboard has no other way into the
// daemon.
//
// What the sandboxes produce (file names, command output, Markdown, HTML)
// is escaped by the templates, sanitized (Markdown) or served as text or an
// attachment, never as HTML on the dashboard's origin. docs/dashboard.md
// describes it for users.
package dashboard
