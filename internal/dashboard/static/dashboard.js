// Berth dashboard: the little the pages do in the browser. Served from
// the binary under a CSP that allows this file and nothing inline. Output
// from sandboxes is only ever set as text (textContent), never as HTML.

// Forms that ask first (delete).
for (const f of document.querySelectorAll("form[data-confirm]")) {
	f.addEventListener("submit", (e) => {
		if (!confirm(f.dataset.confirm)) e.preventDefault();
	});
}

// A running command's page follows its output as server-sent events.
const out = document.getElementById("stdout");
if (out && out.dataset.stream) {
	const err = document.getElementById("stderr");
	const status = document.getElementById("command-status");
	const exit = document.getElementById("command-exit");
	const es = new EventSource(out.dataset.stream);
	es.addEventListener("stdout", (e) => { out.append(JSON.parse(e.data).data || ""); });
	es.addEventListener("stderr", (e) => { err.append(JSON.parse(e.data).data || ""); });
	es.addEventListener("exit", (e) => {
		const ev = JSON.parse(e.data);
		status.textContent = ev.status;
		exit.textContent = ev.exit_code === undefined ? "" : String(ev.exit_code);
		const cancel = document.getElementById("cancel-form");
		if (cancel) cancel.remove();
		es.close();
	});
	es.addEventListener("failed", (e) => {
		status.textContent = "stream ended: " + (JSON.parse(e.data).data || "");
		es.close();
	});
	es.onerror = () => { if (es.readyState === EventSource.CLOSED) status.textContent += " (disconnected)"; };
}

// A code preview: highlight.js (vendored) colours the escaped text the
// server sent; it reads text and writes its own spans, never HTML from
// the file.
if (window.hljs) {
	for (const el of document.querySelectorAll("#preview pre code")) window.hljs.highlightElement(el);
}
