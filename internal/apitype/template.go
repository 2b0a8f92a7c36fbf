package apitype

import "time"

// Template states.
const (
	TemplateBuilding = "building"
	TemplateReady    = "ready"
	TemplateFailed   = "failed"
)

// Template sources.
const (
	TemplateBuiltin = "builtin" // base: this machine's system, read-only
	TemplateBuilt   = "build"   // steps run on a base template, frozen
	TemplateImport  = "import"  // an OCI image layout or docker save tarball
)

// Template is a read-only root sandboxes start from, with an optional seed
// tree mounted read-only at /template and environment for its commands.
type Template struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	State     string            `json:"state"`
	Reason    string            `json:"reason,omitempty"`
	Source    string            `json:"source"`
	Base      string            `json:"base,omitempty"` // the template a build started from
	Env       map[string]string `json:"env,omitempty"`
	Seed      bool              `json:"seed"` // has a /template tree
	SizeBytes int64             `json:"size_bytes"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// TemplateList is the body of GET /v1/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// BuildTemplateRequest is the body of POST /v1/templates: run Steps in a
// fresh sandbox of From (default base) and freeze the result. What the
// steps write outside /workspace (/opt, and /usr/local on imported bases)
// becomes a read-only layer; what they leave in /workspace becomes the
// seed, mounted read-only at /template in every sandbox of the template.
// The build runs in the background; GET /v1/templates/{name} shows it.
type BuildTemplateRequest struct {
	Name  string            `json:"name"`
	From  string            `json:"from,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	Steps []TemplateStep    `json:"steps"`
	// Network is the build sandbox's network mode: none (the default) or
	// egress, under the daemon's default policy, so that steps can fetch
	// dependencies. Sandboxes made from the template do not inherit it.
	Network string `json:"network,omitempty"`
}

// TemplateStep is one build step: a shell command, or a file to put in the
// workspace (Copy.Path is relative to it).
type TemplateStep struct {
	Run       string    `json:"run,omitempty"`
	TimeoutMS int64     `json:"timeout_ms,omitempty"`
	Copy      *CopyStep `json:"copy,omitempty"`
}

// CopyStep writes a file into the build's workspace.
type CopyStep struct {
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64"`
	Mode          uint32 `json:"mode,omitempty"`
}
