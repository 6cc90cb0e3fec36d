/* rackpilotd: configuration, the data directory, the first admin token, and the signal loop. */
#include <ctype.h>
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
	        "  -c, --config FILE      read settings from an INI file (see "
	        "docs/rackpilotd.conf)\n"
	        "  -n, --check            check the configuration, print the effective one, exit\n"
	        "      --listen ADDR:PORT listen address (port 0: pick a free port)\n"
	        "      --tls-cert FILE    serve the API over HTTPS with this PEM certificate...\n"
	        "      --tls-key FILE     ...and its private key\n"
	        "      --boot-listen ADDR:PORT  plain-HTTP listener for /boot/ only ('off': none)\n"
	        "      --data-dir DIR     directory for the database and admin.token\n"
	        "      --database URL     keep everything in PostgreSQL "
	        "(postgresql://user@host/db)\n"
	        "                         instead of SQLite in the data dir\n"
	        "      --migrate-to URL   copy this SQLite database into an empty PostgreSQL one,\n"
	        "                         verify it, exit (stop the server first)\n"
	        "      --server-name NAME this server's name among those sharing a database\n"
	        "                         (its job leases; default: the host name)\n"
	        "      --threads N        HTTP worker threads (0: one per CPU)\n"
	        "      --log-level LEVEL  error, warn, info or debug\n"
	        "      --no-access-log    do not log one line per request\n"
	        "      --power-sync-interval S  seconds between power sweeps (0: off)\n"
	        "      --sensor-sync-interval S  seconds between sensor sweeps (0: off)\n"
	        "      --new-admin-token  issue a new admin token into DATA_DIR/admin.token, exit\n"
	        "      --rotate-secret-key  seal every stored secret under a new secret key, exit\n"
	        "                         (stop the server first; safe to interrupt and repeat)\n"
	        "      --forget-secrets   clear the BMC passwords the secret key cannot open, so\n"
	        "                         the server starts (they must be entered again)\n"
	        "      --demo             seed a demo site (fake BMCs) into an empty database,\n"
	        "                         marked as demo data; data dir defaults to ./var-demo\n"
	        "  -V, --version          print the version and exit\n"
	        "  -h, --help             this text\n"
	        "\n"
	        "       rackpilotd backup FILE [-c CONFIG] [--data-dir DIR] [--with-key]\n"
	        "  copy the SQLite database into the new file FILE while the server serves, with\n"
	        "  its manifest (schema version, rows and checksum per table); --with-key puts\n"
	        "  the secret key in it too (whoever reads FILE can then open the BMC "
	        "passwords)\n"
	        "       rackpilotd restore FILE [-c CONFIG] [--data-dir DIR]\n"
	        "  check FILE whole and make it the database of a data directory that has none\n");
}

static uint64_t
generation(void *api)
{
	return rp_api_generation(api);
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

/* The data directory holds the database, the secret key, the SSH and TLS keys: its owner's
 * alone. Files made later inherit nothing wider (umask 077 in main); files an older version
 * made readable are narrowed. */
static int
private_data_dir(const char *dir)
{
	static const char *const files[] = {"rackpilot.db", "rackpilot.db-wal", "rackpilot.db-shm",
	                                    "admin.token", NULL};
	char path[600];
	struct stat sb;
	int i;

	if (stat(dir, &sb) < 0) {
		rp_log_error("cannot stat %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		rp_log_error("data directory %s is not a directory", dir);
		return -1;
	}
	if (sb.st_mode & 077) {
		rp_log_error("data directory %s is readable or writable by others (mode %04o); it "
		             "holds secrets: chmod 700 %s",
		             dir, (unsigned)(sb.st_mode & 07777), dir);
		return -1;
	}
	for (i = 0; files[i]; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077)) {
			if (chmod(path, 0600) < 0) {
				rp_log_error("cannot narrow %s to mode 0600: %s", path,
				             strerror(errno));
				return -1;
			}
			rp_log_warn("%s was mode %04o; now 0600", path,
			            (unsigned)(sb.st_mode & 07777));
		}
	}
	return 0;
}

/* --migrate-to URL: everything of this (SQLite) database into the empty PostgreSQL one at
 * url, in one transaction there, each table checked by rows and checksum; the source is left
 * as it was. 0, or -1 (logged). */
static int
migrate(struct rp_store *st, const char *url)
{
	struct rp_store *to = NULL;
	json_t *report = NULL, *t;
	char why[600];
	size_t i;
	int rc = -1;

	if (!rp_store_is_url(url)) {
		rp_log_error(
		        "--migrate-to needs a PostgreSQL connection string (postgresql://...)");
		return -1;
	}
	if (rp_store_is_url(rp_store_name(st))) {
		rp_log_error("--migrate-to copies a SQLite database: start it without --database");
		return -1;
	}
	if (rp_store_open(url, &to, why, sizeof why) != RP_ERR_OK ||
	    rp_store_hold(to, why, sizeof why) != RP_ERR_OK) {
		rp_log_error("%s", why);
		goto out;
	}
	rp_log_info("copying %s into %s", rp_store_name(st), rp_store_name(to));
	if (rp_store_copy(st, to, &report, why, sizeof why) != RP_ERR_OK) {
		rp_log_error("nothing copied: %s", why);
		goto out;
	}
	json_array_foreach(json_object_get(report, "tables"), i, t)
	{
		rp_log_info("  %-24s %8lld rows  checksum %s",
		            json_string_value(json_object_get(t, "table")),
		            (long long)json_integer_value(json_object_get(t, "rows")),
		            json_string_value(json_object_get(t, "checksum")));
	}
	rp_log_info("copied %lld rows into %s, every table checked on both sides; start rackpilotd "
	            "with --database (and this data directory: it holds the secret key)",
	            (long long)json_integer_value(json_object_get(report, "rows")),
	            rp_store_name(to));
	rc = 0;
out:
	json_decref(report);
	rp_store_free(to);
	return rc;
}

/* Where the secret key file is: secret_key, else DATA_DIR/secret.key. */
static void
key_path(const struct rp_config *cfg, char *buf, size_t len)
{
	if (cfg->secret_key[0])
		snprintf(buf, len, "%s", cfg->secret_key);
	else
		snprintf(buf, len, "%s/secret.key", cfg->data_dir);
}

/* The key file's text into buf (len bytes with the NUL): 1, or 0 (logged). */
static int
read_key(const char *path, char *buf, size_t len)
{
	char *text = NULL;
	size_t n = 0;

	if (rp_file_read(path, len - 1, &text, &n) < 0) {
		rp_log_error("cannot read %s: %s", path, strerror(errno));
		return 0;
	}
	memcpy(buf, text, n + 1);
	explicit_bzero(text, n);
	free(text);
	return 1;
}

/* rp_store_restore's last step before the database appears: the key file a --with-key backup
 * carries written at arg's path (through a synced temporary file, checked as the server loads
 * a key, never over another key), or the same key found there. 0, or -1 with why. */
static int
restore_key(json_t *m, void *arg, char *why, size_t whylen)
{
	const char *path = arg, *key = json_string_value(json_object_get(m, "secret_key_file"));
	struct rp_secrets *sec = NULL;
	char have[512], tmp[700];
	int rc = -1;

	if (key == NULL)
		return 0;
	if (access(path, F_OK) == 0) {
		if (read_key(path, have, sizeof have) && strcmp(have, key) == 0)
			rc = 0;
		else
			snprintf(why, whylen,
			         "%s holds another key than the backup: restore into a new data "
			         "directory",
			         path);
		explicit_bzero(have, sizeof have);
		return rc;
	}
	snprintf(tmp, sizeof tmp, "%s.restoring", path);
	unlink(tmp);
	if (rp_file_write_private(tmp, key, strlen(key), 0600) < 0) {
		snprintf(why, whylen, "cannot write the backup's key to %s: %s", tmp,
		         strerror(errno));
		return -1;
	}
	if (rp_secrets_load(tmp, 0, &sec, why, whylen) == 0 && link(tmp, path) == 0 &&
	    rp_fsync_dir_of(path) == 0)
		rc = 0;
	else if (sec)
		snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
	rp_secrets_free(sec);
	unlink(tmp);
	return rc;
}

/* `rackpilotd backup FILE` and `rackpilotd restore FILE` (argv[0] names which): the data
 * directory's SQLite database into a backup file while its server serves, and a backup file
 * into a data directory that has no database. PostgreSQL has pg_dump. Exit status. */
static int
backup_main(int argc, char **argv)
{
	static const struct option longopts[] = {
	        {"config", required_argument, NULL, 'c'},
	        {"data-dir", required_argument, NULL, 'D'},
	        {"with-key", no_argument, NULL, 'W'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	int restore = !strcmp(argv[0], "restore"), with_key = 0, opt, rc = 1;
	const char *config_path = NULL, *data_dir = NULL, *file;
	char why[1200], dbpath[600], keypath[600], keytext[512] = "";
	struct rp_secrets *sec = NULL;
	struct rp_config cfg;
	json_t *extra = NULL, *m = NULL, *t;
	size_t i;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_path = optarg;
			break;
		case 'D':
			data_dir = optarg;
			break;
		case 'W':
			with_key = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || (restore && with_key)) {
		fprintf(stderr, "rackpilotd: %s takes one FILE%s\n", argv[0],
		        restore ? " (and no --with-key)" : "");
		usage(stderr);
		return 2;
	}
	file = argv[optind];
	rp_config_defaults(&cfg);
	if ((config_path && rp_config_load(&cfg, config_path, why, sizeof why) < 0) ||
	    (data_dir && rp_config_set(&cfg, "data_dir", data_dir, why, sizeof why) < 0) ||
	    rp_config_check(&cfg, why, sizeof why) < 0) {
		fprintf(stderr, "rackpilotd: %s\n", why);
		return 1;
	}
	if (cfg.database[0]) {
		rp_log_error(
		        "the database is PostgreSQL: back it up with pg_dump and restore it with "
		        "pg_restore (docs/deployment.md); %s covers SQLite only",
		        argv[0]);
		return 1;
	}
	umask(077);
	snprintf(dbpath, sizeof dbpath, "%s/rackpilot.db", cfg.data_dir);
	key_path(&cfg, keypath, sizeof keypath);
	if (!restore) {
		if ((extra = json_pack("{s:s}", "rackpilotd", RP_VERSION)) == NULL)
			goto out;
		if (with_key) {
			/* The key as the server loads it, whole: not one half-way through a
			 * rotation. */
			if (rp_secrets_load(keypath, 0, &sec, why, sizeof why) < 0) {
				rp_log_error("%s", why);
				goto out;
			}
			if (rp_secrets_next_key_id(sec)) {
				rp_log_error("%s: a key rotation is under way; finish it "
				             "(--rotate-secret-key) before a backup with the key",
				             keypath);
				goto out;
			}
			if (!read_key(keypath, keytext, sizeof keytext) ||
			    json_object_set_new(extra, "secret_key_file", json_string(keytext)) !=
			            0)
				goto out;
			rp_log_warn("%s holds the secret key: whoever reads it can open every BMC "
			            "password in it; keep it as you keep %s",
			            file, keypath);
		}
		if (rp_store_backup(dbpath, file, extra, &m, why, sizeof why) != RP_ERR_OK) {
			rp_log_error("no backup made: %s", why);
			goto out;
		}
	} else {
		const char *key;

		if (mkdir_p(cfg.data_dir) < 0) {
			rp_log_error("cannot create %s: %s", cfg.data_dir, strerror(errno));
			goto out;
		}
		/* No server may start on the directory while its database appears. */
		if (private_data_dir(cfg.data_dir) < 0 || lock_data_dir(cfg.data_dir) < 0)
			goto out;
		if (rp_store_restore(file, dbpath, restore_key, keypath, &m, why, sizeof why) !=
		    RP_ERR_OK) {
			rp_log_error("nothing restored: %s", why);
			goto out;
		}
		key = json_string_value(json_object_get(m, "secret_key_file"));
		if (key == NULL && access(keypath, F_OK) != 0) {
			rp_log_warn(
			        "the backup holds no secret key: put the secret.key of the server "
			        "it came from at %s before starting rackpilotd (or start it with "
			        "--forget-secrets and enter the BMC passwords again)",
			        keypath);
		}
	}
	json_array_foreach(json_object_get(m, "tables"), i, t)
	{
		if (json_integer_value(json_object_get(t, "rows")) == 0)
			continue;
		rp_log_info("  %-24s %8lld rows  checksum %s",
		            json_string_value(json_object_get(t, "table")),
		            (long long)json_integer_value(json_object_get(t, "rows")),
		            json_string_value(json_object_get(t, "checksum")));
	}
	rp_log_info("%s %lld rows in %zu tables (schema version %lld, each table's rows and "
	            "checksum %s) %s %s",
	            restore ? "restored" : "backed up",
	            (long long)json_integer_value(json_object_get(m, "rows")),
	            json_array_size(json_object_get(m, "tables")),
	            (long long)json_integer_value(json_object_get(m, "schema_version")),
	            restore ? "checked against its manifest" : "in its manifest",
	            restore ? "into" : "to", restore ? dbpath : file);
	rc = 0;
out:
	if (m && json_string_value(json_object_get(m, "secret_key_file")))
		explicit_bzero((char *)json_string_value(json_object_get(m, "secret_key_file")),
		               strlen(json_string_value(json_object_get(m, "secret_key_file"))));
	if (extra && json_string_value(json_object_get(extra, "secret_key_file")))
		explicit_bzero(
		        (char *)json_string_value(json_object_get(extra, "secret_key_file")),
		        strlen(json_string_value(json_object_get(extra, "secret_key_file"))));
	explicit_bzero(keytext, sizeof keytext);
	json_decref(extra);
	json_decref(m);
	rp_secrets_free(sec);
	return rc;
}

/* Test hook for the crash tests of --rotate-secret-key: with RACKPILOTD_PAUSE_AT=name the
 * process stops at that point (saying so on stderr) until it is killed. */
static void
pause_point(const char *name)
{
	const char *want = getenv("RACKPILOTD_PAUSE_AT");

	if (want == NULL || strcmp(want, name) != 0)
		return;
	fprintf(stderr, "rackpilotd: paused at %s\n", name);
	for (;;)
		pause();
}

/* --rotate-secret-key: a new key in PATH.new, every secret sealed again under it in one
 * transaction, PATH.new renamed over PATH. A kill at any point leaves a state the next
 * start resolves (rp_store_secrets_prepare): the database is under one key, and that key's
 * file is kept. */
static int
rotate_secret_key(struct rp_store *st, struct rp_secrets *sec, const char *path)
{
	char why[512], old[RP_SECRET_KEY_ID_BUF];
	int n = 0;

	snprintf(old, sizeof old, "%s", rp_secrets_key_id(sec));
	if (rp_secrets_rotate_begin(sec, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		return -1;
	}
	pause_point("rotate-begun");
	if (rp_store_secrets_reseal(st, &n, why, sizeof why) != RP_ERR_OK) {
		rp_log_error("%s", why);
		return -1;
	}
	pause_point("rotate-resealed");
	if (rp_secrets_rotate_finish(sec, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		return -1;
	}
	rp_log_info("secret key rotated: %d secret(s) sealed under key %s (was %s); %s holds it", n,
	            rp_secrets_key_id(sec), old, path);
	return 0;
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
		e = rp_store_token_create(st, "admin", "admin", hash, 0,
		                          "rackpilotd --new-admin-token", &out);
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
		if (rp_boot_dnsmasq_update(cfg->dnsmasq_hosts, cfg->dnsmasq_pidfile,
		                           b.data ? b.data : "", b.len, why, sizeof why) < 0) {
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

static enum rp_log_level
log_level_of(const char *name)
{
	return !strcmp(name, "error")   ? RP_LOG_ERROR
	       : !strcmp(name, "warn")  ? RP_LOG_WARN
	       : !strcmp(name, "debug") ? RP_LOG_DEBUG
	                                : RP_LOG_INFO;
}

/* c as rp_config_print writes it, into a new string (NULL when out of memory). */
static char *
config_text(const struct rp_config *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (f == NULL)
		return NULL;
	rp_config_print(c, f);
	fclose(f);
	return text;
}

/* SIGHUP: read the configuration file again, as the start did (demo's data_dir first, the
 * command line's settings over the file's). What can change while serving changes (log_level;
 * the TLS files are reread by the caller); every other setting that differs is named in the
 * log as waiting for the next start, so nobody believes a change took that did not. A file
 * that no longer reads or checks changes nothing. */
static void
config_reload(const char *path, int demo, const char *const *keys, const char *const *vals, int n,
              struct rp_config *loaded, struct rp_config *cfg)
{
	struct rp_config fresh;
	char why[512], later[1024] = "", *a = NULL, *b = NULL, *pa, *pb;
	size_t used = 0;
	int i;

	rp_config_defaults(&fresh);
	if (demo)
		rp_config_set(&fresh, "data_dir", "./var-demo", why, sizeof why);
	if (path && rp_config_load(&fresh, path, why, sizeof why) < 0) {
		rp_log_error("SIGHUP: %s; the running configuration stays", why);
		return;
	}
	for (i = 0; i < n; i++)
		if (rp_config_set(&fresh, keys[i], vals[i], why, sizeof why) < 0) {
			rp_log_error("SIGHUP: %s; the running configuration stays", why);
			return;
		}
	if (rp_config_check(&fresh, why, sizeof why) < 0) {
		rp_log_error("SIGHUP: %s; the running configuration stays", why);
		return;
	}
	if ((a = config_text(loaded)) == NULL || (b = config_text(&fresh)) == NULL) {
		rp_log_error("SIGHUP: out of memory; the running configuration stays");
		goto out;
	}
	/* Both list every setting in the table's order, one "key = value" line each. */
	for (pa = a, pb = b; *pa && *pb;) {
		size_t la = strcspn(pa, "\n"), lb = strcspn(pb, "\n"), k = strcspn(pa, " =");

		if (la != lb || memcmp(pa, pb, la) != 0) {
			if (k == 9 && !strncmp(pa, "log_level", 9)) {
				snprintf(cfg->log_level, sizeof cfg->log_level, "%s",
				         fresh.log_level);
				snprintf(loaded->log_level, sizeof loaded->log_level, "%s",
				         fresh.log_level);
				rp_log_set_level(log_level_of(cfg->log_level));
				rp_log_info("SIGHUP: log_level = %s", cfg->log_level);
			} else if (used + k + 3 < sizeof later) {
				used += (size_t)snprintf(later + used, sizeof later - used,
				                         "%s%.*s", used ? ", " : "", (int)k, pa);
			}
		}
		pa += la + (pa[la] == '\n');
		pb += lb + (pb[lb] == '\n');
	}
	if (used)
		rp_log_warn(
		        "SIGHUP: changed in the configuration, taking effect at the next start: "
		        "%s",
		        later);
	else
		rp_log_info("SIGHUP: configuration reread%s", path ? "" : " (defaults: no file)");
out:
	free(a);
	free(b);
}

static int
listen_is_loopback(const char *listen)
{
	char host[64];
	unsigned port;

	return rp_http_parse_listen(listen, host, sizeof host, &port) == 0 &&
	       rp_http_loopback(host);
}

/* TLS on the API: on with a configured certificate, or (tls = on, or auto off loopback) with
 * one made for the listen address in DATA_DIR/tls/. tls = off, or auto on loopback: plain. */
static int
tls_setup(const struct rp_config *cfg, char *cert, size_t certlen, char *key, size_t keylen,
          struct rp_tls **out)
{
	char host[64], dir[600], why[512];
	unsigned port;
	int made = 0;

	*out = NULL;
	rp_http_parse_listen(cfg->listen, host, sizeof host, &port);
	if (!strcmp(cfg->tls, "off") ||
	    (!strcmp(cfg->tls, "auto") && !cfg->tls_cert[0] && rp_http_loopback(host)))
		return 0;
	if (cfg->tls_cert[0]) {
		snprintf(cert, certlen, "%s", cfg->tls_cert);
		snprintf(key, keylen, "%s", cfg->tls_key);
	} else {
		/* data_dir is at most sizeof - 32 bytes (config.c), so these fit. */
		snprintf(dir, sizeof dir, "%.480s/tls", cfg->data_dir);
		snprintf(cert, certlen, "%.480s/tls/cert.pem", cfg->data_dir);
		snprintf(key, keylen, "%.480s/tls/key.pem", cfg->data_dir);
		if (mkdir_p(dir) < 0) {
			rp_log_error("cannot create %s: %s", dir, strerror(errno));
			return -1;
		}
		if (rp_tls_selfsigned(cert, key, host, &made, why, sizeof why) < 0) {
			rp_log_error("%s", why);
			return -1;
		}
		if (made)
			rp_log_info("TLS: made a self-signed certificate for %s in %s (give "
			            "clients its "
			            "fingerprint, or replace it with tls_cert/tls_key)",
			            host, cert);
	}
	if (rp_tls_load(cert, key, out, why, sizeof why) < 0) {
		rp_log_error("TLS: %s", why);
		return -1;
	}
	return 0;
}

/* Where the plain-HTTP boot listener goes: boot_listen; or, with TLS on the API and no
 * boot_listen, the API's address with the next port (iPXE and PXE firmware cannot check a
 * certificate); "off" or nothing: none (with plain HTTP the API listener serves /boot/ too). */
static int
boot_listen_of(const struct rp_config *cfg, int tls, char *out, size_t len)
{
	char host[64];
	unsigned port;

	out[0] = '\0';
	if (!strcmp(cfg->boot_listen, "off"))
		return 0;
	if (cfg->boot_listen[0]) {
		snprintf(out, len, "%s", cfg->boot_listen);
		return 0;
	}
	if (!tls)
		return 0;
	rp_http_parse_listen(cfg->listen, host, sizeof host, &port);
	if (port == 65535) {
		rp_log_error("listen port 65535 leaves no next port for the boot listener: set "
		             "boot_listen");
		return -1;
	}
	snprintf(out, len, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port ? port + 1 : 0);
	return 0;
}

/* The base URL firmware images are offered at (SimpleUpdate's ImageURI, an agent's image_url):
 * boot_url; unset, the listener that serves /boot/images/ when its address is concrete (not a
 * wildcard, not port 0): the plain-HTTP boot listener when there is one (a BMC need not trust
 * the API's certificate), else the API's, https with TLS on. "" when there is none. */
static void
image_url_of(const struct rp_config *cfg, int tls, const char *bootaddr, char *out, size_t len)
{
	const char *addr = bootaddr[0] ? bootaddr : cfg->listen;
	char host[64];
	unsigned port = 0;

	out[0] = '\0';
	if (cfg->boot_url[0]) {
		snprintf(out, len, "%s", cfg->boot_url);
		return;
	}
	if (rp_http_parse_listen(addr, host, sizeof host, &port) < 0 || port == 0 || !host[0] ||
	    !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*") ||
	    !strcmp(host, "[::]"))
		return;
	snprintf(out, len, strchr(host, ':') ? "%s://[%s]:%u" : "%s://%s:%u",
	         tls && !bootaddr[0] ? "https" : "http", host, port);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
	        {"config", required_argument, NULL, 'c'},
	        {"check", no_argument, NULL, 'n'},
	        {"listen", required_argument, NULL, 'L'},
	        {"tls-cert", required_argument, NULL, 'C'},
	        {"tls-key", required_argument, NULL, 'K'},
	        {"boot-listen", required_argument, NULL, 'B'},
	        {"rotate-secret-key", no_argument, NULL, 'R'},
	        {"forget-secrets", no_argument, NULL, 'F'},
	        {"data-dir", required_argument, NULL, 'D'},
	        {"database", required_argument, NULL, 'Q'},
	        {"migrate-to", required_argument, NULL, 'G'},
	        {"server-name", required_argument, NULL, 'S'},
	        {"threads", required_argument, NULL, 'T'},
	        {"log-level", required_argument, NULL, 'l'},
	        {"no-access-log", no_argument, NULL, 'A'},
	        {"power-sync-interval", required_argument, NULL, 'P'},
	        {"sensor-sync-interval", required_argument, NULL, 'Y'},
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
	char why[512], dbpath[1100], sshdir[600], updir[600], console_dir[600];
	struct dhcp_state dhcp = {.version = -1};
	/* Flags are applied after the file so they win; keep them until then. */
	const char *flag_key[32], *flag_val[32];
	int nflags = 0, check = 0, reissue = 0, demo = 0, is_demo = 0, empty = 0, opt, rc = 1, sig;
	static struct rp_config loaded; /* (large: not on the stack) */
	int64_t watchdog_ms = 0, fed_ms = 0;
	int rotate = 0, forget = 0, leader = 0;
	const char *migrate_to = NULL;
	unsigned ticks = 0;
	struct rp_secrets *secrets = NULL;
	struct rp_tls *tls = NULL;
	struct rp_http *boot_http = NULL;
	struct rp_limit *limit = NULL;
	char keypath[600], certpath[600], tlskeypath[600], bootaddr[96] = "", image_url[300] = "";
	char server[64];
	size_t i;
	sigset_t sigs;
	enum rp_err e;

	if (argc > 1 && (!strcmp(argv[1], "backup") || !strcmp(argv[1], "restore")))
		return backup_main(argc - 1, argv + 1);
	rp_config_defaults(&cfg);
	while ((opt = getopt_long(argc, argv, "c:nVh", longopts, NULL)) != -1) {
		if (nflags == (int)(sizeof flag_key / sizeof *flag_key)) {
			fprintf(stderr, "rackpilotd: too many options\n");
			return 2;
		}
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
		case 'Q':
			flag_key[nflags] = "database", flag_val[nflags++] = optarg;
			break;
		case 'G':
			migrate_to = optarg;
			break;
		case 'C':
			flag_key[nflags] = "tls_cert", flag_val[nflags++] = optarg;
			break;
		case 'K':
			flag_key[nflags] = "tls_key", flag_val[nflags++] = optarg;
			break;
		case 'B':
			flag_key[nflags] = "boot_listen", flag_val[nflags++] = optarg;
			break;
		case 'R':
			rotate = 1;
			break;
		case 'F':
			forget = 1;
			break;
		case 'S':
			flag_key[nflags] = "server_name", flag_val[nflags++] = optarg;
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
		case 'Y':
			flag_key[nflags] = "sensor_sync_interval", flag_val[nflags++] = optarg;
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
	/* As the file and flags said, before the start fills in what they left open (threads,
	 * image_dir): what a SIGHUP compares the file against. */
	loaded = cfg;
	if (check) {
		printf("# effective configuration%s%s\n", config_path ? " from " : " (defaults)",
		       config_path ? config_path : "");
		rp_config_print(&cfg, stdout);
		return 0;
	}
	rp_log_set_level(log_level_of(cfg.log_level));
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

	/* Nothing rackpilotd writes is for anybody else (dnsmasq's host file sets its own mode). */
	umask(077);
	if (mkdir_p(cfg.data_dir) < 0) {
		rp_log_error("cannot create data directory %s: %s", cfg.data_dir, strerror(errno));
		goto out;
	}
	if (private_data_dir(cfg.data_dir) < 0)
		goto out;
	/* --new-admin-token only adds a row, which a running server picks up: no lock needed. */
	if (!reissue && lock_data_dir(cfg.data_dir) < 0)
		goto out;
	if (cfg.database[0])
		snprintf(dbpath, sizeof dbpath, "%s", cfg.database);
	else
		snprintf(dbpath, sizeof dbpath, "%s/rackpilot.db", cfg.data_dir);
	e = rp_store_open(dbpath, &st, why, sizeof why);
	explicit_bzero(dbpath, sizeof dbpath);
	if (e != RP_ERR_OK) {
		rp_log_error("%s", why);
		goto out;
	}
	rp_store_set_connections(st, (int)cfg.db_connections);
	if (!reissue) {
		/* Another server leads: this one serves and runs jobs all the same, and takes the
		 * lead when that one stops (the main loop asks again every 5 s). */
		if ((e = rp_store_hold(st, why, sizeof why)) == RP_ERR_CONFLICT)
			rp_log_info("%s: %s; this server follows", rp_store_name(st), why);
		else if (e != RP_ERR_OK) {
			rp_log_error("%s: %s", rp_store_name(st), why);
			goto out;
		}
		leader = e == RP_ERR_OK;
		if (rp_store_watch(st) < 0) {
			rp_log_error("cannot start the thread that hears of other servers' writes");
			goto out;
		}
	}
	rp_log_info("database %s (schema version %d)", rp_store_name(st),
	            rp_store_schema_version(st));
	if (admin_token(st, cfg.data_dir, reissue) < 0)
		goto out;
	if (reissue) {
		rc = 0;
		goto out;
	}
	/* The key that seals the BMC passwords lives beside the database, never in it. */
	key_path(&cfg, keypath, sizeof keypath);
	if (rp_secrets_load(keypath, 1, &secrets, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		goto out;
	}
	rp_store_set_secrets(st, secrets);
	if (rp_store_secrets_prepare(st, forget, why, sizeof why) != RP_ERR_OK) {
		rp_log_error("%s", why);
		goto out;
	}
	rp_log_info("secret key %s (id %s): BMC passwords are sealed with it; without it they are "
	            "lost",
	            keypath, rp_secrets_key_id(secrets));
	if (rotate) {
		rc = rotate_secret_key(st, secrets, keypath) < 0 ? 1 : 0;
		goto out;
	}
	if (migrate_to) {
		rc = migrate(st, migrate_to) < 0 ? 1 : 0;
		goto out;
	}
	/* The recipes rackpilotd ships (docs/recipes.md), where no recipe has their name yet.
	 * Not a reason to refuse to start: a read-only or full database still serves. */
	if (rp_store_recipe_ship(st, NULL) != RP_ERR_OK)
		rp_log_warn("cannot load the shipped recipes now; the next start tries again");
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
		rp_log_error("cannot create the image directory %s: %s", cfg.image_dir,
		             strerror(errno));
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
	/* TLS and the boot listener decide the image URL BMCs get, before any job runs. */
	if (tls_setup(&cfg, certpath, sizeof certpath, tlskeypath, sizeof tlskeypath, &tls) < 0)
		goto out;
	if (boot_listen_of(&cfg, tls != NULL, bootaddr, sizeof bootaddr) < 0)
		goto out;
	image_url_of(&cfg, tls != NULL, bootaddr, image_url, sizeof image_url);
	if (!cfg.boot_url[0] && image_url[0])
		rp_log_info("boot_url unset: firmware images are offered to BMCs and agents at %s",
		            image_url);
	/* The name job leases carry: a restart under the same name takes its jobs back at once. */
	if (cfg.server_name[0])
		snprintf(server, sizeof server, "%s", cfg.server_name);
	else if (gethostname(server, sizeof server) != 0 || server[0] == '\0')
		snprintf(server, sizeof server, "rackpilotd");
	server[sizeof server - 1] = '\0';
	/* The characters server_name allows (it lands in metric labels and events). */
	for (i = 0; server[i]; i++)
		if (!isalnum((unsigned char)server[i]) && !strchr(".-_", server[i]))
			server[i] = '-';
	rp_jobs_defaults(&jo);
	jo.image_dir = cfg.image_dir;
	jo.image_url = image_url[0] ? image_url : NULL;
	jo.workers = cfg.job_workers;
	jo.server_name = server;
	jo.lease_s = cfg.job_lease;
	jo.ssh_workers = cfg.ssh_workers;
	jo.ssh_key = sshkey;
	jo.agent_command = cfg.agent_command;
	jo.sweep_interval_s = cfg.power_sync_interval;
	jo.sweep_concurrency = cfg.power_sync_concurrency;
	jo.sensor_interval_s = cfg.sensor_sync_interval;
	jo.sensor_history_hours = cfg.sensor_history_hours;
	jo.sensor_history_max_rows = cfg.sensor_history_max_rows;
	jo.rack_history_days = cfg.rack_history_days;
	jo.drive_warning_c = cfg.drive_temp_warning;
	jo.power_on_stagger = cfg.power_on_stagger;
	jo.power_on_stagger_ms = cfg.power_on_stagger_ms;
	jo.power_on_settle_s = cfg.power_on_settle;
	jo.retention_days = cfg.retention_days;
	jo.fault_threshold = cfg.bmc_fault_threshold;
	jo.webhook_timeout_s = cfg.webhook_timeout;
	jo.webhook_max_age_s = cfg.webhook_max_age;
	jo.webhook_ca_file = cfg.webhook_ca_file[0] ? cfg.webhook_ca_file : NULL;
	jo.webhook_proxy = cfg.webhook_proxy[0] ? cfg.webhook_proxy : NULL;
	snprintf(console_dir, sizeof console_dir, "%.480s/console", cfg.data_dir);
	jo.console_dir = console_dir;
	jo.console_mode = cfg.console_log;
	jo.console_max_sessions = cfg.console_max_sessions;
	jo.console_log_bytes = cfg.console_log_bytes;
	jo.console_idle_s = cfg.console_idle_timeout;
	if (rp_jobs_start(st, &jo, &jobs, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		goto out;
	}
	rp_jobs_lead(jobs, leader);
	if ((rollouts = rp_rollout_new(st, jobs)) == NULL)
		goto out;
	api.jobs = jobs;
	api.store = st;
	api.ssh_public_key = rp_ssh_key_public(sshkey);
	api.agent_heartbeat_s = (int)cfg.agent_heartbeat;
	api.image_dir = cfg.image_dir;
	api.demo = is_demo;
	api.boot_url = cfg.boot_url;
	api.image_url = jo.image_url;
	api.discovery = cfg.discovery;
	api.discovery_max = (int)cfg.discovery_max_tokens;
	api.discovery_per_source = (int)cfg.discovery_max_per_source;
	api.discovery_max_nodes = (int)cfg.discovery_max_nodes;
	api.boot_source_check = cfg.boot_source_check;
	api.agent_url = cfg.agent_url;
	api.max_streams_per_token = cfg.max_streams_per_token;
	pthread_mutex_init(&api.streams_mu, NULL);
	pthread_mutex_init(&api.tls_mu, NULL);
	api.bootstrap_ttl_s = cfg.bootstrap_ttl;
	api.provision_timeout_s = cfg.provision_timeout;
	api.deploy_boot_timeout_s = cfg.deploy_boot_timeout;
	api.metrics = rp_metrics_new(rp_api_route_count);
	api.started_at = rp_time_now_ms();
	api.max_body = cfg.max_body;
	api.auth_cache = rp_memo_new(1024);
	api.get_cache = rp_memo_new(16384);
	if (api.metrics == NULL || api.auth_cache == NULL || api.get_cache == NULL)
		goto out;
	if (cfg.boot_rate > 0 && (limit = rp_limit_new(cfg.boot_rate, cfg.boot_burst)) == NULL)
		goto out;
	memset(&ho, 0, sizeof ho);
	ho.listen = cfg.listen;
	ho.threads = cfg.threads;
	ho.max_body = cfg.max_body;
	ho.max_import_body = cfg.max_import_body;
	ho.max_inventory = cfg.max_inventory;
	ho.conn_timeout_s = cfg.conn_timeout_s;
	ho.conn_limit = cfg.conn_limit;
	ho.access_log = cfg.access_log;
	ho.max_upload = cfg.max_upload;
	ho.upload_dir = updir;
	ho.generation = generation;
	ho.generation_arg = &api;
	ho.tls = tls;
	ho.limit = limit;
	api.tls = tls != NULL;
	rp_api_tls_pin_set(&api, tls ? rp_tls_fingerprint(tls) : NULL);
	if (rp_http_start(&ho, &api, &http, why, sizeof why) < 0) {
		rp_log_error("%s", why);
		goto out;
	}
	if (bootaddr[0]) {
		char host[64];
		unsigned port = 0;

		/* Boot scripts fetched here point the agent back at the API's port. */
		rp_http_parse_listen(rp_http_address(http), host, sizeof host, &port);
		__atomic_store_n(&api.api_port, port, __ATOMIC_RELEASE);
		ho.listen = bootaddr;
		ho.tls = NULL;
		ho.boot_only = 1;
		ho.generation = NULL;
		if (rp_http_start(&ho, &api, &boot_http, why, sizeof why) < 0) {
			rp_log_error("boot listener: %s", why);
			goto out;
		}
	}
	rp_log_info("rackpilotd %s: %u HTTP threads", RP_VERSION, cfg.threads);
	if (tls)
		rp_log_info("TLS: %s; public-key SHA-256 fingerprint %s (rackpilot --fingerprint, "
		            "agent server_fingerprint)",
		            certpath, rp_tls_fingerprint(tls));
	else if (!listen_is_loopback(cfg.listen))
		rp_log_warn("tls = off: the API on %s is plain HTTP; tokens and BMC passwords "
		            "cross the "
		            "network in clear",
		            cfg.listen);
	/* iPXE and PXE ROMs fetch the kernel and initrd from boot_url: not from the TLS port. */
	if (tls && !boot_http && !cfg.boot_url[0])
		rp_log_warn("boot_listen = off with TLS on: PXE firmware cannot fetch boot scripts "
		            "from "
		            "%s (it cannot check a certificate)",
		            rp_http_address(http));
	else if (tls && cfg.boot_url[0] &&
	         (!strncmp(cfg.boot_url, "https://", 8) || !boot_http ||
	          strstr(cfg.boot_url, strrchr(rp_http_address(http), ':')) != NULL))
		rp_log_warn(
		        "boot_url = %s, but PXE firmware cannot fetch from the TLS listener %s: "
		        "point boot_url at the boot listener (%s)",
		        cfg.boot_url, rp_http_address(http),
		        boot_http ? rp_http_address(boot_http) : "boot_listen is off");
	/* Scripts and tests read this exact line to learn the port. */
	printf("listening on %s\n", rp_http_address(http));
	if (boot_http)
		printf("boot listening on %s\n", rp_http_address(boot_http));
	fflush(stdout);
	/* Type=notify: serving now. The watchdog is fed by this loop, which also holds the
	 * leadership and moves rollouts on: a loop stuck on its database stops feeding it. */
	{
		char status[200];

		snprintf(status, sizeof status, "READY=1\nSTATUS=serving on %s",
		         rp_http_address(http));
		rp_notify(status);
	}
	watchdog_ms = rp_notify_watchdog_ms();
	for (;;) {
		struct timespec tick = {0, 250 * 1000 * 1000};

		if (watchdog_ms && rp_time_mono_ns() / 1000000 - fed_ms >= watchdog_ms / 3) {
			rp_notify("WATCHDOG=1");
			fed_ms = rp_time_mono_ns() / 1000000;
		}

		/* Access lines are buffered; the quarter-second tick bounds how late they appear.
		 */
		sig = sigtimedwait(&sigs, NULL, &tick);
		rp_log_flush();
		/* Leadership: a follower takes it when the leader stops; a leader whose claim the
		 * database lost (a restart) claims it again, or follows when another took it. */
		if (++ticks % 20 == 0) {
			e = rp_store_hold(st, why, sizeof why);
			if ((e == RP_ERR_OK) != leader) {
				leader = e == RP_ERR_OK;
				rp_jobs_lead(jobs, leader);
				if (leader)
					rp_log_info("%s: this server leads now (rollouts, pruning)",
					            rp_store_name(st));
				else
					rp_log_warn("%s: %s; this server follows now",
					            rp_store_name(st), why);
			}
		}
		dnsmasq_sync(st, &cfg, &dhcp);
		if (leader)
			rp_rollout_tick(rollouts);
		if (sig < 0)
			continue;
		if (sig == SIGHUP) {
			char reloading[80];

			snprintf(reloading, sizeof reloading, "RELOADING=1\nMONOTONIC_USEC=%lld",
			         (long long)(rp_time_mono_ns() / 1000));
			rp_notify(reloading);
			config_reload(config_path, demo, flag_key, flag_val, nflags, &loaded, &cfg);
			/* New handshakes get the new certificate; open connections keep theirs. */
			if (tls && rp_tls_reload(tls, why, sizeof why) < 0) {
				rp_log_error("SIGHUP: TLS certificate not reloaded, the old one "
				             "stays: %s",
				             why);
			} else if (tls) {
				/* Boot scripts hand the new pin to the agents from now on. */
				rp_api_tls_pin_set(&api, rp_tls_fingerprint(tls));
				rp_log_info("SIGHUP: TLS certificate %s reloaded; fingerprint %s",
				            certpath, rp_tls_fingerprint(tls));
			}
			rp_notify("READY=1");
			continue;
		}
		rp_notify("STOPPING=1");
		rp_log_info("signal %d: shutting down", sig);
		break;
	}
	rc = 0;
out:
	/* HTTP first (no new jobs), then jobs (running ones stay recorded as running and are
	 * recovered at the next start), then the BMC sessions. */
	rp_http_stop(boot_http);
	rp_http_stop(http);
	rp_tls_free(tls);
	rp_limit_free(limit);
	rp_rollout_free(rollouts);
	rp_jobs_stop(jobs);
	if (api.jobs)
		rp_bmc_global_cleanup();
	rp_log_flush();
	rp_store_free(st);
	rp_ssh_key_free(sshkey);
	rp_secrets_free(secrets);
	rp_metrics_free(api.metrics);
	rp_memo_free(api.auth_cache);
	rp_memo_free(api.get_cache);
	return rc;
}
