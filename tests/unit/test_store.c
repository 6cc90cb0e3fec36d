/* The store on a real SQLite file (or, in the suite's PostgreSQL run, a real PostgreSQL
 * database): CRUD, conflicts, transactions, events, tokens, import. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dbfx.h"
#include "store/store.h"

struct fx {
	char dir[64];
	char path[128];
	char key[128];
	struct rp_store *st;
	struct rp_secrets *sec;
};

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	char why[256];

	snprintf(f->dir, sizeof f->dir, "/tmp/rp-store-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	dbfx_target(f->dir, f->path, sizeof f->path);
	snprintf(f->key, sizeof f->key, "%s/secret.key", f->dir);
	assert_int_equal(rp_store_open(f->path, &f->st, why, sizeof why), RP_ERR_OK);
	assert_int_equal(rp_secrets_load(f->key, 1, &f->sec, why, sizeof why), 0);
	rp_store_set_secrets(f->st, f->sec);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	rp_store_free(f->st);
	rp_secrets_free(f->sec);
	dbfx_drop(f->path);
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static json_t *
J(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);

	assert_non_null(j);
	return j;
}

static long
events(struct rp_store *st)
{
	struct rp_page_req rq = {.limit = 1000};
	struct rp_page pg = {0};
	long n;

	assert_int_equal(rp_store_event_list(st, &rq, &pg), RP_ERR_OK);
	n = (long)json_array_size(pg.items);
	json_decref(pg.items);
	return n;
}

static void
test_schema(void **state)
{
	struct fx *f = *state;

	assert_int_equal(rp_store_schema_version(f->st), rp_store_schema_latest());
	assert_int_equal(rp_store_ping(f->st), RP_ERR_OK);
}

static void
test_racks_nodes(void **state)
{
	struct fx *f = *state;
	json_t *in, *out = NULL, *detail = NULL;
	long before;

	in = J("{\"name\":\"r1\",\"height_u\":10}");
	assert_int_equal(rp_store_rack_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	assert_int_equal(json_integer_value(json_object_get(out, "version")), 1);
	json_decref(out);
	/* Duplicate: refused with a detail naming the field, no event. */
	before = events(f->st);
	assert_int_equal(rp_store_rack_create(f->st, in, "t", &out, &detail), RP_ERR_DUPLICATE);
	assert_string_equal(json_string_value(json_object_get(detail, "field")), "name");
	json_decref(detail);
	detail = NULL;
	assert_int_equal(events(f->st), before);
	json_decref(in);

	in = J("{\"name\":\"n1\",\"rack\":\"r1\",\"u_position\":2,\"u_height\":2,"
	       "\"macs\":[\"02:00:00:00:00:01\"],\"tags\":[\"b\",\"a\"],"
	       "\"bmc\":{\"driver\":\"ipmi\",\"password\":\"pw\"}}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	assert_string_equal(json_string_value(json_array_get(json_object_get(out, "tags"), 0)),
	                    "a");
	assert_true(json_is_true(json_object_get(json_object_get(out, "bmc"), "password_set")));
	assert_null(json_object_get(json_object_get(out, "bmc"), "password"));
	json_decref(out);
	json_decref(in);
	/* Overlap U3 is refused and names the occupant. */
	in = J("{\"name\":\"n2\",\"rack\":\"r1\",\"u_position\":3}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_SLOT_OCCUPIED);
	assert_string_equal(json_string_value(json_object_get(detail, "occupied_by")), "n1");
	json_decref(detail);
	detail = NULL;
	json_decref(in);
	/* U4 is free; a MAC already used is not. */
	in = J("{\"name\":\"n2\",\"rack\":\"r1\",\"u_position\":4,\"macs\":[\"02:00:00:00:00:01\"]"
	       "}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_DUPLICATE);
	json_decref(detail);
	detail = NULL;
	json_decref(in);
	in = J("{\"name\":\"n2\",\"rack\":\"r1\",\"u_position\":4}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	/* Moving n2 onto n1 fails; with a stale version fails earlier; the node is unchanged. */
	in = J("{\"u_position\":1,\"u_height\":2}");
	assert_int_equal(rp_store_node_update(f->st, "n2", in, 0, "t", &out, &detail),
	                 RP_ERR_SLOT_OCCUPIED);
	json_decref(detail);
	detail = NULL;
	assert_int_equal(rp_store_node_update(f->st, "n2", in, 7, "t", &out, &detail),
	                 RP_ERR_PRECONDITION_FAILED);
	json_decref(detail);
	detail = NULL;
	json_decref(in);
	assert_int_equal(rp_store_node_get(f->st, "n2", &out), RP_ERR_OK);
	assert_int_equal(json_integer_value(json_object_get(out, "u_position")), 4);
	assert_int_equal(json_integer_value(json_object_get(out, "version")), 1);
	json_decref(out);
	/* The rack cannot shrink below its nodes or be deleted while it holds them. */
	in = J("{\"height_u\":3}");
	assert_int_equal(rp_store_rack_update(f->st, "r1", in, 0, "t", &out, &detail),
	                 RP_ERR_CONFLICT);
	json_decref(detail);
	detail = NULL;
	json_decref(in);
	assert_int_equal(rp_store_rack_delete(f->st, "r1", 0, "t", &detail), RP_ERR_IN_USE);
	json_decref(detail);
	detail = NULL;
	/* Password kept across an unrelated BMC patch, cleared by an explicit null. */
	in = J("{\"bmc\":{\"address\":\"10.0.0.1\"}}");
	assert_int_equal(rp_store_node_update(f->st, "n1", in, 0, "t", &out, &detail), RP_ERR_OK);
	assert_true(json_is_true(json_object_get(json_object_get(out, "bmc"), "password_set")));
	json_decref(out);
	json_decref(in);
	in = J("{\"bmc\":{\"password\":null}}");
	assert_int_equal(rp_store_node_update(f->st, "n1", in, 0, "t", &out, &detail), RP_ERR_OK);
	assert_true(json_is_false(json_object_get(json_object_get(out, "bmc"), "password_set")));
	json_decref(out);
	json_decref(in);
	assert_int_equal(rp_store_node_delete(f->st, "n2", 0, "t", &detail), RP_ERR_OK);
	assert_int_equal(rp_store_node_get(f->st, "n2", &out), RP_ERR_NOT_FOUND);
}

static void
test_tokens(void **state)
{
	struct fx *f = *state;
	struct rp_token_info info;
	json_t *out = NULL, *detail = NULL;
	int created = -1;
	char id[64];

	assert_int_equal(rp_store_token_bootstrap(f->st, "h1", &created), RP_ERR_OK);
	assert_int_equal(created, 1);
	assert_int_equal(rp_store_token_bootstrap(f->st, "h2", &created), RP_ERR_OK);
	assert_int_equal(created, 0);
	assert_int_equal(rp_store_token_auth(f->st, "h1", &info), RP_ERR_OK);
	assert_string_equal(info.role, "admin");
	assert_int_equal(rp_store_token_auth(f->st, "h2", &info), RP_ERR_UNAUTHORIZED);
	assert_int_equal(rp_store_token_revoke(f->st, info.id, "t", &detail), RP_ERR_CONFLICT);
	json_decref(detail);
	detail = NULL;
	/* Expired tokens do not authenticate; an expired admin token may be revoked even when
	 * only one live admin token is left. */
	assert_int_equal(rp_store_token_create(f->st, "old", "admin", "h3", 1, "t", &out),
	                 RP_ERR_OK);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(out, "id")));
	json_decref(out);
	assert_int_equal(rp_store_token_auth(f->st, "h3", &info), RP_ERR_UNAUTHORIZED);
	assert_int_equal(rp_store_token_revoke(f->st, id, "t", &detail), RP_ERR_OK);
	assert_int_equal(rp_store_token_create(f->st, "ops", "operator", "h4", 0, "t", &out),
	                 RP_ERR_OK);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(out, "id")));
	json_decref(out);
	assert_int_equal(rp_store_token_revoke(f->st, id, "t", &detail), RP_ERR_OK);
	assert_int_equal(rp_store_token_auth(f->st, "h4", &info), RP_ERR_UNAUTHORIZED);
	assert_int_equal(rp_store_token_revoke(f->st, id, "t", &detail), RP_ERR_NOT_FOUND);
}

static void
test_import_all_or_nothing(void **state)
{
	struct fx *f = *state;
	json_t *m, *out = NULL, *detail = NULL;
	struct rp_page_req rq = {.limit = 10};
	struct rp_page pg = {0};
	long before = events(f->st);

	m = J("{\"racks\":[{\"name\":\"r1\"}],\"nodes\":[{\"name\":\"a\",\"rack\":\"r1\","
	      "\"u_position\":1},{\"name\":\"b\",\"rack\":\"r1\",\"u_position\":1},"
	      "{\"name\":\"c\",\"rack\":\"r2\"}]}");
	assert_int_equal(rp_store_import(f->st, m, 0, 0, "t", &out, &detail),
	                 RP_ERR_IMPORT_INVALID);
	assert_null(out);
	assert_int_equal(json_array_size(json_object_get(detail, "errors")), 2);
	json_decref(detail);
	detail = NULL;
	json_decref(m);
	assert_int_equal(rp_store_rack_list(f->st, &rq, &pg), RP_ERR_OK);
	assert_int_equal(json_array_size(pg.items), 0);
	json_decref(pg.items);
	assert_int_equal(events(f->st), before);
	/* create_racks: a rack named only by nodes appears. */
	m = J("{\"nodes\":[{\"name\":\"c\",\"rack\":\"r2\",\"_rack\":{\"site\":\"s\"}}]}");
	assert_int_equal(rp_store_import(f->st, m, 1, 0, "t", &out, &detail), RP_ERR_OK);
	assert_int_equal(json_integer_value(json_object_get(out, "racks_created")), 1);
	json_decref(out);
	json_decref(m);
	assert_int_equal(rp_store_rack_get(f->st, "r2", &out), RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(out, "site")), "s");
	json_decref(out);
}

static void
test_drift(void **state)
{
	struct fx *f = *state;
	json_t *in, *out = NULL, *detail = NULL;

	in = J("{\"name\":\"n\",\"node_class\":\"k\"}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	/* A baseline names the image each component is flashed from. */
	in = J("{\"name\":\"bmc_2.bin\",\"kind\":\"firmware\",\"file\":\"bmc_2.bin\",\"size\":1,"
	       "\"sha256\":\"00\"}");
	assert_int_equal(rp_store_image_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	in = J("{\"name\":\"b\",\"node_class\":\"k\",\"components\":{\"bmc\":{\"version\":\"2\"}}"
	       "}");
	assert_int_equal(rp_store_baseline_create(f->st, in, "t", &out, &detail),
	                 RP_ERR_INVALID_FIELD);
	json_decref(detail);
	detail = NULL;
	json_decref(in);
	in = J("{\"name\":\"b\",\"node_class\":\"k\",\"components\":{\"bmc\":{\"version\":\"2\","
	       "\"image\":\"bmc_2.bin\"},\"bios\":{\"version\":\"1\",\"image\":\"bmc_2.bin\","
	       "\"method\":\"redfish-push\"}}}");
	assert_int_equal(rp_store_baseline_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	in = J("[{\"component\":\"bmc\",\"version\":\"2\"},{\"component\":\"bios\",\"version\":"
	       "\"0\"}]");
	assert_int_equal(rp_store_node_firmware_set(f->st, "n", "test", in, "t"), RP_ERR_OK);
	json_decref(in);
	in = json_object();
	assert_int_equal(rp_store_firmware_drift(f->st, in, &out), RP_ERR_OK);
	assert_int_equal(json_integer_value(json_object_get(out, "nodes_checked")), 1);
	assert_int_equal(json_integer_value(json_object_get(out, "nodes_drifted")), 1);
	json_decref(out);
	json_object_set_new(in, "rack", json_string("nope"));
	assert_int_equal(rp_store_firmware_drift(f->st, in, &out), RP_ERR_BAD_QUERY);
	json_decref(in);
	/* Inventory set/get round trip. */
	in = J("{\"cpus\":{\"sockets\":2}}");
	assert_int_equal(rp_store_node_inventory_set(f->st, "n", "agent", in, "t"), RP_ERR_OK);
	json_decref(in);
	assert_int_equal(rp_store_node_inventory(f->st, "n", &out), RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(out, "source")), "agent");
	assert_int_equal(json_integer_value(json_object_get(
	                         json_object_get(json_object_get(out, "data"), "cpus"), "sockets")),
	                 2);
	json_decref(out);
	/* Firmware the agent sees joins the store under its own names (docs/firmware.md). */
	in = J("{\"system\":{\"bios\":{\"version\":\"2.1\"}},\"gpus\":{\"items\":[{\"index\":0,"
	       "\"vbios\":\"96.1\"},{\"index\":1,\"vbios\":\"96.2\"}]},\"infiniband\":{\"items\":"
	       "[{\"device\":\"mlx5_0\",\"fw_version\":\"28.39\",\"board_id\":\"MT_0000000838\"}]}"
	       "}");
	assert_int_equal(rp_store_node_inventory_set(f->st, "n", "agent", in, "t"), RP_ERR_OK);
	json_decref(in);
	assert_int_equal(rp_store_node_firmware(f->st, "n", &out), RP_ERR_OK);
	{
		const char *want[][3] = {
		        {"dmi.bios", "2.1", "agent"},    {"gpu0.vbios", "96.1", "agent"},
		        {"gpu.vbios", "mixed", "agent"}, {"hca.mlx5_0", "28.39", "agent"},
		        {"hca", "28.39", "agent"},       {"bmc", "2", "test"}};
		size_t i, k, found = 0;
		json_t *c;

		for (k = 0; k < sizeof want / sizeof want[0]; k++)
			json_array_foreach(json_object_get(out, "components"), i, c)
			{
				if (strcmp(json_string_value(json_object_get(c, "component")),
				           want[k][0]))
					continue;
				assert_string_equal(
				        json_string_value(json_object_get(c, "version")),
				        want[k][1]);
				assert_string_equal(json_string_value(json_object_get(c, "source")),
				                    want[k][2]);
				/* The PSID beside the HCA's version; none elsewhere. */
				if (!strcmp(want[k][0], "hca.mlx5_0"))
					assert_string_equal(
					        json_string_value(json_object_get(c, "board_id")),
					        "MT_0000000838");
				else
					assert_true(json_is_null(json_object_get(c, "board_id")));
				found++;
			}
		assert_int_equal(found, sizeof want / sizeof want[0]);
	}
	json_decref(out);
}

/* Writers on several threads, each with its own connection: all writes land. */
static void *
writer(void *arg)
{
	struct rp_store *st = ((void **)arg)[0];
	int base = (int)(intptr_t)((void **)arg)[1], i;
	char text[64];

	for (i = 0; i < 50; i++) {
		json_t *in, *out = NULL, *detail = NULL;

		snprintf(text, sizeof text, "{\"name\":\"w%d-%d\"}", base, i);
		in = json_loads(text, 0, NULL);
		if (rp_store_node_create(st, in, "t", &out, &detail) != RP_ERR_OK)
			return (void *)1;
		json_decref(in);
		json_decref(out);
	}
	return NULL;
}

static void
test_threads(void **state)
{
	struct fx *f = *state;
	pthread_t t[4];
	void *args[4][2], *res;
	struct rp_page_req rq = {.limit = 1000};
	struct rp_page pg = {0};
	int i;

	for (i = 0; i < 4; i++) {
		args[i][0] = f->st;
		args[i][1] = (void *)(intptr_t)i;
		pthread_create(&t[i], NULL, writer, args[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], &res);
		assert_null(res);
	}
	assert_int_equal(rp_store_node_list(f->st, &rq, &pg), RP_ERR_OK);
	assert_int_equal(json_array_size(pg.items), 200);
	json_decref(pg.items);
}

/* Group commit. The store's flushes of the WAL file go through this wrapper (the test links
 * with --wrap=fdatasync; SQLite's own syncs do not): it counts them, notes the size it
 * flushed, and can act as a slow disk. */
static int flushes, flush_delay_us;
static off_t flushed_size;

int __real_fdatasync(int fd);
int __wrap_fdatasync(int fd);

int
__wrap_fdatasync(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0)
		__atomic_store_n(&flushed_size, st.st_size, __ATOMIC_RELEASE);
	if (flush_delay_us)
		usleep((useconds_t)flush_delay_us);
	__atomic_add_fetch(&flushes, 1, __ATOMIC_ACQ_REL);
	return __real_fdatasync(fd);
}

static void
test_group_commit(void **state)
{
	struct fx *f = *state;
	pthread_t t[8];
	void *args[8][2], *res;
	struct rp_page_req rq = {.limit = 1000};
	struct rp_page pg = {0};
	json_t *in = J("{\"name\":\"gc-one\"}"), *out = NULL, *detail = NULL;
	char wal[160];
	struct stat st;
	int i, before;

	/* One writer: the acknowledged write was flushed, and after its frames were written
	 * (the flush saw the WAL as it is now). */
	before = flushes;
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	assert_true(flushes > before);
	snprintf(wal, sizeof wal, "%s-wal", f->path);
	assert_int_equal(stat(wal, &st), 0);
	assert_int_equal((long long)flushed_size, (long long)st.st_size);
	json_decref(in);
	json_decref(out);

	/* A read flushes nothing. */
	before = flushes;
	assert_int_equal(rp_store_node_list(f->st, &rq, &pg), RP_ERR_OK);
	json_decref(pg.items);
	assert_int_equal(flushes, before);

	/* Eight writers on a disk that takes 2 ms per flush: every write lands, and commits
	 * share flushes (one per commit would be 400). */
	flush_delay_us = 2000;
	before = flushes;
	for (i = 0; i < 8; i++) {
		args[i][0] = f->st;
		args[i][1] = (void *)(intptr_t)(10 + i);
		pthread_create(&t[i], NULL, writer, args[i]);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], &res);
		assert_null(res);
	}
	flush_delay_us = 0;
	print_message("group commit: 400 commits, %d flushes\n", flushes - before);
	assert_true(flushes - before < 200);
	memset(&pg, 0, sizeof pg);
	assert_int_equal(rp_store_node_list(f->st, &rq, &pg), RP_ERR_OK);
	assert_int_equal(json_array_size(pg.items), 401);
	json_decref(pg.items);
}

static void
test_newer_schema(void **state)
{
	struct fx *f = *state;
	struct rp_store *st = NULL;
	char sql[256], why[256];

	snprintf(sql, sizeof sql,
	         dbfx_pg() ? "UPDATE rp_schema_version SET version = %d" : "PRAGMA user_version=%d",
	         rp_store_schema_latest() + 1);
	assert_int_equal(dbfx_sql(f->path, sql, NULL, 0), 0);
	assert_int_equal(rp_store_open(f->path, &st, why, sizeof why), RP_ERR_CONFLICT);
	assert_non_null(strstr(why, "newer"));
	assert_null(st);
}

/* Bootstrap tokens: expired, revoked, used ones open nothing, and a refused registration
 * changes nothing. */
static void
test_bootstrap_tokens(void **state)
{
	struct fx *f = *state;
	static const char *key =
	        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEj+0zhiQEJuyA07cB1MguetKm2VQWyaex2sRJ6gWDus "
	        "x";
	struct rp_sshkey hk;
	struct rp_agent_reg reg = {0};
	struct rp_token_info info;
	json_t *out = NULL, *detail = NULL, *body;
	long before;

	assert_int_equal(rp_sshkey_parse(key, &hk), 0);
	body = J("{\"name\":\"b1\",\"macs\":[\"02:00:00:00:00:b1\"]}");
	assert_int_equal(rp_store_node_create(f->st, body, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(body);
	body = J("{\"format\":1,\"hostname\":\"h\",\"boot_id\":\"x\",\"macs\":[\"02:00:00:00:00:"
	         "b1\"]}");
	reg.body = body;
	reg.host_key = &hk;
	reg.token_hash = "aaaa";
	/* Expired a second ago. */
	assert_int_equal(rp_store_bootstrap_create(f->st, "b1", "h-expired",
	                                           rp_time_now_ms() - 1000, "t", &out),
	                 RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(out, "state")), "expired");
	json_decref(out);
	before = events(f->st);
	reg.bootstrap_hash = "h-expired";
	assert_int_equal(rp_store_agent_register(f->st, &reg, &out, &detail), RP_ERR_UNAUTHORIZED);
	assert_non_null(strstr(json_string_value(json_object_get(detail, "reason")), "expired"));
	json_decref(detail);
	detail = NULL;
	assert_int_equal(events(f->st), before);
	assert_int_equal(rp_store_agent_auth(f->st, "aaaa", &info), RP_ERR_UNAUTHORIZED);
	/* Unknown. */
	reg.bootstrap_hash = "h-unknown";
	assert_int_equal(rp_store_agent_register(f->st, &reg, &out, &detail), RP_ERR_UNAUTHORIZED);
	json_decref(detail);
	detail = NULL;
	/* Revoked. */
	assert_int_equal(rp_store_bootstrap_create(f->st, NULL, "h-revoked",
	                                           rp_time_now_ms() + 60000, "t", &out),
	                 RP_ERR_OK);
	assert_int_equal(rp_store_bootstrap_revoke(
	                         f->st, json_string_value(json_object_get(out, "id")), "t"),
	                 RP_ERR_OK);
	json_decref(out);
	reg.bootstrap_hash = "h-revoked";
	assert_int_equal(rp_store_agent_register(f->st, &reg, &out, &detail), RP_ERR_UNAUTHORIZED);
	json_decref(detail);
	detail = NULL;
	/* A live one works once. */
	assert_int_equal(rp_store_bootstrap_create(f->st, "b1", "h-live", rp_time_now_ms() + 60000,
	                                           "t", &out),
	                 RP_ERR_OK);
	json_decref(out);
	reg.bootstrap_hash = "h-live";
	assert_int_equal(rp_store_agent_register(f->st, &reg, &out, &detail), RP_ERR_OK);
	assert_string_equal(
	        json_string_value(json_object_get(json_object_get(out, "node"), "name")), "b1");
	json_decref(out);
	assert_int_equal(rp_store_agent_auth(f->st, "aaaa", &info), RP_ERR_OK);
	assert_string_equal(info.role, "agent");
	assert_string_equal(info.name, "b1");
	reg.token_hash = "bbbb";
	assert_int_equal(rp_store_agent_register(f->st, &reg, &out, &detail), RP_ERR_UNAUTHORIZED);
	assert_non_null(
	        strstr(json_string_value(json_object_get(detail, "reason")), "already used"));
	json_decref(detail);
	/* The first registration's token still works, the refused one's never did. */
	assert_int_equal(rp_store_agent_auth(f->st, "aaaa", &info), RP_ERR_OK);
	assert_int_equal(rp_store_agent_auth(f->st, "bbbb", &info), RP_ERR_UNAUTHORIZED);
	json_decref(body);
}

/* The not_before of job id (ms), read back through the store's job object. */
static int64_t
job_not_before(struct fx *f, const char *id)
{
	json_t *j = NULL;
	const char *t;
	int64_t ms = 0;

	assert_int_equal(rp_store_job_get(f->st, id, &j), RP_ERR_OK);
	t = json_string_value(json_object_get(j, "not_before"));
	assert_non_null(t);
	assert_int_equal(rp_time_parse(t, &ms), 0);
	json_decref(j);
	return ms;
}

/* Register an agent for node with a bootstrap token made for it (hash names both), the
 * agent reporting macs (a JSON array's text). */
static void
agent_register(struct fx *f, const char *node, const char *hash, const char *macs)
{
	static const char *key =
	        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEj+0zhiQEJuyA07cB1MguetKm2VQWyaex2sRJ6gWDus "
	        "x";
	struct rp_sshkey hk;
	struct rp_agent_reg reg = {0};
	json_t *out = NULL, *detail = NULL;
	char bootstrap[64];

	assert_int_equal(rp_sshkey_parse(key, &hk), 0);
	snprintf(bootstrap, sizeof bootstrap, "h-%s", hash);
	assert_int_equal(rp_store_bootstrap_create(f->st, node, bootstrap, rp_time_now_ms() + 60000,
	                                           "t", &out),
	                 RP_ERR_OK);
	json_decref(out);
	reg.body = json_pack("{s:i, s:s, s:s, s:o}", "format", 1, "hostname", "h", "boot_id", "x",
	                     "macs", J(macs));
	reg.host_key = &hk;
	reg.token_hash = hash;
	reg.bootstrap_hash = bootstrap;
	assert_int_equal(rp_store_agent_register(f->st, &reg, &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(reg.body);
}

/* A job waiting for its node's agent (a retry with wait and error_code "waiting") is due as
 * soon as that agent registers; a retry backing off after a BMC error is not moved. */
static void
test_register_wakes_waiting_job(void **state)
{
	struct fx *f = *state;
	json_t *out = NULL, *detail = NULL, *body, *claimed = NULL, *outcomes;
	char ids[2][64];
	int64_t far = rp_time_now_ms() + 3600 * 1000, before;
	size_t i;

	body = J("{\"name\":\"w1\",\"macs\":[\"02:00:00:00:00:c1\"],"
	         "\"bmc\":{\"driver\":\"fake\",\"address\":\"fake\",\"username\":\"u\","
	         "\"password\":\"p\"}}");
	assert_int_equal(rp_store_node_create(f->st, body, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(body);
	for (i = 0; i < 2; i++) {
		body = J("{\"type\":\"power\",\"params\":{\"action\":\"on\"},\"mutating\":false,"
		         "\"max_attempts\":4}");
		assert_int_equal(rp_store_job_create(f->st, "w1", body, "t", &out, &detail),
		                 RP_ERR_OK);
		snprintf(ids[i], sizeof ids[i], "%s",
		         json_string_value(json_object_get(out, "id")));
		json_decref(out);
		json_decref(body);
	}
	assert_int_equal(rp_store_jobs_claim(f->st, "test", 0, 8, 60000, &claimed), RP_ERR_OK);
	assert_int_equal(json_array_size(claimed), 2);
	outcomes = json_array();
	for (i = 0; i < 2; i++) {
		json_t *c = json_array_get(claimed, i);
		int waiting = !strcmp(json_string_value(json_object_get(c, "uuid")), ids[0]);

		json_array_append_new(
		        outcomes, json_pack("{s:O, s:s, s:b, s:I, s:s, s:s}", "id",
		                            json_object_get(c, "id"), "state", "retry", "wait",
		                            waiting, "not_before", (json_int_t)far, "error_code",
		                            waiting ? "waiting" : "bmc_busy", "error", "later"));
	}
	json_decref(claimed);
	assert_int_equal(rp_store_jobs_finish(f->st, "test", outcomes, 3), RP_ERR_OK);
	json_decref(outcomes);
	assert_true(job_not_before(f, ids[0]) >= far - 1000);
	assert_true(job_not_before(f, ids[1]) >= far - 1000);

	before = rp_time_now_ms();
	agent_register(f, "w1", "wake", "[\"02:00:00:00:00:c1\"]");
	assert_true(job_not_before(f, ids[0]) <= rp_time_now_ms());
	assert_true(job_not_before(f, ids[0]) >= before - 1000);
	assert_true(job_not_before(f, ids[1]) >= far - 1000);
}

/* 1 when needle occurs in any of the database's files (SQLite: main, WAL, shared memory;
 * PostgreSQL: every file of the test cluster, its WAL included, after a checkpoint). */
static int
on_disk(struct fx *f, const char *needle)
{
	static const char *const suffix[] = {"", "-wal", "-shm", NULL};
	char path[160], *buf;
	size_t n = strlen(needle), len, i;
	int j, found = 0;
	FILE *fp;

	if (dbfx_pg()) {
		char cmd[600];

		assert_int_equal(dbfx_sql(f->path, "CHECKPOINT", NULL, 0), 0);
		snprintf(cmd, sizeof cmd, "find %s/data -type f -exec cat {} + | grep -aqF '%s'",
		         dbfx_pg(), needle);
		return system(cmd) == 0;
	}
	for (j = 0; suffix[j]; j++) {
		snprintf(path, sizeof path, "%s%s", f->path, suffix[j]);
		if ((fp = fopen(path, "rb")) == NULL)
			continue;
		buf = malloc(64 << 20);
		assert_non_null(buf);
		len = fread(buf, 1, 64 << 20, fp);
		fclose(fp);
		for (i = 0; i + n <= len && !found; i++)
			found = memcmp(buf + i, needle, n) == 0;
		free(buf);
	}
	return found;
}

/* The password the store hands to a BMC driver for node name (NULL when none). */
static char *
driver_password(struct fx *f, const char *name)
{
	struct rp_power_target *list = NULL;
	char *pw = NULL;
	size_t i, n = 0;

	assert_int_equal(rp_store_power_targets(f->st, &list, &n), RP_ERR_OK);
	for (i = 0; i < n; i++) {
		if (!strcmp(list[i].name, name) && list[i].bmc.password) {
			assert_int_equal(strlen(list[i].bmc.password), list[i].bmc.password_len);
			pw = strdup(list[i].bmc.password);
		}
	}
	rp_store_power_targets_free(list, n);
	return pw;
}

static void
add_bmc_node(struct fx *f, const char *name, const char *pw)
{
	char body[400];
	json_t *in, *out = NULL, *detail = NULL;

	snprintf(body, sizeof body,
	         "{\"name\":\"%s\",\"bmc\":{\"driver\":\"ipmi\",\"address\":\"10.1.1.1\","
	         "\"username\":\"admin\",\"password\":\"%s\"}}",
	         name, pw);
	in = J(body);
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(in);
	json_decref(out);
}

/* A BMC password is in no database file in any form the key file is not needed to read,
 * yet the driver gets it back. */
static void
test_secrets_sealed(void **state)
{
	struct fx *f = *state;
	char *pw;

	add_bmc_node(f, "s1", "Sekret-4711-Tango");
	assert_false(on_disk(f, "Sekret-4711-Tango"));
	pw = driver_password(f, "s1");
	assert_non_null(pw);
	assert_string_equal(pw, "Sekret-4711-Tango");
	free(pw);
	/* Without its key the store cannot open (or write) one. */
	rp_store_set_secrets(f->st, NULL);
	assert_null(driver_password(f, "s1"));
	rp_store_set_secrets(f->st, f->sec);
}

/* A database an older version wrote (plaintext in bmcs.password) is sealed at the first
 * start, in one go, and the plaintext leaves every file. */
static void
test_secrets_legacy(void **state)
{
	struct fx *f = *state;
	char cmd[400], why[300];
	char *pw;

	add_bmc_node(f, "l1", "placeholder");
	add_bmc_node(f, "l2", "placeholder");
	snprintf(cmd, sizeof cmd,
	         "sqlite3 %s \"UPDATE bmcs SET password = 'Legacy-Clear-' || node_id || '-xyzzy', "
	         "password_sealed = NULL\"",
	         f->path);
	assert_int_equal(system(cmd), 0);
	assert_true(on_disk(f, "Legacy-Clear-"));
	assert_int_equal(rp_store_secrets_prepare(f->st, 0, why, sizeof why), RP_ERR_OK);
	assert_false(on_disk(f, "Legacy-Clear-"));
	pw = driver_password(f, "l2");
	assert_non_null(strstr(pw, "Legacy-Clear-"));
	free(pw);
	/* A second start finds nothing to do. */
	assert_int_equal(rp_store_secrets_prepare(f->st, 0, why, sizeof why), RP_ERR_OK);
}

/* Another key file: the start is refused, naming the count and the keys; --forget-secrets
 * clears what does not open, with an event each, and keeps the rest. */
static void
test_secrets_wrong_key(void **state)
{
	struct fx *f = *state;
	struct rp_secrets *other = NULL;
	char path[160], why[600];
	char *pw;

	add_bmc_node(f, "w1", "first-pw");
	snprintf(path, sizeof path, "%s/other.key", f->dir);
	assert_int_equal(rp_secrets_load(path, 1, &other, why, sizeof why), 0);
	rp_store_set_secrets(f->st, other);
	add_bmc_node(f, "w2", "second-pw");
	assert_int_equal(rp_store_secrets_prepare(f->st, 0, why, sizeof why), RP_ERR_CONFLICT);
	assert_non_null(strstr(why, "1 of 2 BMC passwords"));
	assert_non_null(strstr(why, rp_secrets_key_id(f->sec)));
	assert_non_null(strstr(why, "--forget-secrets"));
	assert_int_equal(rp_store_secrets_prepare(f->st, 1, why, sizeof why), RP_ERR_OK);
	assert_null(driver_password(f, "w1"));
	pw = driver_password(f, "w2");
	assert_string_equal(pw, "second-pw");
	free(pw);
	assert_int_equal(rp_store_secrets_prepare(f->st, 0, why, sizeof why), RP_ERR_OK);
	rp_store_set_secrets(f->st, f->sec);
	rp_secrets_free(other);
}

/* A rotation re-seals everything under the new key; an interrupted one is resolved by the
 * next start whichever side of the transaction it died on. */
static void
test_secrets_rotate(void **state)
{
	struct fx *f = *state;
	struct rp_secrets *again = NULL;
	char why[300], old[RP_SECRET_KEY_ID_BUF], next[RP_SECRET_KEY_ID_BUF];
	int n = 0;
	char *pw;

	add_bmc_node(f, "r1", "rot-one");
	add_bmc_node(f, "r2", "rot-two");
	snprintf(old, sizeof old, "%s", rp_secrets_key_id(f->sec));
	/* Died after the new key was written, before the transaction: the old key stays. */
	assert_int_equal(rp_secrets_rotate_begin(f->sec, why, sizeof why), 0);
	assert_int_equal(rp_secrets_load(f->key, 0, &again, why, sizeof why), 0);
	rp_store_set_secrets(f->st, again);
	assert_int_equal(rp_store_secrets_prepare(f->st, 0, why, sizeof why), RP_ERR_OK);
	assert_string_equal(rp_secrets_key_id(again), old);
	assert_null(rp_secrets_next_key_id(again));
	pw = driver_password(f, "r1");
	assert_string_equal(pw, "rot-one");
	free(pw);
	rp_secrets_free(again);
	again = NULL;
	/* Died after the commit, before the rename: the new key is installed. */
	rp_secrets_free(f->sec);
	assert_int_equal(rp_secrets_load(f->key, 0, &f->sec, why, sizeof why), 0);
	rp_store_set_secrets(f->st, f->sec);
	assert_int_equal(rp_secrets_rotate_begin(f->sec, why, sizeof why), 0);
	snprintf(next, sizeof next, "%s", rp_secrets_next_key_id(f->sec));
	assert_int_equal(rp_store_secrets_reseal(f->st, &n, why, sizeof why), RP_ERR_OK);
	assert_int_equal(n, 2);
	assert_int_equal(rp_secrets_load(f->key, 0, &again, why, sizeof why), 0);
	rp_store_set_secrets(f->st, again);
	assert_int_equal(rp_store_secrets_prepare(f->st, 0, why, sizeof why), RP_ERR_OK);
	assert_string_equal(rp_secrets_key_id(again), next);
	pw = driver_password(f, "r2");
	assert_string_equal(pw, "rot-two");
	free(pw);
	rp_secrets_free(f->sec);
	f->sec = again;
}

/* The secret of a webhook due for delivery, as the deliverer gets it (malloc'd), or NULL. */
static char *
webhook_secret(struct fx *f)
{
	json_t *due = NULL;
	char *secret = NULL;

	if (rp_store_webhook_due(f->st, INT64_MAX / 2, 16, &due) != RP_ERR_OK)
		return NULL;
	if (json_array_size(due) > 0)
		secret = strdup(
		        json_string_value(json_object_get(json_array_get(due, 0), "secret")));
	rp_store_webhook_wipe(due);
	return secret;
}

/* A webhook secret is sealed like a BMC password: in no file in clear, opened for the
 * deliverer, sealed again by a rotation, named when the key does not fit, and cleared (the
 * webhook then queues and sends nothing) by --forget-secrets. Its own events never queue a
 * delivery to it; a rack's do. */
static void
test_secrets_webhook(void **state)
{
	struct fx *f = *state;
	struct rp_secrets *other = NULL;
	json_t *in, *out = NULL, *detail = NULL, *due = NULL;
	char why[600], path[160], *secret;
	int n = 0;

	in = J("{\"name\":\"hook\",\"url\":\"http://127.0.0.1:9/x\",\"events\":[\"*\"],"
	       "\"secret\":\"Hook-Secret-0815-Papa\"}");
	assert_int_equal(rp_store_webhook_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(in);
	assert_true(json_is_true(json_object_get(out, "secret_set")));
	assert_null(json_object_get(out, "secret"));
	json_decref(out);
	assert_false(on_disk(f, "Hook-Secret-0815-Papa"));
	/* Its own creation is not for it. */
	assert_int_equal(rp_store_webhook_due(f->st, INT64_MAX / 2, 16, &due), RP_ERR_OK);
	assert_int_equal(json_array_size(due), 0);
	rp_store_webhook_wipe(due);
	in = J("{\"name\":\"hook-r1\"}");
	assert_int_equal(rp_store_rack_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(in);
	json_decref(out);
	secret = webhook_secret(f);
	assert_non_null(secret);
	assert_string_equal(secret, "Hook-Secret-0815-Papa");
	free(secret);
	/* A rotation seals it (and a BMC password) again; it still opens. */
	add_bmc_node(f, "hb1", "bmc-pw");
	assert_int_equal(rp_secrets_rotate_begin(f->sec, why, sizeof why), 0);
	assert_int_equal(rp_store_secrets_reseal(f->st, &n, why, sizeof why), RP_ERR_OK);
	assert_int_equal(n, 2);
	assert_int_equal(rp_secrets_rotate_finish(f->sec, why, sizeof why), 0);
	secret = webhook_secret(f);
	assert_string_equal(secret, "Hook-Secret-0815-Papa");
	free(secret);
	assert_false(on_disk(f, "Hook-Secret-0815-Papa"));
	/* Another key: refused, naming it; forgotten: cleared, with its event. */
	snprintf(path, sizeof path, "%s/other.key", f->dir);
	assert_int_equal(rp_secrets_load(path, 1, &other, why, sizeof why), 0);
	rp_store_set_secrets(f->st, other);
	assert_int_equal(rp_store_secrets_prepare(f->st, 0, why, sizeof why), RP_ERR_CONFLICT);
	assert_non_null(strstr(why, "1 of 1 BMC passwords and 1 of 1 webhook secrets"));
	assert_int_equal(rp_store_secrets_prepare(f->st, 1, why, sizeof why), RP_ERR_OK);
	assert_int_equal(rp_store_webhook_get(f->st, "hook", &out), RP_ERR_OK);
	assert_true(json_is_false(json_object_get(out, "secret_set")));
	json_decref(out);
	assert_null(webhook_secret(f));
	assert_int_equal(rp_store_secrets_prepare(f->st, 0, why, sizeof why), RP_ERR_OK);
	rp_store_set_secrets(f->st, f->sec);
	rp_secrets_free(other);
}

/* Rows of bootstrap_tokens matching a WHERE clause (through the database's own client). */
static long
token_rows(struct fx *f, const char *where)
{
	char sql[600], out[64] = "";

	snprintf(sql, sizeof sql, "SELECT count(*) FROM bootstrap_tokens WHERE %s", where);
	assert_int_equal(dbfx_sql(f->path, sql, out, sizeof out), 0);
	return atol(out);
}

/* A boot script's token: the same one while half its life is left, a new one after (the old
 * one not revoked), a new one once the key that derived it is rotated, and long-dead rows
 * pruned. */
static void
test_boot_token_reuse_prune(void **state)
{
	struct fx *f = *state;
	struct rp_boot_req br = {.mac = "02:00:00:00:0b:01",
	                         .source = "10.0.0.1",
	                         .ttl_ms = 900000,
	                         .max_discovery = 10};
	char t1[RP_TOKEN_BUF], t2[RP_TOKEN_BUF], why[200], cmd[600];

	assert_int_equal(rp_store_boot_token(f->st, &br, t1, why, sizeof why), RP_ERR_OK);
	assert_int_equal(strncmp(t1, "rpb_", 4), 0);
	assert_int_equal(rp_store_boot_token(f->st, &br, t2, why, sizeof why), RP_ERR_OK);
	assert_string_equal(t1, t2);
	assert_int_equal(token_rows(f, "TRUE"), 1);
	/* Less than half its life left: a fresh one, and the first still opens a registration. */
	assert_int_equal(dbfx_sql(f->path,
	                          "UPDATE bootstrap_tokens SET expires_at = expires_at - 600000",
	                          NULL, 0),
	                 0);
	assert_int_equal(rp_store_boot_token(f->st, &br, t2, why, sizeof why), RP_ERR_OK);
	assert_string_not_equal(t1, t2);
	assert_int_equal(token_rows(f, "revoked_at IS NULL AND used_at IS NULL"), 2);
	/* Another key derives other secrets: the stored hash no longer matches, a new token. */
	assert_int_equal(rp_secrets_rotate_begin(f->sec, why, sizeof why), 0);
	assert_int_equal(rp_secrets_rotate_finish(f->sec, why, sizeof why), 0);
	assert_int_equal(rp_store_boot_token(f->st, &br, t1, why, sizeof why), RP_ERR_OK);
	assert_string_not_equal(t1, t2);
	assert_int_equal(token_rows(f, "TRUE"), 3);
	/* Expired more than a day ago (used or not): gone at the next boot-token call. */
	snprintf(cmd, sizeof cmd,
	         "UPDATE bootstrap_tokens SET used_at = %lld, expires_at = %lld WHERE hash != "
	         "(SELECT hash FROM bootstrap_tokens ORDER BY id DESC LIMIT 1)",
	         (long long)time(NULL) * 1000 - 3 * 86400000LL,
	         (long long)time(NULL) * 1000 - 2 * 86400000LL);
	assert_int_equal(dbfx_sql(f->path, cmd, NULL, 0), 0);
	assert_int_equal(rp_store_boot_token(f->st, &br, t2, why, sizeof why), RP_ERR_OK);
	assert_string_equal(t1, t2);
	assert_int_equal(token_rows(f, "TRUE"), 1);
	/* Without a key there is no token to hand out. */
	rp_store_set_secrets(f->st, NULL);
	br.mac = "02:00:00:00:0b:02";
	assert_int_equal(rp_store_boot_token(f->st, &br, t2, why, sizeof why), RP_ERR_INTERNAL);
	rp_store_set_secrets(f->st, f->sec);
}

/* The statement cache (store/internal.h) is white-box here: call sites are slots. */
#include "store/internal.h"

#define MANY_SLOTS 1000 /* the old fixed table held 320 */

static int many_slots[MANY_SLOTS];

/* Prepare, run and map every one of MANY_SLOTS distinct statements on this thread's
 * connection. */
static void
many_statements(struct rp_store *st)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	char sql[64];
	int i;

	assert_non_null(c);
	for (i = 0; i < MANY_SLOTS; i++) {
		struct stmt *s;
		json_t *row;

		snprintf(sql, sizeof sql, "SELECT %d AS v, 'x%d' AS \"k.w\"", i, i);
		s = store_prep(c, &many_slots[i], sql);
		assert_non_null(s);
		assert_int_equal(sql_step(s), SQL_ROW);
		row = store_row(c, s);
		assert_int_equal(json_integer_value(json_object_get(row, "v")), i);
		snprintf(sql, sizeof sql, "x%d", i);
		assert_string_equal(
		        json_string_value(json_object_get(json_object_get(row, "k"), "w")), sql);
		json_decref(row);
		sql_reset(s);
	}
}

static void *
many_statements_thread(void *arg)
{
	many_statements(arg);
	return NULL;
}

static void
test_stmt_cache_grows(void **state)
{
	struct fx *f = *state;
	json_t *in = json_pack("{s:s}", "name", "grown"), *out = NULL, *detail = NULL;
	pthread_t t;

	many_statements(f->st);
	/* Cached now: the same slots again, then ordinary store calls on top of them. */
	many_statements(f->st);
	assert_int_equal(rp_store_ping(f->st), RP_ERR_OK);
	assert_int_equal(rp_store_rack_create(f->st, in, "test", &out, &detail), RP_ERR_OK);
	json_decref(in);
	json_decref(out);
	/* A connection opened after the table grew gets arrays that fit every slot. */
	assert_int_equal(pthread_create(&t, NULL, many_statements_thread, f->st), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* The pool (db_connections): however many threads call, no more connections than the cap
 * are opened; a call that finds them all held waits for one to come back; a writer gets one
 * beyond the cap (it must never wait behind readers that wait for its turn); and no
 * connection is handed out outside a STORE_HOLD scope. */
struct pool_arg {
	struct rp_store *st;
	int write, done;
	int calls; /* a reader's store calls; 0: 200 */
	enum rp_err e;
};

static void *
pool_caller(void *arg)
{
	struct pool_arg *a = arg;
	json_t *out = NULL, *detail = NULL, *in;
	struct rp_page_req rq = {.limit = 10};
	struct rp_page pg = {0};
	int i;

	if (a->write) {
		for (i = 0; i < (a->calls ? a->calls : 1) && a->e == RP_ERR_OK; i++) {
			char name[32];

			snprintf(name, sizeof name, "pool-%d-%d", a->write, i);
			in = json_pack("{s:s}", "name", name);
			a->e = rp_store_rack_create(a->st, in, "test", &out, &detail);
			json_decref(in);
			json_decref(out);
			json_decref(detail);
			out = detail = NULL;
		}
	} else {
		/* Store calls, a ping and a page in turn. */
		for (i = 0; i < (a->calls ? a->calls : 200) && a->e == RP_ERR_OK; i++) {
			if (i % 2 == 0)
				a->e = rp_store_ping(a->st);
			else if ((a->e = rp_store_node_list(a->st, &rq, &pg)) == RP_ERR_OK)
				json_decref(pg.items);
		}
	}
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void
test_pool_cap(void **state)
{
	struct fx *f = *state;
	struct pool_arg a[16];
	pthread_t t[16];
	struct conn *c;
	int i, open, busy, structs = 0;

	/* Eight readers and eight writers (20 racks each) on two connections. */
	rp_store_set_connections(f->st, 2);
	memset(a, 0, sizeof a);
	for (i = 0; i < 16; i++) {
		a[i].st = f->st;
		if (i % 2) {
			a[i].write = i;
			a[i].calls = 20;
		}
		assert_int_equal(pthread_create(&t[i], NULL, pool_caller, &a[i]), 0);
	}
	for (i = 0; i < 16; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(a[i].e, RP_ERR_OK);
	}
	/* The pool's two at most, and the write turn's own. */
	rp_store_connections(f->st, &open, &busy);
	assert_in_range(open, 1, 3);
	assert_int_equal(busy, 0);
	for (c = f->st->all; c; c = c->next)
		structs++;
	assert_in_range(structs, 1, 2);
	/* A cap lowered: what is past it closes as it comes back (its struct kept, marked). */
	rp_store_set_connections(f->st, 1);
	a[0].e = RP_ERR_OK;
	a[0].calls = 10;
	a[1].e = RP_ERR_OK;
	a[1].calls = 10;
	a[1].write = 101; /* racks of new names */
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, pool_caller, &a[i]), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(a[i].e, RP_ERR_OK);
	}
	for (c = f->st->all, open = 0; c; c = c->next)
		open += c->busy != 2;
	assert_int_equal(open, 1);
	/* Outside a scope: nothing (the bug is logged). */
	assert_null(store_conn(f->st));
}

static void
test_pool_wait(void **state)
{
	struct fx *f = *state;
	struct pool_arg r = {.st = f->st, .calls = 1}, w = {.st = f->st, .write = 1};
	pthread_t tr, tw;
	int open, busy;
	int64_t t0;

	rp_store_set_connections(f->st, 1);
	{
		STORE_HOLD(f->st);
		struct conn *c = store_conn(f->st);

		assert_non_null(c);
		assert_ptr_equal(store_conn(f->st), c); /* nested asks share it */
		rp_store_connections(f->st, &open, &busy);
		assert_int_equal(open, 1);
		assert_int_equal(busy, 1);
		/* A reader waits while this scope holds the one connection... */
		t0 = rp_time_now_ms();
		assert_int_equal(pthread_create(&tr, NULL, pool_caller, &r), 0);
		usleep(300000);
		assert_int_equal(__atomic_load_n(&r.done, __ATOMIC_ACQUIRE), 0);
		/* ...a writer takes the write turn's own connection (it must never wait behind
		 * connections held by threads that wait for the turn) and is done meanwhile; that
		 * one is the turn's alone, so the reader still waits. */
		assert_int_equal(pthread_create(&tw, NULL, pool_caller, &w), 0);
		assert_int_equal(pthread_join(tw, NULL), 0);
		assert_int_equal(w.e, RP_ERR_OK);
		rp_store_connections(f->st, &open, &busy);
		assert_int_equal(open, 2);
		assert_int_equal(busy, 1);
		usleep(100000);
		assert_int_equal(__atomic_load_n(&r.done, __ATOMIC_ACQUIRE), 0);
	}
	/* The scope's end gives the connection to the reader. */
	assert_int_equal(pthread_join(tr, NULL), 0);
	assert_int_equal(r.e, RP_ERR_OK);
	assert_true(rp_time_now_ms() - t0 >= 400);
	rp_store_connections(f->st, &open, &busy);
	assert_int_equal(open, 2); /* the one, and the turn's */
	assert_int_equal(busy, 0);
}

/* Claims of several servers run at once on PostgreSQL: a claim passes over the job another
 * claim holds locked (FOR UPDATE SKIP LOCKED) instead of waiting for it, and takes it once
 * that claim has ended without it. (SQLite has one writer: its claim is an ordinary write
 * transaction and only the claim itself is checked there.) */
struct lock_arg {
	struct rp_store *st;
	int64_t job;
	int locked, release;
};

static void *
lock_holder(void *arg)
{
	struct lock_arg *a = arg;
	STORE_HOLD(a->st);
	struct conn *c = store_conn(a->st);
	char sql[128];

	/* Another server's claim, caught between its lock and its commit: the same shared lock
	 * a claim takes, and the row lock its statement would take. */
	snprintf(sql, sizeof sql, "SELECT id FROM jobs WHERE id = %lld FOR UPDATE",
	         (long long)a->job);
	if (c == NULL || c->drv->begin(c->db, TXN_CLAIM) != SQL_OK ||
	    c->drv->exec(c->db, sql, NULL, 0) != SQL_OK)
		a->locked = -1;
	else
		__atomic_store_n(&a->locked, 1, __ATOMIC_RELEASE);
	while (a->locked == 1 && !__atomic_load_n(&a->release, __ATOMIC_ACQUIRE))
		usleep(10000);
	if (c)
		c->drv->rollback(c->db);
	return NULL;
}

struct take_arg {
	struct rp_store *st;
	struct rp_job_claim *cl;
	enum rp_err e;
	int done;
};

static void *
taker(void *arg)
{
	struct take_arg *a = arg;

	a->e = rp_store_jobs_take(a->st, "test", RP_JOB_LANE_BMC, 8, 60000, &a->cl);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void
test_claim_skip_locked(void **state)
{
	struct fx *f = *state;
	json_t *out = NULL, *detail = NULL, *body;
	int64_t ids[3] = {0};
	struct lock_arg la = {.st = f->st};
	struct take_arg ta = {.st = f->st};
	struct rp_job_claim *cl;
	pthread_t tl, tt;
	char name[16];
	int i, n, waited;

	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof name, "sk%d", i);
		body = json_pack("{s:s,s:{s:s,s:s,s:s,s:s}}", "name", name, "bmc", "driver", "fake",
		                 "address", "fake", "username", "u", "password", "p");
		assert_int_equal(rp_store_node_create(f->st, body, "t", &out, &detail), RP_ERR_OK);
		json_decref(out);
		json_decref(body);
		body = J("{\"type\":\"power\",\"params\":{\"target\":\"on\"},\"mutating\":true}");
		assert_int_equal(rp_store_job_create(f->st, name, body, "t", &out, &detail),
		                 RP_ERR_OK);
		json_decref(out);
		json_decref(body);
	}
	if (!dbfx_pg()) {
		assert_int_equal(rp_store_jobs_take(f->st, "test", RP_JOB_LANE_BMC, 8, 60000, &cl),
		                 RP_ERR_OK);
		for (n = 0, ta.cl = cl; cl; cl = cl->next)
			n++;
		rp_store_claim_free(ta.cl);
		assert_int_equal(n, 3);
		print_message("SQLite: one writer, no row locks to pass over\n");
		return;
	}
	/* The oldest job's id: the one another claim holds. */
	{
		STORE_HOLD(f->st);
		struct conn *c = store_conn(f->st);
		struct stmt *s = STMT(c, "SELECT min(id) FROM jobs WHERE state = 'queued'");

		assert_int_equal(sql_step(s), SQL_ROW);
		la.job = ids[0] = sql_int(s, 0);
		sql_reset(s);
	}
	assert_int_equal(pthread_create(&tl, NULL, lock_holder, &la), 0);
	while (__atomic_load_n(&la.locked, __ATOMIC_ACQUIRE) == 0)
		usleep(1000);
	assert_int_equal(la.locked, 1);
	assert_int_equal(pthread_create(&tt, NULL, taker, &ta), 0);
	for (waited = 0; waited < 500 && !__atomic_load_n(&ta.done, __ATOMIC_ACQUIRE); waited++)
		usleep(10000);
	/* A claim that waited for the lock (or for the row) would still be waiting: fail, after
	 * letting it go so the test ends. */
	__atomic_store_n(&la.release, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(tt, NULL), 0);
	assert_int_equal(pthread_join(tl, NULL), 0);
	assert_true(waited < 500);
	assert_int_equal(ta.e, RP_ERR_OK);
	for (n = 0, cl = ta.cl; cl; cl = cl->next, n++)
		assert_true(cl->id != ids[0]);
	assert_int_equal(n, 2);
	rp_store_claim_free(ta.cl);
	/* Its holder gone, the job is claimed. */
	assert_int_equal(rp_store_jobs_take(f->st, "test", RP_JOB_LANE_BMC, 8, 60000, &cl),
	                 RP_ERR_OK);
	assert_non_null(cl);
	assert_true(cl->id == ids[0]);
	assert_null(cl->next);
	rp_store_claim_free(cl);
}

/* A claim is typed (its type from rackpilot/jobtypes.h, the opened BMC password outside
 * jansson) and lands in the lane the table gives its type; a typed outcome is recorded as
 * the JSON one was: state, power, BMC health. */
static void
test_typed_claim_outcome(void **state)
{
	struct fx *f = *state;
	struct rp_job_claim *cl = NULL;
	struct rp_job_outcome *o;
	json_t *out = NULL, *detail = NULL, *body, *job = NULL;
	char id[64];

	assert_int_equal(rp_job_type_find("power"), RP_JOB_POWER);
	assert_int_equal(rp_job_type_find("nonsense"), RP_JOB_UNKNOWN);
	assert_int_equal(rp_job_type_find(NULL), RP_JOB_UNKNOWN);
	assert_int_equal(rp_job_type_get(RP_JOB_STEPS)->lane, RP_JOB_LANE_SSH);
	assert_int_equal(rp_job_type_get(RP_JOB_VERIFY)->lane, RP_JOB_LANE_BMC);
	assert_null(rp_job_type_get(RP_JOB_UNKNOWN));
	assert_string_equal(rp_store_job_end_name(RP_JOB_END_RETRY), "retry");

	body = J("{\"name\":\"tc1\",\"bmc\":{\"driver\":\"fake\",\"address\":\"fake\","
	         "\"username\":\"u\",\"password\":\"s3cret\"}}");
	assert_int_equal(rp_store_node_create(f->st, body, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(body);
	body = J("{\"type\":\"power\",\"params\":{\"target\":\"on\"},\"mutating\":true}");
	assert_int_equal(rp_store_job_create(f->st, "tc1", body, "t", &out, &detail), RP_ERR_OK);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(out, "id")));
	json_decref(out);
	json_decref(body);

	assert_int_equal(rp_store_jobs_take(f->st, "test", RP_JOB_LANE_SSH, 8, 60000, &cl),
	                 RP_ERR_OK);
	assert_null(cl);
	assert_int_equal(rp_store_jobs_take(f->st, "test", RP_JOB_LANE_BMC, 8, 60000, &cl),
	                 RP_ERR_OK);
	assert_non_null(cl);
	assert_null(cl->next);
	assert_string_equal(cl->uuid, id);
	assert_int_equal(cl->type, RP_JOB_POWER);
	assert_string_equal(cl->type_name, "power");
	assert_string_equal(json_string_value(json_object_get(cl->params, "target")), "on");
	assert_string_equal(cl->node.name, "tc1");
	assert_string_equal(cl->bmc.driver, "fake");
	assert_string_equal(cl->bmc.password, "s3cret");
	assert_int_equal(cl->bmc.password_len, 6);
	assert_int_equal(cl->attempts, 1);
	assert_false(cl->recover);
	assert_false(cl->sent);

	o = rp_store_outcome_new(cl->id, RP_JOB_END_SUCCEEDED);
	assert_non_null(o);
	assert_int_equal(o->bmc_ok, -1);
	o->result = json_pack("{s:s}", "power", "on");
	snprintf(o->power, sizeof o->power, "on");
	o->bmc_ok = 1;
	assert_int_equal(rp_store_jobs_record(f->st, "test", o, 3), RP_ERR_OK);
	rp_store_outcome_free(o);
	rp_store_claim_free(cl);
	rp_store_claim_free(NULL);
	rp_store_outcome_free(NULL);

	assert_int_equal(rp_store_job_get(f->st, id, &job), RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(job, "state")), "succeeded");
	assert_string_equal(
	        json_string_value(json_object_get(json_object_get(job, "result"), "power")), "on");
	json_decref(job);
	assert_int_equal(rp_store_node_get(f->st, "tc1", &out), RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(out, "power_state")), "on");
	json_decref(out);
}

/* One job of node w and its state and recover flag, by claiming as owner. */
static struct rp_job_claim *
lease_claim(struct fx *f, const char *owner, int64_t lease_ms)
{
	struct rp_job_claim *cl = NULL;

	assert_int_equal(rp_store_jobs_take(f->st, owner, RP_JOB_LANE_BMC, 8, lease_ms, &cl),
	                 RP_ERR_OK);
	assert_non_null(cl);
	assert_null(cl->next);
	return cl;
}

static const char *
job_state(struct fx *f, const char *id, json_t **keep)
{
	json_decref(*keep);
	*keep = NULL;
	assert_int_equal(rp_store_job_get(f->st, id, keep), RP_ERR_OK);
	return json_string_value(json_object_get(*keep, "state"));
}

static const char *
summary_of(json_t *events, size_t i)
{
	const char *s = json_string_value(json_object_get(json_array_get(events, i), "summary"));

	assert_non_null(s);
	return s;
}

/* The servers of a database: a heartbeat keeps a row live; a second live instance under the
 * same name is refused (and told whose it is) unless it takes the name; a row that ran out is
 * anyone's; leaving removes only one's own row. */
static void
test_servers(void **state)
{
	struct fx *f = *state;
	struct rp_server_self a = {"alpha", "inst-a", "host-a", 11, 60000};
	struct rp_server_self a2 = {"alpha", "inst-a2", "host-b", 12, 60000};
	struct rp_server_self b = {"beta", "inst-b", "host-b", 13, 60000};
	struct rp_server_self gone = {"gamma", "inst-g", "host-g", 14, -1};
	json_t *live = NULL, *holder = NULL;

	assert_int_equal(rp_store_server_beat(f->st, &a, 1, 0, &live, NULL), RP_ERR_OK);
	assert_int_equal(json_array_size(live), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(live, 0), "host")),
	                    "host-a");
	assert_true(json_is_true(json_object_get(json_array_get(live, 0), "leader")));
	json_decref(live);
	/* A quiet server (its heartbeat ran out) is not live. */
	assert_int_equal(rp_store_server_beat(f->st, &gone, 0, 0, NULL, NULL), RP_ERR_OK);
	assert_int_equal(rp_store_server_beat(f->st, &b, 0, 0, &live, NULL), RP_ERR_OK);
	assert_int_equal(json_array_size(live), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(live, 0), "name")),
	                    "alpha");
	assert_string_equal(json_string_value(json_object_get(json_array_get(live, 1), "name")),
	                    "beta");
	json_decref(live);
	live = NULL;
	/* alpha's name is taken while alpha is live: refused, naming the holder. */
	assert_int_equal(rp_store_server_beat(f->st, &a2, 0, 0, &live, &holder), RP_ERR_CONFLICT);
	assert_null(live);
	assert_string_equal(json_string_value(json_object_get(holder, "host")), "host-a");
	assert_int_equal(json_integer_value(json_object_get(holder, "pid")), 11);
	json_decref(holder);
	holder = NULL;
	/* Taken on purpose (a restart of a killed server): then the old instance is refused. */
	assert_int_equal(rp_store_server_beat(f->st, &a2, 0, 1, NULL, NULL), RP_ERR_OK);
	assert_int_equal(rp_store_server_beat(f->st, &a, 1, 0, NULL, &holder), RP_ERR_CONFLICT);
	assert_string_equal(json_string_value(json_object_get(holder, "host")), "host-b");
	json_decref(holder);
	/* The old instance's leave leaves the new one's row alone. */
	assert_int_equal(rp_store_server_leave(f->st, &a), RP_ERR_OK);
	assert_int_equal(rp_store_server_beat(f->st, &b, 0, 0, &live, NULL), RP_ERR_OK);
	assert_int_equal(json_array_size(live), 2);
	json_decref(live);
	assert_int_equal(rp_store_server_leave(f->st, &a2), RP_ERR_OK);
	assert_int_equal(rp_store_server_beat(f->st, &b, 0, 0, &live, NULL), RP_ERR_OK);
	assert_int_equal(json_array_size(live), 1);
	json_decref(live);
	/* gamma ran out: anyone may start under its name. */
	gone.instance = "inst-g2";
	gone.lease_ms = 60000;
	assert_int_equal(rp_store_server_beat(f->st, &gone, 0, 0, NULL, NULL), RP_ERR_OK);
}

/* Retention removes what is older than it keeps and nothing younger: events, the logs of
 * long-ended jobs (the job stays, counting the bytes), dead tokens, dead servers' rows. */
static void
test_prune(void **state)
{
	struct fx *f = *state;
	struct rp_prune_counts n = {0};
	int64_t now = rp_time_now_ms(), day = 86400000;
	char sql[1200], out[64];
	json_t *in, *o = NULL, *detail = NULL;
	long before;
	int i;

	for (i = 0; i < 5; i++) {
		snprintf(sql, sizeof sql, "{\"name\":\"p%d\"}", i);
		in = J(sql);
		assert_int_equal(rp_store_node_create(f->st, in, "t", &o, &detail), RP_ERR_OK);
		json_decref(in);
		json_decref(o);
	}
	before = events(f->st);
	assert_true(before >= 5);
	/* Three events 100 days old, the rest new. */
	snprintf(sql, sizeof sql,
	         "UPDATE events SET at = %lld WHERE id IN (SELECT id FROM events ORDER BY id "
	         "LIMIT 3)",
	         (long long)(now - 100 * day));
	assert_int_equal(dbfx_sql(f->path, sql, NULL, 0), 0);
	/* Two ended jobs with logs, one 100 days ago and one yesterday; tokens dead long ago,
	 * dead yesterday and alive; a server gone two days ago. */
	snprintf(sql, sizeof sql,
	         "INSERT INTO jobs(id, uuid, type, node_name, params, mutating, state, "
	         "not_before, created_by, created_at, finished_at, updated_at, log_bytes) VALUES "
	         "(901, 'j-old', 'steps', 'p0', '{}', 0, 'succeeded', 0, 't', 0, %lld, 0, 6), "
	         "(902, 'j-new', 'steps', 'p0', '{}', 0, 'failed', 0, 't', 0, %lld, 0, 4); "
	         "INSERT INTO job_logs(job_id, seq, at, data) VALUES (901, 1, 0, 'abc'), "
	         "(901, 2, 0, 'def'), (902, 1, 0, 'ghij'); "
	         "INSERT INTO tokens(uuid, name, role, hash, created_at, created_by, expires_at, "
	         "revoked_at) VALUES ('t1', 'old', 'viewer', 'h1', 0, 't', %lld, NULL), "
	         "('t2', 'revoked', 'viewer', 'h2', 0, 't', NULL, %lld), "
	         "('t3', 'recent', 'viewer', 'h3', 0, 't', %lld, NULL), "
	         "('t4', 'alive', 'viewer', 'h4', 0, 't', NULL, NULL); "
	         "INSERT INTO servers(name, instance, host, pid, started_at, seen_until) VALUES "
	         "('dead', 'i', 'h', 1, 0, %lld), ('quiet', 'i', 'h', 1, 0, %lld)",
	         (long long)(now - 100 * day), (long long)(now - day), (long long)(now - 100 * day),
	         (long long)(now - 95 * day), (long long)(now - day), (long long)(now - 2 * day),
	         (long long)(now - 60000));
	assert_int_equal(dbfx_sql(f->path, sql, NULL, 0), 0);
	/* Keeping everything: only bootstrap tokens and server rows are looked at. */
	assert_int_equal(rp_store_prune(f->st, now, &(struct rp_prune_keep){0}, 10000, &n),
	                 RP_ERR_OK);
	assert_int_equal(n.events, 0);
	assert_int_equal(n.servers, 1);
	assert_int_equal(events(f->st), before);
	assert_int_equal(rp_store_prune(f->st, now, &(struct rp_prune_keep){.events_ms = 90 * day},
	                                10000, &n),
	                 RP_ERR_OK);
	assert_int_equal(n.events, 3);
	assert_int_equal(n.job_logs, 1);
	assert_int_equal(n.tokens, 2);
	assert_int_equal(n.servers, 0);
	assert_false(n.more);
	assert_int_equal(events(f->st), before - 3);
	assert_int_equal(dbfx_sql(f->path, "SELECT count(*) FROM job_logs WHERE job_id = 901", out,
	                          sizeof out),
	                 0);
	assert_string_equal(out, "0");
	assert_int_equal(dbfx_sql(f->path, "SELECT count(*) FROM job_logs WHERE job_id = 902", out,
	                          sizeof out),
	                 0);
	assert_string_equal(out, "1");
	assert_int_equal(dbfx_sql(f->path,
	                          "SELECT log_bytes || '/' || log_dropped FROM jobs WHERE id = 901",
	                          out, sizeof out),
	                 0);
	assert_string_equal(out, "0/6");
	assert_int_equal(dbfx_sql(f->path,
	                          "SELECT count(*) FROM tokens WHERE uuid LIKE 't_' AND name IN "
	                          "('alive', 'recent')",
	                          out, sizeof out),
	                 0);
	assert_string_equal(out, "2");
	assert_int_equal(dbfx_sql(f->path, "SELECT count(*) FROM tokens WHERE uuid LIKE 't_'", out,
	                          sizeof out),
	                 0);
	assert_string_equal(out, "2");
	assert_int_equal(dbfx_sql(f->path, "SELECT count(*) FROM servers", out, sizeof out), 0);
	assert_string_equal(out, "1");
	/* Again: nothing left to do. */
	assert_int_equal(rp_store_prune(f->st, now, &(struct rp_prune_keep){.events_ms = 90 * day},
	                                10000, &n),
	                 RP_ERR_OK);
	assert_int_equal(n.events + n.job_logs + n.tokens + n.servers, 0);
}

/* Sensor samples and rack power steps: by age, and, past sensor_history_max_rows, the oldest
 * until about 90 % of that many stay; 64 nodes or racks a transaction, all of them seen. */
static void
test_prune_samples(void **state)
{
	struct fx *f = *state;
	struct rp_prune_counts n = {0};
	int64_t now = rp_time_now_ms(), hour = 3600 * 1000;
	json_t *in, *o = NULL, *detail = NULL;
	char sql[768], out[64];
	int i, k;

	in = J("{\"name\":\"pr\"}");
	assert_int_equal(rp_store_rack_create(f->st, in, "t", &o, &detail), RP_ERR_OK);
	json_decref(in);
	json_decref(o);
	/* 70 nodes (two transactions' worth), a sample an hour for 100 hours each. */
	for (i = 0; i < 70; i++) {
		snprintf(sql, sizeof sql, "{\"name\":\"ps%d\",\"rack\":\"pr\"}", i);
		in = J(sql);
		assert_int_equal(rp_store_node_create(f->st, in, "t", &o, &detail), RP_ERR_OK);
		json_decref(in);
		json_decref(o);
	}
	snprintf(sql, sizeof sql,
	         /* BIGINT: PostgreSQL's k * 86400000 would overflow its int4 */
	         "WITH RECURSIVE h(k) AS (SELECT CAST(0 AS BIGINT) UNION ALL SELECT k + 1 FROM h "
	         "WHERE k < 99) INSERT INTO sensor_history(node_id, at, name, value) SELECT n.id, "
	         "%lld - k * %lld, 'Inlet Temp', k FROM nodes n, h WHERE n.name LIKE 'ps%%'; "
	         "WITH RECURSIVE h(k) AS (SELECT CAST(0 AS BIGINT) UNION ALL SELECT k + 1 FROM h "
	         "WHERE k < 99) INSERT INTO rack_power_history(rack_id, at, peak_w, last_w) SELECT "
	         "r.id, %lld - k * %lld, 1, 1 FROM racks r, h WHERE r.name = 'pr'",
	         (long long)now, (long long)hour, (long long)now, (long long)(24 * hour));
	assert_int_equal(dbfx_sql(f->path, sql, NULL, 0), 0);
	/* 24 hours of samples and 30 days of rack steps: k 0..24 and 0..30 stay. */
	assert_int_equal(rp_store_prune(f->st, now,
	                                &(struct rp_prune_keep){.samples_ms = 24 * hour,
	                                                        .rack_steps_ms = 30 * 24 * hour},
	                                10000, &n),
	                 RP_ERR_OK);
	assert_int_equal(n.samples, 70 * 75);
	assert_int_equal(n.rack_steps, 100 - 31);
	assert_int_equal(dbfx_sql(f->path, "SELECT count(*) FROM sensor_history", out, sizeof out),
	                 0);
	assert_string_equal(out, "1750");
	/* A cap of 700 rows, 1750 kept over 24 h (73 an hour): room is left for an hour's more,
	 * (700 - 73) / 1750 of the 24 hours stay (8.6 h: k 0..8). */
	assert_int_equal(
	        rp_store_prune(f->st, now,
	                       &(struct rp_prune_keep){.samples_ms = 24 * hour, .samples_max = 700},
	                       10000, &n),
	        RP_ERR_OK);
	assert_int_equal(n.samples, 70 * 16);
	assert_true(n.capped);
	assert_int_equal(
	        dbfx_sql(f->path, "SELECT max(value) FROM sensor_history", out, sizeof out), 0);
	k = atoi(out);
	assert_int_equal(k, 8);
	/* Under the cap now: nothing more goes. */
	assert_int_equal(
	        rp_store_prune(f->st, now,
	                       &(struct rp_prune_keep){.samples_ms = 24 * hour, .samples_max = 700},
	                       10000, &n),
	        RP_ERR_OK);
	assert_int_equal(n.samples, 0);
	assert_false(n.capped);
	/* With no time to spare a call does one chunk (64 nodes); the next goes on from there,
	 * not from the first node again. */
	snprintf(sql, sizeof sql,
	         "INSERT INTO sensor_history(node_id, at, name, value) SELECT id, %lld, 'Old', 1 "
	         "FROM nodes WHERE name LIKE 'ps%%'",
	         (long long)(now - 48 * hour));
	assert_int_equal(dbfx_sql(f->path, sql, NULL, 0), 0);
	assert_int_equal(
	        rp_store_prune(f->st, now, &(struct rp_prune_keep){.samples_ms = 24 * hour}, 0, &n),
	        RP_ERR_OK);
	assert_true(n.more);
	assert_int_equal(n.samples, 64);
	assert_int_equal(
	        rp_store_prune(f->st, now, &(struct rp_prune_keep){.samples_ms = 24 * hour}, 0, &n),
	        RP_ERR_OK);
	assert_int_equal(n.samples, 6);
	assert_int_equal(dbfx_sql(f->path, "SELECT count(*) FROM sensor_history WHERE name = 'Old'",
	                          out, sizeof out),
	                 0);
	assert_string_equal(out, "0");
}

/* Job leases: a claim is its owner's until the lease runs out; only the owner renews and
 * records it; a run-out lease, the owner's own earlier run and the pre-lease owner format are
 * recovered, a live lease of another server is not. */
static void
test_job_leases(void **state)
{
	struct fx *f = *state;
	struct rp_job_claim *cl;
	struct rp_job_outcome *o;
	json_t *out = NULL, *detail = NULL, *body, *held, *renewed = NULL, *keep = NULL;
	struct rp_page_req rq = {.limit = 10};
	struct rp_page pg = {0};
	char id[64];
	int n = -1;

	body = J("{\"name\":\"lw\",\"bmc\":{\"driver\":\"fake\",\"address\":\"fake\","
	         "\"username\":\"u\",\"password\":\"p\"}}");
	assert_int_equal(rp_store_node_create(f->st, body, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(body);
	body = J("{\"type\":\"power\",\"params\":{\"target\":\"on\"},\"mutating\":true}");
	assert_int_equal(rp_store_job_create(f->st, "lw", body, "t", &out, &detail), RP_ERR_OK);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(out, "id")));
	json_decref(out);
	json_decref(body);

	/* A live lease of server a: nobody else takes it, b can neither renew nor record it. */
	cl = lease_claim(f, "a", 60000);
	held = json_pack("[I]", (json_int_t)cl->id);
	assert_int_equal(rp_store_jobs_recover(f->st, NULL, &n), RP_ERR_OK);
	assert_int_equal(n, 0);
	assert_int_equal(rp_store_jobs_recover(f->st, "b", &n), RP_ERR_OK);
	assert_int_equal(n, 0);
	assert_int_equal(rp_store_jobs_renew(f->st, "b", held, 60000, &renewed), RP_ERR_OK);
	assert_int_equal(json_array_size(renewed), 0);
	json_decref(renewed);
	assert_int_equal(rp_store_jobs_renew(f->st, "a", held, 60000, &renewed), RP_ERR_OK);
	assert_int_equal(json_array_size(renewed), 1);
	assert_int_equal(json_integer_value(json_array_get(renewed, 0)), cl->id);
	json_decref(renewed);
	o = rp_store_outcome_new(cl->id, RP_JOB_END_SUCCEEDED);
	assert_int_equal(rp_store_jobs_record(f->st, "b", o, 3), RP_ERR_OK);
	assert_string_equal(job_state(f, id, &keep), "running");
	rp_store_claim_free(cl);

	/* a restarts: its own earlier run's jobs come back at once, to be verified. */
	assert_int_equal(rp_store_jobs_recover(f->st, "a", &n), RP_ERR_OK);
	assert_int_equal(n, 1);
	assert_string_equal(job_state(f, id, &keep), "queued");
	/* a's late outcome is not recorded on a job it no longer holds. */
	assert_int_equal(rp_store_jobs_record(f->st, "a", o, 3), RP_ERR_OK);
	assert_string_equal(job_state(f, id, &keep), "queued");

	/* A lease that ran out: the periodic look (self NULL) takes it over. */
	cl = lease_claim(f, "b", -1000);
	assert_true(cl->recover);
	rp_store_claim_free(cl);
	assert_int_equal(rp_store_jobs_renew(f->st, "a", held, 60000, &renewed), RP_ERR_OK);
	assert_int_equal(json_array_size(renewed), 0);
	json_decref(renewed);
	assert_int_equal(rp_store_jobs_recover(f->st, NULL, &n), RP_ERR_OK);
	assert_int_equal(n, 1);
	assert_string_equal(job_state(f, id, &keep), "queued");

	/* The owner format of the time before leases (one server per database) is recovered by
	 * any starting server, not by the periodic look. */
	cl = lease_claim(f, "rackpilotd/4242", 60000);
	rp_store_claim_free(cl);
	assert_int_equal(rp_store_jobs_recover(f->st, NULL, &n), RP_ERR_OK);
	assert_int_equal(n, 0);
	assert_int_equal(rp_store_jobs_recover(f->st, "c", &n), RP_ERR_OK);
	assert_int_equal(n, 1);

	/* The job.interrupted events say whose the jobs were (newest first). */
	rq.filter = json_pack("{s:s}", "action", "job.interrupted");
	assert_int_equal(rp_store_event_list(f->st, &rq, &pg), RP_ERR_OK);
	assert_int_equal(json_array_size(pg.items), 3);
	assert_non_null(strstr(summary_of(pg.items, 0), "running when rackpilotd stopped"));
	assert_non_null(strstr(summary_of(pg.items, 1), "running on b, whose lease on it ran out"));
	assert_non_null(strstr(summary_of(pg.items, 2), "running when rackpilotd stopped"));
	json_decref(pg.items);
	json_decref(rq.filter);

	/* c holds it now and records it. */
	cl = lease_claim(f, "c", 60000);
	o->id = cl->id;
	assert_int_equal(rp_store_jobs_record(f->st, "c", o, 3), RP_ERR_OK);
	assert_string_equal(job_state(f, id, &keep), "succeeded");
	rp_store_claim_free(cl);
	rp_store_outcome_free(o);
	json_decref(held);
	json_decref(keep);
}

/* Lists answer with rows written as JSON text (store_row_text); the text is the same bytes
 * json_dumps prints for the tree the same rows make, on values that need escaping, nested
 * objects that are null (no BMC) and not, JSON columns, times, booleans and non-ASCII text. */
static void
page_same(struct rp_store *st,
          enum rp_err (*list)(struct rp_store *, const struct rp_page_req *, struct rp_page *),
          int sort_by_name, size_t want_items)
{
	struct rp_page_req rq = {.limit = 1000, .sort_by_name = sort_by_name};
	struct rp_page tree = {0}, text = {0};
	char *dumped;

	assert_int_equal(list(st, &rq, &tree), RP_ERR_OK);
	rq.want_text = 1;
	assert_int_equal(list(st, &rq, &text), RP_ERR_OK);
	assert_null(tree.text);
	assert_null(text.items);
	assert_non_null(text.text);
	assert_int_equal(json_array_size(tree.items), want_items);
	dumped = json_dumps(tree.items, JSON_COMPACT);
	assert_non_null(dumped);
	assert_int_equal(strlen(text.text), text.text_len);
	if (strcmp(dumped, text.text) != 0)
		fail_msg("tree: %s\ntext: %s", dumped, text.text);
	assert_int_equal(tree.more, text.more);
	assert_int_equal(tree.last_id, text.last_id);
	assert_string_equal(tree.last_key, text.last_key);
	free(dumped);
	free(text.text);
	json_decref(tree.items);
}

/* The detail a node.created event must hold, from the node as GET reads it: each member
 * that is not null and not one the events leave out, as {"from": null, "to": value}. */
static json_t *
created_detail(json_t *node)
{
	static const char *const left_out[] = {
	        "id",    "version",      "created_at",    "updated_at",
	        "agent", "provision_at", "provision_job", "provision_error"};
	json_t *d = json_object(), *v;
	const char *k;

	json_object_foreach(node, k, v)
	{
		size_t i;

		for (i = 0; i < sizeof left_out / sizeof *left_out; i++)
			if (!strcmp(k, left_out[i]))
				break;
		if (i < sizeof left_out / sizeof *left_out || json_is_null(v))
			continue;
		json_object_set_new(d, k, json_pack("{s:n, s:O}", "from", "to", v));
	}
	return d;
}

/* Each node.created event's detail, as stored (the event page's text copies it as it is),
 * is the canonical text (compact, sorted keys) of created_detail. */
static void
created_events_same(struct rp_store *st, const char *const *names, size_t n)
{
	struct rp_page_req rq = {.limit = 1000, .want_text = 1};
	struct rp_page page = {0};
	size_t i;

	assert_int_equal(rp_store_event_list(st, &rq, &page), RP_ERR_OK);
	assert_non_null(page.text);
	for (i = 0; i < n; i++) {
		json_t *node = NULL, *want;
		char *text, *at;

		assert_int_equal(rp_store_node_get(st, names[i], &node), RP_ERR_OK);
		want = created_detail(node);
		text = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
		assert_non_null(text);
		at = strstr(page.text, text);
		if (at == NULL || strncmp(at - 9, "\"detail\":", 9) != 0)
			fail_msg("node %s: want detail %s\nin events %s", names[i], text,
			         page.text);
		free(text);
		json_decref(want);
		json_decref(node);
	}
	free(page.text);
}

static int64_t
macs_version(struct fx *f)
{
	int64_t v = -1;

	assert_int_equal(rp_store_macs_version(f->st, &v), RP_ERR_OK);
	return v;
}

/* n's tags or macs as the API shows them, as compact text. */
static char *
list_of(struct fx *f, const char *n, const char *key)
{
	json_t *out = NULL;
	char *t;

	assert_int_equal(rp_store_node_get(f->st, n, &out), RP_ERR_OK);
	t = json_dumps(json_object_get(out, key), JSON_COMPACT);
	json_decref(out);
	return t;
}

static void
assert_list(struct fx *f, const char *n, const char *key, const char *want)
{
	char *t = list_of(f, n, key);

	assert_string_equal(t, want);
	free(t);
}

/* The names of the nodes a tag filter finds (node_tags, not the column). */
static void
assert_tagged(struct fx *f, const char *tag, const char *want)
{
	struct rp_page_req rq = {.limit = 100};
	struct rp_page pg = {0};
	char got[256] = "";
	json_t *item;
	size_t i;

	rq.filter = json_pack("{s:s}", "tag", tag);
	assert_int_equal(rp_store_node_list(f->st, &rq, &pg), RP_ERR_OK);
	json_array_foreach(pg.items, i, item)
	{
		snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "," : "",
		         json_string_value(json_object_get(item, "name")));
	}
	assert_string_equal(got, want);
	json_decref(pg.items);
	json_decref(rq.filter);
}

/* A node's tags and macs columns follow node_tags and node_macs through create, update,
 * agent registration and failed imports, and macs_version (what the dnsmasq sync watches)
 * moves once per transaction that changes a MAC or a name, never for one rolled back. */
static void
test_node_lists(void **state)
{
	struct fx *f = *state;
	struct rp_buf hosts = {0};
	json_t *in, *out = NULL, *detail = NULL;
	int64_t v = macs_version(f);

	in = J("{\"name\":\"l1\",\"tags\":[\"b\",\"a\",\"b\"],"
	       "\"macs\":[\"02:00:00:00:00:12\",\"02:00:00:00:00:11\"]}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	assert_list(f, "l1", "tags", "[\"a\",\"b\"]");
	assert_list(f, "l1", "macs", "[\"02:00:00:00:00:11\",\"02:00:00:00:00:12\"]");
	assert_int_equal(macs_version(f), v + 1);
	/* No MACs, nothing for dnsmasq. */
	in = J("{\"name\":\"l2\",\"tags\":[\"a\"]}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	assert_list(f, "l2", "macs", "[]");
	assert_int_equal(macs_version(f), v + 1);
	assert_tagged(f, "a", "l1,l2");
	/* An import whose second row fails writes nothing, the version included. */
	in = J("{\"nodes\":[{\"name\":\"l3\",\"macs\":[\"02:00:00:00:00:13\"]},"
	       "{\"name\":\"l4\",\"macs\":[\"02:00:00:00:00:11\"]}]}");
	assert_int_equal(rp_store_import(f->st, in, 0, 0, "t", &out, &detail),
	                 RP_ERR_IMPORT_INVALID);
	json_decref(detail);
	detail = NULL;
	json_decref(in);
	assert_int_equal(rp_store_node_get(f->st, "l3", &out), RP_ERR_NOT_FOUND);
	assert_int_equal(macs_version(f), v + 1);
	/* ...and leaves nothing behind for the next transaction's commit to count. */
	in = J("{\"name\":\"l5\"}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	assert_int_equal(macs_version(f), v + 1);
	/* An update replaces both lists, in the column and in the tables. */
	in = J("{\"tags\":[\"c\"],\"macs\":[\"02:00:00:00:00:14\"]}");
	assert_int_equal(rp_store_node_update(f->st, "l1", in, 0, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	assert_list(f, "l1", "tags", "[\"c\"]");
	assert_list(f, "l1", "macs", "[\"02:00:00:00:00:14\"]");
	assert_tagged(f, "a", "l2");
	assert_tagged(f, "c", "l1");
	assert_int_equal(macs_version(f), v + 2);
	/* A MAC the agent reports and nobody owns joins the node: table, column and version. */
	agent_register(f, "l1", "lists", "[\"02:00:00:00:00:14\",\"02:00:00:00:00:10\"]");
	assert_list(f, "l1", "macs", "[\"02:00:00:00:00:10\",\"02:00:00:00:00:14\"]");
	assert_int_equal(macs_version(f), v + 3);
	assert_int_equal(rp_store_dhcp_hosts(f->st, &hosts), RP_ERR_OK);
	assert_non_null(strstr(hosts.data, "02:00:00:00:00:10"));
	assert_null(strstr(hosts.data, "02:00:00:00:00:11"));
	rp_buf_free(&hosts);
	assert_int_equal(rp_store_node_delete(f->st, "l1", 0, "t", &detail), RP_ERR_OK);
	assert_int_equal(macs_version(f), v + 4);
}

/* Migration 0012 fills the new columns from a version-11 database's tables and drops the
 * MAC triggers. The version-11 file is made from this one by undoing 0012 and what came
 * after it (0013's step run column, 0015's servers table, 0016's webhook tables). */
static void
test_node_lists_migration(void **state)
{
	struct fx *f = *state;
	json_t *in, *out = NULL, *detail = NULL;
	char cmd[2048], why[256], line[64] = "";
	FILE *p;

	in = J("{\"name\":\"m1\",\"tags\":[\"y\",\"x\"],"
	       "\"macs\":[\"02:00:00:00:00:22\",\"02:00:00:00:00:21\"]}");
	assert_int_equal(rp_store_node_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(in);
	rp_store_free(f->st);
	f->st = NULL;
	snprintf(
	        cmd, sizeof cmd,
	        "sqlite3 %s \"DROP TABLE acceptance_pairs; ALTER TABLE acceptance_runs DROP COLUMN "
	        "options; ALTER TABLE firmware_components DROP COLUMN board_id; DROP TABLE "
	        "node_addresses; DROP TABLE first_boots; ALTER TABLE "
	        "job_steps DROP COLUMN progress; ALTER TABLE job_steps DROP COLUMN progress_at; "
	        "ALTER TABLE jobs DROP COLUMN secret_sealed; ALTER TABLE node_classes DROP COLUMN "
	        "deploy_defaults; ALTER TABLE node_classes DROP COLUMN deploy_user_data_sealed; "
	        "ALTER TABLE nodes DROP COLUMN console_log; ALTER TABLE bmcs DROP "
	        "COLUMN password_pending_sealed; ALTER TABLE "
	        "bmcs DROP COLUMN password_pending_at; ALTER TABLE bmcs DROP COLUMN "
	        "password_rotated_at; ALTER TABLE node_classes DROP COLUMN bmc_credentials; "
	        "DROP TABLE power_caps; DROP TABLE power_admissions; ALTER TABLE "
	        "racks DROP COLUMN power_cap; DROP TABLE rack_power_history; DROP TABLE "
	        "rack_power; DROP TABLE "
	        "sensor_history; DROP TABLE sensors; DROP TABLE sensor_reads; ALTER TABLE racks "
	        "DROP COLUMN power_limit_pct; ALTER TABLE node_classes DROP COLUMN max_power_w; "
	        "ALTER TABLE node_classes DROP COLUMN idle_power_w; "
	        "DROP TABLE webhook_deliveries; DROP TABLE webhooks; DROP TABLE "
	        "servers; "
	        "ALTER TABLE job_steps DROP COLUMN run_id; "
	        "ALTER TABLE nodes DROP COLUMN tags; ALTER TABLE nodes DROP COLUMN "
	        "macs; CREATE TRIGGER macs_ins AFTER INSERT ON node_macs BEGIN UPDATE meta SET "
	        "value = value + 1 WHERE key = 'macs_version'; END; CREATE TRIGGER macs_del "
	        "AFTER DELETE ON node_macs BEGIN UPDATE meta SET value = value + 1 WHERE key = "
	        "'macs_version'; END; CREATE TRIGGER macs_name AFTER UPDATE OF name ON nodes "
	        "BEGIN UPDATE meta SET value = value + 1 WHERE key = 'macs_version'; END; "
	        "PRAGMA user_version=11\"",
	        f->path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(rp_store_open(f->path, &f->st, why, sizeof why), RP_ERR_OK);
	rp_store_set_secrets(f->st, f->sec);
	assert_list(f, "m1", "tags", "[\"x\",\"y\"]");
	assert_list(f, "m1", "macs", "[\"02:00:00:00:00:21\",\"02:00:00:00:00:22\"]");
	snprintf(cmd, sizeof cmd,
	         "sqlite3 %s \"SELECT count(*) FROM sqlite_master WHERE type = 'trigger'\"",
	         f->path);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(line, sizeof line, p));
	assert_int_equal(pclose(p), 0);
	assert_string_equal(line, "0\n");
}

static void
test_row_text(void **state)
{
	struct fx *f = *state;
	json_t *in, *out = NULL, *detail = NULL;
	const char *bodies[] = {
	        "{\"name\":\"r1\",\"height_u\":42,\"site\":\"s\\\"q\\\\b\\n\\t\\u0001\\u001f\","
	        "\"row\":\"\\u00e9\\u4e2d\\ud83d\\ude00/\"}",
	        "{\"name\":\"r2\"}",
	};
	const char *nodes[] = {
	        "{\"name\":\"a1\",\"rack\":\"r1\",\"u_position\":2,\"serial\":\"q\\\"\\\\\\u007f\","
	        "\"macs\":[\"02:00:00:00:00:01\",\"02:00:00:00:00:02\"],\"tags\":[\"b\\\"x\",\"a\"]"
	        ","
	        "\"expected\":{\"cpu\":{\"count\":2},\"note\":\"\\u00fc\\n\"},"
	        "\"bmc\":{\"driver\":\"redfish\",\"address\":\"10.0.0.1\",\"port\":8443,"
	        "\"username\":\"root\",\"password\":\"pw\",\"tls_verify\":false,"
	        "\"options\":{\"retry_wait_ms\":100,\"retry_tries\":3}}}",
	        "{\"name\":\"a0\",\"maintenance\":true,\"maintenance_reason\":\"fan \\u2014 out\"}",
	        "{\"name\":\"a2\",\"rack\":\"r2\",\"ssh\":{\"address\":\"10.0.0.9\",\"user\":"
	        "\"ops\"}}",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bodies / sizeof *bodies; i++) {
		in = J(bodies[i]);
		assert_int_equal(rp_store_rack_create(f->st, in, "t", &out, &detail), RP_ERR_OK);
		json_decref(out);
		json_decref(in);
	}
	for (i = 0; i < sizeof nodes / sizeof *nodes; i++) {
		in = J(nodes[i]);
		if (rp_store_node_create(f->st, in, "t", &out, &detail) != RP_ERR_OK)
			fail_msg("%s: %s", nodes[i], detail ? json_dumps(detail, 0) : "");
		json_decref(out);
		json_decref(in);
	}
	page_same(f->st, rp_store_node_list, 0, 3);
	page_same(f->st, rp_store_node_list, 1, 3);
	page_same(f->st, rp_store_rack_list, 1, 2);
	page_same(f->st, rp_store_event_list, 0, 5);
	created_events_same(f->st, (const char *const[]){"a1", "a0", "a2"}, 3);
}

int
main(void)
{
	/* SQLite's alone: its group commit, a version-11 file, clear-text passwords an older
	 * version left in a file (a PostgreSQL database is only ever written sealed). */
	const struct CMUnitTest sqlite_only[] = {
	        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_secrets_legacy, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_node_lists_migration, setup, teardown),
	};
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_schema, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_racks_nodes, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_tokens, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_job_leases, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_servers, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_prune, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_prune_samples, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_import_all_or_nothing, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_drift, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_bootstrap_tokens, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_register_wakes_waiting_job, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_typed_claim_outcome, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_secrets_sealed, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_secrets_wrong_key, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_secrets_rotate, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_secrets_webhook, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_boot_token_reuse_prune, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_stmt_cache_grows, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_pool_cap, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_pool_wait, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_claim_skip_locked, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_row_text, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_node_lists, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	if (!dbfx_pg())
		rc |= cmocka_run_group_tests(sqlite_only, NULL, NULL);
	return rc;
}
