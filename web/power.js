// Power: every rack's draw against its budget, the tightest first (headroom as a share of the
// budget, ascending; racks without a budget or a reading last), the fleet's totals, and the
// sensor sweep that measures them (operators can run one now).

import { api } from './api.js';
import { badge, batch, card, clear, fill, h, table, toast, toastError, when } from './dom.js';
import { isOver, kw, pct, powerBar, powerState, watchSweeps } from './meters.js';

// Ascending headroom_pct, nulls last, then by name.
export function byHeadroom(racks) {
	return [...racks].sort((a, b) => {
		const x = a.headroom_pct;
		const y = b.headroom_pct;
		const xn = x === null || x === undefined;
		const yn = y === null || y === undefined;
		if (xn !== yn) return xn ? 1 : -1;
		if (!xn && x !== y) return x - y;
		return a.rack.localeCompare(b.rack);
	});
}

function num(v) {
	return h('td', { class: 'num' }, kw(v));
}

function rackRow(p) {
	const st = powerState(p);
	const over = isOver(p);
	return h('tr', {
		class: [over && 'over'], 'data-rack': p.rack, 'data-state': st, 'data-over-limit': String(over),
		'data-headroom-pct': p.headroom_pct ?? undefined,
	},
	h('td', {}, h('a', { href: `#/nodes?rack=${encodeURIComponent(p.rack)}`, title: 'the rack’s nodes' }, p.rack)),
	num(p.measured_w), num(p.limit_w), num(p.budget_w),
	h('td', { class: ['num', 'headroom', over && 'bad'], title: p.headroom_w !== null && p.headroom_w !== undefined ? `${kw(p.headroom_w)} kW` : undefined }, pct(p.headroom_pct)),
	num(p.projected_w),
	h('td', { class: 'draw' }, powerBar(p, 160) ?? h('span', { class: 'muted' },
		st === 'unread' ? 'not read yet' : 'no budget')),
	h('td', { class: 'marker' }, over ? badge('over limit', 'st-fail', `draws ${kw(p.measured_w)} kW, limit ${kw(p.limit_w)} kW`)
		: st === 'ok' ? badge('ok', 'st-ok') : null),
	h('td', {}, when(p.read_at)));
}

function sweepText(s) {
	if (!s) return '';
	const every = s.interval_s ? `every ${s.interval_s} s` : 'periodic sweep off';
	if (s.running) return `reading sensors… (${every})`;
	if (!s.last) return `sensors not read yet (${every})`;
	return [`sensors read `, when(s.last.finished_at),
		`: ${s.last.ok} of ${s.last.nodes} nodes${s.last.failed ? `, ${s.last.failed} failed` : ''} (${every})`];
}

export function render(main, ctx) {
	const ctrl = new AbortController();
	const signal = ctrl.signal;
	const totals = h('div', { class: 'summary', id: 'power-totals' });
	const sweepInfo = h('span', { class: 'muted', id: 'sensor-sweep' });
	const btn = ctx.canAct
		? h('button', { type: 'button', class: 'action', id: 'sensors-sync', title: 'POST /v1/sensors/sync: read every node’s sensors now (it only reads)' }, 'Read sensors now')
		: null;
	const c = card('Racks by headroom');
	c.el.id = 'card-power';
	main.append(h('div', { class: 'toolbar' }, h('h1', {}, 'Power'), totals, h('span', { class: 'spacer' }), sweepInfo, btn), c.el);

	function paintTotals(pw) {
		const over = pw.racks.filter(isOver).length;
		const noBudget = pw.racks.filter((r) => r.budget_w === null || r.budget_w === undefined).length;
		clear(totals,
			h('span', { class: 'stat' }, h('b', { id: 'total-measured' }, kw(pw.measured_w)), ' kW measured'),
			h('span', { class: 'stat' }, ' of ', h('b', { id: 'total-budget' }, kw(pw.budget_w)), ' kW budgeted'),
			h('span', { class: ['stat', over && 'alarm'] }, h('b', { id: 'total-over' }, String(over)), ' over their limit'),
			h('span', { class: 'stat' }, h('b', {}, String(noBudget)), ' without a budget'),
			h('span', { class: 'stat' }, h('b', {}, String(pw.racks.length)), ' racks'));
	}

	const loadTable = () => fill(c.body, async () => {
		const pw = await api('/v1/power', { signal });
		paintTotals(pw);
		if (!pw.racks.length) return h('p', { class: 'muted' }, 'No racks yet.');
		return [
			table(['Rack', 'Measured kW', 'Limit kW', 'Budget kW', 'Headroom', 'Projected kW', 'Draw against budget', 'Over limit', 'Read'],
				byHeadroom(pw.racks).map(rackRow), 'power-racks'),
			h('p', { class: 'muted' }, 'Headroom: the limit (budget × limit %) less the measured draw, as a share of the budget. ' +
				'Projected: the measured draw with the power-ons admitted but not measured yet at their class’s max_power_w.'),
		];
	});

	let lastSweep = null;
	async function loadSweep() {
		try {
			lastSweep = await api('/v1/sensors/sync', { signal });
			clear(sweepInfo, sweepText(lastSweep));
		} catch (e) {
			if (e.name !== 'AbortError') clear(sweepInfo, h('span', { class: 'err-msg' }, `sensor sync: ${e.code}: ${e.message}`));
		}
		return lastSweep;
	}

	async function syncNow() {
		btn.disabled = true;
		try {
			const before = (await api('/v1/sensors/sync', { method: 'POST', body: {}, signal }))?.last?.finished_at ?? null;
			clear(sweepInfo, h('span', { class: 'spinner', 'aria-hidden': 'true' }), ' reading sensors…');
			let s = null;
			for (let i = 0; i < 600 && !signal.aborted; i++) {
				await new Promise((res) => setTimeout(res, 500));
				s = await api('/v1/sensors/sync', { signal });
				if (!s.running && (s.last?.finished_at ?? null) !== before) break;
			}
			if (signal.aborted) return;
			clear(sweepInfo, sweepText(s));
			if (s?.last) toast(`Sensors read: ${s.last.ok} of ${s.last.nodes} nodes${s.last.failed ? `, ${s.last.failed} failed` : ''}.`);
			await loadTable();
		} catch (e) {
			if (e.name === 'AbortError') return;
			toastError(e, 'Read sensors now failed');
			loadSweep();
		} finally {
			btn.disabled = false;
		}
	}
	btn?.addEventListener('click', syncNow);

	loadTable();
	loadSweep();
	const reload = batch(loadTable, 500);
	watchSweeps(signal, () => { reload(); loadSweep(); });
	function onEvent(ev) {
		// Budgets and limits (rack.updated), crossings (rack.power_*), racks made or removed.
		if (ev.object?.type === 'rack' || ev.action === 'import.applied') reload();
	}
	return { onEvent, onGap: () => { loadTable(); loadSweep(); }, destroy: () => ctrl.abort() };
}
