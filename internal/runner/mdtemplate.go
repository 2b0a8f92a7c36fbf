package runner

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path"
	"regexp"
)

// toHTMLRE matches a Gotenberg Markdown placeholder: {{ toHTML "name.md" }}
// (or the older {{ toHTML .DirPath "name.md" }}).
var toHTMLRE = regexp.MustCompile(`\{\{-?\s*toHTML\s+(?:\.DirPath\s+)?"([^"]{1,255})"\s*-?\}\}`)

// maxTemplateHTML bounds the main HTML of a Markdown template.
const maxTemplateHTML = 16 << 20

// markdownTemplatePage reads the main HTML name and replaces each toHTML
// placeholder with that Markdown input, relative to the HTML's directory,
// rendered as HTML (without the built-in stylesheet: the template styles
// it). A placeholder naming no input fails the job.
func markdownTemplatePage(in *os.Root, name string) ([]byte, error) {
	f, err := in.Open(name)
	if err != nil {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s cannot be read: %v", name, err)
	}
	src, err := io.ReadAll(io.LimitReader(f, maxTemplateHTML+1))
	f.Close()
	if err != nil || len(src) > maxTemplateHTML {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s cannot be read or is more than %d bytes", name, maxTemplateHTML)
	}
	var out bytes.Buffer
	var ferr error
	total := 0
	last := 0
	for _, m := range toHTMLRE.FindAllSubmatchIndex(src, -1) {
		out.Write(src[last:m[0]])
		last = m[1]
		md := path.Join(path.Dir(name), string(src[m[2]:m[3]]))
		b, err := readMarkdown(in, md)
		if err == nil {
			total += len(b)
			if total > maxMarkdown {
				err = fail(http.StatusUnprocessableEntity, "invalid_input", "the Markdown inputs come to more than %d bytes", maxMarkdown)
			}
		}
		if err == nil {
			err = markdown.Convert(b, &out)
		}
		if err != nil {
			ferr = err
			break
		}
	}
	if ferr != nil {
		return nil, ferr
	}
	out.Write(src[last:])
	return out.Bytes(), nil
}

func readMarkdown(in *os.Root, name string) ([]byte, error) {
	f, err := in.Open(name)
	if err != nil {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "toHTML names %s, which is not among the inputs", name)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMarkdown+1))
	if err != nil || len(b) > maxMarkdown {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "%s cannot be read or is more than %d bytes", name, maxMarkdown)
	}
	return b, nil
}
