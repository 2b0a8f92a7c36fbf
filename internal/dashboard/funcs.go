package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/apitype"
)

// funcs are the templates' helpers. None returns template.HTML: what a
// template prints is escaped.
var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"resources": func(r *apitype.Resources) string {
		if r == nil {
			return "default"
		}
		var parts []string
		if r.CPUs > 0 {
			parts = append(parts, fmt.Sprintf("%g CPU", r.CPUs))
		}
		if r.MemoryMB > 0 {
			parts = append(parts, fmt.Sprintf("%d MB", r.MemoryMB))
		}
		if r.DiskMB > 0 {
			parts = append(parts, fmt.Sprintf("%d MB disk", r.DiskMB))
		}
		if len(parts) == 0 {
			return "default"
		}
		return strings.Join(parts, ", ")
	},
	"size": func(n int64) string {
		switch {
		case n >= 1<<30:
			return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"exit": func(c *int) string {
		if c == nil {
			return ""
		}
		return fmt.Sprint(*c)
	},
}
