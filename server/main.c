/* rackpilotd: configuration, the data directory, the first admin token, and the signal loop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "config.h"
#include "bmc/bmc.h"
#include "boot/boot.h"
#include "http/http.h"
#include "jobs/jobs.h"
#include "demo.h"
#include "rollout/rollout.h"
#include "ssh/ssh.h"
#include "rackpilot/agent.h"
#include "rackpilot/version.h"
#include "store/store.h"
#include "util/util.h"

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: rackpilotd [options]\n"
	        "  -c, --config FILE      read settings from an INI file (see docs/rackpilotd.conf)\n"
	        "  -n, --check            check the configuration, print the effective one, exit\n"
	        "      --listen ADDR:PORT listen address (port 0: pick a free port)\n"
	        "      --data-dir DIR     directory for the database and admin.token\n"
	        "      --threads N        HTTP worker threads (0: one per CPU)\n"
	        "      --log-level LEVEL  error, warn, info or debug\n"
	        "      --no-access-log    do not log one line per request\n"
	        "      --power-sync-interval S  seconds between power sweeps (0: off)\n"
	        "      --new-admin-token  issue a new admin token into DATA_DIR/admin.token, exit\n"
	        "      --demo             seed a demo site (fake BMCs) into an empty database,\n"
	        "                         marked as demo data; data dir defaults to ./var-demo\n"
	        "  -V, --version          print the version and exit\n"
	        "  -h, --help             this text\n");
}

static uint64_t
generation(void *st)
{
	return rp_store_generation(st);
}

static int
mkdir_p(const char *dir)
{
	char path[512], *p;

	if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* One server per data directory: the database has one writer, and the read caches rely on
 * it. The lock dies with the process, so a crash never leaves it stale. */
static int
lock_data_dir(const char *dir)
{
	char path[600];
	int fd;

	snprintf(path, sizeof path, "%s/rackpilotd.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rp_log_error("cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			rp_log_error("another rackpilotd is already using %s", dir);
		else
			rp_log_error("cannot lock %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd; /* kept open, and locked, until exit */
}

/* Write a fresh admin secret to DATA_DIR/admin.token (mode 0600). */
static int
write_token(const char *data_dir, const char *secret, char *path, size_t pathlen)
{
	char line[RP_TOKEN_BUF + 1];

	snprintf(path, pathlen, "%s/admin.token", data_dir);
	snprintf(line, sizeof line, "%s\n", secret);
	return rp_file_write_private(path, line, strlen(line), 0600);
}

/* First start on an empty database: create the admin token and say where it is (never
 * what it is). With reissue, always create one more. */
static int
admin_token(struct rp_store *st, const char *data_dir, int reissue)
{
	char secret[RP_TOKEN_BUF], hash[RP_SHA256_HEX], path[600];
	json_t *out = NULL;
	int created = 0;
	enum rp_err e;

	if (rp_token_new(RP_TOKEN_PREFIX_API, secret) < 0) {
		rp_log_error("cannot get random bytes for a token");
		return -1;
	}
	rp_sha256_hex(secret, strlen(secret), hash);
	if (reissue) {
		e = rp_store_token_create(st, "admin", "admin", hash, 0, "rackpilotd --new-admin-token",
		                          &out);
		json_decref(out);
		created = e == RP_ERR_OK;
	} else {
		e = rp_store_token_bootstrap(st, hash, &created);
	}
	if (e != RP_ERR_OK) {
		rp_log_error("cannot create the admin token: %s", rp_err_message(e));
		return -1;
	}
	if (!created)
		return 0;
	if (write_token(data_dir, secret, path, sizeof path) < 0) {
		rp_log_error("cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	rp_log_info("created an admin API token; it is in %s (readable by its owner only)", path);
	return 0;
}

/* What dnsmasq was last told. */
struct dhcp_state {
	int64_t version;
	char digest[RP_SHA256_HEX];
	int64_t retry_at;
};

/* Keep dnsmasq's host file in step with the known MACs: checked every tick by a counter the
 * database bumps on every MAC or name change, rewritten (and dnsmasq told) only when the
 * content differs. */
static void
dnsmasq_sync(struct rp_store *st, const struct rp_config *cfg, struct dhcp_state *d)
{
	struct rp_buf b = {0};
	char digest[RP_SHA256_HEX], why[600];
	int64_t v;

	if (cfg->dnsmasq_hosts[0] == '\0' || rp_store_macs_version(st, &v) != RP_ERR_OK)
		return;
	if (v == d->version && (d->retry_at == 0 || rp_time_now_ms() < d->retry_at))
		return;
	if (rp_store_dhcp_hosts(st, &b) != RP_ERR_OK)
		goto out;
	rp_sha256_hex(b.data ? b.data : "", b.len, digest);
	if (strcmp(digest, d->digest) != 0 || d->retry_at) {
		if (rp_boot_dnsmasq_update(cfg->dnsmasq_hosts, cfg->dnsmasq_pidfile, b.data ? b.data : "",
		                           b.len, why, sizeof why) < 0) {
			/* dnsmasq may not run yet: say so once in a while, and keep trying. */
			if (d->retry_at == 0)
				rp_log_warn("dnsmasq: %s", why);
			d->retry_at = rp_time_now_ms() + 5000;
			goto out;
		}
		rp_log_info("dnsmasq: %s updated", cfg->dnsmasq_hosts);
		memcpy(d->digest, digest, sizeof digest);
	}
	d->retry_at = 0;
	d->version = v;
out:
	rp_buf_free(&b);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"check", no_argument, NULL, 'n'},
	    {"listen", required_argument, NULL, 'L'},
	    {"data-dir", required_argument, NULL, 'D'},
	    {"threads", required_argument, NULL, 'T'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"no-access-log", no_argument, NULL, 'A'},
	    {"power-sync-interval", required_argument, NULL, 'P'},
	    {"new-admin-token", no_argument, NULL, 'N'},
	    {"demo", no_argument, NULL, 'M'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct rp_config cfg;
	struct rp_store *st = NULL;
	struct rp_http *http = NULL;
	struct rp_api api = {0};
	struct rp_http_opts ho;
	struct rp_jobs_opts jo;
	struct rp_jobs *jobs = NULL;
	struct rp_rollout *rollouts = NULL;
	struct rp_ssh_key *sshkey = NULL;
	const char *config_path = NULL;
	char why[512], dbpath[600], sshdir[600], updir[600];
	struct dhcp_state dhcp = {.version = -1};
	/* Flags are applied after the file so they win; keep them until then. */
	const char *flag_key[16], *flag_val[16];
	int nflags = 0, check = 0, reissue = 0, demo = 0, is_demo = 0, empty = 0, opt, rc = 1, sig;
	sigset_t sigs;
	enum rp_err e;

	rp_config_defaults(&cfg);
	while ((opt = getopt_long(argc, argv, "c:nVh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_path = optarg;
			break;
		case 'n':
			check = 1;
			break;
		case 'L':
			flag_key[nflags] = "listen", flag_val[nflags++] = optarg;
			break;
		case 'D':
			flag_key[nflags] = "data_dir", flag_val[nflags++] = optarg;
			break;
		case 'T':
			flag_key[nflags] = "threads", flag_val[nflags++] = optarg;
			break;
		case 'l':
			flag_key[nflags] = "log_level", flag_val[nflags++] = optarg;
			break;
		case 'A':
			flag_key[nflags] = "access_log", flag_val[nflags++] = "false";
			break;
		case 'P':
			flag_key[nflags] = "power_sync_interval", flag_val[nflags++] = optarg;
			break;
		case 'N':
			reissue = 1;
			break;
		case 'M':
			demo = 1;
			break;
		case 'V':
			printf("rackpilotd %s (API %s, schema %d)\n", RP_VERSION, RP_API_VERSION,
			       rp_store_schema_latest());
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (nflags == 16) {
			fprintf(stderr, "rackpilotd: too many flags\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rackpilotd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	/* Demo data gets its own directory unless the file or a flag names one. */
	if (demo)
		rp_config_set(&cfg, "data_dir", "./var-demo", why, sizeof why);
	if (config_path && rp_config_load(&cfg, config_path, why, sizeof why) < 0) {
		fprintf(stderr, "rackpilotd: %s\n", why);
		return 1;
	}
	for (opt = 0; opt < nflags; opt++) {
		if (rp_config_set(&cfg, flag_key[opt], flag_val[opt], why, sizeof why) < 0) {
			fprintf(stderr, "rackpilotd: %s\n", why);
			return 2;
		}
	}
	if (rp_config_check(&cfg, why, sizeof why) < 0) {
		fprintf(stderr, "rackpilotd: %s\n", why);
		return 1;
	}
	if (check) {
		printf("# effective configuration%s%s\n", config_path ? " from " : " (defaults)",
		       config_path ? config_path : "");
		rp_config_print(&cfg, stdout);
		return 0;
	}
	rp_log_set_level(!strcmp(cfg.log_level, "error")  ? RP_LOG_ERROR
	                 : !strcmp(cfg.log_level, "warn") ? RP_LOG_WARN
	                 : !strcmp(cfg.log_level, "debug") ? RP_LOG_DEBUG
	                                                    : RP_LOG_INFO);
	if (cfg.threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		cfg.threads = n > 0 ? (unsigned)n : 2;
	}
	/* Signals are taken synchronously by this thread; workers inherit the blocked mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (mkdir_p(cfg.data_dir) < 0) {
		rp_log_error("cannot create data directory %s: %s", cfg.data_dir, strerror(errno));
		goto out;
	}
	/* --new-admin-token only adds a row, which a running server picks up: no lock needed. */
	if (!reissue && lock_data_dir(cfg.data_dir) < 0)
		goto out;
	snprintf(dbpath, sizeof dbpath, "%s/rackpilot.db", cfg.data_dir);
	e = rp_store_open(dbpath, &st, why, sizeof why);
	if (e != RP_ERR_OK) {
		rp_log_error("%s", why);
		goto out;
	}
	rp_log_info("database %s (schema version %d)", dbpath, rp_store_schema_version(st));
	if (admin_token(st, cfg.data_dir, reissue) < 0)
		goto out;
	if (reissue) {
		rc = 0;
		goto out;
	}
	if (rp_bmc_global_init() < 0) {
		rp_log_error("cannot initialise libcurl");
		goto out;
	}
	snprintf(sshdir, sizeof sshdir, "%s/ssh", cfg.data_dir);
	if (rp_ssh_key_load(sshdir, &sshkey, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		goto out;
	}
	/* data_dir is at most sizeof - 32 bytes (config.c), so this fits. */
	if (cfg.image_dir[0] == '\0' &&
	    snprintf(cfg.image_dir, sizeof cfg.image_dir, "%.480s/images", cfg.data_dir) < 0)
		goto out;
	snprintf(updir, sizeof updir, "%s/.incoming", cfg.image_dir);
	if (mkdir_p(cfg.image_dir) < 0 || mkdir_p(updir) < 0) {
		rp_log_error("cannot create the image directory %s: %s", cfg.image_dir, strerror(errno));
		goto out;
	}
	if (demo && rp_demo_prepare(st, cfg.image_dir, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		goto out;
	}
	if (rp_store_demo_get(st, &is_demo, &empty) != RP_ERR_OK)
		goto out;
	if (is_demo)
		rp_log_warn("this database holds demo data (seeded by rackpilotd --demo)");
	rp_jobs_defaults(&jo);
	jo.image_dir = cfg.image_dir;
	jo.image_url = cfg.boot_url[0] ? cfg.boot_url : NULL;
	jo.workers = cfg.job_workers;
	jo.ssh_workers = cfg.ssh_workers;
	jo.ssh_key = sshkey;
	jo.agent_command = cfg.agent_command;
	jo.sweep_interval_s = cfg.power_sync_interval;
	jo.sweep_concurrency = cfg.power_sync_concurrency;
	jo.fault_threshold = cfg.bmc_fault_threshold;
	if (rp_jobs_start(st, &jo, &jobs, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		goto out;
	}
	if ((rollouts = rp_rollout_new(st, jobs)) == NULL)
		goto out;
	api.jobs = jobs;
	api.store = st;
	api.ssh_public_key = rp_ssh_key_public(sshkey);
	api.agent_heartbeat_s = (int)cfg.agent_heartbeat;
	api.image_dir = cfg.image_dir;
	api.demo = is_demo;
	api.boot_url = cfg.boot_url;
	api.discovery = cfg.discovery;
	api.discovery_max = (int)cfg.discovery_max_tokens;
	api.bootstrap_ttl_s = cfg.bootstrap_ttl;
	api.provision_timeout_s = cfg.provision_timeout;
	api.metrics = rp_metrics_new(rp_api_route_count);
	api.started_at = rp_time_now_ms();
	api.max_body = cfg.max_body;
	api.auth_cache = rp_memo_new(1024);
	api.get_cache = rp_memo_new(16384);
	if (api.metrics == NULL || api.auth_cache == NULL || api.get_cache == NULL)
		goto out;
	ho.listen = cfg.listen;
	ho.threads = cfg.threads;
	ho.max_body = cfg.max_body;
	ho.max_import_body = cfg.max_import_body;
	ho.conn_timeout_s = cfg.conn_timeout_s;
	ho.conn_limit = cfg.conn_limit;
	ho.access_log = cfg.access_log;
	ho.max_upload = cfg.max_upload;
	ho.upload_dir = updir;
	ho.generation = generation;
	ho.generation_arg = st;
	if (rp_http_start(&ho, &api, &http, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		goto out;
	}
	rp_log_info("rackpilotd %s: %u HTTP threads", RP_VERSION, cfg.threads);
	/* Scripts and tests read this exact line to learn the port. */
	printf("listening on %s\n", rp_http_address(http));
	fflush(stdout);
	for (;;) {
		struct timespec tick = {0, 250 * 1000 * 1000};

		/* Access lines are buffered; the quarter-second tick bounds how late they appear. */
		sig = sigtimedwait(&sigs, NULL, &tick);
		rp_log_flush();
		dnsmasq_sync(st, &cfg, &dhcp);
		rp_rollout_tick(rollouts);
		if (sig < 0)
			continue;
		if (sig == SIGHUP) {
			rp_log_info("SIGHUP: nothing to reload");
			continue;
		}
		rp_log_info("signal %d: shutting down", sig);
		break;
	}
	rc = 0;
out:
	/* HTTP first (no new jobs), then jobs (running ones stay recorded as running and are
	 * recovered at the next start), then the BMC sessions. */
	rp_http_stop(http);
	rp_rollout_free(rollouts);
	rp_jobs_stop(jobs);
	if (api.jobs)
		rp_bmc_global_cleanup();
	rp_log_flush();
	rp_store_free(st);
	rp_ssh_key_free(sshkey);
	rp_metrics_free(api.metrics);
	rp_memo_free(api.auth_cache);
	rp_memo_free(api.get_cache);
	return rc;
}
