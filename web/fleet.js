// Fleet: firmware and BIOS drift across all nodes, and rollouts with per-wave progress.

import { api, seg, url } from './api.js';
import { badge, batch, card, clear, fill, h, show, table, when } from './dom.js';

const MAX_ROWS = 200;
const ROLLOUT_STATES = { scheduled: 'st-idle', running: 'st-busy', paused: 'h-drift', completed: 'st-ok', aborted: 'st-fail' };
const NODE_STATES = ['succeeded', 'failed', 'running', 'pending', 'skipped'];

// A bar segment; widths go through the CSSOM (the CSP allows no style attributes).
function barSeg(cls, pct, title) {
	const el = h('div', { class: ['seg', cls], title, 'data-pct': pct });
	el.style.width = `${pct}%`;
	return el;
}

function nodeLink(n) {
	return h('a', { href: `#/node/${seg(n)}` }, n);
}

function driftView(d, kind) {
	const items = d.items ?? [];
	const pct = d.nodes_checked ? Math.round((100 * d.nodes_drifted) / d.nodes_checked) : 0;
	return [
		h('div', { class: 'drift-head' },
			h('span', { class: ['big-num', d.nodes_drifted ? 'warn' : 'good'], id: `${kind}-drifted` }, String(d.nodes_drifted)),
			h('span', {}, ` of ${d.nodes_checked} checked nodes drift`),
			h('div', { class: 'bar' }, barSeg('drifted', pct, `${pct}% drift`))),
		items.length ? table(['Node', 'Rack', 'Class', kind === 'fw' ? 'Baseline' : 'Profile', 'Differences'],
			items.slice(0, MAX_ROWS).map((i) => h('tr', { 'data-node': i.node },
				h('td', {}, nodeLink(i.node)), h('td', {}, show(i.rack)), h('td', {}, show(i.node_class)),
				h('td', {}, kind === 'fw' ? i.baseline : i.profile),
				h('td', {}, kind === 'fw'
					? i.components.map((c) => h('div', {}, h('code', {}, c.component), ` ${c.actual ?? 'unread'} → ${c.desired}`))
					: [h('span', {}, `${i.attributes.length} attribute(s): `),
						i.attributes.slice(0, 4).map((a) => h('div', {}, h('code', {}, a.name), ` ${show(a.actual)} → ${show(a.desired)}`)),
						i.attributes.length > 4 ? h('div', { class: 'muted' }, `… ${i.attributes.length - 4} more`) : null]))), kind)
			: h('p', { class: 'muted' }, d.nodes_checked ? 'Every checked node matches.' : 'No node has a desired state to check against.'),
		items.length > MAX_ROWS ? h('p', { class: 'muted' }, `… and ${items.length - MAX_ROWS} more nodes`) : null,
	];
}

// A stacked bar: one segment per node state, as a share of the wave's nodes.
function progress(counts, total) {
	const bar = h('div', { class: 'bar' });
	for (const s of NODE_STATES) {
		const n = counts?.[s] ?? 0;
		if (n && total) bar.append(barSeg(s, (100 * n) / total, `${n} ${s}`));
	}
	return bar;
}

function counts(c) {
	return NODE_STATES.filter((s) => c?.[s]).map((s) => `${c[s]} ${s}`).join(' · ') || 'no nodes';
}

function rolloutView(ro) {
	const waves = ro.waves ?? [];
	return h('div', { class: 'rollout', 'data-rollout': ro.id, 'data-state': ro.state },
		h('div', { class: 'rollout-head' },
			h('b', {}, `${ro.kind} rollout`), ' ', badge(ro.state, ROLLOUT_STATES[ro.state]), ' ',
			h('span', { class: 'muted mono' }, ro.id.slice(0, 8)), ' ',
			h('span', { class: 'muted' }, `${Object.entries(ro.selector ?? {}).map(([k, v]) => `${k} ${Array.isArray(v) ? v.join(', ') : v}`).join(' ')} · by ${ro.created_by} · `), when(ro.created_at),
			ro.reason ? h('div', { class: 'err-msg' }, ro.reason) : null),
		h('div', { class: 'muted' }, `${ro.counts?.total ?? 0} nodes: ${counts(ro.counts)}`,
			ro.failures ? ` · failures ${ro.failures.current}/${ro.failures.max}` : '',
			ro.estimated_finish_at ? [' · finishes ', when(ro.estimated_finish_at)] : '',
			ro.state === 'scheduled' && ro.start_at ? [' · starts ', when(ro.start_at)] : ''),
		progress(ro.counts, ro.counts?.total),
		waves.length ? table(['Wave', 'State', 'Nodes', 'Progress', 'Started', 'Gate done'], waves.map((w) => h('tr', { 'data-wave': w.index },
			h('td', {}, `${w.index}${w.canary ? ' (canary)' : ''}`), h('td', {}, badge(w.state, { done: 'st-ok', running: 'st-busy', gating: 'st-busy', pending: 'st-idle' }[w.state])),
			h('td', { class: 'num' }, String(w.nodes)), h('td', { class: 'wave-progress' }, progress(w.counts, w.nodes), h('span', { class: 'muted' }, counts(w.counts))),
			h('td', {}, when(w.started_at)), h('td', {}, when(w.gate_done_at)))), 'waves') : null,
		ro.failed?.length ? h('details', {}, h('summary', {}, `${ro.failed.length} failed`),
			h('ul', {}, ro.failed.map((f) => h('li', {}, nodeLink(f.node), ` (wave ${show(f.wave)}): ${f.reason}`)))) : null,
		ro.skipped?.length ? h('details', {}, h('summary', {}, `${ro.skipped.length} skipped`),
			h('ul', {}, ro.skipped.map((f) => h('li', {}, nodeLink(f.node), `: ${f.reason}`)))) : null);
}

function jobsView(running, queued, failed) {
	const more = (pg) => `${pg.items.length}${pg.next_cursor ? '+' : ''}`;
	return [
		h('div', { class: 'drift-head' },
			h('span', { class: 'big-num', id: 'jobs-running' }, more(running)), h('span', {}, ' running · '),
			h('span', { class: 'big-num', id: 'jobs-queued' }, more(queued)), h('span', {}, ' queued')),
		h('h3', { class: 'sub-title' }, 'Latest failed jobs'),
		table(['Ended', 'Node', 'Job', 'Error'], failed.items.map((j) => h('tr', { 'data-job': j.id },
			h('td', {}, when(j.finished_at)), h('td', {}, nodeLink(j.node)), h('td', {}, j.type),
			h('td', { class: 'err-msg' }, j.error ? `${j.error.code}: ${j.error.message}` : '')))
		, 'failed-jobs'),
	];
}

export function render(main, ctx) {
	const ctrl = new AbortController();
	const signal = ctrl.signal;
	const cFw = card('Firmware drift');
	const cBios = card('BIOS drift');
	const cRo = card('Rollouts');
	const cJobs = card('Jobs');
	cJobs.el.id = 'card-jobs';
	cFw.el.id = 'card-fw-drift';
	cBios.el.id = 'card-bios-drift';
	cRo.el.id = 'card-rollouts';
	main.append(h('div', { class: 'toolbar' }, h('h1', {}, 'Fleet')),
		h('div', { class: 'fleet-grid' }, h('div', { class: 'col' }, cFw.el, cBios.el), h('div', { class: 'col wide' }, cRo.el, cJobs.el)));

	const loadFw = () => fill(cFw.body, async () => driftView(await api('/v1/firmware/drift', { signal }), 'fw'));
	const loadBios = () => fill(cBios.body, async () => driftView(await api('/v1/bios/drift', { signal }), 'bios'));
	// Active rollouts in full (waves); ended ones as summaries.
	const loadRo = () => fill(cRo.body, async () => {
		const pg = await api(url('/v1/rollouts', { limit: 20 }), { signal });
		if (!pg.items.length) return h('p', { class: 'muted' }, 'No rollouts. Start one with POST /v1/rollouts (docs/rollouts.md).');
		const full = await Promise.all(pg.items.map((ro) => ['scheduled', 'running', 'paused'].includes(ro.state) || pg.items.indexOf(ro) < 3
			? api(`/v1/rollouts/${seg(ro.id)}`, { signal }) : ro));
		return full.map(rolloutView);
	});
	const loadJobs = () => fill(cJobs.body, async () => {
		const fields = 'id,node,type,state,error,finished_at';
		const [running, queued, failed] = await Promise.all([['running', 100], ['queued', 100], ['failed', 10]].map(([state, limit]) =>
			api(url('/v1/jobs', { state, limit, fields }), { signal })));
		return jobsView(running, queued, failed);
	});
	loadFw();
	loadBios();
	loadRo();
	loadJobs();

	const fw = batch(loadFw, 1000);
	const bios = batch(loadBios, 1000);
	const ro = batch(loadRo, 1000);
	const jobs = batch(loadJobs, 1000);
	function onEvent(ev) {
		const a = ev.action ?? '';
		const t = ev.object?.type;
		if (a === 'node.firmware_read' || t === 'firmware_baseline' || a.startsWith('node.')) fw();
		if (a === 'node.bios_read' || t === 'bios_profile' || a.startsWith('node.')) bios();
		if (t === 'rollout' || t === 'job') ro();
		if (t === 'job') jobs();
	}
	return { onEvent, onGap: () => { loadFw(); loadBios(); loadRo(); loadJobs(); }, destroy: () => ctrl.abort() };
}
