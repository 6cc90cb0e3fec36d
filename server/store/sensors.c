/* Sensors and rack power: what the sensor sweep reads, kept as latest values, a bounded
 * history and each rack's draw against its budget (docs/power.md). */
#include <math.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define RACK_STEP_MS (300 * 1000)     /* rack totals: one history row per rack per 5 minutes */
#define HEARTBEAT_MS (60 * 60 * 1000) /* a steady sensor still gets a sample this often */
#define NODE_SENSORS RP_STORE_SENSORS_MAX

static const char *const state_names[] = {"ok", "warning", "critical"};

/* A number member, or NAN. */
static double
num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Our judgement of a reading: the worse of the BMC's own and of the value against the
 * thresholds (a drive without an upper warning from its BMC gets drive_warning_c). */
static int
judge(json_t *s, double drive_warning_c)
{
	const char *health = json_string_value(json_object_get(s, "health"));
	const char *kind = json_string_value(json_object_get(s, "kind"));
	double v = num(s, "value"), uw = num(s, "upper_warning"), uc = num(s, "upper_critical");
	double lw = num(s, "lower_warning"), lc = num(s, "lower_critical");
	int st = 0;

	if (isnan(uw) && kind && !strcmp(kind, "drive") && drive_warning_c > 0)
		uw = drive_warning_c;
	if (health && !strcmp(health, "critical"))
		st = 2;
	else if (health && !strcmp(health, "warning"))
		st = 1;
	if (!isnan(v)) {
		if ((!isnan(uc) && v >= uc) || (!isnan(lc) && v <= lc))
			st = 2;
		else if (st < 1 && ((!isnan(uw) && v >= uw) || (!isnan(lw) && v <= lw)))
			st = 1;
	}
	return st;
}

/* Whether v moved far enough from the latest sample to be worth another (the dead bands keep
 * a fleet's history within sensor_history_max_rows: a sensor that jitters by a degree or a
 * few watts is not worth a row a minute): a temperature by 2 degrees, power by 2 % and 10 W,
 * a fan by 5 % and 300 RPM. */
static int
moved(const char *type, const char *unit, double v, double logged)
{
	double d = fabs(v - logged), rel = fabs(logged) * 0.01;

	if (!strcmp(type, "temperature"))
		return d >= 2.0;
	if (unit && !strcmp(unit, "%")) /* a fan's speed given only as a share of its top */
		return d >= 5.0;
	if (!strcmp(type, "fan"))
		return d >= 300.0 && d >= 5 * rel;
	return d >= 10.0 && d >= 2 * rel;
}

static int
same_num(double a, double b)
{
	return (isnan(a) && isnan(b)) || a == b;
}

static int
same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a && b && !strcmp(a, b));
}

struct record {
	json_t *readings;
	const struct rp_sensor_opts *o;
	int64_t now;
	int64_t at; /* the node's reading's time: when its BMC read began */
	int events; /* out, on success */
};

static enum rp_err
sensor_event(struct conn *c, const struct node_ref *n, json_t *s, int from, int to, int gone)
{
	char summary[256];
	const char *name = json_string_value(json_object_get(s, "name"));
	const char *unit = json_string_value(json_object_get(s, "unit")) ?: "";
	double v = num(s, "value");
	json_t *detail;
	enum rp_err e;

	if (gone)
		snprintf(summary, sizeof summary, "%s: sensor %s (%s before) is no longer reported",
		         n->name, name, state_names[from]);
	else if (to == 0)
		snprintf(summary, sizeof summary, "%s: sensor %s back to ok (%.1f %s)", n->name,
		         name, v, unit);
	else
		snprintf(summary, sizeof summary, "%s: sensor %s %s (%.1f %s)", n->name, name,
		         state_names[to], v, unit);
	detail = json_pack("{s:s, s:s?, s:s?, s:O?, s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?}",
	                   "sensor", name, "kind", json_string_value(json_object_get(s, "kind")),
	                   "type", json_string_value(json_object_get(s, "type")), "value",
	                   json_object_get(s, "value"), "unit", unit, "state",
	                   gone ? "gone" : state_names[to], "was", state_names[from],
	                   "upper_warning", json_object_get(s, "upper_warning"), "upper_critical",
	                   json_object_get(s, "upper_critical"), "lower_warning",
	                   json_object_get(s, "lower_warning"), "lower_critical",
	                   json_object_get(s, "lower_critical"));
	e = store_event(c, "rackpilotd",
	                gone || to == 0 ? "sensor.cleared"
	                : to == 2       ? "sensor.critical"
	                                : "sensor.warning",
	                "node", n->uuid, n->name, n->id, n->rack_id, summary, detail);
	json_decref(detail);
	return e;
}

/* The sensors of node n as stored: {name: {row}}; NULL on failure (*e set). */
static json_t *
stored(struct conn *c, const struct node_ref *n, enum rp_err *e)
{
	struct stmt *s = STMT_ARGS(c,
	                           "SELECT name, type, kind, unit, value, upper_warning, "
	                           "upper_critical, lower_warning, lower_critical, bmc_health "
	                           "AS health, state, source, logged_at, logged_value FROM "
	                           "sensors WHERE node_id = ?",
	                           n->id);
	json_t *rows = NULL, *map = json_object(), *r;
	size_t i;

	if ((*e = store_all(c, s, &rows)) != RP_ERR_OK) {
		json_decref(map);
		return NULL;
	}
	json_array_foreach(rows, i, r)
	        json_object_set(map, json_string_value(json_object_get(r, "name")) ?: "", r);
	json_decref(rows);
	return map;
}

static int
state_of(json_t *row)
{
	const char *st = json_string_value(json_object_get(row, "state")) ?: "ok";

	return !strcmp(st, "critical") ? 2 : !strcmp(st, "warning") ? 1 : 0;
}

/* A sensor's heartbeat: an hour and up to a quarter more, by a hash of the node and sensor,
 * so that a fleet first read in one sweep does not come due in one sweep every hour. */
static int64_t
heartbeat(int64_t node_id, const char *name)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)node_id;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ULL;
	return HEARTBEAT_MS + (int64_t)(h % (HEARTBEAT_MS / 4));
}

/* One sensor of a read: its row written when anything in it changed, a history sample when
 * its value moved or the heartbeat is due, an event when its state changed. */
static enum rp_err
one_sensor(struct record *r, struct conn *c, const struct node_ref *n, json_t *s, json_t *old)
{
	const char *name = json_string_value(json_object_get(s, "name"));
	const char *type = json_string_value(json_object_get(s, "type")) ?: "other";
	double v = num(s, "value"), logged = num(old, "logged_value");
	int to = judge(s, r->o->drive_warning_c), from = old ? state_of(old) : 0;
	int64_t logged_at = json_integer_value(json_object_get(old, "logged_at"));
	int sample, same;
	struct stmt *st;
	enum rp_err e;

	sample = !isnan(v) &&
	         (old == NULL || !json_is_integer(json_object_get(old, "logged_at")) ||
	          isnan(logged) ||
	          moved(type, json_string_value(json_object_get(s, "unit")), v, logged) ||
	          r->at - logged_at >= heartbeat(n->id, name));
	same = old && same_num(v, num(old, "value")) && from == to &&
	       same_num(num(s, "upper_warning"), num(old, "upper_warning")) &&
	       same_num(num(s, "upper_critical"), num(old, "upper_critical")) &&
	       same_num(num(s, "lower_warning"), num(old, "lower_warning")) &&
	       same_num(num(s, "lower_critical"), num(old, "lower_critical")) &&
	       same_str(json_string_value(json_object_get(s, "health")),
	                json_string_value(json_object_get(old, "health"))) &&
	       same_str(type, json_string_value(json_object_get(old, "type"))) &&
	       same_str(json_string_value(json_object_get(s, "kind")),
	                json_string_value(json_object_get(old, "kind"))) &&
	       same_str(json_string_value(json_object_get(s, "unit")),
	                json_string_value(json_object_get(old, "unit"))) &&
	       same_str(json_string_value(json_object_get(s, "source")),
	                json_string_value(json_object_get(old, "source")));
	if (same && !sample)
		return RP_ERR_OK;
	st = STMT(c, "INSERT INTO sensors(node_id, name, type, kind, unit, value, upper_warning, "
	             "upper_critical, lower_warning, lower_critical, bmc_health, state, source, "
	             "changed_at, logged_at, logged_value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
	             "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) ON CONFLICT (node_id, name) DO UPDATE "
	             "SET type = excluded.type, kind = excluded.kind, unit = excluded.unit, value "
	             "= excluded.value, upper_warning = excluded.upper_warning, upper_critical = "
	             "excluded.upper_critical, lower_warning = excluded.lower_warning, "
	             "lower_critical = excluded.lower_critical, bmc_health = excluded.bmc_health, "
	             "state = excluded.state, source = excluded.source, changed_at = CASE WHEN "
	             "?17 = 1 THEN sensors.changed_at ELSE excluded.changed_at END, logged_at = "
	             "excluded.logged_at, logged_value = excluded.logged_value");
	sql_bind_int(st, 1, n->id);
	sql_bind_text(st, 2, name);
	sql_bind_text(st, 3, type);
	store_bind_str(st, 4, s, "kind");
	store_bind_str(st, 5, s, "unit");
	store_bind_real(st, 6, s, "value");
	store_bind_real(st, 7, s, "upper_warning");
	store_bind_real(st, 8, s, "upper_critical");
	store_bind_real(st, 9, s, "lower_warning");
	store_bind_real(st, 10, s, "lower_critical");
	store_bind_str(st, 11, s, "health");
	sql_bind_text(st, 12, state_names[to]);
	store_bind_str(st, 13, s, "source");
	sql_bind_int(st, 14, r->at);
	if (sample) {
		sql_bind_int(st, 15, r->at);
		sql_bind_real(st, 16, v);
	} else {
		sql_bind_int(st, 15, logged_at);
		if (isnan(logged))
			sql_bind_null(st, 16);
		else
			sql_bind_real(st, 16, logged);
	}
	/* changed_at moves only with the value or the state */
	sql_bind_int(st, 17, old && same_num(v, num(old, "value")) && from == to);
	if ((e = store_exec(c, st, "sensor write")) != RP_ERR_OK)
		return e;
	if (sample && (e = EXEC(c, "sensor sample",
	                        "INSERT INTO sensor_history(node_id, at, name, value) VALUES (?, "
	                        "?, ?, ?) ON CONFLICT DO NOTHING",
	                        n->id, r->at, name, v)) != RP_ERR_OK)
		return e;
	if (from != to) {
		if ((e = sensor_event(c, n, s, from, to, 0)) != RP_ERR_OK)
			return e;
		r->events++;
	}
	return RP_ERR_OK;
}

/* Add rack_id to racks (an array of distinct ids) once. */
static void
touch_rack(json_t *racks, int64_t rack_id)
{
	size_t i;
	json_t *v;

	if (rack_id <= 0)
		return;
	json_array_foreach(racks, i, v)
	{
		if (json_integer_value(v) == rack_id)
			return;
	}
	json_array_append_new(racks, json_integer(rack_id));
}

static enum rp_err
one_node(struct record *r, struct conn *c, json_t *reading, json_t *racks)
{
	struct node_ref n;
	json_t *old = NULL, *sensors = json_object_get(reading, "sensors"), *s;
	const char *key;
	double power = NAN;
	size_t i;
	void *tmp;
	enum rp_err e = store_node_by_id(c, json_integer_value(json_object_get(reading, "id")), &n);

	if (e == RP_ERR_NOT_FOUND)
		return RP_ERR_OK; /* deleted during the sweep */
	if (e != RP_ERR_OK)
		return e;
	/* The time the BMC was read, not this recording's: a reading may wait for its chunk
	 * and the write lock, while a power-on happens. */
	r->at = json_integer_value(json_object_get(reading, "at"));
	if (r->at <= 0 || r->at > r->now)
		r->at = r->now;
	if (!json_is_true(json_object_get(reading, "ok")))
		return EXEC(c, "sensor read",
		            "INSERT INTO sensor_reads(node_id, tried_at, error) VALUES (?, ?, ?) "
		            "ON CONFLICT (node_id) DO UPDATE SET tried_at = excluded.tried_at, "
		            "error = excluded.error",
		            n.id, r->at,
		            json_string_value(json_object_get(reading, "error")) ?: "no answer");
	if ((old = stored(c, &n, &e)) == NULL)
		return e;
	json_array_foreach(sensors, i, s)
	{
		const char *name = json_string_value(json_object_get(s, "name"));

		/* "" is the history's read mark (rp_sensor_opts.mark_read) */
		if (name == NULL || !*name || i >= NODE_SENSORS)
			continue;
		if ((e = one_sensor(r, c, &n, s, json_object_get(old, name))) != RP_ERR_OK)
			goto out;
		if (isnan(power) &&
		    !strcmp(json_string_value(json_object_get(s, "type")) ?: "", "power") &&
		    !strcmp(json_string_value(json_object_get(s, "kind")) ?: "", "system"))
			power = num(s, "value");
		json_object_del(old, name);
	}
	/* What the BMC no longer reports goes; a sensor that goes out of warning that way says
	 * so, rather than stay in warning for ever. */
	json_object_foreach_safe(old, tmp, key, s)
	{
		int from = state_of(s);

		if ((e = EXEC(c, "sensor drop",
		              "DELETE FROM sensors WHERE node_id = ? AND name = ?", n.id, key)) !=
		    RP_ERR_OK)
			goto out;
		if (from != 0) {
			if ((e = sensor_event(c, &n, s, from, 0, 1)) != RP_ERR_OK)
				goto out;
			r->events++;
		}
	}
	{
		struct stmt *st =
		        STMT(c, "INSERT INTO sensor_reads(node_id, read_at, power_w, "
		                "tried_at, error) VALUES (?1, ?2, ?3, ?2, NULL) ON CONFLICT "
		                "(node_id) DO UPDATE SET read_at = excluded.read_at, "
		                "power_w = excluded.power_w, tried_at = excluded.tried_at, "
		                "error = NULL");

		sql_bind_int(st, 1, n.id);
		sql_bind_int(st, 2, r->at);
		if (isnan(power))
			sql_bind_null(st, 3);
		else
			sql_bind_real(st, 3, power);
		if ((e = store_exec(c, st, "sensor read")) != RP_ERR_OK)
			goto out;
	}
	if ((e = store_admission_measured(c, n.id, r->at, r->o->settle_ms)) != RP_ERR_OK ||
	    (e = store_power_cap_reading(c, n.id, json_object_get(reading, "limit"), r->at)) !=
	            RP_ERR_OK)
		goto out;
	if (r->o->mark_read && (e = EXEC(c, "sensor read mark",
	                                 "INSERT INTO sensor_history(node_id, at, name, value) "
	                                 "VALUES (?, ?, '', NULL) ON CONFLICT DO NOTHING",
	                                 n.id, r->at)) != RP_ERR_OK)
		goto out;
	touch_rack(racks, n.rack_id);
out:
	json_decref(old);
	return e;
}

/* A rack's measured draw after a read: kept, a history step updated, and an event when it
 * crossed its limit (budget x limit_pct) either way. */
static enum rp_err
one_rack(struct record *r, struct conn *c, int64_t rack_id)
{
	struct stmt *s = STMT_ARGS(
	        c,
	        "SELECT r.uuid, r.name, r.power_budget_kw, r.power_limit_pct, (SELECT "
	        "sum(x.power_w) "
	        "FROM sensor_reads x JOIN nodes n ON n.id = x.node_id WHERE n.rack_id = r.id), "
	        "(SELECT p.over FROM rack_power p WHERE p.rack_id = r.id) FROM racks r WHERE r.id "
	        "= "
	        "?",
	        rack_id);
	char uuid[RP_UUID_BUF], name[128], summary[256];
	double budget_w, limit_w, measured;
	int over, was, pct;
	enum rp_err e = store_one(c, s, "rack power");
	int64_t step = r->now - r->now % RACK_STEP_MS;

	if (e == RP_ERR_NOT_FOUND)
		return RP_ERR_OK;
	if (e != RP_ERR_OK)
		return e;
	snprintf(uuid, sizeof uuid, "%s", sql_text(s, 0));
	snprintf(name, sizeof name, "%s", sql_text(s, 1));
	budget_w = sql_type(s, 2) == SQL_NULL ? NAN : sql_real(s, 2) * 1000.0;
	pct = (int)sql_int(s, 3);
	measured = sql_type(s, 4) == SQL_NULL ? 0.0 : sql_real(s, 4);
	was = (int)sql_int(s, 5);
	sql_reset(s);
	limit_w = budget_w * pct / 100.0;
	over = !isnan(budget_w) && measured > limit_w;
	if ((e = EXEC(c, "rack power",
	              "INSERT INTO rack_power(rack_id, measured_w, read_at, over) VALUES (?, ?, ?, "
	              "?) ON CONFLICT (rack_id) DO UPDATE SET measured_w = excluded.measured_w, "
	              "read_at = excluded.read_at, over = excluded.over",
	              rack_id, measured, r->now, over)) != RP_ERR_OK ||
	    (e = EXEC(c, "rack power history",
	              "INSERT INTO rack_power_history(rack_id, at, peak_w, last_w) VALUES (?1, ?2, "
	              "?3, ?3) ON CONFLICT (rack_id, at) DO UPDATE SET peak_w = CASE WHEN "
	              "excluded.peak_w > rack_power_history.peak_w THEN excluded.peak_w ELSE "
	              "rack_power_history.peak_w END, last_w = excluded.last_w",
	              rack_id, step, measured)) != RP_ERR_OK)
		return e;
	if (over == was)
		return RP_ERR_OK;
	if (over)
		snprintf(summary, sizeof summary,
		         "rack %s draws %.1f kW, over its limit of %.1f kW (%d %% of %.1f kW)",
		         name, measured / 1000, limit_w / 1000, pct, budget_w / 1000);
	else
		snprintf(summary, sizeof summary,
		         "rack %s draws %.1f kW, back under its limit of %.1f kW", name,
		         measured / 1000, isnan(limit_w) ? 0.0 : limit_w / 1000);
	{
		json_t *detail = json_pack("{s:f, s:o, s:i}", "measured_w", measured, "limit_w",
		                           isnan(limit_w) ? json_null() : json_real(limit_w),
		                           "limit_pct", pct);

		e = store_event(c, "rackpilotd", over ? "rack.power_over_limit" : "rack.power_ok",
		                "rack", uuid, name, 0, rack_id, summary, detail);
		json_decref(detail);
	}
	if (e == RP_ERR_OK)
		r->events++;
	return e;
}

static enum rp_err
record_txn(struct conn *c, void *ctx)
{
	struct record *r = ctx;
	json_t *reading, *racks = json_array(), *v;
	size_t i;
	enum rp_err e = RP_ERR_OK;

	r->events = 0;
	/* Admissions given up (in flight 10 minutes, unmeasured 30) go here too, not only at the
	 * next power-on in their rack, so the rack views stop counting them. */
	if ((e = store_admission_expire(c, r->now)) != RP_ERR_OK)
		goto out;
	json_array_foreach(r->readings, i, reading)
	{
		if ((e = one_node(r, c, reading, racks)) != RP_ERR_OK)
			goto out;
	}
	/* And racks whose last node with a reading left or was deleted: their draw is 0 now,
	 * not what it last was. */
	{
		struct stmt *s =
		        STMT(c, "SELECT p.rack_id FROM rack_power p WHERE p.measured_w > 0 "
		                "AND NOT EXISTS (SELECT 1 FROM nodes n JOIN sensor_reads x "
		                "ON x.node_id = n.id WHERE n.rack_id = p.rack_id AND "
		                "x.power_w IS NOT NULL)");

		while (store_next(c, s, "racks without readings", &e))
			touch_rack(racks, sql_int(s, 0));
		if (e != RP_ERR_OK)
			goto out;
	}
	json_array_foreach(racks, i, v)
	{
		if ((e = one_rack(r, c, json_integer_value(v))) != RP_ERR_OK)
			goto out;
	}
out:
	json_decref(racks);
	return e;
}

enum rp_err
rp_store_sensors_record(struct rp_store *st, json_t *readings, const struct rp_sensor_opts *o,
                        int *events)
{
	struct record r = {.readings = readings, .o = o, .now = rp_time_now_ms()};
	enum rp_err e = store_txn(st, record_txn, &r);

	if (e == RP_ERR_OK && events)
		*events = r.events;
	return e;
}

/* ---- Reads ------------------------------------------------------------------------------ */

#define SENSOR_COLS                                                                                \
	"SELECT s.name, s.type, s.kind, s.value, s.unit, s.upper_warning AS "                      \
	"\"thresholds.upper_warning\", s.upper_critical AS \"thresholds.upper_critical\", "        \
	"s.lower_warning AS \"thresholds.lower_warning\", s.lower_critical AS "                    \
	"\"thresholds.lower_critical\", s.state AS health, s.bmc_health, s.source, r.read_at AS "  \
	"\"read_at:time\", s.changed_at AS \"changed_at:time\" FROM sensors s JOIN sensor_reads "  \
	"r ON r.node_id = s.node_id "

enum rp_err
rp_store_node_sensors(struct rp_store *st, const char *node, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	json_t *o = NULL, *list = NULL;
	enum rp_err e;

	if ((e = store_read_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c,
	              "SELECT read_at AS \"read_at:time\", tried_at AS \"tried_at:time\", error, "
	              "power_w FROM sensor_reads WHERE node_id = ?",
	              n.id);
	e = store_one_row(c, s, "sensor read", &o);
	if (e == RP_ERR_NOT_FOUND) {
		o = json_pack("{s:n, s:n, s:n, s:n}", "read_at", "tried_at", "error", "power_w");
		e = RP_ERR_OK;
	}
	if (e != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(c, SENSOR_COLS "WHERE s.node_id = ? ORDER BY s.type, s.kind, s.name", n.id);
	if ((e = store_all(c, s, &list)) != RP_ERR_OK)
		goto out;
	json_object_set_new(o, "node", json_string(n.name));
	json_object_set_new(o, "sensors", list);
	list = NULL;
	*out = o;
	o = NULL;
out:
	json_decref(o);
	store_read_end(c);
	return e;
}

enum rp_err
rp_store_sensor_history(struct rp_store *st, const char *node, const char *sensor, int64_t since,
                        int64_t until, size_t limit, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	json_t *samples = json_array(), *o = NULL;
	char unit[16] = "";
	size_t count = 0;
	int known;
	enum rp_err e;

	if ((e = store_read_node(st, node, &c, &n)) != RP_ERR_OK) {
		json_decref(samples);
		return e;
	}
	s = STMT_ARGS(c, "SELECT unit FROM sensors WHERE node_id = ? AND name = ?", n.id, sensor);
	if ((e = store_one(c, s, "sensor")) == RP_ERR_OK) {
		snprintf(unit, sizeof unit, "%s", sql_text(s, 0));
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND)
		goto out;
	known = e == RP_ERR_OK;
	e = RP_ERR_OK; /* store_next writes it only at the end */
	s = STMT_ARGS(c,
	              "SELECT at, value FROM sensor_history WHERE node_id = ? AND at >= ? AND at < "
	              "? AND name = ? ORDER BY at LIMIT ?",
	              n.id, since, until, sensor, (int64_t)limit + 1);
	while (store_next(c, s, "sensor history", &e)) {
		char ts[RP_TIME_BUF];

		if (count++ == limit) {
			sql_reset(s);
			break;
		}
		json_array_append_new(samples, json_pack("{s:s, s:o}", "at",
		                                         rp_time_format(sql_int(s, 0), ts), "value",
		                                         sql_type(s, 1) == SQL_NULL
		                                                 ? json_null()
		                                                 : json_real(sql_real(s, 1))));
	}
	if (e != RP_ERR_OK)
		goto out;
	if (!known && json_array_size(samples) == 0) {
		e = RP_ERR_NOT_FOUND;
		goto out;
	}
	o = json_pack("{s:s, s:s, s:s?, s:O, s:b}", "node", n.name, "sensor", sensor, "unit",
	              unit[0] ? unit : NULL, "samples", samples, "truncated", count > limit);
	*out = o;
out:
	json_decref(samples);
	store_read_end(c);
	return e;
}

/* One rack's power view, without nodes. Columns 9.. (skipped in the object) feed
 * rack_finish. */
#define RACK_POWER_COLS                                                                            \
	"SELECT r.id AS _id, r.name AS rack, r.power_budget_kw * 1000 AS budget_w, "               \
	"r.power_limit_pct AS limit_pct, r.power_budget_kw * r.power_limit_pct * 10 AS limit_w, "  \
	"p.measured_w, p.over AS \"over_limit:bool\", p.read_at AS \"read_at:time\", (SELECT "     \
	"sum(k.max_power_w) FROM nodes n JOIN node_classes k ON k.name = n.node_class WHERE "      \
	"n.rack_id = r.id) AS nameplate_w, (SELECT count(*) FROM nodes n WHERE n.rack_id = r.id) " \
	"AS _nodes, (SELECT count(*) FROM nodes n JOIN node_classes k ON k.name = n.node_class "   \
	"WHERE n.rack_id = r.id AND k.max_power_w IS NOT NULL) AS _rated, (SELECT "                \
	"coalesce(sum(coalesce(a.peak_w, 0) - coalesce(a.base_w, 0)), 0) FROM power_admissions a " \
	"WHERE a.rack_id = r.id) AS _pending, (SELECT count(*) FROM power_admissions a WHERE "     \
	"a.rack_id = r.id) AS _admitted FROM racks r LEFT JOIN rack_power p ON p.rack_id = r.id "

/* The row's object (o) completed from s's current row: nameplate_w null unless every node's
 * class rates it (a partial sum would understate the rack); projected_w (measured plus what
 * admitted power-ons not measured yet add at their peaks) and admitted; headroom_w/_pct from
 * limit_w and measured_w. */
static void
rack_finish(json_t *o, struct stmt *s)
{
	int64_t nodes = sql_int(s, 9), rated = sql_int(s, 10), admitted = sql_int(s, 12);
	double limit = num(o, "limit_w"), budget = num(o, "budget_w"),
	       measured = num(o, "measured_w");

	if (nodes != rated)
		json_object_set_new(o, "nameplate_w", json_null());
	json_object_set_new(o, "admitted", json_integer(admitted));
	json_object_set_new(
	        o, "projected_w",
	        isnan(measured) && admitted == 0
	                ? json_null()
	                : json_real((isnan(measured) ? 0 : measured) + sql_real(s, 11)));
	if (!isnan(limit) && !isnan(measured)) {
		/* As of now, not of the latest sweep (its flag drives the events): a budget just
		 * lowered shows at once. */
		json_object_set_new(o, "over_limit", json_boolean(measured > limit));
		json_object_set_new(o, "headroom_w", json_real(limit - measured));
		json_object_set_new(o, "headroom_pct",
		                    budget > 0 ? json_real((limit - measured) * 100.0 / budget)
		                               : json_null());
	} else {
		json_object_set_new(o, "headroom_w", json_null());
		json_object_set_new(o, "headroom_pct", json_null());
	}
}

enum rp_err
rp_store_rack_power(struct rp_store *st, const char *rack, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	json_t *o = NULL, *nodes = NULL;
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, rack, &id)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(c, RACK_POWER_COLS "WHERE r.id = ?", id);
	if ((e = store_one(c, s, "rack power")) != RP_ERR_OK)
		goto out;
	if ((o = store_row(c, s)) != NULL)
		rack_finish(o, s);
	sql_reset(s);
	if (o == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	s = STMT_ARGS(
	        c,
	        "SELECT n.name AS node, n.node_class AS class, x.power_w AS watts, "
	        "x.read_at AS \"read_at:time\", x.error, k.max_power_w, a.admitted_at AS "
	        "\"admission.admitted_at:time\", a.started_at AS \"admission.started_at:time\", "
	        "a.peak_w AS \"admission.peak_w\", a.forced AS \"admission.forced:bool\" FROM "
	        "nodes n LEFT JOIN sensor_reads x ON x.node_id = n.id LEFT JOIN node_classes k ON "
	        "k.name = n.node_class LEFT JOIN power_admissions a ON a.node_id = n.id WHERE "
	        "n.rack_id = ? ORDER BY n.u_position DESC, n.name",
	        id);
	if ((e = store_all(c, s, &nodes)) != RP_ERR_OK)
		goto out;
	json_object_set_new(o, "nodes", nodes);
	*out = o;
	o = NULL;
out:
	json_decref(o);
	store_read_end(c);
	return e;
}

enum rp_err
rp_store_power_overview(struct rp_store *st, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	json_t *racks = json_array(), *o;
	double measured = 0, budget = 0;
	enum rp_err e;

	if (c == NULL) {
		json_decref(racks);
		return RP_ERR_UNAVAILABLE;
	}
	s = STMT(c, RACK_POWER_COLS "ORDER BY r.name");
	while (store_next(c, s, "power overview", &e)) {
		if ((o = store_row(c, s)) == NULL)
			continue;
		rack_finish(o, s);
		if (!isnan(num(o, "measured_w")))
			measured += num(o, "measured_w");
		if (!isnan(num(o, "budget_w")))
			budget += num(o, "budget_w");
		json_array_append_new(racks, o);
	}
	if (e != RP_ERR_OK) {
		json_decref(racks);
		return e;
	}
	*out = json_pack("{s:f, s:f, s:o}", "measured_w", measured, "budget_w", budget, "racks",
	                 racks);
	return RP_ERR_OK;
}

enum rp_err
rp_store_rack_power_history(struct rp_store *st, const char *rack, int64_t since, int64_t until,
                            json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	json_t *rows = NULL;
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = store_id_of(c, T_RACK, rack, &id)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c,
	              "SELECT at AS \"at:time\", peak_w, last_w FROM rack_power_history WHERE "
	              "rack_id = ? AND at >= ? AND at < ? ORDER BY at",
	              id, since, until);
	if ((e = store_all(c, s, &rows)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c, "SELECT name FROM racks WHERE id = ?", id);
	if ((e = store_one(c, s, "rack")) != RP_ERR_OK) {
		json_decref(rows);
		return e;
	}
	*out = json_pack("{s:s, s:i, s:o}", "rack", sql_text(s, 0), "step_s", RACK_STEP_MS / 1000,
	                 "samples", rows);
	sql_reset(s);
	return RP_ERR_OK;
}

enum rp_err
rp_store_sensor_rows(struct rp_store *st, const char *type,
                     int (*fn)(void *arg, const struct rp_sensor_row *r), void *arg)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	s = STMT(c, "SELECT n.name, r.name, s.name, s.type, s.kind, s.value, s.state, s.unit "
	            "FROM sensors "
	            "s JOIN nodes n ON n.id = s.node_id LEFT JOIN racks r ON r.id = n.rack_id "
	            "WHERE CAST(?1 AS TEXT) IS NULL OR s.type = ?1 ORDER BY n.name, s.name");
	if (type)
		sql_bind_text(s, 1, type);
	else
		sql_bind_null(s, 1);
	while (store_next(c, s, "sensor rows", &e)) {
		struct rp_sensor_row row = {
		        .node = sql_text(s, 0),
		        .rack = sql_type(s, 1) == SQL_NULL ? "" : sql_text(s, 1),
		        .name = sql_text(s, 2),
		        .type = sql_text(s, 3),
		        .kind = sql_text(s, 4),
		        .value = sql_type(s, 5) == SQL_NULL ? NAN : sql_real(s, 5),
		        .state = sql_text(s, 6),
		        .unit = sql_text(s, 7),
		};

		if (fn(arg, &row) != 0) {
			sql_reset(s);
			return RP_ERR_OK;
		}
	}
	return e;
}

enum rp_err
rp_store_sensor_peaks(struct rp_store *st, const char *node, int64_t since, int64_t until,
                      json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	json_t *sensors = NULL, *o = NULL, *rack = json_null();
	int64_t samples = 0;
	enum rp_err e;

	if ((e = store_read_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	/* Read in the window: reads marked in it (rp_sensor_opts.mark_read). */
	s = STMT_ARGS(c,
	              "SELECT count(*) FROM sensor_history WHERE node_id = ? AND at >= ? AND at < "
	              "? AND name = ''",
	              n.id, since, until);
	if ((e = store_one(c, s, "sensor reads")) != RP_ERR_OK)
		goto out;
	samples = sql_int(s, 0);
	sql_reset(s);
	/* A sensor's highest value in the window: its samples there; or, when it has none
	 * there, the value it held (its latest sample before: with reads marked in the window,
	 * a move past its dead band would have been sampled). A sensor that moved in the window
	 * does not count the value before: it may have changed before the window opened. */
	s = STMT_ARGS(c,
	              "SELECT s.name, s.type, s.kind, s.unit, s.upper_warning, s.upper_critical, "
	              "(SELECT max(h.value) FROM sensor_history h WHERE h.node_id = s.node_id AND "
	              "h.at >= ?2 AND h.at < ?3 AND h.name = s.name) AS _in, (SELECT h.value FROM "
	              "sensor_history h WHERE h.node_id = s.node_id AND h.at < ?2 AND h.name = "
	              "s.name ORDER BY h.at DESC LIMIT 1) AS _before FROM sensors s WHERE "
	              "s.node_id = ?1 ORDER BY s.name",
	              n.id, since, until);
	sensors = json_array();
	while (store_next(c, s, "sensor peaks", &e)) {
		json_t *row = store_row(c, s);
		double peak = NAN;

		if (sql_type(s, 6) != SQL_NULL)
			peak = sql_real(s, 6);
		else if (sql_type(s, 7) != SQL_NULL)
			peak = sql_real(s, 7);
		if (row == NULL)
			continue;
		json_object_set_new(row, "peak", isnan(peak) ? json_null() : json_real(peak));
		json_array_append_new(sensors, row);
	}
	if (e != RP_ERR_OK)
		goto out;
	if (n.rack_id > 0) {
		s = STMT_ARGS(
		        c,
		        "SELECT r.name, r.power_budget_kw * r.power_limit_pct * 10, (SELECT "
		        "max(h.peak_w) FROM rack_power_history h WHERE h.rack_id = r.id AND h.at > "
		        "?2 AND h.at < ?3) FROM racks r WHERE r.id = ?1",
		        n.rack_id, since - RACK_STEP_MS, until);
		if ((e = store_one(c, s, "rack peak")) != RP_ERR_OK)
			goto out;
		json_decref(rack);
		rack = json_pack(
		        "{s:s, s:o, s:o}", "rack", sql_text(s, 0), "limit_w",
		        sql_type(s, 1) == SQL_NULL ? json_null() : json_real(sql_real(s, 1)),
		        "peak_w",
		        sql_type(s, 2) == SQL_NULL ? json_null() : json_real(sql_real(s, 2)));
		sql_reset(s);
	}
	o = json_pack("{s:I, s:O, s:O}", "samples", (json_int_t)samples, "sensors", sensors, "rack",
	              rack);
	*out = o;
out:
	json_decref(sensors);
	json_decref(rack);
	store_read_end(c);
	return e;
}

enum rp_err
rp_store_sensor_read_at(struct rp_store *st, int64_t node_id, int64_t *at)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	s = STMT_ARGS(c, "SELECT coalesce(read_at, 0) FROM sensor_reads WHERE node_id = ?",
	              node_id);
	if ((e = store_one(c, s, "sensor read")) == RP_ERR_NOT_FOUND) {
		*at = 0;
		return RP_ERR_OK;
	}
	if (e != RP_ERR_OK)
		return e;
	*at = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}
