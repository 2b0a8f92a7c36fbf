package openapi

import "time"

// gotenbergHealth is the body of GET /health, as Gotenberg's.
type gotenbergHealth struct {
	Status  string `json:"status"`
	Details map[string]struct {
		Status    string    `json:"status"`
		Timestamp time.Time `json:"timestamp"`
		Error     string    `json:"error,omitempty"`
	} `json:"details"`
}

// gotenbergOperations describes the Gotenberg-compatible routes
// (httpapi/gotenberg.go; docs/jobs.md).
func gotenbergOperations() map[string]op {
	headers := []param{
		qString("Gotenberg-Output-Filename", "The output's name, without its extension (default: the job's ID)."),
		qString("Gotenberg-Trace", "A trace ID, answered in the same header (one is made when absent)."),
	}
	form := func(desc string) *body {
		return &body{desc: desc, content: []media{{typ: "multipart/form-data", schema: &Schema{Type: "object",
			Description: desc, AdditionalProperties: &Schema{}}}}}
	}
	file := func(desc string, types ...string) []result {
		r := rawOut(200, desc+" Several outputs come as a zip archive (application/zip). Errors are plain text, as Gotenberg's.",
			append(types, "application/zip")...)
		r.headers = map[string]string{"Gotenberg-Trace": "The request's trace ID.", "Berth-Job-Id": "The jobs' IDs, comma-separated."}
		return []result{r}
	}
	const auth = " The key comes as a Bearer token or as the Basic-auth password (any user name)."
	return map[string]op{
		"GET /health": {id: "gotenbergHealth", summary: "Gotenberg-shaped health: chromium, libreoffice and pdfengines",
			desc: "200 with status up when jobs of each module would be accepted, else 503 with status down.",
			ok:   []result{jsonOut[gotenbergHealth](200, "")}},
		"POST /forms/chromium/convert/html": {id: "gotenbergConvertHTML", summary: "Gotenberg: HTML to PDF (html-pdf)",
			desc: "Gotenberg 8's fields: files (index.html, assets, header.html, footer.html), paperWidth, paperHeight, " +
				"margins, preferCssPageSize, printBackground, landscape, scale, nativePageRanges, waitDelay, waitForSelector, waitForExpression." + auth,
			headers: headers, body: form("Gotenberg's form."), ok: file("The PDF.", "application/pdf")},
		"POST /forms/chromium/convert/markdown": {id: "gotenbergConvertMarkdown", summary: "Gotenberg: Markdown to PDF (html-pdf)",
			desc:    `index.html with {{ toHTML "file.md" }} and the .md files, with the HTML route's fields.` + auth,
			headers: headers, body: form("Gotenberg's form."), ok: file("The PDF.", "application/pdf")},
		"POST /forms/chromium/convert/url": {id: "gotenbergConvertURL", summary: "Gotenberg: URL to PDF (refused: 400)",
			desc:    "Job sandboxes have no network, so URL conversion is refused with 400 (Gotenberg's bad-field answer for url)." + auth,
			headers: headers, body: form("Gotenberg's form."), ok: file("Never: the route answers 400.", "application/pdf")},
		"POST /forms/chromium/screenshot/html": {id: "gotenbergScreenshotHTML", summary: "Gotenberg: HTML to a PNG screenshot (html-png)",
			desc:    "files (index.html and assets), width, height, clip, format (png), quality, waitDelay, waitForSelector." + auth,
			headers: headers, body: form("Gotenberg's form."), ok: file("The PNG.", "image/png")},
		"POST /forms/chromium/screenshot/markdown": {id: "gotenbergScreenshotMarkdown", summary: "Gotenberg: Markdown to a PNG screenshot (html-png)",
			desc:    `index.html with {{ toHTML "file.md" }} and the .md files, with the HTML screenshot's fields.` + auth,
			headers: headers, body: form("Gotenberg's form."), ok: file("The PNG.", "image/png")},
		"POST /forms/chromium/screenshot/url": {id: "gotenbergScreenshotURL", summary: "Gotenberg: URL screenshot (refused: 400)",
			desc:    "Job sandboxes have no network, so URL screenshots are refused with 400 (Gotenberg's bad-field answer for url)." + auth,
			headers: headers, body: form("Gotenberg's form."), ok: file("Never: the route answers 400.", "image/png")},
		"POST /forms/libreoffice/convert": {id: "gotenbergLibreOffice", summary: "Gotenberg: office documents to PDF (office-pdf, one job each)",
			desc: "files, landscape, nativePageRanges, exportFormFields, singlePageSheets, pdfa, pdfua, quality, " +
				"losslessImageCompression, reduceImageResolution, maxImageResolution, merge (one PDF, by pdf-merge)." + auth,
			headers: headers, body: form("Gotenberg's form."), ok: file("The PDF.", "application/pdf")},
		"POST /forms/pdfengines/merge": {id: "gotenbergMerge", summary: "Gotenberg: merge PDFs in name order (pdf-merge)",
			desc: "files: the PDFs." + auth, headers: headers, body: form("Gotenberg's form."), ok: file("The PDF.", "application/pdf")},
		"POST /forms/pdfengines/split": {id: "gotenbergSplit", summary: "Gotenberg: split PDFs (pdf-split)",
			desc: "files, splitMode (intervals or pages), splitSpan, splitUnify." + auth, headers: headers, body: form("Gotenberg's form."),
			ok: file("The part, when there is one.", "application/pdf")},
		"POST /forms/pdfengines/metadata/read": {id: "gotenbergMetadataRead", summary: "Gotenberg: read PDFs' metadata (pdf-metadata-read)",
			desc: "files: the PDFs." + auth, headers: headers, body: form("Gotenberg's form."),
			ok: []result{rawOut(200, "A JSON object: each file's tags by file name.", "application/json")}},
		"POST /forms/pdfengines/metadata/write": {id: "gotenbergMetadataWrite", summary: "Gotenberg: write PDFs' metadata (pdf-metadata-write)",
			desc: "files, metadata (a JSON object of exiftool tags)." + auth, headers: headers, body: form("Gotenberg's form."),
			ok: file("The PDF.", "application/pdf")},
	}
}
