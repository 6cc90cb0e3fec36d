// DOM helpers. Text always goes in as text nodes (never innerHTML): names and messages come
// from users and BMCs.

const SVGNS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
	for (const [k, v] of Object.entries(attrs || {})) {
		if (v === undefined || v === null || v === false) continue;
		if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
		else if (k === 'class' && Array.isArray(v)) el.setAttribute('class', v.filter(Boolean).join(' '));
		else el.setAttribute(k, v === true ? '' : String(v));
	}
	for (const c of children.flat(Infinity)) {
		if (c === undefined || c === null || c === false) continue;
		el.append(c instanceof Node ? c : document.createTextNode(String(c)));
	}
	return el;
}

// h('td', {class: 'x', onclick: f}, 'text', child, [more])
export function h(tag, attrs, ...children) {
	return build(document.createElement(tag), attrs, children);
}

export function svg(tag, attrs, ...children) {
	return build(document.createElementNS(SVGNS, tag), attrs, children);
}

// Empty el, then append children (null and false are left out, as in h()).
export function clear(el, ...children) {
	el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
	return el;
}

export function fmtTime(iso) {
	if (!iso) return '—';
	const t = new Date(iso);
	const d = Math.round((Date.now() - t.getTime()) / 1000);
	const s = Math.abs(d);
	const rel = s < 60 ? `${s}s` : s < 3600 ? `${Math.round(s / 60)} min` : s < 86400 ? `${Math.round(s / 3600)} h` : null;
	if (rel === null) return `${t.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
	return d >= 0 ? `${rel} ago` : `in ${rel}`;
}

// A time element: relative text, the exact time on hover.
export function when(iso) {
	return h('time', { datetime: iso || undefined, title: iso || undefined }, fmtTime(iso));
}

export function fmtBytes(n) {
	if (n === null || n === undefined) return '—';
	const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
	let i = 0;
	while (n >= 1024 && i < u.length - 1) {
		n /= 1024;
		i++;
	}
	return `${n >= 100 || i === 0 ? Math.round(n) : n.toFixed(1)} ${u[i]}`;
}

export function show(v) {
	if (v === undefined || v === null || v === '') return '—';
	if (typeof v === 'object') return JSON.stringify(v);
	return String(v);
}

// An API error as the user sees it: code, message, what failed and the detail.
export function errorBox(err, title) {
	const detail = err?.detail;
	let reason = null;
	if (detail && typeof detail === 'object') {
		reason = detail.reason ?? detail.field ?? null;
		if (detail.field && detail.reason) reason = `${detail.field}: ${detail.reason}`;
	}
	return h('div', { class: 'error', role: 'alert' },
		h('strong', {}, title ?? 'Error'), ' ',
		h('code', { class: 'err-code' }, err?.code ?? 'ERROR'), ' ',
		h('span', { class: 'err-msg' }, err?.message ?? String(err)),
		reason ? h('div', { class: 'err-reason' }, reason) : null,
		err?.what ? h('div', { class: 'err-what' }, err.what) : null,
		detail && typeof detail === 'object' && Object.keys(detail).length > (reason ? 1 : 0)
			? h('details', {}, h('summary', {}, 'detail'), h('pre', {}, JSON.stringify(detail, null, 2)))
			: null);
}

// A short-lived message in the corner; errors stay until dismissed.
export function toast(content, kind = 'info') {
	const box = document.getElementById('toasts');
	const close = h('button', { class: 'x', title: 'Dismiss', 'aria-label': 'Dismiss' }, '×');
	const t = h('div', { class: ['toast', kind] }, content, close);
	close.addEventListener('click', () => t.remove());
	box.append(t);
	if (kind !== 'error') setTimeout(() => t.remove(), 6000);
	return t;
}

export function toastError(err, title) {
	return toast(errorBox(err, title), 'error');
}

// Ask before acting: the page's own dialog (resolves true on OK).
export function confirmAction(title, text, ok = 'OK', danger = false) {
	const d = document.getElementById('confirm');
	d.querySelector('.c-title').textContent = title;
	d.querySelector('.c-text').textContent = text;
	const okb = d.querySelector('.c-ok');
	okb.textContent = ok;
	okb.classList.toggle('danger', danger);
	d.returnValue = '';
	d.showModal();
	return new Promise((resolve) => {
		d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
	});
}

export function badge(text, cls, title) {
	return h('span', { class: ['badge', cls], title }, text);
}

export const STATES = ['discovered', 'enrolled', 'verifying', 'verify_failed', 'manageable',
	'commissioning', 'commission_failed', 'ready', 'deploying', 'deploy_failed', 'deployed',
	'releasing', 'release_failed'];

// CSS class for a provision state: st-ok, st-ready, st-manage, st-busy, st-fail, st-new, st-idle.
export function stateClass(s) {
	if (!s) return 'st-idle';
	if (s.endsWith('_failed')) return 'st-fail';
	if (s === 'deployed') return 'st-ok';
	if (s === 'ready') return 'st-ready';
	if (['verifying', 'commissioning', 'deploying', 'releasing'].includes(s)) return 'st-busy';
	if (s === 'discovered') return 'st-new';
	if (s === 'manageable') return 'st-manage';
	return 'st-idle';
}

export function stateBadge(s) {
	return badge(s ?? 'unknown', stateClass(s), 'provision state');
}

export function powerBadge(p) {
	return badge(`power ${p ?? 'unknown'}`, `pw-${p ?? 'unknown'}`, 'power state');
}

// Section card with a title and a body that can show loading, content or an error.
export function card(title, ...extra) {
	const body = h('div', { class: 'card-body' }, h('div', { class: 'muted' }, 'Loading…'));
	const el = h('section', { class: 'card' }, h('h2', {}, title, ...extra), body);
	return { el, body };
}

// Fill a card body from an async loader; errors are shown in place.
export async function fill(body, load) {
	try {
		const content = await load();
		clear(body, content);
	} catch (e) {
		if (e.name === 'AbortError') return;
		clear(body, errorBox(e));
	}
}

export function kv(rows) {
	return h('table', { class: 'kv' }, h('tbody', {}, rows.filter(Boolean).map(([k, v]) =>
		h('tr', {}, h('th', {}, k), h('td', {}, v instanceof Node ? v : show(v))))));
}

export function table(heads, rows, cls) {
	return h('table', { class: ['grid', cls] },
		h('thead', {}, h('tr', {}, heads.map((x) => h('th', {}, x)))),
		h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: heads.length, class: 'muted' }, 'none'))));
}

// Live refreshes: fn runs ms after the first call, never twice at once; calls while it runs
// make it run once more afterwards. A storm of events costs one reload per ms, not one per event.
export function batch(fn, ms) {
	let timer = null;
	let running = false;
	let again = false;
	const go = async () => {
		timer = null;
		running = true;
		try {
			await fn();
		} finally {
			running = false;
			if (again) {
				again = false;
				kick();
			}
		}
	};
	function kick() {
		if (running) again = true;
		else if (!timer) timer = setTimeout(go, ms);
	}
	return kick;
}

// Typing: fn runs once the calls stop for ms.
export function debounce(fn, ms) {
	let t;
	return (...a) => {
		clearTimeout(t);
		t = setTimeout(() => fn(...a), ms);
	};
}
