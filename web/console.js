// A node's serial console on its page: xterm.js (vendored in web/vendor/, served by rackpilotd
// as /ui/xterm.mjs, loaded when a console is first opened) on the WebSocket
// GET /v1/nodes/{node}/console.
//   A browser cannot send Authorization on a WebSocket: the token goes as the subprotocol
//   "rackpilot.bearer.TOKEN" beside "rackpilot", never in the URL.
//   Server → page: binary frames are terminal output; text frames are JSON
//   {type: "status"|"closed", writer, message, error?}, shown as text in the line above the
//   terminal (never in it).
//   Page → server: what is typed, as UTF-8 in binary frames (only while this page holds the
//   console: writer true); {"type":"break"} sends a serial break. mode=read only watches.
// Opening writes the last 200 lines of the console log (…/console/log?tail=200) first.

import { api, seg, token } from './api.js';
import { clear, errorBox, h } from './dom.js';

const TAIL = 200;
const DIM = '\x1b[90m';
const OFF = '\x1b[0m';

// xterm.js writes the rules it computes (colours, cell sizes, its scrollbar) into <style>
// elements, and 24-bit colours into style attributes of its cells' <span>s, both of which this
// page's CSP refuses (style-src 'self': no inline styles; it would render unstyled and log an
// error per cell). So, once a console is opened:
// - document.createElement('style') gives an <rp-style> instead: an element that keeps its
//   text out of the document and makes it a constructed stylesheet, adopted while the element
//   is connected;
// - a <span>'s setAttribute('style', v) sets style.cssText = v.
// Both go through the CSSOM, which the CSP does not govern and which script could use anyway;
// style written in markup stays refused. Nothing of ours creates <style> or styles a span.
function styleShim() {
	if (customElements.get('rp-style')) return;
	class RpStyle extends HTMLElement {
		#sheet = new CSSStyleSheet();
		#text = '';
		get textContent() { return this.#text; }
		set textContent(v) {
			this.#text = String(v ?? '');
			this.#sheet.replaceSync(this.#text);
		}
		get sheet() { return this.#sheet; }
		connectedCallback() {
			if (!document.adoptedStyleSheets.includes(this.#sheet)) document.adoptedStyleSheets = [...document.adoptedStyleSheets, this.#sheet];
		}
		disconnectedCallback() {
			document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== this.#sheet);
		}
	}
	customElements.define('rp-style', RpStyle);
	const create = document.createElement.bind(document);
	document.createElement = (tag, opts) => (String(tag).toLowerCase() === 'style' ? create('rp-style') : create(tag, opts));
	const setAttr = Element.prototype.setAttribute;
	HTMLSpanElement.prototype.setAttribute = function (n, v) {
		if (String(n).toLowerCase() === 'style') this.style.cssText = String(v);
		else setAttr.call(this, n, v);
	};
}

let xterm = null;
async function loadXterm() {
	if (!xterm) {
		styleShim();
		xterm = await import('./xterm.mjs');
	}
	return xterm;
}

// Why a console may not open, as far as the node object tells. A browser never sees the body
// of a refused WebSocket handshake (rackpilotd's 409 says why), only that it failed.
function likelyReason(n) {
	const b = n?.bmc;
	if (!b) return 'The node has no BMC.';
	if (b.driver === 'ipmi') return 'Check the BMC\'s address, user and password (its IPMI Serial over LAN).';
	if (b.driver === 'redfish')
		return b.options?.console === 'ipmi' ? 'Check the BMC\'s address, user and password (its IPMI Serial over LAN).'
			: 'A Redfish BMC needs bmc.options.console "ipmi" (its IPMI Serial over LAN).';
	return `Its BMC driver (${b.driver}) has no serial console Rackpilot can reach: the console is IPMI Serial over LAN (an IPMI BMC, or a Redfish one with bmc.options.console "ipmi").`;
}

// Log text into the terminal as text: escape sequences (CSI, OSC) and other controls out.
function plain(s) {
	return s.replace(/\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)?/g, '')
		.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '');
}

// The pane: {el, destroy}. node() gives the node as last loaded (for the likely reason).
export function consolePane(ctx, name, node) {
	const path = `/v1/nodes/${seg(name)}/console`;
	const enc = new TextEncoder();
	let term = null;
	let ws = null;
	let gen = 0; // the socket whose events count; older ones are ignored
	let writer = false;
	let busy = false;

	const status = h('div', { class: 'console-status', id: 'console-status', role: 'status', 'aria-live': 'polite', 'data-state': 'idle' },
		'Not connected.');
	const logErr = h('div', { class: 'notes', id: 'console-log-error' });
	const screen = h('div', { class: 'console-term', id: 'console-term', hidden: true });
	const ro = h('input', {
		type: 'checkbox', id: 'console-ro', checked: !ctx.canAct, disabled: !ctx.canAct,
		title: ctx.canAct ? 'Watch only: another operator may hold the console' : 'Viewers watch: typing needs an operator token',
		onchange: () => { if (ws) connect(true); },
	});
	const openBtn = h('button', { type: 'button', id: 'console-open', onclick: () => open() }, 'Open console');
	const closeBtn = h('button', { type: 'button', id: 'console-disconnect', hidden: true, onclick: () => disconnect() }, 'Disconnect');
	const breakBtn = ctx.canAct
		? h('button', { type: 'button', id: 'console-break', disabled: true, title: 'A serial break (with a key after it, Linux\'s magic SysRq)', onclick: () => sendBreak() }, 'Send break')
		: null;
	const el = h('div', { class: 'console' },
		h('div', { class: 'console-bar' }, openBtn, closeBtn, breakBtn,
			h('label', { class: 'console-ro' }, ro, ' read-only')),
		status, logErr, screen);

	function say(state, text) {
		status.dataset.state = state;
		clear(status, text);
	}

	function paint() {
		const live = ws !== null;
		openBtn.hidden = live;
		openBtn.disabled = busy;
		closeBtn.hidden = !live;
		if (breakBtn) breakBtn.disabled = !(live && writer && ws.readyState === WebSocket.OPEN);
		el.dataset.writer = String(live && writer);
		if (term) term.options.disableStdin = !(live && writer);
	}

	function send(bytes) {
		if (ws && ws.readyState === WebSocket.OPEN && writer) ws.send(bytes);
	}

	function sendBreak() {
		if (ws && ws.readyState === WebSocket.OPEN && writer) ws.send(JSON.stringify({ type: 'break' }));
		term?.focus();
	}

	async function open() {
		if (ws || busy) return;
		busy = true;
		paint();
		say('connecting', 'Loading the terminal and the console log…');
		clear(logErr);
		try {
			const { Terminal } = await loadXterm();
			if (!term) {
				term = new Terminal({
					cols: 100, rows: 30, scrollback: 5000, disableStdin: true, cursorBlink: true, fontSize: 12,
					fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
					theme: { background: '#0a0d11', foreground: '#dfe6ee' },
				});
				screen.hidden = false;
				term.open(screen);
				term.onData((d) => send(enc.encode(d)));
				term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 255)));
			}
			term.reset();
			let log = '';
			try {
				log = await api(`${path}/log?tail=${TAIL}`, { text: true });
			} catch (e) {
				clear(logErr, errorBox(e, 'Cannot read the console log'));
			}
			const lines = log.split('\n').filter((l) => l !== '');
			if (lines.length) {
				term.write(`${DIM}── the last ${lines.length} lines of the console log ──${OFF}\r\n`);
				for (const l of lines) {
					const sp = l.indexOf(' ');
					term.write(sp > 0 ? `${DIM}${plain(l.slice(0, sp))}${OFF} ${plain(l.slice(sp + 1))}\r\n` : `${plain(l)}\r\n`);
				}
			} else {
				term.write(`${DIM}── no console log lines ──${OFF}\r\n`);
			}
			term.write(`${DIM}── live ──${OFF}\r\n`);
		} catch (e) {
			busy = false;
			say('error', `The terminal did not load: ${e.message}`);
			paint();
			return;
		}
		busy = false;
		connect(false);
	}

	function connect(again) {
		const my = ++gen;
		ws?.close(1000);
		writer = false;
		const read = ro.checked;
		const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
		const sock = new WebSocket(`${proto}//${location.host}${path}${read ? '?mode=read' : ''}`,
			['rackpilot', `rackpilot.bearer.${token.get() ?? ''}`]);
		sock.binaryType = 'arraybuffer';
		ws = sock;
		let opened = false;
		let closedSaid = false;
		say('connecting', again ? `Reconnecting${read ? ' to watch' : ''}…` : `Connecting${read ? ' to watch' : ''}…`);
		paint();
		sock.addEventListener('open', () => {
			if (my !== gen) return;
			opened = true;
			say('open', read ? 'Connected, watching.' : 'Connected.');
			paint();
		});
		sock.addEventListener('message', (ev) => {
			if (my !== gen) return;
			if (typeof ev.data !== 'string') {
				term.write(new Uint8Array(ev.data));
				return;
			}
			let m;
			try {
				m = JSON.parse(ev.data);
			} catch {
				return; // not ours to show
			}
			if (!m || typeof m !== 'object') return;
			if (typeof m.writer === 'boolean') writer = m.writer;
			const text = typeof m.message === 'string' ? m.message : '';
			if (m.type === 'closed') {
				closedSaid = true;
				say(m.error ? 'error' : 'closed', text || 'The console was closed.');
			} else if (m.type === 'status') {
				say(m.error ? 'error' : 'open', text);
			}
			paint();
		});
		sock.addEventListener('close', (ev) => {
			if (my !== gen) return;
			ws = null;
			writer = false;
			if (!opened) {
				say('refused', `rackpilotd did not open the console of ${name} (the browser is not told why: WebSocket close ${ev.code}). ${likelyReason(node())}`);
			} else if (!closedSaid) {
				say('closed', `Disconnected (WebSocket close ${ev.code}${ev.reason ? `: ${ev.reason}` : ''}).`);
			}
			paint();
		});
	}

	function disconnect() {
		gen++;
		ws?.close(1000);
		ws = null;
		writer = false;
		say('closed', 'Disconnected.');
		paint();
	}

	paint();
	return {
		el,
		destroy() {
			gen++;
			ws?.close(1000);
			ws = null;
			term?.dispose();
			term = null;
		},
	};
}
