// Live events: GET /v1/events/stream (Server-Sent Events) read with fetch(), because
// EventSource cannot send an Authorization header. Where the server has no stream (404) the
// event log is polled instead. Each event is the JSON of an item of GET /v1/events.

import { api, token, url } from './api.js';

const POLL_MS = 3000;

const sleep = (ms, signal) => new Promise((res) => {
	const t = setTimeout(res, ms);
	signal?.addEventListener('abort', () => { clearTimeout(t); res(); }, { once: true });
});

// Parse an SSE byte stream (already decoded to text chunks) into events; calls on(fields)
// for each dispatched event with {id, event, data}. Returns a function to feed chunks to.
export function sseParser(on) {
	let buf = '';
	let data = [];
	let id = null;
	let event = '';
	let retry = null;
	function line(l) {
		if (l === '') {
			if (data.length) on({ id, event: event || 'message', data: data.join('\n'), retry });
			data = [];
			event = '';
			return;
		}
		if (l.startsWith(':')) return; // a comment: keep-alive
		const i = l.indexOf(':');
		const field = i < 0 ? l : l.slice(0, i);
		let value = i < 0 ? '' : l.slice(i + 1);
		if (value.startsWith(' ')) value = value.slice(1);
		if (field === 'data') data.push(value);
		else if (field === 'event') event = value;
		else if (field === 'id' && !value.includes('\0')) id = value;
		else if (field === 'retry' && /^\d+$/.test(value)) retry = Number(value);
	}
	return (chunk) => {
		buf += chunk;
		let m;
		while ((m = /\r\n|\r|\n/.exec(buf))) {
			// A lone \r at the end may be half of \r\n: wait for the next chunk.
			if (m[0] === '\r' && m.index === buf.length - 1) break;
			line(buf.slice(0, m.index));
			buf = buf.slice(m.index + m[0].length);
		}
		return retry;
	};
}

// start({onEvent, onStatus, onGap}) -> stop(). onStatus gets 'connecting', 'live',
// 'polling', 'reconnecting' or 'offline'; onGap is called when events may have been missed
// (views then reload what they show).
export function startLive({ onEvent, onStatus, onGap }) {
	const ctrl = new AbortController();
	const signal = ctrl.signal;
	let lastId = null;
	let retryMs = 2000;

	function deliver(ev) {
		if (typeof ev?.id === 'number') {
			if (lastId !== null && ev.id <= lastId) return; // seen already
			lastId = ev.id;
		}
		try {
			onEvent(ev);
		} catch (e) {
			console.error('live event handler', e);
		}
	}

	async function stream() {
		let failures = 0;
		while (!signal.aborted) {
			const headers = { Authorization: `Bearer ${token.get() ?? ''}`, Accept: 'text/event-stream' };
			if (lastId !== null) headers['Last-Event-ID'] = String(lastId);
			onStatus(failures ? 'reconnecting' : 'connecting');
			let res;
			try {
				res = await fetch('/v1/events/stream', { headers, signal, cache: 'no-store' });
			} catch {
				if (signal.aborted) return;
				failures++;
				onStatus('offline');
				await sleep(Math.min(retryMs * failures, 30000), signal);
				continue;
			}
			if (res.status === 404 || res.status === 405) return poll(); // no stream here
			if (!res.ok) {
				failures++;
				onStatus('offline');
				await sleep(Math.min(retryMs * failures, 30000), signal);
				continue;
			}
			onStatus('live');
			failures = 0;
			const feed = sseParser((m) => {
				let ev = null;
				try {
					ev = JSON.parse(m.data);
				} catch {
					// not an event of ours; its id still counts for Last-Event-ID
				}
				if (ev) deliver(ev);
				if (m.id !== null && /^\d+$/.test(m.id)) lastId = Math.max(lastId ?? 0, Number(m.id));
			});
			try {
				const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
				for (;;) {
					const { value, done } = await reader.read();
					if (done) break;
					const r = feed(value);
					if (r !== null) retryMs = r;
				}
			} catch {
				if (signal.aborted) return;
			}
			// Dropped: come back with Last-Event-ID and get what was missed.
			failures++;
			onStatus('reconnecting');
			await sleep(retryMs, signal);
		}
	}

	// Poll newest-first pages until the last event seen; more than 10 pages behind is a gap.
	async function poll() {
		onStatus('polling');
		while (!signal.aborted) {
			try {
				const fresh = [];
				let cursor;
				let reached = false;
				for (let i = 0; i < 10 && !reached; i++) {
					const pg = await api(url('/v1/events', { limit: lastId === null ? 1 : 200, cursor }), { signal });
					for (const ev of pg.items) {
						if (lastId !== null && ev.id <= lastId) {
							reached = true;
							break;
						}
						fresh.push(ev);
					}
					cursor = pg.next_cursor;
					if (lastId === null || !cursor) reached = true;
				}
				if (lastId === null) {
					lastId = fresh.length ? fresh[0].id : 0; // start from now
				} else {
					if (!reached) onGap?.();
					fresh.reverse().forEach(deliver);
				}
				onStatus('polling');
			} catch (e) {
				if (signal.aborted) return;
				onStatus('offline');
			}
			await sleep(POLL_MS, signal);
		}
	}

	stream();
	return () => ctrl.abort();
}
