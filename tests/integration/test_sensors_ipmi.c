/*
 * rp_bmc_sensors and rp_bmc_power_limit_* through the IPMI driver, against OpenIPMI's ipmi_sim
 * (tests/ipmi/bmcsim.sh with DCMI=1: SDR sensors read from files, the DCMI plug-in). The oracle is
 * freeipmi: every value, threshold and health the driver returns is compared with what
 * ipmi-sensors and ipmi-dcmi print for the same BMC at the same moment, not with numbers of this
 * file's own.
 *
 * BMCs (one ipmi_sim, shared mode, so the plug-in maps each MC to its own state directory):
 * - bmc1: the fixture's sensors; values, thresholds, power reading and power limits.
 * - bmc2: odd sensors added from sensors.conf (control characters, 16 and 24 byte names, no
 *   thresholds, a repeated name), and a sensor hot-added while the test runs: its SDR changes
 *   between two reads, which the driver's SDR cache must notice.
 * - bmc3: no DCMI (the plug-in answers "invalid command").
 * - another ipmi_sim: a BMC without sensors and without DCMI.
 * The plug-in counts the Get SDR requests each BMC answers (statedir/sdr_reads): a read through the
 * warm SDR cache asks for none.
 *
 * ipmi_sim, freeipmi's tools and a C compiler with libopenipmi-dev are needed: the test fails
 * without them when CI=true (.ci/deps installs them), and is skipped (77) elsewhere.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bmc/bmc.h"
#include "harness.h"

#define PASSWORD "password"
#define NBMC     3

static char run[64], bare_run[64];
static int base, bare_port;

/* ---- helpers ------------------------------------------------------------------------ */

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
sim(const char *env, const char *cmd, const char *dir, int port, int count)
{
	return sh_rc("%s BASE_PORT=%d SHARED_PER_PROC=%d BMC_SENSOR_POLL_MS=200 sh "
	             "%s/tests/ipmi/bmcsim.sh %s %s %.0d %s >/dev/null 2>&1",
	             env, port, NBMC, rp_test_src, cmd, dir, count, count ? "shared" : "");
}

/* Start count BMCs under a new run directory; before, prepare (may be NULL) writes files into
 * dir/bmcN. */
static void
sim_start(char *dir, size_t len, int *port, int count, const char *env,
          void (*prepare)(const char *dir))
{
	int attempt;

	for (attempt = 0; attempt < 8; attempt++) {
		snprintf(dir, len, "/tmp/rp-sens-XXXXXX");
		assert_non_null(mkdtemp(dir));
		if (prepare)
			prepare(dir);
		*port = 30000 + (int)((getpid() * 13 + attempt * 151 + count) % 600) * 16;
		if (sim(env, "start", dir, *port, count) == 0)
			return;
		sh_rc("rm -rf %s", dir);
	}
	fail_msg("ipmi_sim did not start");
}

/* path of a state file of BMC n of the main run */
static const char *
state(int n, const char *file)
{
	static char path[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(path[i], sizeof path[i], "%s/bmc%d/%s", run, n, file);
	return path[i];
}

static void
put(int n, const char *file, const char *text)
{
	FILE *f = fopen(state(n, file), "w");

	assert_non_null(f);
	fprintf(f, "%s\n", text);
	fclose(f);
}

/* Empty a state file. */
static void
empty(int n, const char *file)
{
	FILE *f = fopen(state(n, file), "w");

	assert_non_null(f);
	fclose(f);
}

static long
sdr_reads(int n)
{
	char buf[32];

	return atol(slurp(state(n, "sdr_reads"), buf, sizeof buf));
}

static struct rp_bmc *
open_ipmi(int port, const char *node)
{
	json_t *j = json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:[s], s:i, s:i}}", "driver", "ipmi",
	                      "address", "127.0.0.1", "port", port, "username", "admin", "password",
	                      PASSWORD, "options", "workarounds", "opensesspriv",
	                      "session_timeout_ms", 2000, "retransmission_timeout_ms", 500);
	struct rp_bmc_target t;
	struct rp_bmc_err err;
	struct rp_bmc *b;

	if (rp_bmc_target_from_json(j, node, &t, &err) < 0)
		fail_msg("target: %s", err.msg);
	json_decref(j);
	if ((b = rp_bmc_open(&t, &err)) == NULL)
		fail_msg("open: %s", err.msg);
	return b;
}

static struct rp_bmc *
open_bmc(int n)
{
	char node[40];

	snprintf(node, sizeof node, "sensors-node-%d", n);
	return open_ipmi(base + n - 1, node);
}

static json_t *
sensors(struct rp_bmc *b)
{
	struct rp_bmc_err err;
	json_t *list = NULL;

	if (rp_bmc_sensors(b, &list, &err) < 0)
		fail_msg("sensors: %s (%s)", err.msg, rp_bmc_err_name(err.kind));
	assert_true(json_is_array(list));
	assert_true(json_array_size(list) <= RP_BMC_SENSORS_MAX);
	return list;
}

static json_t *
find(json_t *list, const char *name)
{
	size_t i;
	json_t *s;

	json_array_foreach(list, i, s) if (strcmp(jstr(s, "name"), name) == 0) return s;
	fail_msg("no sensor '%s' in %s", name, json_dumps(list, JSON_COMPACT));
	return NULL;
}

/* The output of a shell command (stdout and stderr), its exit status in *rc. */
static char *
capture(int *rc, const char *fmt, ...)
{
	static char out[65536];
	char cmd[2048];
	size_t n = 0, r;
	va_list ap;
	FILE *p;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (n < sizeof out - 1 && (r = fread(out + n, 1, sizeof out - 1 - n, p)) > 0)
		n += r;
	out[n] = '\0';
	st = pclose(p);
	*rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

#define FI_OPTS                                                                                    \
	"-u admin -p " PASSWORD " -D LAN_2_0 -W opensesspriv --session-timeout=5000 "              \
	"--retransmission-timeout=500"

/* ---- the oracle: freeipmi ------------------------------------------------------------ */

struct fi_sensor {
	char name[64]; /* as the driver must print it: non-printable bytes '?' */
	char type[32];
	char state[16];
	char units[32];
	char event[256];
	double reading; /* NAN: N/A */
	double lnr, lc, lnc, unc, uc, unr;
};

static double
fi_number(const char *s)
{
	return strcmp(s, "N/A") == 0 ? NAN : atof(s);
}

/* ipmi-sensors for BMC n (its SDR cached in dir/fi-cacheN: the plug-in's Get SDR count then
 * sees the driver's reads only). The sensors, in SDR order; *count of them. */
static struct fi_sensor *
fi_sensors(int n, size_t *count)
{
	static struct fi_sensor out[64];
	char *text, *line, *save = NULL;
	int rc;

	text = capture(
	        &rc,
	        "mkdir -p %s/fi-cache%d && ipmi-sensors -h 127.0.0.1:%d " FI_OPTS
	        " --sdr-cache-directory=%s/fi-cache%d --quiet-cache --output-sensor-thresholds "
	        "--output-sensor-state --non-abbreviated-units --comma-separated-output "
	        "--no-header-output 2>&1",
	        run, n, base + n - 1, run, n);
	if (rc != 0)
		fail_msg("ipmi-sensors failed (%d): %s", rc, text);
	*count = 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[13], *p = line;
		struct fi_sensor *s;
		int i;

		for (i = 0; i < 13; i++) {
			f[i] = p;
			p = i < 12 ? strchr(p, ',') : NULL;
			if (i < 12 && p == NULL)
				fail_msg("ipmi-sensors line with %d fields: %s", i + 1, line);
			if (p)
				*p++ = '\0';
		}
		assert_true(*count < 64);
		s = &out[(*count)++];
		snprintf(s->name, sizeof s->name, "%s", f[1]);
		for (i = 0; s->name[i]; i++)
			if ((unsigned char)s->name[i] < 0x20 || (unsigned char)s->name[i] >= 0x7f)
				s->name[i] = '?';
		snprintf(s->type, sizeof s->type, "%s", f[2]);
		snprintf(s->state, sizeof s->state, "%s", f[3]);
		s->reading = fi_number(f[4]);
		snprintf(s->units, sizeof s->units, "%s", f[5]);
		s->lnr = fi_number(f[6]);
		s->lc = fi_number(f[7]);
		s->lnc = fi_number(f[8]);
		s->unc = fi_number(f[9]);
		s->uc = fi_number(f[10]);
		s->unr = fi_number(f[11]);
		snprintf(s->event, sizeof s->event, "%s", f[12]);
	}
	return out;
}

/* Forget freeipmi's SDR cache of BMC n (its SDR changed). */
static void
fi_forget(int n)
{
	sh("rm -rf %s/fi-cache%d", run, n);
}

/* ipmi-dcmi --get-system-power-statistics: the current watts, NAN when not measured. */
static double
fi_power(int n)
{
	char *text, *p;
	int rc;

	text = capture(&rc,
	               "ipmi-dcmi -h 127.0.0.1:%d " FI_OPTS " --get-system-power-statistics 2>&1",
	               base + n - 1);
	if (rc != 0)
		fail_msg("ipmi-dcmi failed (%d): %s", rc, text);
	if (strstr(text, "Power Measurement                    : Active") == NULL)
		return NAN;
	if ((p = strstr(text, "Current Power                        : ")) == NULL)
		fail_msg("ipmi-dcmi: no current power in %s", text);
	return atof(p + 39);
}

/* ipmi-dcmi --get-power-limit: the watts it prints, or -1 when it says none is set. */
static long
fi_limit(int n)
{
	char *text, *p;
	int rc;

	text = capture(&rc, "ipmi-dcmi -h 127.0.0.1:%d " FI_OPTS " --get-power-limit 2>&1",
	               base + n - 1);
	if (rc != 0 && strstr(text, "No Set Power Limit"))
		return -1;
	if (rc != 0 || (p = strstr(text, "Power Limit Requested")) == NULL)
		fail_msg("ipmi-dcmi --get-power-limit (%d): %s", rc, text);
	if (strstr(text, "Log event to SEL only (11h)") == NULL)
		fail_msg("the limit's exception action is not \"log to SEL only\": %s", text);
	return atol(strchr(p, ':') + 1);
}

/* What freeipmi says of a sensor's health. Threshold sensors: its event column (freeipmi's own
 * state column calls a non-critical threshold "Nominal"; the contract calls it a warning).
 * Discrete sensors: its state column. NULL: it says nothing (no reading). */
static const char *
fi_health(const struct fi_sensor *f, int discrete)
{
	if (discrete) {
		if (strcmp(f->state, "Nominal") == 0)
			return "ok";
		if (strcmp(f->state, "Warning") == 0)
			return "warning";
		if (strcmp(f->state, "Critical") == 0)
			return "critical";
		return NULL;
	}
	if (isnan(f->reading))
		return NULL;
	if (strstr(f->event, "Non-Recoverable"))
		return "critical";
	if (strstr(f->event, " Critical Threshold"))
		return "critical";
	if (strstr(f->event, "Non-Critical"))
		return "warning";
	if (strcmp(f->event, "'OK'") == 0)
		return "ok";
	fail_msg("ipmi-sensors event '%s' of %s", f->event, f->name);
	return NULL;
}

static void
expect_number(json_t *s, const char *key, double want, const char *what)
{
	json_t *v = json_object_get(s, key);

	if (isnan(want)) {
		if (v != NULL && !json_is_null(v))
			fail_msg("%s: %s is %s, freeipmi says N/A", what, key,
			         json_dumps(v, JSON_ENCODE_ANY));
		return;
	}
	if (!json_is_number(v))
		fail_msg("%s: %s missing, freeipmi says %.2f", what, key, want);
	if (fabs(json_number_value(v) - want) > 0.005)
		fail_msg("%s: %s is %.3f, freeipmi says %.2f", what, key, json_number_value(v),
		         want);
}

static const char *
fi_type(const char *type)
{
	if (strcmp(type, "Temperature") == 0)
		return "temperature";
	if (strcmp(type, "Fan") == 0)
		return "fan";
	if (strcmp(type, "Power Supply") == 0)
		return "psu";
	return NULL;
}

/* Everything the driver says of BMC n against what freeipmi says: the SDR sensors one by one,
 * in order, and DCMI's system power. Returns the driver's list. */
static json_t *
compare(struct rp_bmc *b, int n)
{
	json_t *list = sensors(b), *names = json_object();
	size_t count, i, j = 0;
	struct fi_sensor *fi = fi_sensors(n, &count);
	json_t *s;
	int dcmi = 0;

	json_array_foreach(list, i, s)
	{
		if (strcmp(jstr(s, "source"), "dcmi") == 0) {
			assert_int_equal(dcmi++, 0);
			assert_string_equal(jstr(s, "type"), "power");
			assert_string_equal(jstr(s, "kind"), "system");
			assert_string_equal(jstr(s, "unit"), "W");
			expect_number(s, "value", fi_power(n), "system power");
		}
		/* every name once */
		if (json_object_get(names, jstr(s, "name")))
			fail_msg("name '%s' twice", jstr(s, "name"));
		json_object_set_new(names, jstr(s, "name"), json_true());
	}
	json_decref(names);
	json_array_foreach(list, i, s)
	{
		const struct fi_sensor *f;
		char what[96];
		int discrete;
		const char *h;

		if (strcmp(jstr(s, "source"), "sdr") != 0)
			continue;
		while (j < count && fi_type(fi[j].type) == NULL)
			j++;
		if (j == count)
			fail_msg("the driver has sensor '%s' that freeipmi does not list",
			         jstr(s, "name"));
		f = &fi[j++];
		snprintf(what, sizeof what, "BMC %d sensor '%s'", n, f->name);
		/* The same name, or that name made unique. */
		if (strncmp(jstr(s, "name"), f->name, strlen(f->name)) != 0 ||
		    (jstr(s, "name")[strlen(f->name)] != '\0' &&
		     strncmp(jstr(s, "name") + strlen(f->name), " #", 2) != 0))
			fail_msg("%s: the driver calls it '%s'", what, jstr(s, "name"));
		assert_string_equal(jstr(s, "type"), fi_type(f->type));
		discrete = strcmp(f->units, "N/A") == 0;
		expect_number(s, "value", f->reading, what);
		if (!discrete) {
			expect_number(s, "lower_critical", f->lc, what);
			expect_number(s, "lower_warning", f->lnc, what);
			expect_number(s, "upper_warning", f->unc, what);
			expect_number(s, "upper_critical", f->uc, what);
		}
		h = fi_health(f, discrete);
		if (h == NULL ? !json_is_null(json_object_get(s, "health"))
		              : jstr(s, "health") == NULL || strcmp(jstr(s, "health"), h) != 0)
			fail_msg("%s: health %s, freeipmi says %s (%s / %s)", what,
			         json_dumps(json_object_get(s, "health"), JSON_ENCODE_ANY),
			         h ? h : "nothing", f->state, f->event);
	}
	while (j < count && fi_type(fi[j].type) == NULL)
		j++;
	if (j < count)
		fail_msg("freeipmi lists sensor '%s' that the driver does not", fi[j].name);
	return list;
}

/* Write a sensor's value file and wait until freeipmi reads it back (ipmi_sim polls the file
 * every 200 ms): the value, or for a discrete sensor the state that health stands for. */
static void
set_sensor(int n, const char *key, const char *name, const char *value, const char *health)
{
	double until = now_ms() + 5000;
	char file[64];

	snprintf(file, sizeof file, "sensors/%s", key);
	put(n, file, value);
	for (;;) {
		size_t count, i;
		struct fi_sensor *fi = fi_sensors(n, &count);

		for (i = 0; i < count; i++) {
			const char *h;

			if (strcmp(fi[i].name, name) != 0)
				continue;
			if (strcmp(fi[i].units, "N/A") != 0) {
				if (fabs(fi[i].reading - atof(value)) < 0.5)
					return;
			} else if ((h = fi_health(&fi[i], 1)) && strcmp(h, health) == 0) {
				return;
			}
		}
		if (now_ms() > until)
			fail_msg("freeipmi does not read %s = %s within 5 s", name, value);
		usleep(100 * 1000);
	}
}

/* ---- the SDR repository's clock, through ipmitool (raw: it prints no times of this BMC) ---- */

#define IPMITOOL "ipmitool -I lanplus -C 3 -H 127.0.0.1 -U admin -P " PASSWORD

/* Get SDR Repository Info's most recent addition timestamp of BMC n. */
static unsigned long
repo_added(int n)
{
	unsigned b[14];
	char *text;
	int rc;

	text = capture(&rc, IPMITOOL " -p %d raw 0x0a 0x20 2>&1", base + n - 1);
	if (rc != 0 || sscanf(text, "%x %x %x %x %x %x %x %x %x", &b[0], &b[1], &b[2], &b[3], &b[4],
	                      &b[5], &b[6], &b[7], &b[8]) != 9)
		fail_msg("Get SDR Repository Info (%d): %s", rc, text);
	return b[5] | b[6] << 8 | b[7] << 16 | (unsigned long)b[8] << 24;
}

/* Set SDR Repository Time of BMC n: the next addition is stamped t (in the same second). */
static void
repo_time(int n, unsigned long t)
{
	sh(IPMITOOL " -p %d raw 0x0a 0x29 0x%02lx 0x%02lx 0x%02lx 0x%02lx >/dev/null", base + n - 1,
	   t & 255, t >> 8 & 255, t >> 16 & 255, t >> 24 & 255);
}

/* ---- tests --------------------------------------------------------------------------- */

/* The fixture's sensors, each checked against freeipmi; and what the contract says of their
 * type, kind and unit, which freeipmi does not print. */
static void
test_matches_freeipmi(void **st)
{
	struct rp_bmc *b = open_bmc(1);
	json_t *list = compare(b, 1);
	static const char *const want[][4] = {
	        {"System Power", "power", "system", "W"},
	        {"Inlet Temp", "temperature", "inlet", "Cel"},
	        {"Exhaust Temp", "temperature", "exhaust", "Cel"},
	        {"CPU1 Temp", "temperature", "cpu", "Cel"},
	        {"CPU2 Temp", "temperature", "cpu", "Cel"},
	        {"GPU1 Temp", "temperature", "gpu", "Cel"},
	        {"DIMM1 Temp", "temperature", "memory", "Cel"},
	        {"NVMe0 Temp", "temperature", "drive", "Cel"},
	        {"FAN1", "fan", "fan", "RPM"},
	        {"PSU1 Status", "psu", "psu", "W"},
	        {"PSU1 Input", "psu", "psu", "W"},
	};
	size_t i;

	(void)st;
	assert_int_equal(json_array_size(list), sizeof want / sizeof want[0]);
	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		json_t *s = json_array_get(list, i);

		assert_string_equal(jstr(s, "name"), want[i][0]);
		assert_string_equal(jstr(s, "type"), want[i][1]);
		assert_string_equal(jstr(s, "kind"), want[i][2]);
		assert_string_equal(jstr(s, "unit"), want[i][3]);
		assert_string_equal(jstr(s, "source"), i == 0 ? "dcmi" : "sdr");
	}
	/* The seeded values, as freeipmi read them too. */
	assert_true(json_real_value(json_object_get(find(list, "System Power"), "value")) == 350);
	assert_true(json_real_value(json_object_get(find(list, "FAN1"), "value")) == 6000);
	assert_true(json_is_null(json_object_get(find(list, "PSU1 Status"), "value")));
	assert_string_equal(jstr(find(list, "PSU1 Status"), "health"), "ok");
	json_decref(list);
	rp_bmc_close(b);
}

/* Values follow the files through the warm SDR cache (no Get SDR at all), and crossing a
 * threshold changes the health as freeipmi sees it. */
static void
test_values_follow(void **st)
{
	static const struct {
		const char *key, *name, *value, *health;
	} steps[] = {
	        {"cpu1", "CPU1 Temp", "88", "warning"},
	        {"cpu1", "CPU1 Temp", "97", "critical"},
	        {"cpu1", "CPU1 Temp", "101", "critical"},
	        {"cpu1", "CPU1 Temp", "45", "ok"},
	        {"inlet", "Inlet Temp", "7", "warning"},
	        {"inlet", "Inlet Temp", "3", "critical"},
	        {"inlet", "Inlet Temp", "24", "ok"},
	        {"fan1", "FAN1", "900", "warning"},
	        {"fan1", "FAN1", "400", "critical"},
	        {"fan1", "FAN1", "6000", "ok"},
	        {"psu1_in", "PSU1 Input", "1616", "warning"},
	        {"psu1_in", "PSU1 Input", "480", "ok"},
	        {"psu1", "PSU1 Status", "3", "critical"},
	        {"psu1", "PSU1 Status", "1", "ok"},
	        {"gpu1", "GPU1 Temp", "91", "critical"},
	        {"gpu1", "GPU1 Temp", "55", "ok"},
	};
	struct rp_bmc *b = open_bmc(1);
	json_t *list;
	size_t i;
	long reads;

	(void)st;
	empty(1, "sdr_reads");
	json_decref(sensors(b)); /* warm, whatever ran before */
	reads = sdr_reads(1);
	for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		json_t *s;

		set_sensor(1, steps[i].key, steps[i].name, steps[i].value, steps[i].health);
		list = compare(b, 1);
		s = find(list, steps[i].name);
		if (strcmp(jstr(s, "health"), steps[i].health) != 0)
			fail_msg("%s = %s: health %s, want %s", steps[i].name, steps[i].value,
			         jstr(s, "health"), steps[i].health);
		if (strcmp(steps[i].key, "psu1") != 0)
			assert_true(json_real_value(json_object_get(s, "value")) ==
			            atof(steps[i].value));
		json_decref(list);
	}
	/* Not one Get SDR: the SDR came from the cache every time. */
	assert_int_equal(sdr_reads(1), reads);
	/* A new handle (a new session) to the same node uses the same cache. */
	rp_bmc_close(b);
	b = open_bmc(1);
	json_decref(sensors(b));
	assert_int_equal(sdr_reads(1), reads);
	/* Past its age a cached SDR is walked again, though the repository says the same
	 * (thresholds set with Set Sensor Thresholds leave it so). */
	setenv("RP_BMC_SDR_MAX_AGE_MS", "1", 1);
	usleep(5000);
	json_decref(sensors(b));
	unsetenv("RP_BMC_SDR_MAX_AGE_MS");
	assert_true(sdr_reads(1) > reads);
	reads = sdr_reads(1);
	json_decref(sensors(b));
	assert_int_equal(sdr_reads(1), reads);
	rp_bmc_close(b);
}

static void
test_power_reading(void **st)
{
	struct rp_bmc *b = open_bmc(1);
	json_t *list;

	(void)st;
	put(1, "power_watts", "612");
	list = compare(b, 1);
	assert_true(json_real_value(json_object_get(json_array_get(list, 0), "value")) == 612);
	json_decref(list);
	put(1, "power_watts", "700 500 900 650"); /* current, min, max, average */
	list = compare(b, 1);
	assert_true(json_real_value(json_object_get(json_array_get(list, 0), "value")) == 700);
	json_decref(list);
	/* Off: the node draws nothing the BMC counts. */
	put(1, "power", "0");
	list = compare(b, 1);
	assert_true(json_real_value(json_object_get(json_array_get(list, 0), "value")) == 0);
	json_decref(list);
	put(1, "power", "1");
	/* A BMC that measures nothing now: the entry stays, without a value. */
	sh("rm -f %s", state(1, "power_watts"));
	list = compare(b, 1);
	assert_string_equal(jstr(json_array_get(list, 0), "kind"), "system");
	assert_true(json_is_null(json_object_get(json_array_get(list, 0), "value")));
	json_decref(list);
	put(1, "power_watts", "350");
	rp_bmc_close(b);
}

static void
expect_limit(struct rp_bmc *b, unsigned watts, int active)
{
	struct rp_power_limit l = {12345, 7};
	struct rp_bmc_err err;

	if (rp_bmc_power_limit_get(b, &l, &err) < 0)
		fail_msg("power limit: %s", err.msg);
	if (l.watts != watts || l.active != active)
		fail_msg("power limit %u W active %d, want %u W active %d", l.watts, l.active,
		         watts, active);
}

static int
set_limit(struct rp_bmc *b, unsigned watts, int active, struct rp_bmc_err *err)
{
	struct rp_power_limit want = {watts, active};

	return rp_bmc_power_limit_set(b, &want, err);
}

static void
test_power_limit(void **st)
{
	struct rp_bmc *b = open_bmc(1);
	struct rp_bmc_err err;
	char buf[256];

	(void)st;
	/* Never set: completion code 0x80, and freeipmi says so too. */
	expect_limit(b, 0, 0);
	assert_int_equal(fi_limit(1), -1);

	empty(1, "ops.log");
	if (set_limit(b, 450, 1, &err) < 0)
		fail_msg("set 450 W: %s", err.msg);
	expect_limit(b, 450, 1);
	assert_int_equal(fi_limit(1), 450);
	/* Log to SEL only (0x11), never power off; set, then activated. */
	assert_string_equal(slurp(state(1, "power_limit"), buf, sizeof buf), "450 1 0x11 1000 1\n");
	assert_string_equal(slurp(state(1, "ops.log"), buf, sizeof buf),
	                    "set power_limit 450 0x11 1000 1\nset power_limit_active 1\n");

	/* Changed behind the driver's back. */
	put(1, "power_limit", "500 1 0x11 1000 1");
	expect_limit(b, 500, 1);
	assert_int_equal(fi_limit(1), 500);

	/* Out of the BMC's range: refused, in words, and nothing changes. */
	empty(1, "ops.log");
	assert_int_equal(set_limit(b, 5000, 1, &err), -1);
	assert_int_equal(err.kind, RP_BMC_REJECTED);
	if (strstr(err.msg, "out of range") == NULL || strstr(err.msg, "5000 W") == NULL)
		fail_msg("message: %s", err.msg);
	assert_null(strstr(err.msg, PASSWORD));
	put(1, "power_limit_range", "100 400");
	assert_int_equal(set_limit(b, 450, 1, &err), -1);
	assert_int_equal(err.kind, RP_BMC_REJECTED);
	assert_string_equal(slurp(state(1, "power_limit"), buf, sizeof buf), "500 1 0x11 1000 1\n");
	assert_string_equal(slurp(state(1, "ops.log"), buf, sizeof buf), "");
	expect_limit(b, 500, 1);
	assert_int_equal(set_limit(b, 0, 1, &err), -1);
	assert_int_equal(err.kind, RP_BMC_REJECTED);
	sh("rm -f %s", state(1, "power_limit_range"));

	/* Removed: deactivated. The BMC keeps the watts, not enforced (0x80 with the limit). */
	if (set_limit(b, 0, 0, &err) < 0)
		fail_msg("remove: %s", err.msg);
	expect_limit(b, 500, 0);
	assert_string_equal(slurp(state(1, "power_limit"), buf, sizeof buf), "500 0 0x11 1000 1\n");
	/* Nothing enforced any more: removing it again sends nothing. */
	empty(1, "ops.log");
	if (set_limit(b, 0, 0, &err) < 0)
		fail_msg("remove again: %s", err.msg);
	assert_string_equal(slurp(state(1, "ops.log"), buf, sizeof buf), "");

	/* Set by freeipmi: the driver reads it. */
	sh("ipmi-dcmi -h 127.0.0.1:%d " FI_OPTS " --set-power-limit --power-limit-requested=300 "
	   ">/dev/null && ipmi-dcmi -h 127.0.0.1:%d " FI_OPTS
	   " --activate-deactivate-power-limit=activate >/dev/null",
	   base, base);
	expect_limit(b, 300, 1);
	/* And the correction time and sampling period the BMC keeps survive a change of watts. */
	put(1, "power_limit", "300 1 0x11 2500 5");
	if (set_limit(b, 320, 1, &err) < 0)
		fail_msg("set 320 W: %s", err.msg);
	assert_string_equal(slurp(state(1, "power_limit"), buf, sizeof buf), "320 1 0x11 2500 5\n");
	assert_int_equal(fi_limit(1), 320);
	sh("rm -f %s", state(1, "power_limit"));
	expect_limit(b, 0, 0);
	rp_bmc_close(b);
}

/* A BMC without DCMI: no system power entry; power limits unsupported, nothing written. */
static void
test_no_dcmi(void **st)
{
	struct rp_bmc *b = open_bmc(3);
	struct rp_power_limit l = {1, 1};
	struct rp_bmc_err err;
	json_t *list = compare(b, 3), *s;
	size_t i;

	(void)st;
	json_array_foreach(list, i, s) assert_string_equal(jstr(s, "source"), "sdr");
	assert_int_equal(json_array_size(list), 10);
	json_decref(list);
	assert_int_equal(rp_bmc_power_limit_get(b, &l, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	assert_int_equal(l.watts, 1); /* untouched */
	assert_int_equal(set_limit(b, 400, 1, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	assert_int_equal(access(state(3, "power_limit"), F_OK), -1);
	rp_bmc_close(b);
}

/* Odd SDR records (bmc2's sensors.conf): names with control characters, of 16 and of 24 bytes
 * (the SDR holds 16), no thresholds, a name twice. freeipmi agrees on every value. */
static void
test_odd_sensors(void **st)
{
	struct rp_bmc *b = open_bmc(2);
	json_t *list = compare(b, 2), *s;
	size_t i;

	(void)st;
	json_array_foreach(list, i, s)
	{
		const char *name = jstr(s, "name"), *p;

		for (p = name; *p; p++)
			if (*p < 0x20 || *p > 0x7e)
				fail_msg("unprintable byte 0x%02x in '%s'", (unsigned char)*p,
				         name);
		assert_true(strlen(name) <= 63);
	}
	s = find(list, "Ctl??[31mRed?");
	assert_true(json_real_value(json_object_get(s, "value")) == 31);
	assert_string_equal(jstr(s, "kind"), "board");
	s = find(list, "ABCDEFGHIJKLMNOP");
	assert_true(json_real_value(json_object_get(s, "upper_critical")) == 60);
	find(list, "QRSTUVWXYZ012345"); /* the first 16 of the 24 bytes */
	s = find(list, "GPU2 Temp");
	assert_string_equal(jstr(s, "kind"), "gpu");
	assert_null(json_object_get(s, "upper_warning"));
	assert_null(json_object_get(s, "upper_critical"));
	assert_null(json_object_get(s, "lower_warning"));
	assert_null(json_object_get(s, "lower_critical"));
	assert_string_equal(jstr(s, "health"), "ok");
	assert_true(json_real_value(json_object_get(find(list, "CPU1 Temp"), "value")) == 45);
	s = find(list, "CPU1 Temp #2");
	assert_true(json_real_value(json_object_get(s, "value")) == 50);
	assert_true(json_real_value(json_object_get(s, "upper_warning")) == 80);
	json_decref(list);
	rp_bmc_close(b);
}

/* The SDR of bmc2 changes between two reads (a sensor hot-added): the next read walks it again
 * and shows the new sensor; the one after comes from the cache again. */
static void
test_sdr_changes(void **st)
{
	struct rp_bmc *b = open_bmc(2);
	int attempt, same = 0;
	json_t *list;
	long before;
	size_t n;

	(void)st;
	empty(2, "sdr_reads");
	list = sensors(b);
	n = json_array_size(list);
	json_decref(list);
	before = sdr_reads(2);
	json_decref(sensors(b));
	assert_int_equal(sdr_reads(2), before);

	sh("sh %s/tests/ipmi/bmcsim.sh sensor-add %s 2 "
	   "'hot 40 0x01 0x01 0x0b 3 1 1 0 - - - 83 90 - 61 GPU3 Temp' >/dev/null",
	   rp_test_src, run);
	fi_forget(2);
	list = compare(b, 2);
	assert_int_equal(json_array_size(list), n + 1);
	assert_true(json_real_value(json_object_get(find(list, "GPU3 Temp"), "value")) == 61);
	assert_true(json_real_value(json_object_get(find(list, "GPU3 Temp"), "upper_critical")) ==
	            90);
	json_decref(list);
	assert_true(sdr_reads(2) > before);
	before = sdr_reads(2);
	json_decref(sensors(b));
	assert_int_equal(sdr_reads(2), before);

	/* A change that leaves the timestamps as they were: only the record count tells. The SDR
	 * clock is set back to the last addition's time before the next one; a try where a second
	 * passed in between does not count. */
	for (attempt = 0; attempt < 8 && !same; attempt++) {
		unsigned long added;
		char spec[128];

		json_decref(sensors(b));
		added = repo_added(2);
		before = sdr_reads(2);
		repo_time(2, added);
		snprintf(spec, sizeof spec,
		         "same%d %d 0x01 0x01 0x07 %d 1 1 0 - - - - - - 42 Same%d", attempt,
		         50 + attempt, 10 + attempt, attempt);
		sh("sh %s/tests/ipmi/bmcsim.sh sensor-add %s 2 '%s' >/dev/null", rp_test_src, run,
		   spec);
		if (repo_added(2) != added)
			continue;
		same = 1;
		snprintf(spec, sizeof spec, "Same%d", attempt);
		list = sensors(b);
		assert_true(json_real_value(json_object_get(find(list, spec), "value")) == 42);
		json_decref(list);
		assert_true(sdr_reads(2) > before);
	}
	assert_true(same);
	fi_forget(2);
	json_decref(compare(b, 2));
	rp_bmc_close(b);
}

/* No sensors and no DCMI at all: unsupported, like no power limit. */
static void
test_no_sensors(void **st)
{
	struct rp_bmc *b = open_ipmi(bare_port, "sensors-node-bare");
	struct rp_power_limit l;
	struct rp_bmc_err err;
	json_t *list = NULL;

	(void)st;
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	assert_null(list);
	assert_int_equal(rp_bmc_power_limit_get(b, &l, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	rp_bmc_close(b);
}

/* A read has one count of requests (and one deadline) for all it sends: an SDR walk past it ends
 * with RP_BMC_TIMEOUT, and for some minutes the next reads of that BMC fail at once with that error
 * instead of walking again (no Get SDR). The count is set low through the environment. Nodes of
 * their own: the SDR cache and the failures are kept per node and BMC. */
static void
test_read_limits(void **st)
{
	struct rp_bmc *b = open_ipmi(base, "sensors-limits-node"), *other;
	struct rp_bmc_err err;
	json_t *list = NULL;
	double t0, ms;
	long reads;

	(void)st;
	setenv("RP_BMC_SENSOR_TRIES", "6", 1);
	reads = sdr_reads(1);
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	unsetenv("RP_BMC_SENSOR_TRIES");
	assert_int_equal(err.kind, RP_BMC_TIMEOUT);
	assert_null(list);
	if (strstr(err.msg, "over its limit of 90 s and 6 requests") == NULL)
		fail_msg("message: %s", err.msg);
	assert_true(sdr_reads(1) - reads <= 6);

	reads = sdr_reads(1);
	t0 = now_ms();
	assert_int_equal(rp_bmc_sensors(b, &list, &err), -1);
	ms = now_ms() - t0;
	assert_int_equal(err.kind, RP_BMC_TIMEOUT);
	if (strstr(err.msg, "6 requests") == NULL || strstr(err.msg, "walked again in") == NULL)
		fail_msg("message: %s", err.msg);
	fprintf(stderr, "   again, %.1f ms: %s\n", ms, err.msg);
	assert_int_equal(sdr_reads(1), reads);
	rp_bmc_close(b);

	/* Another node on the same BMC has its own limits and walk. */
	other = open_ipmi(base, "sensors-limits-node-2");
	json_decref(sensors(other));
	assert_true(sdr_reads(1) > reads);
	rp_bmc_close(other);
}

/* A BMC that answers Get Power Limit with 0x80 and its data zeroed keeps no correction time or
 * sampling period: Set Power Limit sends the defaults (1000 ms, 1 s), never 0. */
static void
test_limit_zeroed(void **st)
{
	struct rp_bmc *b = open_bmc(1);
	struct rp_bmc_err err;
	char buf[256];

	(void)st;
	put(1, "power_limit", "0 0 0 0 0");
	expect_limit(b, 0, 0);
	empty(1, "ops.log");
	if (set_limit(b, 450, 1, &err) < 0)
		fail_msg("set 450 W: %s", err.msg);
	assert_string_equal(slurp(state(1, "power_limit"), buf, sizeof buf), "450 1 0x11 1000 1\n");
	assert_string_equal(slurp(state(1, "ops.log"), buf, sizeof buf),
	                    "set power_limit 450 0x11 1000 1\nset power_limit_active 1\n");
	sh("rm -f %s", state(1, "power_limit"));
	expect_limit(b, 0, 0);
	rp_bmc_close(b);
}

/* One rp_bmc_sensors with the SDR cache cold and warm, and freeipmi's two tools (their SDR cache
 * on disk, warm), on the same BMC: printed for the record; the cold read walks the SDR, the warm
 * one does not. */
static void
test_timing(void **st)
{
	struct rp_bmc *b = open_ipmi(base, "sensors-timing-node");
	double t0, cold, warm = 1e9, tools = 1e9;
	long reads;
	int i, rc;

	(void)st;
	reads = sdr_reads(1);
	t0 = now_ms();
	json_decref(sensors(b));
	cold = now_ms() - t0;
	assert_true(sdr_reads(1) > reads);
	reads = sdr_reads(1);
	for (i = 0; i < 5; i++) {
		t0 = now_ms();
		json_decref(sensors(b));
		if (now_ms() - t0 < warm)
			warm = now_ms() - t0;
	}
	assert_int_equal(sdr_reads(1), reads);
	for (i = 0; i < 5; i++) {
		t0 = now_ms();
		capture(&rc,
		        "ipmi-sensors -h 127.0.0.1:%d " FI_OPTS
		        " --sdr-cache-directory=%s/fi-cache1 --quiet-cache "
		        "--output-sensor-thresholds "
		        ">/dev/null && ipmi-dcmi -h 127.0.0.1:%d " FI_OPTS
		        " --get-system-power-statistics >/dev/null",
		        base, run, base);
		assert_int_equal(rc, 0);
		if (now_ms() - t0 < tools)
			tools = now_ms() - t0;
	}
	fprintf(stderr,
	        "timing (one BMC, best of 5; the driver's session is open): rp_bmc_sensors cold "
	        "%.2f ms, warm %.2f ms; ipmi-sensors + ipmi-dcmi %.2f ms\n",
	        cold, warm, tools);
	rp_bmc_close(b);
}

/* ---- set-up ------------------------------------------------------------------------ */

/* bmc2's odd sensors, and no DCMI on bmc3. */
static void
prepare(const char *dir)
{
	char path[128];
	FILE *f;

	sh("mkdir -p %s/bmc2 %s/bmc3 && touch %s/bmc3/no_dcmi", dir, dir, dir);
	snprintf(path, sizeof path, "%s/bmc2/sensors.conf", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("ctl 20 0x01 0x01 0x07 1 1 1 0 - - - - - - 31 Ctl\\x01\\x1b[31mRed\\x7f\n"
	      "long16 21 0x01 0x01 0x07 2 1 1 0 - - - 50 60 - 33 ABCDEFGHIJKLMNOP\n"
	      "long24 22 0x01 0x01 0x07 3 1 1 0 - - - - - - 34 QRSTUVWXYZ0123456789abcd\n"
	      "nothr 23 0x01 0x01 0x0b 2 1 1 0 - - - - - - 40 GPU2 Temp\n"
	      "dup 24 0x01 0x01 0x03 9 1 1 0 - - - 80 - - 50 CPU1 Temp\n",
	      f);
	fclose(f);
}

static int
setup(void **st)
{
	(void)st;
	assert_int_equal(rp_bmc_global_init(), 0);
	sim_start(run, sizeof run, &base, NBMC, "DCMI=1", prepare);
	/* Powered on: DCMI reads 0 W while off. */
	put(1, "power", "1");
	put(2, "power", "1");
	sim_start(bare_run, sizeof bare_run, &bare_port, 1, "BMC_SENSORS=0", NULL);
	return 0;
}

static int
teardown(void **st)
{
	(void)st;
	sim("", "stop", run, base, 0);
	sim("", "stop", bare_run, bare_port, 0);
	sh_rc("rm -rf %s %s", run, bare_run);
	rp_bmc_global_cleanup();
	return 0;
}

/* What this test needs that a machine may lack: the simulator, freeipmi's tools, a compiler and
 * OpenIPMI's headers for the plug-in. */
static int
missing(char *what, size_t len)
{
	static const char *const tools[] = {"ipmi_sim", "ipmi-sensors", "ipmi-dcmi", "ipmitool",
	                                    "ss"};
	size_t i;

	what[0] = '\0';
	for (i = 0; i < sizeof tools / sizeof tools[0]; i++)
		if (sh_rc("command -v %s >/dev/null 2>&1", tools[i]) != 0)
			snprintf(what + strlen(what), len - strlen(what), " %s", tools[i]);
	if (sh_rc("command -v ${CC:-cc} >/dev/null 2>&1") != 0)
		snprintf(what + strlen(what), len - strlen(what), " cc");
	if (access("/usr/include/OpenIPMI/serv.h", R_OK) != 0)
		snprintf(what + strlen(what), len - strlen(what), " libopenipmi-dev");
	return what[0] != '\0';
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_matches_freeipmi), cmocka_unit_test(test_values_follow),
	        cmocka_unit_test(test_power_reading),    cmocka_unit_test(test_power_limit),
	        cmocka_unit_test(test_no_dcmi),          cmocka_unit_test(test_odd_sensors),
	        cmocka_unit_test(test_sdr_changes),      cmocka_unit_test(test_no_sensors),
	        cmocka_unit_test(test_timing),           cmocka_unit_test(test_read_limits),
	        cmocka_unit_test(test_limit_zeroed),
	};
	const char *ci = getenv("CI");
	char what[128];

	if (missing(what, sizeof what)) {
		if (ci && strcmp(ci, "true") == 0) {
			fprintf(stderr,
			        "test_sensors_ipmi: missing%s (CI=true: .ci/deps installs "
			        "them)\n",
			        what);
			return 1;
		}
		fprintf(stderr, "test_sensors_ipmi: skipped, missing%s\n", what);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
