package httpapi

import (
	"archive/zip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/wire"
)

// The Gotenberg-compatible routes (docs/jobs.md, "Gotenberg-compatible
// routes"): Gotenberg 8's multipart fields, defaults, headers and
// plain-text errors, each conversion run as Berth jobs.

// Gotenberg's headers.
const (
	gotenbergTrace    = "Gotenberg-Trace"
	gotenbergFilename = "Gotenberg-Output-Filename"
)

// gotenbergRoute is what a /forms/ route does.
type gotenbergRoute int

const (
	gotChromiumHTML gotenbergRoute = iota
	gotChromiumMarkdown
	gotChromiumURL
	gotScreenshotHTML
	gotScreenshotMarkdown
	gotScreenshotURL
	gotLibreOffice
	gotMerge
	gotSplit
	gotMetadataRead
	gotMetadataWrite
)

// isGotenbergPath says whether path is one of the Gotenberg-compatible
// routes, which also take the key as a Basic-auth password.
func isGotenbergPath(path string) bool { return strings.HasPrefix(path, "/forms/") }

// gotenbergAuthorization returns r's Authorization header, with a Basic
// credential turned into a Bearer one: Gotenberg clients send the key as
// the Basic-auth password (any user name). Only the /forms/ routes call
// it.
func gotenbergAuthorization(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return h
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return h
	}
	_, password, ok := strings.Cut(string(b), ":")
	if !ok || password == "" {
		return h
	}
	return "Bearer " + password
}

// gotenbergError is an answer as Gotenberg gives it: a status and a
// plain-text body.
type gotenbergError struct {
	status int
	msg    string
	cause  error // Berth's error, for the Berth-Error header and the log
}

func (e *gotenbergError) Error() string { return e.msg }

// invalidForm is Gotenberg's 400 for bad form data.
func invalidForm(problems ...string) *gotenbergError {
	return &gotenbergError{status: http.StatusBadRequest, msg: "Invalid form data: " + strings.Join(problems, "; ")}
}

// fieldInvalid is one problem in Gotenberg's words.
func fieldInvalid(field, got string, why any) string {
	return fmt.Sprintf("form field '%s' is invalid (got '%s', resulting to %v)", field, got, why)
}

// fieldUnsupported is a Gotenberg field Berth does not do, given a value
// other than its default.
func fieldUnsupported(field, got, why string) string {
	return fmt.Sprintf("form field '%s' is invalid (got '%s', resulting to Berth does not support it: %s)", field, got, why)
}

// gotFile is one uploaded file.
type gotFile struct {
	name string
	ref  apitype.FileRef
}

// gotForm is a Gotenberg request's form, files stored in the blob store.
type gotForm struct {
	fields   map[string]string
	files    []gotFile
	problems []string
}

func (f *gotForm) has(name string) bool { _, ok := f.fields[name]; return ok }

func (f *gotForm) bool(name string, def bool) bool {
	v, ok := f.fields[name]
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		f.problems = append(f.problems, fieldInvalid(name, v, err))
		return def
	}
	return b
}

func (f *gotForm) float(name string, def float64) float64 {
	v, ok := f.fields[name]
	if !ok || v == "" {
		return def
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		f.problems = append(f.problems, fieldInvalid(name, v, err))
		return def
	}
	return x
}

func (f *gotForm) int(name string, def int) int {
	v, ok := f.fields[name]
	if !ok || v == "" {
		return def
	}
	x, err := strconv.Atoi(v)
	if err != nil {
		f.problems = append(f.problems, fieldInvalid(name, v, err))
		return def
	}
	return x
}

// inches reads a length as Gotenberg does: a number in inches, or with a
// unit (pt, px, in, mm, cm, pc).
func (f *gotForm) inches(name string, def float64) float64 {
	v, ok := f.fields[name]
	if !ok || v == "" {
		return def
	}
	units := []struct {
		suffix string
		per    float64
	}{{"pt", 72}, {"px", 96}, {"in", 1}, {"mm", 25.4}, {"cm", 2.54}, {"pc", 6}}
	num, per := strings.TrimSpace(v), 1.0
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, per = strings.TrimSpace(n), u.per
			break
		}
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil {
		f.problems = append(f.problems, fieldInvalid(name, v, err))
		return def
	}
	return x / per
}

// unsupported refuses a field Berth does not do unless it has its
// default value (or one of the values that mean the same).
func (f *gotForm) unsupported(name, why string, defaults ...string) {
	v, ok := f.fields[name]
	if !ok || v == "" || slices.Contains(defaults, strings.ToLower(v)) {
		return
	}
	f.problems = append(f.problems, fieldUnsupported(name, v, why))
}

// file returns the uploaded file called name (in any case), if any.
func (f *gotForm) file(name string) (gotFile, bool) {
	for _, g := range f.files {
		if strings.EqualFold(g.name, name) {
			return g, true
		}
	}
	return gotFile{}, false
}

// withExt returns the files with one of exts, in name order.
func (f *gotForm) withExt(exts ...string) []gotFile {
	var out []gotFile
	for _, g := range f.files {
		if slices.Contains(exts, strings.ToLower(path.Ext(g.name))) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b gotFile) int { return strings.Compare(a.name, b.name) })
	return out
}

// readGotForm reads a multipart form, storing each file as it streams in.
func (s *Server) readGotForm(r *http.Request) (*gotForm, error) {
	f := &gotForm{fields: map[string]string{}}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, &gotenbergError{status: http.StatusBadRequest, msg: "Invalid form data: the body is not a multipart form", cause: err}
	}
	var total int64
	fieldBytes := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &gotenbergError{status: http.StatusBadRequest, msg: "Invalid form data: reading the multipart form failed", cause: err}
		}
		if name := part.FileName(); name != "" {
			if err := jobspec.CheckName(name); err != nil || strings.Contains(name, "/") {
				part.Close()
				return nil, invalidForm(fmt.Sprintf("form file '%s' is invalid: a file name is 1-128 letters, digits, '.', '_', '-' or ' '", name))
			}
			ref, err := s.putPart(r, part, name, &total)
			if err != nil {
				return nil, err
			}
			f.files = slices.DeleteFunc(f.files, func(g gotFile) bool { return g.name == name })
			f.files = append(f.files, gotFile{name: name, ref: ref})
			continue
		}
		b, err := io.ReadAll(io.LimitReader(part, 1<<20+1))
		part.Close()
		if err != nil {
			return nil, &gotenbergError{status: http.StatusBadRequest, msg: "Invalid form data: reading the multipart form failed", cause: err}
		}
		fieldBytes += len(b)
		if len(b) > 1<<20 || fieldBytes > 8<<20 {
			return nil, invalidForm(fmt.Sprintf("form field '%s' is more than 1 MiB, or the fields more than 8 MiB", part.FormName()))
		}
		f.fields[part.FormName()] = string(b)
	}
	return f, nil
}

// gotJob is one Berth job a Gotenberg request runs.
type gotJob struct {
	action  string
	inputs  []gotFile
	options map[string]any
}

// handleGotenberg serves one of the /forms/ routes.
func (s *Server) handleGotenberg(route gotenbergRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trace := r.Header.Get(gotenbergTrace)
		if trace == "" || len(trace) > 256 {
			var b [16]byte
			_, _ = rand.Read(b[:])
			trace = hex.EncodeToString(b[:])
		}
		w.Header().Set(gotenbergTrace, trace)
		if err := s.serveGotenberg(w, r, route); err != nil {
			s.gotenbergFail(w, r, trace, err)
		}
	})
}

func (s *Server) serveGotenberg(w http.ResponseWriter, r *http.Request, route gotenbergRoute) error {
	if s.cfg.Jobs == nil {
		return errcode.WorkerUnavailable.New("sandbox jobs are not enabled on this daemon")
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		return &gotenbergError{status: http.StatusBadRequest, msg: "Invalid form data: the body must be multipart/form-data"}
	}
	f, err := s.readGotForm(r)
	if err != nil {
		return err
	}
	var plan []gotJob
	ext := ".pdf"
	switch route {
	case gotChromiumHTML, gotChromiumMarkdown, gotScreenshotHTML, gotScreenshotMarkdown, gotChromiumURL, gotScreenshotURL:
		j, err := s.chromiumJob(r.Context(), f, route)
		if err != nil {
			return err
		}
		plan = append(plan, j)
		if route == gotScreenshotHTML || route == gotScreenshotMarkdown || route == gotScreenshotURL {
			ext = ".png"
		}
	case gotLibreOffice:
		plan = libreOfficeJobs(f)
	case gotMerge, gotSplit, gotMetadataRead, gotMetadataWrite:
		plan = pdfEngineJobs(f, route)
		if route == gotMetadataRead {
			ext = ".json"
		}
	}
	if len(f.problems) > 0 {
		return invalidForm(f.problems...)
	}
	outs, ids, err := s.runGotJobs(r, plan)
	if err != nil {
		return err
	}
	if route == gotLibreOffice && f.bool("merge", false) && len(outs) > 1 {
		merged := gotJob{action: jobspec.PDFMerge}
		for i, o := range outs {
			// Numbered in the inputs' order, which is the merge's.
			merged.inputs = append(merged.inputs, gotFile{name: fmt.Sprintf("%04d_%s", i, o.Name), ref: o})
		}
		if outs, ids, err = s.runGotJobs(r, []gotJob{merged}); err != nil {
			return err
		}
	}
	w.Header().Set("Berth-Job-Id", strings.Join(ids, ","))
	base := gotenbergName(r.Header.Get(gotenbergFilename), ids[len(ids)-1])
	switch {
	case route == gotMetadataRead:
		s.serveBlob(w, r, outs[0], "")
	case len(outs) == 1:
		s.serveBlob(w, r, outs[0], base+ext)
	default:
		s.serveZip(w, r, outs, base+".zip")
	}
	return nil
}

// gotenbergName is the output's name without its extension: the
// Gotenberg-Output-Filename header's base name, else the job's ID.
func gotenbergName(header, jobID string) string {
	name := strings.TrimSpace(path.Base(strings.ReplaceAll(header, "\\", "/")))
	if name == "." || name == "/" || name == "" {
		return jobID
	}
	return name
}

// chromiumJob maps the Chromium routes' fields onto html-pdf or html-png,
// or url-pdf or url-png for the url routes.
func (s *Server) chromiumJob(ctx context.Context, f *gotForm, route gotenbergRoute) (gotJob, error) {
	shot := route == gotScreenshotHTML || route == gotScreenshotMarkdown || route == gotScreenshotURL
	markdown := route == gotChromiumMarkdown || route == gotScreenshotMarkdown
	web := route == gotChromiumURL || route == gotScreenshotURL
	j := gotJob{action: jobspec.HTMLPDF, options: map[string]any{}}
	switch {
	case web && shot:
		j.action = jobspec.URLPNG
	case web:
		j.action = jobspec.URLPDF
	case shot:
		j.action = jobspec.HTMLPNG
	}
	if web {
		u, ok := f.fields["url"]
		if !ok || u == "" {
			return j, invalidForm("form field 'url' is required")
		}
		if why := jobspec.CheckURL(u); why != "" {
			return j, invalidForm(fieldInvalid("url", u, why))
		}
		j.options["url"] = u
		if v, ok := f.fields["failOnHttpStatusCodes"]; ok && v != "" {
			var codes []int
			if err := json.Unmarshal([]byte(v), &codes); err != nil {
				f.problems = append(f.problems, fieldInvalid("failOnHttpStatusCodes", v, "unmarshal failOnHttpStatusCodes: "+err.Error()))
			} else {
				if codes == nil {
					codes = []int{}
				}
				j.options["fail_on_http_status_codes"] = codes
			}
		}
	} else if _, ok := f.file("index.html"); !ok {
		return j, invalidForm("form file 'index.html' is required")
	}
	if markdown {
		if len(f.withExt(".md")) == 0 {
			return j, invalidForm("no form file found for extensions: [.md]")
		}
		j.options["markdown_template"] = true
	}
	for _, g := range f.files {
		n := strings.ToLower(g.name)
		if web || !shot && (n == "header.html" || n == "footer.html") {
			continue
		}
		if n == "index.html" {
			g.name = "index.html"
		}
		j.inputs = append(j.inputs, g)
	}
	if !web {
		j.options["main"] = "index.html"
	}

	// Waits, both kinds.
	if v, ok := f.fields["waitDelay"]; ok && v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			f.problems = append(f.problems, fieldInvalid("waitDelay", v, err))
		case d < 0 || d > jobspec.MaxWaitDelayMS*time.Millisecond:
			f.problems = append(f.problems, fieldInvalid("waitDelay", v, fmt.Sprintf("Berth waits at most %s", jobspec.MaxWaitDelayMS*time.Millisecond)))
		case d > 0:
			j.options["wait_delay_ms"] = d.Milliseconds()
		}
	}
	if v := f.fields["waitForSelector"]; v != "" {
		j.options["wait_for_selector"] = v
	}
	if !f.bool("skipNetworkIdleEvent", true) {
		j.options["wait_network_idle"] = true
	}
	if v := f.fields["waitForExpression"]; v != "" {
		j.options["wait_for_expression"] = v
	}
	// Chromium's headless shell paints its default white background
	// whatever Emulation.setDefaultBackgroundColorOverride says, and
	// takes no --default-background-color beside its DevTools pipe.
	f.unsupported("omitBackground", "pages keep Chromium's white background", "false")
	if v := f.fields["userAgent"]; v != "" {
		j.options["user_agent"] = v
	}
	switch v := f.fields["emulatedMediaType"]; v {
	case "":
	case "print", "screen":
		j.options["emulated_media_type"] = v
	default:
		f.problems = append(f.problems, fieldInvalid("emulatedMediaType", v, "wrong value, expected either 'screen', 'print' or empty"))
	}
	if v := f.fields["emulatedMediaFeatures"]; v != "" {
		var features []jobspec.MediaFeature
		if err := json.Unmarshal([]byte(v), &features); err != nil {
			f.problems = append(f.problems, fieldInvalid("emulatedMediaFeatures", v, "unmarshal emulatedMediaFeatures: "+err.Error()))
		} else if len(features) > 0 {
			j.options["emulated_media_features"] = features
		}
	}
	f.unsupported("cookies", "not yet", "[]")
	f.unsupported("extraHttpHeaders", "not yet", "{}")
	f.unsupported("failOnResourceHttpStatusCodes", "not yet", "[]")
	f.unsupported("failOnResourceLoadingFailed", "not yet", "false")

	if shot {
		j.options["width"] = f.int("width", 800)
		j.options["height"] = f.int("height", 600)
		j.options["full_page"] = !f.bool("clip", false)
		switch v := strings.ToLower(f.fields["format"]); v {
		case "", "png":
		case "jpeg", "webp":
			f.problems = append(f.problems, fieldUnsupported("format", f.fields["format"], "Berth's screenshots are png"))
		default:
			f.problems = append(f.problems, fieldInvalid("format", f.fields["format"], "wrong value, expected either 'png', 'jpeg' or 'webp'"))
		}
		if q := f.int("quality", 100); q < 0 || q > 100 {
			f.problems = append(f.problems, fieldInvalid("quality", f.fields["quality"], "value is not between 0 and 100"))
		}
		return j, nil
	}

	j.options["paper_width"] = f.inches("paperWidth", 8.5)
	j.options["paper_height"] = f.inches("paperHeight", 11)
	for _, m := range []struct{ field, opt string }{{"marginTop", "margin_top"}, {"marginBottom", "margin_bottom"},
		{"marginLeft", "margin_left"}, {"marginRight", "margin_right"}} {
		j.options[m.opt] = f.inches(m.field, 0.39)
	}
	j.options["prefer_css_page_size"] = f.bool("preferCssPageSize", false)
	j.options["print_background"] = f.bool("printBackground", false)
	j.options["landscape"] = f.bool("landscape", false)
	if sc := f.float("scale", 1); sc != 1 {
		j.options["scale"] = sc
	}
	if v := strings.TrimSpace(f.fields["nativePageRanges"]); v != "" {
		j.options["page_ranges"] = v
	}
	for _, hf := range []struct{ file, opt string }{{"header.html", "header_template"}, {"footer.html", "footer_template"}} {
		g, ok := f.file(hf.file)
		if !ok {
			continue
		}
		b, err := s.readSmallBlob(ctx, g.ref, jobspec.MaxTemplateBytes)
		if err != nil {
			f.problems = append(f.problems, fmt.Sprintf("form file '%s' is invalid: %v", hf.file, err))
			continue
		}
		j.options[hf.opt] = b
	}
	f.unsupported("singlePage", "print to paper sizes", "false")
	f.unsupported("generateDocumentOutline", "not yet", "false")
	f.unsupported("generateTaggedPdf", "not yet", "false")
	f.unsupported("pdfa", "PDF/A comes from /forms/libreoffice/convert")
	f.unsupported("pdfua", "PDF/UA comes from /forms/libreoffice/convert", "false")
	f.unsupported("metadata", "write it with /forms/pdfengines/metadata/write", "{}")
	f.unsupported("split", "split with /forms/pdfengines/split")
	f.unsupported("splitMode", "split with /forms/pdfengines/split")
	return j, nil
}

// readSmallBlob returns a stored file of at most max bytes as text.
func (s *Server) readSmallBlob(ctx context.Context, ref apitype.FileRef, max int) (string, error) {
	if ref.Size > int64(max) {
		return "", fmt.Errorf("at most %d bytes", max)
	}
	rc, err := s.cfg.Jobs.Blobs().Open(ctx, ref.SHA256)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(max)))
	return string(b), err
}

// libreOfficeExts are the documents /forms/libreoffice/convert takes.
var libreOfficeExts = func() []string {
	a, _ := jobspec.Builtin(jobspec.OfficePDF)
	return a.Inputs.Extensions
}()

// libreOfficeJobs maps /forms/libreoffice/convert onto one office-pdf job
// per document; only the fields given become options, so the action's
// defaults are LibreOffice's, as Gotenberg's are.
func libreOfficeJobs(f *gotForm) []gotJob {
	docs := f.withExt(libreOfficeExts...)
	if len(docs) == 0 {
		f.problems = append(f.problems, fmt.Sprintf("no form file found for extensions: %v", libreOfficeExts))
		return nil
	}
	opts := map[string]any{}
	if f.has("landscape") {
		opts["landscape"] = f.bool("landscape", false)
	}
	if v := strings.TrimSpace(f.fields["nativePageRanges"]); v != "" {
		opts["page_ranges"] = v
	}
	for _, b := range []struct{ field, opt string }{{"exportFormFields", "export_form_fields"}, {"singlePageSheets", "single_page_sheets"},
		{"pdfua", "pdfua"}, {"losslessImageCompression", "lossless_image_compression"}, {"reduceImageResolution", "reduce_image_resolution"}} {
		if f.has(b.field) {
			opts[b.opt] = f.bool(b.field, false)
		}
	}
	if v := f.fields["pdfa"]; v != "" {
		opts["pdfa"] = v
	}
	for _, n := range []struct{ field, opt string }{{"quality", "quality"}, {"maxImageResolution", "max_image_resolution"}} {
		if f.has(n.field) && f.fields[n.field] != "" {
			opts[n.opt] = f.int(n.field, 0)
		}
	}
	f.bool("merge", false) // checked here, used after the conversions
	f.unsupported("password", "password-protected documents are not opened")
	f.unsupported("metadata", "write it with /forms/pdfengines/metadata/write", "{}")
	f.unsupported("splitMode", "split with /forms/pdfengines/split")
	f.unsupported("flatten", "not yet", "false")
	var out []gotJob
	for _, d := range docs {
		out = append(out, gotJob{action: jobspec.OfficePDF, inputs: []gotFile{d}, options: opts})
	}
	return out
}

// pdfEngineJobs maps the /forms/pdfengines/ routes onto the pdf actions:
// one job over every PDF.
func pdfEngineJobs(f *gotForm, route gotenbergRoute) []gotJob {
	pdfs := f.withExt(".pdf")
	j := gotJob{inputs: pdfs, options: map[string]any{}}
	switch route {
	case gotMerge:
		j.action = jobspec.PDFMerge
		f.unsupported("pdfa", "PDF/A comes from /forms/libreoffice/convert")
		f.unsupported("pdfua", "PDF/UA comes from /forms/libreoffice/convert", "false")
		f.unsupported("metadata", "write it with /forms/pdfengines/metadata/write", "{}")
		f.unsupported("flatten", "not yet", "false")
	case gotSplit:
		j.action = jobspec.PDFSplit
		mode, span := f.fields["splitMode"], strings.TrimSpace(f.fields["splitSpan"])
		switch mode {
		case "intervals", "pages":
			j.options["split_mode"] = mode
		case "":
			f.problems = append(f.problems, "form field 'splitMode' is required")
		default:
			f.problems = append(f.problems, fieldInvalid("splitMode", mode, "wrong value, expected either 'intervals' or 'pages'"))
		}
		if span == "" {
			f.problems = append(f.problems, "form field 'splitSpan' is required")
		}
		j.options["split_span"] = span
		if f.bool("splitUnify", false) {
			j.options["split_unify"] = true
		}
		f.unsupported("pdfa", "PDF/A comes from /forms/libreoffice/convert")
		f.unsupported("pdfua", "PDF/UA comes from /forms/libreoffice/convert", "false")
	case gotMetadataRead:
		j.action = jobspec.PDFMetadataRead
	case gotMetadataWrite:
		j.action = jobspec.PDFMetadataWrite
		v, ok := f.fields["metadata"]
		var m map[string]any
		switch err := json.Unmarshal([]byte(v), &m); {
		case !ok || v == "":
			f.problems = append(f.problems, "form field 'metadata' is required")
		case err != nil:
			f.problems = append(f.problems, fieldInvalid("metadata", v, "unmarshal metadata: "+err.Error()))
		default:
			j.options["metadata"] = m
		}
	}
	if len(pdfs) == 0 {
		f.problems = append(f.problems, "no form file found for extensions: [.pdf]")
	}
	return []gotJob{j}
}

// runGotJobs submits the jobs as the caller and waits for them all,
// returning their outputs in order and their IDs. When capacity is full
// and some of them are still running, the next waits for the oldest to
// end instead of failing. A failure cancels the others.
func (s *Server) runGotJobs(r *http.Request, plan []gotJob) ([]apitype.FileRef, []string, error) {
	who := s.jobPrincipal(r)
	ids := make([]string, len(plan))
	outs := make([][]apitype.FileRef, len(plan))
	var pending []int // submitted, not yet waited for
	cancelAll := func() {
		for _, i := range pending {
			_, _ = s.cfg.Jobs.Cancel(context.WithoutCancel(r.Context()), who, ids[i])
		}
	}
	wait := func(i int) error {
		j, err := s.cfg.Jobs.Wait(r.Context(), ids[i])
		switch {
		case err != nil:
			return err
		case j.State == apitype.JobSucceeded && len(j.Outputs) > 0:
			outs[i] = j.Outputs
			if p := plan[i]; p.action == jobspec.OfficePDF && len(p.inputs) == 1 && len(j.Outputs) == 1 {
				// Named for its document, as Gotenberg names them.
				o := j.Outputs[0]
				o.Name = strings.TrimSuffix(p.inputs[0].name, path.Ext(p.inputs[0].name)) + path.Ext(o.Name)
				outs[i] = []apitype.FileRef{o}
			}
			return nil
		case j.Error != nil:
			return &errcode.Error{Code: errcode.Code(j.Error.Code), Reason: j.Error.Reason,
				Message: fmt.Sprintf("job %s failed: %s", j.ID, j.Error.Message)}
		}
		return errcode.JobCanceled.New("job %s was %s", j.ID, j.State)
	}
	for i, p := range plan {
		req := apitype.CreateJobRequest{Action: p.action, Inputs: map[string]apitype.JobInput{}}
		for _, in := range p.inputs {
			req.Inputs[in.name] = apitype.JobInput{SHA256: in.ref.SHA256}
		}
		if len(p.options) > 0 {
			req.Options, _ = json.Marshal(p.options)
		}
		for {
			j, _, err := s.cfg.Jobs.Submit(r.Context(), who, req)
			if err == nil {
				ids[i] = j.ID
				pending = append(pending, i)
				break
			}
			if !errcode.Is(err, errcode.ResourceExhausted) || len(pending) == 0 {
				cancelAll()
				return nil, nil, err
			}
			if err := wait(pending[0]); err != nil {
				cancelAll()
				return nil, nil, err
			}
			pending = pending[1:]
		}
	}
	for len(pending) > 0 {
		if err := wait(pending[0]); err != nil {
			cancelAll()
			return nil, nil, err
		}
		pending = pending[1:]
	}
	var all []apitype.FileRef
	for _, o := range outs {
		all = append(all, o...)
	}
	return all, ids, nil
}

// serveZip answers with the outputs in a zip archive called name, as
// Gotenberg answers several files.
func (s *Server) serveZip(w http.ResponseWriter, r *http.Request, outs []apitype.FileRef, name string) {
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	zw := zip.NewWriter(w)
	seen := map[string]bool{}
	for _, o := range outs {
		n := o.Name
		for i := 1; seen[n]; i++ {
			n = fmt.Sprintf("%s_%d%s", strings.TrimSuffix(o.Name, path.Ext(o.Name)), i, path.Ext(o.Name))
		}
		seen[n] = true
		if err := s.zipBlob(r.Context(), zw, o, n); err != nil {
			// The status is sent: all that is left is to cut the archive short.
			s.log.WarnContext(r.Context(), "writing a Gotenberg zip answer failed", "request_id", requestID(r), "err", err)
			return
		}
	}
	_ = zw.Close()
}

func (s *Server) zipBlob(ctx context.Context, zw *zip.Writer, ref apitype.FileRef, name string) error {
	rc, err := s.cfg.Jobs.Blobs().Open(ctx, ref.SHA256)
	if err != nil {
		return err
	}
	defer rc.Close()
	fw, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Now()})
	if err != nil {
		return err
	}
	_, err = io.Copy(fw, rc)
	return err
}

// gotenbergFail answers err as Gotenberg would: its status and a plain
// text body; Berth's reason and message go in the Berth-Error header.
func (s *Server) gotenbergFail(w http.ResponseWriter, r *http.Request, trace string, err error) {
	var ge *gotenbergError
	if !errors.As(err, &ge) {
		ge = &gotenbergError{cause: err}
		switch code := errcode.CodeOf(err); code {
		case errcode.Invalid, errcode.Unprocessable:
			// A job's bad input or options: Gotenberg's 400 with the reason.
			ge.status, ge.msg = http.StatusBadRequest, "Invalid form data: "+problemsText(err)
		case errcode.ResourceExhausted, errcode.Unavailable, errcode.DeadlineExceeded, errcode.NotFound:
			ge.status = http.StatusServiceUnavailable
		case errcode.PayloadTooLarge:
			ge.status = http.StatusRequestEntityTooLarge
		case errcode.Canceled:
			ge.status = http.StatusServiceUnavailable
		default:
			ge.status = wire.Status(code)
		}
		if ge.msg == "" {
			ge.msg = http.StatusText(ge.status)
		}
	}
	switch errcode.ReasonOf(err) {
	case "url_status":
		// Gotenberg's answer to a page whose status it fails on.
		ge.status, ge.msg = http.StatusConflict, "Invalid HTTP status code from the main page: "+errcode.MessageOf(err)
	case "url_blocked":
		ge.status, ge.msg = http.StatusForbidden, "Forbidden: "+errcode.MessageOf(err)
	case "url_unreachable":
		ge.status, ge.msg = http.StatusBadRequest, errcode.MessageOf(err)
	}
	noteReason(r, cmpErr(ge.cause, err))
	if ge.cause != nil {
		w.Header().Set("Berth-Error", headerSafe(errcode.ReasonOf(ge.cause)+": "+errcode.MessageOf(ge.cause)))
	}
	if ge.status >= 500 {
		s.log.WarnContext(r.Context(), "Gotenberg route failed", "request_id", requestID(r), "trace", trace,
			"status", ge.status, "err", cmpErr(ge.cause, err))
	}
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(ge.status)
	_, _ = io.WriteString(w, ge.msg)
}

// problemsText is an invalid request's problems, "field: why; ...", or
// its message when it names none.
func problemsText(err error) string {
	var e *errcode.Error
	if !errors.As(err, &e) || len(e.Problems) == 0 {
		return errcode.MessageOf(err)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e.Problems)) {
		parts = append(parts, k+": "+e.Problems[k])
	}
	return strings.Join(parts, "; ")
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// headerSafe keeps a header value to one printable line.
func headerSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 512 {
		s = s[:512]
	}
	return s
}

// gotenbergHealth is Gotenberg's health answer.
type gotenbergHealth struct {
	Status  string                           `json:"status"`
	Details map[string]gotenbergHealthDetail `json:"details"`
}

type gotenbergHealthDetail struct {
	Status    string    `json:"status"`
	Timestamp time.Time `json:"timestamp"`
	Error     string    `json:"error,omitempty"`
}

// handleGotenbergHealth answers GET /health as Gotenberg does: "up" with
// 200 when Chromium and LibreOffice jobs would be accepted, else "down"
// with 503; details name each module.
func (s *Server) handleGotenbergHealth() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := gotenbergHealth{Status: "up", Details: map[string]gotenbergHealthDetail{}}
		now := time.Now().UTC()
		for module, action := range map[string]string{"chromium": jobspec.HTMLPDF, "libreoffice": jobspec.OfficePDF, "pdfengines": jobspec.PDFMerge} {
			d := gotenbergHealthDetail{Status: "up", Timestamp: now}
			if s.cfg.Jobs == nil {
				d.Status, d.Error = "down", "sandbox jobs are not enabled on this daemon"
			} else if ah := s.cfg.Jobs.Health(action); !ah.Available {
				d.Status, d.Error = "down", ah.Reason+": "+ah.Message
			}
			if d.Status != "up" {
				h.Status = "down"
			}
			h.Details[module] = d
		}
		status := http.StatusOK
		if h.Status != "up" {
			status = http.StatusServiceUnavailable
		}
		wire.Encode(w, status, h)
	})
}
