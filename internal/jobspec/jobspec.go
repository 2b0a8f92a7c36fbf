// Package jobspec is the contract between the daemon, which queues and
// supervises sandbox jobs, and the runner, which does one job's work inside
// a fresh sandbox: the built-in actions, their options and how they are
// checked, and the runner's small HTTP API.
//
// Both sides validate options with the same code, so a job the daemon
// accepts is one the runner can run, and invalid options are refused
// before anything is queued.
package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// RunnerAPI is the version of the runner protocol this binary speaks. An
// action bundle that needs another is VERSION_MISMATCH.
const RunnerAPI = 1

// RunnerPort is where the runner listens inside a job sandbox (its own
// network namespace: loopback only).
const RunnerPort = 7777

// UNOModule is LibreOffice's Python UNO module (Debian's python3-uno), which
// the office runner's converter imports, run by /usr/bin/python3: a
// sandbox sees the host's /usr.
const UNOModule = "/usr/lib/python3/dist-packages/uno.py"

// Paths inside a job sandbox.
const (
	InputDir  = "/workspace/in"
	OutputDir = "/workspace/out"
)

// Profiles: the runtime a job's sandbox needs.
const (
	ProfileBrowser = "browser" // Chromium, already up in pooled sandboxes
	ProfileOffice  = "office"  // LibreOffice, already up and listening in pooled sandboxes
	ProfilePDF     = "pdf"     // qpdf and exiftool: nothing pre-started
	// ProfileWeb is Chromium in a sandbox with egress (the daemon's egress
	// policy): the URL actions, which fetch a page from the network.
	ProfileWeb = "web"
)

// Built-in action names.
const (
	HTMLPDF     = "html-pdf"
	HTMLPNG     = "html-png"
	HTMLPPTX    = "html-pptx"
	MarkdownPDF = "markdown-pdf"
	OfficePDF   = "office-pdf"

	// URL actions (the web profile): a page fetched from the network.
	URLPDF = "url-pdf"
	URLPNG = "url-png"

	// PDF engines (the pdf profile), for the Gotenberg-compatible routes.
	PDFMerge         = "pdf-merge"
	PDFSplit         = "pdf-split"
	PDFMetadataRead  = "pdf-metadata-read"
	PDFMetadataWrite = "pdf-metadata-write"
)

// Action is a registered kind of work.
type Action struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Profile string `json:"profile"`
	// Base is the built-in action an external bundle builds on; for
	// built-ins it equals Name.
	Base string `json:"base"`
	// Inputs says what files the action takes.
	Inputs InputSchema `json:"inputs"`
	// Output is the MIME type of the action's main output.
	Output      string `json:"output"`
	Description string `json:"description"`
}

// InputSchema describes an action's input files.
type InputSchema struct {
	// Main is the input rendered or converted; "" means the single input,
	// or index.html among several for HTML actions.
	Main string `json:"main,omitempty"`
	// Extensions the main input may have (lower case, with the dot).
	Extensions []string `json:"extensions"`
	MaxFiles   int      `json:"max_files"`
}

// Builtins are the actions every Berth has.
var Builtins = []Action{
	{Name: HTMLPDF, Version: "1.0.0", Profile: ProfileBrowser, Base: HTMLPDF, Output: "application/pdf",
		Inputs:      InputSchema{Main: "index.html", Extensions: []string{".html", ".htm"}, MaxFiles: 256},
		Description: "HTML (with its assets) to PDF through Chromium's printToPDF"},
	{Name: HTMLPNG, Version: "1.0.0", Profile: ProfileBrowser, Base: HTMLPNG, Output: "image/png",
		Inputs:      InputSchema{Main: "index.html", Extensions: []string{".html", ".htm"}, MaxFiles: 256},
		Description: "HTML (with its assets) to a PNG screenshot, viewport or full page"},
	{Name: HTMLPPTX, Version: "1.0.0", Profile: ProfileBrowser, Base: HTMLPPTX,
		Output:      "application/vnd.openxmlformats-officedocument.presentationml.presentation",
		Inputs:      InputSchema{Main: "index.html", Extensions: []string{".html", ".htm"}, MaxFiles: 256},
		Description: "HTML slides to PPTX: one exact image per slide, or editable objects (mode editable); speaker notes kept"},
	{Name: MarkdownPDF, Version: "1.0.0", Profile: ProfileBrowser, Base: MarkdownPDF, Output: "application/pdf",
		Inputs:      InputSchema{Extensions: []string{".md", ".markdown"}, MaxFiles: 256},
		Description: "Markdown (CommonMark with tables) to PDF through Chromium"},
	{Name: OfficePDF, Version: "1.0.0", Profile: ProfileOffice, Base: OfficePDF, Output: "application/pdf",
		Inputs: InputSchema{Extensions: []string{".docx", ".doc", ".odt", ".rtf", ".xlsx", ".xls", ".ods",
			".csv", ".pptx", ".ppt", ".odp", ".txt"}, MaxFiles: 1},
		Description: "Office documents to PDF through LibreOffice"},
	{Name: URLPDF, Version: "1.0.0", Profile: ProfileWeb, Base: URLPDF, Output: "application/pdf",
		Description: "a web page (options.url) to PDF through Chromium, fetched through the egress policy"},
	{Name: URLPNG, Version: "1.0.0", Profile: ProfileWeb, Base: URLPNG, Output: "image/png",
		Description: "a web page (options.url) to a PNG screenshot, fetched through the egress policy"},
	{Name: PDFMerge, Version: "1.0.0", Profile: ProfilePDF, Base: PDFMerge, Output: "application/pdf",
		Inputs:      InputSchema{Extensions: []string{".pdf"}, MaxFiles: 256},
		Description: "PDFs merged into one with qpdf, in the alphanumeric order of their names"},
	{Name: PDFSplit, Version: "1.0.0", Profile: ProfilePDF, Base: PDFSplit, Output: "application/pdf",
		Inputs:      InputSchema{Extensions: []string{".pdf"}, MaxFiles: 256},
		Description: "each PDF split with qpdf into intervals of pages or the pages named"},
	{Name: PDFMetadataRead, Version: "1.0.0", Profile: ProfilePDF, Base: PDFMetadataRead, Output: "application/json",
		Inputs:      InputSchema{Extensions: []string{".pdf"}, MaxFiles: 256},
		Description: "each PDF's metadata read with exiftool, as one JSON object by file name"},
	{Name: PDFMetadataWrite, Version: "1.0.0", Profile: ProfilePDF, Base: PDFMetadataWrite, Output: "application/pdf",
		Inputs:      InputSchema{Extensions: []string{".pdf"}, MaxFiles: 256},
		Description: "metadata written into each PDF with exiftool"},
}

// Builtin returns the built-in action called name.
func Builtin(name string) (Action, bool) {
	for _, a := range Builtins {
		if a.Name == name {
			return a, true
		}
	}
	return Action{}, false
}

// Options are every action's options; each action reads the ones it
// knows and Validate refuses the ones it does not.
type Options struct {
	// Paper and layout (PDF actions). Sizes in inches, as printToPDF.
	Paper           string   `json:"paper,omitempty"` // A3, A4, A5, Letter, Legal, Tabloid
	PaperWidth      float64  `json:"paper_width,omitempty"`
	PaperHeight     float64  `json:"paper_height,omitempty"`
	MarginTop       *float64 `json:"margin_top,omitempty"`
	MarginBottom    *float64 `json:"margin_bottom,omitempty"`
	MarginLeft      *float64 `json:"margin_left,omitempty"`
	MarginRight     *float64 `json:"margin_right,omitempty"`
	Landscape       bool     `json:"landscape,omitempty"`
	Scale           float64  `json:"scale,omitempty"` // 0.1-2, default 1
	PrintBackground bool     `json:"print_background,omitempty"`
	HeaderTemplate  string   `json:"header_template,omitempty"`
	FooterTemplate  string   `json:"footer_template,omitempty"`
	PageRanges      string   `json:"page_ranges,omitempty"` // "1-3,5"
	PreferCSSPage   bool     `json:"prefer_css_page_size,omitempty"`

	// Viewport (PNG and PPTX), in CSS pixels.
	Width             int     `json:"width,omitempty"`
	Height            int     `json:"height,omitempty"`
	DeviceScaleFactor float64 `json:"device_scale_factor,omitempty"` // 1-4
	FullPage          bool    `json:"full_page,omitempty"`

	// Slides (PPTX): one per element matching SlideSelector, or one per
	// viewport-sized page of the document when it matches nothing or is
	// "page". Notes come from each slide's NotesSelector element.
	SlideSelector string `json:"slide_selector,omitempty"` // default "section"
	NotesSelector string `json:"notes_selector,omitempty"` // default "aside.notes"
	// Mode (PPTX) is "image" (default: one exact picture per slide) or
	// "editable" (native text boxes, shapes, pictures and tables).
	Mode string `json:"mode,omitempty"`

	// Waits before rendering (HTML actions).
	WaitForSelector string `json:"wait_for_selector,omitempty"`
	WaitNetworkIdle bool   `json:"wait_network_idle,omitempty"`
	WaitDelayMS     int    `json:"wait_delay_ms,omitempty"` // at most 10000
	// WaitForExpression is JavaScript the page evaluates until it is true.
	WaitForExpression string `json:"wait_for_expression,omitempty"`

	// Emulation (HTML actions), set before the page loads.
	// UserAgent replaces Chromium's User-Agent (the header and
	// navigator.userAgent).
	UserAgent string `json:"user_agent,omitempty"`
	// EmulatedMediaType is the CSS media type the page is laid out and
	// rendered with: "print" (PDFs' default) or "screen" (screenshots').
	EmulatedMediaType string `json:"emulated_media_type,omitempty"`
	// EmulatedMediaFeatures are CSS media features the page sees, such as
	// {"name": "prefers-color-scheme", "value": "dark"}.
	EmulatedMediaFeatures []MediaFeature `json:"emulated_media_features,omitempty"`

	// PDF export (office-pdf), as LibreOffice's PDF export filter takes
	// it; Landscape and PageRanges above apply too.
	PDFA                     string `json:"pdfa,omitempty"` // PDF/A-1b, PDF/A-2b or PDF/A-3b
	PDFUA                    bool   `json:"pdfua,omitempty"`
	ExportFormFields         *bool  `json:"export_form_fields,omitempty"` // default true
	Quality                  int    `json:"quality,omitempty"`            // JPEG quality 1-100, default 90
	SinglePageSheets         bool   `json:"single_page_sheets,omitempty"`
	LosslessImageCompression bool   `json:"lossless_image_compression,omitempty"`
	ReduceImageResolution    bool   `json:"reduce_image_resolution,omitempty"`
	MaxImageResolution       int    `json:"max_image_resolution,omitempty"` // DPI: 75, 150, 300, 600 or 1200

	// Main names the input to render when there are several.
	Main string `json:"main,omitempty"`

	// URL is the page the URL actions render (http or https).
	URL string `json:"url,omitempty"`
	// FailOnHTTPStatusCodes fails a URL action whose page answers one of
	// these statuses; a code ending in 99 stands for its hundred (499:
	// 400-499), as Gotenberg's failOnHttpStatusCodes. Nil is [499, 599];
	// empty fails on none.
	FailOnHTTPStatusCodes *[]int `json:"fail_on_http_status_codes,omitempty"`

	// MarkdownTemplate makes the main HTML a template in which
	// {{ toHTML "name.md" }} is that Markdown input rendered as HTML, as
	// Gotenberg's markdown routes take it (html-pdf, html-png).
	MarkdownTemplate bool `json:"markdown_template,omitempty"`

	// PDF engines: how pdf-split splits (intervals of SplitSpan pages, or
	// the pages SplitSpan names, those of one input unified into one PDF
	// with SplitUnify), and what pdf-metadata-write writes (exiftool's tag
	// names: Title, Author, Subject, Keywords, Creator, Producer...).
	SplitMode  string         `json:"split_mode,omitempty"` // intervals, pages
	SplitSpan  string         `json:"split_span,omitempty"`
	SplitUnify bool           `json:"split_unify,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// MediaFeature is a CSS media feature and its value, as Chromium's
// Emulation.setEmulatedMedia and Gotenberg's emulatedMediaFeatures take it.
type MediaFeature struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Limits on the emulation options.
const (
	MaxUserAgentBytes = 512
	MaxMediaFeatures  = 16
)

// mediaTokenRE is a media feature's name or value: CSS keywords and
// numbers (prefers-color-scheme, dark, 2dppx).
var mediaTokenRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,63}$`)

// PDFAParts are the PDF/A parts office-pdf's pdfa option takes.
var PDFAParts = []string{"PDF/A-1b", "PDF/A-2b", "PDF/A-3b"}

// ImageResolutions are the values office-pdf's max_image_resolution
// option takes, in DPI (LibreOffice's).
var ImageResolutions = []int{75, 150, 300, 600, 1200}

// The modes of html-pptx.
const (
	PPTXImage    = "image"
	PPTXEditable = "editable"
)

// Limits on options.
const (
	MaxTemplateBytes = 64 << 10
	MaxViewport      = 8192
	MaxWaitDelayMS   = 10_000
)

// Papers are the named paper sizes, in inches (portrait).
var Papers = map[string][2]float64{
	"a3": {11.69, 16.54}, "a4": {8.27, 11.69}, "a5": {5.83, 8.27},
	"letter": {8.5, 11}, "legal": {8.5, 14}, "tabloid": {11, 17},
}

var pageRangesRE = regexp.MustCompile(`^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$`)

// ParseOptions decodes raw options strictly, as request bodies are (see
// wire.DecodeJSON): an unknown field, a repeated one, one in the wrong case
// or invalid UTF-8 is an error that names the field, and an unknown field
// comes with the option it was probably meant to be.
func ParseOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	if err := wire.DecodeJSON(bytes.NewReader(raw), &o); err != nil {
		msg := errcode.MessageOf(err)
		for _, p := range []string{"request body has an ", "request body: ", "request body "} {
			msg = strings.TrimPrefix(msg, p)
		}
		var field string
		if _, err := fmt.Sscanf(msg, "unknown field %q", &field); err == nil {
			if near := nearestOption(field); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
		}
		return o, errors.New(msg)
	}
	return o, nil
}

// OptionNames are the JSON names of every option, in declaration order.
func OptionNames() []string {
	t := reflect.TypeFor[Options]()
	var names []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// nearestOption returns the option name closest to s (at most two edits
// away, or one that contains it), or "".
func nearestOption(s string) string {
	s = strings.ToLower(s)
	best, bestD := "", 3
	for _, n := range OptionNames() {
		d := editDistance(s, n)
		if len(s) >= 3 && strings.Contains(n, s) {
			d = min(d, 2)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Validate returns the options' problems for action base, by field
// ("options.scale": "must be between 0.1 and 2").
func (o *Options) Validate(base string) map[string]string {
	p := map[string]string{}
	pdf := base == HTMLPDF || base == MarkdownPDF || base == URLPDF
	shot := base == HTMLPNG || base == HTMLPPTX || base == URLPNG
	html := pdf || shot
	web := IsURLAction(base)
	only := func(ok bool, field string, set bool) {
		if set && !ok {
			p["options."+field] = "is not an option of " + base
		}
	}
	only(pdf, "paper", o.Paper != "")
	only(pdf, "paper_width", o.PaperWidth != 0)
	only(pdf, "paper_height", o.PaperHeight != 0)
	only(pdf, "margin_top", o.MarginTop != nil)
	only(pdf, "margin_bottom", o.MarginBottom != nil)
	only(pdf, "margin_left", o.MarginLeft != nil)
	only(pdf, "margin_right", o.MarginRight != nil)
	only(pdf || base == OfficePDF, "landscape", o.Landscape)
	only(pdf, "scale", o.Scale != 0)
	only(pdf, "print_background", o.PrintBackground)
	only(pdf, "header_template", o.HeaderTemplate != "")
	only(pdf, "footer_template", o.FooterTemplate != "")
	only(pdf || base == OfficePDF, "page_ranges", o.PageRanges != "")
	only(pdf, "prefer_css_page_size", o.PreferCSSPage)
	only(shot, "width", o.Width != 0)
	only(shot, "height", o.Height != 0)
	only(shot, "device_scale_factor", o.DeviceScaleFactor != 0)
	only(base == HTMLPNG || base == URLPNG, "full_page", o.FullPage)
	only(web, "url", o.URL != "")
	only(!web, "main", o.Main != "") // a URL action has no inputs
	only(web, "fail_on_http_status_codes", o.FailOnHTTPStatusCodes != nil)
	only(base == HTMLPPTX, "slide_selector", o.SlideSelector != "")
	only(base == HTMLPPTX, "notes_selector", o.NotesSelector != "")
	only(base == HTMLPPTX, "mode", o.Mode != "")
	only(html, "wait_for_selector", o.WaitForSelector != "")
	only(html, "wait_network_idle", o.WaitNetworkIdle)
	only(html, "wait_delay_ms", o.WaitDelayMS != 0)
	only(html, "wait_for_expression", o.WaitForExpression != "")
	only(html, "user_agent", o.UserAgent != "")
	only(html, "emulated_media_type", o.EmulatedMediaType != "")
	only(html, "emulated_media_features", o.EmulatedMediaFeatures != nil)
	office := base == OfficePDF
	only(office, "pdfa", o.PDFA != "")
	only(office, "pdfua", o.PDFUA)
	only(office, "export_form_fields", o.ExportFormFields != nil)
	only(office, "quality", o.Quality != 0)
	only(office, "single_page_sheets", o.SinglePageSheets)
	only(office, "lossless_image_compression", o.LosslessImageCompression)
	only(office, "reduce_image_resolution", o.ReduceImageResolution)
	only(office, "max_image_resolution", o.MaxImageResolution != 0)
	only(base == HTMLPDF || base == HTMLPNG, "markdown_template", o.MarkdownTemplate)
	only(base == PDFSplit, "split_mode", o.SplitMode != "")
	only(base == PDFSplit, "split_span", o.SplitSpan != "")
	only(base == PDFSplit, "split_unify", o.SplitUnify)
	only(base == PDFMetadataWrite, "metadata", o.Metadata != nil)
	o.validatePDFEngines(base, p)

	if o.Paper != "" {
		if _, ok := Papers[strings.ToLower(o.Paper)]; !ok {
			p["options.paper"] = "must be one of A3, A4, A5, Letter, Legal, Tabloid"
		}
		if o.PaperWidth != 0 || o.PaperHeight != 0 {
			p["options.paper"] = "give paper or paper_width and paper_height, not both"
		}
	}
	for field, v := range map[string]float64{"paper_width": o.PaperWidth, "paper_height": o.PaperHeight} {
		if v != 0 && (v < 1 || v > 100) {
			p["options."+field] = "must be between 1 and 100 inches"
		}
	}
	for field, v := range map[string]*float64{"margin_top": o.MarginTop, "margin_bottom": o.MarginBottom,
		"margin_left": o.MarginLeft, "margin_right": o.MarginRight} {
		if v != nil && (*v < 0 || *v > 10) {
			p["options."+field] = "must be between 0 and 10 inches"
		}
	}
	if o.Scale != 0 && (o.Scale < 0.1 || o.Scale > 2) {
		p["options.scale"] = "must be between 0.1 and 2"
	}
	if len(o.HeaderTemplate) > MaxTemplateBytes {
		p["options.header_template"] = fmt.Sprintf("at most %d bytes", MaxTemplateBytes)
	}
	if len(o.FooterTemplate) > MaxTemplateBytes {
		p["options.footer_template"] = fmt.Sprintf("at most %d bytes", MaxTemplateBytes)
	}
	if o.PageRanges != "" && !pageRangesRE.MatchString(o.PageRanges) {
		p["options.page_ranges"] = `must look like "1-3,5"`
	}
	for field, v := range map[string]int{"width": o.Width, "height": o.Height} {
		if v != 0 && (v < 16 || v > MaxViewport) {
			p["options."+field] = fmt.Sprintf("must be between 16 and %d pixels", MaxViewport)
		}
	}
	if o.DeviceScaleFactor != 0 && (o.DeviceScaleFactor < 1 || o.DeviceScaleFactor > 4) {
		p["options.device_scale_factor"] = "must be between 1 and 4"
	}
	for field, v := range map[string]string{"slide_selector": o.SlideSelector, "notes_selector": o.NotesSelector,
		"wait_for_selector": o.WaitForSelector} {
		if len(v) > 1024 {
			p["options."+field] = "at most 1024 bytes"
		}
	}
	if len(o.UserAgent) > MaxUserAgentBytes || strings.ContainsFunc(o.UserAgent, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		p["options.user_agent"] = fmt.Sprintf("at most %d bytes, without control characters", MaxUserAgentBytes)
	}
	if o.EmulatedMediaType != "" && o.EmulatedMediaType != "print" && o.EmulatedMediaType != "screen" {
		p["options.emulated_media_type"] = `must be "print" or "screen"`
	}
	if len(o.EmulatedMediaFeatures) > MaxMediaFeatures {
		p["options.emulated_media_features"] = fmt.Sprintf("at most %d features", MaxMediaFeatures)
	}
	for i, f := range o.EmulatedMediaFeatures {
		if !mediaTokenRE.MatchString(f.Name) || !mediaTokenRE.MatchString(f.Value) {
			p[fmt.Sprintf("options.emulated_media_features[%d]", i)] = `name and value must be CSS keywords or numbers, such as {"name": "prefers-color-scheme", "value": "dark"}`
			break
		}
	}
	if o.Mode != "" && o.Mode != PPTXImage && o.Mode != PPTXEditable {
		p["options.mode"] = `must be "image" or "editable"`
	}
	if o.WaitDelayMS < 0 || o.WaitDelayMS > MaxWaitDelayMS {
		p["options.wait_delay_ms"] = fmt.Sprintf("must be between 0 and %d", MaxWaitDelayMS)
	}
	if office && o.PDFA != "" && !slices.Contains(PDFAParts, o.PDFA) {
		p["options.pdfa"] = "must be one of " + strings.Join(PDFAParts, ", ")
	}
	if office && o.Quality != 0 && (o.Quality < 1 || o.Quality > 100) {
		p["options.quality"] = "must be between 1 and 100"
	}
	if office && o.MaxImageResolution != 0 && !slices.Contains(ImageResolutions, o.MaxImageResolution) {
		p["options.max_image_resolution"] = "must be one of 75, 150, 300, 600, 1200"
	}
	if o.Main != "" {
		if err := CheckName(o.Main); err != nil {
			p["options.main"] = err.Error()
		}
	}
	if web {
		if why := CheckURL(o.URL); why != "" {
			p["options.url"] = why
		}
		for _, c := range o.FailOnCodes() {
			if c < 100 || c > 599 {
				p["options.fail_on_http_status_codes"] = "codes are between 100 and 599"
			}
		}
	}
	return p
}

// FailOnCodes returns the statuses a URL action fails on.
func (o *Options) FailOnCodes() []int {
	if o.FailOnHTTPStatusCodes == nil {
		return []int{499, 599}
	}
	return *o.FailOnHTTPStatusCodes
}

// IsURLAction reports whether built-in action base renders a page from
// the network (options.url) rather than inputs.
func IsURLAction(base string) bool { return base == URLPDF || base == URLPNG }

// MaxURLBytes bounds a URL action's URL.
const MaxURLBytes = 2048

// CheckURL says what is wrong with a URL action's URL, or "". It is http
// or https with a host and no credentials, and not the sandbox's own
// loopback, where its runner listens: everything else the job's egress
// policy decides.
func CheckURL(raw string) string {
	if raw == "" {
		return "is required: the page to render"
	}
	if len(raw) > MaxURLBytes {
		return fmt.Sprintf("at most %d bytes", MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a URL: " + err.Error()
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "must be an http or https URL"
	}
	if u.Hostname() == "" {
		return "must name a host"
	}
	if u.User != nil {
		// The job's record keeps its options: no secret belongs there.
		return "must not hold credentials (user:password@)"
	}
	if Loopback(u.Hostname()) {
		return "must not be the job sandbox's own loopback (" + u.Hostname() + ")"
	}
	return ""
}

// Loopback reports whether host is the machine it is resolved on:
// localhost, a name under .localhost, a loopback or unspecified address.
func Loopback(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		// Chromium also takes 127.1, 0x7f.1 and 2130706433 as addresses.
		if n, ok := legacyIPv4(h); ok {
			return n>>24 == 127 || n == 0
		}
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsUnspecified()
}

// legacyIPv4 parses the inet_aton forms of an IPv4 address a browser
// takes: one to four parts, each decimal, octal (0...) or hex (0x...).
func legacyIPv4(h string) (uint32, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return 0, false
	}
	vals := make([]uint64, len(parts))
	for i, part := range parts {
		v, err := strconv.ParseUint(part, 0, 32)
		if err != nil || part == "" {
			return 0, false
		}
		vals[i] = v
	}
	last := vals[len(vals)-1]
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return 0, false
		}
		n |= v << (24 - 8*i)
	}
	if last >= 1<<(32-8*(len(vals)-1)) {
		return 0, false
	}
	return uint32(n | last), true
}

// CheckName checks an input or output file name: a relative path of
// plain segments (letters, digits, '.', '_', '-', ' '), no "..", at most
// 255 bytes.
func CheckName(name string) error {
	if name == "" || len(name) > 255 || strings.HasPrefix(name, "/") {
		return fmt.Errorf("must be a relative path of 1-255 bytes")
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == "" || seg == "." || seg == ".." || !nameSegRE.MatchString(seg) {
			return fmt.Errorf("%q: segments are letters, digits, '.', '_', '-' or ' ', not '.' or '..'", name)
		}
	}
	return nil
}

var nameSegRE = regexp.MustCompile(`^[A-Za-z0-9._ -]{1,128}$`)

// Request asks the runner for one job's work: the inputs are already in
// InputDir; the runner writes its outputs into OutputDir.
type Request struct {
	Action  string  `json:"action"` // a built-in action (a bundle's base)
	Main    string  `json:"main"`   // the input to render, relative to InputDir
	Options Options `json:"options"`
	// TimeoutMS bounds the work; the daemon kills the sandbox at its own
	// hard deadline regardless.
	TimeoutMS int64 `json:"timeout_ms"`
}

// Output is one file the runner wrote into OutputDir.
type Output struct {
	Name  string `json:"name"`
	MIME  string `json:"mime"`
	Pages int    `json:"pages,omitempty"` // PDF pages or PPTX slides
}

// Result is the runner's answer to a successful Request.
type Result struct {
	Outputs []Output `json:"outputs"`
	// Blocked lists requests the page made that were refused (file:,
	// private addresses, anything not among the inputs), at most 100.
	Blocked []string `json:"blocked,omitempty"`
}

// Failure is the runner's answer to a failed Request (status 4xx for
// deterministic failures, 5xx for retryable ones).
type Failure struct {
	Reason    string `json:"reason"` // invalid_input, render_failed, timeout, browser_launch...
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Health is the runner's answer to GET /healthz.
type Health struct {
	RunnerAPI int    `json:"runner_api"`
	Profile   string `json:"profile"`
	Chromium  string `json:"chromium,omitempty"` // the browser's version, once up
	Office    string `json:"office,omitempty"`   // soffice's path
}
