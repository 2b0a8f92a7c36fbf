package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// FileURI is the scheme of the resources a conversion's outputs are read
// by: berth://files/{sha256}.
const FileURI = "berth://files/"

// maxConvertInput bounds what convert takes from the model or a sandbox.
const maxConvertInput = 16 << 20

// maxResourceRead bounds what resources/read returns inline.
const maxResourceRead = 16 << 20

var convertActions = []string{"html-pdf", "html-pptx", "markdown-pdf", "office-pdf"}

type convertIn struct {
	Action   string          `json:"action" jsonschema:"html-pdf, html-pptx, markdown-pdf or office-pdf."`
	Content  string          `json:"content,omitempty" jsonschema:"The document itself, for html-* and markdown-pdf (HTML or Markdown text). Give this or sandbox and path."`
	Filename string          `json:"filename,omitempty" jsonschema:"The input's file name (index.html, README.md, letter.docx); a default from the action when empty."`
	Sandbox  string          `json:"sandbox,omitempty" jsonschema:"Take the input from this sandbox of the toolset (with path): how office documents are given."`
	Path     string          `json:"path,omitempty" jsonschema:"The input file's path in the sandbox."`
	Options  json.RawMessage `json:"options,omitempty" jsonschema:"The action's options (berth actions lists them), e.g. {\"paper\":\"A4\"}."`
}

type convertOut struct {
	Job    string `json:"job"`
	Output string `json:"output" jsonschema:"The output's resource URI (berth://files/SHA256), readable with resources/read."`
	Name   string `json:"name"`
	MIME   string `json:"mime"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Pages  int    `json:"pages,omitempty"`
}

func (s *server) addJobTools(srv *mcp.Server) {
	t := &mcp.Tool{Name: "convert",
		Description: "Convert a document in a fresh sandbox: html-pdf, html-pptx, markdown-pdf or office-pdf (doc, docx, odt, xlsx, pptx...). Returns a link to the output with its size and SHA-256; read it with resources/read.",
	}
	addTool(s, srv, t, s.convert)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "output", URITemplate: FileURI + "{sha256}",
		Description: "An output of convert, by its SHA-256."}, s.readFile)
}

// defaultInputName is an action's input file name when none is given.
func defaultInputName(action string) string {
	switch action {
	case "markdown-pdf":
		return "input.md"
	case "office-pdf":
		return "input.docx"
	}
	return "index.html"
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (s *server) convert(ctx context.Context, ts *Toolset, in convertIn) (*mcp.CallToolResult, convertOut, error) {
	if !slices.Contains(convertActions, in.Action) {
		return nil, convertOut{}, errcode.InvalidFields(map[string]string{"action": "one of html-pdf, html-pptx, markdown-pdf, office-pdf"})
	}
	name := in.Filename
	var data []byte
	switch {
	case in.Content != "" && in.Sandbox != "":
		return nil, convertOut{}, errcode.InvalidFields(map[string]string{"content": "give content or sandbox and path, not both"})
	case in.Content != "":
		data = []byte(in.Content)
	case in.Sandbox != "":
		if err := ts.sandbox(ctx, in.Sandbox); err != nil {
			return nil, convertOut{}, err
		}
		rc, err := ts.client().ReadFile(ctx, in.Sandbox, in.Path)
		if err != nil {
			return nil, convertOut{}, err
		}
		data, err = io.ReadAll(io.LimitReader(rc, maxConvertInput+1))
		rc.Close()
		if err != nil {
			return nil, convertOut{}, err
		}
		if name == "" {
			name = path.Base(in.Path)
		}
	default:
		return nil, convertOut{}, errcode.InvalidFields(map[string]string{"content": "give content, or sandbox and path"})
	}
	if len(data) > maxConvertInput {
		return nil, convertOut{}, errcode.New(errcode.PayloadTooLarge, "the input is larger than %d bytes", maxConvertInput)
	}
	if name == "" {
		name = defaultInputName(in.Action)
	}
	if !safeName.MatchString(name) {
		return nil, convertOut{}, errcode.InvalidFields(map[string]string{"filename": "a plain file name: letters, digits, dot, dash, underscore"})
	}
	c := ts.client()
	job, err := c.CreateJob(ctx, apitype.CreateJobRequest{Action: in.Action, Options: in.Options,
		Inputs: map[string]apitype.JobInput{name: {ContentBase64: base64.StdEncoding.EncodeToString(data)}}})
	if err != nil {
		if !isAPIError(err) {
			return nil, convertOut{}, fmt.Errorf("the conversion's outcome is unknown (%v); call convert again to make a new one", err)
		}
		return nil, convertOut{}, err
	}
	job, err = c.WaitJob(ctx, job.ID)
	if err != nil {
		return nil, convertOut{}, err
	}
	if job.Error != nil {
		return nil, convertOut{}, &errcode.Error{Code: errcode.Code(job.Error.Code), Reason: job.Error.Reason,
			Message: fmt.Sprintf("job %s failed: %s", job.ID, job.Error.Message)}
	}
	if len(job.Outputs) == 0 {
		return nil, convertOut{}, fmt.Errorf("job %s ended %s with no output", job.ID, job.State)
	}
	o := job.Outputs[0]
	ts.mu.Lock()
	ts.outputs[o.SHA256] = o.MIME
	ts.mu.Unlock()
	out := convertOut{Job: job.ID, Output: FileURI + o.SHA256, Name: o.Name, MIME: o.MIME, Size: o.Size, SHA256: o.SHA256, Pages: o.Pages}
	size := o.Size
	text := fmt.Sprintf("%s: %s, %d bytes, sha256 %s", in.Action, o.Name, o.Size, o.SHA256)
	if o.Pages > 0 {
		text += fmt.Sprintf(", %d pages", o.Pages)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: text},
		&mcp.ResourceLink{URI: out.Output, Name: o.Name, MIMEType: o.MIME, Size: &size},
	}}, out, nil
}

// readFile serves resources/read of an output the toolset made.
func (s *server) readFile(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	ts, err := s.resolve(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	uri := req.Params.URI
	sha, ok := strings.CutPrefix(uri, FileURI)
	ts.mu.Lock()
	mime, made := ts.outputs[sha]
	ts.mu.Unlock()
	if !ok || !made {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	rc, err := ts.client().DownloadFile(ctx, sha)
	if err != nil {
		return nil, toolError(err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(rc, maxResourceRead+1)); err != nil {
		return nil, err
	}
	if buf.Len() > maxResourceRead {
		return nil, fmt.Errorf("the output is larger than %d bytes: download it with GET /v1/files/%s", maxResourceRead, sha)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Blob: buf.Bytes(), MIMEType: mime}}}, nil
}
