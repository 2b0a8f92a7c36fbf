package dashboard

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"html/template"
	"io"
	"mime"
	"net/url"
	"path"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Previews read at most maxPreview bytes of a file; a larger one is
// offered as a download. Tables show at most maxRows rows and maxCols
// columns.
const (
	maxPreview = 1 << 20
	maxRows    = 1000
	maxCols    = 100
)

type filesPage struct {
	SandboxID  string
	Dir        string
	Parent     string
	Entries    []apitype.FileInfo
	NextCursor string
}

func (d *Dashboard) handleFiles(rq *req) {
	id := rq.r.PathValue("id")
	q := rq.r.URL.Query()
	dir := q.Get("path")
	if dir == "" {
		dir = "."
	}
	list, err := rq.c.ListFiles(rq.ctx(), id, dir, q.Get("cursor"), 200)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := filesPage{SandboxID: id, Dir: dir, Entries: list.Entries, NextCursor: list.NextCursor}
	if dir != "." && dir != "/" && dir != "" {
		p.Parent = path.Dir(strings.TrimSuffix(dir, "/"))
	}
	rq.render(d, "files", p)
}

// handleUpload stores the files of a multipart form in a directory of
// the workspace. Its CSRF token came in the URL, checked before the body
// was read; the file streams through to the API.
func (d *Dashboard) handleUpload(rq *req) {
	id := rq.r.PathValue("id")
	dir := rq.r.URL.Query().Get("path")
	if dir == "" {
		dir = "."
	}
	mr, err := rq.r.MultipartReader()
	if err != nil {
		d.fail(rq.w, rq.r, errcode.BodyInvalid.New("an upload is a multipart form: %v", err))
		return
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			d.fail(rq.w, rq.r, errcode.BodyInvalid.New("reading the upload: %v", err))
			return
		}
		name := part.FileName()
		if part.FormName() != "file" || name == "" {
			part.Close()
			continue
		}
		// The name is the file's last element only: a browser sends no
		// directories, and another client's "../x" is refused by the API
		// anyway.
		name = path.Base(strings.ReplaceAll(name, "\\", "/"))
		if _, err := rq.c.WriteFile(rq.ctx(), id, path.Join(dir, name), part, 0); err != nil {
			part.Close()
			d.apiFailed(rq, err)
			return
		}
		part.Close()
	}
	rq.redirect("/ui/sandboxes/" + url.PathEscape(id) + "/files?" + url.Values{"path": {dir}}.Encode())
}

// Preview kinds.
const (
	kindCode     = "code"
	kindMarkdown = "markdown"
	kindTable    = "table"
	kindImage    = "image"
	kindPDF      = "pdf"
	kindBinary   = "binary"
	kindTooLarge = "too_large"
	kindInvalid  = "invalid" // a file its extension says it is not (Problem says why)
)

type viewPage struct {
	SandboxID string
	Path      string
	Name      string
	Dir       string
	Kind      string
	HTML      template.HTML // highlighted code or sanitized Markdown
	Rows      [][]string
	Cut       tableCut // what a table preview left out
	RawURL    string
	Sheet     string // an XLSX table's sheet
	Problem   string // why a file is not what its name says (kindInvalid)
}

// inlineTypes are the only types a file is served as, inline, on the
// dashboard's origin (with rawCSP): images a page shows and PDFs.
var inlineTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
	".webp": "image/webp", ".pdf": "application/pdf",
}

func (d *Dashboard) handleView(rq *req) {
	id := rq.r.PathValue("id")
	p := rq.r.URL.Query().Get("path")
	name := path.Base(p)
	ext := strings.ToLower(path.Ext(name))
	v := viewPage{SandboxID: id, Path: p, Name: name, Dir: path.Dir(p),
		RawURL: "/ui/sandboxes/" + url.PathEscape(id) + "/files/raw?" + url.Values{"path": {p}}.Encode()}
	switch {
	case ext == ".pdf":
		v.Kind = kindPDF
	case inlineTypes[ext] != "":
		v.Kind = kindImage
	}
	if v.Kind != "" {
		rq.render(d, "view", v)
		return
	}
	if ext == ".xlsx" {
		d.viewXLSX(rq, v)
		return
	}
	data, err := readHead(rq, id, p)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	switch {
	case len(data) > maxPreview:
		v.Kind = kindTooLarge
	case bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data):
		v.Kind = kindBinary
	case ext == ".md" || ext == ".markdown":
		v.Kind, v.HTML = kindMarkdown, renderMarkdown(data)
	case ext == ".csv" || ext == ".tsv":
		v.Kind = kindTable
		v.Rows, v.Cut = readTable(data, ext == ".tsv")
	default:
		v.Kind, v.HTML = kindCode, highlight(name, string(data))
	}
	rq.render(d, "view", v)
}

// handleRaw serves a file of the workspace: images and PDFs inline with
// ?inline=1, everything else (HTML, SVG, scripts) as an attachment, never
// as a page of the dashboard's origin. Every answer carries rawCSP and
// nosniff.
func (d *Dashboard) handleRaw(rq *req) {
	id := rq.r.PathValue("id")
	q := rq.r.URL.Query()
	p := q.Get("path")
	name := path.Base(p)
	body, err := rq.c.ReadFile(rq.ctx(), id, p)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	defer body.Close()
	h := rq.w.Header()
	ctype := inlineTypes[strings.ToLower(path.Ext(name))]
	disposition := "attachment"
	if ctype != "" && q.Get("inline") == "1" {
		disposition = "inline"
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": name}))
	h.Set("Content-Security-Policy", rawCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	_, _ = io.Copy(rq.w, body)
}

// markdownPolicy is what rendered Markdown may keep: bluemonday's policy
// for user content (no script, no event handlers, no style, safe links).
var markdownPolicy = sync.OnceValue(func() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return p
})

var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

func renderMarkdown(src []byte) template.HTML {
	var buf bytes.Buffer
	if err := markdown.Convert(src, &buf); err != nil {
		return template.HTML(template.HTMLEscapeString(string(src)))
	}
	// The sanitizer's output is what the page may hold as HTML.
	return template.HTML(markdownPolicy().SanitizeBytes(buf.Bytes())) //nolint:gosec // sanitized above
}

// readTable reads a CSV or TSV file's first maxRows rows and maxCols
// columns, and says what it left out.
func readTable(data []byte, tsv bool) ([][]string, tableCut) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	if tsv {
		r.Comma = '\t'
	}
	var rows [][]string
	var cut tableCut
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return rows, cut
		}
		if err != nil {
			// The rest is not CSV: show what parsed.
			cut.Unparsed = true
			return rows, cut
		}
		if len(rows) == maxRows {
			cut.Rows = true
			return rows, cut
		}
		if len(rec) > maxCols {
			rec, cut.Cols = rec[:maxCols], true
		}
		rows = append(rows, rec)
	}
}

// highlight marks src up for highlight.js (vendored, run in the page by
// dashboard.js): escaped text in a code element naming the language its
// file name says, or none (the page guesses). Highlighting in the page
// keeps a lexer library out of the binary, whose every process (each
// sandbox's agent, each job's runner) would pay for its initialisation.
func highlight(name, src string) template.HTML {
	lang := codeLanguages[strings.ToLower(strings.TrimPrefix(path.Ext(name), "."))]
	if lang == "" {
		switch strings.ToLower(path.Base(name)) {
		case "makefile":
			lang = "makefile"
		case "dockerfile":
			lang = "dockerfile"
		}
	}
	class := "hljs"
	if lang != "" {
		class = "language-" + lang
	}
	return template.HTML(`<pre><code class="` + class + `">` + template.HTMLEscapeString(src) + `</code></pre>`) //nolint:gosec // escaped
}

// codeLanguages maps file extensions to highlight.js's language names
// (those of its common bundle).
var codeLanguages = map[string]string{
	"py": "python", "go": "go", "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
	"ts": "typescript", "tsx": "typescript", "json": "json", "yaml": "yaml", "yml": "yaml", "toml": "ini", "ini": "ini",
	"sh": "bash", "bash": "bash", "zsh": "bash", "rb": "ruby", "rs": "rust", "java": "java", "kt": "kotlin",
	"c": "c", "h": "c", "cc": "cpp", "cpp": "cpp", "hpp": "cpp", "cs": "csharp", "php": "php", "swift": "swift",
	"sql": "sql", "css": "css", "scss": "scss", "less": "less", "html": "xml", "htm": "xml", "xml": "xml", "svg": "xml",
	"lua": "lua", "pl": "perl", "r": "r", "diff": "diff", "patch": "diff", "mk": "makefile", "graphql": "graphql",
}

func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// readHead reads the first maxPreview+1 bytes of a sandbox's file: more
// than maxPreview says the file is too large to show.
func readHead(rq *req, id, path string) ([]byte, error) {
	body, err := rq.c.ReadFile(rq.ctx(), id, path)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(io.LimitReader(body, maxPreview+1))
}
