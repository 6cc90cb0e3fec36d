// Racks: an SVG elevation of every rack, grouped by site and row. Nodes sit in their U slots,
// coloured by provision state, dimmed when powered off, hatched in maintenance, and marked
// for BMC faults, firmware/BIOS drift and a failed latest job, with their hottest temperature
// sensor. Above each elevation: the rack's draw against its budget (a bar with the limit
// line) and a 24 h sparkline of its peak draw. Click a node to open it.
//
// Requests: per rack its elevation, its nodes, its power and its power history; then, for the
// hottest-sensor labels, GET /v1/nodes/{node}/sensors for each placed node that the rack's
// power says was read, at most SENSOR_CONCURRENCY at once across all racks, kept for
// SENSOR_TTL_MS (a sensor event about a node reads it again at once). The end of a sensor
// sweep (GET /v1/sensors/sync, polled) reads every rack's power again.

import { all, api, seg, url } from './api.js';
import { badge, batch, clear, errorBox, h, stateClass, svg } from './dom.js';
import {
	hottest, isOver, limiter, pool, powerBar, powerState, powerText, reading, sparkline, thresholdText, watchSweeps,
} from './meters.js';

const UH = 14;     // px per rack unit
const TOP = 8;     // px above the top unit
const LEFT = 24;   // U numbers column
const WIDTH = 250; // whole drawing
const NODE_W = WIDTH - LEFT - 6;
const UNPLACED_MAX = 12; // chips under a rack; the rest are a link to the table
const SENSOR_CONCURRENCY = 4; // GET /v1/nodes/{node}/sensors in flight at once, all racks together
const SENSOR_TTL_MS = 5 * 60 * 1000; // a node's hottest sensor is read again after this
let drawings = 0; // ids inside each SVG must be unique in the page
// node -> {s: its hottest temperature sensor or null, at: when read}; kept while the page is
// open, so coming back to the racks within SENSOR_TTL_MS reads no sensors again.
const hotCache = new Map();

function short(s, max) {
	return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

export function render(main, ctx) {
	const ctrl = new AbortController();
	const signal = ctrl.signal;
	const summary = h('div', { class: 'summary', id: 'rack-summary' });
	const notes = h('div', { class: 'notes' });
	const body = h('div', { class: 'sites', id: 'racks' }, h('div', { class: 'muted' }, 'Loading racks…'));
	main.append(
		h('div', { class: 'toolbar' }, h('h1', {}, 'Racks'), summary, h('span', { class: 'spacer' }), legend()),
		notes, body);

	const st = {
		racks: new Map(),     // rack name -> {rack, elev, bmc: Map node -> bmc, card, error, power, history, powerError}
		hot: hotCache,
		sensorErrors: new Map(), // rack -> the error of its latest sensors read that failed
		nodeRack: new Map(),  // node name -> rack name
		fw: new Map(),        // node -> [{component, actual, desired}]
		bios: new Map(),      // node -> [{name, actual, desired}]
		failed: new Map(),    // node -> its latest job, when that failed
		overlayErrors: [],
	};

	async function loadOverlays() {
		const errs = [];
		const [fw, bios, jobs] = await Promise.all([
			api('/v1/firmware/drift', { signal }).catch((e) => { errs.push(e); return null; }),
			api('/v1/bios/drift', { signal }).catch((e) => { errs.push(e); return null; }),
			api(url('/v1/jobs', { limit: 1000, fields: 'id,node,type,state,error,finished_at' }), { signal })
				.catch((e) => { errs.push(e); return null; }),
		]);
		if (fw) st.fw = new Map(fw.items.map((i) => [i.node, i.components]));
		if (bios) st.bios = new Map(bios.items.map((i) => [i.node, i.attributes]));
		if (jobs) {
			// Newest first: the first ended job of a node is its latest.
			const latest = new Map();
			for (const j of jobs.items)
				if (!latest.has(j.node) && ['succeeded', 'failed', 'cancelled'].includes(j.state)) latest.set(j.node, j);
			st.failed = new Map([...latest].filter(([, j]) => j.state === 'failed'));
		}
		st.overlayErrors = errs.filter((e) => e.name !== 'AbortError');
		showNotes();
	}

	async function loadRack(name) {
		const r = st.racks.get(name);
		try {
			const [elev, nodes] = await Promise.all([
				api(`/v1/racks/${seg(name)}/elevation`, { signal }),
				all('/v1/nodes', { rack: name, fields: 'name,bmc' }, { signal }),
			]);
			r.elev = elev;
			r.bmc = new Map(nodes.map((n) => [n.name, n.bmc]));
			r.error = null;
			for (const n of [...elev.nodes, ...elev.unplaced]) st.nodeRack.set(n.name, name);
		} catch (e) {
			if (e.name === 'AbortError') throw e;
			r.error = e;
		}
		draw(r);
	}

	// The rack's draw against its budget and its history (the last 24 h).
	async function loadPower(name) {
		const r = st.racks.get(name);
		if (!r) return;
		try {
			const [power, history] = await Promise.all([
				api(`/v1/racks/${seg(name)}/power`, { signal }),
				api(`/v1/racks/${seg(name)}/power/history`, { signal }),
			]);
			r.power = power;
			r.history = history;
			r.powerError = null;
		} catch (e) {
			if (e.name === 'AbortError') throw e;
			r.powerError = e;
		}
		draw(r);
	}

	// The hottest sensor of the rack's placed nodes that were read (all of them, or those named
	// in only), unless known for less than SENSOR_TTL_MS (force: read anyway). One redraw.
	const sensorGate = limiter(SENSOR_CONCURRENCY);
	async function loadSensors(name, only, force) {
		const r = st.racks.get(name);
		if (!r?.elev || !r.power) return;
		const placed = new Set(r.elev.nodes.map((n) => n.name));
		const read = new Set(r.power.nodes.filter((n) => n.read_at).map((n) => n.node));
		const now = Date.now();
		const want = (only ?? [...placed]).filter((n) => placed.has(n) && read.has(n) &&
			(force || !st.hot.has(n) || now - st.hot.get(n).at > SENSOR_TTL_MS));
		if (!want.length) return;
		let failed = null;
		await Promise.all(want.map((n) => sensorGate(async () => {
			if (signal.aborted) return;
			try {
				const s = await api(`/v1/nodes/${seg(n)}/sensors`, { signal });
				st.hot.set(n, { s: hottest(s.sensors), at: Date.now() });
			} catch (e) {
				if (e.name === 'AbortError') return;
				if (e.status === 404) st.hot.delete(n); // deleted meanwhile
				else failed = e;
			}
		})));
		if (!signal.aborted) {
			if (failed) st.sensorErrors.set(name, failed);
			else st.sensorErrors.delete(name);
			draw(r);
			showNotes();
		}
	}

	// A rack's elevation and power; its sensors then go through the gate while the next racks
	// load (they do not hold a place in the pool of racks).
	async function loadAll(name) {
		await Promise.all([loadRack(name), loadPower(name)]);
		loadSensors(name);
	}

	async function load() {
		try {
			const [racks] = await Promise.all([all('/v1/racks', { sort: 'name' }, { signal }), loadOverlays()]);
			st.racks = new Map(racks.map((r) => [r.name, { rack: r, elev: null, bmc: new Map(), card: null, power: null, history: null }]));
			st.nodeRack.clear();
			layout();
			await pool([...st.racks.keys()], 6, loadAll);
			updateSummary();
		} catch (e) {
			if (e.name !== 'AbortError') clear(body, errorBox(e, 'Cannot load racks'));
		}
	}

	function showNotes() {
		const sensorError = st.sensorErrors.values().next().value;
		clear(notes, ...st.overlayErrors.map((e) => errorBox(e, 'Health overlay unavailable')),
			sensorError ? errorBox(sensorError, 'Hottest sensors unavailable') : null);
	}

	// Sites, then rows, then racks, by name; the cards are filled as elevations arrive.
	function layout() {
		clear(body);
		if (!st.racks.size) {
			body.append(h('p', { class: 'muted' }, 'No racks yet. Create one with POST /v1/racks or import a manifest.'));
			return;
		}
		const sites = new Map();
		for (const r of st.racks.values()) {
			const site = r.rack.site ?? '';
			const row = r.rack.row ?? '';
			if (!sites.has(site)) sites.set(site, new Map());
			const rows = sites.get(site);
			if (!rows.has(row)) rows.set(row, []);
			rows.get(row).push(r);
		}
		const byName = (a, b) => (a[0] || '\uffff').localeCompare(b[0] || '\uffff');
		for (const [site, rows] of [...sites].sort(byName)) {
			const sec = h('section', { class: 'site', 'data-site': site },
				h('h2', {}, site ? `Site ${site}` : 'No site'));
			for (const [row, list] of [...rows].sort(byName)) {
				const line = h('div', { class: 'rack-line' });
				for (const r of list) {
					r.card = h('section', { class: 'rack', 'data-rack': r.rack.name },
						h('h3', {}, r.rack.name, ' ', h('span', { class: 'muted' }, `${r.rack.height_u}U`)),
						h('div', { class: 'muted' }, 'Loading…'));
					line.append(r.card);
				}
				sec.append(h('div', { class: 'row-group', 'data-row': row },
					h('h3', { class: 'row-title' }, row ? `Row ${row}` : 'No row'), line));
			}
			body.append(sec);
		}
	}

	function health(name, bmc) {
		const marks = [];
		if (bmc?.fault) marks.push(['BMC', 'h-fault', `BMC fault: ${bmc.fault.message} (${bmc.fault.failures} failures)`]);
		if (st.fw.has(name)) marks.push(['FW', 'h-drift', 'firmware drift: ' +
			st.fw.get(name).map((c) => `${c.component} ${c.actual ?? 'unread'} → ${c.desired}`).join(', ')]);
		if (st.bios.has(name)) marks.push(['BIOS', 'h-drift', `BIOS drift: ${st.bios.get(name).length} attribute(s)`]);
		if (st.failed.has(name)) {
			const j = st.failed.get(name);
			marks.push(['JOB', 'h-fault', `latest job failed: ${j.type}: ${j.error?.message ?? j.error?.code ?? ''}`]);
		}
		return marks;
	}

	function draw(r) {
		if (!r.card || (!r.elev && !r.error)) return; // the elevation first
		const head = h('h3', {}, r.rack.name, ' ',
			h('span', { class: 'muted' }, r.elev ? `${r.elev.nodes.length + r.elev.unplaced.length} nodes · ${r.elev.height_u}U` : `${r.rack.height_u}U`),
			' ', h('a', { href: `#/acceptance/${seg(r.rack.name)}`, class: 'accept-link', title: 'acceptance report' }, 'acceptance'));
		if (r.error) {
			clear(r.card, head, powerBox(r), errorBox(r.error, 'Cannot load elevation'));
			return;
		}
		const e = r.elev;
		const H = e.height_u;
		const height = TOP * 2 + H * UH;
		const yOf = (u) => TOP + (H - u) * UH; // top edge of unit u
		const hatch = `hatch-${++drawings}`;
		const g = svg('svg', {
			class: 'elevation', viewBox: `0 0 ${WIDTH} ${height}`, width: WIDTH, height,
			role: 'img', 'aria-label': `Elevation of rack ${e.rack}`, 'data-height-u': H,
		},
		svg('defs', {}, svg('pattern', { id: hatch, width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
			svg('rect', { width: 6, height: 6, class: 'hatch-bg' }), svg('line', { x1: 0, y1: 0, x2: 0, y2: 6, class: 'hatch-line' }))),
		svg('rect', { class: 'frame', x: LEFT - 2, y: TOP - 2, width: NODE_W + 4, height: H * UH + 4, rx: 2 }));
		for (let u = H; u >= 1; u--) {
			g.append(svg('rect', { class: 'slot', 'data-u': u, x: LEFT, y: yOf(u), width: NODE_W, height: UH }),
				svg('text', { class: 'u-label', x: LEFT - 4, y: yOf(u) + UH - 3.5, 'text-anchor': 'end' }, String(u)));
		}
		for (const n of e.nodes) g.append(nodeShape(n, r.bmc.get(n.name), yOf, hatch));
		const marks = e.nodes.concat(e.unplaced).flatMap((n) => health(n.name, r.bmc.get(n.name)));
		const pw = powerBox(r);
		const unplaced = e.unplaced.length
			? h('div', { class: 'unplaced' }, h('span', { class: 'muted' }, 'No U position: '),
				e.unplaced.slice(0, UNPLACED_MAX).map((n) => h('a', { href: `#/node/${seg(n.name)}`, class: ['chip', stateClass(n.provision_state)] }, n.name)),
				e.unplaced.length > UNPLACED_MAX
					? h('a', { href: `#/nodes?rack=${encodeURIComponent(e.rack)}` }, `+${e.unplaced.length - UNPLACED_MAX} more`) : null)
			: null;
		clear(r.card, head, pw, g, unplaced);
		r.card.classList.toggle('has-fault', marks.some((m) => m[1] === 'h-fault'));
		r.card.classList.toggle('over-limit', !!r.power && isOver(r.power));
	}

	// The rack's draw: the bar with its limit line, the numbers, the 24 h sparkline.
	function powerBox(r) {
		if (r.powerError) return h('div', { class: 'rack-power', 'data-state': 'error' }, errorBox(r.powerError, 'Power unavailable'));
		const p = r.power;
		if (!p) return h('div', { class: 'rack-power muted', 'data-state': 'loading' }, 'Loading power…');
		const state = powerState(p);
		const spark = sparkline(r.history, p.limit_w);
		return h('div', {
			class: ['rack-power', `pw-${state}`], 'data-state': state, 'data-over-limit': String(isOver(p)),
			'data-measured-w': p.measured_w ?? undefined, 'data-budget-w': p.budget_w ?? undefined,
			'data-limit-w': p.limit_w ?? undefined, 'data-headroom-w': p.headroom_w ?? undefined,
		},
		powerBar(p),
		h('div', { class: 'power-text' }, powerText(p)),
		state === 'over' ? h('div', { class: 'power-over' }, `over its limit by ${((p.measured_w - p.limit_w) / 1000).toFixed(1)} kW`) : null,
		spark ?? h('div', { class: 'muted spark-none' }, 'no draw recorded in the last 24 h'));
	}

	function nodeShape(n, bmc, yOf, hatch) {
		const top = n.u_position + n.u_height - 1;
		const y = yOf(top) + 1;
		const hgt = n.u_height * UH - 2;
		const x = LEFT + 1;
		const marks = health(n.name, bmc);
		const open = () => { location.hash = `#/node/${seg(n.name)}`; };
		const g = svg('g', {
			class: ['node', stateClass(n.provision_state), `pw-${n.power_state}`, n.maintenance && 'maint',
				marks.some((m) => m[1] === 'h-fault') && 'fault'],
			'data-node': n.name, 'data-u': n.u_position, 'data-u-height': n.u_height,
			'data-state': n.provision_state, 'data-power': n.power_state,
			'data-health': marks.map((m) => m[0]).join(' ') || undefined,
			tabindex: 0, role: 'link', 'aria-label': `${n.name}, U${n.u_position}, ${n.provision_state}`,
			onclick: open, onkeydown: (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); open(); } },
		},
		svg('title', {}, [`${n.name} — U${n.u_position}${n.u_height > 1 ? `-${top}` : ''}`,
			`${n.provision_state}, power ${n.power_state}${n.maintenance ? ', maintenance' : ''}`,
			n.node_class ? `class ${n.node_class}` : null, ...marks.map((m) => m[2])].filter(Boolean).join('\n')),
		svg('rect', { class: 'back', x, y, width: NODE_W - 2, height: hgt, rx: 2 }),
		svg('rect', { class: 'body', x, y, width: NODE_W - 2, height: hgt, rx: 2 }),
		n.maintenance ? svg('rect', { class: 'maint-fill', x, y, width: NODE_W - 2, height: hgt, rx: 2, fill: `url(#${hatch})` }) : null,
		svg('circle', { class: 'power', cx: x + 7, cy: y + Math.min(hgt, UH) / 2, r: 3 }),
		svg('text', { class: 'name', x: x + 14, y: y + Math.min(hgt, UH) / 2 + 3.6 },
			short(n.name, (marks.length ? 22 - marks.length * 3 : 30) - (st.hot.get(n.name)?.s ? 4 : 0))));
		if (n.u_height >= 2)
			g.append(svg('text', { class: 'sub', x: x + 14, y: y + UH + 9 },
				`${n.provision_state}${n.maintenance ? ' · maint' : ''}${n.node_class ? ` · ${short(n.node_class, 18)}` : ''}`));
		let bx = x + NODE_W - 4;
		for (const [label, cls] of [...marks].reverse()) {
			const w = label.length * 6 + 6;
			bx -= w + 2;
			g.append(svg('g', { class: ['mark', cls] },
				svg('rect', { x: bx, y: y + 2, width: w, height: Math.min(hgt, UH) - 4, rx: 2 }),
				svg('text', { x: bx + w / 2, y: y + Math.min(hgt, UH) / 2 + 3, 'text-anchor': 'middle' }, label)));
		}
		const hot = st.hot.get(n.name)?.s;
		if (hot) {
			const label = `${Math.round(hot.value)}°`;
			const w = label.length * 5.5 + 6;
			bx -= w + 2;
			g.append(svg('g', {
				class: ['temp', `t-${hot.health ?? 'ok'}`], 'data-sensor': hot.name, 'data-value': hot.value, 'data-health': hot.health,
			},
			svg('title', {}, `hottest sensor: ${hot.name} ${reading(hot.value, hot.unit)}, ${hot.health}` +
				(hot.thresholds ? ` (${thresholdText(hot.thresholds, hot.unit)})` : '')),
			svg('rect', { x: bx, y: y + 2, width: w, height: Math.min(hgt, UH) - 4, rx: 2 }),
			svg('text', { x: bx + w / 2, y: y + Math.min(hgt, UH) / 2 + 3, 'text-anchor': 'middle' }, label)));
		}
		return g;
	}

	function updateSummary() {
		const counts = { total: 0, 'st-ok': 0, 'st-ready': 0, 'st-busy': 0, 'st-fail': 0, maint: 0, fault: 0, drift: 0, over: 0 };
		for (const r of st.racks.values()) {
			if (r.power && isOver(r.power)) counts.over++;
			if (!r.elev) continue;
			for (const n of r.elev.nodes.concat(r.elev.unplaced)) {
				counts.total++;
				counts[stateClass(n.provision_state)] = (counts[stateClass(n.provision_state)] ?? 0) + 1;
				if (n.maintenance) counts.maint++;
				const m = health(n.name, r.bmc.get(n.name));
				if (m.some((x) => x[1] === 'h-fault')) counts.fault++;
				if (m.some((x) => x[1] === 'h-drift')) counts.drift++;
			}
		}
		clear(summary, 
			h('span', { class: 'stat' }, h('b', {}, String(st.racks.size)), ' racks'),
			h('span', { class: 'stat' }, h('b', { id: 'node-total' }, String(counts.total)), ' nodes'),
			h('span', { class: 'stat st-ok-t' }, h('b', {}, String(counts['st-ok'])), ' deployed'),
			h('span', { class: 'stat st-ready-t' }, h('b', {}, String(counts['st-ready'])), ' ready'),
			h('span', { class: 'stat st-busy-t' }, h('b', {}, String(counts['st-busy'])), ' in progress'),
			h('span', { class: 'stat st-fail-t' }, h('b', {}, String(counts['st-fail'])), ' failed'),
			h('span', { class: 'stat' }, h('b', {}, String(counts.maint)), ' maintenance'),
			h('span', { class: ['stat', counts.fault && 'alarm'] }, h('b', {}, String(counts.fault)), ' faults'),
			h('span', { class: ['stat', counts.drift && 'warn'] }, h('b', {}, String(counts.drift)), ' drifted'),
			h('span', { class: ['stat', counts.over && 'alarm'] }, h('b', { id: 'racks-over' }, String(counts.over)), ' over power limit'));
	}

	// Live: redraw only the racks an event touches.
	const pending = new Set();
	const pendingPower = new Set(); // racks whose draw to read again
	const pendingSensors = new Set(); // nodes whose hottest sensor to read again
	let full = false;
	let overlays = false;
	let sweep = false;
	const flush = batch(async () => {
		const racks = [...pending];
		const power = [...pendingPower];
		const sensors = [...pendingSensors];
		pending.clear();
		pendingPower.clear();
		pendingSensors.clear();
		try {
			if (full) {
				full = false;
				overlays = false;
				sweep = false;
				return await load();
			}
			if (overlays) {
				overlays = false;
				await loadOverlays();
				for (const r of st.racks.values()) if (r.elev) draw(r);
			}
			if (sweep) {
				// A sensor sweep ended: every rack's draw again (and labels older than the TTL).
				sweep = false;
				await pool([...st.racks.keys()], 6, async (n) => { await loadPower(n); loadSensors(n); });
			}
			await Promise.all([
				...racks.filter((n) => st.racks.has(n)).map(loadRack),
				...power.filter((n) => st.racks.has(n)).map(loadPower),
			]);
			const byRack = new Map();
			for (const n of sensors) {
				const rack = st.nodeRack.get(n);
				if (rack) byRack.set(rack, [...(byRack.get(rack) ?? []), n]);
			}
			await Promise.all([...byRack].map(([rack, list]) => loadSensors(rack, list, true)));
			updateSummary();
		} catch (e) {
			if (e.name !== 'AbortError') clear(notes, errorBox(e, 'Live update failed'));
		}
	}, 250);

	function onEvent(ev) {
		const o = ev.object ?? {};
		const a = ev.action ?? '';
		// A crossing of the limit, or a change of only the rack's power settings (budget, limit
		// %, cap policy): that rack's draw again, nothing else.
		const powerOnly = a === 'rack.updated' && ev.detail && typeof ev.detail === 'object' &&
			Object.keys(ev.detail).length && Object.keys(ev.detail).every((k) => k.startsWith('power_'));
		if (o.type === 'rack' && (a === 'rack.power_over_limit' || a === 'rack.power_ok' || powerOnly)) {
			if (!st.racks.has(o.name)) return;
			pendingPower.add(o.name);
		} else if (o.type === 'node' && a.startsWith('sensor.')) {
			if (!st.nodeRack.has(o.name)) return;
			pendingSensors.add(o.name);
		} else if (o.type === 'rack' || a === 'import.applied' || a === 'node.created' || a === 'node.deleted') full = true;
		else if (o.type === 'node' || o.type === 'job') {
			const rack = st.nodeRack.get(o.name);
			if (!rack) return;
			if (a === 'node.updated' && ev.detail && ('rack' in ev.detail || 'u_position' in ev.detail || 'u_height' in ev.detail)) full = true;
			if (a.startsWith('job.') && a !== 'job.queued') overlays = true;
			if (a === 'node.firmware_read' || a === 'node.bios_read') overlays = true;
			pending.add(rack);
		} else if (o.type === 'firmware_baseline' || o.type === 'bios_profile') overlays = true;
		else return;
		flush();
	}

	load();
	watchSweeps(signal, () => { sweep = true; flush(); });
	return { onEvent, onGap: () => { full = true; flush(); }, destroy: () => ctrl.abort() };
}

function legend() {
	return h('div', { class: 'legend' },
		badge('deployed', 'st-ok'), badge('ready', 'st-ready'), badge('in progress', 'st-busy'),
		badge('manageable', 'st-manage'), badge('failed', 'st-fail'), badge('discovered', 'st-new'), badge('enrolled', 'st-idle'),
		badge('maintenance', 'maint-b'), badge('BMC/JOB fault', 'h-fault'), badge('FW/BIOS drift', 'h-drift'),
		h('span', { class: 'muted' }, 'dim = powered off · 24° = hottest sensor (green ok, amber warning, red critical)'));
}
