// Berth dashboard: a browser session's live panel. It shows the session's
// page by polling the dashboard's frame route (a PNG of the API's live
// frame), one request at a time; while this person holds control
// (data-held), a click on the image is a click in the page, sent as a
// POST with the session's CSRF token in CSS pixels of the viewport.
const live = document.getElementById("live");
if (live) {
	const img = document.getElementById("live-frame");
	const status = document.getElementById("live-status");
	const width = Number(live.dataset.width);
	const height = Number(live.dataset.height);
	const held = live.dataset.held === "1";
	// Each frame is a new GET of the frame route (the page's CSP allows
	// images from 'self' only, so no blob: URLs); the next one is asked
	// for when the last has loaded or failed.
	let frames = 0;
	const next = () => { img.src = live.dataset.frame + "?n=" + (frames + 1) + "." + Date.now(); };
	img.addEventListener("load", () => {
		frames++;
		live.dataset.frames = String(frames);
		status.textContent = held ? "live · you hold control: clicks go to the page" : "live · watching";
		setTimeout(next, 500);
	});
	img.addEventListener("error", () => {
		status.textContent = "live view: no frame (the session may have closed); retrying";
		setTimeout(next, 3000);
	});
	next();
	if (held) {
		img.classList.add("control");
		// A click's answer stays in the panel's data-click-status (the
		// status line is the frames'); a refusal also shows below it.
		const refused = document.getElementById("live-refused");
		img.addEventListener("click", async (e) => {
			const r = img.getBoundingClientRect();
			if (!r.width || !r.height) return;
			// The viewport's CSS pixels; a session opened without a viewport
			// has its frame's size (device pixels, the same at scale 1).
			const w = width || img.naturalWidth;
			const h = height || img.naturalHeight;
			const body = {x: (e.clientX - r.left) * w / r.width, y: (e.clientY - r.top) * h / r.height};
			try {
				const res = await fetch(live.dataset.click, {method: "POST", headers: {"X-CSRF-Token": live.dataset.csrf, "Content-Type": "application/json"}, body: JSON.stringify(body)});
				live.dataset.clickStatus = String(res.status);
				if (!res.ok) {
					const e = await res.json().catch(() => ({}));
					refused.textContent = "click refused: " + ((e.error && e.error.message) || res.status);
				} else {
					refused.textContent = "";
				}
			} catch (err) {
				live.dataset.clickStatus = "failed";
				refused.textContent = "click failed: " + err.message;
			}
		});
	}
}
