/**
 * Parses a text/event-stream body into events. Comment lines (keep-alives)
 * are skipped; a multi-line data field is joined with newlines.
 */
export async function* parseSSE(body) {
    const decoder = new TextDecoder();
    const reader = body.getReader();
    let buf = "";
    let event = "";
    let data = [];
    let id;
    try {
        for (;;) {
            const { value, done } = await reader.read();
            if (done) {
                break;
            }
            buf += decoder.decode(value, { stream: true });
            let nl;
            while ((nl = buf.indexOf("\n")) >= 0) {
                let line = buf.slice(0, nl);
                buf = buf.slice(nl + 1);
                if (line.endsWith("\r")) {
                    line = line.slice(0, -1);
                }
                if (line === "") {
                    if (data.length > 0 || event !== "") {
                        yield { event: event || "message", data: data.join("\n"), id };
                    }
                    event = "";
                    data = [];
                    id = undefined;
                    continue;
                }
                if (line.startsWith(":")) {
                    continue;
                }
                const colon = line.indexOf(":");
                const field = colon < 0 ? line : line.slice(0, colon);
                let val = colon < 0 ? "" : line.slice(colon + 1);
                if (val.startsWith(" ")) {
                    val = val.slice(1);
                }
                switch (field) {
                    case "event":
                        event = val;
                        break;
                    case "data":
                        data.push(val);
                        break;
                    case "id":
                        id = val;
                        break;
                }
            }
        }
    }
    finally {
        await reader.cancel().catch(() => { });
        reader.releaseLock();
    }
}
