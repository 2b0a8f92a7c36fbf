package jobspec

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// MaxMetadataTags bounds pdf-metadata-write's tags.
const MaxMetadataTags = 64

// metadataTagRE is an exiftool tag name: letters and digits, as exiftool
// spells them, so a name cannot become another of its arguments.
var metadataTagRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{0,63}$`)

// validatePDFEngines adds the problems of the PDF engines' options.
func (o *Options) validatePDFEngines(base string, p map[string]string) {
	if o.Main != "" && slices.Contains(pdfEngineActions, base) {
		p["options.main"] = "is not an option of " + base
	}
	if base == PDFSplit {
		switch o.SplitMode {
		case "", "intervals":
			if n, err := strconv.Atoi(o.SplitSpan); err != nil || n < 1 {
				p["options.split_span"] = "intervals mode needs a page count of at least 1"
			}
			if o.SplitUnify {
				p["options.split_unify"] = "only with split_mode pages"
			}
		case "pages":
			if !pageRangesRE.MatchString(o.SplitSpan) {
				p["options.split_span"] = `pages mode needs page ranges such as "1-3,5"`
			}
		default:
			p["options.split_mode"] = "must be intervals or pages"
		}
	}
	if len(o.WaitForExpression) > 1024 {
		p["options.wait_for_expression"] = "at most 1024 bytes"
	}
	if len(o.SplitSpan) > 1024 {
		p["options.split_span"] = "at most 1024 bytes"
	}
	if base == PDFMetadataWrite {
		if len(o.Metadata) == 0 {
			p["options.metadata"] = "is required: the tags to write"
		}
		if len(o.Metadata) > MaxMetadataTags {
			p["options.metadata"] = fmt.Sprintf("at most %d tags", MaxMetadataTags)
		}
		for k, v := range o.Metadata {
			if !metadataTagRE.MatchString(k) {
				p["options.metadata"] = fmt.Sprintf("%q is not a tag name (letters and digits)", k)
				continue
			}
			if _, err := MetadataValues(v); err != nil {
				p["options.metadata"] = fmt.Sprintf("%s: %v", k, err)
			}
		}
	}
}

// MetadataValues returns a metadata value as exiftool's values: a string,
// number or boolean is one, a list of them is several (Keywords), null is
// none (the tag is removed).
func MetadataValues(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		if len(t) > 4096 {
			return nil, fmt.Errorf("at most 4096 bytes")
		}
		return []string{t}, nil
	case float64:
		return []string{strconv.FormatFloat(t, 'f', -1, 64)}, nil
	case bool:
		return []string{strconv.FormatBool(t)}, nil
	case []any:
		var out []string
		for _, e := range t {
			vs, err := MetadataValues(e)
			if err != nil {
				return nil, err
			}
			if _, nested := e.([]any); nested {
				return nil, fmt.Errorf("lists do not nest")
			}
			out = append(out, vs...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a string, number, boolean or a list of them")
}
