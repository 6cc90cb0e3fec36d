// The web view in Debian's Chromium (playwright-core), against the real rackpilotd that
// web-test.sh started and seeded. Run by web-test.sh; reads RP_URL, RP_ADMIN, RP_VIEWER,
// RP_OPERATOR, RP_SEED (the seeded nodes), RP_ARTIFACTS (screenshots), RP_NODE_MODULES,
// RP_DEMO_URL and RP_DEMO_ADMIN (a rackpilotd --demo), RP_HOSTILE_SENSOR (the name the seed
// gave a sensor of the Redfish mock BMC's node rf-r03-u20).
//   The serial console: the seed's BMCs have no Serial over LAN (fake, and a Redfish mock
// without bmc.options.console), so against the real server the console is refused, as it
// should be; what the pane does with a console that opens is checked against Playwright's
// WebSocket route (the real SOL path is the C integration test's).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const E = process.env;
const URL = E.RP_URL;
const TOKENS = { admin: E.RP_ADMIN, viewer: E.RP_VIEWER, operator: E.RP_OPERATOR, demo: E.RP_DEMO_ADMIN };
const SEED = JSON.parse(fs.readFileSync(E.RP_SEED, 'utf8'));
const ART = E.RP_ARTIFACTS;
const require = createRequire(path.join(E.RP_NODE_MODULES, '..', 'package.json'));
const WEB = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'web');
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'";
const { chromium } = require('playwright-core');
const run = promisify(execFile);
const WAIT = 15000;

// The API from outside the browser, with curl, as an operator at a terminal would.
async function curl(method, p, body, tok = TOKENS.admin) {
	const args = ['-sS', '-X', method, '-H', `Authorization: Bearer ${tok}`, '-w', '\n%{http_code}'];
	if (body !== undefined) args.push('-H', 'Content-Type: application/json', '--data-binary', JSON.stringify(body));
	const { stdout } = await run('curl', [...args, URL + p]);
	const i = stdout.lastIndexOf('\n');
	const text = stdout.slice(0, i);
	return { status: Number(stdout.slice(i + 1)), json: text ? JSON.parse(text) : null };
}
async function get(p, tok) {
	const r = await curl('GET', p, undefined, tok);
	assert.equal(r.status, 200, `GET ${p}: ${JSON.stringify(r.json)}`);
	return r.json;
}
// A WebSocket handshake as the page makes it (the token as a subprotocol): {status, json} for
// a refusal, {status: 101, protocol} when it would open (the socket is dropped at once).
function handshake(p, tok) {
	return new Promise((resolve, reject) => {
		const req = http.get(URL + p, {
			headers: {
				Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
				'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
				'Sec-WebSocket-Protocol': `rackpilot, rackpilot.bearer.${tok}`,
			},
		});
		req.on('upgrade', (res, sock) => {
			sock.destroy();
			resolve({ status: 101, protocol: res.headers['sec-websocket-protocol'] });
		});
		req.on('response', (res) => {
			let body = '';
			res.setEncoding('utf8');
			res.on('data', (d) => { body += d; });
			res.on('end', () => resolve({ status: res.statusCode, json: body ? JSON.parse(body) : null }));
		});
		req.on('error', reject);
	});
}
const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');

const results = [];
const pages = new Set();
async function check(name, fn) {
	try {
		await fn();
		results.push(true);
		console.log(`ok ${results.length} - ${name}`);
	} catch (e) {
		results.push(false);
		console.log(`not ok ${results.length} - ${name}`);
		console.log(String(e.stack ?? e).split('\n').slice(0, 12).map((l) => `  # ${l}`).join('\n'));
		let i = 0;
		for (const p of pages) {
			if (!p.isClosed())
				await p.screenshot({ path: path.join(ART, `FAILED-${results.length}-${i++}.png`) }).catch(() => {});
		}
	}
}

const browser = await chromium.launch({
	executablePath: E.CHROMIUM || '/usr/bin/chromium',
	args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
const requests = []; // every request of every page: {url, auth}
async function context() {
	const c = await browser.newContext({ viewport: { width: 1920, height: 1080 } });
	c.on('request', (r) => requests.push({ url: r.url(), auth: r.headers().authorization ?? null }));
	// Every way of writing markup into the page is recorded (window.__html): the view builds
	// its elements (web/dom.js) and must never use them.
	await c.addInitScript(() => {
		window.__html = [];
		const note = (what) => {
			window.__html.push(what);
			console.warn(`rackpilot-test: markup written with ${what} at ${new Error().stack}`);
		};
		for (const [proto, prop] of [[Element.prototype, 'innerHTML'], [Element.prototype, 'outerHTML'], [ShadowRoot.prototype, 'innerHTML']]) {
			const d = Object.getOwnPropertyDescriptor(proto, prop);
			Object.defineProperty(proto, prop, { ...d, set(v) { note(prop); return d.set.call(this, v); } });
		}
		for (const [proto, fn] of [[Element.prototype, 'insertAdjacentHTML'], [Document.prototype, 'write'], [Document.prototype, 'writeln'],
			[Range.prototype, 'createContextualFragment']]) {
			const orig = proto[fn];
			proto[fn] = function (...a) { note(fn); return orig.apply(this, a); };
		}
	});
	return c;
}
const consoleErrors = new WeakMap(); // page -> console errors and uncaught exceptions
const markup = []; // every markup write on every page, from the init script above
async function newPage(c) {
	const p = await c.newPage();
	pages.add(p);
	consoleErrors.set(p, []);
	p.on('pageerror', (e) => {
		console.log(`  # page error: ${e.message}`);
		consoleErrors.get(p).push(`pageerror: ${e.message}`);
	});
	p.on('console', (m) => {
		if (m.type() === 'error') consoleErrors.get(p).push(`console: ${m.text()}`);
		if (m.text().startsWith('rackpilot-test: markup')) markup.push(`${p.url()}: ${m.text()}`);
	});
	p.on('close', () => pages.delete(p));
	return p;
}
// No console error, no uncaught exception and no markup written, on a page so far.
async function clean(p, what) {
	assert.deepEqual(consoleErrors.get(p), [], `${what}: console errors`);
	assert.deepEqual(await p.evaluate(() => window.__html), [], `${what}: markup written (innerHTML and the like)`);
}
async function signIn(p, role) {
	await p.goto(`${URL}/ui/#token=${TOKENS[role]}`);
	await p.locator('#role').filter({ hasText: role }).waitFor({ timeout: WAIT });
}
const shot = (p, name) => p.screenshot({ path: path.join(ART, `${name}.png`) });
const rows = (p) => p.locator('#nodes-rows tr[data-node]');
async function names(p) {
	return rows(p).evaluateAll((trs) => trs.map((t) => t.dataset.node));
}
async function waitNames(p, expect, what) {
	const want = [...expect].sort();
	try {
		await p.waitForFunction((w) => {
			const got = [...document.querySelectorAll('#nodes-rows tr[data-node]')].map((t) => t.dataset.node).sort();
			return JSON.stringify(got) === JSON.stringify(w);
		}, want, { timeout: WAIT });
	} catch {
		assert.deepEqual((await names(p)).sort(), want, what);
	}
}

const admin = await context();
const nodesNamed = (f) => SEED.filter(f).map((n) => n.name);

await check('GET /ui/ serves the page with its type and a strong ETag, 304 on If-None-Match; /ui too; unknown files are a JSON 404', async () => {
	const r = await fetch(`${URL}/ui/`);
	assert.equal(r.status, 200);
	assert.match(r.headers.get('content-type'), /^text\/html; charset=utf-8$/);
	const etag = r.headers.get('etag');
	assert.match(etag, /^"[0-9a-f]{32}"$/);
	assert.equal(r.headers.get('cache-control'), 'no-cache');
	assert.equal(r.headers.get('content-security-policy'), CSP);
	assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
	assert.equal(r.headers.get('referrer-policy'), 'no-referrer');
	const html = await r.text();
	assert.match(html, /<script type="module" src="\/ui\/app.js">/);
	const again = await fetch(`${URL}/ui/`, { headers: { 'If-None-Match': etag } });
	assert.equal(again.status, 304);
	assert.equal(await again.text(), '');
	assert.equal(again.headers.get('cache-control'), 'no-cache');
	for (const [inm, status] of [[`W/"0", ${etag}`, 304], ['*', 304], ['"0123456789abcdef0123456789abcdef"', 200]]) {
		const x = await fetch(`${URL}/ui/`, { headers: { 'If-None-Match': inm } });
		assert.equal(x.status, status, `If-None-Match: ${inm}`);
	}
	const bare = await fetch(`${URL}/ui`);
	assert.equal(bare.status, 200);
	assert.equal(bare.headers.get('etag'), etag);
	for (const [f, type] of [['app.js', 'text/javascript'], ['style.css', 'text/css'], ['index.html', 'text/html']]) {
		const x = await fetch(`${URL}/ui/${f}`);
		assert.equal(x.status, 200, f);
		assert.ok(x.headers.get('content-type').startsWith(type), `${f}: ${x.headers.get('content-type')}`);
		assert.notEqual(x.headers.get('etag'), f === 'index.html' ? null : etag, f);
	}
	const nf = await fetch(`${URL}/ui/no-such-file.js`);
	assert.equal(nf.status, 404);
	const body = await nf.json();
	assert.equal(body.error.code, 'NOT_FOUND');
	assert.equal(body.error.detail.path, '/ui/no-such-file.js');
});

await check('xterm.js comes from rackpilotd itself: /ui/xterm.mjs, xterm.css and its license are web/vendor/\'s bytes as SHA256SUMS records them (from the package-lock.json\'s package); the rest of web/vendor/ is not served', async () => {
	const vendor = path.join(WEB, 'vendor');
	const sumsText = fs.readFileSync(path.join(vendor, 'SHA256SUMS'), 'utf8');
	const sums = Object.fromEntries(sumsText.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(/\s+/).reverse()));
	assert.deepEqual(Object.keys(sums).sort(), ['xterm.LICENSE.txt', 'xterm.css', 'xterm.mjs']);
	const lock = JSON.parse(fs.readFileSync(path.join(vendor, 'package-lock.json'), 'utf8')).packages['node_modules/@xterm/xterm'];
	assert.equal(JSON.parse(fs.readFileSync(path.join(vendor, 'package.json'), 'utf8')).dependencies['@xterm/xterm'], lock.version, 'package.json pins the locked version');
	assert.ok(sumsText.startsWith(`# @xterm/xterm@${lock.version} ${lock.integrity}\n`), 'SHA256SUMS is not from the locked package');
	for (const [f, type] of [['xterm.mjs', 'text/javascript'], ['xterm.css', 'text/css'], ['xterm.LICENSE.txt', 'text/plain']]) {
		const r = await fetch(`${URL}/ui/${f}`);
		assert.equal(r.status, 200, f);
		assert.ok(r.headers.get('content-type').startsWith(type), `${f}: ${r.headers.get('content-type')}`);
		const got = sha256(Buffer.from(await r.arrayBuffer()));
		assert.equal(got, sums[f], `${f}: served bytes vs SHA256SUMS`);
		assert.equal(sha256(fs.readFileSync(path.join(vendor, f))), sums[f], `web/vendor/${f} vs SHA256SUMS`);
		assert.equal(r.headers.get('etag'), `"${got.slice(0, 32)}"`);
		assert.equal(r.headers.get('content-security-policy'), CSP, f);
	}
	assert.match(await (await fetch(`${URL}/ui/xterm.LICENSE.txt`)).text(), /The xterm\.js authors[\s\S]*Permission is hereby granted/);
	for (const f of ['package.json', 'package-lock.json', 'update.sh', 'SHA256SUMS', 'README.md', 'vendor'])
		assert.equal((await fetch(`${URL}/ui/${f}`)).status, 404, `/ui/${f} is served`);
	assert.match(await (await fetch(`${URL}/ui/`)).text(), /<link rel="stylesheet" href="\/ui\/xterm\.css">/);
});

await check('signed out: the sign-in form; a wrong token shows the API error and signs nobody in', async () => {
	const p = await newPage(admin);
	await p.goto(`${URL}/ui/`);
	await p.locator('#signin').waitFor({ timeout: WAIT });
	await shot(p, 'signed-out');
	await p.fill('#token', 'rpt_not-a-token');
	await p.click('#signin button[type=submit]');
	await p.locator('#signin .error').filter({ hasText: 'UNAUTHORIZED' }).waitFor({ timeout: WAIT });
	assert.equal(await p.evaluate(() => sessionStorage.length), 0);
	assert.equal(await p.locator('#role').count(), 0);
	await p.close();
});

await check('#token= signs in, keeps the token in sessionStorage only, and removes it from the address bar', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	assert.ok(!p.url().includes('token'), p.url());
	assert.ok(!p.url().includes(TOKENS.admin), p.url());
	assert.equal(await p.evaluate(() => location.hash), '');
	assert.equal(await p.evaluate(() => sessionStorage.getItem('rackpilot.token')), TOKENS.admin);
	assert.equal(await p.evaluate(() => localStorage.length), 0);
	// A reload stays signed in (same tab).
	await p.reload();
	await p.locator('#role').filter({ hasText: 'admin' }).waitFor({ timeout: WAIT });
	// The page's CSP allows no inline script.
	const ran = await p.evaluate(() => {
		const s = document.createElement('script');
		s.textContent = 'window.__inline = 1';
		document.head.append(s);
		return window.__inline === 1;
	});
	assert.equal(ran, false, 'an inline script ran: no Content-Security-Policy');
	await p.close();
});

await check('racks: every node drawn in its U slots, racks grouped by row, state, power and health from the API', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	await p.goto(`${URL}/ui/#/racks`);
	await p.waitForFunction((n) => document.querySelectorAll('svg.elevation g.node').length === n, SEED.length, { timeout: WAIT });
	const got = await p.evaluate((seed) => seed.map((n) => {
		const rack = document.querySelector(`section.rack[data-rack="${n.rack}"]`);
		const g = rack?.querySelector(`g.node[data-node="${n.name}"]`);
		if (!g) return { name: n.name, missing: true };
		const b = g.querySelector('rect.body').getBBox();
		const top = rack.querySelector(`rect.slot[data-u="${n.u + n.uh - 1}"]`).getBBox();
		const bottom = rack.querySelector(`rect.slot[data-u="${n.u}"]`).getBBox();
		return {
			name: n.name, label: g.querySelector('text.name').textContent,
			bodyTop: b.y, bodyBottom: b.y + b.height, slotTop: top.y, slotBottom: bottom.y + bottom.height,
			row: rack.closest('.row-group').dataset.row, site: rack.closest('.site').dataset.site,
			state: g.dataset.state, power: g.dataset.power, health: g.dataset.health ?? '', maint: g.classList.contains('maint'),
		};
	}), SEED);
	for (const n of got) {
		assert.ok(!n.missing, `${n.name} is not drawn in its rack`);
		assert.equal(n.label, n.name);
		assert.ok(Math.abs(n.bodyTop - n.slotTop) <= 1.5, `${n.name}: top ${n.bodyTop} vs slot ${n.slotTop}`);
		assert.ok(Math.abs(n.bodyBottom - n.slotBottom) <= 1.5, `${n.name}: bottom ${n.bodyBottom} vs slot ${n.slotBottom}`);
	}
	// U1 at the bottom, the top unit at the top; nothing else in the racks.
	const order = await p.evaluate(() => [...document.querySelectorAll('section.rack')].map((r) => ({
		rack: r.dataset.rack, nodes: r.querySelectorAll('g.node').length,
		u1: r.querySelector('rect.slot[data-u="1"]').getBBox().y, uTop: r.querySelector('rect.slot[data-u="42"]').getBBox().y,
		row: r.closest('.row-group').dataset.row,
	})));
	assert.deepEqual(order.map((r) => [r.rack, r.row, r.nodes]), [['r01', 'A'], ['r02', 'B'], ['r03', 'C']]
		.map(([rack, row]) => [rack, row, SEED.filter((n) => n.rack === rack).length]));
	for (const r of order) assert.ok(r.u1 > r.uTop, `${r.rack}: U1 is not below U42`);
	// State, power and health as the API tells them.
	const api = new Map((await get('/v1/nodes?limit=1000&fields=name,provision_state,power_state,maintenance,bmc')).items.map((n) => [n.name, n]));
	const fw = new Set((await get('/v1/firmware/drift')).items.map((i) => i.node));
	const bios = new Set((await get('/v1/bios/drift')).items.map((i) => i.node));
	const jobs = (await get('/v1/jobs?limit=1000')).items;
	for (const n of got) {
		const a = api.get(n.name);
		assert.equal(n.state, a.provision_state, n.name);
		assert.equal(n.power, a.power_state, n.name);
		assert.equal(n.maint, a.maintenance, n.name);
		const latest = jobs.find((j) => j.node === n.name && ['succeeded', 'failed', 'cancelled'].includes(j.state));
		const want = [a.bmc?.fault && 'BMC', fw.has(n.name) && 'FW', bios.has(n.name) && 'BIOS', latest?.state === 'failed' && 'JOB'].filter(Boolean).join(' ');
		assert.equal(n.health, want, `${n.name} health marks`);
	}
	// The seed has each kind of mark somewhere, so the comparisons above are not all empty.
	assert.match(got.find((n) => n.name === 'mgmt-r02-u41').health, /BMC.*JOB/);
	assert.match(got.find((n) => n.name === 'gpu-r01-u06').health, /FW BIOS/);
	assert.ok(got.find((n) => n.name === 'gpu-r02-u17').maint);
	assert.ok(got.some((n) => n.power === 'off') && got.some((n) => n.power === 'on'));
	assert.equal(await p.locator('#demo').isVisible(), false, 'DEMO DATA banner without demo mode');
	await shot(p, 'racks');
	await p.click('g.node[data-node="gpu-r01-u11"]');
	await p.locator('#node-head h1').filter({ hasText: 'gpu-r01-u11' }).waitFor({ timeout: WAIT });
	assert.equal(await p.evaluate(() => location.hash), '#/node/gpu-r01-u11');
	await p.close();
});

await check('nodes: filters and search run on the server (rack, q, state, tag), sort by name, keyset paging', async () => {
	const p = await newPage(admin);
	const seen = [];
	p.on('request', (r) => { if (r.url().includes('/v1/nodes?')) seen.push(new globalThis.URL(r.url()).searchParams); });
	await signIn(p, 'admin');
	await p.goto(`${URL}/ui/#/nodes`);
	await waitNames(p, SEED.map((n) => n.name), 'all nodes');
	await shot(p, 'nodes');
	await p.selectOption('#f-rack', 'r02');
	await waitNames(p, nodesNamed((n) => n.rack === 'r02'), 'rack r02');
	assert.ok(seen.some((q) => q.get('rack') === 'r02'), 'no GET /v1/nodes?rack=r02');
	assert.match(await p.evaluate(() => location.hash), /rack=r02/);
	await p.fill('#f-q', 'u0');
	await waitNames(p, nodesNamed((n) => n.rack === 'r02' && n.name.includes('u0')), 'rack r02, q=u0');
	assert.ok(seen.some((q) => q.get('rack') === 'r02' && q.get('q') === 'u0'), 'no GET /v1/nodes?rack=r02&q=u0');
	await p.click('text=clear filters');
	await waitNames(p, SEED.map((n) => n.name), 'filters cleared');
	await p.selectOption('#f-state', 'manageable');
	await waitNames(p, (await get('/v1/nodes?state=manageable&fields=name')).items.map((n) => n.name), 'state manageable');
	await p.selectOption('#f-state', '');
	await p.fill('#f-tag', 'bringup');
	await waitNames(p, nodesNamed((n) => n.tag === 'bringup'), 'tag bringup');
	await p.fill('#f-tag', '');
	await waitNames(p, SEED.map((n) => n.name), 'tag cleared');
	await p.click('#sort-name');
	await p.waitForFunction(() => location.hash.includes('sort=name'));
	const sorted = SEED.map((n) => n.name).sort();
	await p.waitForFunction((w) => JSON.stringify([...document.querySelectorAll('#nodes-rows tr[data-node]')].map((t) => t.dataset.node)) === JSON.stringify(w), sorted, { timeout: WAIT })
		.catch(async () => assert.deepEqual(await names(p), sorted, 'sorted by name'));
	// Pages of 5 by name: every node once, in order; Previous goes back.
	await p.goto(`${URL}/ui/#/nodes?sort=name&limit=5`);
	await p.reload();
	const pagesSeen = [];
	for (let i = 0; i < 10; i++) {
		await p.locator('#page-no').filter({ hasText: `page ${i + 1}` }).waitFor({ timeout: WAIT });
		await p.waitForFunction(() => document.querySelector('#nodes-status').textContent.endsWith('shown'));
		pagesSeen.push(await names(p));
		if (await p.locator('#next').isDisabled()) break;
		await p.click('#next');
	}
	assert.deepEqual(pagesSeen.flat(), sorted);
	assert.ok(pagesSeen.length === Math.ceil(sorted.length / 5) && pagesSeen.slice(0, -1).every((x) => x.length === 5), JSON.stringify(pagesSeen));
	assert.ok(seen.some((q) => q.get('cursor') && q.get('limit') === '5'), 'no request with a cursor');
	await p.click('#prev');
	await p.locator('#page-no').filter({ hasText: `page ${pagesSeen.length - 1}` }).waitFor({ timeout: WAIT });
	await waitNames(p, pagesSeen.at(-2), 'previous page');
	// A filter the API refuses: its error is shown.
	await p.goto(`${URL}/ui/#/nodes?rack=no-such-rack`);
	await p.reload();
	await p.locator('.error').filter({ hasText: 'BAD_QUERY' }).waitFor({ timeout: WAIT });
	await p.close();
});

await check('node page: identity, BMC without a password, inventory, BIOS and firmware drift, jobs with details, events', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	for (const name of ['gpu-r01-u06', 'gpu-r01-u11']) {
		const inv = (await get(`/v1/nodes/${name}/inventory`)).data;
		await p.goto(`${URL}/ui/#/node/${name}`);
		await p.locator('#inv-gpus').waitFor({ timeout: WAIT });
		assert.equal(await p.textContent('#inv-gpus'), String(inv.gpus.count), `${name} GPUs`);
		assert.equal(await p.textContent('#inv-hcas'), String(inv.pci.hca_count), `${name} HCAs`);
		assert.equal(await p.locator('#card-inventory table.gpus tbody tr').count(), inv.gpus.items.length);
		assert.ok((await p.textContent('#inv-summary')).includes(inv.cpu.model), 'CPU model');
		assert.ok((await p.textContent('#card-identity')).includes(`SN-${name}`), 'serial');
	}
	assert.equal(await p.textContent('#inv-gpus'), '7', 'the 7-GPU fixture');
	await p.goto(`${URL}/ui/#/node/gpu-r01-u06`);
	await p.locator('#inv-gpus').filter({ hasText: '8' }).waitFor({ timeout: WAIT });
	await p.locator('#card-bios tr[data-attr="NumaPerSocket"].drift').waitFor({ timeout: WAIT });
	assert.equal(await p.locator('#card-bios tr.drift').count(), (await get('/v1/nodes/gpu-r01-u06/bios')).diff.length);
	await p.locator('#card-firmware tr[data-component="bmc"].drift').waitFor({ timeout: WAIT });
	const jobs = (await get('/v1/jobs?node=gpu-r01-u06')).items;
	await p.waitForFunction((n) => document.querySelectorAll('#card-jobs tr[data-job]').length === n, Math.min(jobs.length, 15), { timeout: WAIT });
	const events = (await get('/v1/events?node=gpu-r01-u06&limit=30')).items;
	await p.waitForFunction((n) => document.querySelectorAll('#events li').length === n, events.length, { timeout: WAIT });
	assert.equal(await p.getAttribute('#events li:first-child', 'data-id'), String(events[0].id));
	await shot(p, 'node');
	await p.click(`#card-jobs tr[data-job="${jobs[0].id}"]`);
	await p.locator(`#card-jobs tr.job-detail[data-job="${jobs[0].id}"]`).filter({ hasText: 'Attempts' }).waitFor({ timeout: WAIT });
	// The BMC password went in with the node and never comes back out.
	await p.goto(`${URL}/ui/#/node/mgmt-r02-u41`);
	await p.locator('#card-identity').filter({ hasText: 'mgmt' }).waitFor({ timeout: WAIT });
	await p.locator('.card').filter({ hasText: 'set (never shown)' }).waitFor({ timeout: WAIT });
	assert.ok(!(await p.content()).includes('pw-NEVER-SHOWN'), 'the BMC password is on the page');
	await p.close();
});

await check('operator: power off is cancelled at the confirmation; power on runs a job that the page follows to success', async () => {
	const c = await context();
	const p = await newPage(c);
	await signIn(p, 'operator');
	const node = 'gpu-r01-u26';
	assert.equal((await get(`/v1/nodes/${node}`)).power_state, 'off', 'seed: the node is off');
	await p.goto(`${URL}/ui/#/node/${node}`);
	await p.locator('#power-actions button.action').first().waitFor({ timeout: WAIT });
	assert.equal(await p.locator('#power-actions button.action').count(), 3);
	const before = (await get(`/v1/jobs?node=${node}`)).items.length;
	await p.click('button[data-power="off"]');
	await p.locator('dialog#confirm[open]').waitFor({ timeout: WAIT });
	assert.match(await p.textContent('dialog#confirm .c-title'), new RegExp(`Power off.*${node}`));
	await p.click('dialog#confirm .c-cancel');
	await p.locator('dialog#confirm[open]').waitFor({ state: 'detached', timeout: WAIT });
	assert.equal((await get(`/v1/jobs?node=${node}`)).items.length, before, 'a cancelled confirmation created a job');
	assert.equal(await p.isVisible('#job-panel'), false);
	await p.evaluate(() => {
		window.__states = [];
		const el = document.getElementById('job-panel');
		new MutationObserver(() => {
			if (el.dataset.state && window.__states.at(-1) !== el.dataset.state) window.__states.push(el.dataset.state);
		}).observe(el, { attributes: true, attributeFilter: ['data-state'] });
	});
	await p.click('button[data-power="on"]');
	await p.locator('dialog#confirm[open]').waitFor({ timeout: WAIT });
	await p.click('dialog#confirm .c-ok');
	await p.locator('#job-panel[data-state="succeeded"]').waitFor({ timeout: 30000 });
	const states = await p.evaluate(() => window.__states);
	assert.ok(['queued', 'running'].includes(states[0]) && states.at(-1) === 'succeeded', JSON.stringify(states));
	const id = await p.getAttribute('#job-panel', 'data-job');
	const job = await get(`/v1/jobs/${id}`);
	assert.equal(job.type, 'power');
	assert.equal(job.params.target, 'on');
	assert.equal(job.state, 'succeeded');
	assert.equal(job.created_by, 'token:ops');
	await p.locator('#node-head[data-power="on"]').waitFor({ timeout: WAIT });
	assert.equal((await get(`/v1/nodes/${node}`)).power_state, 'on');
	await p.locator(`#card-jobs tr[data-job="${id}"]`).waitFor({ timeout: WAIT });
	// An action the API refuses: its error is shown (a node without a BMC).
	assert.equal((await curl('POST', '/v1/nodes', { name: 'spare-no-bmc' })).status, 201);
	const refused = await curl('PUT', '/v1/nodes/spare-no-bmc/power', { target: 'on' }, TOKENS.operator);
	assert.ok(refused.status >= 400, `power on a node without BMC: ${refused.status}`);
	await p.goto(`${URL}/ui/#/node/spare-no-bmc`);
	await p.locator('button[data-power="on"]').waitFor({ timeout: WAIT });
	await p.click('button[data-power="on"]');
	await p.click('dialog#confirm .c-ok');
	await p.locator('#job-panel .error').filter({ hasText: refused.json.error.code }).waitFor({ timeout: WAIT });
	await p.locator('#toasts .toast.error').filter({ hasText: refused.json.error.code }).waitFor({ timeout: WAIT });
	assert.equal((await curl('DELETE', '/v1/nodes/spare-no-bmc')).status, 204);
	await c.close();
});

await check('operator: Identify queues an identify job at once and the page follows it; Identify off; Reset BMC and Rotate BMC password ask first; a refusal is shown', async () => {
	const c = await context();
	const p = await newPage(c);
	await signIn(p, 'operator');
	const node = 'gpu-r02-u33';
	const jobs = async (type) => (await get(`/v1/jobs?node=${node}&type=${type}&limit=100`)).items;
	assert.deepEqual(await jobs('identify'), [], 'seed: an identify job');
	await p.goto(`${URL}/ui/#/node/${node}`);
	await p.locator('#bmc-actions button.action').first().waitFor({ timeout: WAIT });
	assert.deepEqual(await p.locator('#bmc-actions button.action').allTextContents(), ['Identify', 'Identify off', 'Reset BMC', 'Rotate BMC password']);
	// Identify only lights a lamp: no question, a job at once.
	await p.click('button[data-bmc="identify"]');
	await p.locator('#job-panel:not([data-job=""])').waitFor({ timeout: WAIT });
	assert.equal(await p.locator('dialog#confirm[open]').count(), 0, 'Identify asked first');
	const on = await jobs('identify');
	assert.equal(on.length, 1, JSON.stringify(on));
	assert.equal(on[0].node, node);
	assert.deepEqual(on[0].params, { on: true, seconds: 900 });
	assert.equal(on[0].created_by, 'token:ops');
	assert.equal(await p.getAttribute('#job-panel', 'data-job'), on[0].id);
	// The fake BMC cannot time the light: the job waits, queued, until it turns it off; the
	// page says so as a note, not as an error.
	await p.locator('#job-panel[data-state="queued"] .job-note').filter({ hasText: 'off again in 900 s' }).waitFor({ timeout: WAIT });
	assert.match(await p.textContent('#job-panel'), /identify on \(15 min\)/);
	assert.equal(await p.locator('#job-panel .err-msg, #job-panel .error').count(), 0);
	await p.click('button[data-bmc="identify-off"]');
	await p.locator('#job-panel[data-state="succeeded"]').filter({ hasText: 'identify off' }).waitFor({ timeout: 30000 });
	const off = await get(`/v1/jobs/${await p.getAttribute('#job-panel', 'data-job')}`);
	assert.equal(off.type, 'identify');
	assert.deepEqual(off.params, { on: false });
	assert.equal(off.result.lit, false);
	// Reset BMC: cancelled at the question, nothing queued; then confirmed and followed.
	await p.click('button[data-bmc="reset"]');
	await p.locator('dialog#confirm[open]').waitFor({ timeout: WAIT });
	assert.match(await p.textContent('dialog#confirm .c-title'), new RegExp(`Reset BMC.*${node}`));
	await p.click('dialog#confirm .c-cancel');
	await p.locator('dialog#confirm[open]').waitFor({ state: 'detached', timeout: WAIT });
	assert.deepEqual(await jobs('bmc_reset'), [], 'a cancelled question queued a BMC reset');
	await p.click('button[data-bmc="reset"]');
	await p.click('dialog#confirm .c-ok');
	await p.locator('#job-panel[data-state="succeeded"]').filter({ hasText: 'BMC reset' }).waitFor({ timeout: 60000 });
	const reset = await jobs('bmc_reset');
	assert.equal(reset.length, 1);
	assert.equal(reset[0].state, 'succeeded');
	assert.equal(await p.getAttribute('#job-panel', 'data-job'), reset[0].id);
	// Rotate BMC password: asks; the fake BMC has no user, which the API refuses: shown.
	const refused = await curl('POST', `/v1/nodes/${node}/bmc/credentials/rotate`, {}, TOKENS.operator);
	assert.equal(refused.status, 409, JSON.stringify(refused.json));
	await p.click('button[data-bmc="rotate"]');
	await p.locator('dialog#confirm[open]').waitFor({ timeout: WAIT });
	assert.match(await p.textContent('dialog#confirm .c-title'), new RegExp(`Rotate BMC password.*${node}`));
	await p.click('dialog#confirm .c-ok');
	await p.locator('#job-panel .error').filter({ hasText: refused.json.error.code }).waitFor({ timeout: WAIT });
	await p.locator('#toasts .toast.error').filter({ hasText: 'Rotate BMC password failed' }).waitFor({ timeout: WAIT });
	assert.deepEqual(await jobs('bmc_rotate'), []);
	assert.deepEqual(await p.evaluate(() => window.__html), []);
	await c.close();
});

await check('console: a fake BMC has no serial console: rackpilotd refuses the handshake (409) and the pane says so, after the log tail; the token is a subprotocol, never in the URL', async () => {
	const node = 'gpu-r02-u33';
	const refused = await handshake(`/v1/nodes/${node}/console`, TOKENS.operator);
	assert.equal(refused.status, 409, JSON.stringify(refused));
	assert.ok(['UNSUPPORTED', 'CONFLICT'].includes(refused.json.error.code), JSON.stringify(refused.json));
	const c = await context();
	const p = await newPage(c);
	const sockets = [];
	p.on('websocket', (ws) => sockets.push(ws.url()));
	await signIn(p, 'operator');
	await p.goto(`${URL}/ui/#/node/${node}`);
	await p.locator('#console-status[data-state="idle"]').waitFor({ timeout: WAIT });
	assert.equal(await p.isVisible('#console-term'), false, 'a terminal before Open console');
	assert.deepEqual(sockets, [], 'a console opened without being asked');
	const tail = p.waitForRequest((r) => new globalThis.URL(r.url()).pathname === `/v1/nodes/${node}/console/log`, { timeout: WAIT });
	await p.click('#console-open');
	const req = await tail;
	assert.equal(new globalThis.URL(req.url()).searchParams.get('tail'), '200');
	assert.equal(req.headers().authorization, `Bearer ${TOKENS.operator}`);
	const st = p.locator('#console-status[data-state="refused"]');
	await st.waitFor({ timeout: WAIT });
	const text = await st.textContent();
	assert.ok(text.includes(`did not open the console of ${node}`), text);
	assert.match(text, /driver \(fake\) has no serial console.*IPMI Serial over LAN/, text);
	// The terminal is up, the log (empty) first; the pane can open again.
	await p.waitForFunction(() => document.querySelector('#console-term .xterm-rows')?.textContent.includes('── live ──'), null, { timeout: WAIT });
	assert.ok((await p.textContent('#console-term .xterm-rows')).includes('no console log lines'));
	assert.equal(await p.isVisible('#console-open'), true);
	assert.equal(await p.isVisible('#console-disconnect'), false);
	assert.equal(await p.isDisabled('#console-break'), true);
	assert.deepEqual(sockets, [`${URL.replace(/^http/, 'ws')}/v1/nodes/${node}/console`]);
	// The browser console holds the refused handshake (its 409 is all a browser learns of it)
	// and nothing else: xterm's styles went through the CSSOM, without a CSP refusal.
	const errs = consoleErrors.get(p);
	assert.equal(errs.length, 1, JSON.stringify(errs));
	assert.match(errs[0], /WebSocket connection to .*\/console' failed: .*409/);
	const styles = await p.evaluate(() => ({
		elements: document.querySelectorAll('style').length, adopted: document.adoptedStyleSheets.length,
		cell: getComputedStyle(document.querySelector('#console-term .xterm-rows span')).display,
		row: document.querySelector('#console-term .xterm-rows > div').getBoundingClientRect().height,
	}));
	assert.equal(styles.elements, 0, 'a <style> element');
	assert.ok(styles.adopted >= 2, `${styles.adopted} adopted stylesheets`);
	assert.equal(styles.cell, 'inline-block', 'xterm\'s own rules do not apply');
	assert.ok(styles.row > 8, `rows ${styles.row}px high`);
	assert.deepEqual(await p.evaluate(() => window.__html), []);
	await shot(p, 'node-console-refused');
	await c.close();
});

await check('console (WebSocket routed by the test): a hostile node name, log line and status messages are text; output written; typing goes out as UTF-8, break as JSON; read-only reconnects with mode=read; closed; Disconnect', async () => {
	const name = '<img src=x onerror=window.__xss=7>"q"\'a\'&amp;';
	const hostile = '<img src=x onerror=window.__xss=8> you hold the console & "that" is <b>it</b>';
	const closing = '<script>window.__xss=9</script> the BMC closed the session';
	const logLine = '<img src=x onerror=window.__xss=10> \x1b[31mred\x1b[0m';
	const base = await get('/v1/nodes/gpu-r01-u01');
	const fakeNode = { ...base, name, bmc: { ...base.bmc, driver: 'ipmi', address: '192.0.2.1', options: null } };
	const c = await context();
	const p = await newPage(c);
	// This node exists only here: the page's calls about it are answered by the test.
	await p.route((u) => decodeURIComponent(u.pathname).startsWith(`/v1/nodes/${name}`), (route) => {
		const rest = decodeURIComponent(new globalThis.URL(route.request().url()).pathname).slice(`/v1/nodes/${name}`.length);
		if (rest === '') return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(fakeNode) });
		if (rest === '/console/log') {
			return route.fulfill({ status: 200, contentType: 'text/plain; charset=utf-8',
				body: `2026-01-02T03:04:05.000Z first line\n2026-01-02T03:04:06.000Z ${logLine}\n` });
		}
		return route.fulfill({ status: 404, contentType: 'application/json',
			body: JSON.stringify({ error: { code: 'NOT_FOUND', message: 'not in this test', detail: null } }) });
	});
	const conns = [];
	await p.routeWebSocket((u) => u.pathname.endsWith('/console'), (ws) => {
		const conn = { url: ws.url(), protocols: ws.protocols(), got: [], closed: false, ws };
		conns.push(conn);
		ws.onMessage((m) => conn.got.push(m));
		ws.onClose(() => { conn.closed = true; });
		const read = new globalThis.URL(ws.url()).searchParams.get('mode') === 'read';
		ws.send(JSON.stringify({ type: 'status', writer: !read, message: read ? 'watching: ops holds the console' : hostile }));
		ws.send(Buffer.from('\x1b[1;31mBIOS\x1b[0m <b>not bold</b>\r\nlogin: '));
	});
	const rowsText = () => p.evaluate(() => [...document.querySelectorAll('#console-term .xterm-rows > div')].map((r) => r.textContent.trimEnd()).join('\n'));
	const until = async (f, what) => {
		for (let i = 0; i < 150 && !(await f()); i++) await new Promise((res) => setTimeout(res, 100));
		assert.ok(await f(), what);
	};
	await signIn(p, 'operator');
	await p.goto(`${URL}/ui/#/node/${encodeURIComponent(name)}`);
	await p.locator('#node-head h1').filter({ hasText: name }).waitFor({ timeout: WAIT });
	assert.equal(await p.textContent('#node-head h1'), name);
	await p.click('#console-open');
	await p.waitForFunction((m) => document.querySelector('#console-status').textContent === m, hostile, { timeout: WAIT });
	assert.equal(await p.getAttribute('#console-status', 'data-state'), 'open');
	assert.equal(conns.length, 1);
	assert.deepEqual(conns[0].protocols, ['rackpilot', `rackpilot.bearer.${TOKENS.operator}`]);
	const u0 = new globalThis.URL(conns[0].url);
	assert.equal(u0.pathname, `/v1/nodes/${encodeURIComponent(name)}/console`);
	assert.equal(u0.search, '', 'an operator writes by default');
	assert.ok(!conns[0].url.includes(TOKENS.operator), 'the token in the WebSocket URL');
	// The log first (text: no escape sequences, no markup), then what the socket wrote.
	await until(async () => (await rowsText()).includes('login:'), 'no output in the terminal');
	const text = await rowsText();
	const iLog = text.indexOf('<img src=x onerror=window.__xss=10> red');
	const iLive = text.indexOf('── live ──');
	const iOut = text.indexOf('BIOS <b>not bold</b>');
	assert.ok(text.includes('2026-01-02T03:04:05.000Z first line'), text);
	assert.ok(iLog > 0 && iLive > iLog && iOut > iLive, text);
	assert.equal(await p.locator('main img, main script, main b').count(), 0, 'markup from the node, the log, the output or a message');
	assert.equal(await p.evaluate(() => window.__xss), undefined);
	// Typing: UTF-8 bytes in binary frames; Send break: {"type":"break"}.
	assert.equal(await p.getAttribute('#card-console .console', 'data-writer'), 'true');
	await p.click('#console-term');
	await p.keyboard.type('é!');
	await p.keyboard.press('Enter');
	const bytes = () => Buffer.concat(conns[0].got.filter((m) => typeof m !== 'string'));
	await until(() => bytes().length >= 4, `typed bytes: ${JSON.stringify(conns[0].got)}`);
	assert.deepEqual([...bytes()], [0xc3, 0xa9, 0x21, 0x0d]);
	await p.click('#console-break');
	await until(() => conns[0].got.includes('{"type":"break"}'), `no break: ${JSON.stringify(conns[0].got)}`);
	// Read-only: the same console again with mode=read; no writer, nothing typed goes out.
	await p.check('#console-ro');
	await until(() => conns.length === 2 && conns[0].closed, 'no reconnection');
	assert.equal(new globalThis.URL(conns[1].url).searchParams.get('mode'), 'read');
	await p.locator('#console-status').filter({ hasText: 'watching: ops holds the console' }).waitFor({ timeout: WAIT });
	assert.equal(await p.getAttribute('#card-console .console', 'data-writer'), 'false');
	assert.equal(await p.isDisabled('#console-break'), true);
	await p.click('#console-term');
	await p.keyboard.type('x');
	await new Promise((res) => setTimeout(res, 300));
	assert.deepEqual(conns[1].got, [], 'a read-only console sent something');
	// The server closes it with a message: shown as it is, and the pane can open again.
	conns[1].ws.send(JSON.stringify({ type: 'closed', writer: false, error: true, message: closing }));
	await conns[1].ws.close({ code: 1000, reason: 'bye' });
	await p.waitForFunction((m) => document.querySelector('#console-status').textContent === m, closing, { timeout: WAIT });
	assert.equal(await p.getAttribute('#console-status', 'data-state'), 'error');
	await p.locator('#console-open').waitFor({ timeout: WAIT });
	// Open again (still read-only), then Disconnect.
	await p.click('#console-open');
	await until(() => conns.length === 3, 'no third connection');
	assert.equal(new globalThis.URL(conns[2].url).searchParams.get('mode'), 'read');
	await p.locator('#console-disconnect').waitFor({ timeout: WAIT });
	await p.click('#console-disconnect');
	await until(() => conns[2].closed, 'Disconnect left the socket open');
	assert.equal(await p.textContent('#console-status'), 'Disconnected.');
	assert.equal(await p.locator('main img, main script, main b').count(), 0);
	assert.equal(await p.evaluate(() => window.__xss), undefined);
	assert.deepEqual(await p.evaluate(() => window.__html), []);
	await shot(p, 'node-console');
	await c.close();
});

await check('viewer: no action buttons on any page', async () => {
	const c = await context();
	const p = await newPage(c);
	await signIn(p, 'viewer');
	await p.goto(`${URL}/ui/#/node/gpu-r01-u26`);
	await p.locator('#card-identity').filter({ hasText: 'SN-gpu-r01-u26' }).waitFor({ timeout: WAIT });
	await p.locator('#card-jobs tr[data-job]').first().waitFor({ timeout: WAIT });
	assert.equal(await p.locator('button.action').count(), 0);
	assert.equal(await p.locator('#power-actions').count(), 0);
	assert.equal(await p.locator('#bmc-actions').count(), 0);
	// The console is an operator's: what a node prints may hold secrets (its boot token).
	await p.locator('#console-operators').waitFor({ timeout: WAIT });
	assert.equal(await p.locator('#console-open').count(), 0);
	assert.equal(await p.locator('#console-break').count(), 0);
	for (const [view, ready] of [['racks', 'svg.elevation g.node'], ['nodes', '#nodes-rows tr[data-node]'], ['fleet', '#card-rollouts .rollout'],
		['power', 'table.power-racks tr[data-rack]']]) {
		await p.goto(`${URL}/ui/#/${view}`);
		await p.locator(ready).first().waitFor({ timeout: WAIT });
		assert.equal(await p.locator('main button.action, main button.danger').count(), 0, view);
	}
	assert.equal(await p.locator('#sensors-sync').count(), 0, 'Read sensors now for a viewer');
	await c.close();
});

await check('live: a change made with curl updates the open pages without a reload (and reasons are text, not HTML)', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	await p.goto(`${URL}/ui/#/node/gpu-r01-u16`);
	await p.locator('#node-head[data-maintenance="false"]').waitFor({ timeout: WAIT });
	await p.locator('#live[data-state="live"], #live[data-state="polling"]').waitFor({ timeout: WAIT });
	const racks = await newPage(admin); // a tab of its own: its own sessionStorage
	await signIn(racks, 'admin');
	await racks.goto(`${URL}/ui/#/racks`);
	await racks.locator('g.node[data-node="gpu-r01-u21"]:not(.maint)').waitFor({ timeout: WAIT });
	await racks.locator('#live[data-state="live"], #live[data-state="polling"]').waitFor({ timeout: WAIT });
	await p.evaluate(() => { window.__same = 'this page'; });
	await racks.evaluate(() => { window.__same = 'this page'; });
	const reason = '<img src=x onerror="window.__xss=1">';
	let r = await curl('PATCH', '/v1/nodes/gpu-r01-u16', { maintenance: true, maintenance_reason: reason });
	assert.equal(r.status, 200);
	r = await curl('PATCH', '/v1/nodes/gpu-r01-u21', { maintenance: true, maintenance_reason: 'live test' });
	assert.equal(r.status, 200);
	await p.locator('#node-head[data-maintenance="true"]').waitFor({ timeout: WAIT });
	await p.locator('#events li[data-action="node.updated"]').first().waitFor({ timeout: WAIT });
	assert.ok((await p.textContent('#node-head')).includes(reason), 'the reason is not shown as text');
	assert.equal(await p.locator('#node-head img').count(), 0);
	assert.equal(await p.evaluate(() => window.__xss), undefined);
	await racks.locator('g.node[data-node="gpu-r01-u21"].maint').waitFor({ timeout: WAIT });
	assert.equal(await p.evaluate(() => window.__same), 'this page', 'the node page reloaded');
	assert.equal(await racks.evaluate(() => window.__same), 'this page', 'the racks page reloaded');
	for (const n of ['gpu-r01-u16', 'gpu-r01-u21']) assert.equal((await curl('PATCH', `/v1/nodes/${n}`, { maintenance: false })).status, 200);
	await p.locator('#node-head[data-maintenance="false"]').waitFor({ timeout: WAIT });
	await racks.locator('g.node[data-node="gpu-r01-u21"]:not(.maint)').waitFor({ timeout: WAIT });
	await p.close();
	await racks.close();
});

await check('live: without an event stream (404) the page polls the event log and still updates', async () => {
	const p = await newPage(admin);
	await p.route('**/v1/events/stream', (route) => route.fulfill({
		status: 404, contentType: 'application/json',
		body: JSON.stringify({ error: { code: 'NOT_FOUND', message: 'no such resource', detail: { path: '/v1/events/stream' } } }),
	}));
	// The first poll of the event log (no node filter) is where polling starts from.
	const firstPoll = p.waitForResponse((r) => {
		const u = new globalThis.URL(r.url());
		return u.pathname === '/v1/events' && !u.searchParams.has('node') && r.status() === 200;
	}, { timeout: WAIT });
	await signIn(p, 'admin');
	await firstPoll;
	await p.goto(`${URL}/ui/#/node/gpu-r01-u31`);
	await p.locator('#node-head[data-maintenance="false"]').waitFor({ timeout: WAIT });
	await p.locator('#live[data-state="polling"]').waitFor({ timeout: WAIT });
	assert.equal((await curl('PATCH', '/v1/nodes/gpu-r01-u31', { maintenance: true })).status, 200);
	await p.locator('#node-head[data-maintenance="true"]').waitFor({ timeout: WAIT });
	assert.equal((await curl('PATCH', '/v1/nodes/gpu-r01-u31', { maintenance: false })).status, 200);
	await p.locator('#node-head[data-maintenance="false"]').waitFor({ timeout: WAIT });
	await p.close();
});

await check('live: a dropped stream reconnects with Last-Event-ID', async () => {
	const head = (await get('/v1/events?limit=1')).items[0].id;
	const p = await newPage(admin);
	const streams = [];
	p.on('request', (r) => { if (r.url().endsWith('/v1/events/stream')) streams.push(r.headers()['last-event-id'] ?? null); });
	let n = 0;
	const second = p.waitForRequest((r) => r.url().endsWith('/v1/events/stream') && ++n === 2, { timeout: WAIT });
	let first = true;
	await p.route('**/v1/events/stream', async (route) => {
		if (!first) return route.continue();
		first = false;
		// One event, then the connection ends.
		await route.fulfill({
			status: 200, contentType: 'text/event-stream',
			body: `: hello\n\nretry: 200\nid: ${head}\nevent: test.dropped\ndata: {"id":${head},"action":"test.dropped","object":null,"summary":"x"}\n\n`,
		});
	});
	await signIn(p, 'admin');
	await p.goto(`${URL}/ui/#/node/gpu-r01-u36`);
	await p.locator('#node-head[data-maintenance="false"]').waitFor({ timeout: WAIT });
	const again = await second;
	assert.equal(streams[0], null, 'the first stream request had a Last-Event-ID');
	assert.equal(again.headers()['last-event-id'], String(head));
	await p.waitForFunction(() => document.querySelector('#live').dataset.state === 'live', null, { timeout: WAIT });
	assert.equal((await curl('PATCH', '/v1/nodes/gpu-r01-u36', { maintenance: true })).status, 200);
	await p.locator('#node-head[data-maintenance="true"]').waitFor({ timeout: WAIT });
	assert.equal((await curl('PATCH', '/v1/nodes/gpu-r01-u36', { maintenance: false })).status, 200);
	await p.close();
});

await check('API errors are shown: an unknown node', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	await p.goto(`${URL}/ui/#/node/no-such-node`);
	const err = p.locator('main .error').filter({ hasText: 'NOT_FOUND' });
	await err.waitFor({ timeout: WAIT });
	assert.ok((await err.textContent()).includes('GET /v1/nodes/no-such-node'));
	await p.close();
});

await check('fleet: firmware and BIOS drift as the API counts it, the rollout with its waves', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	await p.goto(`${URL}/ui/#/fleet`);
	const fw = await get('/v1/firmware/drift');
	const bios = await get('/v1/bios/drift');
	const ro = (await get('/v1/rollouts')).items[0];
	const full = await get(`/v1/rollouts/${ro.id}`);
	await p.locator(`#card-rollouts .rollout[data-rollout="${ro.id}"][data-state="${ro.state}"]`).waitFor({ timeout: WAIT });
	assert.equal(await p.textContent('#fw-drifted'), String(fw.nodes_drifted));
	assert.equal(await p.textContent('#bios-drifted'), String(bios.nodes_drifted));
	assert.ok(fw.nodes_drifted > 0 && bios.nodes_drifted > 0, 'seed: drift');
	assert.deepEqual(await p.locator('#card-fw-drift tr[data-node]').evaluateAll((t) => t.map((x) => x.dataset.node)), fw.items.map((i) => i.node));
	assert.equal(await p.locator(`.rollout[data-rollout="${ro.id}"] table.waves tbody tr`).count(), full.waves.length);
	assert.ok(full.waves.length > 0, 'seed: waves');
	const failed = (await get('/v1/jobs?state=failed&limit=10')).items;
	assert.ok(failed.length > 0, 'seed: a failed job');
	await p.waitForFunction((n) => document.querySelectorAll('#card-jobs table.failed-jobs tr[data-job]').length === n, failed.length, { timeout: WAIT });
	assert.equal(await p.getAttribute('#card-jobs table.failed-jobs tbody tr:first-child', 'data-job'), failed[0].id);
	await shot(p, 'fleet');
	await p.close();
});

// ---- Power and sensors: rack draw against budget, sparklines, hottest sensors, the power
// page, the node's sensors. Expectations come from the API at the time of the check.

const kwText = (w) => (w === null || w === undefined ? '—' : (w / 1000).toFixed(1));
const isOver = (p) => p.over_limit === true || (typeof p.limit_w === 'number' && typeof p.measured_w === 'number' && p.measured_w > p.limit_w);
function powerState(p) {
	if (p.measured_w === null) return 'unread';
	if (p.budget_w === null) return 'no-budget';
	return isOver(p) ? 'over' : 'ok';
}
function powerText(p) {
	const st = powerState(p);
	if (st === 'unread') return `not read yet · ${p.budget_w === null ? 'no budget' : `budget ${kwText(p.budget_w)} kW, limit ${kwText(p.limit_w)} kW`}`;
	if (st === 'no-budget') return `${kwText(p.measured_w)} kW measured · no budget`;
	return `${kwText(p.measured_w)} of ${kwText(p.budget_w)} kW, limit ${kwText(p.limit_w)} kW, headroom ${kwText(p.headroom_w)} kW`;
}
// The hottest temperature sensor: worst health, then (of those with an upper warning) the
// highest value / upper_warning, then (of those without) the highest value.
function hottest(sensors) {
	const rank = { critical: 2, warning: 1, ok: 0 };
	const key = (s) => {
		const uw = s.thresholds?.upper_warning;
		return typeof uw === 'number' && uw > 0 ? [rank[s.health] ?? 0, 1, s.value / uw] : [rank[s.health] ?? 0, 0, s.value];
	};
	const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
	const temps = sensors.filter((s) => s.type === 'temperature' && typeof s.value === 'number');
	return temps.reduce((best, s) => (!best || cmp(key(s), key(best)) > 0 ? s : best), null);
}
async function sensorSync(tok = TOKENS.admin) {
	const before = (await get('/v1/sensors/sync', tok)).last?.finished_at ?? null;
	const r = await curl('POST', '/v1/sensors/sync', {}, tok);
	assert.equal(r.status, 202, JSON.stringify(r.json));
	for (let i = 0; i < 300; i++) {
		const s = await get('/v1/sensors/sync', tok);
		if (!s.running && (s.last?.finished_at ?? null) !== before) return s;
		await new Promise((res) => setTimeout(res, 100));
	}
	throw new Error('the sensor sweep did not end');
}
const RACKS = [...new Set(SEED.map((n) => n.rack))].sort();

await check('racks: each rack\'s draw against its budget (bar, limit line, numbers; "no budget"), a 24 h sparkline, the hottest sensor per node; bounded sensor requests', async () => {
	const c = await context();
	const p = await newPage(c);
	let inFlight = 0;
	let maxInFlight = 0;
	const sensorReqs = [];
	const isSensors = (r) => /\/v1\/nodes\/[^/]+\/sensors$/.test(new globalThis.URL(r.url()).pathname);
	p.on('request', (r) => { if (isSensors(r)) { sensorReqs.push(r.url()); maxInFlight = Math.max(maxInFlight, ++inFlight); } });
	const done = (r) => { if (isSensors(r)) inFlight--; };
	p.on('requestfinished', done);
	p.on('requestfailed', done);
	await signIn(p, 'viewer'); // the racks are the first page: one view, each sensor read once
	const power = Object.fromEntries(await Promise.all(RACKS.map(async (r) => [r, await get(`/v1/racks/${r}/power`)])));
	const hist = Object.fromEntries(await Promise.all(RACKS.map(async (r) => [r, await get(`/v1/racks/${r}/power/history`)])));
	const sensors = Object.fromEntries(await Promise.all(SEED.map(async (n) => [n.name, await get(`/v1/nodes/${n.name}/sensors`)])));
	const hot = Object.fromEntries(SEED.map((n) => [n.name, hottest(sensors[n.name].sensors)]));
	const labelled = SEED.filter((n) => hot[n.name]).length;
	await p.waitForFunction(([n, racks]) => document.querySelectorAll('svg.elevation g.node g.temp').length === n &&
		document.querySelectorAll('.rack-power:not([data-state="loading"])').length === racks, [labelled, RACKS.length], { timeout: WAIT })
		.catch(async (e) => {
			console.log(`  # labels ${await p.locator('g.temp').count()} of ${labelled}`);
			throw e;
		});
	// The seed: r01 and r02 have budgets and are under their limits, r03 has none.
	assert.deepEqual(RACKS.map((r) => powerState(power[r])), ['ok', 'ok', 'no-budget']);
	for (const r of RACKS) {
		const pw = power[r];
		const got = await p.evaluate((rack) => {
			const box = document.querySelector(`section.rack[data-rack="${rack}"] .rack-power`);
			const bar = box.querySelector('svg.power-bar');
			const spark = box.querySelector('svg.sparkline polyline.spark');
			return {
				state: box.dataset.state, text: box.querySelector('.power-text').textContent,
				bar: bar ? {
					width: Number(bar.getAttribute('width')), fill: bar.querySelector('rect.fill').getBBox().width,
					limit: Number(bar.querySelector('line.limit')?.getAttribute('x1')), over: bar.classList.contains('over'),
				} : null,
				points: spark ? spark.getAttribute('points').trim().split(/\s+/).length : 0,
				sparkLimit: !!box.querySelector('svg.sparkline line.spark-limit'),
				cardOver: box.closest('section.rack').classList.contains('over-limit'),
			};
		}, r);
		assert.equal(got.state, powerState(pw), `${r} state`);
		assert.equal(got.text, powerText(pw), `${r} numbers`);
		assert.equal(got.cardOver, false, `${r} over-limit style under the limit`);
		if (pw.budget_w !== null) {
			assert.ok(got.bar, `${r}: no power bar`);
			const scale = Math.max(pw.budget_w, pw.measured_w, pw.projected_w ?? 0);
			assert.ok(Math.abs(got.bar.fill - (pw.measured_w / scale) * got.bar.width) < 1, `${r} bar ${got.bar.fill} for ${pw.measured_w} W of ${scale}`);
			assert.ok(Math.abs(got.bar.limit - (pw.limit_w / scale) * got.bar.width) < 1.5, `${r} limit line at ${got.bar.limit}`);
			assert.ok(got.bar.fill < got.bar.limit, `${r}: the draw is drawn past the limit line`);
			assert.equal(got.bar.over, false);
			assert.match(got.text, /^\d+\.\d of \d+\.\d kW, limit \d+\.\d kW, headroom -?\d+\.\d kW$/);
		} else {
			assert.equal(got.bar, null, `${r}: a bar without a budget`);
			assert.match(got.text, /no budget/);
		}
		assert.ok(hist[r].samples.length >= 1, `seed: ${r} has a history step`);
		assert.equal(got.points, hist[r].samples.length, `${r} sparkline points`);
		assert.equal(got.sparkLimit, pw.limit_w !== null, `${r} sparkline limit line`);
	}
	// The hottest sensor per node: the label, its health, and no label where nothing was read.
	const labels = await p.evaluate(() => Object.fromEntries([...document.querySelectorAll('svg.elevation g.node')].map((g) => {
		const t = g.querySelector('g.temp');
		return [g.dataset.node, t ? { sensor: t.dataset.sensor, health: t.dataset.health, text: t.querySelector('text').textContent,
			title: t.querySelector('title').textContent, cls: t.getAttribute('class') } : null];
	})));
	for (const n of SEED) {
		const want = hot[n.name];
		if (!want) {
			assert.equal(labels[n.name], null, `${n.name}: a label without a read sensor`);
			continue;
		}
		assert.ok(labels[n.name], `${n.name}: no hottest-sensor label`);
		assert.equal(labels[n.name].sensor, want.name, `${n.name} hottest sensor`);
		assert.equal(labels[n.name].text, `${Math.round(want.value)}°`, n.name);
		assert.equal(labels[n.name].health, want.health, n.name);
		assert.ok(labels[n.name].cls.includes(`t-${want.health}`), n.name);
	}
	assert.equal(labels['gpu-r01-u01']?.sensor, 'Inlet Temp', 'a fake node: its inlet (24 of warning 40)');
	assert.equal(labels['gpu-r01-u01'].text, '24°');
	assert.equal(labels['mgmt-r02-u41'], null, 'the unreachable BMC: never read, no label');
	// The mock BMC's node: its hostile-named inlet, past its warning, is the hottest, as text.
	const hostile = E.RP_HOSTILE_SENSOR;
	assert.ok(hostile.includes('<script>') && hostile.includes('"') && hostile.includes("'"), 'seed: a hostile sensor name');
	assert.equal(labels['rf-r03-u20']?.sensor, hostile);
	assert.equal(labels['rf-r03-u20'].health, 'warning');
	assert.ok(labels['rf-r03-u20'].title.includes(hostile), 'the name in the label\'s title, as text');
	assert.equal(await p.locator('main script, main img').count(), 0);
	assert.equal(await p.evaluate(() => window.__xss), undefined);
	// Requests: one sensors read per read, placed node, at most 4 at once.
	const read = SEED.filter((n) => sensors[n.name].read_at).map((n) => n.name).sort();
	const asked = sensorReqs.map((u) => decodeURIComponent(u.split('/v1/nodes/')[1].split('/')[0])).sort();
	assert.deepEqual(asked, read, 'sensors read once for each node that was read, and only those');
	assert.ok(maxInFlight <= 4, `${maxInFlight} sensor requests at once`);
	await clean(p, 'racks');
	await shot(p, 'racks-power');
	await c.close();
});

await check('power page: racks by headroom % ascending (no budget last), totals from /v1/power; an operator reads the sensors now', async () => {
	const c = await context();
	const p = await newPage(c);
	await signIn(p, 'operator');
	await p.click('#nav a[data-view="power"]');
	await p.waitForURL(/#\/power$/, { timeout: WAIT });
	const pw = await get('/v1/power');
	await p.waitForFunction((n) => document.querySelectorAll('table.power-racks tr[data-rack]').length === n, pw.racks.length, { timeout: WAIT });
	assert.ok(await p.locator('#nav a[data-view="power"].on').count(), 'the Power tab is not marked');
	const order = await p.locator('table.power-racks tr[data-rack]').evaluateAll((t) => t.map((x) => x.dataset.rack));
	const want = [...pw.racks].sort((a, b) => (a.headroom_pct === null) - (b.headroom_pct === null) ||
		(a.headroom_pct ?? 0) - (b.headroom_pct ?? 0) || a.rack.localeCompare(b.rack)).map((r) => r.rack);
	assert.deepEqual(order, want);
	assert.deepEqual(order, ['r02', 'r01', 'r03'], 'seed: r02 (3.2 kW budget) is the tightest, r03 has no budget');
	for (const r of pw.racks) {
		const cells = await p.locator(`table.power-racks tr[data-rack="${r.rack}"] td`).allTextContents();
		assert.deepEqual(cells.slice(0, 6), [r.rack, kwText(r.measured_w), kwText(r.limit_w), kwText(r.budget_w),
			r.headroom_pct === null ? '—' : `${r.headroom_pct.toFixed(1)} %`, kwText(r.projected_w)], r.rack);
		assert.equal(cells[7].includes('over limit'), isOver(r), `${r.rack} over-limit marker`);
	}
	assert.equal(await p.textContent('#total-measured'), kwText(pw.measured_w));
	assert.equal(await p.textContent('#total-budget'), kwText(pw.budget_w));
	assert.equal(await p.textContent('#total-over'), String(pw.racks.filter(isOver).length));
	await shot(p, 'power');
	// Read sensors now: POST /v1/sensors/sync with the operator's token, followed to its end.
	const before = (await get('/v1/sensors/sync')).last.finished_at;
	const posted = p.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/v1/sensors/sync'), { timeout: WAIT });
	await p.click('#sensors-sync');
	assert.equal((await posted).headers().authorization, `Bearer ${TOKENS.operator}`);
	await p.locator('#toasts .toast').filter({ hasText: 'Sensors read' }).waitFor({ timeout: 30000 });
	const after = await get('/v1/sensors/sync');
	assert.notEqual(after.last.finished_at, before, 'no new sweep');
	await p.locator('#sensor-sweep').filter({ hasText: 'sensors read' }).waitFor({ timeout: WAIT });
	assert.equal(await p.isDisabled('#sensors-sync'), false);
	await clean(p, 'power');
	await c.close();
});

await check('racks: the draw passes the limit (a power-on, then a sensor sweep): the rack turns over-limit live', async () => {
	const c = await context();
	const p = await newPage(c);
	await signIn(p, 'viewer');
	await sensorSync();
	const before = await get('/v1/racks/r01/power');
	// A limit 300 W above the draw: one more node on (600 W) passes it.
	const limit = before.measured_w + 300;
	assert.equal((await curl('PATCH', '/v1/racks/r01', { power_budget_kw: limit / (before.limit_pct / 100) / 1000 })).status, 200);
	const ok = await get('/v1/racks/r01/power');
	assert.equal(ok.over_limit, false);
	await p.goto(`${URL}/ui/#/racks`);
	await p.locator('section.rack[data-rack="r01"] .rack-power[data-state="ok"]').waitFor({ timeout: WAIT });
	assert.equal(await p.textContent('section.rack[data-rack="r01"] .power-text'), powerText(ok));
	await p.locator('#live[data-state="live"], #live[data-state="polling"]').waitFor({ timeout: WAIT });
	await p.evaluate(() => { window.__same = 'this page'; });
	const off = (await get('/v1/nodes?rack=r01&limit=1000&fields=name,power_state,bmc')).items
		.filter((n) => n.power_state === 'off' && n.bmc?.driver === 'fake').map((n) => n.name);
	assert.ok(off.length, 'seed: a powered-off node in r01');
	const job = await curl('PUT', `/v1/nodes/${off[0]}/power`, { target: 'on' });
	assert.ok(job.status === 202 || job.status === 201, JSON.stringify(job.json));
	for (let i = 0; i < 300; i++) {
		const j = await get(`/v1/jobs/${job.json.id}`);
		if (j.state === 'succeeded') break;
		assert.ok(!['failed', 'cancelled'].includes(j.state), JSON.stringify(j));
		await new Promise((res) => setTimeout(res, 100));
	}
	await sensorSync();
	const over = await get('/v1/racks/r01/power');
	assert.equal(over.over_limit, true, JSON.stringify(over));
	await p.locator('section.rack[data-rack="r01"].over-limit .rack-power[data-state="over"]').waitFor({ timeout: WAIT });
	assert.equal(await p.textContent('section.rack[data-rack="r01"] .power-text'), powerText(over));
	assert.equal(await p.locator('section.rack[data-rack="r01"] svg.power-bar.over').count(), 1);
	assert.match(await p.textContent('section.rack[data-rack="r01"] .power-over'), /over its limit by \d+\.\d kW/);
	await p.locator('#racks-over').filter({ hasText: '1' }).waitFor({ timeout: WAIT });
	assert.equal(await p.locator('section.rack.over-limit').count(), 1, 'only r01 is over');
	assert.equal(await p.evaluate(() => window.__same), 'this page', 'the racks page reloaded');
	await clean(p, 'racks over limit');
	await shot(p, 'racks-over-limit');
	// The power page marks it too.
	await p.goto(`${URL}/ui/#/power`);
	await p.locator('table.power-racks tr[data-rack="r01"].over[data-over-limit="true"]').filter({ hasText: 'over limit' }).waitFor({ timeout: WAIT });
	await clean(p, 'power over limit');
	// r01 back to its seeded budget (its draw stays over the old limit until a sweep).
	assert.equal((await curl('PATCH', '/v1/racks/r01', { power_budget_kw: 5 })).status, 200);
	await c.close();
});

await check('node page: the sensors table (name, type, value, thresholds, health); a hostile sensor name is text', async () => {
	const c = await context();
	const p = await newPage(c);
	await signIn(p, 'viewer');
	for (const name of ['gpu-r01-u01', 'rf-r03-u20']) {
		const s = await get(`/v1/nodes/${name}/sensors`);
		assert.ok(s.sensors.length, `seed: ${name} has sensors`);
		await p.goto(`${URL}/ui/#/node/${name}`);
		await p.waitForFunction((n) => document.querySelectorAll('#card-sensors table.sensors tbody tr[data-sensor]').length === n,
			s.sensors.length, { timeout: WAIT });
		const rows = await p.locator('#card-sensors table.sensors tbody tr[data-sensor]').evaluateAll((trs) => trs.map((tr) => ({
			name: tr.querySelector('.sname').textContent, attr: tr.dataset.sensor, health: tr.dataset.health,
			type: tr.children[1].textContent, value: tr.querySelector('.sensor-value').textContent,
			thresholds: tr.querySelector('.sensor-thresholds').textContent, badge: tr.children[4].querySelector('.badge').textContent,
			hottest: tr.classList.contains('hottest'),
		})));
		assert.deepEqual(rows.map((r) => r.name).sort(), s.sensors.map((x) => x.name).sort(), name);
		const hot = hottest(s.sensors);
		for (const x of s.sensors) {
			const r = rows.find((y) => y.name === x.name);
			assert.equal(r.attr, x.name);
			assert.equal(r.health, x.health);
			assert.equal(r.badge, x.health);
			assert.ok(r.type.startsWith(x.type), `${x.name} type ${r.type}`);
			assert.ok(r.value.startsWith(String(Math.round(x.value))) || r.value.startsWith(x.value.toFixed(1)), `${x.name} value ${r.value} for ${x.value}`);
			if (x.thresholds?.upper_warning !== null && x.thresholds?.upper_warning !== undefined)
				assert.ok(r.thresholds.includes(`warn ≥ ${Math.round(x.thresholds.upper_warning)}`), `${x.name} thresholds ${r.thresholds}`);
			else if (!x.thresholds) assert.equal(r.thresholds, '—');
			assert.equal(r.hottest, x === hot, `${x.name} hottest`);
		}
		if (name === 'gpu-r01-u01') {
			const inlet = rows.find((r) => r.name === 'Inlet Temp');
			assert.equal(inlet.value, '24 °C');
			assert.match(inlet.thresholds, /warn ≥ 40 °C · crit ≥ 45 °C/);
			assert.ok(inlet.hottest);
		} else {
			const hostile = rows.find((r) => r.name === E.RP_HOSTILE_SENSOR);
			assert.ok(hostile, 'the hostile sensor name is not shown as it is');
			assert.equal(hostile.health, 'warning');
			assert.equal(hostile.value, '44 °C');
			assert.ok(hostile.hottest);
			assert.ok((await p.textContent('#sensors-read')).includes(E.RP_HOSTILE_SENSOR), 'the hottest sensor in the heading');
			assert.equal(await p.locator('main script, main img').count(), 0);
			assert.equal(await p.evaluate(() => window.__xss), undefined);
		}
	}
	await shot(p, 'node-sensors');
	// A node never read (its BMC does not answer): said so, with the sweep's error.
	const never = await get('/v1/nodes/mgmt-r02-u41/sensors');
	assert.equal(never.read_at, null);
	await p.goto(`${URL}/ui/#/node/mgmt-r02-u41`);
	await p.locator('#sensors-read').filter({ hasText: 'Not read yet' }).waitFor({ timeout: WAIT });
	if (never.error) await p.locator('#sensors-error').filter({ hasText: never.error.slice(0, 20) }).waitFor({ timeout: WAIT });
	await clean(p, 'node');
	await c.close();
});

await check('the view\'s sources (and the vendored xterm.js) never write markup (innerHTML, outerHTML, insertAdjacentHTML, document.write)', async () => {
	const files = [...fs.readdirSync(WEB).filter((f) => f.endsWith('.js') || f.endsWith('.html')),
		...fs.readdirSync(path.join(WEB, 'vendor')).filter((f) => /\.m?js$/.test(f)).map((f) => `vendor/${f}`)];
	assert.ok(files.includes('meters.js') && files.includes('console.js') && files.includes('vendor/xterm.mjs'), files.join(' '));
	for (const f of files) {
		const src = fs.readFileSync(path.join(WEB, f), 'utf8');
		assert.doesNotMatch(src, /\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser/, f);
	}
});

await check('acceptance: the rack links to its report; the grid shows each node x check as the API has it; the printable page downloads', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	await p.goto(`${URL}/ui/#/racks`);
	await p.locator('section.rack[data-rack="r01"] a.accept-link').click();
	await p.waitForURL(/#\/acceptance\/r01$/, { timeout: WAIT });
	const run = await get('/v1/racks/r01/acceptance');
	assert.ok(run.results.length > 0, 'seed: an acceptance run');
	await p.locator('table.accept-grid tbody tr[data-node]').first().waitFor({ timeout: WAIT });
	for (const r of run.results) {
		const st = await p.getAttribute(`table.accept-grid tr[data-node="${r.node}"] td[data-check="${r.check}"]`, 'data-state');
		assert.equal(st, r.state, `${r.node} ${r.check}`);
	}
	assert.ok((await p.textContent('#run-state')).includes(run.state));
	const skipped = run.results.filter((r) => r.state === 'skipped' || r.state === 'failed');
	assert.equal(await p.locator('table:not(.accept-grid) tr[data-check]').count(), skipped.length);
	const [dl] = await Promise.all([p.waitForEvent('download', { timeout: WAIT }), p.click('#print-report')]);
	assert.equal(dl.suggestedFilename(), 'acceptance-r01.html');
	const file = await dl.path();
	const { readFile } = await import('node:fs/promises');
	const html = await readFile(file, 'utf8');
	assert.ok(html.includes('Acceptance of rack r01') && html.includes(run.report_sha256), 'the printable page');
	assert.equal(await p.locator('#fabric, #nccl').count(), 0, 'no pairs: no fabric or NCCL section');
	await shot(p, 'acceptance');
	await p.goto(`${URL}/ui/#/acceptance/r03`);
	await p.locator('#no-run').waitFor({ timeout: WAIT });
	await p.close();
});

await check('acceptance across nodes: the fabric matrix (pair x port, measured / least expected, coloured by state), a cell\'s raw output as text, the NCCL run per rank', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	await p.goto(`${URL}/ui/#/acceptance/r02`);
	// web-test.sh wrote this run into the database (fabric-seed.mjs): the API reads it back.
	const run = await get('/v1/racks/r02/acceptance');
	const fab = run.pairs.filter((x) => x.kind === 'fabric');
	assert.equal(fab.length, 2, 'seed: two fabric pairs');
	await p.locator('table.fabric-matrix tbody tr[data-server]').first().waitFor({ timeout: WAIT });
	// The node x check grid is still there, from results.
	for (const r of run.results)
		assert.equal(await p.getAttribute(`table.accept-grid tr[data-node="${r.node}"] td[data-check="${r.check}"]`, 'data-state'), r.state, `${r.node} ${r.check}`);
	// A column per port seen in any test, in the order first seen; a row per pair.
	const ports = [...new Set(fab.flatMap((x) => x.tests.map((t) => t.port)))];
	assert.deepEqual(await p.locator('table.fabric-matrix thead th[data-port]').evaluateAll((ths) => ths.map((t) => t.textContent)), ports);
	assert.deepEqual(await p.locator('table.fabric-matrix tbody tr').evaluateAll((trs) => trs.map((t) => [t.dataset.server, t.dataset.client])),
		fab.map((x) => [x.server, x.client]));
	const f2 = (v) => (typeof v === 'number' ? v.toFixed(2) : '—');
	for (const pair of fab) {
		const row = p.locator(`table.fabric-matrix tr[data-server="${pair.server}"][data-client="${pair.client}"]`);
		assert.match(await row.locator('td').nth(1).textContent(), new RegExp(`${pair.server} ← ${pair.client}`));
		for (const port of ports) {
			const t = pair.tests.find((x) => x.port === port);
			const cell = row.locator(`td[data-port="${port}"]`);
			if (!t) {
				assert.equal(await cell.textContent(), '', `${pair.server} ${port}: no test, empty cell`);
				continue;
			}
			assert.equal(await cell.getAttribute('data-state'), t.state, `${pair.server} ${port}`);
			const btn = cell.locator('button.fab-cell');
			assert.equal(await btn.textContent(), `${f2(t.measured_gbps)} / ${f2(t.min_gbps)}`, `${pair.server} ${port}`);
			assert.equal(await btn.getAttribute('title'), t.message, `${pair.server} ${port}: the message as the title`);
		}
		const last = row.locator('td.fab-pair');
		assert.equal(await last.getAttribute('data-state'), pair.state);
		assert.ok((await last.textContent()).includes(pair.message), pair.message);
	}
	// The failed port: its figures, red (the grid's state class), the hostile message as text.
	const bad = p.locator('table.fabric-matrix tr[data-server="gpu-r02-u01"][data-client="gpu-r02-u09"] td[data-port="mlx5_1/1"]');
	assert.equal(await bad.getAttribute('data-state'), 'failed');
	assert.equal(await bad.locator('button').textContent(), '181.50 / 360.00');
	assert.match(await bad.locator('button').getAttribute('class'), /\bst-fail\b/);
	assert.equal(await p.locator('table.fabric-matrix td[data-port="mlx5_0/1"][data-state="passed"] button.st-ok').count(), 2);
	assert.equal(await p.locator('table.fabric-matrix tr[data-server="gpu-r02-u17"] td[data-port="eth0"]').textContent(), '— / —');
	// Its raw output, client and server, in <pre> as text (no element from it, no script run).
	assert.equal(await p.locator('#fabric-output pre').count(), 0);
	await bad.locator('button').click();
	const t = fab[1].tests.find((x) => x.port === 'mlx5_1/1');
	assert.ok(t && fab[1].server === 'gpu-r02-u01', 'API order: u17 (higher U) first');
	await p.locator('#fabric-output pre[data-side="client"]').waitFor({ timeout: WAIT });
	assert.equal(await p.textContent('#fabric-output pre[data-side="client"]'), t.output.client);
	assert.equal(await p.textContent('#fabric-output pre[data-side="server"]'), t.output.server);
	assert.ok(t.output.client.includes(E.RP_HOSTILE_SENSOR));
	assert.equal(await p.getAttribute('table.fabric-matrix button[aria-pressed="true"]', 'title'), t.message);
	assert.equal(await p.locator('#fabric-output img, #fabric-output script, #fabric-output b, table.fabric-matrix img').count(), 0);
	assert.equal(await p.evaluate(() => window.__xss), undefined);
	// NCCL: the run's state and message, each rank's node and state.
	const nc = run.pairs.find((x) => x.kind === 'nccl');
	assert.equal(await p.getAttribute('#nccl .nccl-state', 'data-state'), nc.state);
	assert.ok((await p.textContent('#nccl .nccl-state')).includes(nc.message));
	assert.deepEqual(await p.locator('#nccl table.nccl-ranks tbody tr').evaluateAll((trs) => trs.map((t) => [t.dataset.rank, t.dataset.node, t.cells[2].textContent])),
		nc.tests.map((r) => [String(r.rank), r.node, r.state]));
	assert.match(await p.textContent('#nccl tr[data-rank="0"]'), /301\.20 \(least 350\.00\)/);
	await shot(p, 'acceptance-fabric');
	await clean(p, 'acceptance-fabric');
	await p.close();
});

await check('a rackpilotd --demo server: GET /v1 says demo, the page shows the DEMO DATA banner; racks without a budget, their draw and hottest sensors', async () => {
	const c = await context();
	const p = await newPage(c);
	const demo = async (q) => (await fetch(`${E.RP_DEMO_URL}${q}`, { headers: { Authorization: `Bearer ${E.RP_DEMO_ADMIN}` } })).json();
	const root = await demo('/v1');
	assert.equal(root.demo, true);
	await p.goto(`${E.RP_DEMO_URL}/ui/#token=${E.RP_DEMO_ADMIN}`);
	await p.locator('#demo').waitFor({ state: 'visible', timeout: WAIT });
	assert.match(await p.textContent('#demo'), /DEMO DATA/);
	await p.locator('svg.elevation g.node').first().waitFor({ timeout: WAIT });
	// web-test.sh ran one sensor sweep: every rack measured; the demo's racks have no budget.
	const pw = await demo('/v1/power');
	assert.ok(pw.racks.length > 0);
	await p.waitForFunction((n) => document.querySelectorAll('.rack-power:not([data-state="loading"])').length === n, pw.racks.length, { timeout: WAIT });
	for (const r of pw.racks) {
		const box = p.locator(`section.rack[data-rack="${r.rack}"] .rack-power`);
		assert.equal(await box.getAttribute('data-state'), powerState(r), r.rack);
		assert.equal(await box.locator('.power-text').textContent(), powerText(r), r.rack);
		assert.equal(await box.locator('svg.sparkline polyline.spark').count(), r.measured_w === null ? 0 : 1, `${r.rack} sparkline`);
	}
	assert.ok(pw.racks.some((r) => r.budget_w === null), 'the demo has a rack without a budget');
	await p.locator('svg.elevation g.node g.temp').first().waitFor({ timeout: WAIT });
	await shot(p, 'demo');
	await p.goto(`${E.RP_DEMO_URL}/ui/#/power`);
	await p.waitForFunction((n) => document.querySelectorAll('table.power-racks tr[data-rack]').length === n, pw.racks.length, { timeout: WAIT });
	await clean(p, 'demo');
	await c.close();
});

await check('no page of this run wrote markup (innerHTML, outerHTML, insertAdjacentHTML, document.write, createContextualFragment)', async () => {
	assert.deepEqual(markup, []);
});

await check('sign out forgets the token; every API call carried it as a Bearer header, never in a URL', async () => {
	const p = await newPage(admin);
	await signIn(p, 'admin');
	await p.click('#signout');
	await p.locator('#signin').waitFor({ timeout: WAIT });
	assert.equal(await p.evaluate(() => sessionStorage.getItem('rackpilot.token')), null);
	const api = requests.filter((r) => new globalThis.URL(r.url).pathname.startsWith('/v1'));
	assert.ok(api.length > 50, `only ${api.length} API requests seen`);
	for (const r of requests)
		for (const t of Object.values(TOKENS)) assert.ok(!r.url.includes(t) || r.url.includes('#token='), `token in ${r.url}`);
	for (const r of api) assert.match(r.auth ?? '', /^Bearer rpt_/, r.url);
	await p.close();
});

await browser.close();
const failed = results.filter((x) => !x).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
