package jobspec_test

import (
	"testing"

	"github.com/berthdev/berth/internal/jobspec"
)

// TestModeOption: html-pptx takes mode image or editable and refuses any
// other value; other actions refuse the option.
func TestModeOption(t *testing.T) {
	for _, tc := range []struct {
		base, mode, why string
	}{
		{jobspec.HTMLPPTX, "image", ""},
		{jobspec.HTMLPPTX, "editable", ""},
		{jobspec.HTMLPPTX, "Editable", `must be "image" or "editable"`},
		{jobspec.HTMLPNG, "editable", "is not an option of html-png"},
	} {
		o := jobspec.Options{Mode: tc.mode}
		if got := o.Validate(tc.base)["options.mode"]; got != tc.why {
			t.Errorf("%s mode %q: problem %q, want %q", tc.base, tc.mode, got, tc.why)
		}
	}
}
