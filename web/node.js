// One node: identity, BMC, power (with actions for operators: each one a job, followed until
// it ends), inventory, sensors as last read, BIOS and firmware against what is desired, recent
// jobs with their steps and logs, and events. Live events refresh the parts they touch.

import { api, seg, url } from './api.js';
import {
	badge, batch, card, clear, confirmAction, errorBox, fill, fmtBytes, h, kv, powerBadge, show,
	stateBadge, table, toastError, when,
} from './dom.js';
import { HEALTH_CLASS, hottest, reading, thresholdText, watchSweeps } from './meters.js';

const ENDED = ['succeeded', 'failed', 'cancelled'];
const POWER = [
	['on', 'Power on', 'The node is powered on through its BMC.'],
	['off', 'Power off', 'Hard power-off through the BMC: the OS gets no chance to shut down.'],
	['cycle', 'Power cycle', 'Hard off, then on again, through the BMC.'],
];

function section(inv, key) {
	const s = inv?.[key];
	if (!s || typeof s !== 'object') return null;
	return s.skipped ? null : s;
}

function inventoryView(inv) {
	if (!inv.data) return h('p', { class: 'muted' }, 'No inventory reported yet (the agent sends it at registration and in inventory steps).');
	const d = inv.data;
	const cpu = section(d, 'cpu');
	const mem = section(d, 'memory');
	const dimms = mem?.dimms && !mem.dimms.skipped ? mem.dimms : null;
	const pci = section(d, 'pci');
	const gpus = section(d, 'gpus');
	const disks = section(d, 'disks');
	const nics = section(d, 'nics');
	const ib = section(d, 'infiniband');
	const sys = section(d, 'system');
	const skipped = Object.entries(d).filter(([, v]) => v && typeof v === 'object' && v.skipped).map(([k, v]) => `${k} (${v.skipped})`);
	return [
		h('div', { class: 'inv-summary', id: 'inv-summary' },
			h('div', { class: 'big' }, h('b', {}, cpu ? `${cpu.sockets ?? '?'}×` : '—'), ' ', cpu?.model ?? 'CPU unknown',
				cpu ? h('span', { class: 'muted' }, ` · ${cpu.cores ?? '?'} cores / ${cpu.threads ?? '?'} threads · ${cpu.numa_nodes ?? '?'} NUMA`) : null),
			h('div', { class: 'big' }, h('b', {}, fmtBytes(mem?.total_bytes)), ' memory',
				dimms ? h('span', { class: 'muted' }, ` · ${dimms.populated ?? '?'}/${dimms.count ?? '?'} DIMMs`) : null),
			h('div', { class: 'big' }, h('b', { id: 'inv-gpus' }, String(gpus?.count ?? pci?.gpu_count ?? 0)), ' GPUs',
				gpus?.items?.[0] ? h('span', { class: 'muted' }, ` · ${gpus.items[0].name ?? ''}`) : null),
			h('div', { class: 'big' }, h('b', { id: 'inv-hcas' }, String(pci?.hca_count ?? 0)), ' HCAs',
				h('span', { class: 'muted' }, ` · ${(ib?.items ?? []).length} RDMA ports`)),
			sys ? h('div', { class: 'muted' }, [sys.vendor, sys.product, sys.board && `board ${sys.board}`,
				sys.bios?.version && `BIOS ${sys.bios.version}`].filter(Boolean).join(' · ')) : null,
			h('div', { class: 'muted' }, `from ${inv.source ?? '?'}, `, when(inv.collected_at))),
		gpus?.items?.length ? h('details', { open: true }, h('summary', {}, `GPUs (${gpus.items.length})`),
			table(['#', 'Name', 'Memory', 'PCI', 'VBIOS', 'Driver', 'Serial'], gpus.items.map((g) => h('tr', {},
				h('td', {}, show(g.index)), h('td', {}, show(g.name)), h('td', {}, g.memory_mib ? `${g.memory_mib} MiB` : '—'),
				h('td', { class: 'mono' }, show(g.pci)), h('td', {}, show(g.vbios)), h('td', {}, show(g.driver)), h('td', { class: 'mono' }, show(g.serial)))), 'gpus')) : null,
		ib?.items?.length ? h('details', {}, h('summary', {}, `HCA ports (${ib.items.length})`),
			table(['Device', 'Port', 'State', 'Rate', 'Link', 'Firmware', 'LID'], ib.items.map((p) => h('tr', {},
				h('td', {}, show(p.device)), h('td', {}, show(p.port)), h('td', {}, show(p.state)), h('td', {}, show(p.rate)),
				h('td', {}, show(p.link_layer)), h('td', {}, show(p.fw_version)), h('td', {}, show(p.lid)))))) : null,
		disks?.items ? h('details', {}, h('summary', {}, `Disks (${disks.items.length})`),
			table(['Name', 'Size', 'Model', 'Type', 'Serial'], disks.items.map((x) => h('tr', {},
				h('td', {}, show(x.name)), h('td', {}, fmtBytes(x.size_bytes)), h('td', {}, show(x.model)),
				h('td', {}, x.nvme ? 'NVMe' : x.rotational ? 'HDD' : 'SSD'), h('td', { class: 'mono' }, show(x.serial)))))) : null,
		nics?.items ? h('details', {}, h('summary', {}, `NICs (${nics.items.length})`),
			table(['Name', 'MAC', 'Driver', 'Link', 'Speed', 'MTU'], nics.items.map((x) => h('tr', {},
				h('td', {}, show(x.name)), h('td', { class: 'mono' }, show(x.mac)), h('td', {}, show(x.driver)),
				h('td', {}, x.link ? 'up' : 'down'), h('td', {}, x.speed_mbps ? `${x.speed_mbps} Mb/s` : '—'), h('td', {}, show(x.mtu)))))) : null,
		skipped.length ? h('p', { class: 'muted' }, `Not collected: ${skipped.join(', ')}`) : null,
	];
}

function biosView(b) {
	const desired = b.desired ?? {};
	const diff = new Map((b.diff ?? []).map((x) => [x.name, x]));
	const names = new Set([...Object.keys(desired.attributes ?? {}), ...diff.keys()]);
	const rows = [...names].sort().map((n) => {
		const a = b.actual?.[n];
		const bad = diff.has(n);
		return h('tr', { class: bad ? 'drift' : null, 'data-attr': n },
			h('td', { class: 'mono' }, n), h('td', {}, show(desired.attributes?.[n])),
			h('td', {}, a ? show(a.value) : h('span', { class: 'muted' }, 'never read')),
			h('td', {}, bad ? badge('drift', 'h-drift') : badge('ok', 'st-ok')));
	});
	const others = Object.keys(b.actual ?? {}).filter((n) => !names.has(n)).length;
	return [
		h('p', {}, desired.profile ? ['Profile ', h('b', {}, desired.profile), ` (via ${desired.via ?? '?'}) `,
			b.in_sync ? badge('in sync', 'st-ok') : badge(`${diff.size} differ`, 'h-drift')]
			: h('span', { class: 'muted' }, 'No BIOS profile applies to this node.')),
		rows.length ? table(['Attribute', 'Desired', 'Actual', ''], rows, 'bios') : null,
		others ? h('p', { class: 'muted' }, `${others} more attribute(s) read, not in the profile.`) : null,
	];
}

function firmwareView(fw) {
	const rows = (list) => list.map((c) => h('tr', { class: c.status === 'drift' || c.status === 'missing' ? 'drift' : null, 'data-component': c.component },
		h('td', { class: 'mono' }, c.component), h('td', {}, show(c.version)), h('td', {}, show(c.desired)),
		h('td', {}, badge(c.status, { ok: 'st-ok', drift: 'h-drift', missing: 'h-drift', unmanaged: 'st-idle' }[c.status])),
		h('td', {}, when(c.read_at))));
	const all = fw.components ?? [];
	const managed = all.filter((c) => c.status !== 'unmanaged');
	const other = all.filter((c) => c.status === 'unmanaged');
	const heads = ['Component', 'Version', 'Desired', 'Status', 'Read'];
	return [
		h('p', {}, fw.baseline ? ['Baseline ', h('b', {}, fw.baseline)] : h('span', { class: 'muted' }, 'No firmware baseline for this node’s class.')),
		managed.length || !other.length ? table(heads, rows(managed), 'firmware') : null,
		other.length ? h('details', {}, h('summary', {}, `${other.length} component(s) read, not in the baseline`),
			table(heads, rows(other), 'firmware-other')) : null,
	];
}

const SENSOR_TYPES = ['temperature', 'power', 'psu', 'fan'];

function sensorsView(s) {
	const list = [...(s.sensors ?? [])].sort((a, b) => {
		const ta = SENSOR_TYPES.indexOf(a.type);
		const tb = SENSOR_TYPES.indexOf(b.type);
		return (ta < 0 ? 99 : ta) - (tb < 0 ? 99 : tb) || a.name.localeCompare(b.name);
	});
	const hot = hottest(list);
	const head = s.read_at
		? h('p', { id: 'sensors-read' }, 'Read ', when(s.read_at),
			typeof s.power_w === 'number' ? [' · drawing ', h('b', {}, reading(s.power_w, 'W'))] : null,
			hot ? [' · hottest ', h('b', {}, hot.name), ` ${reading(hot.value, hot.unit)}`] : null)
		: h('p', { class: 'muted', id: 'sensors-read' }, 'Not read yet: the sensor sweep reads nodes with a usable BMC that are not in maintenance.');
	return [
		head,
		s.error ? h('p', { class: 'err-msg', id: 'sensors-error' }, 'Last try ', when(s.tried_at), ` failed: ${s.error}`) : null,
		list.length ? table(['Sensor', 'Type', 'Value', 'Thresholds', 'Health', 'Changed'], list.map((x) => h('tr', {
			class: [x === hot && 'hottest', x.health !== 'ok' && `sensor-${x.health}`], 'data-sensor': x.name, 'data-health': x.health, 'data-type': x.type,
		},
		h('td', { class: 'sensor-name' }, h('span', { class: 'sname' }, x.name), x === hot ? [' ', badge('hottest', 'st-idle', 'the hottest temperature sensor (shown in the rack elevation)')] : null),
		h('td', {}, x.kind && x.kind !== x.type ? `${x.type} / ${x.kind}` : x.type),
		h('td', { class: 'num sensor-value' }, reading(x.value, x.unit)),
		h('td', { class: 'sensor-thresholds' }, thresholdText(x.thresholds, x.unit)),
		h('td', {}, badge(x.health, HEALTH_CLASS[x.health] ?? 'st-idle', 'the value against its thresholds, or worse if the BMC says so'),
			x.bmc_health && x.bmc_health !== x.health ? h('span', { class: 'muted' }, ` BMC ${x.bmc_health}`) : null),
		h('td', { title: `source ${x.source ?? '?'}; read ${x.read_at ?? '—'}` }, when(x.changed_at)))), 'sensors') : null,
	];
}

function jobLine(j) {
	const p = j.params ?? {};
	const what = j.type === 'power' ? `power ${p.target}` : j.type === 'boot' ? `boot ${p.device ?? ''}` : j.type;
	return what;
}

function jobBadge(j) {
	return badge(j.state, { succeeded: 'st-ok', failed: 'st-fail', cancelled: 'st-idle', running: 'st-busy', queued: 'st-busy' }[j.state]);
}

export function render(main, ctx, r) {
	const name = r.arg;
	const ctrl = new AbortController();
	const signal = ctrl.signal;
	const path = `/v1/nodes/${seg(name)}`;
	const head = h('div', { class: 'node-head', id: 'node-head' }, h('h1', {}, name));
	const jobPanel = h('div', { class: 'job-panel', id: 'job-panel', hidden: true });
	const top = h('div', { class: 'notes' });
	const cId = card('Identity');
	const cBmc = card('BMC');
	const cPower = card('Power and agent');
	const cInv = card('Inventory');
	const cSens = card('Sensors');
	const cBios = card('BIOS: actual vs desired');
	const cFw = card('Firmware vs baseline');
	const cJobs = card('Recent jobs');
	const cEv = card('Events');
	cInv.el.id = 'card-inventory';
	cSens.el.id = 'card-sensors';
	cBios.el.id = 'card-bios';
	cFw.el.id = 'card-firmware';
	cJobs.el.id = 'card-jobs';
	cEv.el.id = 'card-events';
	cId.el.id = 'card-identity';
	cPower.el.id = 'card-power';
	main.append(h('div', { class: 'crumbs' }, h('a', { href: '#/nodes' }, 'Nodes'), ' / ', name),
		head, jobPanel, top,
		h('div', { class: 'node-grid' },
			h('div', { class: 'col' }, cId.el, cBmc.el, cPower.el),
			h('div', { class: 'col wide' }, cInv.el, cSens.el, cJobs.el),
			h('div', { class: 'col' }, cBios.el, cFw.el, cEv.el)));

	let node = null;
	let tracking = null;

	function paintHead(n) {
		const actions = ctx.canAct
			? h('div', { class: 'actions', id: 'power-actions' }, POWER.map(([target, label]) =>
				h('button', { type: 'button', class: ['action', target !== 'on' && 'danger-outline'], 'data-power': target, onclick: () => power(target) }, label)))
			: null;
		clear(head, 
			h('h1', {}, n.name),
			h('div', { class: 'badges' }, stateBadge(n.provision_state), powerBadge(n.power_state),
				n.maintenance ? badge(`maintenance${n.maintenance_reason ? `: ${n.maintenance_reason}` : ''}`, 'maint-b', null) : null,
				n.bmc?.fault ? badge('BMC fault', 'h-fault', n.bmc.fault.message) : null,
				n.rack ? h('a', { href: '#/racks', class: 'chip' }, `${n.rack}${n.u_position ? ` U${n.u_position}` : ''}`) : null,
				n.node_class ? h('span', { class: 'chip' }, n.node_class) : null),
			h('span', { class: 'spacer' }), actions);
		head.dataset.maintenance = String(!!n.maintenance);
		head.dataset.power = n.power_state;
	}

	function paintNode(n) {
		paintHead(n);
		clear(cId.body, kv([
			['ID', h('span', { class: 'mono' }, n.id)], ['Rack', n.rack], ['U', n.u_position ? `${n.u_position} (${n.u_height}U)` : null],
			['Class', n.node_class], ['Serial', n.serial], ['System UUID', n.system_uuid], ['Vendor', n.vendor], ['Model', n.model],
			['Tags', n.tags?.length ? h('span', {}, n.tags.map((t) => h('span', { class: 'tag' }, t))) : null],
			['MACs', n.macs?.length ? h('span', { class: 'mono' }, n.macs.join(' ')) : null],
			['Provision', stateBadge(n.provision_state)],
			n.provision_error ? ['Error', h('span', { class: 'err-msg' }, n.provision_error)] : null,
			['Deployed image', n.deployed_image], ['BIOS profile', n.bios_profile], ['Boot profile', n.boot_profile],
			['Maintenance', n.maintenance ? (n.maintenance_reason || 'yes') : 'no'],
			['Updated', when(n.updated_at)], ['Version', n.version],
		]));
		const b = n.bmc;
		clear(cBmc.body, b ? kv([
			['Driver', b.driver], ['Address', b.address], ['Port', b.port], ['User', b.username],
			['Password', b.password_set ? 'set (never shown)' : 'not set'],
			b.driver === 'redfish' ? ['TLS verify', String(b.tls_verify)] : null,
			['Health', b.fault ? h('span', {}, badge('fault', 'h-fault'), ` ${b.fault.message} — ${b.fault.failures} failures since `, when(b.fault.since)) : badge('ok', 'st-ok')],
			b.last_error ? ['Last error', b.last_error] : null,
			['Checked', when(b.checked_at)],
			b.identity ? ['Identity', [b.identity.manufacturer, b.identity.model, b.identity.bmc_firmware && `fw ${b.identity.bmc_firmware}`].filter(Boolean).join(' · ')] : null,
		]) : h('p', { class: 'muted' }, 'No BMC configured.'));
		const a = n.agent;
		clear(cPower.body, kv([
			['Power', powerBadge(n.power_state)], ['Read', when(n.power_state_at)],
			['Agent', a ? `${a.status ?? '?'}${a.version ? ` (v${a.version})` : ''}` : 'not registered'],
			a ? ['Agent seen', when(a.seen_at)] : null, a ? ['Hostname', a.hostname] : null,
			a ? ['SSH', a.address ? `${a.address}${a.port ? `:${a.port}` : ''}` : null] : null,
		]));
	}

	async function loadNode() {
		try {
			node = await api(path, { signal });
			clear(top);
			paintNode(node);
			return true;
		} catch (e) {
			if (e.name === 'AbortError') return false;
			if (!node) {
				clear(head, h('h1', {}, name));
				for (const c of [cId, cBmc, cPower]) clear(c.body);
			}
			clear(top, errorBox(e, node ? 'Cannot refresh the node' : 'Cannot load the node'));
			return false;
		}
	}

	const loadInv = () => fill(cInv.body, async () => inventoryView(await api(`${path}/inventory`, { signal })));
	const loadSensors = () => fill(cSens.body, async () => sensorsView(await api(`${path}/sensors`, { signal })));
	const loadBios = () => fill(cBios.body, async () => biosView(await api(`${path}/bios`, { signal })));
	const loadFw = () => fill(cFw.body, async () => firmwareView(await api(`${path}/firmware`, { signal })));

	async function openJob(j, tr) {
		const nextRow = tr.nextElementSibling;
		if (nextRow?.classList.contains('job-detail')) {
			nextRow.remove();
			return;
		}
		const cell = h('td', { colspan: 6 }, h('span', { class: 'muted' }, 'Loading…'));
		tr.after(h('tr', { class: 'job-detail', 'data-job': j.id }, cell));
		await fill(cell, async () => {
			const [full, log] = await Promise.all([api(`/v1/jobs/${seg(j.id)}`, { signal }),
				api(`/v1/jobs/${seg(j.id)}/log`, { signal, text: true })]);
			return [
				kv([['Job', h('span', { class: 'mono' }, full.id)], ['By', full.created_by], ['Created', when(full.created_at)],
					['Started', when(full.started_at)], ['Finished', when(full.finished_at)],
					['Attempts', `${full.attempts} of ${full.max_attempts}`], ['Params', full.params], ['Result', full.result],
					full.error ? ['Error', `${full.error.code}: ${full.error.message}`] : null]),
				full.steps?.length ? table(['Step', 'Type', 'State', 'Exit', 'Time', 'Output / error'], full.steps.map((s) => h('tr', {},
					h('td', { class: 'mono' }, s.id), h('td', {}, s.type), h('td', {}, badge(s.state, { succeeded: 'st-ok', failed: 'st-fail', running: 'st-busy' }[s.state] ?? 'st-idle')),
					h('td', {}, show(s.exit_code)), h('td', {}, s.duration_ms !== null && s.duration_ms !== undefined ? `${s.duration_ms} ms` : '—'),
					h('td', {}, s.error ? h('div', { class: 'err-msg' }, s.error) : null, s.output ? h('pre', { class: 'out' }, s.output) : null))), 'steps') : null,
				log ? h('details', { open: true }, h('summary', {}, `Log (${full.log?.bytes ?? log.length} bytes${full.log?.dropped ? `, ${full.log.dropped} dropped` : ''})`), h('pre', { class: 'log' }, log))
					: h('p', { class: 'muted' }, 'No log (only steps jobs write one).'),
			];
		});
	}

	const loadJobs = () => fill(cJobs.body, async () => {
		const pg = await api(url('/v1/jobs', { node: name, limit: 15 }), { signal });
		return table(['When', 'Job', 'State', 'Attempts', 'By', 'Error'], pg.items.map((j) => {
			const tr = h('tr', { class: 'clickable', 'data-job': j.id, title: 'Show steps and log' },
				h('td', {}, when(j.created_at)), h('td', {}, jobLine(j)), h('td', {}, jobBadge(j)),
				h('td', { class: 'num' }, String(j.attempts)), h('td', {}, j.created_by),
				h('td', {}, j.error ? h('span', { class: 'err-msg' }, `${j.error.code}: ${j.error.message}`) : ''));
			tr.addEventListener('click', () => openJob(j, tr));
			return tr;
		}), 'jobs');
	});

	function eventRow(ev, fresh) {
		return h('li', { class: ['event', fresh && 'flash'], 'data-id': ev.id, 'data-action': ev.action },
			when(ev.at), ' ', h('code', {}, ev.action), ' ', h('span', {}, ev.summary), ' ', h('span', { class: 'muted' }, ev.actor));
	}
	let eventList = null;
	const loadEvents = () => fill(cEv.body, async () => {
		const pg = await api(url('/v1/events', { node: name, limit: 30 }), { signal });
		eventList = h('ul', { class: 'events', id: 'events' }, pg.items.map((ev) => eventRow(ev, false)));
		return eventList;
	});

	function paintJob(j, err) {
		jobPanel.hidden = false;
		jobPanel.dataset.state = j?.state ?? 'error';
		jobPanel.dataset.job = j?.id ?? '';
		clear(jobPanel, 
			h('b', {}, j ? jobLine(j) : 'Action'), ' ',
			j ? jobBadge(j) : null, ' ',
			j ? h('span', { class: 'mono muted' }, j.id) : null, ' ',
			j?.error ? h('span', { class: 'err-msg' }, `${j.error.code}: ${j.error.message}`) : null,
			j && !ENDED.includes(j.state) ? h('span', { class: 'spinner', 'aria-hidden': 'true' }) : null,
			err ? errorBox(err) : null,
			j && ENDED.includes(j.state) ? h('button', { class: 'link', onclick: () => { jobPanel.hidden = true; } }, 'dismiss') : null);
	}

	// Follow a job until it ends: poll (events only make the next look come sooner).
	async function track(job) {
		const my = (tracking = { id: job.id, kick: null });
		paintJob(job);
		let j = job;
		while (!ENDED.includes(j.state) && !signal.aborted && tracking === my) {
			await new Promise((res) => { my.kick = res; setTimeout(res, 1000); });
			try {
				j = await api(`/v1/jobs/${seg(job.id)}`, { signal });
			} catch (e) {
				if (e.name === 'AbortError') return;
				paintJob(j, e);
				return;
			}
			if (tracking === my) paintJob(j);
		}
		if (!signal.aborted) {
			loadNode();
			loadJobs();
		}
	}

	async function power(target) {
		const [, label, what] = POWER.find((p) => p[0] === target);
		const ok = await confirmAction(`${label}: ${name}?`, `${what} It runs as a job; this page follows it.`, label, target !== 'on');
		if (!ok) return;
		try {
			const job = await api(`${path}/power`, { method: 'PUT', body: { target }, signal });
			track(job);
		} catch (e) {
			if (e.name === 'AbortError') return;
			paintJob(null, e);
			toastError(e, `${label} failed`);
		}
	}

	(async () => {
		if (await loadNode()) {
			loadInv();
			loadSensors();
			watchSweeps(signal, () => refreshSensors());
			loadBios();
			loadFw();
			loadJobs();
			loadEvents();
		} else {
			for (const c of [cInv, cSens, cBios, cFw, cJobs, cEv]) clear(c.body, h('span', { class: 'muted' }, '—'));
		}
	})();

	const refreshNode = batch(loadNode, 200);
	const refreshJobs = batch(loadJobs, 300);
	const refreshBios = batch(loadBios, 300);
	const refreshFw = batch(loadFw, 300);
	const refreshSensors = batch(loadSensors, 300);
	function onEvent(ev) {
		const o = ev.object ?? {};
		const a = ev.action ?? '';
		if (o.type === 'bios_profile') return refreshBios();
		if (o.type === 'firmware_baseline') return refreshFw();
		if (!node || !((o.type === 'node' || o.type === 'job') && (o.name === node.name || o.id === node.id))) return;
		eventList?.prepend(eventRow(ev, true));
		if (a === 'node.deleted') {
			clear(top, h('div', { class: 'error' }, 'This node was deleted.'));
			return;
		}
		if (o.type === 'job') {
			if (tracking?.id === o.id) tracking.kick?.();
			refreshJobs();
			return;
		}
		if (a.startsWith('sensor.')) return refreshSensors();
		if (a === 'node.inventory' || a === 'node.agent_registered') loadInv();
		if (a === 'node.bios_read') refreshBios();
		if (a === 'node.firmware_read') refreshFw();
		refreshNode();
	}
	function onGap() {
		loadNode();
		loadSensors();
		loadJobs();
		loadEvents();
	}
	return { onEvent, onGap, destroy: () => { ctrl.abort(); tracking = null; } };
}
