// Power and sensor pieces shared by the racks, power and node views: a rack's draw against its
// budget (a bar with the limit line, and the numbers), its 24 h sparkline, the hottest
// temperature sensor of a node, units, and a watch on the sensor sweeps.

import { api } from './api.js';
import { svg } from './dom.js';

// Watts as kW with one decimal ("3.4"); null as "—".
export function kw(w) {
	return w === null || w === undefined ? '—' : (w / 1000).toFixed(1);
}

export function pct(p) {
	return p === null || p === undefined ? '—' : `${p.toFixed(1)} %`;
}

const UNITS = { Cel: '°C', W: 'W', RPM: 'RPM', V: 'V', A: 'A', '%': '%', Percent: '%' };
export function unit(u) {
	return u ? UNITS[u] ?? u : '';
}

// A value with its unit ("24 °C", "600 W"); null or not a number as "—".
export function reading(v, u) {
	if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
	const n = Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1);
	return u ? `${n} ${unit(u)}` : n;
}

// Over its limit: the sweep's verdict, or the draw it measured against the limit as it is now
// (a budget changed since the last sweep moves the limit at once; over_limit waits for the
// next sweep).
export function isOver(p) {
	if (p.over_limit === true) return true;
	return typeof p.limit_w === 'number' && typeof p.measured_w === 'number' && p.measured_w > p.limit_w;
}

// The rack's state for its style: over, ok, no-budget, unread.
export function powerState(p) {
	if (p.measured_w === null || p.measured_w === undefined) return 'unread';
	if (p.budget_w === null || p.budget_w === undefined) return 'no-budget';
	return isOver(p) ? 'over' : 'ok';
}

// The numbers as a line of text: "3.4 of 5.0 kW, limit 4.0 kW, headroom 0.6 kW".
export function powerText(p) {
	const st = powerState(p);
	const parts = [];
	if (st === 'unread') {
		parts.push('not read yet');
		if (p.budget_w !== null && p.budget_w !== undefined) parts.push(`budget ${kw(p.budget_w)} kW, limit ${kw(p.limit_w)} kW`);
		else parts.push('no budget');
		return parts.join(' · ');
	}
	if (st === 'no-budget') return `${kw(p.measured_w)} kW measured · no budget`;
	return `${kw(p.measured_w)} of ${kw(p.budget_w)} kW, limit ${kw(p.limit_w)} kW, headroom ${kw(p.headroom_w)} kW`;
}

const BAR_W = 250;
const BAR_H = 12;

// The bar: the measured draw (and the projected one beyond it) against the budget, a line at
// the limit. A rack without a budget or a reading gets no bar.
export function powerBar(p, width = BAR_W) {
	const st = powerState(p);
	if (st === 'unread' || st === 'no-budget') return null;
	const scale = Math.max(p.budget_w, p.measured_w, p.projected_w ?? 0) || 1;
	const x = (w) => Math.max(0, Math.min(width, (w / scale) * width));
	const g = svg('svg', {
		class: ['power-bar', st], viewBox: `0 0 ${width} ${BAR_H}`, width, height: BAR_H, role: 'img',
		'aria-label': `draw ${kw(p.measured_w)} kW of budget ${kw(p.budget_w)} kW, limit ${kw(p.limit_w)} kW`,
	},
	svg('title', {}, `measured ${kw(p.measured_w)} kW · projected ${kw(p.projected_w)} kW · limit ${kw(p.limit_w)} kW (${p.limit_pct} % of the budget) · budget ${kw(p.budget_w)} kW` +
		(p.nameplate_w !== null && p.nameplate_w !== undefined ? ` · nameplate ${kw(p.nameplate_w)} kW` : '')),
	svg('rect', { class: 'track', x: 0, y: 0, width: x(p.budget_w), height: BAR_H, rx: 2 }));
	if (typeof p.projected_w === 'number' && p.projected_w > p.measured_w)
		g.append(svg('rect', { class: 'proj', x: x(p.measured_w), y: 2, width: x(p.projected_w) - x(p.measured_w), height: BAR_H - 4 }));
	g.append(svg('rect', { class: 'fill', x: 0, y: 2, width: x(p.measured_w), height: BAR_H - 4, rx: 1 }));
	if (typeof p.limit_w === 'number') {
		const lx = Math.min(width - 1, Math.max(1, x(p.limit_w)));
		g.append(svg('line', { class: 'limit', x1: lx, y1: 0, x2: lx, y2: BAR_H, 'data-limit-w': p.limit_w }));
	}
	return g;
}

const SPARK_H = 30;
const DAY_MS = 24 * 3600 * 1000;

// The rack's peak draw per 5-minute step over the last 24 h (oldest left, now right), with the
// limit as a dashed line. null when there is nothing to draw.
export function sparkline(hist, limitW, width = BAR_W, now = Date.now()) {
	const samples = (hist?.samples ?? []).filter((s) => typeof s.peak_w === 'number');
	if (!samples.length) return null;
	const since = now - DAY_MS;
	const top = Math.max(...samples.map((s) => s.peak_w), typeof limitW === 'number' ? limitW : 0) * 1.08 || 1;
	const x = (t) => Math.max(0, Math.min(width, ((t - since) / DAY_MS) * width));
	const y = (w) => SPARK_H - 2 - (w / top) * (SPARK_H - 4);
	const pts = samples.map((s) => `${x(Date.parse(s.at)).toFixed(1)},${y(s.peak_w).toFixed(1)}`);
	const peak = Math.max(...samples.map((s) => s.peak_w));
	const last = samples.at(-1);
	return svg('svg', {
		class: 'sparkline', viewBox: `0 0 ${width} ${SPARK_H}`, width, height: SPARK_H, role: 'img',
		'aria-label': `peak draw over the last 24 hours, highest ${kw(peak)} kW`, 'data-samples': samples.length,
	},
	svg('title', {}, `Peak draw per 5 minutes, last 24 h: highest ${kw(peak)} kW, latest ${kw(last.peak_w)} kW` +
		(typeof limitW === 'number' ? ` (limit ${kw(limitW)} kW)` : '')),
	svg('rect', { class: 'spark-bg', x: 0, y: 0, width, height: SPARK_H }),
	typeof limitW === 'number'
		? svg('line', { class: 'spark-limit', x1: 0, x2: width, y1: y(limitW), y2: y(limitW) }) : null,
	svg('text', { class: 'spark-label', x: 3, y: 9 }, `24 h · peak ${kw(peak)} kW`),
	svg('polyline', { class: 'spark', points: pts.join(' ') }),
	svg('circle', { class: 'spark-last', cx: Math.min(width - 2.5, x(Date.parse(last.at))), cy: y(last.peak_w), r: 2.5 }));
}

const HEALTH = { critical: 2, warning: 1, ok: 0 };

// The hottest temperature sensor with a value: the worst health first; then, of those with an
// upper warning threshold, the one closest to it (value / upper_warning); then, of those
// without one, the highest value. null when there is none.
export function hottest(sensors) {
	let best = null;
	let bestKey = null;
	for (const s of sensors ?? []) {
		if (s.type !== 'temperature' || typeof s.value !== 'number' || !Number.isFinite(s.value)) continue;
		const uw = s.thresholds?.upper_warning;
		const rel = typeof uw === 'number' && uw > 0 ? s.value / uw : null;
		const key = [HEALTH[s.health] ?? 0, rel === null ? 0 : 1, rel ?? s.value];
		if (!bestKey || key[0] > bestKey[0] || (key[0] === bestKey[0] && (key[1] > bestKey[1] ||
			(key[1] === bestKey[1] && key[2] > bestKey[2])))) {
			best = s;
			bestKey = key;
		}
	}
	return best;
}

// A sensor's thresholds as text: "warn ≥ 40 · crit ≥ 45 · low warn ≤ 5".
export function thresholdText(t, u) {
	if (!t) return '—';
	const parts = [];
	const f = (v) => reading(v, u);
	if (typeof t.upper_warning === 'number') parts.push(`warn ≥ ${f(t.upper_warning)}`);
	if (typeof t.upper_critical === 'number') parts.push(`crit ≥ ${f(t.upper_critical)}`);
	if (typeof t.lower_warning === 'number') parts.push(`low warn ≤ ${f(t.lower_warning)}`);
	if (typeof t.lower_critical === 'number') parts.push(`low crit ≤ ${f(t.lower_critical)}`);
	return parts.join(' · ') || '—';
}

export const HEALTH_CLASS = { ok: 'st-ok', warning: 'h-drift', critical: 'st-fail' };

// Calls fn each time a sensor sweep ends (GET /v1/sensors/sync, every ms) until signal aborts.
// The sweeps write events only when something crosses a threshold; measured draws and
// temperatures change without one.
export function watchSweeps(signal, fn, ms = 20000) {
	let seen;
	let timer = null;
	async function tick() {
		timer = null;
		try {
			const s = await api('/v1/sensors/sync', { signal });
			const at = s.last?.finished_at ?? null;
			if (seen !== undefined && at !== seen) fn(s);
			seen = at;
		} catch {
			// a failed poll is tried again; the live status says when the server is gone
		}
		if (!signal.aborted) timer = setTimeout(tick, ms);
	}
	signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
	tick();
}

// Run fn over items, at most n at a time.
export async function pool(items, n, fn) {
	const queue = [...items];
	await Promise.all(Array.from({ length: Math.min(n, queue.length) }, async () => {
		while (queue.length) await fn(queue.shift());
	}));
}

// A gate for at most n calls in flight at once, however many callers: limit(fn) runs fn
// when a place is free and resolves to what it resolves to.
export function limiter(n) {
	let active = 0;
	const waiting = [];
	const next = () => {
		if (active >= n || !waiting.length) return;
		active++;
		const [fn, resolve, reject] = waiting.shift();
		Promise.resolve().then(fn).then(resolve, reject).finally(() => {
			active--;
			next();
		});
	};
	return (fn) => new Promise((resolve, reject) => {
		waiting.push([fn, resolve, reject]);
		next();
	});
}
