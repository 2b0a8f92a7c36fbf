package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/berthdev/berth/internal/jobspec"
)

// pdfTools are the programs of the pdf profile: qpdf merges and splits,
// exiftool reads and writes metadata. Nothing is pre-started.
type pdfTools struct {
	qpdf, exiftool string
}

// findPDFTools finds qpdf and exiftool on PATH.
func findPDFTools() (pdfTools, error) {
	t := pdfTools{qpdf: findCommand("qpdf"), exiftool: findCommand("exiftool")}
	switch {
	case t.qpdf == "":
		return t, errors.New("no qpdf found: install qpdf")
	case t.exiftool == "":
		return t, errors.New("no exiftool found: install libimage-exiftool-perl")
	}
	return t, nil
}

// maxSplitOutputs bounds the files one pdf-split job writes.
const maxSplitOutputs = 2000

// metadataJSON is pdf-metadata-read's output.
const metadataJSON = "metadata.json"

// pdfInput is one PDF input: its name among the inputs and its path.
type pdfInput struct {
	name, path string
}

// engine does a pdf profile job on every PDF input.
func (t pdfTools) engine(ctx context.Context, j *job, in *os.Root, inDir, outDir string) (*jobspec.Result, error) {
	var inputs []pdfInput
	_ = fsWalk(in, ".", 0, func(name string) bool {
		if strings.EqualFold(path.Ext(name), ".pdf") {
			// Absolute paths: a name that starts with '-' is no option.
			inputs = append(inputs, pdfInput{name: name, path: filepath.Join(inDir, filepath.FromSlash(name))})
		}
		return true
	})
	if len(inputs) == 0 {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "no input to process: give one or more .pdf files")
	}
	// Alphanumeric order of the names, as Gotenberg merges.
	slices.SortFunc(inputs, func(a, b pdfInput) int { return strings.Compare(a.name, b.name) })
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fail(http.StatusServiceUnavailable, "render_failed", "the output directory cannot be made: %v", err)
	}
	for _, p := range inputs {
		if _, err := t.pages(ctx, p); err != nil {
			return nil, err
		}
	}
	var res jobspec.Result
	switch j.action {
	case jobspec.PDFMerge:
		args := []string{"--empty", "--pages"}
		for _, p := range inputs {
			args = append(args, p.path)
		}
		out, err := t.write(ctx, outDir, resultPDF, t.qpdf, append(args, "--")...)
		if err != nil {
			return nil, err
		}
		res.Outputs = append(res.Outputs, out)
	case jobspec.PDFSplit:
		for _, p := range inputs {
			outs, err := t.split(ctx, j.opts, p, outDir, len(res.Outputs))
			if err != nil {
				return nil, err
			}
			res.Outputs = append(res.Outputs, outs...)
		}
	case jobspec.PDFMetadataRead:
		all := map[string]json.RawMessage{}
		for _, p := range inputs {
			m, err := t.readMetadata(ctx, p)
			if err != nil {
				return nil, err
			}
			all[flatName(p.name)] = m
		}
		b, _ := json.Marshal(all)
		o, err := createOutput(outDir, metadataJSON)
		if err != nil {
			return nil, err
		}
		if _, err := o.Write(b); err != nil {
			o.abort()
			return nil, err
		}
		if err := o.commit(); err != nil {
			return nil, err
		}
		res.Outputs = append(res.Outputs, jobspec.Output{Name: metadataJSON, MIME: "application/json"})
	case jobspec.PDFMetadataWrite:
		args := []string{"-overwrite_original", "-q", "-m"}
		for _, k := range slices.Sorted(maps.Keys(j.opts.Metadata)) {
			vs, _ := jobspec.MetadataValues(j.opts.Metadata[k])
			if len(vs) == 0 {
				args = append(args, "-"+k+"=")
			}
			for _, v := range vs {
				args = append(args, "-"+k+"="+v)
			}
		}
		for _, p := range inputs {
			name := flatName(p.name)
			tmp := filepath.Join(outDir, "."+name+".tmp")
			if err := copyFile(p.path, tmp); err != nil {
				return nil, err
			}
			if err := t.tool(ctx, t.exiftool, append(slices.Clone(args), tmp)...); err != nil {
				_ = os.Remove(tmp)
				return nil, err
			}
			if err := os.Rename(tmp, filepath.Join(outDir, name)); err != nil {
				_ = os.Remove(tmp)
				return nil, err
			}
			res.Outputs = append(res.Outputs, jobspec.Output{Name: name, MIME: "application/pdf"})
		}
	default:
		return nil, fail(http.StatusUnprocessableEntity, "unknown_action", "action %q is not supported", j.action)
	}
	return &res, nil
}

// pages returns a PDF's page count; a PDF qpdf cannot read is the
// input's fault.
func (t pdfTools) pages(ctx context.Context, p pdfInput) (int, error) {
	out, err := exec.CommandContext(ctx, t.qpdf, "--show-npages", p.path).Output()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	n, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || perr != nil || n < 1 {
		return 0, fail(http.StatusUnprocessableEntity, "invalid_input", "%s is not a PDF qpdf can read", p.name)
	}
	return n, nil
}

// split writes p's parts, numbered from first, as split_mode says.
func (t pdfTools) split(ctx context.Context, o jobspec.Options, p pdfInput, outDir string, first int) ([]jobspec.Output, error) {
	n, err := t.pages(ctx, p)
	if err != nil {
		return nil, err
	}
	var parts []string // qpdf page ranges, one per output
	if o.SplitMode == "pages" {
		pages := expandRanges(o.SplitSpan, n)
		if len(pages) == 0 {
			return nil, fail(http.StatusUnprocessableEntity, "invalid_options", "options.split_span: %q names no page of %s (%d pages)", o.SplitSpan, p.name, n)
		}
		if o.SplitUnify {
			var b []string
			for _, pg := range pages {
				b = append(b, strconv.Itoa(pg))
			}
			parts = []string{strings.Join(b, ",")}
		} else {
			for _, pg := range pages {
				parts = append(parts, strconv.Itoa(pg))
			}
		}
	} else {
		span, _ := strconv.Atoi(o.SplitSpan)
		for a := 1; a <= n; a += span {
			parts = append(parts, fmt.Sprintf("%d-%d", a, min(a+span-1, n)))
		}
	}
	if first+len(parts) > maxSplitOutputs {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "splitting makes more than %d files", maxSplitOutputs)
	}
	stem := strings.TrimSuffix(flatName(p.name), path.Ext(p.name))
	var outs []jobspec.Output
	for i, r := range parts {
		name := fmt.Sprintf("%s_%d.pdf", stem, i)
		out, err := t.write(ctx, outDir, name, t.qpdf, "--empty", "--pages", p.path, r, "--")
		if err != nil {
			return nil, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// expandRanges returns the pages "1-3,5" names, at most n, in order and
// once each.
func expandRanges(spec string, n int) []int {
	seen := map[int]bool{}
	var out []int
	for r := range strings.SplitSeq(spec, ",") {
		a, b, isRange := strings.Cut(strings.TrimSpace(r), "-")
		lo, err1 := strconv.Atoi(strings.TrimSpace(a))
		hi := lo
		var err2 error
		if isRange {
			hi, err2 = strconv.Atoi(strings.TrimSpace(b))
		}
		if err1 != nil || err2 != nil {
			continue
		}
		for pg := max(lo, 1); pg <= min(hi, n); pg++ {
			if !seen[pg] {
				seen[pg] = true
				out = append(out, pg)
			}
		}
	}
	return out
}

// readMetadata returns exiftool's tags of p, without those of the file
// system (name, size, dates, permissions).
func (t pdfTools) readMetadata(ctx context.Context, p pdfInput) (json.RawMessage, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, t.exiftool, "-json", "-q", "-q", p.path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "reading the metadata of %s failed: %s", p.name, tailString(stderr.String(), 300))
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil || len(list) != 1 {
		return nil, fmt.Errorf("exiftool's answer for %s is not one JSON object", p.name)
	}
	for _, k := range []string{"SourceFile", "ExifToolVersion", "FileName", "Directory", "FileSize", "FileModifyDate",
		"FileAccessDate", "FileInodeChangeDate", "FilePermissions", "FileType", "FileTypeExtension", "MIMEType"} {
		delete(list[0], k)
	}
	b, err := json.Marshal(list[0])
	return b, err
}

// write runs prog with args and the output's temporary path last, then
// renames it into place: no half-written output under its name.
func (t pdfTools) write(ctx context.Context, outDir, name, prog string, args ...string) (jobspec.Output, error) {
	tmp := filepath.Join(outDir, "."+name+".tmp")
	if err := t.tool(ctx, prog, append(args, tmp)...); err != nil {
		_ = os.Remove(tmp)
		return jobspec.Output{}, err
	}
	if err := os.Rename(tmp, filepath.Join(outDir, name)); err != nil {
		_ = os.Remove(tmp)
		return jobspec.Output{}, err
	}
	return jobspec.Output{Name: name, MIME: "application/pdf"}, nil
}

// tool runs prog; its failure is the input's (qpdf's exit status 3 is a
// warning and succeeds).
func (t pdfTools) tool(ctx context.Context, prog string, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case prog == t.qpdf && errors.As(err, &exit) && exit.ExitCode() == 3:
		return nil
	case errors.As(err, &exit):
		return fail(http.StatusUnprocessableEntity, "invalid_input", "%s failed: %s", filepath.Base(prog), tailString(stderr.String(), 300))
	}
	return fmt.Errorf("running %s: %w", filepath.Base(prog), err)
}

// flatName is an input's name as one output name: directories joined
// with '_'.
func flatName(name string) string { return strings.ReplaceAll(name, "/", "_") }

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func tailString(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
