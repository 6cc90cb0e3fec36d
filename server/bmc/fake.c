/*
 * The fake driver: power and boot state in memory, per node, lost at exit. For demos and
 * for benchmarking the server itself; it is labelled as fake wherever it reports anything.
 * It has no event log (rp_bmc_events: RP_BMC_UNSUPPORTED): an empty one would let a rack
 * acceptance run report "no critical BMC events" for machines nobody watched.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bmc.h"

struct fake_state {
	char node[40];
	enum rp_power power;
	struct rp_boot boot;
	struct rp_power_limit limit;
	int identify;
	unsigned resets;
	char password[RP_BMC_PASSWORD_MAX + 1]; /* "" until one is set: any password opens */
	struct fake_state *next;
};

#define BUCKETS 1024
static struct fake_state *table[BUCKETS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

struct fake {
	struct rp_bmc base;
	char node[40];
	unsigned delay_ms;
	unsigned power_w, inlet_c;
};

static unsigned
bucket(const char *s)
{
	unsigned h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h % BUCKETS;
}

/* The node's state, created powered off. Caller holds mu. */
static struct fake_state *
state_of(const char *node)
{
	struct fake_state **pp = &table[bucket(node)], *s;

	for (s = *pp; s; s = s->next)
		if (!strcmp(s->node, node))
			return s;
	s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	snprintf(s->node, sizeof s->node, "%s", node);
	s->power = RP_POWER_OFF;
	s->boot.device = RP_BOOT_DISK;
	s->boot.uefi = 1;
	s->next = *pp;
	*pp = s;
	return s;
}

static void
pause_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	if (ms)
		nanosleep(&ts, NULL);
}

static struct rp_bmc *
fake_open(const struct rp_bmc_target *t, struct rp_bmc_err *err)
{
	struct fake *f = calloc(1, sizeof *f);
	struct fake_state *s;
	int refused = 0;

	/* Once a password was set through it, the fake BMC takes only that one, as a real one
	 * does after a rotation. */
	pthread_mutex_lock(&mu);
	s = state_of(t->node);
	refused = s && s->password[0] && strcmp(s->password, t->password) != 0;
	pthread_mutex_unlock(&mu);
	if (refused) {
		free(f);
		rp_bmc_fail(err, RP_BMC_AUTH, "fake BMC: wrong password for user '%s'",
		            t->username);
		return NULL;
	}
	if (f == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		return NULL;
	}
	f->base.ops = &rp_bmc_fake_ops;
	snprintf(f->node, sizeof f->node, "%s", t->node);
	f->delay_ms = t->fake_delay_ms;
	f->power_w = t->fake_power_w;
	f->inlet_c = t->fake_inlet_c;
	return &f->base;
}

static void
fake_close(struct rp_bmc *b)
{
	free(b);
}

/* A copy of the node's state, taken under the lock. */
static int
snapshot(struct fake *f, struct fake_state *out, struct rp_bmc_err *err)
{
	struct fake_state *s;

	pthread_mutex_lock(&mu);
	s = state_of(f->node);
	if (s)
		*out = *s;
	pthread_mutex_unlock(&mu);
	return s ? 0 : rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
}

static int
fake_power_get(struct rp_bmc *b, enum rp_power *out, struct rp_bmc_err *err)
{
	struct fake *f = (struct fake *)b;
	struct fake_state st = {0};

	pause_ms(f->delay_ms);
	if (snapshot(f, &st, err) < 0)
		return -1;
	*out = st.power;
	return 0;
}

/* A boot consumes a next-boot-only override, as a real BMC does. Caller holds mu. */
static void
boot_event(struct fake_state *s)
{
	if (!s->boot.persistent)
		s->boot.device = RP_BOOT_DISK;
	s->power = RP_POWER_ON;
}

static int
fake_power_set(struct rp_bmc *b, enum rp_power_action a, struct rp_bmc_err *err)
{
	struct fake *f = (struct fake *)b;
	struct fake_state *s;
	int rc = 0;

	pause_ms(f->delay_ms);
	pthread_mutex_lock(&mu);
	s = state_of(f->node);
	if (s == NULL) {
		rc = rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	} else {
		switch (a) {
		case RP_POWER_ACT_ON:
			if (s->power != RP_POWER_ON)
				boot_event(s);
			break;
		case RP_POWER_ACT_OFF:
		case RP_POWER_ACT_SOFT_OFF:
			s->power = RP_POWER_OFF;
			break;
		case RP_POWER_ACT_CYCLE:
			boot_event(s);
			break;
		case RP_POWER_ACT_RESET:
			if (s->power != RP_POWER_ON)
				rc = rp_bmc_fail(err, RP_BMC_REJECTED,
				                 "fake BMC: reset while powered off");
			else
				boot_event(s);
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

static int
fake_boot_set(struct rp_bmc *b, const struct rp_boot *want, struct rp_bmc_err *err)
{
	struct fake *f = (struct fake *)b;
	struct fake_state *s;

	pause_ms(f->delay_ms);
	pthread_mutex_lock(&mu);
	s = state_of(f->node);
	if (s)
		s->boot = *want;
	pthread_mutex_unlock(&mu);
	return s ? 0 : rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
}

static int
fake_boot_get(struct rp_bmc *b, struct rp_boot *out, struct rp_bmc_err *err)
{
	struct fake_state st = {0};

	if (snapshot((struct fake *)b, &st, err) < 0)
		return -1;
	*out = st.boot;
	return 0;
}

static int
fake_identity(struct rp_bmc *b, struct rp_bmc_identity *out, struct rp_bmc_err *err)
{
	(void)b;
	(void)err;
	memset(out, 0, sizeof *out);
	snprintf(out->manufacturer, sizeof out->manufacturer, "Rackpilot (fake BMC driver)");
	snprintf(out->model, sizeof out->model, "fake");
	snprintf(out->bmc_firmware, sizeof out->bmc_firmware, "fake-1");
	return 0;
}

static json_t *
fake_sensor(const char *name, const char *type, const char *kind, double value, const char *unit)
{
	return json_pack("{s:s, s:s, s:s, s:f, s:s, s:s, s:s}", "name", name, "type", type, "kind",
	                 kind, "value", value, "unit", unit, "health", "ok", "source", "fake");
}

/* The node's draw (options.power_w while on, capped by an active limit; 15 W while off),
 * its inlet (options.inlet_c), a CPU and a fan that follow the power state. */
static int
fake_sensors(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	struct fake *f = (struct fake *)b;
	struct fake_state st = {0};
	double watts, load;
	json_t *a, *inlet;

	pause_ms(f->delay_ms);
	if (snapshot(f, &st, err) < 0)
		return -1;
	watts = st.power == RP_POWER_ON ? f->power_w : 15;
	if (st.power == RP_POWER_ON && st.limit.active && watts > st.limit.watts)
		watts = st.limit.watts;
	load = st.power == RP_POWER_ON ? 1.0 : 0.0;
	inlet = fake_sensor("Inlet Temp", "temperature", "inlet", f->inlet_c, "Cel");
	json_object_set_new(inlet, "upper_warning", json_real(40));
	json_object_set_new(inlet, "upper_critical", json_real(45));
	a = json_pack("[o, o, o, o]", fake_sensor("System Power", "power", "system", watts, "W"),
	              inlet, fake_sensor("CPU Temp", "temperature", "cpu", 30 + 25 * load, "Cel"),
	              fake_sensor("Fan 1", "fan", "fan", 3000 + 6000 * load, "RPM"));
	if (a == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	*out = a;
	return 0;
}

static int
fake_power_limit_get(struct rp_bmc *b, struct rp_power_limit *out, struct rp_bmc_err *err)
{
	struct fake_state st = {0};

	pause_ms(((struct fake *)b)->delay_ms);
	if (snapshot((struct fake *)b, &st, err) < 0)
		return -1;
	*out = st.limit;
	return 0;
}

/* Limits from 100 W to 100 kW, as a real BMC has a range. */
static int
fake_power_limit_set(struct rp_bmc *b, const struct rp_power_limit *want, struct rp_bmc_err *err)
{
	struct fake *f = (struct fake *)b;
	struct fake_state *s;

	pause_ms(f->delay_ms);
	if (want->active && (want->watts < 100 || want->watts > 100000))
		return rp_bmc_fail(err, RP_BMC_REJECTED,
		                   "fake BMC: power limit %u W is outside 100..100000 W",
		                   want->watts);
	pthread_mutex_lock(&mu);
	s = state_of(f->node);
	if (s) {
		s->limit.active = want->active;
		s->limit.watts = want->active ? want->watts : s->limit.watts;
	}
	pthread_mutex_unlock(&mu);
	return s ? 0 : rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
}

/* Changes a node's state under the lock: set its light, count a reset, or keep a password. */
static int
fake_change(struct rp_bmc *b, int identify, int reset, const char *password, struct rp_bmc_err *err)
{
	struct fake *f = (struct fake *)b;
	struct fake_state *s;

	pause_ms(f->delay_ms);
	pthread_mutex_lock(&mu);
	s = state_of(f->node);
	if (s && identify >= 0)
		s->identify = identify;
	if (s && reset)
		s->resets++;
	if (s && password)
		snprintf(s->password, sizeof s->password, "%s", password);
	pthread_mutex_unlock(&mu);
	return s ? 0 : rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
}

/* The fake light never times out by itself: the caller turns it off. */
static int
fake_identify_set(struct rp_bmc *b, int on, unsigned seconds, int *timed, struct rp_bmc_err *err)
{
	(void)seconds;
	*timed = 0;
	return fake_change(b, on != 0, 0, NULL, err);
}

static int
fake_identify_get(struct rp_bmc *b, int *on, struct rp_bmc_err *err)
{
	struct fake_state st = {0};

	if (snapshot((struct fake *)b, &st, err) < 0)
		return -1;
	*on = st.identify;
	return 0;
}

static int
fake_reset(struct rp_bmc *b, struct rp_bmc_err *err)
{
	return fake_change(b, -1, 1, NULL, err);
}

static int
fake_password_set(struct rp_bmc *b, const char *password, struct rp_bmc_err *err)
{
	return fake_change(b, -1, 0, password, err);
}

const struct rp_bmc_ops rp_bmc_fake_ops = {
        .name = "fake",
        .open = fake_open,
        .close = fake_close,
        .power_get = fake_power_get,
        .power_set = fake_power_set,
        .boot_set = fake_boot_set,
        .boot_get = fake_boot_get,
        .identity = fake_identity,
        .sensors = fake_sensors,
        .power_limit_get = fake_power_limit_get,
        .power_limit_set = fake_power_limit_set,
        .identify_set = fake_identify_set,
        .identify_get = fake_identify_get,
        .reset = fake_reset,
        .password_set = fake_password_set,
};
