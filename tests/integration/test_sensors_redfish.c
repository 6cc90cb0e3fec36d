/*
 * rp_bmc_sensors and rp_bmc_power_limit_get/set straight through the Redfish driver:
 * - the mock BMC (tests/redfish/mock_bmc.py) in each of its sensor shapes (the Sensors collection,
 *   EnvironmentMetrics + ThermalSubsystem + PowerSubsystem, the deprecated Power + Thermal, the
 *   drives' EnvironmentMetrics), with and without $expand: the values, thresholds and health set
 *   through its control API come back, and the requests one read costs stay under a bound;
 * - the power limit through EnvironmentMetrics.PowerLimitWatts and through the deprecated
 *   PowerControl[0].PowerLimit, with If-Match, changes behind the driver's back and refusals;
 * - a BMC's bad days: 503 + Retry-After, links off its origin (never followed: the other origin
 *   hears nothing), absurd values, thousands of sensors;
 * - a hostile BMC's (tests/scratch's review kit, as mock knobs): padded chassis (the memory one
 * read takes), the password in the links it gives, a read without end (deadline and request count),
 *   numbers no double holds and broken members, $expand advertised but refused, a deprecated limit
 *   that would power the node off, limits out of range;
 * - the DMTF mockup trees, served as published (--static) and in the mock's shapes (--tree),
 *   compared with the values in their JSON files. A missing tree is skipped, but fails under
 *   CI=true.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bmc/bmc.h"
#include "harness.h"

static struct mock M, tree; /* tree: a DMTF tree, stopped in teardown after a failure */
static unsigned nodes;      /* a new node per handle that must find the BMC afresh */

#define ANY "" /* expect(): health not checked */

/* ---- helpers ------------------------------------------------------------------------ */

static int
eq_str(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* A handle on BMC i of m, as a node of its own (the driver caches what it learns per node). */
static struct rp_bmc *
open_bmc(struct mock *m, int i)
{
	json_t *j = json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}}", "driver", "redfish", "address",
	                      "127.0.0.1", "port", m->base + i, "username", "admin", "password",
	                      "secret", "options", "scheme", "http");
	struct rp_bmc_target t;
	struct rp_bmc_err err;
	struct rp_bmc *b;
	char node[40];

	snprintf(node, sizeof node, "00000000-0000-4000-8000-%012u", ++nodes);
	if (rp_bmc_target_from_json(j, node, &t, &err) < 0)
		fail_msg("target: %s", err.msg);
	json_decref(j);
	if ((b = rp_bmc_open(&t, &err)) == NULL)
		fail_msg("open: %s", err.msg);
	return b;
}

static void config(struct mock *m, int i, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
config(struct mock *m, int i, const char *fmt, ...)
{
	char body[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	mock_post(m, i, "/__mock/config", body);
}

static void sensor_set(int i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* POST /__mock/sensor with the JSON that fmt makes. */
static void
sensor_set(int i, const char *fmt, ...)
{
	char body[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	mock_post(&M, i, "/__mock/sensor", body);
}

/* Redfish requests BMC i of m has answered so far. */
static long
requests(struct mock *m, int i)
{
	json_t *st = mock_get(m, i, "/__mock/state");
	long n = (long)json_integer_value(json_object_get(st, "requests"));

	json_decref(st);
	return n;
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The sensors, which must be read without an error; each entry must be what the contract says
 * an entry is, and exactly one the system's draw. */
static json_t *
sensors(struct rp_bmc *b)
{
	static const char *const types[] = {"power", "temperature", "fan", "psu"};
	struct rp_bmc_err err;
	json_t *list = NULL, *e;
	size_t i, k;
	int system = 0;

	if (rp_bmc_sensors(b, &list, &err) < 0)
		fail_msg("sensors: %s (%s)", err.msg, rp_bmc_err_name(err.kind));
	assert_true(json_is_array(list));
	assert_true(json_array_size(list) <= RP_BMC_SENSORS_MAX);
	json_array_foreach(list, i, e)
	{
		const char *name = jstr(e, "name"), *type = jstr(e, "type"),
		           *unit = jstr(e, "unit");
		json_t *v = json_object_get(e, "value"), *h = json_object_get(e, "health");
		size_t j;

		assert_non_null(name);
		assert_true(strlen(name) > 0 && strlen(name) <= 63);
		for (j = 0; name[j]; j++)
			assert_true(name[j] >= 0x20 && name[j] < 0x7f);
		for (j = 0; j < i; j++)
			if (!strcmp(name, jstr(json_array_get(list, j), "name")))
				fail_msg("two entries named '%s'", name);
		for (k = 0; k < 4 && !eq_str(type, types[k]); k++)
			;
		if (k == 4)
			fail_msg("%s: type %s", name, type ? type : "(none)");
		assert_non_null(jstr(e, "kind"));
		assert_non_null(unit);
		assert_true(json_is_null(v) || json_is_number(v));
		assert_true(json_is_null(h) || eq_str(json_string_value(h), "ok") ||
		            eq_str(json_string_value(h), "warning") ||
		            eq_str(json_string_value(h), "critical"));
		assert_true(!strncmp(jstr(e, "source"), "redfish:", 8));
		if (!strcmp(type, "power") && eq_str(jstr(e, "kind"), "system")) {
			system++;
			assert_int_equal(i, 0); /* first */
		}
	}
	assert_int_equal(system, 1);
	return list;
}

static json_t *
find(json_t *list, const char *name)
{
	json_t *e;
	size_t i;

	json_array_foreach(list, i, e)
	{
		if (!strcmp(jstr(e, "name"), name))
			return e;
	}
	return NULL;
}

static json_t *
must_find(json_t *list, const char *name)
{
	json_t *e = find(list, name);

	if (e == NULL) {
		char *all = json_dumps(list, JSON_COMPACT);

		fail_msg("no sensor '%s' in %.2000s", name, all);
	}
	return e;
}

static json_t *
system_draw(json_t *list)
{
	return json_array_get(list, 0);
}

/* A number member of an entry, NAN when it is absent or null. */
static double
num(json_t *e, const char *key)
{
	json_t *v = json_object_get(e, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Entry name is type/kind/unit from source (NULL: any) with value v (NAN: null) and health h
 * (NULL: null, ANY: not checked). */
static void
expect(json_t *list, const char *name, const char *type, const char *kind, const char *unit,
       double v, const char *h, const char *source)
{
	json_t *e = must_find(list, name);
	double got = num(e, "value");

	assert_string_equal(jstr(e, "type"), type);
	assert_string_equal(jstr(e, "kind"), kind);
	assert_string_equal(jstr(e, "unit"), unit);
	if (isnan(v) ? !isnan(got) : fabs(got - v) > 1e-9)
		fail_msg("%s: value %g, wanted %g", name, got, v);
	if (h == NULL)
		assert_true(json_is_null(json_object_get(e, "health")));
	else if (h[0])
		assert_string_equal(jstr(e, "health"), h);
	if (source)
		assert_string_equal(jstr(e, "source"), source);
}

static int
count_of(json_t *list, const char *type, const char *kind)
{
	json_t *e;
	size_t i;
	int n = 0;

	json_array_foreach(list, i, e) n +=
	        eq_str(jstr(e, "type"), type) && (kind == NULL || eq_str(jstr(e, "kind"), kind));
	return n;
}

static struct rp_power_limit
limit_get(struct rp_bmc *b)
{
	struct rp_power_limit pl;
	struct rp_bmc_err err;

	if (rp_bmc_power_limit_get(b, &pl, &err) < 0)
		fail_msg("power limit: %s (%s)", err.msg, rp_bmc_err_name(err.kind));
	return pl;
}

static void
limit_set(struct rp_bmc *b, unsigned watts, int active)
{
	struct rp_power_limit pl = {watts, active};
	struct rp_bmc_err err;

	if (rp_bmc_power_limit_set(b, &pl, &err) < 0)
		fail_msg("set power limit %u/%d: %s (%s)", watts, active, err.msg,
		         rp_bmc_err_name(err.kind));
}

static void
expect_limit(struct rp_bmc *b, unsigned watts, int active)
{
	struct rp_power_limit pl = limit_get(b);

	if (pl.watts != watts || pl.active != active)
		fail_msg("power limit %u/%d, wanted %u/%d", pl.watts, pl.active, watts, active);
}

/* The DMTF tree name under ../shared/redfish-mockups in dir, or 0 when it is not there (a skip;
 * a failure under CI=true, where .ci/deps provides it). */
static int
tree_dir(const char *name, char *dir, size_t len)
{
	const char *ci = getenv("CI");

	snprintf(dir, len, "%s/../shared/redfish-mockups/%s", rp_test_src, name);
	if (access(dir, R_OK) == 0)
		return 1;
	if (ci && !strcmp(ci, "true"))
		fail_msg("%s is missing (CI=true: the DMTF trees must be there)", dir);
	fprintf(stderr, "skipping %s: %s not present\n", name, dir);
	return 0;
}

/* A file of a DMTF tree by its URI ("/redfish/v1/Chassis/1U" -> dir/Chassis/1U/index.json). */
static json_t *
tree_doc(const char *dir, const char *uri)
{
	char path[2048];
	json_error_t je;

	if ((size_t)snprintf(path, sizeof path, "%s%s/index.json", dir,
	                     uri + strlen("/redfish/v1")) >= sizeof path)
		return NULL;
	return json_load_file(path, 0, &je);
}

/* The first chassis of the tree's system. */
static json_t *
tree_chassis(const char *dir, char *uri, size_t len)
{
	json_t *systems = tree_doc(dir, "/redfish/v1/Systems"), *sys, *ch;

	assert_non_null(systems);
	sys = tree_doc(dir,
	               jstr(json_array_get(json_object_get(systems, "Members"), 0), "@odata.id"));
	assert_non_null(sys);
	snprintf(uri, len, "%s",
	         jstr(json_array_get(json_object_get(json_object_get(sys, "Links"), "Chassis"), 0),
	              "@odata.id"));
	ch = tree_doc(dir, uri);
	assert_non_null(ch);
	json_decref(systems);
	json_decref(sys);
	return ch;
}

static const char *
health_word(json_t *status)
{
	const char *h = jstr(status, "Health");

	return eq_str(h, "OK")         ? "ok"
	       : eq_str(h, "Warning")  ? "warning"
	       : eq_str(h, "Critical") ? "critical"
	                               : NULL;
}

/* ---- the mock's shapes ---------------------------------------------------------------- */

/* Each shape the mock can offer, with where the CPU temperature is read from and what the
 * driver may spend on a read once it knows the BMC (the first read of a handle also learns what
 * a BMC lacks). The built-in tree has a rack chassis (21 sensors the contract knows, NVMe drives,
 * the power limit) and a GPU baseboard (8 GPUs and its draw). */
static const struct shape {
	const char *shapes, *expand, *source;
	int thresholds; /* temperatures come with thresholds and health */
	int drives;     /* NVMe temperatures are offered */
	size_t entries;
	long first, warm; /* requests of the handle's first read (after login), of the next */
} shapes[] = {
        /* system, 2 chassis, 2 expanded Sensors */
        {"both", "full", "redfish:Sensors", 1, 1, 30, 5, 5},
        {"modern", "full", "redfish:Sensors", 1, 1, 30, 5, 5},
        {"sensors", "full", "redfish:Sensors", 1, 1, 30, 5, 5},
        /* system, 2 chassis; ThermalSubsystem, EnvironmentMetrics, PowerSubsystem expanded */
        {"subsystems", "full", "redfish:ThermalSubsystem", 0, 1, 30, 8, 8},
        /* system, 2 chassis, 2 x (Power, Thermal), 4 x (drive, its EnvironmentMetrics) */
        {"both", "none", "redfish:Thermal", 1, 1, 30, 15, 15},
        /* the same, after a Sensors collection that $expand did not expand */
        {"both", "ignored", "redfish:Thermal", 1, 1, 30, 16, 15},
        /* system, 2 chassis, 2 x (Power, Thermal); 4 drives without metrics, read once */
        {"deprecated", "full", "redfish:Thermal", 1, 0, 26, 11, 7},
        {"deprecated", "none", "redfish:Thermal", 1, 0, 26, 11, 7},
        /* system, 2 chassis; 3 + 3 resources, 6 fans, 4 supplies and their metrics apart */
        {"modern", "none", "redfish:ThermalSubsystem", 0, 1, 30, 26, 26},
        /* system, 2 chassis, 2 Sensors collections, 31 sensors one by one */
        {"sensors", "none", "redfish:Sensors", 1, 1, 30, 36, 36},
};

static void
test_shapes(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
		const struct shape *s = &shapes[k];
		const char *psu =
		        strcmp(s->source, "redfish:Sensors") ? "PSU2" : "PSU2 Input Power";
		struct rp_bmc *b;
		json_t *list, *cpu;
		long r0, first, warm;
		double t0, ms;

		config(&M, 0, "{\"sensor_shapes\":\"%s\",\"expand_query\":\"%s\"}", s->shapes,
		       s->expand);
		sensor_set(0,
		           "{\"id\":\"CPU0_Temp\",\"reading\":%zu.25,\"health\":\"Warning\","
		           "\"thresholds\":{\"UpperCaution\":%zu}}",
		           60 + k, 80 + k);
		sensor_set(0, "{\"id\":\"Fan3\",\"reading\":%zu,\"health\":\"Critical\"}",
		           7000 + k);
		sensor_set(0,
		           "{\"id\":\"PSU2_Input_Power\",\"reading\":%zu,\"health\":\"Warning\"}",
		           1600 + k);
		sensor_set(0, "{\"id\":\"Total_Power\",\"reading\":%zu}", 6000 + k);
		sensor_set(0, "{\"id\":\"NVMe1_Temp\",\"reading\":%zu}", 40 + k);
		sensor_set(0, "{\"id\":\"GPU5_Temp\",\"reading\":%zu.5}", 70 + k);

		b = open_bmc(&M, 0);
		/* Log in and find the system first: those requests are no part of a read. */
		{
			enum rp_power p;
			struct rp_bmc_err err;

			assert_int_equal(rp_bmc_power_get(b, &p, &err), 0);
		}
		r0 = requests(&M, 0);
		list = sensors(b);
		first = requests(&M, 0) - r0;
		if (json_array_size(list) != s->entries)
			fail_msg("%s/%s: %zu entries, wanted %zu: %.3000s", s->shapes, s->expand,
			         json_array_size(list), s->entries, json_dumps(list, JSON_COMPACT));
		cpu = must_find(list, "CPU0 Temp");
		expect(list, "CPU0 Temp", "temperature", "cpu", "Cel", 60 + k + 0.25,
		       s->thresholds ? "warning" : NULL, s->source);
		if (s->thresholds) {
			assert_true(num(cpu, "upper_warning") == 80 + k);
			assert_true(num(cpu, "upper_critical") == 95);
			assert_null(json_object_get(cpu, "lower_warning"));
			expect(list, "Inlet Temp", "temperature", "inlet", "Cel", 24, "ok", NULL);
			assert_true(num(must_find(list, "Inlet Temp"), "lower_critical") == 3);
		} else {
			assert_null(json_object_get(cpu, "upper_warning"));
			expect(list, "Inlet Temp", "temperature", "inlet", "Cel", 24, NULL, NULL);
		}
		expect(list, "Exhaust Temp", "temperature", "exhaust", "Cel", 38.5, ANY, NULL);
		expect(list, "DIMM A Temp", "temperature", "memory", "Cel", 41, ANY, NULL);
		expect(list, "GPU5 Temp", "temperature", "gpu", "Cel", 70 + k + 0.5, ANY, NULL);
		expect(list, "Fan3", "fan", "fan", "RPM", 7000 + k, "critical", NULL);
		expect(list, psu, "psu", "psu", "W", 1600 + k, "warning", NULL);
		assert_int_equal(count_of(list, "psu", "psu"), 4);
		assert_int_equal(count_of(list, "fan", "fan"), 6);
		assert_int_equal(count_of(list, "temperature", "gpu"), 8);
		assert_int_equal(count_of(list, "temperature", "drive"), s->drives ? 4 : 0);
		if (s->drives)
			expect(list, "NVMe1 Temp", "temperature", "drive", "Cel", 40 + k, ANY,
			       NULL);
		/* The node's draw is the rack chassis', not the GPU baseboard's. */
		assert_true(num(system_draw(list), "value") == 6000 + k);
		assert_string_equal(jstr(system_draw(list), "unit"), "W");
		assert_int_equal(count_of(list, "power", NULL), 2);
		assert_null(find(list, "P12V")); /* a voltage: no type of the contract */
		json_decref(list);

		/* A change shows in the next read. */
		sensor_set(0, "{\"id\":\"CPU0_Temp\",\"reading\":%zu}", 90 + k);
		r0 = requests(&M, 0);
		t0 = now_ms();
		list = sensors(b);
		ms = now_ms() - t0;
		warm = requests(&M, 0) - r0;
		assert_true(num(must_find(list, "CPU0 Temp"), "value") == 90 + k);
		json_decref(list);
		fprintf(stderr,
		        "   %-10s $expand %-7s %-24s first read %2ld requests, then %2ld (%.1f "
		        "ms)\n",
		        s->shapes, s->expand, s->source, first, warm, ms);
		if (first > s->first || warm > s->warm)
			fail_msg("%s/%s: %ld then %ld requests per read, at most %ld then %ld "
			         "allowed",
			         s->shapes, s->expand, first, warm, s->first, s->warm);
		rp_bmc_close(b);
	}
	config(&M, 0, "{\"sensor_shapes\":\"both\",\"expand_query\":\"full\"}");
}

/* "none": nothing to read, no limit to set. */
static void
test_none(void **state)
{
	struct rp_power_limit pl = {5000, 1};
	struct rp_bmc_err err;
	struct rp_bmc *b;
	json_t *list = NULL;

	(void)state;
	config(&M, 1, "{\"sensor_shapes\":\"none\"}");
	b = open_bmc(&M, 1);
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	assert_null(list);
	assert_int_equal(rp_bmc_power_limit_get(b, &pl, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	assert_int_equal(pl.watts, 5000); /* untouched */
	assert_int_equal(rp_bmc_power_limit_set(b, &pl, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	rp_bmc_close(b);
	config(&M, 1, "{\"sensor_shapes\":\"both\"}");
}

/* ---- power limits --------------------------------------------------------------------- */

static json_t *
mock_limit(int i)
{
	json_t *st = mock_get(&M, i, "/__mock/state");
	json_t *l = json_incref(json_object_get(st, "power_limit"));

	json_decref(st);
	return l;
}

/* The PATCHes BMC i got, their statuses as a string ("412 200 "). */
static void
patches(int i, char *out, size_t len)
{
	json_t *st = mock_get(&M, i, "/__mock/state"), *a;
	size_t k, n = 0;

	out[0] = '\0';
	json_array_foreach(json_object_get(st, "actions"), k, a)
	{
		if (eq_str(jstr(a, "method"), "PATCH"))
			n += (size_t)snprintf(
			        out + n, len - n, "%lld ",
			        (long long)json_integer_value(json_object_get(a, "status")));
	}
	json_decref(st);
}

static void
test_power_limit(void **state)
{
	/* Where the limit is in each shape: EnvironmentMetrics, or the deprecated Power. */
	static const char *const cases[][2] = {
	        {"both", "EnvironmentMetrics"},
	        {"subsystems", "EnvironmentMetrics"},
	        {"deprecated", "Power"},
	};
	size_t c;

	(void)state;
	config(&M, 1, "{\"require_if_match\":true}");
	for (c = 0; c < 3; c++) {
		int env = !strcmp(cases[c][1], "EnvironmentMetrics");
		struct rp_power_limit pl = {50000, 1};
		struct rp_bmc_err err;
		struct rp_bmc *b;
		char seen[256];
		json_t *l;
		long r0;

		config(&M, 1, "{\"sensor_shapes\":\"%s\"}", cases[c][0]);
		mock_post(&M, 1, "/__mock/power_limit",
		          "{\"set_point\":null,\"control_mode\":\"Disabled\"}");
		b = open_bmc(&M, 1);
		expect_limit(b, 0, 0);
		r0 = requests(&M, 1);
		expect_limit(b, 0, 0);
		/* system, chassis, the resource */
		assert_true(requests(&M, 1) - r0 <= 3);

		/* Set, with If-Match (the BMC insists on one), then read back. */
		r0 = requests(&M, 1);
		limit_set(b, 9000, 1);
		/* system, chassis, the resource, PATCH with its ETag */
		assert_true(requests(&M, 1) - r0 <= 4);
		expect_limit(b, 9000, 1);
		l = mock_limit(1);
		assert_true(json_integer_value(json_object_get(l, "set_point")) == 9000);
		assert_string_equal(jstr(l, "control_mode"), "Automatic");
		json_decref(l);

		/* Changed behind the driver's back: read as it is now. */
		mock_post(&M, 1, "/__mock/power_limit", "{\"set_point\":7000}");
		expect_limit(b, 7000, 1);
		/* A change between the driver's read and its write: 412, read again, once. */
		config(&M, 1, "{\"fail_next_412\":1}");
		limit_set(b, 7500, 1);
		expect_limit(b, 7500, 1);

		/* Out of range: refused with the BMC's words, nothing changed. */
		assert_int_equal(rp_bmc_power_limit_set(b, &pl, &err), -1);
		assert_int_equal(err.kind, RP_BMC_REJECTED);
		if (strstr(err.msg, "out of the allowed range") == NULL)
			fail_msg("refusal without the BMC's message: %s", err.msg);
		pl.watts = 100;
		assert_int_equal(rp_bmc_power_limit_set(b, &pl, &err), -1);
		assert_int_equal(err.kind, RP_BMC_REJECTED);
		expect_limit(b, 7500, 1);

		/* Removed: ControlMode Disabled (the set point stays), or LimitInWatts null. */
		limit_set(b, 0, 0);
		expect_limit(b, env ? 7500 : 0, 0);
		l = mock_limit(1);
		assert_string_equal(jstr(l, "control_mode"), "Disabled");
		json_decref(l);
		/* On again. */
		limit_set(b, 8000, 1);
		expect_limit(b, 8000, 1);
		patches(1, seen, sizeof seen);
		fprintf(stderr, "   %-10s limit via %-18s PATCH statuses so far: %s\n", cases[c][0],
		        cases[c][1], seen);
		rp_bmc_close(b);
	}
	/* Every PATCH carried If-Match (require_if_match answers 428 without one). */
	{
		char seen[256];

		patches(1, seen, sizeof seen);
		assert_null(strstr(seen, "428"));
	}
	config(&M, 1, "{\"require_if_match\":false,\"sensor_shapes\":\"both\"}");
	mock_post(&M, 1, "/__mock/power_limit",
	          "{\"set_point\":null,\"control_mode\":\"Disabled\"}");
}

/* ---- bad days ------------------------------------------------------------------------- */

/* 503 + Retry-After on sensor GETs: retried within the request's own budget. BMC 2. */
static void
test_busy(void **state)
{
	struct rp_bmc *b;
	json_t *st, *list;
	long before;

	(void)state;
	st = mock_get(&M, 2, "/__mock/state");
	before = (long)json_integer_value(json_object_get(json_object_get(st, "faults"), "503"));
	json_decref(st);
	config(&M, 2, "{\"fail_sensor_503\":3,\"retry_after\":0}");
	b = open_bmc(&M, 2);
	list = sensors(b);
	assert_int_equal(json_array_size(list), 30);
	json_decref(list);
	st = mock_get(&M, 2, "/__mock/state");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "faults"), "503")),
	                 before + 3);
	json_decref(st);
	/* The wait is the one Retry-After asks for. */
	config(&M, 2, "{\"fail_sensor_503\":1,\"retry_after\":1}");
	{
		double t0 = now_ms(), ms;

		list = sensors(b);
		ms = now_ms() - t0;
		assert_int_equal(json_array_size(list), 30);
		json_decref(list);
		if (ms < 1000 || ms > 5000)
			fail_msg("a read through one 503 + Retry-After: 1 took %.0f ms", ms);
	}
	config(&M, 2, "{\"retry_after\":0}");
	/* A BMC that stays busy: RP_BMC_BUSY, not an answer from part of its sensors. */
	config(&M, 2, "{\"fail_sensor_503\":50}");
	{
		struct rp_bmc_err err;

		list = NULL;
		assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
		assert_int_equal(err.kind, RP_BMC_BUSY);
		assert_null(list);
	}
	config(&M, 2, "{\"fail_sensor_503\":0,\"retry_after\":1}");
	rp_bmc_close(b);
}

/* Links that name another origin (here BMC 3 of the same mock) are never followed: BMC 3 hears
 * nothing, the rest of the read goes on. BMC 2. */
static void
test_foreign_links(void **state)
{
	struct rp_bmc_err err;
	struct rp_bmc *b;
	json_t *list;
	long other;

	(void)state;
	other = requests(&M, 3);

	/* Members of the Fans and PowerSupplies collections (and the drives) elsewhere. */
	config(&M, 2,
	       "{\"sensor_shapes\":\"modern\",\"expand_query\":\"none\","
	       "\"link_origins\":{\"sensor_member\":\"http://127.0.0.1:%d\"}}",
	       M.base + 3);
	b = open_bmc(&M, 2);
	list = sensors(b);
	assert_int_equal(count_of(list, "fan", NULL), 0);
	assert_int_equal(count_of(list, "psu", NULL), 0);
	assert_int_equal(count_of(list, "temperature", "gpu"), 8);
	json_decref(list);
	rp_bmc_close(b);

	/* The same with $expand: the members the BMC could not expand stay links, not followed;
	 * the read goes on with EnvironmentMetrics and the subsystems. */
	config(&M, 2, "{\"expand_query\":\"full\"}");
	b = open_bmc(&M, 2);
	list = sensors(b);
	assert_int_equal(count_of(list, "fan", NULL), 0);
	assert_int_equal(count_of(list, "psu", NULL), 0);
	assert_int_equal(count_of(list, "temperature", "gpu"), 8);
	assert_int_equal(count_of(list, "temperature", "drive"), 4);
	assert_string_equal(jstr(system_draw(list), "source"), "redfish:EnvironmentMetrics");
	json_decref(list);
	rp_bmc_close(b);

	/* The chassis' links to their sensor resources elsewhere: only the drives are left. */
	config(&M, 2,
	       "{\"sensor_shapes\":\"both\",\"link_origins\":{\"sensor_link\":\"http://"
	       "127.0.0.1:%d\"}}",
	       M.base + 3);
	b = open_bmc(&M, 2);
	list = NULL;
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1); /* no draw: no answer */
	assert_int_equal(err.kind, RP_BMC_PROTOCOL);
	assert_non_null(strstr(err.msg, "refused"));
	assert_null(list);
	assert_int_equal(rp_bmc_power_limit_get(b, &(struct rp_power_limit){0}, &err), -1);
	assert_int_equal(err.kind, RP_BMC_PROTOCOL);
	rp_bmc_close(b);

	/* The system's chassis elsewhere: nothing to read, and why. */
	config(&M, 2, "{\"link_origins\":{\"chassis\":\"http://127.0.0.1:%d\"}}", M.base + 3);
	b = open_bmc(&M, 2);
	list = NULL;
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	assert_int_equal(err.kind, RP_BMC_PROTOCOL);
	if (strstr(err.msg, "refused") == NULL || strstr(err.msg, "/redfish/v1/Chassis/") == NULL)
		fail_msg("refusal: %s", err.msg);
	assert_null(strstr(err.msg, "secret"));
	rp_bmc_close(b);

	config(&M, 2, "{\"link_origins\":{},\"sensor_shapes\":\"both\"}");
	assert_int_equal(requests(&M, 3), other);
}

/* Values no sensor can read come back null; names are cut, made printable and unique. BMC 4. */
static void
test_absurd(void **state)
{
	struct rp_bmc *b;
	json_t *list, *e;
	char long_name[128];

	(void)state;
	sensor_set(4, "{\"id\":\"CPU0_Temp\",\"reading\":1e308}");
	sensor_set(4, "{\"id\":\"CPU1_Temp\",\"reading\":-500}");
	sensor_set(4, "{\"id\":\"DIMM_B_Temp\",\"reading\":\"hot\"}");
	sensor_set(4, "{\"id\":\"GPU0_Temp\",\"reading\":1000,\"health\":null}");
	sensor_set(4, "{\"id\":\"GPU1_Temp\",\"reading\":1000.5}");
	sensor_set(4, "{\"id\":\"GPU2_Temp\",\"reading\":-273}");
	sensor_set(4, "{\"id\":\"Fan1\",\"reading\":-1}");
	sensor_set(4, "{\"id\":\"Fan2\",\"reading\":10000001}");
	sensor_set(4, "{\"id\":\"Fan4\",\"reading\":true}");
	sensor_set(4, "{\"id\":\"PSU1_Input_Power\",\"reading\":null}");
	sensor_set(4, "{\"id\":\"Total_Power\",\"reading\":1e308}");
	sensor_set(4, "{\"id\":\"Inlet_Temp\",\"thresholds\":{\"UpperCritical\":\"hot\","
	              "\"UpperCaution\":2000,\"LowerCaution\":null}}");
	/* Names: a repeated one, one with bytes that are no printable ASCII, one too long. */
	sensor_set(4, "{\"id\":\"GPU3_Temp\",\"name\":\"CPU0 Temp\"}");
	sensor_set(4, "{\"id\":\"DIMM_A_Temp\",\"name\":\"DIMM \\u00e9\\ttemp\"}");
	memset(long_name, 'x', 80);
	long_name[80] = '\0';
	sensor_set(4, "{\"id\":\"NVMe0_Temp\",\"name\":\"%s\"}", long_name);
	b = open_bmc(&M, 4);
	list = sensors(b);
	expect(list, "CPU0 Temp", "temperature", "cpu", "Cel", NAN, "ok", NULL);
	expect(list, "CPU1 Temp", "temperature", "cpu", "Cel", NAN, "ok", NULL);
	expect(list, "DIMM B Temp", "temperature", "memory", "Cel", NAN, "ok", NULL);
	expect(list, "GPU0 Temp", "temperature", "gpu", "Cel", 1000, NULL, NULL);
	expect(list, "GPU1 Temp", "temperature", "gpu", "Cel", NAN, "ok", NULL);
	expect(list, "GPU2 Temp", "temperature", "gpu", "Cel", -273, "ok", NULL);
	expect(list, "Fan1", "fan", "fan", "RPM", NAN, "ok", NULL);
	expect(list, "Fan2", "fan", "fan", "RPM", NAN, "ok", NULL);
	expect(list, "Fan4", "fan", "fan", "RPM", NAN, "ok", NULL);
	expect(list, "PSU1 Input Power", "psu", "psu", "W", NAN, "ok", NULL);
	assert_true(json_is_null(json_object_get(system_draw(list), "value")));
	e = must_find(list, "Inlet Temp");
	assert_null(json_object_get(e, "upper_critical"));
	assert_null(json_object_get(e, "upper_warning"));
	assert_null(json_object_get(e, "lower_warning"));
	assert_true(num(e, "lower_critical") == 3);
	/* A GPU's sensor, named like the CPU's, comes later: "#2". */
	expect(list, "CPU0 Temp #2", "temperature", "gpu", "Cel", 63, "ok", NULL);
	expect(list, "DIMM ???temp", "temperature", "memory", "Cel", 41, "ok", NULL);
	long_name[63] = '\0';
	expect(list, long_name, "temperature", "drive", "Cel", 35, "ok", NULL);
	json_decref(list);
	rp_bmc_close(b);
}

/* Thousands of sensors: at most RP_BMC_SENSORS_MAX entries, the node's draw among them, and a
 * read one by one stops at its cap. BMC 5. */
static void
test_caps(void **state)
{
	struct rp_bmc *b;
	json_t *list;
	long r0, n;

	(void)state;
	config(&M, 5, "{\"extra_sensors\":3000}");
	b = open_bmc(&M, 5);
	r0 = requests(&M, 5);
	list = sensors(b);
	n = requests(&M, 5) - r0;
	assert_int_equal(json_array_size(list), RP_BMC_SENSORS_MAX);
	assert_true(num(system_draw(list), "value") == 6200);
	assert_non_null(find(list, "Extra 0 Temp"));
	json_decref(list);
	rp_bmc_close(b);
	assert_true(n <= 3 + 5); /* root, login, Systems + a read */

	/* Only a Sensors collection and no $expand: fetched one by one, at most 128. */
	config(&M, 5, "{\"sensor_shapes\":\"sensors\",\"expand_query\":\"none\"}");
	b = open_bmc(&M, 5);
	r0 = requests(&M, 5);
	list = sensors(b);
	n = requests(&M, 5) - r0;
	fprintf(stderr, "   3030 sensors one by one: %ld requests, %zu entries\n", n,
	        json_array_size(list));
	assert_true(n <= 3 + 1 + 2 + 2 + 128);
	assert_true(json_array_size(list) <= RP_BMC_SENSORS_MAX);
	assert_true(num(system_draw(list), "value") == 6200);
	json_decref(list);
	rp_bmc_close(b);
	config(&M, 5, "{\"extra_sensors\":0,\"sensor_shapes\":\"both\",\"expand_query\":\"full\"}");
}

/* ---- the DMTF trees ------------------------------------------------------------------- */

/* DMTF's trees as published: they advertise $expand but the static server ignores it, so the
 * driver reads the deprecated Power and Thermal; compared with those files. */
static void
test_dmtf_static(void **state)
{
	static const char *const trees[] = {"public-rackmount1", "public-tower"};
	size_t t;

	(void)state;
	for (t = 0; t < 2; t++) {
		char dir[512], uri[512], path[600];
		const char *args[] = {"--static", dir, NULL};
		json_t *ch, *power, *thermal, *list, *x, *pc;
		struct rp_bmc *b;
		size_t i, want = 1;

		if (!tree_dir(trees[t], dir, sizeof dir))
			continue;
		ch = tree_chassis(dir, uri, sizeof uri);
		snprintf(path, sizeof path, "%s/Power", uri);
		power = tree_doc(dir, path);
		snprintf(path, sizeof path, "%s/Thermal", uri);
		thermal = tree_doc(dir, path);
		assert_non_null(power);
		assert_non_null(thermal);
		mock_start(&tree, 1, args);
		b = open_bmc(&tree, 0);
		list = sensors(b);

		pc = json_array_get(json_object_get(power, "PowerControl"), 0);
		assert_string_equal(jstr(system_draw(list), "name"), jstr(pc, "Name"));
		assert_true(num(system_draw(list), "value") ==
		            json_number_value(json_object_get(pc, "PowerConsumedWatts")));
		assert_string_equal(jstr(system_draw(list), "source"), "redfish:Power");
		json_array_foreach(json_object_get(thermal, "Temperatures"), i, x)
		{
			json_t *e = must_find(list, jstr(x, "Name")), *r;

			r = json_object_get(x, "ReadingCelsius");
			assert_true(r ? num(e, "value") == json_number_value(r)
			              : json_is_null(json_object_get(e, "value")));
			r = json_object_get(x, "UpperThresholdNonCritical");
			assert_true(r ? num(e, "upper_warning") == json_number_value(r)
			              : !json_object_get(e, "upper_warning"));
			r = json_object_get(x, "LowerThresholdCritical");
			assert_true(r ? num(e, "lower_critical") == json_number_value(r)
			              : !json_object_get(e, "lower_critical"));
			assert_true(eq_str(jstr(e, "health"),
			                   health_word(json_object_get(x, "Status"))) ||
			            (!health_word(json_object_get(x, "Status")) &&
			             json_is_null(json_object_get(e, "health"))));
			assert_string_equal(jstr(e, "source"), "redfish:Thermal");
			want++;
		}
		json_array_foreach(json_object_get(thermal, "Fans"), i, x)
		{
			expect(list, jstr(x, "Name"), "fan", "fan", "RPM",
			       json_number_value(json_object_get(x, "Reading")),
			       health_word(json_object_get(x, "Status")), "redfish:Thermal");
			want++;
		}
		json_array_foreach(json_object_get(power, "PowerSupplies"), i, x)
		{
			/* No PowerInputWatts in these trees (LastPowerOutputWatts is no input). */
			expect(list, jstr(x, "Name"), "psu", "psu", "W", NAN,
			       health_word(json_object_get(x, "Status")), "redfish:Power");
			want++;
		}
		assert_int_equal(json_array_size(list), want);
		json_decref(list);

		/* Again, once the driver knows that the $expand is not done (and that the drives
		 * give no temperature): the same. */
		json_decref(sensors(b));

		/* The power limit of PowerControl[0]. */
		expect_limit(b,
		             (unsigned)json_integer_value(json_object_get(
		                     json_object_get(pc, "PowerLimit"), "LimitInWatts")),
		             1);
		rp_bmc_close(b);
		mock_stop(&tree);
		json_decref(ch);
		json_decref(power);
		json_decref(thermal);
	}
}

/* The same trees in the mock's modern shapes (--tree, where $expand works): the Sensors
 * collection, and EnvironmentMetrics + subsystems; compared with those files. */
static void
test_dmtf_tree_shapes(void **state)
{
	static const char *const trees[] = {"public-rackmount1", "public-tower"};
	size_t t;

	(void)state;
	for (t = 0; t < 2; t++) {
		char dir[512], uri[512], path[600];
		const char *args[] = {"--tree", dir, NULL};
		json_t *ch, *coll, *env, *list, *x;
		struct rp_bmc *b;
		size_t i, temps = 0;
		long r0, n;

		if (!tree_dir(trees[t], dir, sizeof dir))
			continue;
		ch = tree_chassis(dir, uri, sizeof uri);
		snprintf(path, sizeof path, "%s/Sensors", uri);
		coll = tree_doc(dir, path);
		snprintf(path, sizeof path, "%s/EnvironmentMetrics", uri);
		env = tree_doc(dir, path);
		assert_non_null(coll);
		assert_non_null(env);
		mock_start(&tree, 1, args);

		/* The Sensors collection, expanded. */
		config(&tree, 0, "{\"sensor_shapes\":\"modern\"}");
		b = open_bmc(&tree, 0);
		list = sensors(b);
		json_array_foreach(json_object_get(coll, "Members"), i, x)
		{
			json_t *s = tree_doc(dir, jstr(x, "@odata.id")), *e, *th;

			assert_non_null(s);
			th = json_object_get(s, "Thresholds");
			if (eq_str(jstr(s, "ReadingUnits"), "Cel") &&
			    !eq_str(jstr(json_object_get(s, "Status"), "State"), "Absent")) {
				e = must_find(list, jstr(s, "Name"));
				assert_string_equal(jstr(e, "type"), "temperature");
				assert_true(num(e, "value") ==
				            json_number_value(json_object_get(s, "Reading")));
				if (json_object_get(th, "UpperCaution"))
					assert_true(num(e, "upper_warning") ==
					            json_number_value(json_object_get(
					                    json_object_get(th, "UpperCaution"),
					                    "Reading")));
				assert_string_equal(jstr(e, "health"),
				                    health_word(json_object_get(s, "Status")));
				temps++;
			}
			if (eq_str(jstr(s, "ReadingType"), "Power") &&
			    eq_str(jstr(s, "PhysicalContext"), "Chassis"))
				assert_true(num(system_draw(list), "value") ==
				            json_number_value(json_object_get(s, "Reading")));
			json_decref(s);
		}
		assert_int_equal(count_of(list, "temperature", NULL), temps);
		assert_string_equal(jstr(system_draw(list), "source"), "redfish:Sensors");
		json_decref(list);
		r0 = requests(&tree, 0);
		json_decref(sensors(b));
		n = requests(&tree, 0) - r0;
		fprintf(stderr, "   %s --tree, Sensors expanded: %ld requests per read\n", trees[t],
		        n);
		/* system, chassis, Sensors (the drives, without metrics, are not asked again) */
		assert_true(n <= 3);
		rp_bmc_close(b);

		/* EnvironmentMetrics + ThermalSubsystem + PowerSubsystem. */
		config(&tree, 0, "{\"sensor_shapes\":\"subsystems\"}");
		b = open_bmc(&tree, 0);
		list = sensors(b);
		assert_true(num(system_draw(list), "value") ==
		            json_number_value(json_object_get(json_object_get(env, "PowerWatts"),
		                                              "Reading")));
		assert_string_equal(jstr(system_draw(list), "source"),
		                    "redfish:EnvironmentMetrics");
		snprintf(path, sizeof path, "%s/ThermalSubsystem/Fans", uri);
		json_decref(coll);
		coll = tree_doc(dir, path);
		json_array_foreach(json_object_get(coll, "Members"), i, x)
		{
			json_t *f = tree_doc(dir, jstr(x, "@odata.id"));
			json_t *sp = json_object_get(f, "SpeedPercent");
			json_t *rpm = json_object_get(sp, "SpeedRPM");

			/* RPM where given, else the percentage. */
			expect(list, jstr(f, "Name"), "fan", "fan", rpm ? "RPM" : "%",
			       json_number_value(rpm ? rpm : json_object_get(sp, "Reading")),
			       health_word(json_object_get(f, "Status")),
			       "redfish:ThermalSubsystem");
			json_decref(f);
		}
		expect(list, "Exhaust", "temperature", "exhaust", "Cel", 40.5, NULL,
		       "redfish:ThermalSubsystem");
		assert_true(count_of(list, "psu", "psu") >= 1);
		json_decref(list);
		rp_bmc_close(b);

		/* rackmount1's limit is in EnvironmentMetrics: 150..1000 W. */
		if (json_object_get(env, "PowerLimitWatts")) {
			struct rp_power_limit pl = {2000, 1};
			struct rp_bmc_err err;

			b = open_bmc(&tree, 0);
			expect_limit(b, 500, 1);
			limit_set(b, 600, 1);
			expect_limit(b, 600, 1);
			assert_int_equal(rp_bmc_power_limit_set(b, &pl, &err), -1);
			assert_int_equal(err.kind, RP_BMC_REJECTED);
			expect_limit(b, 600, 1);
			rp_bmc_close(b);
		}
		mock_stop(&tree);
		json_decref(ch);
		json_decref(coll);
		json_decref(env);
	}
}

/* ---- a hostile BMC ---------------------------------------------------------------------- */

/* One read in a child of its own: its peak memory in MiB (ru_maxrss of the child alone), and the
 * entries it read in *entries (-1: the read failed). */
static long
read_peak_mib(int i, long *entries)
{
	struct rusage ru;
	int status = 0;
	pid_t pid;

	fflush(NULL);
	if ((pid = fork()) == 0) {
		struct rp_bmc_err err;
		struct rp_bmc *b = open_bmc(&M, i);
		json_t *list = NULL;
		long n = rp_bmc_sensors(b, &list, &err) < 0 ? 255 : (long)json_array_size(list);

		if (n == 255)
			fprintf(stderr, "   child read: %s\n", err.msg);
		_exit(n > 254 ? 255 : (int)n);
	}
	assert_true(pid > 0);
	assert_int_equal(wait4(pid, &status, 0, &ru), pid);
	assert_true(WIFEXITED(status));
	*entries = WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
	return ru.ru_maxrss / 1024;
}

/* ASan's redzones and quarantine of freed memory (256 MiB) count in a child's peak: the bounds
 * there are the ASan run's own (with the fix 556 and 101 MiB, without it 1243 MiB). */
#if defined(__SANITIZE_ADDRESS__)
#define PEAK_SCALE 4
#else
#define PEAK_SCALE 1
#endif

/* 16 chassis of 900 KiB of {} each (what a JSON parser takes most memory for): a read keeps one
 * at a time, what it needs of it (peak 56 MiB; 719 MiB when it kept them all). Chassis over the
 * read's cap (1 MiB) are passed by, the others read. BMC 6. */
static void
test_memory(void **state)
{
	long peak, entries;

	(void)state;
	config(&M, 6, "{\"extra_chassis\":14,\"chassis_padding_kb\":900}");
	peak = read_peak_mib(6, &entries);
	fprintf(stderr, "   16 chassis of 900 KiB: %ld entries, peak %ld MiB\n", entries, peak);
	assert_int_equal(entries, 30);
	if (peak > 250 * PEAK_SCALE)
		fail_msg("a read of 16 padded chassis peaked at %ld MiB", peak);

	config(&M, 6, "{\"extra_chassis\":4,\"chassis_padding_kb\":4096}");
	peak = read_peak_mib(6, &entries);
	fprintf(stderr, "   4 chassis of 4 MiB: %ld entries, peak %ld MiB\n", entries, peak);
	assert_int_equal(entries, 30);
	if (peak > 120 * PEAK_SCALE)
		fail_msg("a read of 4 chassis of 4 MiB peaked at %ld MiB", peak);
	config(&M, 6, "{\"extra_chassis\":0,\"chassis_padding_kb\":0}");
}

/* The deprecated limit is set with LimitException LogEventOnly (NoAction where the BMC does not
 * take that), never left at HardPowerOff; a BMC that takes neither gets no limit; a limit read
 * back with HardPowerOff is no limit as it should be. BMC 7. */
static void
test_limit_exception(void **state)
{
	struct rp_power_limit pl = {9000, 1};
	struct rp_bmc_err err;
	struct rp_bmc *b;
	char before[256], after[256];
	json_t *l;

	(void)state;
	config(&M, 7, "{\"sensor_shapes\":\"deprecated\"}");
	mock_post(&M, 7, "/__mock/power_limit",
	          "{\"set_point\":null,\"control_mode\":\"Disabled\",\"exception\":"
	          "\"HardPowerOff\"}");
	b = open_bmc(&M, 7);
	limit_set(b, 9000, 1);
	l = mock_limit(7);
	assert_string_equal(jstr(l, "exception"), "LogEventOnly");
	json_decref(l);
	expect_limit(b, 9000, 1);

	config(&M, 7, "{\"limit_exceptions\":[\"NoAction\",\"HardPowerOff\"]}");
	mock_post(&M, 7, "/__mock/power_limit", "{\"exception\":\"HardPowerOff\"}");
	limit_set(b, 8500, 1);
	l = mock_limit(7);
	assert_string_equal(jstr(l, "exception"), "NoAction");
	json_decref(l);
	expect_limit(b, 8500, 1);

	/* Only actions on the node: nothing is sent. */
	config(&M, 7, "{\"limit_exceptions\":[\"HardPowerOff\",\"Oem\"]}");
	patches(7, before, sizeof before);
	assert_int_equal(rp_bmc_power_limit_set(b, &pl, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	patches(7, after, sizeof after);
	assert_string_equal(before, after);
	/* Turning it off needs no action. */
	limit_set(b, 0, 0);
	expect_limit(b, 0, 0);

	/* Set behind the driver's back with HardPowerOff: the read says so. */
	config(&M, 7, "{\"limit_exceptions\":[]}");
	mock_post(&M, 7, "/__mock/power_limit",
	          "{\"set_point\":7000,\"control_mode\":\"Automatic\",\"exception\":"
	          "\"HardPowerOff\"}");
	assert_int_equal(rp_bmc_power_limit_get(b, &pl, &err), -1);
	assert_int_equal(err.kind, RP_BMC_MISMATCH);
	assert_non_null(strstr(err.msg, "HardPowerOff"));
	rp_bmc_close(b);
	mock_post(&M, 7, "/__mock/power_limit",
	          "{\"set_point\":null,\"control_mode\":\"Disabled\",\"exception\":"
	          "\"LogEventOnly\"}");
	config(&M, 7, "{\"sensor_shapes\":\"both\"}");
}

/* The sensor read and power limit error of BMC 8 with link_origins {kind: origin}: -1, and the
 * message (which must quote no part of the password). */
static void
masked(const char *kind, const char *origin, enum rp_bmc_errkind want, const char *has)
{
	struct rp_power_limit pl;
	struct rp_bmc_err err;
	struct rp_bmc *b;
	json_t *list = NULL;
	int k;

	config(&M, 8, "{\"link_origins\":{\"%s\":\"%s\"}}", kind, origin);
	b = open_bmc(&M, 8);
	for (k = 0; k < 2; k++) {
		int rc = k == 0 ? rp_bmc_sensors(b, &list, &err)
		                : rp_bmc_power_limit_get(b, &pl, &err);

		assert_int_equal(rc, -1);
		assert_int_equal(err.kind, want);
		if (strstr(err.msg, "sec") || strstr(err.msg, "%73") || strstr(err.msg, "ecr") ||
		    strstr(err.msg, has) == NULL)
			fail_msg("%s %s: %s", k ? "power limit" : "sensors", origin, err.msg);
		fprintf(stderr, "   %s\n", err.msg);
	}
	rp_bmc_close(b);
}

/* Links with the password in them, as it is, percent-encoded, or cut where a message cuts a link:
 * no message quotes it. BMC 8. */
static void
test_password_masked(void **state)
{
	char origin[256];

	(void)state;
	masked("chassis", "http://other.example/secret", RP_BMC_PROTOCOL, "/***/");
	masked("chassis", "http://other.example/%73e%63r%65t", RP_BMC_PROTOCOL, "/***/");
	masked("chassis", "http://other.example/a?u=admin&p=secret", RP_BMC_PROTOCOL, "p=***");
	/* "secret" across the 96th byte of the link, where a message cuts it. */
	snprintf(origin, sizeof origin, "http://other.example/%.*ssecret", 90 - 21,
	         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	masked("chassis", origin, RP_BMC_PROTOCOL, "xx***");
	/* On the BMC's own origin, answering no JSON there: "GET <link>: not a JSON object". */
	snprintf(origin, sizeof origin, "http://127.0.0.1:%d/secret", M.base + 8);
	config(&M, 8, "{\"broken_paths\":{\"/secret\":\"garbage\"}}");
	masked("chassis", origin, RP_BMC_PROTOCOL, "/***/redfish");
	config(&M, 8, "{\"broken_paths\":{},\"link_origins\":{}}");
}

/* One read has one deadline and one count of requests, however many it would make: past them it
 * ends with RP_BMC_TIMEOUT, and no request waits past the deadline. The test sets them lower
 * through the environment (RP_BMC_SENSOR_DEADLINE_MS, RP_BMC_SENSOR_TRIES). BMC 9. */
static void
test_read_limits(void **state)
{
	struct rp_bmc_err err;
	struct rp_bmc *b;
	json_t *list = NULL;
	double t0, ms;
	long r0;

	(void)state;
	/* 36 requests one by one, 150 ms each: 5.4 s without a deadline. */
	config(&M, 9, "{\"sensor_shapes\":\"sensors\",\"expand_query\":\"none\"}");
	b = open_bmc(&M, 9);
	json_decref(sensors(b)); /* logged in */
	config(&M, 9, "{\"delay_ms\":150}");
	setenv("RP_BMC_SENSOR_DEADLINE_MS", "1000", 1);
	t0 = now_ms();
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	ms = now_ms() - t0;
	assert_int_equal(err.kind, RP_BMC_TIMEOUT);
	assert_null(list);
	if (strstr(err.msg, "over its limit of 1 s") == NULL || ms < 900 || ms > 1400)
		fail_msg("%.0f ms: %s", ms, err.msg);
	fprintf(stderr, "   %.0f ms: %s\n", ms, err.msg);

	/* A BMC that answers nothing for 5 s: the request ends at the deadline. */
	config(&M, 9, "{\"delay_ms\":5000}");
	t0 = now_ms();
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	ms = now_ms() - t0;
	assert_int_equal(err.kind, RP_BMC_TIMEOUT);
	if (ms > 1400)
		fail_msg("a read with a 1 s deadline took %.0f ms: %s", ms, err.msg);
	unsetenv("RP_BMC_SENSOR_DEADLINE_MS");
	config(&M, 9, "{\"delay_ms\":0}");

	/* Ten requests: the read stops at them. */
	setenv("RP_BMC_SENSOR_TRIES", "10", 1);
	r0 = requests(&M, 9);
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	assert_int_equal(err.kind, RP_BMC_TIMEOUT);
	assert_non_null(strstr(err.msg, "10 requests"));
	assert_int_equal(requests(&M, 9) - r0, 10);
	unsetenv("RP_BMC_SENSOR_TRIES");
	/* The limits are the read's: the next call has its own. */
	json_decref(sensors(b));
	rp_bmc_close(b);
	config(&M, 9, "{\"sensor_shapes\":\"both\",\"expand_query\":\"full\"}");
}

/* Drives that were never read (their links refused) teach nothing: once their links are good, the
 * same node reads their temperatures. BMC 9. */
static void
test_drives_unread(void **state)
{
	struct rp_bmc *b;
	json_t *list;

	(void)state;
	config(&M, 9,
	       "{\"sensor_shapes\":\"both\",\"expand_query\":\"none\",\"delay_ms\":0,"
	       "\"link_origins\":{\"sensor_member\":"
	       "\"http://127.0.0.1:%d\"}}",
	       M.base + 3);
	b = open_bmc(&M, 9);
	list = sensors(b);
	assert_int_equal(count_of(list, "temperature", "drive"), 0);
	json_decref(list);
	config(&M, 9, "{\"link_origins\":{}}");
	list = sensors(b);
	assert_int_equal(count_of(list, "temperature", "drive"), 4);
	json_decref(list);
	rp_bmc_close(b);
	config(&M, 9, "{\"expand_query\":\"full\"}");
}

/* A value no double or json_int_t holds, a member that answers no JSON or an error, a broken
 * chassis: the rest is read. A read that gets nothing says why. BMC 6. */
static void
test_broken_parts(void **state)
{
	static const char *const expand[] = {"full", "none"};
	struct rp_bmc_err err;
	struct rp_bmc *b;
	json_t *list;
	size_t k;

	(void)state;
	sensor_set(6, "{\"id\":\"CPU1_Temp\",\"reading\":18446744073709551615}");
	sensor_set(6, "{\"id\":\"DIMM_A_Temp\",\"reading\":-18446744073709551615}");
	config(&M, 6,
	       "{\"broken_paths\":{\"/redfish/v1/Chassis/GPU_Baseboard/Sensors/GPU1_Temp\":"
	       "\"garbage\",\"/redfish/v1/Chassis/GPU_Baseboard/Sensors/GPU2_Temp\":\"huge\","
	       "\"/redfish/v1/Chassis/GPU_Baseboard/Sensors/GPU3_Temp\":\"500\","
	       "\"/redfish/v1/Chassis/Chassis.Embedded.1/Power\":\"huge\"}}");
	for (k = 0; k < 2; k++) {
		config(&M, 6, "{\"sensor_shapes\":\"sensors\",\"expand_query\":\"%s\"}", expand[k]);
		b = open_bmc(&M, 6);
		list = sensors(b);
		expect(list, "CPU1 Temp", "temperature", "cpu", "Cel", NAN, "ok", NULL);
		expect(list, "DIMM A Temp", "temperature", "memory", "Cel", NAN, "ok", NULL);
		expect(list, "CPU0 Temp", "temperature", "cpu", "Cel", 52, "ok", NULL);
		/* One by one, the broken members: passed by, or a null value. */
		if (k == 1) {
			assert_null(find(list, "GPU1 Temp"));
			expect(list, "GPU2 Temp", "temperature", "gpu", "Cel", NAN, "ok", NULL);
			assert_null(find(list, "GPU3 Temp"));
			assert_int_equal(count_of(list, "temperature", "gpu"), 6);
		}
		json_decref(list);
		rp_bmc_close(b);
	}
	/* The deprecated Power with a 1e400: its draw null, the rest of it read. */
	config(&M, 6, "{\"sensor_shapes\":\"deprecated\"}");
	b = open_bmc(&M, 6);
	list = sensors(b);
	expect(list, "CPU1 Temp", "temperature", "cpu", "Cel", NAN, "ok", "redfish:Thermal");
	assert_int_equal(count_of(list, "psu", "psu"), 4);
	json_decref(list);
	expect_limit(b, 0, 0);
	rp_bmc_close(b);

	/* A broken chassis: the other is read. */
	config(&M, 6,
	       "{\"sensor_shapes\":\"both\",\"expand_query\":\"full\",\"broken_paths\":{"
	       "\"/redfish/v1/Chassis/GPU_Baseboard\":\"500\"}}");
	b = open_bmc(&M, 6);
	list = sensors(b);
	assert_int_equal(count_of(list, "temperature", "gpu"), 0);
	assert_int_equal(count_of(list, "fan", "fan"), 6);
	json_decref(list);
	rp_bmc_close(b);
	/* All of them: nothing read, and why. */
	config(&M, 6,
	       "{\"broken_paths\":{\"/redfish/v1/Chassis/GPU_Baseboard\":\"500\","
	       "\"/redfish/v1/Chassis/Chassis.Embedded.1\":\"garbage\"}}");
	b = open_bmc(&M, 6);
	list = NULL;
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	assert_int_equal(err.kind, RP_BMC_PROTOCOL);
	assert_null(list);
	if (strstr(err.msg, "not a JSON object") == NULL && strstr(err.msg, "HTTP 500") == NULL)
		fail_msg("why nothing was read: %s", err.msg);
	rp_bmc_close(b);
	config(&M, 6, "{\"broken_paths\":{}}");
	sensor_set(6, "{\"id\":\"CPU1_Temp\",\"reading\":55}");
	sensor_set(6, "{\"id\":\"DIMM_A_Temp\",\"reading\":41}");
}

/* $expand advertised, but answered 400: read without it, and not asked for again. BMC 7. */
static void
test_expand_refused(void **state)
{
	struct rp_bmc *b;
	json_t *list;
	long r0, first, next;

	(void)state;
	config(&M, 7, "{\"expand_query\":\"refused\"}");
	b = open_bmc(&M, 7);
	{
		enum rp_power p;
		struct rp_bmc_err err;

		assert_int_equal(rp_bmc_power_get(b, &p, &err), 0); /* logged in */
	}
	r0 = requests(&M, 7);
	list = sensors(b);
	first = requests(&M, 7) - r0;
	assert_int_equal(json_array_size(list), 30);
	json_decref(list);
	r0 = requests(&M, 7);
	list = sensors(b);
	next = requests(&M, 7) - r0;
	assert_int_equal(json_array_size(list), 30);
	json_decref(list);
	fprintf(stderr, "   $expand refused: first read %ld requests, then %ld\n", first, next);
	/* As without $expand (both/none in shapes[]): no request with $expand again. */
	assert_true(next <= 15);
	rp_bmc_close(b);
	config(&M, 7, "{\"expand_query\":\"full\"}");
}

/* A limit that is on is 1..65535 W, and within the BMC's AllowableMin..AllowableMax: refused
 * before anything is sent. BMC 7. */
static void
test_limit_range(void **state)
{
	static const char *const shapes_[] = {"both", "deprecated"};
	static const unsigned bad[][2] = {{0, 2}, {65536, 2}, {1999, 1}, {12001, 1}};
	size_t s, k;

	(void)state;
	for (s = 0; s < 2; s++) {
		struct rp_bmc *b;
		char before[256], after[256];

		config(&M, 7, "{\"sensor_shapes\":\"%s\"}", shapes_[s]);
		b = open_bmc(&M, 7);
		limit_set(b, 5000, 1);
		for (k = 0; k < 4; k++) {
			struct rp_power_limit pl = {bad[k][0], 1};
			struct rp_bmc_err err;

			/* The deprecated Power gives no range: the BMC judges those. */
			if (s == 1 && bad[k][1] == 1)
				continue;
			patches(7, before, sizeof before);
			assert_int_equal(rp_bmc_power_limit_set(b, &pl, &err), -1);
			assert_int_equal(err.kind, RP_BMC_REJECTED);
			patches(7, after, sizeof after);
			assert_string_equal(before, after);
			fprintf(stderr, "   %s %u W: %s\n", shapes_[s], bad[k][0], err.msg);
		}
		expect_limit(b, 5000, 1);
		limit_set(b, 0, 0);
		rp_bmc_close(b);
	}
	config(&M, 7, "{\"sensor_shapes\":\"both\"}");
}

static int
setup(void **state)
{
	(void)state;
	assert_int_equal(rp_bmc_global_init(), 0);
	mock_start(&M, 10, NULL);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	mock_stop(&M);
	mock_stop(&tree);
	rp_bmc_global_cleanup();
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_shapes),
	        cmocka_unit_test(test_none),
	        cmocka_unit_test(test_power_limit),
	        cmocka_unit_test(test_busy),
	        cmocka_unit_test(test_foreign_links),
	        cmocka_unit_test(test_absurd),
	        cmocka_unit_test(test_caps),
	        cmocka_unit_test(test_dmtf_static),
	        cmocka_unit_test(test_dmtf_tree_shapes),
	        cmocka_unit_test(test_memory),
	        cmocka_unit_test(test_limit_exception),
	        cmocka_unit_test(test_password_masked),
	        cmocka_unit_test(test_read_limits),
	        cmocka_unit_test(test_drives_unread),
	        cmocka_unit_test(test_broken_parts),
	        cmocka_unit_test(test_expand_refused),
	        cmocka_unit_test(test_limit_range),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
