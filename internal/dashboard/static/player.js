// Berth dashboard: a recording's player. Shows one frame (a PNG the
// dashboard serves from the API's frames route) at a time; Play steps
// through them at the recording's interval (at most one frame every
// 100 ms, at least one a second), Pause stops, the range input scrubs.
const player = document.getElementById("player");
if (player) {
	const base = player.dataset.frames;
	const count = Number(player.dataset.count);
	const step = Math.min(1000, Math.max(100, Number(player.dataset.interval) || 1000));
	const img = document.getElementById("player-frame");
	const scrub = document.getElementById("scrub");
	const index = document.getElementById("frame-index");
	const at = document.getElementById("frame-at");
	const times = [...document.querySelectorAll("#frame-times li")].map((li) => li.textContent);
	scrub.max = String(Math.max(0, count - 1));
	let timer = null;
	const show = (n) => {
		n = Math.max(0, Math.min(count - 1, n));
		scrub.value = String(n);
		index.textContent = String(n);
		at.textContent = times[n] || "";
		img.src = base + n;
	};
	const pause = () => {
		if (timer !== null) clearInterval(timer);
		timer = null;
		player.dataset.playing = "";
	};
	const play = () => {
		pause();
		if (Number(scrub.value) >= count - 1) show(0);
		player.dataset.playing = "1";
		timer = setInterval(() => {
			const n = Number(scrub.value) + 1;
			if (n >= count) { pause(); return; }
			show(n);
		}, step);
	};
	document.getElementById("play").addEventListener("click", play);
	document.getElementById("pause").addEventListener("click", pause);
	scrub.addEventListener("input", () => { pause(); show(Number(scrub.value)); });
	show(0);
}
