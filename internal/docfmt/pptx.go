package docfmt

import (
	"archive/zip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/berthdev/berth/internal/errcode"
)

// maxPPTXXML bounds the XML parts PPTX reads.
const maxPPTXXML = 16 << 20

// Namespaces of relationship IDs: transitional and strict OOXML.
const (
	nsRelTransitional = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	nsRelStrict       = "http://purl.oclc.org/ooxml/officeDocument/relationships"
)

// presentationTypes are the content types of a presentation's main part:
// presentations, shows and templates, with and without macros.
var presentationTypes = map[string]bool{
	"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": true,
	"application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml":    true,
	"application/vnd.openxmlformats-officedocument.presentationml.template.main+xml":     true,
	"application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml":                   true,
	"application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml":                      true,
	"application/vnd.ms-powerpoint.template.macroEnabled.main+xml":                       true,
}

func pptxError(format string, args ...any) *errcode.Error {
	return errcode.PPTXInvalid.New(format, args...)
}

// PPTX checks that r (size bytes) is a presentation package and returns its
// slide count: the slides of presentation.xml's sldIdLst. The zip must hold
// [Content_Types].xml and ppt/presentation.xml with a presentation content
// type, and every listed slide must resolve through
// ppt/_rels/presentation.xml.rels to a slide relationship whose target is in
// the zip; a dangling slide is an error, not skipped, because PowerPoint
// refuses such a file. Part names compare case-insensitively, as in OPC.
// It returns an [errcode] error for a file that fails a check ("pptx_invalid")
// and a plain wrapped one if reading r fails.
func PPTX(r io.ReaderAt, size int64) (slides int, err error) {
	src := &recordingReaderAt{r: r}
	defer func() {
		// Whatever went wrong, a failure to read r comes first.
		if src.err != nil {
			slides, err = 0, fmt.Errorf("reading PPTX: %w", src.err)
		}
	}()
	zr, err := zip.NewReader(src, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return 0, pptxError("not a PPTX: not a zip file: %v", err)
	}
	parts := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		name := strings.ToLower(f.Name)
		if _, dup := parts[name]; dup {
			return 0, pptxError("PPTX has two entries named %q", f.Name)
		}
		parts[name] = f
	}

	ctFile, ok := parts["[content_types].xml"]
	if !ok {
		return 0, pptxError("not a PPTX: no [Content_Types].xml")
	}
	var ct struct {
		Defaults []struct {
			Ext string `xml:"Extension,attr"`
			CT  string `xml:"ContentType,attr"`
		} `xml:"Default"`
		Overrides []struct {
			Part string `xml:"PartName,attr"`
			CT   string `xml:"ContentType,attr"`
		} `xml:"Override"`
	}
	if err := readXML(ctFile, &ct); err != nil {
		return 0, err
	}
	contentType := func(part string) string {
		for _, o := range ct.Overrides {
			if strings.EqualFold(strings.TrimPrefix(o.Part, "/"), part) {
				return o.CT
			}
		}
		ext := strings.TrimPrefix(path.Ext(part), ".")
		for _, d := range ct.Defaults {
			if strings.EqualFold(d.Ext, ext) {
				return d.CT
			}
		}
		return ""
	}

	presFile, ok := parts["ppt/presentation.xml"]
	if !ok {
		return 0, pptxError("not a PPTX: no ppt/presentation.xml")
	}
	if t := contentType("ppt/presentation.xml"); !presentationTypes[t] {
		return 0, pptxError("not a PPTX: ppt/presentation.xml has content type %q", t)
	}
	ids, err := slideRelIDs(presFile)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, pptxError("PPTX has no slides")
	}

	relsFile, ok := parts["ppt/_rels/presentation.xml.rels"]
	if !ok {
		return 0, pptxError("PPTX has no ppt/_rels/presentation.xml.rels")
	}
	var rels struct {
		Rels []struct {
			ID         string `xml:"Id,attr"`
			Type       string `xml:"Type,attr"`
			Target     string `xml:"Target,attr"`
			TargetMode string `xml:"TargetMode,attr"`
		} `xml:"Relationship"`
	}
	if err := readXML(relsFile, &rels); err != nil {
		return 0, err
	}
	for _, id := range ids {
		i := -1
		for j, r := range rels.Rels {
			if r.ID == id {
				i = j
				break
			}
		}
		if i < 0 {
			return 0, pptxError("PPTX slide %q has no relationship", id)
		}
		rel := rels.Rels[i]
		if path.Base(rel.Type) != "slide" || rel.TargetMode == "External" {
			return 0, pptxError("PPTX slide %q is a %s relationship, not an internal slide", id, rel.Type)
		}
		target := path.Join("ppt", rel.Target)
		if strings.HasPrefix(rel.Target, "/") {
			target = path.Clean(rel.Target[1:])
		}
		if _, ok := parts[strings.ToLower(target)]; !ok {
			return 0, pptxError("PPTX slide %q points at missing part %s", id, target)
		}
		if contentType(target) == "" {
			return 0, pptxError("PPTX slide part %s has no content type", target)
		}
	}
	return len(ids), nil
}

// slideRelIDs returns the r:id of each p:sldId in presentation.xml's
// p:sldIdLst.
func slideRelIDs(f *zip.File) ([]string, error) {
	rc, err := open(f)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	var ids []string
	var stack []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ids, nil
		}
		if err != nil {
			return nil, xmlError(f, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "sldId" && len(stack) > 0 && stack[len(stack)-1] == "sldIdLst" {
				id := ""
				for _, a := range t.Attr {
					if a.Name.Local == "id" && (a.Name.Space == nsRelTransitional || a.Name.Space == nsRelStrict) {
						id = a.Value
					}
				}
				if id == "" {
					return nil, pptxError("PPTX has a p:sldId without r:id")
				}
				ids = append(ids, id)
			}
			stack = append(stack, t.Name.Local)
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
}

// open opens a zip entry, refusing one that says it is larger than
// maxPPTXXML, and stopping at maxPPTXXML bytes whatever it says.
func open(f *zip.File) (io.ReadCloser, error) {
	if f.UncompressedSize64 > maxPPTXXML {
		return nil, pptxError("PPTX part %s is larger than %d bytes", f.Name, maxPPTXXML)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, pptxError("PPTX part %s: %v", f.Name, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, maxPPTXXML), rc}, nil
}

func readXML(f *zip.File, v any) error {
	rc, err := open(f)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := xml.NewDecoder(rc).Decode(v); err != nil {
		return xmlError(f, err)
	}
	return nil
}

func xmlError(f *zip.File, err error) error {
	return pptxError("PPTX part %s is not well-formed XML: %v", f.Name, err)
}

// recordingReaderAt remembers the first error of r other than io.EOF, so
// that a failure to read can be told from bad data.
type recordingReaderAt struct {
	r   io.ReaderAt
	err error
}

func (r *recordingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		// A corrupt zip can point before its start: the file's fault,
		// not the reader's.
		return 0, errors.New("negative offset")
	}
	n, err := r.r.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
	return n, err
}
