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
	pdfActions  = []string{HTMLPDF, MarkdownPDF}
	shotActions = []string{HTMLPNG, HTMLPPTX}
	htmlActions = []string{HTMLPDF, MarkdownPDF, HTMLPNG, HTMLPPTX}
	allActions  = []string{HTMLPDF, MarkdownPDF, HTMLPNG, HTMLPPTX, OfficePDF}
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
	{ActionOption: apitype.ActionOption{Name: "landscape", Type: "boolean", Default: false, Description: "turn the paper sideways"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "scale", Type: "number", Default: 1, Min: bound(0.1), Max: bound(2), Description: "scale of the page's rendering"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "print_background", Type: "boolean", Default: false, Description: "print background colours and images"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "header_template", Type: "string", MaxLength: MaxTemplateBytes,
		Description: "HTML of each page's header (Chromium's classes date, title, url, pageNumber, totalPages)"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "footer_template", Type: "string", MaxLength: MaxTemplateBytes,
		Description: "HTML of each page's footer (as header_template)"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "page_ranges", Type: "string", Description: `pages to print, such as "1-3,5" (default: all)`}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "prefer_css_page_size", Type: "boolean", Default: false, Description: "use the document's @page size over paper"}, Actions: pdfActions},
	{ActionOption: apitype.ActionOption{Name: "width", Type: "integer", Min: bound(16), Max: bound(MaxViewport),
		Description: "viewport width in CSS pixels (default 1280)"}, Actions: shotActions},
	{ActionOption: apitype.ActionOption{Name: "height", Type: "integer", Min: bound(16), Max: bound(MaxViewport),
		Description: "viewport height in CSS pixels (default 800 for PNG, 720 for PPTX)"}, Actions: shotActions},
	{ActionOption: apitype.ActionOption{Name: "device_scale_factor", Type: "number", Min: bound(1), Max: bound(4),
		Description: "device pixels per CSS pixel (default 1 for PNG, 2 for PPTX)"}, Actions: shotActions},
	{ActionOption: apitype.ActionOption{Name: "full_page", Type: "boolean", Default: false, Description: "capture the whole page, not only the viewport"}, Actions: []string{HTMLPNG}},
	{ActionOption: apitype.ActionOption{Name: "slide_selector", Type: "string", Default: "section", MaxLength: 1024,
		Description: `one slide per element matching this CSS selector; "page" for one per viewport-sized page`}, Actions: []string{HTMLPPTX}},
	{ActionOption: apitype.ActionOption{Name: "notes_selector", Type: "string", Default: "aside.notes", MaxLength: 1024,
		Description: "the element in each slide whose text becomes its speaker notes"}, Actions: []string{HTMLPPTX}},
	{ActionOption: apitype.ActionOption{Name: "wait_for_selector", Type: "string", MaxLength: 1024,
		Description: "wait until an element matches this CSS selector before rendering"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "wait_network_idle", Type: "boolean", Default: false,
		Description: "wait until the page has made no request for 500 ms before rendering"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "wait_delay_ms", Type: "integer", Default: 0, Min: bound(0), Max: bound(MaxWaitDelayMS),
		Description: "wait this long after loading (and the other waits) before rendering"}, Actions: htmlActions},
	{ActionOption: apitype.ActionOption{Name: "main", Type: "string", MaxLength: 255,
		Description: "the input to render when there are several (default: the action's main name, else the only input of its kinds)"}, Actions: allActions},
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
	for _, base := range allActions {
		out[base] = makeSchema(base)
	}
	return out
})

func makeSchema(base string) json.RawMessage {
	props := map[string]any{}
	for _, o := range OptionSpecs(base) {
		p := map[string]any{"type": o.Type, "description": o.Description}
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
