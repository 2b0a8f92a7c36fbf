package testenv

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"io"
	"strings"
)

// DOCX returns a minimal Word document: each page's lines are its
// paragraphs, with a page break before every page after the first. Office
// tests make their inputs with it.
func DOCX(pages ...string) []byte {
	var body strings.Builder
	for i, page := range pages {
		for j, line := range strings.Split(page, "\n") {
			if line == "" {
				continue
			}
			body.WriteString("<w:p>")
			if i > 0 && j == 0 {
				body.WriteString(`<w:r><w:br w:type="page"/></w:r>`)
			}
			body.WriteString("<w:r><w:t>")
			_ = xml.EscapeText(&body, []byte(line))
			body.WriteString("</w:t></w:r></w:p>\n")
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, part := range []struct{ name, body string }{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>`},
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>
` + body.String() + `</w:body></w:document>`},
	} {
		w, _ := zw.Create(part.name) // writes to memory: no error
		_, _ = io.WriteString(w, part.body)
	}
	_ = zw.Close()
	return buf.Bytes()
}
