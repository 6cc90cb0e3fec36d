// A rack's acceptance report: the node × check grid, the checks across nodes (the fabric
// matrix of pairs × ports, the NCCL run), every failure and skip with its evidence and fix, the
// sign-offs; the printable page downloads as a file (it needs the token too).

import { api, seg } from './api.js';
import { badge, card, clear, errorBox, fill, fmtTime, h, show, table } from './dom.js';

const CELL = { passed: 'st-ok', failed: 'st-fail', skipped: 'st-idle', pending: 'st-busy', running: 'st-busy' };
const RUN = { passed: 'st-ok', failed: 'st-fail', running: 'st-busy' };

async function download(rack) {
	const html = await api(`/v1/racks/${seg(rack)}/acceptance?format=html`, { text: true });
	const a = h('a', {
		href: URL.createObjectURL(new Blob([html], { type: 'text/html' })),
		download: `acceptance-${rack}.html`,
	});
	document.body.append(a);
	a.click();
	a.remove();
	setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

function grid(run) {
	const g = run.grid ?? { nodes: [], checks: [], cells: {} };
	return table(['Node', ...g.checks], g.nodes.map((n) => h('tr', { 'data-node': n },
		h('td', {}, h('a', { href: `#/node/${seg(n)}` }, n)),
		g.checks.map((c) => {
			const st = g.cells[n]?.[c] ?? '';
			return h('td', { 'data-check': c, 'data-state': st }, st ? badge(st, CELL[st] ?? '') : '');
		}))), 'accept-grid');
}

// Gb/s with 2 decimals; a figure the API does not have (not measured, no line rate) is '—'.
function gbps(v) {
	return typeof v === 'number' && Number.isFinite(v) ? v.toFixed(2) : '—';
}

// What a test's tool printed: client and server side, as text.
function outputOf(pair, t) {
	const o = t.output && typeof t.output === 'object' ? t.output : {};
	const side = (name, node, text) => [
		h('div', { class: 'muted' }, `${name} (${node ?? '?'})`),
		typeof text === 'string' && text !== '' ? h('pre', { class: 'out', 'data-side': name }, text) : h('p', { class: 'muted', 'data-side': name }, 'no output'),
	];
	return h('div', { class: 'fabric-test' },
		h('h3', {}, `Round ${pair.round}: ${pair.server} ← ${pair.client ?? '?'}, ${show(t.port)} (${show(t.tool)})`),
		h('p', {}, badge(t.state ?? 'pending', CELL[t.state ?? 'pending'] ?? ''), ' ', show(t.message ?? t.skip)),
		side('client', pair.client, o.client), side('server', pair.server, o.server));
}

// The fabric matrix: a row per pair (round, server ← client), a column per port seen in any
// test; each cell measured / least expected. sel ({round, server, client, port}) is the cell
// whose output shows, kept across reloads of the report.
function fabric(run, sel) {
	const rows = (run.pairs ?? []).filter((p) => p.kind === 'fabric');
	if (!rows.length) return null;
	const ports = [];
	for (const p of rows) {
		for (const t of Array.isArray(p.tests) ? p.tests : [])
			if (typeof t?.port === 'string' && !ports.includes(t.port)) ports.push(t.port);
	}
	const out = h('div', { id: 'fabric-output' }, h('p', { class: 'muted' }, 'Select a cell to see what the tools printed.'));
	const same = (p, port) => sel.v && sel.v.round === p.round && sel.v.server === p.server && sel.v.client === p.client && sel.v.port === port;
	const shown = (p, t, btn) => {
		for (const b of btn.closest('table').querySelectorAll('button.fab-cell[aria-pressed="true"]')) b.setAttribute('aria-pressed', 'false');
		btn.setAttribute('aria-pressed', 'true');
		clear(out, outputOf(p, t));
	};
	const cells = [];
	const table = h('table', { class: ['grid', 'fabric-matrix'] },
		h('thead', {}, h('tr', {}, h('th', {}, 'Round'), h('th', {}, 'Server ← client'),
			ports.map((port) => h('th', { 'data-port': port }, port)), h('th', {}, 'Pair'))),
		h('tbody', {}, rows.map((p) => h('tr', { 'data-round': p.round, 'data-server': p.server, 'data-client': p.client ?? '' },
			h('td', {}, show(p.round)),
			h('td', {}, p.server, ' ← ', p.client ?? '?'),
			ports.map((port) => {
				const t = (Array.isArray(p.tests) ? p.tests : []).find((x) => x?.port === port);
				if (!t) return h('td', { 'data-port': port });
				const st = t.state ?? 'pending';
				const btn = h('button', {
					type: 'button', class: ['badge', 'fab-cell', CELL[st] ?? ''], title: t.message ?? t.skip ?? undefined,
					'aria-pressed': 'false', 'aria-controls': 'fabric-output',
				}, `${gbps(t.measured_gbps)} / ${gbps(t.min_gbps)}`);
				btn.addEventListener('click', () => {
					sel.v = { round: p.round, server: p.server, client: p.client, port };
					shown(p, t, btn);
				});
				if (same(p, port)) cells.push([p, t, btn]);
				return h('td', { 'data-port': port, 'data-state': st, 'data-tool': t.tool ?? undefined }, btn);
			}),
			h('td', { class: 'fab-pair', 'data-state': p.state }, badge(p.state, CELL[p.state] ?? ''), ' ', show(p.message))))));
	for (const [p, t, btn] of cells) shown(p, t, btn);
	return h('section', { class: 'fabric', id: 'fabric' },
		h('h3', {}, 'Fabric'),
		h('p', { class: 'muted' }, 'Each cell: measured / least expected, Gb/s.'),
		h('div', { class: 'fabric-scroll' }, table), out);
}

// The NCCL run across the rack: its state and message, each rank's node and state.
function nccl(run) {
	const rows = (run.pairs ?? []).filter((p) => p.kind === 'nccl');
	if (!rows.length) return null;
	return h('section', { class: 'nccl', id: 'nccl' }, h('h3', {}, 'NCCL'), rows.map((p) => {
		const ranks = Array.isArray(p.tests) ? p.tests : [];
		return [
			h('p', { class: 'nccl-state', 'data-state': p.state }, badge(p.state, CELL[p.state] ?? ''), ' ', show(p.message)),
			table(['Rank', 'Node', 'State', 'Exit', 'Bus bandwidth (GB/s)', 'Output'], ranks.map((r) =>
				h('tr', { 'data-rank': r?.rank, 'data-node': r?.node },
					h('td', {}, show(r?.rank)), h('td', {}, show(r?.node)),
					h('td', {}, badge(r?.state ?? 'pending', CELL[r?.state ?? 'pending'] ?? '')),
					h('td', {}, show(r?.exit_code)),
					h('td', {}, typeof r?.busbw_gbytes_s === 'number'
						? `${gbps(r.busbw_gbytes_s)}${typeof r.min_busbw_gbytes_s === 'number' ? ` (least ${gbps(r.min_busbw_gbytes_s)})` : ''}`
						: '—'),
					h('td', {}, typeof r?.output === 'string' && r.output !== ''
						? h('details', {}, h('summary', {}, 'output'), h('pre', { class: 'out' }, r.output))
						: '—'))), 'nccl-ranks'),
		];
	}));
}

function problems(run) {
	const rows = (run.results ?? []).filter((r) => r.state === 'failed' || r.state === 'skipped');
	return table(['Node', 'Check', 'State', 'Evidence', 'Suggested fix'], rows.map((r) =>
		h('tr', { 'data-node': r.node, 'data-check': r.check },
			h('td', {}, r.node), h('td', {}, r.check), h('td', {}, badge(r.state, CELL[r.state] ?? '')),
			h('td', {}, h('div', {}, show(r.message)),
				(r.findings ?? []).map((f) => h('div', { class: 'muted' }, `· ${f.message}`))),
			h('td', {}, show(r.fix)))));
}

export function render(main, ctx, r) {
	const rack = r.arg;
	const ac = new AbortController();
	const head = h('div', { class: 'page-head' }, h('h1', {}, `Acceptance of rack ${rack}`));
	const c = card('Report');
	const sel = { v: null }; // the fabric cell whose output shows
	main.append(head, c.el);

	async function load() {
		let run;
		try {
			run = await api(`/v1/racks/${seg(rack)}/acceptance`, { signal: ac.signal });
		} catch (e) {
			if (e.status === 404)
				return h('p', { class: 'muted', id: 'no-run' }, 'No acceptance run of this rack yet (POST /v1/racks/RACK/acceptance, see docs/acceptance.md).');
			throw e;
		}
		const btn = h('button', { type: 'button', id: 'print-report' }, 'Download printable report');
		btn.addEventListener('click', () => download(rack).catch((e) => clear(note, errorBox(e))));
		const note = h('div', {});
		return [
			h('p', { id: 'run-state' }, badge(run.state, RUN[run.state] ?? ''),
				` attempt ${run.attempt}, started ${fmtTime(run.created_at)} by ${run.created_by}`,
				run.finished_at ? `, finished ${fmtTime(run.finished_at)}` : ' (running)'),
			grid(run),
			fabric(run, sel), nccl(run),
			h('h3', {}, 'Failures and skips'), problems(run),
			h('h3', {}, 'Sign-off'),
			(run.signoffs ?? []).length
				? run.signoffs.map((s) => h('p', {}, `Signed off by ${s.signed_by} at ${fmtTime(s.signed_at)} (report ${s.report_sha256.slice(0, 12)}…)`))
				: h('p', { class: 'muted' }, 'Not signed off.'),
			h('p', { class: 'muted' }, `Report sha256 ${run.report_sha256}`), btn, note,
		];
	}
	fill(c.body, load);
	return {
		onEvent(ev) {
			if (ev.object?.type === 'rack' && ev.object?.name === rack) fill(c.body, load);
			else if (ev.action?.startsWith('job.')) fill(c.body, load);
		},
		onGap() { fill(c.body, load); },
		destroy() { ac.abort(); },
	};
}
