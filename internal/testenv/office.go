package testenv

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// zipOf returns a ZIP archive of parts, in order, each stored or deflated
// as OpenDocument wants: a first part named mimetype is stored.
func zipOf(parts ...[2]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range parts {
		h := &zip.FileHeader{Name: p[0], Method: zip.Deflate}
		if p[0] == "mimetype" {
			h.Method = zip.Store
		}
		w, _ := zw.CreateHeader(h) // writes to memory: no error
		_, _ = io.WriteString(w, p[1])
	}
	_ = zw.Close()
	return buf.Bytes()
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// odf returns an OpenDocument package of type mime with body as its
// office:body.
func odf(mime, body string) []byte {
	const ns = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ` +
		`xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" ` +
		`xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" ` +
		`xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"`
	return zipOf(
		[2]string{"mimetype", mime},
		[2]string{"META-INF/manifest.xml", `<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">
<manifest:file-entry manifest:full-path="/" manifest:media-type="` + mime + `"/>
<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>`},
		[2]string{"content.xml", `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content ` + ns + ` office:version="1.2">` + body + `</office:document-content>`},
	)
}

// ODT returns an OpenDocument text: each page's lines are its paragraphs,
// with a page break before every page after the first.
func ODT(pages ...string) []byte {
	var body strings.Builder
	body.WriteString(`<office:automatic-styles><style:style style:name="PB" style:family="paragraph">` +
		`<style:paragraph-properties fo:break-before="page"/></style:style></office:automatic-styles><office:body><office:text>`)
	for i, page := range pages {
		first := true
		for line := range strings.SplitSeq(page, "\n") {
			if line == "" {
				continue
			}
			style := ""
			if i > 0 && first {
				style = ` text:style-name="PB"`
			}
			first = false
			fmt.Fprintf(&body, "<text:p%s>%s</text:p>", style, esc(line))
		}
	}
	body.WriteString(`</office:text></office:body>`)
	return odf("application/vnd.oasis.opendocument.text", body.String())
}

// ODP returns an OpenDocument presentation of one slide per string, each
// a text box with that text.
func ODP(slides ...string) []byte {
	var body strings.Builder
	body.WriteString(`<office:body><office:presentation>`)
	for i, s := range slides {
		fmt.Fprintf(&body, `<draw:page draw:name="slide%d"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="4cm">`+
			`<draw:text-box><text:p>%s</text:p></draw:text-box></draw:frame></draw:page>`, i+1, esc(s))
	}
	body.WriteString(`</office:presentation></office:body>`)
	return odf("application/vnd.oasis.opendocument.presentation", body.String())
}

// XLSX returns an Office Open XML workbook of one sheet holding rows, as
// inline strings.
func XLSX(rows ...[]string) []byte {
	var data strings.Builder
	for i, row := range rows {
		fmt.Fprintf(&data, `<row r="%d">`, i+1)
		for j, cell := range row {
			fmt.Fprintf(&data, `<c r="%c%d" t="inlineStr"><is><t>%s</t></is></c>`, 'A'+j, i+1, esc(cell))
		}
		data.WriteString(`</row>`)
	}
	return zipOf(
		[2]string{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>
<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>
</Types>`},
		[2]string{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/>
</Relationships>`},
		[2]string{"xl/workbook.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">
<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		[2]string{"xl/_rels/workbook.xml.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>
</Relationships>`},
		[2]string{"xl/worksheets/sheet1.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` + data.String() + `</sheetData></worksheet>`},
	)
}

// PPTX returns an Office Open XML presentation of one slide per string,
// each a text box with that text (no master or theme: LibreOffice and
// PowerPoint's readers supply defaults).
func PPTX(slides ...string) []byte {
	const pml = `xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"`
	var types, ids, rels strings.Builder
	parts := [][2]string{}
	for i, s := range slides {
		n := i + 1
		fmt.Fprintf(&types, `<Override PartName="/ppt/slides/slide%d.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slide+xml"/>`, n)
		fmt.Fprintf(&ids, `<p:sldId id="%d" r:id="rId%d"/>`, 255+n, n)
		fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide%d.xml"/>`, n, n)
		parts = append(parts, [2]string{fmt.Sprintf("ppt/slides/slide%d.xml", n), `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:sld ` + pml + `><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>` +
			`<p:sp><p:nvSpPr><p:cNvPr id="2" name="Text"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr>` +
			`<p:spPr><a:xfrm><a:off x="914400" y="914400"/><a:ext cx="7315200" cy="1371600"/></a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr>` +
			`<p:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:rPr lang="en-US" sz="2800"/><a:t>` + esc(s) + `</a:t></a:r></a:p></p:txBody></p:sp>` +
			`</p:spTree></p:cSld></p:sld>`})
	}
	return zipOf(append([][2]string{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/>
` + types.String() + `</Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="ppt/presentation.xml"/>
</Relationships>`},
		{"ppt/presentation.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:presentation ` + pml + `><p:sldIdLst>` + ids.String() + `</p:sldIdLst><p:sldSz cx="9144000" cy="6858000"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>`},
		{"ppt/_rels/presentation.xml.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` + rels.String() + `</Relationships>`},
	}, parts...)...)
}
