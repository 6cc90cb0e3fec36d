// The web view: sign-in, the header, hash routing and live events.
//   #/racks  #/nodes?rack=..&q=..  #/node/NAME  #/fleet  #/power  #/acceptance/RACK
// /ui/#token=TOKEN signs in directly (wall screens); the fragment is removed at once.

import { api, ApiError, onUnauthorized, token } from './api.js';
import { clear, errorBox, fmtTime, h } from './dom.js';
import { startLive } from './live.js';
import * as racks from './racks.js';
import * as nodes from './nodes.js';
import * as node from './node.js';
import * as fleet from './fleet.js';
import * as power from './power.js';
import * as accept from './accept.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const liveEl = document.getElementById('live');
const demo = document.getElementById('demo');

const ctx = { me: null, canAct: false, root: null };
let view = null; // {onEvent, onGap, destroy}
let stopLive = null;

function route() {
	const raw = location.hash.replace(/^#\/?/, '');
	const [path, query = ''] = raw.split('?');
	const params = Object.fromEntries(new URLSearchParams(query));
	const parts = path.split('/');
	if (parts[0] === 'node' && parts.length >= 2 && parts[1])
		return { name: 'node', arg: decodeURIComponent(parts.slice(1).join('/')), params };
	if (parts[0] === 'acceptance' && parts.length >= 2 && parts[1])
		return { name: 'acceptance', arg: decodeURIComponent(parts.slice(1).join('/')), params };
	if (['racks', 'nodes', 'fleet', 'power'].includes(parts[0])) return { name: parts[0], params };
	return { name: 'racks', params };
}

function render() {
	if (!ctx.me) return;
	const r = route();
	view?.destroy?.();
	view = null;
	for (const a of nav.querySelectorAll('a'))
		a.classList.toggle('on', a.dataset.view === (r.name === 'node' ? 'nodes' : r.name === 'acceptance' ? 'racks' : r.name));
	clear(main);
	main.dataset.view = r.name;
	const mod = { racks, nodes, node, fleet, power, acceptance: accept }[r.name];
	view = mod.render(main, ctx, r);
}

function setLive(state) {
	liveEl.dataset.state = state;
	liveEl.textContent = {
		connecting: 'connecting…', live: 'live', polling: 'live (polling)',
		reconnecting: 'reconnecting…', offline: 'offline',
	}[state] ?? state;
	liveEl.title = state === 'polling'
		? 'The server has no event stream; the event log is polled every few seconds.'
		: state === 'live' ? 'Events arrive as they happen (Server-Sent Events).' : '';
}

function signOut(reason) {
	stopLive?.();
	stopLive = null;
	view?.destroy?.();
	view = null;
	token.clear();
	ctx.me = null;
	document.body.classList.add('signed-out');
	clear(who);
	demo.hidden = true;
	showSignIn(reason);
}

function showSignIn(err) {
	clear(main);
	main.dataset.view = 'signin';
	const input = h('input', {
		type: 'password', id: 'token', name: 'token', autocomplete: 'off', spellcheck: 'false',
		placeholder: 'rpt_…', required: true, 'aria-label': 'API token',
	});
	const msg = h('div', { class: 'signin-msg' }, err ? errorBox(err, 'Not signed in') : null);
	const form = h('form', { class: 'signin', id: 'signin' },
		h('h1', {}, 'Rackpilot'),
		h('p', { class: 'muted' }, 'Sign in with an API token (viewer, operator or admin). ' +
			'It is kept in this browser tab only.'),
		h('label', { for: 'token' }, 'API token'), input,
		h('button', { type: 'submit', class: 'primary' }, 'Sign in'), msg);
	form.addEventListener('submit', async (ev) => {
		ev.preventDefault();
		clear(msg);
		const t = input.value.trim();
		if (t) await signIn(t, msg);
	});
	main.append(form);
	input.focus();
}

async function signIn(t, msgEl) {
	let root;
	try {
		root = await api('/v1', { tok: t });
	} catch (e) {
		if (msgEl) clear(msgEl, errorBox(e, 'Sign-in failed'));
		else showSignIn(e);
		return false;
	}
	token.set(t);
	start(root);
	return true;
}

function start(root) {
	ctx.root = root;
	ctx.me = root.you ?? { name: '?', role: 'viewer' };
	ctx.canAct = ctx.me.role === 'operator' || ctx.me.role === 'admin';
	document.body.classList.remove('signed-out');
	document.body.classList.toggle('can-act', ctx.canAct);
	demo.hidden = root.demo !== true;
	clear(who, 
		h('span', { class: 'who-name', title: 'token name' }, ctx.me.name), ' ',
		h('span', { class: ['role', `role-${ctx.me.role}`], id: 'role' }, ctx.me.role), ' ',
		h('span', { class: 'muted', title: 'rackpilotd version' }, `v${root.version ?? '?'}`), ' ',
		h('button', { class: 'link', id: 'signout', onclick: () => signOut() }, 'Sign out'));
	stopLive?.();
	stopLive = startLive({
		onEvent: (ev) => view?.onEvent?.(ev),
		onStatus: setLive,
		onGap: () => view?.onGap?.(),
	});
	render();
}

async function boot() {
	if (window.top !== window.self) {
		// No frames (clickjacking): the server's CSP says frame-ancestors where it can.
		document.body.textContent = 'Rackpilot does not run inside a frame.';
		return;
	}
	onUnauthorized((e) => signOut(e));
	window.addEventListener('hashchange', render);
	const m = /^#token=([^&]+)/.exec(location.hash);
	if (m) {
		// Take the token, then forget it in the address bar and the history entry.
		const t = decodeURIComponent(m[1]);
		history.replaceState(null, '', location.pathname + location.search);
		await signIn(t, null);
		return;
	}
	const t = token.get();
	if (!t) return showSignIn(null);
	try {
		start(await api('/v1'));
	} catch (e) {
		if (e instanceof ApiError && e.status === 401) return; // signOut already showed the form
		showSignIn(e);
	}
}

// Relative times ("3 min ago") stay true on a screen that is left open.
setInterval(() => {
	for (const t of document.querySelectorAll('time[datetime]')) t.textContent = fmtTime(t.getAttribute('datetime'));
}, 15000);

boot();
