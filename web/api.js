// The REST API: one fetch wrapper that sends the token as a Bearer header (never in a URL)
// and turns every error body {"error": {code, message, detail}} into an ApiError.

const KEY = 'rackpilot.token';

export const token = {
	get: () => sessionStorage.getItem(KEY),
	set: (t) => sessionStorage.setItem(KEY, t),
	clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
	constructor(status, code, message, detail, what) {
		super(message);
		this.status = status;
		this.code = code;
		this.detail = detail;
		this.what = what; // "GET /v1/nodes/x": which call failed
	}
}

// Called on a 401 (token revoked or expired): the app signs out.
let unauthorized = () => {};
export function onUnauthorized(fn) {
	unauthorized = fn;
}

// path + query string from an object; empty values are left out.
export function url(path, params) {
	const q = new URLSearchParams();
	for (const [k, v] of Object.entries(params || {}))
		if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
	const s = q.toString();
	return s ? `${path}?${s}` : path;
}

export function seg(s) {
	return encodeURIComponent(s);
}

export async function api(path, { method = 'GET', body, signal, text = false, tok } = {}) {
	const headers = { Authorization: `Bearer ${tok ?? token.get() ?? ''}` };
	const what = `${method} ${path.split('?')[0]}`;
	let res;
	if (body !== undefined) {
		headers['Content-Type'] = 'application/json';
		body = JSON.stringify(body);
	}
	try {
		res = await fetch(path, { method, headers, body, signal, cache: 'no-store' });
	} catch (e) {
		if (e.name === 'AbortError') throw e;
		throw new ApiError(0, 'NETWORK', 'rackpilotd cannot be reached', { reason: e.message }, what);
	}
	if (!res.ok) {
		let err = null;
		try {
			err = (await res.json()).error;
		} catch {
			// not JSON: a proxy's page, say; the status line is all there is
		}
		const e = new ApiError(res.status, err?.code ?? `HTTP_${res.status}`,
			err?.message ?? (res.statusText || 'request failed'), err?.detail ?? null, what);
		if (res.status === 401 && tok === undefined) unauthorized(e);
		throw e;
	}
	if (res.status === 204) return null;
	return text ? res.text() : res.json();
}

// Every item of a paged collection, following next_cursor (max pages * 1000 items).
export async function all(path, params = {}, { signal, max = 50 } = {}) {
	const items = [];
	let cursor;
	for (let i = 0; i < max; i++) {
		const pg = await api(url(path, { ...params, limit: 1000, cursor }), { signal });
		items.push(...pg.items);
		cursor = pg.next_cursor;
		if (!cursor) break;
	}
	return items;
}
