/*
 * rackpilot — the command-line client of rackpilotd: the command table, the command line,
 * the configuration (flags > environment > $XDG_CONFIG_HOME/rackpilot/config), dispatch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rackpilot/version.h>

#include "cli.h"

#define DEFAULT_URL "http://127.0.0.1:8475"

/* One command a row or two. */
// clang-format off
#define NODE_OPTS                                                                              \
	"json= name= rack= u=u_position:i u-height=u_height:i serial= system-uuid=system_uuid "    \
	"vendor= model= class=node_class tags=:l macs=:l bios-profile=bios_profile "               \
	"boot-profile=boot_profile maintenance=:b reason=maintenance_reason bmc-driver=bmc.driver " \
	"bmc-address=bmc.address bmc-port=bmc.port:i bmc-user=bmc.username "                       \
	"bmc-password=bmc.password bmc-tls-verify=bmc.tls_verify:b ssh-address=ssh.address "       \
	"ssh-port=ssh.port:i ssh-user=ssh.user"
#define NODE_COLS                                                                              \
	":NAME=name,RACK=rack,U=u_position,CLASS=node_class,STATE=provision_state,"               \
	"POWER=power_state,MAINT=maintenance,BMC=bmc.driver,TAGS=tags"
#define POWER(verb, force, help)                                                               \
	{"power", verb, rp_cli_power, 0, 1, "PUT", "/v1/nodes/%s/power",                          \
	 "%target rack= tag= class= timeout=timeout_s:i " force "wait no-wait",                   \
	 "job {id} queued: power {params.target} {node}", "NODE | --rack R | --tag T | --class C", \
	 help}
#define BOOT(verb, help)                                                                       \
	{"boot", verb, rp_cli_run, 1, 1, "PUT", "/v1/nodes/%s/boot",                              \
	 "%device persistent:b mode= wait", "job {id} queued: boot {params.device} {node}", "NODE", \
	 help}
#define PROVISION(verb, help)                                                                  \
	{"provision", verb, rp_cli_run, 1, 1, "PUT", "/v1/nodes/%s/provision",                    \
	 "%action image= disk= recipe= args=:j wipe= timeout=timeout_s:i boot-mode=boot_mode "     \
	 "power-off=power_off:b config=:j format= seed=:b grow=:b first-boot=first_boot:b "        \
	 "first-boot-timeout=first_boot_timeout_s:i efi-loader=efi_loader wait",                   \
	 "node {0}: {state}{provision_state} {job.id}", "NODE", help}
#define ROLLOUT(verb, opts, help)                                                              \
	{"rollout", verb, rp_cli_run, 1, 1, "POST", "/v1/rollouts/%s/" verb, opts,                \
	 "rollout {id}: {state}", "ID", help}

static const struct rp_cli_cmd commands[] = {
	{"rack", "list", rp_cli_run, 0, 0, "GET", "/v1/racks", "site= row=",
	 ":NAME=name,SITE=site,ROW=row,HEIGHT=height_u,NODES=node_count,NOTES=notes", "",
	 "list racks"},
	{"rack", "show", rp_cli_run, 1, 1, "GET", "/v1/racks/%s", "", ".", "RACK", "show a rack"},
	{"rack", "create", rp_cli_run, 1, 1, "POST", "/v1/racks",
	 "@name site= row= height=height_u:i power-kw=power_budget_kw:n "
	 "power-limit-pct=power_limit_pct:i power-cap=power_cap notes=",
	 "created rack {name} (version {version})", "NAME", "create a rack"},
	{"rack", "update", rp_cli_run, 1, 1, "PATCH", "/v1/racks/%s",
	 "name= site= row= height=height_u:i power-kw=power_budget_kw:n "
	 "power-limit-pct=power_limit_pct:i power-cap=power_cap notes=",
	 "updated rack {name} (version {version})", "RACK",
	 "change a rack (JSON merge patch: the value null clears a member)"},
	{"rack", "delete", rp_cli_run, 1, 1, "DELETE", "/v1/racks/%s", "", "deleted rack {0}", "RACK",
	 "delete an empty rack"},
	{"rack", "elevation", rp_cli_run, 1, 1, "GET", "/v1/racks/%s/elevation", "",
	 "nodes:U=u_position,HEIGHT=u_height,NODE=name,CLASS=node_class,STATE=provision_state,"
	 "POWER=power_state,MAINT=maintenance;unplaced:UNPLACED=name",
	 "RACK", "the rack's nodes, top to bottom"},
	{"rack", "import", rp_cli_import, 1, 1, "POST", "/v1/import", "dry-run",
	 "{racks_created} racks, {nodes_created} nodes", "FILE|-",
	 "import racks and nodes from CSV (or a JSON manifest), all rows or none; --dry-run "
	 "only checks"},
	{"rack", "accept", rp_cli_run, 1, 1, "POST", "/v1/racks/%s/acceptance", "json=",
	 "acceptance of rack {rack} started (attempt {attempt}); follow it with rackpilot rack "
	 "report {rack}",
	 "RACK", "run the rack's acceptance checks (--json FILE: {checks, burn_in, fabric, nccl})"},
	{"rack", "report", rp_cli_run, 1, 1, "GET", "/v1/racks/%s/acceptance", "attempt=",
	 ":RACK=rack,ATTEMPT=attempt,STATE=state,SHA256=report_sha256;results:NODE=node,"
	 "CHECK=check,STATE=state,MESSAGE=message,FIX=fix;pairs:KIND=kind,ROUND=round,"
	 "SERVER=server,CLIENT=client,STATE=state,MESSAGE=message",
	 "RACK", "the rack's acceptance report, node by check, then the tests across nodes"},
	{"node", "list", rp_cli_run, 0, 0, "GET", "/v1/nodes",
	 "rack= state= tag= class= power= maintenance= q=", NODE_COLS, "", "list nodes"},
	{"node", "show", rp_cli_run, 1, 1, "GET", "/v1/nodes/%s", "", ".", "NODE", "show a node"},
	{"node", "create", rp_cli_run, 0, 1, "POST", "/v1/nodes", "@name " NODE_OPTS,
	 "created node {name} (version {version})", "[NAME]",
	 "create a node from --json FILE|- and/or options"},
	{"node", "update", rp_cli_run, 1, 1, "PATCH", "/v1/nodes/%s", NODE_OPTS,
	 "updated node {name} (version {version})", "NODE",
	 "change a node (JSON merge patch: the value null clears a member)"},
	{"node", "delete", rp_cli_run, 1, 1, "DELETE", "/v1/nodes/%s", "", "deleted node {0}",
	 "NODE", "delete a node"},
	POWER("on", "force:b ",
	      "power on when its rack has room (--force, admin: past it; bulk: queue a batch and "
	      "follow it)"),
	POWER("off", "", "power off, hard"),
	POWER("soft-off", "", "shut down through the OS, hard off after --timeout"),
	POWER("cycle", "force:b ", "power cycle (a node that is off is powered on, as by on)"),
	POWER("reset", "force:b ", "warm reset (a node that is off is powered on, as by on)"),
	{"power", "status", rp_cli_run, 0, 1, "GET", "/v1/nodes|/v1/nodes/%s", "rack= tag= class=",
	 ":NAME=name,POWER=power_state,READ=power_state_at,MAINT=maintenance,BMC=bmc.driver,"
	 "FAULT=bmc.fault.message",
	 "[NODE]", "the power state last read (every node, one, or --rack/--tag/--class)"},
	{"power", "show", rp_cli_power_show, 0, 1, "GET", "/v1/power|/v1/racks/%s/power", "", "",
	 "[RACK]",
	 "racks' measured draw against their limit and budget (kW), or one rack and its nodes"},
	{"power", "history", rp_cli_run, 1, 1, "GET", "/v1/racks/%s/power/history", "since= until=",
	 ".;samples:AT=at,PEAK W=peak_w,LAST W=last_w", "RACK",
	 "a rack's measured draw per 5 minutes, peak and latest (default: the last day)"},
	{"power", "cap", rp_cli_power_cap, 1, 1, "POST", "/v1/racks/%s/power-cap", "wait", "",
	 "RACK",
	 "plan a rack's power caps from its power_cap policy and set them at the BMCs (--wait: "
	 "follow the batch; exit 3 when a node failed or was skipped)"},
	{"power", "caps", rp_cli_power_caps, 0, 0, "GET", "/v1/power/caps", "rack= drift", "", "",
	 "planned power caps against the limits the BMCs enforce (--drift: only those that "
	 "differ)"},
	{"sensors", "history", rp_cli_run, 2, 2, "GET", "/v1/nodes/%s/sensors/history?sensor=%s",
	 "since= until= limit=", ".;samples:AT=at,VALUE=value", "NODE SENSOR",
	 "a sensor's samples, oldest first (default: the last day)"},
	{"sensors", "sync", rp_cli_sensors_sync, 0, 0, "POST", "/v1/sensors/sync", "wait", "", "",
	 "read every node's sensors now (--wait: until done; exit 3 when a BMC did not answer)"},
	{"sensors", NULL, rp_cli_sensors, 1, 1, "GET", "/v1/nodes/%s/sensors", "", "", "NODE",
	 "a node's sensors as last read: value, health, thresholds"},
	{"identify", "off", rp_cli_run, 1, 1, "PUT", "/v1/nodes/%s/identify", "%on:b wait",
	 "job {id} queued: identify off {node}", "NODE", "turn the node's locator LED off"},
	{"identify", NULL, rp_cli_run, 1, 1, "PUT", "/v1/nodes/%s/identify", "%on:b seconds=:i wait",
	 "job {id} queued: identify {node}", "NODE",
	 "light the node's locator LED (--seconds N: off again after N s; else until identify "
	 "off)"},
	{"bmc", "reset", rp_cli_run, 1, 1, "POST", "/v1/nodes/%s/bmc/reset",
	 "timeout=timeout_s:i wait", "job {id} queued: BMC reset of {node}", "NODE",
	 "restart the node's BMC (not the host); the job waits until it answers again"},
	{"bmc", "rotate", rp_cli_run, 1, 1, "POST", "/v1/nodes/%s/bmc/credentials/rotate",
	 "json= wait", "job {id} queued: BMC credential rotation of {node}", "NODE",
	 "give the node's BMC user a new generated password (--json FILE|- {password}: an "
	 "admin's explicit one, kept off the command line)"},
	{"console", NULL, rp_cli_console, 1, 1, "GET", "/v1/nodes/%s/console", "read-only", "",
	 "NODE",
	 "the node's serial console (~. leaves, ~? lists the escapes; --read-only: watch "
	 "without typing)"},
	BOOT("pxe", "boot from the network next (--persistent: every time)"),
	BOOT("disk", "boot from the disk next"),
	PROVISION("manage", "verify the BMC; the node becomes manageable"),
	PROVISION("adopt", "adopt a discovered node"),
	PROVISION("commission", "inventory and check a node"),
	PROVISION("deploy", "write --image to the node's disk; done at the OS's first boot "
	                    "(--config JSON, --disk, --recipe, --args JSON)"),
	PROVISION("release", "wipe a deployed node back to ready (--wipe)"),
	PROVISION("abort", "abort the action under way"),
	{"bios", "show", rp_cli_run, 1, 1, "GET", "/v1/nodes/%s/bios", "",
	 ".;diff:DIFFERS=name,ACTUAL=actual,DESIRED=desired", "NODE",
	 "BIOS values of a node against its profile"},
	{"bios", "diff", rp_cli_run, 1, 1, "GET", "/v1/nodes/%s/bios", "",
	 "diff:ATTRIBUTE=name,ACTUAL=actual,DESIRED=desired", "NODE",
	 "only the values that differ from the profile"},
	{"firmware", "show", rp_cli_run, 1, 1, "GET", "/v1/nodes/%s/firmware", "",
	 ".;components:COMPONENT=component,VERSION=version,DESIRED=desired,STATUS=status,"
	 "READ=read_at",
	 "NODE", "firmware of a node against its baseline"},
	{"firmware", "drift", rp_cli_run, 0, 0, "GET", "/v1/firmware/drift", "rack= class= node=",
	 ".;items:NODE=node,RACK=rack,CLASS=node_class,BASELINE=baseline,"
	 "COMPONENT ACTUAL DESIRED=components",
	 "", "nodes whose firmware differs from their baseline"},
	{"export", "prometheus", rp_cli_run, 0, 0, "GET", "/v1/exports/prometheus",
	 "rack= tag= class= node-exporter-port=node_exporter_port dcgm-port=dcgm_port", "=", "",
	 "Prometheus HTTP service discovery: node_exporter and DCGM exporter targets"},
	{"export", "ansible", rp_cli_run, 0, 0, "GET", "/v1/exports/ansible", "rack= tag= class=",
	 "=", "", "an Ansible dynamic inventory (groups by rack, class, state and tag)"},
	{"export", "hosts", rp_cli_run, 0, 0, "GET", "/v1/exports/hosts", "rack= tag= class=", "=",
	 "", "/etc/hosts lines of the nodes with an address"},
	{"export", "slurm", rp_cli_run, 0, 0, "GET", "/v1/exports/slurm",
	 "rack= tag= class= default=", "=", "",
	 "slurm.conf NodeName and PartitionName lines of nodes that match their class "
	 "(--default CLASS: that partition is the default)"},
	{"export", "gres", rp_cli_run, 0, 0, "GET", "/v1/exports/slurm/gres.conf",
	 "rack= tag= class= autodetect=", "=", "",
	 "Slurm gres.conf (--autodetect off: explicit GPU device lines)"},
	{"rollout", "create", rp_cli_run, 0, 0, "POST", "/v1/rollouts", "+json=",
	 "rollout {id}: {state}, {wave_count} waves", "",
	 "plan and start a firmware or BIOS rollout (--json FILE|-: a RolloutInput)"},
	{"rollout", "show", rp_cli_run, 0, 1, "GET", "/v1/rollouts|/v1/rollouts/%s",
	 "state= kind=",
	 ":ID=id,KIND=kind,STATE=state,WAVE=current_wave,WAVES=wave_count,NODES=counts.total,"
	 "FAILED=failures.current,CREATED=created_at|"
	 ".;waves:WAVE=index,CANARY=canary,STATE=state,NODES=nodes,STARTED=started_at,"
	 "GATE DONE=gate_done_at;nodes:NODE=node,RACK=rack,WAVE=wave,STATE=state,PHASE=phase,"
	 "REASON=reason",
	 "[ID]", "list rollouts, or show one"},
	ROLLOUT("pause", "", "no later wave starts"),
	ROLLOUT("resume", "retry-failed=retry_failed:b max-failures=max_failures:i",
	        "resume a paused rollout"),
	ROLLOUT("abort", "", "abort a rollout"),
	{"job", "list", rp_cli_run, 0, 0, "GET", "/v1/jobs", "node= state= type= batch= limit=",
	 ":ID=id,TYPE=type,NODE=node,STATE=state,CREATED=created_at,ERROR=error.code", "",
	 "jobs, newest first (one page: --limit)"},
	{"job", "show", rp_cli_job_show, 1, 1, "GET", "/v1/jobs/%s", "log",
	 ".;steps:STEP=id,TYPE=type,STATE=state,EXIT=exit_code,MS=duration_ms,ERROR=error", "ID",
	 "show a job (--log: and its log)"},
	{"job", "watch", rp_cli_job_watch, 1, 1, NULL, NULL, "", NULL, "ID",
	 "follow a job and its log until it ends"},
	{"job", "cancel", rp_cli_run, 1, 1, "DELETE", "/v1/jobs/%s", "",
	 "job {id}: {state} (cancel requested: {cancel_requested})", "ID",
	 "cancel a queued job, or ask a running one to stop"},
	{"events", NULL, rp_cli_events, 0, 0, "GET", "/v1/events",
	 "node= rack= action= since= until= limit= follow poll",
	 ":ID=id,AT=at,ACTION=action,ACTOR=actor,SUMMARY=summary", "",
	 "the event log, newest first (--follow: oldest first, then as they happen; --poll: "
	 "poll instead of streaming)"},
	{"webhook", "create", rp_cli_run, 0, 0, "POST", "/v1/webhooks", "+json=",
	 "created webhook {name} ({id})", "",
	 "create a webhook from --json FILE|- ({name?, url, events, secret}: the secret stays off "
	 "the command line)"},
	{"webhook", "list", rp_cli_run, 0, 0, "GET", "/v1/webhooks", "",
	 ":NAME=name,ENABLED=enabled,PENDING=pending,URL=url", "", "list the webhooks"},
	{"webhook", "show", rp_cli_run, 1, 1, "GET", "/v1/webhooks/%s", "", ".", "WEBHOOK",
	 "show a webhook (never its secret)"},
	{"webhook", "update", rp_cli_run, 1, 1, "PATCH", "/v1/webhooks/%s",
	 "json= enabled=enabled:b url=", "updated webhook {name} (version {version})", "WEBHOOK",
	 "change a webhook (--json FILE|- for events or a new secret)"},
	{"webhook", "deliveries", rp_cli_run, 1, 1, "GET", "/v1/webhooks/%s/deliveries",
	 "state= limit=",
	 ":ID=id,EVENT=event_id,ACTION=action,STATE=state,TRIES=attempts,STATUS=last_status,"
	 "ERROR=last_error",
	 "WEBHOOK", "a webhook's deliveries, newest first (--state pending|delivered|failed)"},
	{"webhook", "delete", rp_cli_run, 1, 1, "DELETE", "/v1/webhooks/%s", "",
	 "deleted webhook {0}", "WEBHOOK", "delete a webhook and its queue"},
	{"token", "create", rp_cli_run, 1, 1, "POST", "/v1/tokens",
	 "@name +role= expires-in=expires_in_s:i", "{token}", "NAME",
	 "create an API token (admin, operator or viewer); prints its secret, shown only once"},
	{"token", "list", rp_cli_run, 0, 0, "GET", "/v1/tokens", "",
	 ":ID=id,NAME=name,ROLE=role,CREATED=created_at,BY=created_by,EXPIRES=expires_at", "",
	 "list live tokens"},
	{"token", "revoke", rp_cli_run, 1, 1, "DELETE", "/v1/tokens/%s", "", "revoked token {0}",
	 "ID", "revoke a token"},
	{NULL},
};
// clang-format on

static const char global_usage[] =
        "usage: rackpilot [--url URL] [--token TOKEN] [--cacert FILE] [--fingerprint SHA256]\n"
        "                 [--json] [--verbose] COMMAND [ARGS]\n"
        "       rackpilot --version | --help | COMMAND --help\n";

/* 1 when the n bytes at name are a global option that takes a value. */
static int
global_valued(const char *name, size_t n)
{
	static const char *const names[] = {"url", "token", "cacert", "fingerprint"};
	size_t i;

	for (i = 0; i < sizeof names / sizeof *names; i++)
		if (strlen(names[i]) == n && !strncmp(name, names[i], n))
			return 1;
	return 0;
}

/* Option name of a command: 0 unknown, 1 a flag, 2 takes a value. */
static int
opt_kind(const char *spec, const char *name)
{
	struct rp_cli_tok t;

	if (rp_cli_find(spec, name, &t) == 0)
		return t.valued ? 2 : 1;
	if (global_valued(name, strlen(name)))
		return 2;
	return !strcmp(name, "json") || !strcmp(name, "verbose") || !strcmp(name, "help");
}

/* Usage of k; with help, its description and options too. */
static void
print_cmd(FILE *f, const struct rp_cli_cmd *k, int help)
{
	struct rp_cli_tok t;
	const char *p;

	fprintf(f, "usage: rackpilot %s%s%s%s%s%s\n", k->noun, k->verb ? " " : "",
	        k->verb ? k->verb : "", k->args[0] ? " " : "", k->args,
	        k->opts[0] ? " [OPTIONS]" : "");
	if (!help)
		return;
	fprintf(f, "  %s\n  options:", k->help);
	for (p = k->opts; *p; p += *p == ' ') {
		p += rp_cli_tok(p, &t);
		if (t.sigil == '@' || t.sigil == '%')
			continue;
		fprintf(f, " --%s%s", t.flag,
		        !t.valued                 ? ""
		        : !strcmp(t.flag, "json") ? " FILE|-"
		        : t.type == 'i'           ? " N"
		        : t.type == 'n'           ? " X.Y"
		        : t.type == 'b'           ? " true|false"
		        : t.type == 'l'           ? " A,B"
		        : t.type == 'j'           ? " JSON"
		                                  : " X");
	}
	fprintf(f, "%s --url URL --token TOKEN --cacert FILE --fingerprint SHA256 --verbose\n",
	        strstr(k->opts, "json=") ? "" : " --json");
}

static void
print_noun(FILE *f, const char *noun)
{
	const struct rp_cli_cmd *k;

	if (noun == NULL)
		fputs(global_usage, f);
	for (k = commands; k->noun; k++)
		if (noun == NULL || !strcmp(noun, k->noun))
			fprintf(f, "  %s %-*s %s\n", k->noun, 20 - (int)strlen(k->noun),
			        k->verb ? k->verb : "", k->help);
	if (noun == NULL)
		fputs("config: --url/--token/--cacert/--fingerprint > "
		      "RACKPILOT_URL/RACKPILOT_TOKEN/"
		      "RACKPILOT_CACERT/RACKPILOT_FINGERPRINT >\n"
		      "        $XDG_CONFIG_HOME/rackpilot/config (url = ..., token = ..., "
		      "cacert = ..., fingerprint = ...)\n"
		      "exit: 0 ok, 1 API or connection error, 2 usage error, 3 some nodes failed\n",
		      f);
}

const char *
rp_cli_opt(const struct rp_cli *c, const char *name)
{
	int i;

	for (i = c->nopts - 1; i >= 0; i--)
		if (!strcmp(c->opts[i].name, name))
			return c->opts[i].value;
	return NULL;
}

int
rp_cli_usage(const struct rp_cli *c, const char *why)
{
	if (why)
		fprintf(stderr, "rackpilot: %s\n", why);
	if (c->cmd)
		print_cmd(stderr, c->cmd, 0);
	else
		fputs(global_usage, stderr);
	return RP_CLI_EUSAGE;
}

static char *
trim(char *s)
{
	char *e;

	s += strspn(s, " \t");
	e = s + strlen(s);
	while (e > s && strchr(" \t\r\n", e[-1]))
		*--e = '\0';
	return s;
}

/* "url = ...", "token = ...", "cacert = ..." and "fingerprint = ..." lines, # comments. A
 * missing file is fine. path (size len) gets the file's name, "" when there is none. */
static void
load_file(struct rp_cli *c, char *path, size_t len)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	char line[2048];
	struct stat st;
	unsigned n = 0;
	FILE *f;

	path[0] = '\0';
	if (xdg && xdg[0])
		snprintf(path, len, "%s/rackpilot/config", xdg);
	else if (home && home[0])
		snprintf(path, len, "%s/.config/rackpilot/config", home);
	else
		return;
	if ((f = fopen(path, "r")) == NULL) {
		if (errno != ENOENT)
			fprintf(stderr, "rackpilot: warning: %s: %s\n", path, strerror(errno));
		return;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 044))
		fprintf(stderr,
		        "rackpilot: warning: %s is readable by group or others and holds a "
		        "token: chmod 600 it\n",
		        path);
	while (fgets(line, sizeof line, f)) {
		char *s = trim(line), *eq = strchr(s, '='), *v;

		n++;
		if (*s == '\0' || *s == '#')
			continue;
		if (eq == NULL) {
			fprintf(stderr, "rackpilot: warning: %s:%u: expected key = value\n", path,
			        n);
			continue;
		}
		*eq = '\0';
		v = trim(eq + 1);
		if (!strcmp(trim(s), "url"))
			snprintf(c->url, sizeof c->url, "%s", v);
		else if (!strcmp(trim(s), "token"))
			snprintf(c->token, sizeof c->token, "%s", v);
		else if (!strcmp(trim(s), "cacert"))
			snprintf(c->cacert, sizeof c->cacert, "%s", v);
		else if (!strcmp(trim(s), "fingerprint"))
			snprintf(c->fingerprint, sizeof c->fingerprint, "%s", v);
		else
			fprintf(stderr, "rackpilot: warning: %s:%u: unknown key '%s'\n", path, n,
			        trim(s));
	}
	explicit_bzero(line, sizeof line);
	fclose(f);
}

/*
 * The TLS settings once every source is applied; fp_src and ca_src name where each came
 * from. A fingerprint or CA file with a plain-HTTP URL is refused: silently ignoring it would
 * send the token in the clear to whoever answers. 0, or -1 (message printed).
 */
static int
configure_tls(struct rp_cli *c, const char *fp_src, const char *ca_src)
{
	int https = !strncmp(c->url, "https://", 8);

	if (c->fingerprint[0]) {
		if (rp_tls_fingerprint_parse(c->fingerprint, c->fingerprint) < 0) {
			fprintf(stderr,
			        "rackpilot: %s: '%.100s' is not a fingerprint: expected %s\n",
			        fp_src, c->fingerprint, RP_TLS_FP_WANT);
			return -1;
		}
		if (!https) {
			fprintf(stderr, "rackpilot: %s needs an https:// URL (the URL is %s)\n",
			        fp_src, c->url);
			return -1;
		}
		rp_tls_pin_from_hex(c->fingerprint, c->pin, sizeof c->pin);
	}
	if (c->cacert[0]) {
		if (!https) {
			fprintf(stderr, "rackpilot: %s needs an https:// URL (the URL is %s)\n",
			        ca_src, c->url);
			return -1;
		}
		/* curl would only say it cannot set verify locations. */
		if (access(c->cacert, R_OK) < 0) {
			fprintf(stderr, "rackpilot: %s %s: %s\n", ca_src, c->cacert,
			        strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Flags > environment > file > default, key by key. 0, or -1 (message printed). */
static int
configure(struct rp_cli *c)
{
	char path[1024], fp_file[1100], ca_file[1100];
	const char *v, *fp_src = fp_file, *ca_src = ca_file;
	size_t n;

	snprintf(c->url, sizeof c->url, "%s", DEFAULT_URL);
	load_file(c, path, sizeof path);
	snprintf(fp_file, sizeof fp_file, "fingerprint in %s", path);
	snprintf(ca_file, sizeof ca_file, "cacert in %s", path);
	if ((v = getenv("RACKPILOT_URL")) && v[0])
		snprintf(c->url, sizeof c->url, "%s", v);
	if ((v = getenv("RACKPILOT_TOKEN")) && v[0])
		snprintf(c->token, sizeof c->token, "%s", v);
	if ((v = getenv("RACKPILOT_CACERT")) && v[0]) {
		snprintf(c->cacert, sizeof c->cacert, "%s", v);
		ca_src = "RACKPILOT_CACERT";
	}
	if ((v = getenv("RACKPILOT_FINGERPRINT")) && v[0]) {
		snprintf(c->fingerprint, sizeof c->fingerprint, "%s", v);
		fp_src = "RACKPILOT_FINGERPRINT";
	}
	if ((v = rp_cli_opt(c, "url")))
		snprintf(c->url, sizeof c->url, "%s", v);
	if ((v = rp_cli_opt(c, "token")))
		snprintf(c->token, sizeof c->token, "%s", v);
	/* An empty value clears what the environment or the file said. */
	if ((v = rp_cli_opt(c, "cacert"))) {
		snprintf(c->cacert, sizeof c->cacert, "%s", v);
		ca_src = "--cacert";
	}
	if ((v = rp_cli_opt(c, "fingerprint"))) {
		snprintf(c->fingerprint, sizeof c->fingerprint, "%s", v);
		fp_src = "--fingerprint";
	}
	if (strncmp(c->url, "http://", 7) && strncmp(c->url, "https://", 8)) {
		fprintf(stderr, "rackpilot: the url must start with http:// or https://\n");
		return -1;
	}
	if (configure_tls(c, fp_src, ca_src) < 0)
		return -1;
	n = strlen(c->url);
	while (n > 0 && c->url[n - 1] == '/')
		c->url[--n] = '\0';
	if (strpbrk(c->token, "\r\n")) { /* it would forge headers */
		fprintf(stderr, "rackpilot: the token contains a line break\n");
		return -1;
	}
	return 0;
}

/* Whether another row has k's noun (k, a noun without a verb, comes after them). */
static int
siblings(const struct rp_cli_cmd *k)
{
	const struct rp_cli_cmd *o;

	for (o = commands; o->noun; o++)
		if (o != k && !strcmp(o->noun, k->noun))
			return 1;
	return 0;
}

/* Options and positionals after NOUN [VERB]: RP_CLI_OK, -1 for --help, or an exit code. */
static int
parse_args(struct rp_cli *c, int argc, char **argv, int i)
{
	const char *p, *spec = c->cmd->opts;
	struct rp_cli_tok t;
	int kind, only_pos = 0;

	c->argv = argv + i; /* positionals are compacted in place */
	for (; i < argc; i++) {
		char *a = argv[i], *eq;

		if (only_pos || a[0] != '-' || !strcmp(a, "-")) {
			c->argv[c->argc++] = a;
			continue;
		}
		if (!strcmp(a, "--")) {
			only_pos = 1;
			continue;
		}
		a = !strcmp(a, "-h") ? "--help" : !strcmp(a, "-v") ? "--verbose" : a;
		if (a[1] != '-') {
			fprintf(stderr, "rackpilot: unknown option %s\n", a);
			return rp_cli_usage(c, NULL);
		}
		if ((eq = strchr(a, '=')) != NULL)
			*eq = '\0';
		if ((kind = opt_kind(spec, a + 2)) == 0 || c->nopts == RP_CLI_OPTS_MAX) {
			fprintf(stderr, "rackpilot: unknown option %s\n", a);
			return rp_cli_usage(c, NULL);
		}
		c->opts[c->nopts].name = a + 2;
		if (kind == 1 && eq) {
			fprintf(stderr, "rackpilot: %s takes no value\n", a);
			return rp_cli_usage(c, NULL);
		} else if (kind == 2 && !eq && i + 1 == argc) {
			fprintf(stderr, "rackpilot: %s needs a value\n", a);
			return rp_cli_usage(c, NULL);
		}
		c->opts[c->nopts++].value = kind == 1 ? "" : eq ? eq + 1 : argv[++i];
	}
	if (rp_cli_opt(c, "help")) {
		print_cmd(stdout, c->cmd, 1);
		if (c->cmd->verb == NULL && siblings(c->cmd))
			print_noun(stdout, c->cmd->noun);
		return -1;
	}
	/* --json is the output mode, unless the command reads a JSON file with it. */
	c->json |= rp_cli_opt(c, "json") && !strstr(spec, "json=");
	c->verbose |= rp_cli_opt(c, "verbose") != NULL;
	for (p = spec; *p; p += *p == ' ') {
		p += rp_cli_tok(p, &t);
		if (t.sigil == '+' && !rp_cli_opt(c, t.flag)) {
			fprintf(stderr, "rackpilot: --%s is required\n", t.flag);
			return rp_cli_usage(c, NULL);
		}
	}
	if (c->argc < c->cmd->min_args)
		return rp_cli_usage(c, "missing argument");
	if (c->argc > c->cmd->max_args)
		return rp_cli_usage(c, "too many arguments");
	return RP_CLI_OK;
}

int
main(int argc, char **argv)
{
	struct rp_cli c = {0};
	const struct rp_cli_cmd *k;
	const char *verb;
	int i, rc = RP_CLI_EUSAGE, known = 0;

	/* Options before the command are global. */
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		char *a = argv[i], *eq = strchr(a, '=');

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			print_noun(stdout, NULL);
			return RP_CLI_OK;
		} else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("rackpilot %s (API %s)\n", RP_VERSION, RP_API_VERSION);
			return RP_CLI_OK;
		} else if (!strcmp(a, "--json")) {
			c.json = 1;
		} else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
			c.verbose = 1;
		} else if (!strncmp(a, "--", 2) &&
		           global_valued(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2))) {
			if (eq)
				*eq = '\0';
			else if (++i == argc)
				return rp_cli_usage(&c, "missing value");
			if (c.nopts == RP_CLI_OPTS_MAX)
				return rp_cli_usage(&c, "too many options");
			c.opts[c.nopts].name = a + 2;
			c.opts[c.nopts++].value = eq ? eq + 1 : argv[i];
		} else {
			break;
		}
	}
	if (i < argc && argv[i][0] == '-') {
		fprintf(stderr, "rackpilot: unknown option %s\n", argv[i]);
		return rp_cli_usage(&c, NULL);
	}
	if (i == argc)
		return rp_cli_usage(&c, "missing command");
	verb = i + 1 < argc ? argv[i + 1] : NULL;
	for (k = commands; k->noun; k++) {
		if (strcmp(k->noun, argv[i]))
			continue;
		known = 1;
		if (k->verb == NULL || (verb && !strcmp(k->verb, verb)))
			break;
	}
	if (k->noun == NULL) {
		int help = verb && (!strcmp(verb, "--help") || !strcmp(verb, "-h"));

		if (!help)
			fprintf(stderr, "rackpilot: unknown command '%s%s%s'\n", argv[i],
			        known ? " " : "", known ? (verb ? verb : "") : "");
		if (known)
			print_noun(help ? stdout : stderr, argv[i]);
		else
			fputs(global_usage, stderr);
		return help ? RP_CLI_OK : RP_CLI_EUSAGE;
	}
	c.cmd = k;
	rc = parse_args(&c, argc, argv, i + 1 + (k->verb != NULL));
	if (rc < 0)
		return RP_CLI_OK; /* --help */
	if (rc == RP_CLI_OK) {
		rc = RP_CLI_EUSAGE;
		if (configure(&c) == 0) {
			rc = RP_CLI_EAPI;
			c.tty = isatty(STDOUT_FILENO);
			if (rp_cli_http_init(&c) == 0)
				rc = k->run(&c);
		}
	}
	rp_cli_http_free(&c);
	explicit_bzero(c.token, sizeof c.token);
	return rc;
}
