package runner

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/pptx"
)

// editableJS reads one slide's DOM into native shapes. It takes the slide
// selector, the slide element's index (-1 for a page of the document),
// the slide's box in document coordinates and the most shapes to answer.
// Positions it answers are CSS pixels from the slide's top left corner.
// What it cannot map (canvas, svg, video, frames, transforms, filters,
// clip paths, masks) it marks with data-berth-fb and answers as a "shot"
// of the element's box: "all" for the element and its content, "bg" for
// its own box only (a background image or gradient, uneven corners), its
// content being mapped as usual. An <img> is answered with its bytes, or
// as a shot when they cannot be had.
const editableJS = `(async function(slideSel, index, box, maxShapes) {
	const root = index < 0 ? document.body : document.querySelectorAll(slideSel)[index];
	const out = {shapes: [], background: '', bgShot: 0};
	if (!root) return out;
	const shapes = out.shapes;
	const sx = scrollX, sy = scrollY;
	let nextID = 0;
	const SKIP = /^(script|style|template|noscript|head|title|meta|link)$/;
	const UNMAPPED = /^(canvas|svg|video|audio|iframe|object|embed|math)$/;
	const rel = (l, t, w, h) => ({x: l + sx - box.x, y: t + sy - box.y, w, h});
	const inside = (r) => r.width > 0 && r.height > 0 && r.right + sx > box.x && r.left + sx < box.x + box.w &&
		r.bottom + sy > box.y && r.top + sy < box.y + box.h;
	const color = (c) => {
		const m = /^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,\/]\s*([\d.]+%?))?\s*\)$/.exec(c || '');
		if (!m) return '';
		if (m[4] !== undefined && parseFloat(m[4]) / (m[4].endsWith('%') ? 100 : 1) < 0.05) return '';
		return [m[1], m[2], m[3]].map(v => Math.min(255, Math.round(+v)).toString(16).padStart(2, '0')).join('');
	};
	const px = (v) => parseFloat(v) || 0;
	const GENERIC = {'sans-serif': 'Arial', 'serif': 'Times New Roman', 'monospace': 'Courier New',
		'system-ui': 'Arial', 'ui-sans-serif': 'Arial', 'ui-serif': 'Times New Roman', 'ui-monospace': 'Courier New', 'cursive': 'Comic Sans MS'};
	const family = (f) => {
		const first = (f || '').split(',')[0].trim().replace(/^["']|["']$/g, '');
		return GENERIC[first] || first;
	};
	const push = (s) => { if (shapes.length < maxShapes) shapes.push(s); };
	const shot = (el, mode, r) => {
		const id = ++nextID;
		el.setAttribute('data-berth-fb', String(id));
		push(Object.assign({kind: 'shot', id, mode}, rel(r.left, r.top, r.width, r.height)));
		return id;
	};
	const effect = (cs) => cs.transform !== 'none' || cs.filter !== 'none' || (cs.backdropFilter || 'none') !== 'none' ||
		cs.clipPath !== 'none' || (cs.maskImage || cs.webkitMaskImage || 'none') !== 'none' || cs.mixBlendMode !== 'normal';
	const align = (cs) => ({center: 'ctr', '-webkit-center': 'ctr', '-internal-center': 'ctr', right: 'r', '-webkit-right': 'r', end: 'r',
		justify: 'just'})[cs.textAlign] || 'l';
	const lineHeight = (cs) => cs.lineHeight === 'normal' ? 0 : px(cs.lineHeight);
	const style = (cs, deco) => ({font: family(cs.fontFamily), size: px(cs.fontSize), b: (parseInt(cs.fontWeight) || 400) >= 600,
		i: cs.fontStyle !== 'normal', u: deco.u || cs.textDecorationLine.includes('underline'),
		s: deco.s || cs.textDecorationLine.includes('line-through'), color: color(cs.color)});
	const caseOf = (t, cs) => cs.textTransform === 'uppercase' ? t.toUpperCase() : cs.textTransform === 'lowercase' ? t.toLowerCase() : t;

	// runs appends the runs of nodes (inline content) to rs; blocks in it
	// (in a list item or a table cell) become line breaks.
	const runs = (nodes, rs, deco) => {
		for (const n of nodes) {
			if (n.nodeType === 3) {
				const cs = getComputedStyle(n.parentElement);
				if (cs.visibility !== 'visible') continue;
				const st = style(cs, deco);
				const data = n.data.replace(/[\x00-\x08\x0B\x0E-\x1F\x7F]/g, '');
				if (/^(pre|pre-wrap|break-spaces|pre-line)$/.test(cs.whiteSpace)) {
					let t = data;
					if (cs.whiteSpace === 'pre-line') t = t.replace(/[ \t]+/g, ' ');
					t.split('\n').forEach((line, k) => {
						if (k > 0) rs.push({br: true, ...st});
						if (line !== '') rs.push({t: caseOf(line, cs), pre: true, ...st});
					});
				} else {
					rs.push({t: caseOf(data.replace(/[ \t\n\r\f]+/g, ' '), cs), ...st});
				}
				continue;
			}
			if (n.nodeType !== 1 || SKIP.test(n.localName)) continue;
			const cs = getComputedStyle(n);
			if (cs.display === 'none') continue;
			if (n.localName === 'br') { rs.push({br: true, ...style(cs, deco)}); continue; }
			if (n.localName === 'ul' || n.localName === 'ol') continue;
			const d = {u: deco.u || cs.textDecorationLine.includes('underline'), s: deco.s || cs.textDecorationLine.includes('line-through')};
			const block = !/^inline/.test(cs.display) && cs.display !== 'contents';
			if (block && rs.length && !rs[rs.length-1].br) rs.push({br: true, ...style(cs, d)});
			runs(n.childNodes, rs, d);
			if (block && rs.length && !rs[rs.length-1].br) rs.push({br: true, ...style(cs, d)});
		}
		return rs;
	};
	// tidy collapses spaces across runs and trims them at line starts and
	// ends, as a browser lays out white-space: normal.
	const tidy = (rs) => {
		const kept = [];
		let atStart = true;
		for (const r of rs) {
			if (r.br) {
				if (kept.length && !kept[kept.length-1].br && !kept[kept.length-1].pre) kept[kept.length-1].t = kept[kept.length-1].t.replace(/ $/, '');
				kept.push(r); atStart = true; continue;
			}
			let t = r.t;
			if (!r.pre && (atStart || (kept.length && !kept[kept.length-1].br && / $/.test(kept[kept.length-1].t)))) t = t.replace(/^ /, '');
			if (t === '') continue;
			kept.push(Object.assign({}, r, {t}));
			atStart = false;
		}
		while (kept.length && kept[kept.length-1].br) kept.pop();
		if (kept.length && !kept[kept.length-1].pre) kept[kept.length-1].t = kept[kept.length-1].t.replace(/ $/, '');
		return kept.filter(r => r.br || r.t !== '');
	};
	const para = (cs, rs) => ({align: align(cs), lh: lineHeight(cs), runs: tidy(rs)});

	// box paints an element's own box: background and borders.
	const paintBox = (el, cs, r) => {
		const fill = color(cs.backgroundColor);
		const sides = ['Top', 'Right', 'Bottom', 'Left'].map(s => {
			const w = px(cs['border' + s + 'Width']), st = cs['border' + s + 'Style'], c = color(cs['border' + s + 'Color']);
			return w > 0 && st !== 'none' && st !== 'hidden' && c ? {w, c} : null;
		});
		const radii = ['TopLeft', 'TopRight', 'BottomRight', 'BottomLeft'].map(s => {
			const v = cs['border' + s + 'Radius'].split(' ')[0];
			return v.endsWith('%') ? parseFloat(v) * Math.min(r.width, r.height) / 100 : px(v);
		});
		const any = fill || sides.some(s => s);
		if (!any) return;
		const evenRadius = radii.every(v => Math.abs(v - radii[0]) < 0.5);
		if (cs.backgroundImage !== 'none' || !evenRadius) { shot(el, 'bg', r); return; }
		const uniform = sides.every(s => s && sides[0] && s.w === sides[0].w && s.c === sides[0].c);
		if (uniform) {
			const w = sides[0].w;
			push(Object.assign({kind: 'rect', fill, line: sides[0].c, lw: w, radius: Math.max(0, radii[0] - w / 2)},
				rel(r.left + w / 2, r.top + w / 2, r.width - w, r.height - w)));
			return;
		}
		if (fill || radii[0] > 0) push(Object.assign({kind: 'rect', fill, radius: radii[0]}, rel(r.left, r.top, r.width, r.height)));
		const [t, rt, b, l] = sides;
		if (t) push(Object.assign({kind: 'rect', fill: t.c}, rel(r.left, r.top, r.width, t.w)));
		if (b) push(Object.assign({kind: 'rect', fill: b.c}, rel(r.left, r.bottom - b.w, r.width, b.w)));
		if (l) push(Object.assign({kind: 'rect', fill: l.c}, rel(r.left, r.top, l.w, r.height)));
		if (rt) push(Object.assign({kind: 'rect', fill: rt.c}, rel(r.right - rt.w, r.top, rt.w, r.height)));
	};
	const contentBox = (el, cs, r) => {
		const l = r.left + px(cs.borderLeftWidth) + px(cs.paddingLeft);
		const t = r.top + px(cs.borderTopWidth) + px(cs.paddingTop);
		const w = r.width - px(cs.borderLeftWidth) - px(cs.paddingLeft) - px(cs.borderRightWidth) - px(cs.paddingRight);
		const h = r.height - px(cs.borderTopWidth) - px(cs.paddingTop) - px(cs.borderBottomWidth) - px(cs.paddingBottom);
		return {left: l, top: t, width: Math.max(w, 0), height: Math.max(h, 0), right: l + Math.max(w, 0), bottom: t + Math.max(h, 0)};
	};

	// textBox answers the inline content nodes of container as a text box.
	const textBox = (container, cs, r, nodes) => {
		const rs = tidy(runs(nodes, [], {u: false, s: false}));
		if (!rs.some(x => !x.br)) return;
		const range = document.createRange();
		range.setStartBefore(nodes[0]);
		range.setEndAfter(nodes[nodes.length - 1]);
		const tr = range.getBoundingClientRect();
		if (!inside(tr)) return;
		let left = tr.left, width = tr.width;
		if (/^(block|list-item|table-cell|inline-block|flow-root|table-caption)$/.test(cs.display)) {
			const c = contentBox(container, cs, r);
			left = Math.min(c.left, tr.left);
			width = Math.max(c.right, tr.right) - left;
		} else {
			const slack = Math.max(4, tr.width * 0.06);
			const a = align(cs);
			if (a === 'ctr') { left -= slack / 2; width += slack; }
			else if (a === 'r') { left -= slack; width += slack; }
			else width += slack;
		}
		push(Object.assign({kind: 'text', paras: [{align: align(cs), lh: lineHeight(cs), runs: rs}]}, rel(left, tr.top, width, tr.height)));
	};

	const BULLETS = {disc: '\u2022', circle: '\u25E6', square: '\u25AA'};
	const NUMBERS = {decimal: 'arabicPeriod', 'decimal-leading-zero': 'arabicPeriod', 'lower-alpha': 'alphaLcPeriod', 'lower-latin': 'alphaLcPeriod',
		'upper-alpha': 'alphaUcPeriod', 'upper-latin': 'alphaUcPeriod', 'lower-roman': 'romanLcPeriod', 'upper-roman': 'romanUcPeriod'};
	const listItems = (list, left, level, paras) => {
		for (const li of list.children) {
			const cs = getComputedStyle(li);
			if (li.localName !== 'li' || cs.display === 'none') continue;
			const r = li.getBoundingClientRect();
			const c = contentBox(li, cs, r);
			const p = para(cs, runs(li.childNodes, [], {u: false, s: false}));
			p.level = level;
			p.indent = Math.max(0, c.left - left);
			const type = cs.listStyleType;
			if (NUMBERS[type]) { p.num = NUMBERS[type]; p.start = list.localName === 'ol' ? list.start : 1; }
			else if (type !== 'none') p.bullet = BULLETS[type] || '\u2022';
			paras.push(p);
			for (const sub of li.children) if (sub.localName === 'ul' || sub.localName === 'ol') listItems(sub, left, level + 1, paras);
		}
	};

	const table = (el, r) => {
		const rows = Array.from(el.rows).filter(row => getComputedStyle(row).display !== 'none');
		if (!rows.length) return false;
		const xs = [];
		const addX = (x) => { if (!xs.some(v => Math.abs(v - x) < 1)) xs.push(x); };
		for (const row of rows) for (const cell of row.cells) { const cr = cell.getBoundingClientRect(); addX(cr.left); addX(cr.right); }
		xs.sort((a, b) => a - b);
		if (xs.length < 2) return false;
		const col = (x) => { let best = 0; xs.forEach((v, k) => { if (Math.abs(v - x) < Math.abs(xs[best] - x)) best = k; }); return best; };
		const n = xs.length - 1;
		const grid = rows.map(() => new Array(n).fill(null));
		rows.forEach((row, ri) => {
			const rcs = getComputedStyle(row);
			for (const cell of row.cells) {
				const cs = getComputedStyle(cell);
				const cr = cell.getBoundingClientRect();
				const c0 = col(cr.left), c1 = Math.max(col(cr.right), c0 + 1);
				const span = Math.min(Math.max(cell.rowSpan, 1), rows.length - ri);
				const top = cs.borderTopStyle !== 'none' && px(cs.borderTopWidth) > 0 ? {c: color(cs.borderTopColor), w: px(cs.borderTopWidth)} : null;
				const p = para(cs, runs(cell.childNodes, [], {u: false, s: false}));
				const tc = {paras: [p], fill: color(cs.backgroundColor) || color(rcs.backgroundColor),
					line: top ? top.c : '', lw: top ? top.w : 0, span: c1 - c0, rowSpan: span,
					pad: [px(cs.paddingLeft), px(cs.paddingTop), px(cs.paddingRight), px(cs.paddingBottom)]};
				for (let y = ri; y < ri + span; y++) for (let x = c0; x < c1 && x < n; x++) {
					if (grid[y][x]) continue;
					grid[y][x] = (y === ri && x === c0) ? tc : {paras: [], fill: tc.fill, line: tc.line, lw: tc.lw, hm: x > c0, vm: y > ri};
				}
			}
		});
		const top = rows[0].getBoundingClientRect().top;
		const bottom = rows[rows.length - 1].getBoundingClientRect().bottom;
		push(Object.assign({kind: 'table', table: {
			// Wider by a little: another renderer's glyphs may be wider
			// and would wrap a cell's text that just fits.
			cols: xs.slice(1).map((x, k) => (x - xs[k]) * 1.04 + 2),
			rows: rows.map((row, ri) => ({h: row.getBoundingClientRect().height, cells: grid[ri].map(c => c || {paras: []})})),
		}}, rel(xs[0], top, (xs[n] - xs[0]) * 1.04 + 2 * n, bottom - top)));
		return true;
	};

	const pictures = [];
	const picture = (el, cs, r) => {
		if (!el.complete || !el.naturalWidth) return;
		const c = contentBox(el, cs, r);
		const id = ++nextID;
		el.setAttribute('data-berth-fb', String(id));
		const s = Object.assign({kind: 'picture', id, mode: 'all', alt: el.alt || ''}, rel(c.left, c.top, c.width, c.height));
		push(s);
		const stretched = Math.abs(el.naturalWidth / el.naturalHeight - c.width / Math.max(c.height, 1e-3)) < 0.01 * (el.naturalWidth / el.naturalHeight);
		if (cs.objectFit !== 'fill' && !stretched) return; // a shot, cropped or letterboxed as shown
		pictures.push(fetch(el.currentSrc || el.src).then(res => res.ok ? res.arrayBuffer() : null).then(buf => {
			if (!buf || buf.byteLength > (32 << 20)) return;
			const u8 = new Uint8Array(buf);
			let bin = '';
			for (let k = 0; k < u8.length; k += 0x8000) bin += String.fromCharCode.apply(null, u8.subarray(k, k + 0x8000));
			s.data = btoa(bin);
		}).catch(() => {}));
	};

	const walk = (el) => {
		if (shapes.length >= maxShapes || SKIP.test(el.localName)) return;
		const cs = getComputedStyle(el);
		if (cs.display === 'none' || parseFloat(cs.opacity) === 0) return;
		const r = el.getBoundingClientRect();
		const visible = cs.visibility === 'visible' && inside(r);
		if (el !== root && (UNMAPPED.test(el.localName) || effect(cs))) {
			if (visible) shot(el, 'all', r);
			return;
		}
		if (el.localName === 'img') {
			if (visible) { paintBox(el, cs, r); picture(el, cs, r); }
			return;
		}
		if (el === root) {
			out.background = color(cs.backgroundColor);
			if (cs.backgroundImage !== 'none') { out.bgShot = ++nextID; el.setAttribute('data-berth-fb', String(nextID)); }
		} else if (visible) {
			paintBox(el, cs, r);
		}
		const complex = 'img,table,canvas,svg,video,iframe,object,embed';
		if (el.localName === 'table' && !el.querySelector(complex)) {
			if (visible && table(el, r)) return;
		}
		if ((el.localName === 'ul' || el.localName === 'ol') && !el.querySelector(complex)) {
			if (visible) {
				const paras = [];
				listItems(el, r.left, 0, paras);
				if (paras.some(p => p.runs.length)) push(Object.assign({kind: 'text', paras}, rel(r.left, r.top, r.width + Math.max(4, r.width * 0.02), r.height)));
			}
			return;
		}
		let group = [];
		const flush = () => { if (group.length) textBox(el, cs, r, group); group = []; };
		for (const n of el.childNodes) {
			if (n.nodeType === 3) { group.push(n); continue; }
			if (n.nodeType !== 1 || SKIP.test(n.localName)) continue;
			const ncs = getComputedStyle(n);
			if (ncs.display === 'none') continue;
			if (n.localName === 'br' || (ncs.display === 'inline' && !UNMAPPED.test(n.localName) && n.localName !== 'img' &&
				!effect(ncs) && !n.querySelector('img,canvas,svg,video,iframe,object,embed,table,ul,ol'))) { group.push(n); continue; }
			flush();
			walk(n);
		}
		flush();
	};
	walk(root);
	if (!out.background && root === document.body) out.background = color(getComputedStyle(document.documentElement).backgroundColor);
	await Promise.all(pictures);
	return out;
})`

// shotJS marks one element for its fallback picture, hiding everything
// else (see shotStyle): mode "all" shows the element and its content,
// "bg" its own box only.
const shotJS = `(function(id, mode) {
	const prev = document.querySelector('[data-berth-shot]');
	if (prev) prev.removeAttribute('data-berth-shot');
	if (!document.getElementById('berth-shot-style')) {
		const st = document.createElement('style');
		st.id = 'berth-shot-style';
		st.textContent = ` + "`" + shotStyle + "`" + `;
		(document.head || document.documentElement).appendChild(st);
	}
	const el = document.querySelector('[data-berth-fb="' + id + '"]');
	if (!el) return false;
	if (mode === 'bg') {
		const cs = getComputedStyle(el);
		for (const s of ['top', 'right', 'bottom', 'left']) el.style.setProperty('border-' + s + '-color', cs.getPropertyValue('border-' + s + '-color'), 'important');
	}
	el.setAttribute('data-berth-shot', mode);
	return true;
})`

// shotStyle hides the page but the marked element. A "bg" element's own
// text is made transparent: its content is mapped on its own.
const shotStyle = `*, *::before, *::after, *::marker { visibility: hidden !important; }
[data-berth-shot="all"], [data-berth-shot="all"] *, [data-berth-shot="all"]::before, [data-berth-shot="all"]::after,
[data-berth-shot="all"] *::before, [data-berth-shot="all"] *::after, [data-berth-shot="all"] *::marker { visibility: visible !important; }
[data-berth-shot="bg"] { visibility: visible !important; color: transparent !important; -webkit-text-fill-color: transparent !important;
	text-shadow: none !important; text-decoration-color: transparent !important; }
html:not([data-berth-shot]), body:not([data-berth-shot]) { background: transparent !important; }`

// domSlide is what editableJS answers.
type domSlide struct {
	Shapes     []domShape `json:"shapes"`
	Background string     `json:"background"`
	BgShot     int        `json:"bgShot"`
}

type domShape struct {
	Kind   string    `json:"kind"` // rect, text, picture, table, shot
	X      float64   `json:"x"`
	Y      float64   `json:"y"`
	W      float64   `json:"w"`
	H      float64   `json:"h"`
	ID     int       `json:"id"`
	Mode   string    `json:"mode"`
	Fill   string    `json:"fill"`
	Line   string    `json:"line"`
	LW     float64   `json:"lw"`
	Radius float64   `json:"radius"`
	Paras  []domPara `json:"paras"`
	Data   []byte    `json:"data"`
	Alt    string    `json:"alt"`
	Table  *struct {
		Cols []float64 `json:"cols"`
		Rows []struct {
			H     float64   `json:"h"`
			Cells []domCell `json:"cells"`
		} `json:"rows"`
	} `json:"table"`
}

type domPara struct {
	Align  string   `json:"align"`
	LH     float64  `json:"lh"`
	Bullet string   `json:"bullet"`
	Num    string   `json:"num"`
	Start  int      `json:"start"`
	Indent float64  `json:"indent"`
	Level  int      `json:"level"`
	Runs   []domRun `json:"runs"`
}

type domRun struct {
	Text  string  `json:"t"`
	Br    bool    `json:"br"`
	Font  string  `json:"font"`
	Size  float64 `json:"size"` // CSS pixels
	B     bool    `json:"b"`
	I     bool    `json:"i"`
	U     bool    `json:"u"`
	S     bool    `json:"s"`
	Color string  `json:"color"`
}

type domCell struct {
	Paras   []domPara `json:"paras"`
	Fill    string    `json:"fill"`
	Line    string    `json:"line"`
	LW      float64   `json:"lw"`
	Span    int       `json:"span"`
	RowSpan int       `json:"rowSpan"`
	HM      bool      `json:"hm"`
	VM      bool      `json:"vm"`
	Pad     []float64 `json:"pad"` // left, top, right, bottom
}

// maxEditableShapes bounds the shapes read from one slide.
const maxEditableShapes = 5000

// pendingShot is a fallback picture to take once every slide is read.
type pendingShot struct {
	slide, shape int // shape -1: the slide's background picture
	id           int
	mode         string
	clip         page.Viewport
}

// editableSlides reads each slide's DOM into native shapes, then takes
// the fallback pictures. w is the deck's slide width in CSS pixels.
func (p *pageRun) editableSlides(slideSel string, slides []slideBox, w int64) ([]pptx.Slide, error) {
	out := make([]pptx.Slide, len(slides))
	var shots []pendingShot
	for i, sl := range slides {
		args, _ := json.Marshal([]any{slideSel, sl.I, map[string]float64{"x": sl.X, "y": sl.Y, "w": sl.W, "h": sl.H}, maxEditableShapes})
		d, err := chromedp.Run(p.ctx, chromedp.Evaluate[domSlide](editableJS+"(..."+string(args)+")", chromedp.EvalAwaitPromise))
		if err != nil {
			return nil, fmt.Errorf("reading slide %d: %w", i+1, err)
		}
		k := float64(w) / sl.W // deck pixels per slide pixel
		emu := func(v float64) int64 { return int64(math.Round(v * k * emuPerPx)) }
		s := pptx.Slide{Notes: sl.Notes, Background: cmp.Or(d.Background, "ffffff")}
		if d.BgShot != 0 {
			shots = append(shots, pendingShot{slide: i, shape: -1, id: d.BgShot, mode: "bg",
				clip: page.Viewport{X: sl.X, Y: sl.Y, Width: sl.W, Height: sl.H, Scale: 1}})
		}
		for _, ds := range d.Shapes {
			sh := pptx.Shape{X: emu(ds.X), Y: emu(ds.Y), W: emu(ds.W), H: emu(ds.H)}
			switch ds.Kind {
			case "rect":
				sh.Kind, sh.Fill, sh.Line, sh.LineWidth, sh.Radius = pptx.Rect, ds.Fill, ds.Line, emu(ds.LW), emu(ds.Radius)
			case "text":
				sh.Kind, sh.Paras = pptx.TextBox, paras(ds.Paras, k)
			case "table":
				if ds.Table == nil {
					continue
				}
				sh.Kind, sh.Table = pptx.TableShape, &pptx.Table{}
				for _, c := range ds.Table.Cols {
					sh.Table.Cols = append(sh.Table.Cols, emu(c))
				}
				for _, r := range ds.Table.Rows {
					row := pptx.TableRow{Height: emu(r.H)}
					for _, c := range r.Cells {
						cell := pptx.Cell{Paras: paras(c.Paras, k), Fill: c.Fill, Line: c.Line, LineWidth: emu(c.LW),
							GridSpan: c.Span, RowSpan: c.RowSpan, HMerge: c.HM, VMerge: c.VM}
						for m, v := range c.Pad {
							if m < len(cell.Margins) {
								cell.Margins[m] = emu(v)
							}
						}
						row.Cells = append(row.Cells, cell)
					}
					sh.Table.Rows = append(sh.Table.Rows, row)
				}
			case "picture", "shot":
				sh.Kind, sh.Name, sh.Image = pptx.Picture, ds.Alt, ds.Data
				if !pptx.IsPicture(sh.Image) {
					sh.Image = nil
					shots = append(shots, pendingShot{slide: i, shape: len(s.Shapes), id: ds.ID, mode: cmp.Or(ds.Mode, "all"),
						clip: page.Viewport{X: sl.X + ds.X, Y: sl.Y + ds.Y, Width: math.Max(ds.W, 1), Height: math.Max(ds.H, 1), Scale: 1}})
				}
			default:
				continue
			}
			s.Shapes = append(s.Shapes, sh)
		}
		out[i] = s
	}
	if len(shots) == 0 {
		return out, nil
	}
	// Fallback pictures: the page is hidden but the element, on a
	// transparent background.
	if _, err := chromedp.Call(p.ctx, emulation.SetDefaultBackgroundColorOverride,
		emulation.SetDefaultBackgroundColorOverrideParams{Color: &cdp.RGBA{R: 0, G: 0, B: 0, A: 0}}); err != nil {
		return nil, fmt.Errorf("clearing the background: %w", err)
	}
	yes := true
	for _, sh := range shots {
		args, _ := json.Marshal([]any{sh.id, sh.mode})
		found, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](shotJS+"(..."+string(args)+")"))
		if err != nil {
			return nil, fmt.Errorf("marking slide %d's element: %w", sh.slide+1, err)
		}
		var img []byte
		if found {
			clip := sh.clip
			res, err := chromedp.Call(p.ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
				Format: page.CaptureScreenshotFormatPng, CaptureBeyondViewport: &yes, Clip: &clip})
			if err != nil {
				return nil, fmt.Errorf("capturing an element of slide %d: %w", sh.slide+1, err)
			}
			img = res.Data
		}
		if sh.shape < 0 {
			out[sh.slide].Image = img
		} else {
			out[sh.slide].Shapes[sh.shape].Image = img
		}
	}
	// Elements that vanished meanwhile leave no picture.
	for i := range out {
		kept := out[i].Shapes[:0]
		for _, sh := range out[i].Shapes {
			if sh.Kind != pptx.Picture || sh.Image != nil {
				kept = append(kept, sh)
			}
		}
		out[i].Shapes = kept
	}
	return out, nil
}

// paras converts paragraphs, k deck pixels per slide pixel.
func paras(ps []domPara, k float64) []pptx.Paragraph {
	pts := func(px float64) int { return int(math.Round(px * k * 75)) } // hundredths of a point
	var out []pptx.Paragraph
	for _, p := range ps {
		q := pptx.Paragraph{Align: p.Align, LineHeight: pts(p.LH), Bullet: p.Bullet, Numbered: p.Num, StartAt: p.Start,
			Indent: int64(math.Round(p.Indent * k * emuPerPx)), Level: p.Level}
		for _, r := range p.Runs {
			q.Runs = append(q.Runs, pptx.Run{Text: r.Text, Break: r.Br, Font: r.Font, Size: pts(r.Size),
				Bold: r.B, Italic: r.I, Underline: r.U, Strike: r.S, Color: r.Color})
		}
		out = append(out, q)
	}
	return out
}
