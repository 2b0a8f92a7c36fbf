// Berth live view: shows the frames of one browser session, and sends
// input while a lease token is pasted (the daemon refuses input without a
// live lease). Served with a CSP that allows this script only.
"use strict";
(() => {
	const img = document.getElementById("frame");
	const status = document.getElementById("status");
	const leaseBox = document.getElementById("lease");
	document.body.style.cssText = "margin:0;font:14px system-ui,sans-serif;background:#111;color:#ddd";
	document.querySelector("header").style.cssText = "display:flex;gap:1em;align-items:center;padding:6px 10px;background:#222";
	document.querySelector("main").style.cssText = "padding:8px";
	img.style.cssText = "max-width:100%;outline:none;border:1px solid #333;background:#fff";

	// The page's own URL is the capability: /live/{token}; its socket is
	// /live/{token}/ws on the same origin.
	const u = new URL(location.href);
	u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
	u.pathname = u.pathname.replace(/\/+$/, "") + "/ws";
	u.search = "";
	u.hash = "";

	let viewport = null;
	let ws = null;
	let nextID = 1;
	const send = (event) => {
		const lease = leaseBox.value.trim();
		if (!lease || !ws || ws.readyState !== WebSocket.OPEN) return;
		ws.send(JSON.stringify({type: "input", id: nextID++, lease, event}));
	};
	const point = (e) => {
		if (!viewport || !img.clientWidth) return null;
		const r = img.getBoundingClientRect();
		return {
			x: Math.max(0, (e.clientX - r.left) * viewport.width / r.width),
			y: Math.max(0, (e.clientY - r.top) * viewport.height / r.height),
		};
	};
	const mods = (e) => (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0);
	const buttons = ["left", "middle", "right"];

	img.addEventListener("mousedown", (e) => {
		const p = point(e);
		if (p) { img.focus(); e.preventDefault(); send({kind: "mouse", action: "down", button: buttons[e.button] || "left", modifiers: mods(e), ...p}); }
	});
	img.addEventListener("mouseup", (e) => {
		const p = point(e);
		if (p) send({kind: "mouse", action: "up", button: buttons[e.button] || "left", modifiers: mods(e), ...p});
	});
	let lastMove = 0;
	img.addEventListener("mousemove", (e) => {
		const now = Date.now();
		if (now - lastMove < 50) return; // at most 20 moves a second
		lastMove = now;
		const p = point(e);
		if (p) send({kind: "mouse", action: "move", ...p});
	});
	img.addEventListener("wheel", (e) => {
		const p = point(e);
		if (p && leaseBox.value.trim()) { e.preventDefault(); send({kind: "wheel", delta_x: e.deltaX, delta_y: e.deltaY, ...p}); }
	}, {passive: false});
	img.addEventListener("contextmenu", (e) => e.preventDefault());
	const named = new Set(["Enter", "Tab", "Escape", "Backspace", "Delete", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight",
		"Home", "End", "PageUp", "PageDown"]);
	img.addEventListener("keydown", (e) => {
		if (!leaseBox.value.trim()) return;
		const chord = (e.ctrlKey || e.metaKey || e.altKey) && e.key.length === 1;
		if (named.has(e.key) || chord) {
			const parts = [];
			if (e.ctrlKey) parts.push("Control");
			if (e.altKey) parts.push("Alt");
			if (e.metaKey) parts.push("Meta");
			if (e.shiftKey && named.has(e.key)) parts.push("Shift");
			parts.push(e.key);
			send({kind: "key", key: parts.join("+")});
		} else if (e.key.length === 1) {
			send({kind: "text", text: e.key});
		} else {
			return;
		}
		e.preventDefault();
	});

	const connect = () => {
		ws = new WebSocket(u);
		ws.onopen = () => { status.textContent = "live"; };
		ws.onmessage = (e) => {
			const m = JSON.parse(e.data);
			if (m.type === "frame") {
				img.src = "data:image/jpeg;base64," + m.data;
				viewport = m.viewport || viewport;
				status.textContent = "live · frame " + m.seq + " · " + new Date(m.timestamp).toLocaleTimeString();
			} else if (m.type === "error" && m.error) {
				status.textContent = "input refused: " + m.error.reason + " (" + m.error.message + ")";
			}
		};
		ws.onclose = (e) => {
			status.textContent = "closed" + (e.reason ? ": " + e.reason : "") + " (the link may have expired or the session ended)";
		};
	};
	connect();
})();
