package jobspec_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/jobspec"
)

var bases = []string{jobspec.HTMLPDF, jobspec.MarkdownPDF, jobspec.HTMLPNG, jobspec.HTMLPPTX, jobspec.OfficePDF,
	jobspec.URLPDF, jobspec.URLPNG, jobspec.PDFMerge, jobspec.PDFSplit, jobspec.PDFMetadataRead, jobspec.PDFMetadataWrite}

// TestOptionSpecsMatchOptions: every field of Options is described once,
// with its JSON type, and each action takes exactly the options listed for
// it: Validate refuses a listed option for no action that lists it, and
// refuses it ("is not an option of") for every other. The control is the
// refusal itself, which shows the value reached Validate.
func TestOptionSpecsMatchOptions(t *testing.T) {
	specs := map[string]jobspec.OptionSpec{}
	for _, b := range bases {
		for _, o := range jobspec.OptionSpecs(b) {
			specs[o.Name] = o
		}
	}
	typ := reflect.TypeFor[jobspec.Options]()
	kinds := map[reflect.Kind]string{reflect.String: "string", reflect.Float64: "number", reflect.Int: "integer", reflect.Bool: "boolean", reflect.Map: "object",
		reflect.Slice: "array"}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		o, ok := specs[name]
		if !ok {
			t.Errorf("option %s (Options.%s) is not described in optionSpecs", name, f.Name)
			continue
		}
		k := f.Type.Kind()
		if k == reflect.Pointer {
			k = f.Type.Elem().Kind()
		}
		if kinds[k] != o.Type {
			t.Errorf("option %s is %s in Options, described as %s", name, kinds[k], o.Type)
		}
		delete(specs, name)
	}
	for name := range specs {
		t.Errorf("option %s is described but is no field of Options", name)
	}

	for _, b := range bases {
		takes := map[string]bool{}
		for _, o := range jobspec.OptionSpecs(b) {
			takes[o.Name] = true
		}
		for _, bb := range bases {
			for _, o := range jobspec.OptionSpecs(bb) {
				raw, _ := json.Marshal(map[string]any{o.Name: sample(o)})
				opts, err := jobspec.ParseOptions(raw)
				if err != nil {
					t.Fatalf("%s: %v", raw, err)
				}
				why := opts.Validate(b)["options."+o.Name]
				refused := strings.Contains(why, "is not an option of")
				if takes[o.Name] == refused {
					t.Errorf("%s with option %s = %q; listed for it: %v", b, o.Name, why, takes[o.Name])
				}
			}
		}
	}
}

// sample is a valid, non-default value of o.
func sample(o jobspec.OptionSpec) any {
	switch {
	case len(o.Enum) > 0:
		return o.Enum[1]
	case o.Type == "boolean":
		return true
	case o.Type == "object":
		return map[string]any{"Title": "x"}
	case o.Name == "emulated_media_features":
		return []jobspec.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}
	case o.Type == "array":
		return []int{404}
	case o.Name == "url":
		return "https://example.com/"
	case o.Type == "string" && o.Name == "page_ranges":
		return "1-2"
	case o.Type == "string":
		return "x"
	case o.Min != nil:
		return *o.Min + 1
	}
	return 1
}

// TestOptionsSchema: the schema of each action is an object of exactly the
// options it takes, refusing others.
func TestOptionsSchema(t *testing.T) {
	for _, b := range bases {
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Additional bool                       `json:"additionalProperties"`
		}
		if err := json.Unmarshal(jobspec.OptionsSchema(b), &s); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range jobspec.OptionSpecs(b) {
			names = append(names, o.Name)
		}
		got := slices.Sorted(func(yield func(string) bool) {
			for k := range s.Properties {
				if !yield(k) {
					return
				}
			}
		})
		slices.Sort(names)
		if s.Type != "object" || s.Additional || !slices.Equal(got, names) {
			t.Errorf("schema of %s = %s, properties %v; want an object of %v and no others", b, s.Type, got, names)
		}
	}
	// main, landscape, page_ranges and LibreOffice's eight PDF options.
	if n := len(jobspec.OptionSpecs(jobspec.OfficePDF)); n != 11 {
		t.Errorf("office-pdf takes %d options, want 11", n)
	}
}

// TestCheckURL: a URL action's page is http or https with a host, and
// never the job sandbox's own loopback, however it is spelled.
func TestCheckURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://example.com/a?b=c":    true,
		"http://www.test.example:8080": true,
		"http://198.51.100.10/":        true,
		"http://[2001:db8::1]/":        true,
		"http://127.1.2.3.example/":    true, // a name, resolved by the egress policy
		"":                             false,
		"file:///etc/passwd":           false,
		"javascript:alert(1)":          false,
		"ftp://example.com/":           false,
		"https://user:pw@example.com/": false,
		"http:///path":                 false,
		"http://localhost:7777/":       false,
		"http://LOCALHOST./":           false,
		"http://runner.localhost/":     false,
		"http://127.0.0.1:7777/":       false,
		"http://127.1/":                false,
		"http://2130706433/":           false,
		"http://0x7f.0.0.1/":           false,
		"http://0177.0.0.1/":           false,
		"http://0.0.0.0/":              false,
		"http://0/":                    false,
		"http://[::1]:7777/":           false,
		"http://[::ffff:127.0.0.1]/":   false,
		"http://[::]/":                 false,
		"https://" + strings.Repeat("a", jobspec.MaxURLBytes) + ".example/": false,
	} {
		why := jobspec.CheckURL(raw)
		if (why == "") != ok {
			t.Errorf("CheckURL(%.60q) = %q, want ok=%v", raw, why, ok)
		}
	}
}
