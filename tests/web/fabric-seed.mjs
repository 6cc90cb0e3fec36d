// fabric-seed.mjs HOSTILE: prints the SQL of a settled acceptance run of rack r02 across nodes
// (schema/0009-acceptance-runs.sql, schema/0021-acceptance-fabric.sql), as the fabric and NCCL
// jobs would have left it: those need agents on nodes that reach each other, which the web
// test has not. One fabric port short of its envelope, one skipped, NCCL failed; HOSTILE
// (markup) in a tool's output and a message. The same SQL runs on SQLite and PostgreSQL.
const HOSTILE = process.argv[2] ?? '<b>x</b>';
const now = Date.now();
const q = (v) => (v === null ? 'NULL' : `'${String(v).replaceAll("'", "''")}'`);
const node = (n) => `(SELECT id FROM nodes WHERE name = ${q(n)})`;
const UUID = '0f0f0f0f-0000-4000-8000-00000000fab1';
const run = `(SELECT id FROM acceptance_runs WHERE uuid = ${q(UUID)})`;
const perftest = (avg) => ` #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536      5000             ${(avg + 1.5).toFixed(2)}             ${avg.toFixed(2)}              0.7\n`;
const ib = (port, meas, state, message, output) => ({
	port, tool: 'ib_write_bw', device: port.split('/')[0], ib_port: 1, address: '10.0.0.1', line_gbps: 400, min_gbps: 360,
	measured_gbps: meas, state, message, output, server_job: null, client_job: null,
});
const pairs = [
	['fabric', 1, 'gpu-r02-u01', 'gpu-r02-u09', 'failed', 'mlx5_1/1 below its envelope', [
		ib('mlx5_0/1', 391.274, 'passed', 'gpu-r02-u09 → gpu-r02-u01 on mlx5_0/1: 391.27 Gb/s, expected at least 360.00 Gb/s (90 % of 400.00)',
			{ client: perftest(391.274), server: 'waiting for the client\n' }),
		ib('mlx5_1/1', 181.5, 'failed', `gpu-r02-u09 → gpu-r02-u01 on mlx5_1/1: 181.50 Gb/s, expected at least 360.00 Gb/s (90 % of 400.00) ${HOSTILE}`,
			{ client: `${perftest(181.5)}${HOSTILE}\n`, server: `server side of mlx5_1/1 ${HOSTILE}\n` }),
	]],
	['fabric', 1, 'gpu-r02-u17', 'gpu-r02-u25', 'passed', 'every port at its envelope, eth0 skipped', [
		ib('mlx5_0/1', 395.5, 'passed', 'gpu-r02-u25 → gpu-r02-u17 on mlx5_0/1: 395.50 Gb/s', { client: perftest(395.5), server: '' }),
		ib('mlx5_1/1', 396.25, 'passed', 'gpu-r02-u25 → gpu-r02-u17 on mlx5_1/1: 396.25 Gb/s', { client: perftest(396.25), server: '' }),
		{ port: 'eth0', tool: 'iperf3', interface: 'eth0', address: null, line_gbps: null, min_gbps: null, state: 'skipped',
			message: 'eth0 has no address on gpu-r02-u17', skip: 'no address' },
	]],
	['nccl', 1, 'gpu-r02-u01', null, 'failed', 'all_reduce_perf: busbw 301.20 GB/s over 8589934592 bytes on 4 ranks, expected at least 350.00 GB/s',
		['gpu-r02-u01', 'gpu-r02-u09', 'gpu-r02-u17', 'gpu-r02-u25'].map((n, i) => ({
			rank: i, node: n, node_id: 0, job: null, state: i === 3 ? 'failed' : 'passed', exit_code: i === 3 ? 1 : 0,
			output: `rank ${i} on ${n}\n`,
			...(i === 0 ? { busbw_gbytes_s: 301.2, avg_busbw_gbytes_s: 298.7, bytes: 8589934592, min_busbw_gbytes_s: 350 } : {}),
		}))],
];
const t0 = now - 600000, t1 = now - 60000;
const options = { fabric: { all_pairs: false, duration_s: 10, ib_tool: 'ib_write_bw' }, nccl: { launcher: 'ssh', port: 29500 } };
const sql = ['BEGIN;',
	`INSERT INTO acceptance_runs (uuid, rack_id, attempt, state, checks, created_by, created_at, finished_at, options) VALUES (${q(UUID)}, (SELECT id FROM racks WHERE name = 'r02'), 1, 'failed', '["fabric","nccl"]', 'web-test', ${t0}, ${t1}, ${q(JSON.stringify(options))});`];
for (const [n, fab] of [['gpu-r02-u01', 'failed'], ['gpu-r02-u09', 'failed'], ['gpu-r02-u17', 'passed'], ['gpu-r02-u25', 'passed']]) {
	for (const [check, st] of [['fabric', fab], ['nccl', 'failed']])
		sql.push(`INSERT INTO acceptance_results (run_id, node_id, check_name, state, message, attempt, started_at, finished_at) VALUES (${run}, ${node(n)}, ${q(check)}, ${q(st)}, ${q(`${check} ${st}`)}, 1, ${t0}, ${t1});`);
}
for (const [kind, round, server, client, st, msg, tests] of pairs)
	sql.push(`INSERT INTO acceptance_pairs (run_id, kind, round, server_id, client_id, state, message, tests, started_at, finished_at) VALUES (${run}, ${q(kind)}, ${round}, ${node(server)}, ${client ? node(client) : 'NULL'}, ${q(st)}, ${q(msg)}, ${q(JSON.stringify(tests))}, ${t0}, ${t1});`);
sql.push('COMMIT;');
console.log(sql.join('\n'));
