// Berth dashboard terminal: xterm.js (vendored, loaded before this module
// as the global Terminal) fed by long polls of the terminal's output, with
// keystrokes and resizes sent as POSTs carrying the session's CSRF token.
const box = document.getElementById("terminal");
if (box && globalThis.Terminal) {
	const base = box.dataset.base;
	const csrf = box.dataset.csrf;
	const status = document.getElementById("terminal-status");
	const term = new globalThis.Terminal({cols: 100, rows: 30, convertEol: false, cursorBlink: true});
	term.open(box);
	term.focus();

	// Keystrokes are sent in order, one POST at a time.
	let pending = "";
	let sending = false;
	const flush = async () => {
		if (sending || !pending) return;
		sending = true;
		const data = pending;
		pending = "";
		try {
			await fetch(base + "/input", {method: "POST", headers: {"X-CSRF-Token": csrf, "Content-Type": "application/octet-stream"}, body: new TextEncoder().encode(data)});
		} finally {
			sending = false;
			flush();
		}
	};
	term.onData((d) => { pending += d; flush(); });
	term.onResize(({cols, rows}) => {
		fetch(base + "/resize", {method: "POST", headers: {"X-CSRF-Token": csrf, "Content-Type": "application/json"}, body: JSON.stringify({cols, rows})});
	});

	const decode = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
	let offset = 0;
	const poll = async () => {
		for (;;) {
			let out;
			try {
				const r = await fetch(base + "/output?offset=" + offset);
				if (!r.ok) { status.textContent = "disconnected (" + r.status + ")"; return; }
				out = await r.json();
			} catch (e) {
				status.textContent = "disconnected";
				return;
			}
			if (out.data_base64) term.write(decode(out.data_base64));
			offset = out.next_offset;
			status.textContent = out.status;
			if (out.status !== "running") return;
		}
	};
	poll();
}
