// Nodes: one page of GET /v1/nodes at a time (keyset paging with next_cursor), filtered and
// sorted by the server, so 10,000 nodes cost what one page costs. The API sorts by creation
// or by name (ascending) and searches by substring of name or serial (q, case-sensitive);
// that is all this table offers.

import { all, api, seg, url } from './api.js';
import { badge, batch, clear, debounce, errorBox, h, powerBadge, STATES, stateBadge } from './dom.js';

const FIELDS = 'name,rack,u_position,u_height,node_class,provision_state,power_state,maintenance,tags,bmc,serial';
const FILTERS = ['q', 'rack', 'state', 'class', 'tag', 'power', 'maintenance'];

export function render(main, ctx, r) {
	const ctrl = new AbortController();
	const signal = ctrl.signal;
	const f = Object.fromEntries(FILTERS.map((k) => [k, r.params[k] ?? '']));
	let sort = r.params.sort === 'name' ? 'name' : 'created';
	let limit = Number(r.params.limit);
	if (!Number.isInteger(limit) || limit < 1 || limit > 1000) limit = 100;
	let cursors = [undefined]; // cursors[i]: the cursor of page i
	let page = 0;
	let seq = 0;
	let visible = new Set();

	const q = h('input', { type: 'search', id: 'f-q', placeholder: 'name or serial contains…', value: f.q, 'aria-label': 'Search name or serial' });
	const rack = h('select', { id: 'f-rack', 'aria-label': 'Rack' }, h('option', { value: '' }, 'all racks'));
	const state = h('select', { id: 'f-state', 'aria-label': 'Provision state' }, h('option', { value: '' }, 'all states'),
		STATES.map((s) => h('option', { value: s, selected: s === f.state }, s)));
	const cls = h('input', { type: 'text', id: 'f-class', placeholder: 'class', value: f.class, 'aria-label': 'Node class', size: 14 });
	const tag = h('input', { type: 'text', id: 'f-tag', placeholder: 'tag', value: f.tag, 'aria-label': 'Tag', size: 10 });
	const power = h('select', { id: 'f-power', 'aria-label': 'Power' }, h('option', { value: '' }, 'any power'),
		['on', 'off', 'unknown'].map((s) => h('option', { value: s, selected: s === f.power }, `power ${s}`)));
	const maint = h('select', { id: 'f-maint', 'aria-label': 'Maintenance' }, h('option', { value: '' }, 'any maintenance'),
		h('option', { value: 'true', selected: f.maintenance === 'true' }, 'in maintenance'),
		h('option', { value: 'false', selected: f.maintenance === 'false' }, 'not in maintenance'));
	const size = h('select', { id: 'f-limit', 'aria-label': 'Page size' },
		[...new Set([50, 100, 200, 500, limit])].sort((a, b) => a - b).map((n) => h('option', { value: n, selected: n === limit }, `${n} / page`)));
	const reset = h('button', { type: 'button', class: 'link' }, 'clear filters');
	const status = h('span', { class: 'muted', id: 'nodes-status' });
	const err = h('div', { class: 'notes' });
	const tbody = h('tbody', { id: 'nodes-rows' });
	const sortHead = h('th', { class: 'sortable', id: 'sort-name', title: 'Sort by name (the API sorts ascending by name or by creation)' });
	const prev = h('button', { type: 'button', id: 'prev', disabled: true }, '‹ Previous');
	const next = h('button', { type: 'button', id: 'next', disabled: true }, 'Next ›');

	main.append(
		h('div', { class: 'toolbar' }, h('h1', {}, 'Nodes'), q, rack, state, cls, tag, power, maint, size, reset,
			h('span', { class: 'spacer' }), status),
		err,
		h('table', { class: 'grid nodes', id: 'nodes' },
			h('thead', {}, h('tr', {}, sortHead, h('th', {}, 'Rack'), h('th', { class: 'num' }, 'U'), h('th', {}, 'Class'),
				h('th', {}, 'State'), h('th', {}, 'Power'), h('th', {}, 'Maint.'), h('th', {}, 'Tags'), h('th', {}, 'BMC'),
				h('th', {}, 'Serial'))),
			tbody),
		h('div', { class: 'pager' }, prev, next, h('span', { class: 'muted', id: 'page-no' }),
			h('span', { class: 'muted' }, ' · search and filters run on the server (name/serial substring, case-sensitive)')));

	function paintSort() {
		clear(sortHead, 'Name ', h('span', { class: 'muted' }, sort === 'name' ? '▲ name' : '(creation order)'));
	}

	function read() {
		f.q = q.value.trim();
		f.rack = rack.value;
		f.state = state.value;
		f.class = cls.value.trim();
		f.tag = tag.value.trim();
		f.power = power.value;
		f.maintenance = maint.value;
		limit = Number(size.value);
	}

	// Keep the filters in the address (shareable) without a hashchange re-render.
	function remember() {
		const qs = new URLSearchParams();
		for (const k of FILTERS) if (f[k]) qs.set(k, f[k]);
		if (sort === 'name') qs.set('sort', 'name');
		if (limit !== 100) qs.set('limit', String(limit));
		const s = qs.toString();
		history.replaceState(null, '', `#/nodes${s ? `?${s}` : ''}`);
	}

	function row(n) {
		return h('tr', { 'data-node': n.name },
			h('td', {}, h('a', { href: `#/node/${seg(n.name)}` }, n.name)),
			h('td', {}, n.rack ?? '—'),
			h('td', { class: 'num' }, n.u_position ?? '—'),
			h('td', {}, n.node_class ?? '—'),
			h('td', {}, stateBadge(n.provision_state)),
			h('td', {}, powerBadge(n.power_state)),
			h('td', {}, n.maintenance ? badge('maintenance', 'maint-b') : ''),
			h('td', {}, (n.tags ?? []).map((t) => h('span', { class: 'tag' }, t))),
			h('td', {}, n.bmc ? [n.bmc.driver, ' ', n.bmc.address ?? '', n.bmc.fault ? [' ', badge('fault', 'h-fault', n.bmc.fault.message)] : null] : '—'),
			h('td', { class: 'mono' }, n.serial ?? '—'));
	}

	async function load() {
		const my = ++seq;
		status.textContent = 'loading…';
		try {
			const pg = await api(url('/v1/nodes', { ...f, sort, limit, cursor: cursors[page], fields: FIELDS }), { signal });
			if (my !== seq) return;
			clear(err);
			visible = new Set(pg.items.map((n) => n.name));
			clear(tbody, ...(pg.items.length ? pg.items.map(row)
				: [h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'No nodes match.'))]));
			cursors[page + 1] = pg.next_cursor ?? undefined;
			next.disabled = !pg.next_cursor;
			prev.disabled = page === 0;
			document.getElementById('page-no').textContent = `page ${page + 1}`;
			status.textContent = `${pg.items.length} shown`;
		} catch (e) {
			if (e.name === 'AbortError' || my !== seq) return;
			status.textContent = '';
			clear(err, errorBox(e, 'Cannot list nodes'));
		}
	}

	function restart() {
		read();
		remember();
		cursors = [undefined];
		page = 0;
		load();
	}

	q.addEventListener('input', debounce(restart, 250));
	cls.addEventListener('input', debounce(restart, 400));
	tag.addEventListener('input', debounce(restart, 400));
	for (const s of [rack, state, power, maint, size]) s.addEventListener('change', restart);
	reset.addEventListener('click', () => {
		q.value = cls.value = tag.value = '';
		rack.value = state.value = power.value = maint.value = '';
		restart();
	});
	sortHead.addEventListener('click', () => {
		sort = sort === 'name' ? 'created' : 'name';
		paintSort();
		restart();
	});
	next.addEventListener('click', () => { page++; load(); });
	prev.addEventListener('click', () => { if (page > 0) { page--; load(); } });

	paintSort();
	// The rack list for the filter; a rack named in the address is kept even before it loads.
	if (f.rack) rack.append(h('option', { value: f.rack, selected: true }, f.rack));
	all('/v1/racks', { sort: 'name', fields: 'name' }, { signal }).then((racks) => {
		for (const x of racks) if (x.name !== f.rack) rack.append(h('option', { value: x.name }, x.name));
	}).catch((e) => { if (e.name !== 'AbortError') err.append(errorBox(e, 'Cannot list racks')); });
	load();

	const refresh = batch(load, 300);
	function onEvent(ev) {
		const o = ev.object ?? {};
		const a = ev.action ?? '';
		if (a === 'node.created' || a === 'node.deleted' || a === 'import.applied' ||
			(o.type === 'node' && visible.has(o.name)) ||
			(o.type === 'job' && visible.has(o.name) && a !== 'job.queued'))
			refresh();
	}
	return { onEvent, onGap: refresh, destroy: () => ctrl.abort() };
}
