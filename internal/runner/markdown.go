package runner

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	gmhtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
)

// maxMarkdown bounds a Markdown input.
const maxMarkdown = 16 << 20

// markdown converts CommonMark with GitHub's extensions (tables,
// strikethrough, autolinks, task lists). Raw HTML passes through: the page
// runs with no network, every request intercepted, like any HTML job.
var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithAutoHeadingID()),
	goldmark.WithRendererOptions(gmhtml.WithUnsafe()),
)

// markdownPage reads the Markdown input name and returns it as a complete
// HTML document with the built-in stylesheet.
func markdownPage(in *os.Root, name string) ([]byte, error) {
	f, err := in.Open(name)
	if err != nil {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s cannot be read: %v", name, err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxMarkdown+1))
	if err != nil {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "the main input %s cannot be read: %v", name, err)
	}
	if len(src) > maxMarkdown {
		return nil, fail(http.StatusUnprocessableEntity, "invalid_input", "%s is more than %d bytes", name, maxMarkdown)
	}
	doc := markdown.Parser().Parse(text.NewReader(src))
	title := firstHeading(doc, src)
	if title == "" {
		title = strings.TrimSuffix(path.Base(name), path.Ext(name))
	}
	var body bytes.Buffer
	if err := markdown.Renderer().Render(&body, src, doc); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	var b bytes.Buffer
	b.Grow(body.Len() + len(markdownCSS) + 256)
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n",
		html.EscapeString(title), markdownCSS)
	b.Write(body.Bytes())
	b.WriteString("</main>\n</body>\n</html>\n")
	return b.Bytes(), nil
}

// firstHeading returns the text of the document's first heading, or "".
func firstHeading(doc ast.Node, src []byte) string {
	var title string
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if _, ok := n.(*ast.Heading); !ok {
			return ast.WalkContinue, nil
		}
		var b strings.Builder
		_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
			if !entering {
				return ast.WalkContinue, nil
			}
			switch t := c.(type) {
			case *ast.Text:
				b.Write(t.Segment.Value(src))
				if t.SoftLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.Write(t.Value)
			}
			return ast.WalkContinue, nil
		})
		title = strings.TrimSpace(b.String())
		return ast.WalkStop, nil
	})
	return title
}

// markdownCSS is the built-in stylesheet of Markdown documents: a readable
// serif body, sans-serif headings, framed code blocks and tables.
const markdownCSS = `
html { font-size: 11pt; }
body { margin: 0; color: #1b1b1b; background: #fff;
  font-family: "Source Serif Pro", "Noto Serif", "DejaVu Serif", Georgia, "Times New Roman", serif;
  line-height: 1.55; -webkit-print-color-adjust: exact; print-color-adjust: exact; }
main { max-width: 46em; margin: 0 auto; }
h1, h2, h3, h4, h5, h6 { font-family: "Source Sans Pro", "Noto Sans", "DejaVu Sans", Helvetica, Arial, sans-serif;
  line-height: 1.25; margin: 1.4em 0 0.5em; break-after: avoid; }
h1 { font-size: 2em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
h2 { font-size: 1.5em; border-bottom: 1px solid #eee; padding-bottom: 0.15em; }
h3 { font-size: 1.25em; } h4 { font-size: 1.05em; } h5, h6 { font-size: 1em; color: #444; }
p, ul, ol, dl, table, pre, blockquote, figure { margin: 0 0 0.9em; }
a { color: #0b57d0; text-decoration: none; }
img, svg, video { max-width: 100%; height: auto; }
code, kbd, samp, pre { font-family: "Source Code Pro", "Noto Sans Mono", "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.88em; }
code { background: #f3f3f3; border-radius: 3px; padding: 0.1em 0.3em; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 4px; padding: 0.7em 0.9em;
  overflow-x: auto; white-space: pre-wrap; word-wrap: break-word; break-inside: avoid; }
pre code { background: none; padding: 0; font-size: 1em; }
blockquote { margin-left: 0; padding: 0 1em; color: #555; border-left: 4px solid #ddd; }
table { border-collapse: collapse; width: auto; max-width: 100%; }
th, td { border: 1px solid #c8c8c8; padding: 0.35em 0.7em; vertical-align: top; }
th { background: #f2f2f2; font-weight: 600; }
tr { break-inside: avoid; }
hr { border: 0; border-top: 1px solid #ddd; margin: 1.5em 0; }
li > p { margin-bottom: 0.4em; }
li input[type=checkbox] { margin: 0 0.4em 0 0; vertical-align: middle; }
del { color: #777; }
`
