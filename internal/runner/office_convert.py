# Berth's office converter: run by the office-profile runner with
# /usr/bin/python3 (python3-uno), beside a LibreOffice that listens on a
# pipe. It connects to that LibreOffice (retrying until it answers or its
# deadline passes), prints {"ready": true}, then reads job requests, one JSON
# object a line, on stdin and answers each with one JSON line on stdout:
#
#   {"in": "file:///...", "out": "file:///....pdf", "csv": false,
#    "landscape": false, "filter_data": {"PageRange": "1-2", ...}}
#   -> {"ok": true, "kind": "writer"}  or  {"ok": false, "error": "load", "message": "..."}
#
# Errors: "load" (LibreOffice could not open the document), "export" (it
# could not write the PDF), "lost" (the connection to LibreOffice broke:
# it crashed or was killed). Everything else is the runner's business: it
# bounds each job's time and kills this process and LibreOffice when the
# job ends badly.
import json
import sys
import time

import uno
from com.sun.star.beans import PropertyValue
from com.sun.star.connection import NoConnectException
from com.sun.star.lang import DisposedException
from com.sun.star.uno import RuntimeException


def prop(name, value):
    p = PropertyValue()
    p.Name = name
    p.Value = value
    return p


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def connect(pipe, deadline):
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    url = "uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe
    while True:
        try:
            ctx = resolver.resolve(url)
            smgr = ctx.ServiceManager
            return smgr.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
        except NoConnectException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# The PDF export filter of each kind of document.
FILTERS = {
    "writer": "writer_pdf_Export",
    "calc": "calc_pdf_Export",
    "impress": "impress_pdf_Export",
    "draw": "draw_pdf_Export",
}


def kind_of(doc):
    if doc.supportsService("com.sun.star.text.GenericTextDocument"):
        return "writer"
    if doc.supportsService("com.sun.star.sheet.SpreadsheetDocument"):
        return "calc"
    if doc.supportsService("com.sun.star.presentation.PresentationDocument"):
        return "impress"
    if doc.supportsService("com.sun.star.drawing.DrawingDocument"):
        return "draw"
    return ""


def landscape(doc, kind):
    """Turns the document's pages sideways: each page style, for text and
    spreadsheets; the slide size, for presentations and drawings."""
    if kind in ("writer", "calc"):
        styles = doc.getStyleFamilies().getByName("PageStyles")
        for name in styles.getElementNames():
            st = styles.getByName(name)
            w, h = st.Width, st.Height
            st.IsLandscape = True
            if w < h:
                st.Width, st.Height = h, w
        return
    pages = doc.getDrawPages()
    if pages.getCount() > 0:
        first = pages.getByIndex(0)
        w, h = first.Width, first.Height
        if w < h:
            first.Width, first.Height = h, w  # the size is the document's


def filter_data(d):
    out = []
    for k, v in sorted(d.items()):
        out.append(prop(k, v))
    return uno.Any("[]com.sun.star.beans.PropertyValue", tuple(out))


def convert(desktop, req):
    load = [prop("Hidden", True), prop("ReadOnly", True), prop("UpdateDocMode", 0)]  # NO_UPDATE: no links fetched
    if req.get("csv"):
        # Comma-separated, double-quoted, UTF-8, from line 1.
        load += [prop("FilterName", "Text - txt - csv (StarCalc)"), prop("FilterOptions", "44,34,76,1")]
    try:
        doc = desktop.loadComponentFromURL(req["in"], "_blank", 0, tuple(load))
    except RuntimeException as e:  # DisposedException among them: the bridge is gone
        return {"ok": False, "error": "lost", "message": str(e)}
    except Exception as e:
        return {"ok": False, "error": "load", "message": str(e)}
    if doc is None:
        return {"ok": False, "error": "load", "message": "LibreOffice could not open the document"}
    try:
        kind = kind_of(doc)
        if kind == "":
            return {"ok": False, "error": "load", "message": "not a document LibreOffice exports to PDF"}
        if req.get("landscape"):
            landscape(doc, kind)
        store = (prop("FilterName", FILTERS[kind]), prop("FilterData", filter_data(req.get("filter_data") or {})))
        try:
            doc.storeToURL(req["out"], store)
        except RuntimeException as e:
            return {"ok": False, "error": "lost", "message": str(e)}
        except Exception as e:
            return {"ok": False, "error": "export", "message": str(e)}
        return {"ok": True, "kind": kind}
    finally:
        try:
            doc.close(True)
        except Exception:
            pass


def main():
    pipe, timeout = sys.argv[1], float(sys.argv[2])
    try:
        desktop = connect(pipe, time.monotonic() + timeout)
    except Exception as e:
        say({"ready": False, "message": "connecting to LibreOffice: %s" % e})
        return 1
    say({"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            res = convert(desktop, json.loads(line))
        except (DisposedException, RuntimeException) as e:
            res = {"ok": False, "error": "lost", "message": str(e)}
        say(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
