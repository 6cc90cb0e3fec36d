/* The fabric and NCCL checks' pure parts (server/accept/fabric.c): the pairing schedule, the
 * tests a pair runs on the fixture inventories, their shell commands, and the tools' outputs
 * (tests/fixtures/fabric) read back; the bom's fabric and nccl parts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accept/accept.h"

#ifndef RP_FABRIC_FIXTURES
#error "RP_FABRIC_FIXTURES must be defined"
#endif

static char *
slurp(const char *name)
{
	char path[512], *buf;
	FILE *f;
	long n;

	snprintf(path, sizeof path, "%s/%s", RP_FABRIC_FIXTURES, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static json_t *
inventory(const char *name)
{
	char path[512];
	json_error_t e;
	json_t *j;

	snprintf(path, sizeof path, "%s/%s", RP_FABRIC_FIXTURES, name);
	j = json_load_file(path, 0, &e);
	if (j == NULL)
		fail_msg("%s: %s", name, e.text);
	return j;
}

static json_t *
js(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	if (j == NULL)
		fail_msg("%s: %s", text, e.text);
	return j;
}

static void
same(json_t *got, const char *want)
{
	json_t *w = js(want);

	if (!json_equal(got, w))
		fail_msg("got %s, want %s", json_dumps(got, JSON_COMPACT), want);
	json_decref(w);
}

/* ---- Schedule -------------------------------------------------------------------------- */

static void
check_schedule(size_t n, int all)
{
	json_t *s = rp_accept_fabric_schedule(n, all), *round, *pair;
	size_t r, i, pairs = 0, want_rounds, want_pairs;
	unsigned char *seen = calloc(n * n + 1, 1), *used = calloc(n + 1, 1);
	int *srv = calloc(n + 1, sizeof(int)), *cli = calloc(n + 1, sizeof(int));

	assert_non_null(s);
	assert_true(seen && used && srv && cli);
	if (all) {
		want_pairs = n < 2 ? 0 : n * (n - 1) / 2;
		want_rounds = n < 2 ? 0 : n % 2 ? n : n - 1;
	} else {
		want_pairs = n < 2 ? 0 : n;
		want_rounds = n < 2 ? 0 : n % 2 ? 3 : 2;
	}
	assert_int_equal(json_array_size(s), want_rounds);
	json_array_foreach(s, r, round)
	{
		assert_true(json_array_size(round) > 0);
		memset(used, 0, n + 1);
		json_array_foreach(round, i, pair)
		{
			json_int_t a = json_integer_value(json_array_get(pair, 0));
			json_int_t b = json_integer_value(json_array_get(pair, 1));

			assert_int_equal(json_array_size(pair), 2);
			assert_true(a >= 0 && (size_t)a < n && b >= 0 && (size_t)b < n && a != b);
			/* No node twice in a round: its pairs run at once. */
			assert_false(used[a]);
			assert_false(used[b]);
			used[a] = used[b] = 1;
			/* Every pair once, in either order (the ring of two: once each way). */
			if (all || n > 2) {
				assert_false(seen[(a < b ? a : b) * n + (a < b ? b : a)]);
				seen[(a < b ? a : b) * n + (a < b ? b : a)] = 1;
			}
			if (!all && n >= 2)
				assert_int_equal(b, (a + 1) % (json_int_t)n); /* the cycle */
			srv[a]++;
			cli[b]++;
			pairs++;
		}
	}
	assert_int_equal(pairs, want_pairs);
	if (!all && n >= 2)
		for (i = 0; i < n; i++) {
			assert_int_equal(srv[i], 1);
			assert_int_equal(cli[i], 1);
		}
	free(seen);
	free(used);
	free(srv);
	free(cli);
	json_decref(s);
}

static void
test_schedule(void **state)
{
	static const size_t ns[] = {0, 1, 2, 3, 4, 5, 8, 32, 33};
	json_t *s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		check_schedule(ns[i], 0);
		check_schedule(ns[i], 1);
	}
	/* n == 2: each way once; 3: the triangle in 3 rounds. */
	s = rp_accept_fabric_schedule(2, 0);
	same(s, "[[[0, 1]], [[1, 0]]]");
	json_decref(s);
	s = rp_accept_fabric_schedule(3, 0);
	same(s, "[[[0, 1]], [[1, 2]], [[2, 0]]]");
	json_decref(s);
	s = rp_accept_fabric_schedule(4096, 0);
	assert_non_null(s);
	json_decref(s);
	assert_null(rp_accept_fabric_schedule(4097, 0));
	assert_null(rp_accept_fabric_schedule(513, 1));
	s = rp_accept_fabric_schedule(512, 1);
	assert_int_equal(json_array_size(s), 511);
	json_decref(s);
}

/* ---- Tests of a pair ------------------------------------------------------------------- */

static json_t *
test_of(json_t *tests, const char *port)
{
	json_t *t;
	size_t i;

	json_array_foreach(tests, i, t)
	{
		if (!strcmp(json_string_value(json_object_get(t, "port")), port))
			return t;
	}
	fail_msg("no test of %s in %s", port, json_dumps(tests, JSON_COMPACT));
	return NULL;
}

static const char *
str(json_t *t, const char *k)
{
	return json_string_value(json_object_get(t, k));
}

static double
num(json_t *t, const char *k)
{
	return json_number_value(json_object_get(t, k));
}

static void
test_ib_rails(void **state)
{
	json_t *s = inventory("inventory-server.json"), *c = inventory("inventory-client.json");
	json_t *bom = js("{\"hcas\": {\"link_layer\": \"InfiniBand\"}}"), *tests, *t;
	json_t *read = js("{\"ib_tool\": \"ib_read_bw\"}"), *none = js("{}");

	(void)state;
	tests = rp_accept_fabric_tests(bom, s, c, NULL, "10.0.0.7", NULL);
	assert_non_null(tests);
	/* By device then port; the RoCE port mlx5_4 is not of the bom's link layer; then eno1,
	 * the interface SSH reaches (no cabling, no fabric.interfaces). */
	assert_int_equal(json_array_size(tests), 5);
	assert_string_equal(str(json_array_get(tests, 0), "port"), "mlx5_0/1");
	assert_string_equal(str(json_array_get(tests, 1), "port"), "mlx5_1/1");
	assert_string_equal(str(json_array_get(tests, 2), "port"), "mlx5_2/1");
	assert_string_equal(str(json_array_get(tests, 3), "port"), "mlx5_3/1");
	assert_string_equal(str(json_array_get(tests, 4), "port"), "eno1");

	t = test_of(tests, "mlx5_0/1");
	assert_string_equal(str(t, "tool"), "ib_write_bw");
	assert_string_equal(str(t, "device"), "mlx5_0");
	assert_int_equal(json_integer_value(json_object_get(t, "ib_port")), 1);
	assert_string_equal(str(t, "address"), "10.0.0.7");
	assert_true(num(t, "line_gbps") == 400);
	assert_true(num(t, "min_gbps") == 360); /* default envelope 90 % */
	assert_null(json_object_get(t, "skip"));
	assert_null(json_object_get(t, "interface"));
	/* The lower of the two rates: the client's mlx5_1 runs at 200. */
	assert_true(num(json_array_get(tests, 1), "line_gbps") == 200);
	assert_true(num(json_array_get(tests, 1), "min_gbps") == 180);
	/* A rail missing on the client is listed, skipped, with the reason. */
	t = test_of(tests, "mlx5_3/1");
	assert_non_null(strstr(str(t, "skip"), "client has no port mlx5_3/1"));
	json_decref(tests);

	/* The bom's rate wins; ib_read_bw on request; envelope 80. */
	json_decref(bom);
	bom = js("{\"hcas\": {\"link_layer\": \"InfiniBand\", \"rate_gbps\": 400}, \"fabric\": "
	         "{\"envelope_pct\": 80}}");
	tests = rp_accept_fabric_tests(bom, s, c, NULL, "10.0.0.7", read);
	t = test_of(tests, "mlx5_1/1");
	assert_string_equal(str(t, "tool"), "ib_read_bw");
	assert_true(num(t, "line_gbps") == 400);
	assert_true(num(t, "min_gbps") == 320);
	t = test_of(tests, "eno1");
	assert_true(num(t, "min_gbps") == 0.8);
	json_decref(tests);

	/* No SSH address: perftest has no server address to give the client. */
	tests = rp_accept_fabric_tests(bom, s, c, NULL, NULL, NULL);
	assert_int_equal(json_array_size(tests), 4); /* no eno1: nothing names it */
	t = test_of(tests, "mlx5_0/1");
	assert_string_equal(str(t, "skip"), "no address for the server");
	assert_true(json_is_null(json_object_get(t, "address")));
	json_decref(tests);

	/* Any link layer: the RoCE port too (both nodes have it). */
	tests = rp_accept_fabric_tests(NULL, s, c, NULL, "10.0.0.7", NULL);
	t = test_of(tests, "mlx5_4/1");
	assert_true(num(t, "line_gbps") == 200);
	assert_null(json_object_get(t, "skip"));
	json_decref(tests);

	/* Nothing reported: nothing to test, an empty array. */
	tests = rp_accept_fabric_tests(NULL, none, none, NULL, NULL, NULL);
	assert_non_null(tests);
	assert_int_equal(json_array_size(tests), 0);
	json_decref(tests);
	json_decref(bom);
	json_decref(read);
	json_decref(none);
	json_decref(s);
	json_decref(c);
}

static void
test_ethernet(void **state)
{
	json_t *s = inventory("inventory-server.json"), *c = inventory("inventory-client.json");
	json_t *bom = js("{\"hcas\": {\"link_layer\": \"InfiniBand\"}}"), *tests, *t, *cab;
	size_t i;

	(void)state;
	/* From cabling: eth2 by its MAC (any case), eno1 by name; the IPoIB interface of mlx5_0
	 * and a port_guid entry are InfiniBand, tested with perftest. */
	cab = js("[{\"node\": \"n\", \"interface\": \"B8:3F:D2:00:10:07\", \"switch\": \"leaf-a\", "
	         "\"port\": \"Ethernet1/1\"}, {\"node\": \"n\", \"interface\": \"eno1\", "
	         "\"switch\": \"mgmt\", \"port\": \"Gi1/0/7\"}, {\"node\": \"n\", \"interface\": "
	         "\"ibp26s0\", \"switch\": \"ib-leaf\", \"port\": \"1\"}, {\"node\": \"n\", "
	         "\"port_guid\": \"a088:c203:0012:3400\", \"switch\": \"ib-leaf\", \"port\": "
	         "\"2\"}]");
	tests = rp_accept_fabric_tests(bom, s, c, cab, "10.0.0.7", NULL);
	assert_int_equal(json_array_size(tests), 6);
	assert_string_equal(str(json_array_get(tests, 4), "port"), "eno1");
	assert_string_equal(str(json_array_get(tests, 5), "port"), "eth2");
	t = test_of(tests, "eth2");
	assert_string_equal(str(t, "tool"), "iperf3");
	assert_string_equal(str(t, "interface"), "eth2");
	assert_string_equal(str(t, "address"), "10.0.1.7"); /* its own IPv4, not SSH's */
	assert_true(num(t, "line_gbps") == 100);            /* speed_mbps / 1000 */
	assert_true(num(t, "min_gbps") == 90);
	assert_null(json_object_get(t, "device"));
	t = test_of(tests, "eno1");
	assert_string_equal(str(t, "address"), "10.0.0.7");
	assert_true(num(t, "line_gbps") == 1);
	json_decref(tests);

	/* Any link layer: mlx5_4 (RoCE) is on eth2's PCI function, so eth2 is perftest's. */
	tests = rp_accept_fabric_tests(NULL, s, c, cab, "10.0.0.7", NULL);
	assert_non_null(test_of(tests, "mlx5_4/1"));
	assert_string_equal(str(json_array_get(tests, json_array_size(tests) - 1), "port"), "eno1");
	json_decref(tests);

	/* The bom's interfaces win over cabling; one the server lacks is a skip; the bom's
	 * ethernet_gbps is the line rate. */
	json_decref(bom);
	bom = js("{\"hcas\": {\"link_layer\": \"InfiniBand\"}, \"fabric\": {\"interfaces\": "
	         "[\"eth9\", \"eth2\"], \"ethernet_gbps\": 200}}");
	tests = rp_accept_fabric_tests(bom, s, c, cab, "10.0.0.7", NULL);
	assert_int_equal(json_array_size(tests), 6);
	assert_string_equal(str(json_array_get(tests, 4), "port"), "eth2");
	assert_string_equal(str(json_array_get(tests, 5), "port"), "eth9");
	assert_true(num(test_of(tests, "eth2"), "line_gbps") == 200);
	assert_non_null(strstr(str(test_of(tests, "eth9"), "skip"), "no interface eth9"));
	json_decref(tests);

	/* No speed reported (eth3 is down): the bom's nics.min_speed_mbps, else a skip; no
	 * IPv4 on eth3 is a skip too. */
	json_decref(bom);
	bom = js("{\"fabric\": {\"interfaces\": [\"eth3\"]}}");
	tests = rp_accept_fabric_tests(bom, s, c, NULL, "10.0.0.7", NULL);
	t = test_of(tests, "eth3");
	assert_non_null(strstr(str(t, "skip"), "no line rate"));
	assert_true(json_is_null(json_object_get(t, "line_gbps")));
	assert_true(json_is_null(json_object_get(t, "min_gbps")));
	json_decref(tests);
	json_decref(bom);
	bom = js("{\"fabric\": {\"interfaces\": [\"eth3\"]}, \"nics\": {\"min_speed_mbps\": "
	         "25000}}");
	tests = rp_accept_fabric_tests(bom, s, c, NULL, "10.0.0.7", NULL);
	t = test_of(tests, "eth3");
	assert_true(num(t, "line_gbps") == 25);
	assert_string_equal(str(t, "skip"), "no IPv4 address on eth3");
	json_decref(tests);

	/* Precedence: speed_mbps before nics.min_speed_mbps. */
	json_decref(bom);
	bom = js("{\"fabric\": {\"interfaces\": [\"eth2\"]}, \"nics\": {\"min_speed_mbps\": "
	         "25000}}");
	tests = rp_accept_fabric_tests(bom, s, c, NULL, "10.0.0.7", NULL);
	assert_true(num(test_of(tests, "eth2"), "line_gbps") == 100);
	json_decref(tests);

	/* An inventory without addresses: ssh_addr is the address. */
	json_array_foreach(json_object_get(json_object_get(s, "nics"), "items"), i, t)
	{
		json_object_del(t, "addresses");
	}
	tests = rp_accept_fabric_tests(bom, s, c, NULL, "gpu-r01-u07.mgmt", NULL);
	assert_string_equal(str(test_of(tests, "eth2"), "address"), "gpu-r01-u07.mgmt");
	json_decref(tests);
	json_decref(bom);
	json_decref(cab);
	json_decref(s);
	json_decref(c);
}

/* ---- Commands -------------------------------------------------------------------------- */

static void
test_commands(void **state)
{
	char srv[1024], cli[1024];
	json_t *t;

	(void)state;
	t = js("{\"port\": \"mlx5_0/1\", \"tool\": \"ib_write_bw\", \"device\": \"mlx5_0\", "
	       "\"ib_port\": 1, \"address\": \"10.0.0.7\", \"line_gbps\": 400, \"min_gbps\": 360}");
	assert_int_equal(rp_accept_fabric_commands(t, 18515, 10, srv, sizeof srv, cli, sizeof cli),
	                 0);
	assert_string_equal(srv, "command -v ib_write_bw >/dev/null 2>&1 || { echo 'ib_write_bw "
	                         "is not installed on this node'; exit 77; }; exec ib_write_bw -d "
	                         "'mlx5_0' -i '1' -p '18515' -F --report_gbits -D '10'");
	assert_string_equal(cli, "command -v ib_write_bw >/dev/null 2>&1 || { echo 'ib_write_bw "
	                         "is not installed on this node'; exit 77; }; exec ib_write_bw -d "
	                         "'mlx5_0' -i '1' -p '18515' -F --report_gbits -D '10' '10.0.0.7'");
	/* Buffers too small: -1, nothing written. */
	strcpy(srv, "untouched");
	strcpy(cli, "untouched");
	assert_int_equal(rp_accept_fabric_commands(t, 18515, 10, srv, 40, cli, sizeof cli), -1);
	assert_int_equal(rp_accept_fabric_commands(t, 18515, 10, srv, sizeof srv, cli, 150), -1);
	assert_int_equal(rp_accept_fabric_commands(t, 18515, 10, srv, sizeof srv, cli, 0), -1);
	assert_string_equal(srv, "untouched");
	assert_string_equal(cli, "untouched");
	/* Out of range numbers. */
	assert_int_equal(rp_accept_fabric_commands(t, 0, 10, srv, sizeof srv, cli, sizeof cli), -1);
	assert_int_equal(rp_accept_fabric_commands(t, 70000, 10, srv, sizeof srv, cli, sizeof cli),
	                 -1);
	assert_int_equal(rp_accept_fabric_commands(t, 5201, 0, srv, sizeof srv, cli, sizeof cli),
	                 -1);
	/* A hostile device and address are quoted, never run. */
	json_object_set_new(t, "device", json_string("x'; rm -rf /"));
	json_object_set_new(t, "address", json_string("$(reboot)`id`"));
	json_object_set_new(t, "tool", json_string("ib_read_bw"));
	assert_int_equal(rp_accept_fabric_commands(t, 18515, 10, srv, sizeof srv, cli, sizeof cli),
	                 0);
	assert_non_null(strstr(srv, "exec ib_read_bw -d 'x'\\''; rm -rf /' -i '1'"));
	assert_non_null(strstr(cli, " '$(reboot)`id`'"));
	/* An address that reads as an option, a skipped test, a missing address or device, an
	 * unknown tool: malformed. */
	json_object_set_new(t, "address", json_string("--help"));
	assert_int_equal(rp_accept_fabric_commands(t, 1, 1, srv, sizeof srv, cli, sizeof cli), -1);
	json_object_set_new(t, "address", json_string("10.0.0.7"));
	json_object_set_new(t, "skip", json_string("the client has no port mlx5_0/1"));
	assert_int_equal(rp_accept_fabric_commands(t, 1, 1, srv, sizeof srv, cli, sizeof cli), -1);
	json_object_del(t, "skip");
	json_object_set_new(t, "address", json_null());
	assert_int_equal(rp_accept_fabric_commands(t, 1, 1, srv, sizeof srv, cli, sizeof cli), -1);
	json_object_set_new(t, "address", json_string("10.0.0.7"));
	json_object_del(t, "device");
	assert_int_equal(rp_accept_fabric_commands(t, 1, 1, srv, sizeof srv, cli, sizeof cli), -1);
	json_object_set_new(t, "device", json_string("mlx5_0"));
	json_object_set_new(t, "ib_port", json_integer(0));
	assert_int_equal(rp_accept_fabric_commands(t, 1, 1, srv, sizeof srv, cli, sizeof cli), -1);
	json_object_set_new(t, "ib_port", json_integer(1));
	json_object_set_new(t, "tool", json_string("sh"));
	assert_int_equal(rp_accept_fabric_commands(t, 1, 1, srv, sizeof srv, cli, sizeof cli), -1);
	assert_int_equal(rp_accept_fabric_commands(NULL, 1, 1, srv, sizeof srv, cli, sizeof cli),
	                 -1);
	json_decref(t);

	t = js("{\"port\": \"eth2\", \"tool\": \"iperf3\", \"interface\": \"eth2\", \"address\": "
	       "\"10.0.1.7\", \"line_gbps\": 100, \"min_gbps\": 90}");
	assert_int_equal(rp_accept_fabric_commands(t, 5201, 10, srv, sizeof srv, cli, sizeof cli),
	                 0);
	assert_string_equal(srv,
	                    "command -v iperf3 >/dev/null 2>&1 || { echo 'iperf3 is not "
	                    "installed on this node'; exit 77; }; exec iperf3 -s -1 -p '5201'");
	assert_string_equal(cli,
	                    "command -v iperf3 >/dev/null 2>&1 || { echo 'iperf3 is not "
	                    "installed on this node'; exit 77; }; exec iperf3 -c '10.0.1.7' -p "
	                    "'5201' -t '10' -J");
	json_object_set_new(t, "address", json_string("a'b"));
	assert_int_equal(rp_accept_fabric_commands(t, 5201, 10, srv, sizeof srv, cli, sizeof cli),
	                 0);
	assert_non_null(strstr(cli, "-c 'a'\\''b' -p"));
	json_decref(t);
}

/* ---- Outputs --------------------------------------------------------------------------- */

static void
near(double got, double want)
{
	if (got < want - 1e-6 || got > want + 1e-6)
		fail_msg("got %.9f, want %.9f", got, want);
}

static void
test_perftest(void **state)
{
	char why[200], *o;
	double g = -1;

	(void)state;
	o = slurp("ib_write_bw-gbits.txt");
	assert_int_equal(rp_accept_parse_perftest(o, &g, why, sizeof why), 0);
	near(g, 392.41);
	free(o);
	/* MB/sec is MiB/s: 11075.93 x 2^20 x 8 / 10^9. */
	o = slurp("ib_write_bw-mbs.txt");
	assert_int_equal(rp_accept_parse_perftest(o, &g, why, sizeof why), 0);
	near(g, 11075.93 * 1048576 * 8 / 1e9);
	free(o);
	/* The largest size's row, past a warning between header and rows. */
	o = slurp("ib_read_bw-all-gbits.txt");
	assert_int_equal(rp_accept_parse_perftest(o, &g, why, sizeof why), 0);
	near(g, 381.75);
	free(o);
	o = slurp("ib_read_bw-exchange-failed.txt");
	g = -1;
	assert_int_equal(rp_accept_parse_perftest(o, &g, why, sizeof why), -1);
	assert_true(g == -1);
	assert_string_equal(why,
	                    "no result line: ethernet_read_keys: Couldn't read remote address");
	free(o);
	/* The 24.x MiB/sec header, and QoS's #sl column. */
	assert_int_equal(
	        rp_accept_parse_perftest(" #bytes     #iterations    BW peak[MiB/sec]    BW "
	                                 "average[MiB/sec]   MsgRate[Mpps]\n 65536      "
	                                 "1000             0.00               1000.00	   "
	                                 "0.016000\n",
	                                 &g, why, sizeof why),
	        0);
	near(g, 1000.0 * 1048576 * 8 / 1e9);
	assert_int_equal(
	        rp_accept_parse_perftest(" #bytes    #sl      #iterations    BW peak[Gb/sec]  "
	                                 "  BW average[Gb/sec]   MsgRate[Mpps]\n 65536    "
	                                 "3           1000           97.00            "
	                                 "96.50                  0.184000\n",
	                                 &g, why, sizeof why),
	        0);
	near(g, 96.5);
	/* Garbage, truncated, empty, missing: -1 with a reason, never a crash. */
	assert_int_equal(rp_accept_parse_perftest("", &g, why, sizeof why), -1);
	assert_string_equal(why, "no output");
	assert_int_equal(rp_accept_parse_perftest(NULL, &g, why, sizeof why), -1);
	assert_int_equal(rp_accept_parse_perftest("\x01\xff garbage\n\n\n 65536 1 2 3\n", &g, why,
	                                          sizeof why),
	                 -1);
	assert_string_equal(why, "no result line");
	assert_int_equal(
	        rp_accept_parse_perftest(" #bytes     #iterations    BW peak[Gb/sec]    BW "
	                                 "average[Gb/sec]   MsgRate[Mpps]\n 65536      "
	                                 "1000   ",
	                                 &g, why, sizeof why),
	        -1);
	assert_int_equal(rp_accept_parse_perftest(" #bytes #iterations BW peak[Gb/sec] BW "
	                                          "average[Gb/sec]\n 65536 10 1 nan\n 65536 10 1 "
	                                          "-5\n",
	                                          &g, NULL, 0),
	                 -1);
	assert_int_equal(rp_accept_parse_perftest("ib_write_bw is not installed on this node\n", &g,
	                                          why, sizeof why),
	                 -1);
	assert_string_equal(why, "no result line: ib_write_bw is not installed on this node");
	/* A tiny why is truncated, still terminated. */
	assert_int_equal(rp_accept_parse_perftest("x", &g, why, 4), -1);
	assert_string_equal(why, "no ");
}

static void
test_iperf3(void **state)
{
	char why[300], *o, *cut;
	double g = -1;

	(void)state;
	o = slurp("iperf3-ok.txt");
	assert_int_equal(rp_accept_parse_iperf3(o, &g, why, sizeof why), 0);
	assert_true(g > 29.18 && g < 29.19);
	/* Truncated mid-object: no result. */
	cut = strstr(o, "\"end\":");
	assert_non_null(cut);
	*cut = '\0';
	g = -1;
	assert_int_equal(rp_accept_parse_iperf3(o, &g, why, sizeof why), -1);
	assert_true(g == -1);
	assert_non_null(strstr(why, "no JSON output"));
	free(o);
	o = slurp("iperf3-refused.txt");
	assert_int_equal(rp_accept_parse_iperf3(o, &g, why, sizeof why), -1);
	assert_string_equal(why, "error - unable to connect to server - server may have stopped "
	                         "running or use a different port, firewall issue, etc.: "
	                         "Connection refused");
	free(o);
	/* UDP: end.sum; a late non-JSON error line after the object is ignored. */
	assert_int_equal(
	        rp_accept_parse_iperf3("x\n{\n\"end\": {\"sum\": {\"bits_per_second\": "
	                               "2.5e9}}\n}\niperf3: error - unable to send control "
	                               "message: Broken pipe\n",
	                               &g, why, sizeof why),
	        0);
	near(g, 2.5);
	assert_int_equal(rp_accept_parse_iperf3("iperf3: error - unable to connect to server: "
	                                        "Connection refused\n",
	                                        &g, why, sizeof why),
	                 -1);
	assert_string_equal(why, "no JSON output: iperf3: error - unable to connect to server: "
	                         "Connection refused");
	assert_int_equal(rp_accept_parse_iperf3("{\n\"end\": {}\n}\n", &g, why, sizeof why), -1);
	assert_non_null(strstr(why, "sum_received"));
	assert_int_equal(rp_accept_parse_iperf3("{\n\"end\": {\"sum_received\": "
	                                        "{\"bits_per_second\": -1}}\n}\n",
	                                        &g, why, sizeof why),
	                 -1);
	assert_int_equal(rp_accept_parse_iperf3("{\n[[[[[[\n", &g, why, sizeof why), -1);
	assert_int_equal(rp_accept_parse_iperf3("", &g, why, sizeof why), -1);
	assert_int_equal(rp_accept_parse_iperf3(NULL, &g, NULL, 0), -1);
	assert_int_equal(rp_accept_parse_iperf3("{", &g, why, sizeof why), -1);
}

static void
test_nccl(void **state)
{
	char why[200], *o, *p;
	double bw = -1, avg = -1;
	long long bytes = -1;

	(void)state;
	o = slurp("all_reduce_perf-2x8.txt");
	assert_int_equal(rp_accept_parse_nccl(o, &bw, &avg, &bytes, why, sizeof why), 0);
	near(bw, 356.32);
	near(avg, 350.378);
	assert_int_equal(bytes, 8589934592LL);
	/* Without the footer: no average. Truncated mid-row: the last whole row is not the
	 * largest, but rows so far stand (the size is reported). */
	p = strstr(o, "# Out of bounds");
	*p = '\0';
	assert_int_equal(rp_accept_parse_nccl(o, &bw, &avg, &bytes, why, sizeof why), 0);
	assert_true(avg == -1);
	p = strstr(o, "  8589934592");
	p[30] = '\0';
	assert_int_equal(rp_accept_parse_nccl(o, &bw, &avg, &bytes, why, sizeof why), 0);
	assert_int_equal(bytes, 4294967296LL);
	near(bw, 354.83);
	free(o);

	o = slurp("all_reduce_perf-wrong.txt");
	bw = -1;
	assert_int_equal(rp_accept_parse_nccl(o, &bw, &avg, &bytes, why, sizeof why), -1);
	assert_string_equal(why, "2 wrong values at 2097152 bytes (out-of-place)");
	assert_true(bw == -1);
	free(o);

	/* -c 0: #wrong is N/A, not wrong. */
	assert_int_equal(
	        rp_accept_parse_nccl("#       size         count      type   redop    root "
	                             "    time   algbw   busbw #wrong     time   algbw   "
	                             "busbw #wrong\n    33554432       8388608     float "
	                             "    sum      -1    419.6   79.97  149.94    N/A    "
	                             "418.9   80.10  150.19    N/A\n",
	                             &bw, &avg, &bytes, why, sizeof why),
	        0);
	near(bw, 149.94);
	/* Before 2.13: no root, an "error" column (a relative error, not a count). */
	assert_int_equal(
	        rp_accept_parse_nccl("#       size         count      type   redop     time  "
	                             " algbw   busbw  error     time   algbw   busbw  "
	                             "error\n    33554432       8388608     float     sum  "
	                             "  817.8   41.03   61.54  5e-07    785.1   42.74   "
	                             "64.11  5e-07\n# Out of bounds values : 0 OK\n",
	                             &bw, &avg, &bytes, why, sizeof why),
	        0);
	near(bw, 61.54);
	assert_int_equal(
	        rp_accept_parse_nccl("#       size         count      type   redop     time  "
	                             " algbw   busbw  error     time   algbw   busbw  "
	                             "error\n    33554432       8388608     float     sum  "
	                             "  817.8   41.03   61.54  5e-07    785.1   42.74   "
	                             "64.11  5e-07\n# Out of bounds values : 248 FAILED\n",
	                             &bw, &avg, &bytes, why, sizeof why),
	        -1);
	assert_string_equal(why, "248 out of bounds values");
	/* No rows; garbage; empty. */
	assert_int_equal(
	        rp_accept_parse_nccl("gpu-r01-u07: Test NCCL failure common.cu:1005 'remote "
	                             "process exited or there was a network error'\n",
	                             &bw, &avg, &bytes, why, sizeof why),
	        -1);
	assert_non_null(strstr(why, "no result row: gpu-r01-u07: Test NCCL failure"));
	assert_int_equal(rp_accept_parse_nccl("# size busbw\n1 x\n\x80\x81\n", &bw, &avg, &bytes,
	                                      why, sizeof why),
	                 -1);
	assert_string_equal(why, "no result row");
	assert_int_equal(rp_accept_parse_nccl("", &bw, &avg, &bytes, why, sizeof why), -1);
	assert_int_equal(rp_accept_parse_nccl(NULL, &bw, &avg, &bytes, NULL, 0), -1);
}

static void
test_too_big(void **state)
{
	size_t n = (8u << 20) + 1;
	char *o = malloc(n + 1), why[100];
	double g, a;
	long long b;

	(void)state;
	assert_non_null(o);
	memset(o, ' ', n);
	o[n] = '\0';
	assert_int_equal(rp_accept_parse_perftest(o, &g, why, sizeof why), -1);
	assert_string_equal(why, "output over 8 MiB, not read");
	assert_int_equal(rp_accept_parse_iperf3(o, &g, why, sizeof why), -1);
	assert_int_equal(rp_accept_parse_nccl(o, &g, &a, &b, why, sizeof why), -1);
	assert_string_equal(why, "output over 8 MiB, not read");
	free(o);
}

/* ---- Bill of materials ----------------------------------------------------------------- */

static void
bad(const char *bom, enum rp_err want, const char *field, const char *reason)
{
	json_t *b = js(bom), *d = NULL;

	assert_int_equal(rp_accept_bom_check(b, &d), want);
	assert_non_null(d);
	assert_string_equal(json_string_value(json_object_get(d, "field")), field);
	if (reason && !strstr(json_string_value(json_object_get(d, "reason")), reason))
		fail_msg("%s: reason %s", bom, json_string_value(json_object_get(d, "reason")));
	json_decref(d);
	json_decref(b);
}

static void
test_bom(void **state)
{
	json_t *b, *d = NULL, *inv, *fs = json_array();

	(void)state;
	b = js("{\"fabric\": {\"envelope_pct\": 85, \"ethernet_gbps\": 100, \"interfaces\": "
	       "[\"eth2\", \"ens1f0np0\", \"bond0.100\", \"a_b-c\"]}, \"nccl\": "
	       "{\"min_busbw_gbytes_s\": 350.5, \"max_bytes\": 8589934592, \"gpus_per_node\": 8}}");
	assert_int_equal(rp_accept_bom_check(b, &d), RP_ERR_OK);
	assert_null(d);
	/* The inventory comparison ignores them: nothing to compare a node with. */
	inv = inventory("inventory-server.json");
	assert_int_equal(rp_accept_bom(b, inv, fs), 0);
	assert_int_equal(json_array_size(fs), 0);
	json_decref(inv);
	json_decref(fs);
	json_decref(b);
	b = js("{\"fabric\": {\"envelope_pct\": 100}, \"nccl\": {\"max_bytes\": 1}}");
	assert_int_equal(rp_accept_bom_check(b, &d), RP_ERR_OK);
	json_decref(b);

	bad("{\"fabric\": {\"envelope_pct\": 0.5}}", RP_ERR_INVALID_FIELD,
	    "bom.fabric.envelope_pct", "1 to 100");
	bad("{\"fabric\": {\"envelope_pct\": 101}}", RP_ERR_INVALID_FIELD,
	    "bom.fabric.envelope_pct", NULL);
	bad("{\"fabric\": {\"envelope_pct\": \"90\"}}", RP_ERR_INVALID_FIELD,
	    "bom.fabric.envelope_pct", NULL);
	bad("{\"fabric\": {\"ethernet_gbps\": 0}}", RP_ERR_INVALID_FIELD,
	    "bom.fabric.ethernet_gbps", "above 0");
	bad("{\"fabric\": {\"interfaces\": []}}", RP_ERR_INVALID_FIELD, "bom.fabric.interfaces",
	    "1-64");
	bad("{\"fabric\": {\"interfaces\": \"eth0\"}}", RP_ERR_INVALID_FIELD,
	    "bom.fabric.interfaces", NULL);
	bad("{\"fabric\": {\"interfaces\": [\"eth0\", \"x'; rm -rf /\"]}}", RP_ERR_INVALID_FIELD,
	    "bom.fabric.interfaces", "entry 1");
	bad("{\"fabric\": {\"interfaces\": [\"abcdefghijklmnop\"]}}", RP_ERR_INVALID_FIELD,
	    "bom.fabric.interfaces", "1-15");
	bad("{\"fabric\": {\"interfaces\": [\"\"]}}", RP_ERR_INVALID_FIELD, "bom.fabric.interfaces",
	    NULL);
	bad("{\"fabric\": {\"interfaces\": [\"eth0\", \"eth0\"]}}", RP_ERR_INVALID_FIELD,
	    "bom.fabric.interfaces", "twice");
	bad("{\"fabric\": {\"interfaces\": [1]}}", RP_ERR_INVALID_FIELD, "bom.fabric.interfaces",
	    NULL);
	bad("{\"fabric\": {\"ib_tool\": \"ib_write_bw\"}}", RP_ERR_UNKNOWN_FIELD,
	    "bom.fabric.ib_tool", "unknown member");
	bad("{\"fabric\": 90}", RP_ERR_INVALID_FIELD, "bom.fabric", "object");
	bad("{\"nccl\": {\"min_busbw_gbytes_s\": -1}}", RP_ERR_INVALID_FIELD,
	    "bom.nccl.min_busbw_gbytes_s", NULL);
	bad("{\"nccl\": {\"max_bytes\": 0}}", RP_ERR_INVALID_FIELD, "bom.nccl.max_bytes", NULL);
	bad("{\"nccl\": {\"max_bytes\": 1.5}}", RP_ERR_INVALID_FIELD, "bom.nccl.max_bytes", NULL);
	bad("{\"nccl\": {\"gpus_per_node\": -1}}", RP_ERR_INVALID_FIELD, "bom.nccl.gpus_per_node",
	    NULL);
	bad("{\"nccl\": {\"busbw\": 1}}", RP_ERR_UNKNOWN_FIELD, "bom.nccl.busbw", NULL);
	bad("{\"fabrics\": {}}", RP_ERR_UNKNOWN_FIELD, "bom.fabrics", "fabric, nccl");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_schedule), cmocka_unit_test(test_ib_rails),
	        cmocka_unit_test(test_ethernet), cmocka_unit_test(test_commands),
	        cmocka_unit_test(test_perftest), cmocka_unit_test(test_iperf3),
	        cmocka_unit_test(test_nccl),     cmocka_unit_test(test_too_big),
	        cmocka_unit_test(test_bom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
