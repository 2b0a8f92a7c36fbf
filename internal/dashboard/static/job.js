// Berth dashboard: a job's page follows the job by its events (server-sent
// events the dashboard relays from GET /v1/jobs/{id}/events): state,
// progress percent and message as they come, and the outputs when it
// ends. Everything is set as text, never as HTML.

const state = document.getElementById("job-state");
if (state && state.dataset.events) {
	const name = document.getElementById("job-state-name");
	const attempt = document.getElementById("job-attempt");
	const bar = document.getElementById("job-progress");
	const percent = document.getElementById("job-percent");
	const message = document.getElementById("job-message");
	const failure = document.getElementById("job-error");
	const setPercent = (p) => {
		bar.value = p;
		percent.textContent = p + "%";
	};
	const show = (ev) => {
		if (ev.type && ev.type !== "progress") name.textContent = ev.type;
		if (ev.attempt) attempt.textContent = String(ev.attempt);
		if (ev.percent) setPercent(ev.percent);
		if (ev.message) message.textContent = ev.message;
		if (ev.error) failure.textContent = ev.error.reason + ": " + ev.error.message;
	};
	const es = new EventSource(state.dataset.events);
	es.addEventListener("job", (e) => show(JSON.parse(e.data)));
	es.addEventListener("end", (e) => {
		const ev = JSON.parse(e.data);
		es.close();
		show(ev);
		if (ev.type !== "succeeded") percent.textContent = "";
		const cancel = document.getElementById("job-cancel");
		if (cancel) cancel.remove();
		const list = document.getElementById("outputs");
		if (ev.outputs && ev.outputs.length) {
			list.replaceChildren();
			for (const o of ev.outputs) {
				const li = document.createElement("li");
				const a = document.createElement("a");
				a.href = o.href;
				a.download = "";
				a.textContent = o.name;
				li.append(a, " · " + o.mime + " · " + o.size + " B");
				list.append(li);
			}
		}
		state.dataset.ended = "1";
	});
	es.addEventListener("failed", (e) => {
		es.close();
		message.textContent = "stopped following: " + (JSON.parse(e.data).message || "");
	});
}
