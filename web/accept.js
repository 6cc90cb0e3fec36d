// A rack's acceptance report: the node × check grid, every failure and skip with its evidence
// and fix, the sign-offs; the printable page downloads as a file (it needs the token too).

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
