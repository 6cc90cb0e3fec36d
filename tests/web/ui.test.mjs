// The web view in Debian's Chromium (playwright-core), against the real rackpilotd that
// web-test.sh started and seeded. Run by web-test.sh; reads RP_URL, RP_ADMIN, RP_VIEWER,
// RP_OPERATOR, RP_SEED (the seeded nodes), RP_ARTIFACTS (screenshots), RP_NODE_MODULES.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';

const E = process.env;
const URL = E.RP_URL;
const TOKENS = { admin: E.RP_ADMIN, viewer: E.RP_VIEWER, operator: E.RP_OPERATOR, demo: E.RP_DEMO_ADMIN };
const SEED = JSON.parse(fs.readFileSync(E.RP_SEED, 'utf8'));
const ART = E.RP_ARTIFACTS;
const require = createRequire(path.join(E.RP_NODE_MODULES, '..', 'package.json'));
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
	return c;
}
async function newPage(c) {
	const p = await c.newPage();
	pages.add(p);
	p.on('pageerror', (e) => console.log(`  # page error: ${e.message}`));
	p.on('close', () => pages.delete(p));
	return p;
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
	assert.equal(r.headers.get('content-security-policy'),
		"default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'");
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
	assert.deepEqual(order.map((r) => [r.rack, r.row, r.nodes]),
		[['r01', 'A', SEED.filter((n) => n.rack === 'r01').length], ['r02', 'B', SEED.filter((n) => n.rack === 'r02').length]]);
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
	assert.equal(await p.locator('button.action').count(), 3);
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

await check('viewer: no action buttons on any page', async () => {
	const c = await context();
	const p = await newPage(c);
	await signIn(p, 'viewer');
	await p.goto(`${URL}/ui/#/node/gpu-r01-u26`);
	await p.locator('#card-identity').filter({ hasText: 'SN-gpu-r01-u26' }).waitFor({ timeout: WAIT });
	await p.locator('#card-jobs tr[data-job]').first().waitFor({ timeout: WAIT });
	assert.equal(await p.locator('button.action').count(), 0);
	assert.equal(await p.locator('#power-actions').count(), 0);
	for (const [view, ready] of [['racks', 'svg.elevation g.node'], ['nodes', '#nodes-rows tr[data-node]'], ['fleet', '#card-rollouts .rollout']]) {
		await p.goto(`${URL}/ui/#/${view}`);
		await p.locator(ready).first().waitFor({ timeout: WAIT });
		assert.equal(await p.locator('main button.action, main button.danger').count(), 0, view);
	}
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
	await shot(p, 'acceptance');
	await p.goto(`${URL}/ui/#/acceptance/r02`);
	await p.locator('#no-run').waitFor({ timeout: WAIT });
	await p.close();
});

await check('a rackpilotd --demo server: GET /v1 says demo, the page shows the DEMO DATA banner', async () => {
	const c = await context();
	const p = await newPage(c);
	const root = await (await fetch(`${E.RP_DEMO_URL}/v1`, { headers: { Authorization: `Bearer ${E.RP_DEMO_ADMIN}` } })).json();
	assert.equal(root.demo, true);
	await p.goto(`${E.RP_DEMO_URL}/ui/#token=${E.RP_DEMO_ADMIN}`);
	await p.locator('#demo').waitFor({ state: 'visible', timeout: WAIT });
	assert.match(await p.textContent('#demo'), /DEMO DATA/);
	await p.locator('svg.elevation g.node').first().waitFor({ timeout: WAIT });
	await shot(p, 'demo');
	await c.close();
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
