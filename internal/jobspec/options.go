package jobspec

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/berthdev/berth/internal/apitype"
)

// OptionSpec describes one option of the built-in actions (see
// apitype.ActionOption). optionSpecs is checked against Options and
// Validate by the tests, so what is listed is what is accepted.
type OptionSpec struct {
	apitype.ActionOption
	Actions []string // the base actions that take it
}

func bound(v float64) *float64 { return &v }

var (
	pdfActions  = []string{HTMLPDF, MarkdownPDF, URLPDF}
	shotActions = []string{HTMLPNG, HTMLPPTX, URLPNG}
	htmlActions = []string{HTMLPDF, MarkdownPDF, HTMLPNG, HTMLPPTX, URLPDF, URLPNG}
	allActions  = []string{HTMLPDF, MarkdownPDF, HTMLPNG, HTMLPPTX, OfficePDF, URLPDF, URLPNG}
	urlActions  = []string{URLPDF, URLPNG}
	// inputActions take input files (the URL actions take none).
	inputActions = []string{HTMLPDF, MarkdownPDF, HTMLPNG, HTMLPPTX, OfficePDF}
	// pdfOfficeActions take the PDF options LibreOffice's export shares
	// with Chromium's printToPDF; officeActions take LibreOffice's own.
	pdfOfficeActions = []string{HTMLPDF, MarkdownPDF, OfficePDF, URLPDF}
	officeActions    = []string{OfficePDF}
	// pdfEngineActions take none of the options above.
	pdfEngineActions = []string{PDFMerge, PDFSplit, PDFMetadataRead, PDFMetadataWrite}
)

// optionSpecs lists every option, in the order a user reads them.
var optionSpecs = []OptionSpec{
	{ActionOption: apitype.ActionOption{Name: "paper", Type: "string", Default: "Letter", Enum: []string{"A3", "A4", "A5", "Letter", "Legal", "Tabloid"},
		Description: "named paper size, in any case (portrait; see landscape); not with paper_width and paper_height"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "paper_width", Type: "number", Min: bound(1), Max: bound(100),
		Description: "paper width in inches (with paper_height, instead of paper)"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "paper_height", Type: "number", Min: bound(1), Max: bound(100),
		Description: "paper height in inches (with paper_width, instead of paper)"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "margin_top", Type: "number", Default: 0.4, Min: bound(0), Max: bound(10), Description: "top margin in inches"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "margin_bottom", Type: "number", Default: 0.4, Min: bound(0), Max: bound(10), Description: "bottom margin in inches"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "margin_left", Type: "number", Default: 0.4, Min: bound(0), Max: bound(10), Description: "left margin in inches"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "margin_right", Type: "number", Default: 0.4, Min: bound(0), Max: bound(10), Description: "right margin in inches"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "landscape", Type: "boolean", Default: false, Description: "turn the paper sideways"}, Actions: pdfOfficeActions},
	{ActionOption: apitype.ActionOption{Name: "scale", Type: "number", Default: 1, Min: bound(0.1), Max: bound(2), Description: "scale of the page's rendering"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "print_background", Type: "boolean", Default: false, Description: "print background colours and images"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "header_template", Type: "string", MaxLength: MaxTemplateBytes,
		Description: "HTML of each page's header (Chromium's classes date, title, url, pageNumber, totalPages)"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "footer_template", Type: "string", MaxLength: MaxTemplateBytes,
		Description: "HTML of each page's footer (as header_template)"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "page_ranges", Type: "string", Description: `pages to print, such as "1-3,5" (default: all)`}, Actions: pdfOfficeActions},
	{ActionOption: apitype.ActionOption{Name: "prefer_css_page_size", Type: "boolean", Default: false, Description: "use the document's @page size over paper"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "width", Type: "integer", Min: bound(16), Max: bound(MaxViewport),
		Description: "viewport width in CSS pixels (default 1280)"}, Actions: shotActions},
	{ActionOption: apitype.ActionOption{Name: "height", Type: "integer", Min: bound(16), Max: bound(MaxViewport),
		Description: "viewport height in CSS pixels (default 800 for PNG, 720 for PPTX)"}, Actions: shotActions},
	{ActionOption: apitype.ActionOption{Name: "device_scale_factor", Type: "number", Min: bound(1), Max: bound(4),
		Description: "device pixels per CSS pixel (default 1 for PNG, 2 for PPTX)"}, Actions: shotActions},
	{ActionOption: apitype.ActionOption{Name: "full_page", Type: "boolean", Default: false, Description: "capture the whole page, not only the viewport"}, Actions: []string{HTMLPNG, URLPNG}},
	{ActionOption: apitype.ActionOption{Name: "slide_selector", Type: "string", Default: "section", MaxLength: 1024,
		Description: `one slide per element matching this CSS selector; "page" for one per viewport-sized page`}, Actions: []string{HTMLPPTX}},
	{ActionOption: apitype.ActionOption{Name: "notes_selector", Type: "string", Default: "aside.notes", MaxLength: 1024,
		Description: "the element in each slide whose text becomes its speaker notes"}, Actions: []string{HTMLPPTX}},
	{ActionOption: apitype.ActionOption{Name: "mode", Type: "string", Default: "image", Enum: []string{"image", "editable"},
		Description: "image: one exact picture per slide; editable: native text boxes, shapes, pictures and tables placed from the layout"}, Actions: []string{HTMLPPTX}},
	{ActionOption: apitype.ActionOption{Name: "wait_for_selector", Type: "string", MaxLength: 1024,
		Description: "wait until an element matches this CSS selector before rendering"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "wait_network_idle", Type: "boolean", Default: false,
		Description: "wait until the page has made no request for 500 ms before rendering"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "wait_delay_ms", Type: "integer", Default: 0, Min: bound(0), Max: bound(MaxWaitDelayMS),
		Description: "wait this long after loading (and the other waits) before rendering"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "wait_for_expression", Type: "string", MaxLength: 1024,
		Description: "wait until this JavaScript expression is true in the page before rendering"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "user_agent", Type: "string", MaxLength: MaxUserAgentBytes,
		Description: "the User-Agent the page is loaded with (the header and navigator.userAgent; default Chromium's)"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "emulated_media_type", Type: "string", Enum: []string{"print", "screen"},
		Description: "the CSS media type the page is laid out and rendered with (default print for PDFs, screen for images)"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "emulated_media_features", Type: "array",
		Description: `CSS media features the page sees, as [{"name": "prefers-color-scheme", "value": "dark"}] (at most 16)`}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "markdown_template", Type: "boolean", Default: false,
		Description: `the main HTML is a template: {{ toHTML "name.md" }} becomes that Markdown input as HTML (Gotenberg's markdown routes)`},
		Actions: []string{HTMLPDF, HTMLPNG}},
	{ActionOption: apitype.ActionOption{Name: "split_mode", Type: "string", Default: "intervals", Enum: []string{"intervals", "pages"},
		Description: "intervals: a PDF every split_span pages; pages: the pages split_span names"}, Actions: []string{PDFSplit}},
	{ActionOption: apitype.ActionOption{Name: "split_span", Type: "string", MaxLength: 1024,
		Description: `a page count (intervals) or page ranges such as "1-3,5" (pages); required`}, Actions: []string{PDFSplit}},
	{ActionOption: apitype.ActionOption{Name: "split_unify", Type: "boolean", Default: false,
		Description: "pages mode: the pages named, of each input, as one PDF"}, Actions: []string{PDFSplit}},
	{ActionOption: apitype.ActionOption{Name: "metadata", Type: "object",
		Description: "the metadata to write, by exiftool tag name (Title, Author, Subject, Keywords, Creator, Producer, CreateDate...)"},
		Actions: []string{PDFMetadataWrite}},
	{ActionOption: apitype.ActionOption{Name: "pdfa", Type: "string", Enum: PDFAParts,
		Description: "make an archival PDF/A of this part (default: a plain PDF)"}, Actions: officeActions},
	{ActionOption: apitype.ActionOption{Name: "pdfua", Type: "boolean", Default: false,
		Description: "make an accessible PDF/UA (tagged, with the document's structure)"}, Actions: officeActions},
	{ActionOption: apitype.ActionOption{Name: "export_form_fields", Type: "boolean", Default: true,
		Description: "keep the document's form fields as PDF form fields"}, Actions: officeActions},
	{ActionOption: apitype.ActionOption{Name: "quality", Type: "integer", Default: 90, Min: bound(1), Max: bound(100),
		Description: "JPEG quality of the PDF's images"}, Actions: officeActions},
	{ActionOption: apitype.ActionOption{Name: "single_page_sheets", Type: "boolean", Default: false,
		Description: "put each spreadsheet sheet on one page"}, Actions: officeActions},
	{ActionOption: apitype.ActionOption{Name: "lossless_image_compression", Type: "boolean", Default: false,
		Description: "compress images losslessly instead of as JPEG"}, Actions: officeActions},
	{ActionOption: apitype.ActionOption{Name: "reduce_image_resolution", Type: "boolean", Default: false,
		Description: "reduce images to max_image_resolution (300 DPI when that is not given)"}, Actions: officeActions},
	{ActionOption: apitype.ActionOption{Name: "max_image_resolution", Type: "integer", Min: bound(75), Max: bound(1200),
		Description: "reduce images to this many DPI (75, 150, 300, 600 or 1200); implies reduce_image_resolution"}, Actions: officeActions},
	{ActionOption: apitype.ActionOption{Name: "main", Type: "string", MaxLength: 255,
		Description: "the input to render when there are several (default: the action's main name, else the only input of its kinds)"}, Actions: inputActions},
	{ActionOption: apitype.ActionOption{Name: "url", Type: "string", MaxLength: MaxURLBytes,
		Description: "the page to render (http or https; required), fetched through the daemon's egress policy"}, Actions: urlActions},
	{ActionOption: apitype.ActionOption{Name: "fail_on_http_status_codes", Type: "array",
		Description: "fail when the page answers one of these HTTP statuses; 499 stands for 400-499 (default [499, 599]; [] for none)"},
		Actions: urlActions},
}

// OptionSpecs returns the options action base takes, in reading order.
func OptionSpecs(base string) []OptionSpec {
	var out []OptionSpec
	for _, o := range optionSpecs {
		if slices.Contains(o.Actions, base) {
			out = append(out, o)
		}
	}
	return out
}

// OptionsSchema returns the JSON Schema (2020-12) of action base's
// options: an object of the options it takes, no others. Each action's is
// made once (health answers carry it on every submit); callers must not
// modify it.
func OptionsSchema(base string) json.RawMessage { return schemas()[base] }

// schemas are the options schemas of every built-in action, by name.
var schemas = sync.OnceValue(func() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, base := range append(allActions, pdfEngineActions...) {
		out[base] = makeSchema(base)
	}
	return out
})

func makeSchema(base string) json.RawMessage {
	props := map[string]any{}
	for _, o := range OptionSpecs(base) {
		p := map[string]any{"type": o.Type, "description": o.Description}
		if o.Type == "array" {
			p["items"] = map[string]any{"type": "integer"}
			if o.Name == "emulated_media_features" {
				p["items"] = map[string]any{"type": "object", "required": []string{"name", "value"}, "additionalProperties": false,
					"properties": map[string]any{"name": map[string]any{"type": "string"}, "value": map[string]any{"type": "string"}}}
			}
		}
		if o.Default != nil {
			p["default"] = o.Default
		}
		if len(o.Enum) > 0 {
			p["enum"] = o.Enum
		}
		if o.Min != nil {
			p["minimum"] = *o.Min
		}
		if o.Max != nil {
			p["maximum"] = *o.Max
		}
		if o.MaxLength > 0 {
			p["maxLength"] = o.MaxLength
		}
		props[o.Name] = p
	}
	b, _ := json.Marshal(map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	})
	return b
}
