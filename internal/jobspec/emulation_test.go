package jobspec_test

import (
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/jobspec"
)

// TestEmulationOptions: the HTML actions take a user agent, a media type
// and media features within their bounds, and refuse each past them with
// a reason naming the option; valid values are the controls.
func TestEmulationOptions(t *testing.T) {
	dark := []jobspec.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}
	many := make([]jobspec.MediaFeature, jobspec.MaxMediaFeatures+1)
	for i := range many {
		many[i] = dark[0]
	}
	for _, tc := range []struct {
		name  string
		base  string
		opts  jobspec.Options
		field string
		why   string // a part of the problem; "" for none
	}{
		{"agent", jobspec.HTMLPDF, jobspec.Options{UserAgent: "BerthTest/1.0 (like Gecko)"}, "user_agent", ""},
		{"agent with a newline", jobspec.HTMLPDF, jobspec.Options{UserAgent: "a\r\nX-Injected: 1"}, "user_agent", "without control characters"},
		{"agent too long", jobspec.URLPNG, jobspec.Options{UserAgent: strings.Repeat("a", jobspec.MaxUserAgentBytes+1)}, "user_agent", "at most 512 bytes"},
		{"screen", jobspec.HTMLPDF, jobspec.Options{EmulatedMediaType: "screen"}, "emulated_media_type", ""},
		{"tv", jobspec.HTMLPDF, jobspec.Options{EmulatedMediaType: "tv"}, "emulated_media_type", `must be "print" or "screen"`},
		{"dark", jobspec.HTMLPNG, jobspec.Options{EmulatedMediaFeatures: dark}, "emulated_media_features", ""},
		{"too many", jobspec.HTMLPNG, jobspec.Options{EmulatedMediaFeatures: many}, "emulated_media_features", "at most 16"},
		{"a script in a value", jobspec.HTMLPNG, jobspec.Options{EmulatedMediaFeatures: []jobspec.MediaFeature{{Name: "prefers-color-scheme", Value: "dark)}body{"}}},
			"emulated_media_features[0]", "CSS keywords"},
		{"an empty name", jobspec.HTMLPNG, jobspec.Options{EmulatedMediaFeatures: []jobspec.MediaFeature{{Value: "dark"}}},
			"emulated_media_features[0]", "CSS keywords"},
		{"agent on office", jobspec.OfficePDF, jobspec.Options{UserAgent: "x"}, "user_agent", "is not an option of office-pdf"},
	} {
		got := tc.opts.Validate(tc.base)["options."+tc.field]
		if tc.why == "" && got != "" || tc.why != "" && !strings.Contains(got, tc.why) {
			t.Errorf("%s: problem %q, want %q", tc.name, got, tc.why)
		}
	}
}
