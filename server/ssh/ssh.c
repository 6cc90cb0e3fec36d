/* The SSH client: the server key, and one command per session with a pinned host key. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "ssh.h"
#include "util/util.h"

#define READ_CHUNK   16384
#define POLL_MS      500
#define KEEPALIVE_S  30
#define STOP_GRACE_S 30

struct rp_ssh_key {
	ssh_key key;
	char pub[700];
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc;

static void
init(void)
{
	init_rc = ssh_init();
}

static int64_t
mono_s(void)
{
	return rp_time_mono_ns() / 1000000000LL;
}

/* Write the private key so that it is never readable by others, not even for a moment. */
static int
key_create(ssh_key *key, const char *path, char *why, size_t whylen)
{
	char tmp[4200];
	mode_t old;
	int rc;

	if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, key) != SSH_OK) {
		snprintf(why, whylen, "cannot generate an ed25519 key");
		return -1;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	unlink(tmp);
	old = umask(077);
	rc = ssh_pki_export_privkey_file(*key, NULL, NULL, NULL, tmp);
	umask(old);
	if (rc != SSH_OK || chmod(tmp, 0600) < 0 || rename(tmp, path) < 0) {
		snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
		ssh_key_free(*key);
		*key = NULL;
		return -1;
	}
	rp_log_info("created the server's SSH key %s", path);
	return 0;
}

int
rp_ssh_key_load(const char *dir, struct rp_ssh_key **out, char *why, size_t whylen)
{
	struct rp_ssh_key *k = NULL;
	char path[4096], pubpath[4200], *b64 = NULL;
	struct stat sb;
	int rc = -1;

	pthread_once(&init_once, init);
	if (init_rc != SSH_OK) {
		snprintf(why, whylen, "libssh failed to initialise");
		return -1;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if ((k = calloc(1, sizeof *k)) == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	snprintf(path, sizeof path, "%s/id_ed25519", dir);
	if (stat(path, &sb) < 0) {
		if (errno != ENOENT) {
			snprintf(why, whylen, "cannot stat %s: %s", path, strerror(errno));
			goto out;
		}
		if (key_create(&k->key, path, why, whylen) < 0)
			goto out;
	} else {
		/* As OpenSSH: a private key others can read is no longer private. */
		if ((sb.st_mode & 077) != 0 || sb.st_uid != geteuid()) {
			snprintf(why, whylen,
			         "%s is readable by others (mode %04o, owner %u): chmod 600 it "
			         "(and check "
			         "who may have copied it)",
			         path, (unsigned)(sb.st_mode & 07777), (unsigned)sb.st_uid);
			goto out;
		}
		if (ssh_pki_import_privkey_file(path, NULL, NULL, NULL, &k->key) != SSH_OK) {
			snprintf(why, whylen, "cannot read the SSH key %s", path);
			goto out;
		}
	}
	if (ssh_pki_export_pubkey_base64(k->key, &b64) != SSH_OK) {
		snprintf(why, whylen, "cannot export the public half of %s", path);
		goto out;
	}
	snprintf(k->pub, sizeof k->pub, "%s %s rackpilotd",
	         ssh_key_type_to_char(ssh_key_type(k->key)), b64);
	snprintf(pubpath, sizeof pubpath, "%s.pub", path);
	{
		char line[720];
		int n = snprintf(line, sizeof line, "%s\n", k->pub);

		/* The public half is for people to copy; failing to write it is not fatal. */
		if (rp_file_write_private(pubpath, line, (size_t)n, 0644) < 0)
			rp_log_warn("cannot write %s: %s", pubpath, strerror(errno));
	}
	*out = k;
	k = NULL;
	rc = 0;
out:
	ssh_string_free_char(b64);
	rp_ssh_key_free(k);
	return rc;
}

const char *
rp_ssh_key_public(const struct rp_ssh_key *k)
{
	return k->pub;
}

void
rp_ssh_key_free(struct rp_ssh_key *k)
{
	if (k == NULL)
		return;
	ssh_key_free(k->key);
	free(k);
}

const char *
rp_ssh_status_name(enum rp_ssh_status s)
{
	switch (s) {
	case RP_SSH_OK:
		return "ok";
	case RP_SSH_CONNECT:
		return "cannot connect";
	case RP_SSH_HOSTKEY:
		return "host key mismatch";
	case RP_SSH_AUTH:
		return "authentication failed";
	case RP_SSH_DROPPED:
		return "session dropped";
	case RP_SSH_TIMEOUT:
		return "timed out";
	case RP_SSH_CANCELLED:
		return "cancelled";
	case RP_SSH_ABANDONED:
		return "abandoned";
	case RP_SSH_INTERNAL:
		break;
	}
	return "internal error";
}

static void fail(struct rp_ssh_result *res, enum rp_ssh_status st, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
fail(struct rp_ssh_result *res, enum rp_ssh_status st, const char *fmt, ...)
{
	va_list ap;

	res->status = st;
	va_start(ap, fmt);
	vsnprintf(res->error, sizeof res->error, fmt, ap);
	va_end(ap);
}

/* Compare what the host presented with the pin; fill res->presented either way. */
static int
host_key_ok(ssh_session s, const struct rp_ssh_target *t, struct rp_ssh_result *res)
{
	ssh_key key = NULL;
	char *b64 = NULL, line[2200];
	struct rp_sshkey parsed;
	const char *type;
	int ok = 0;

	if (ssh_get_server_publickey(s, &key) != SSH_OK) {
		fail(res, RP_SSH_DROPPED, "the host presented no key");
		return 0;
	}
	type = ssh_key_type_to_char(ssh_key_type(key));
	if (type == NULL || ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK) {
		fail(res, RP_SSH_INTERNAL, "cannot read the host's key");
		goto out;
	}
	snprintf(line, sizeof line, "%s %s", type, b64);
	if (rp_sshkey_parse(line, &parsed) == 0)
		snprintf(res->presented, sizeof res->presented, "%s", parsed.fingerprint);
	ok = strcmp(type, t->key_type) == 0 && strcmp(b64, t->key_b64) == 0;
	if (!ok)
		fail(res, RP_SSH_HOSTKEY,
		     "host key mismatch: %s:%d presented %s %s, not the pinned key", t->host,
		     t->port, type, res->presented);
out:
	ssh_string_free_char(b64);
	ssh_key_free(key);
	return ok;
}

/* Accept only the pinned key's algorithm, so a host with several keys shows the pinned one. */
static const char *
hostkey_algorithms(const char *type)
{
	if (strcmp(type, "ssh-rsa") == 0)
		return "rsa-sha2-512,rsa-sha2-256,ssh-rsa";
	return type;
}

void
rp_ssh_exec(const struct rp_ssh_key *k, const struct rp_ssh_target *t, const char *command,
            const void *input, size_t inlen, void (*out)(void *arg, const char *data, size_t len),
            int (*stop)(void *arg), void *arg, struct rp_ssh_result *res)
{
	ssh_session s = NULL;
	ssh_channel ch = NULL;
	char buf[READ_CHUNK];
	long timeout = t->connect_timeout_s ? (long)t->connect_timeout_s : 10;
	int no = 0, yes = 1, rc, stopping = 0;
	int64_t started = mono_s(), last_io = started, stop_at = 0;
	size_t off = 0;

	memset(res, 0, sizeof *res);
	res->exit_status = -1;
	res->status = RP_SSH_INTERNAL;
	pthread_once(&init_once, init);
	if ((s = ssh_new()) == NULL) {
		fail(res, RP_SSH_INTERNAL, "out of memory");
		return;
	}
	/* Nothing from ~/.ssh: the pin in the database is the only trust there is. */
	if (ssh_options_set(s, SSH_OPTIONS_HOST, t->host) < 0 ||
	    ssh_options_set(s, SSH_OPTIONS_PORT, &t->port) < 0 ||
	    ssh_options_set(s, SSH_OPTIONS_USER, t->user) < 0 ||
	    ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout) < 0 ||
	    ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no) < 0 ||
	    ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, "/dev/null") < 0 ||
	    ssh_options_set(s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") < 0 ||
	    ssh_options_set(s, SSH_OPTIONS_HOSTKEYS, hostkey_algorithms(t->key_type)) < 0 ||
	    ssh_options_set(s, SSH_OPTIONS_NODELAY, &yes) < 0) {
		fail(res, RP_SSH_INTERNAL, "bad SSH options: %s", ssh_get_error(s));
		goto out;
	}
	if (ssh_connect(s) != SSH_OK) {
		fail(res, RP_SSH_CONNECT, "cannot connect to %s:%d: %s", t->host, t->port,
		     ssh_get_error(s));
		goto out;
	}
	if (!host_key_ok(s, t, res))
		goto out;
	if ((rc = ssh_userauth_publickey(s, NULL, k->key)) != SSH_AUTH_SUCCESS) {
		if (rc == SSH_AUTH_ERROR)
			fail(res, RP_SSH_DROPPED, "authentication broke off: %s", ssh_get_error(s));
		else
			fail(res, RP_SSH_AUTH,
			     "%s@%s:%d did not accept rackpilotd's key (is it in the "
			     "node's authorized_keys?)",
			     t->user, t->host, t->port);
		goto out;
	}
	if ((ch = ssh_channel_new(s)) == NULL || ssh_channel_open_session(ch) != SSH_OK ||
	    ssh_channel_request_exec(ch, command) != SSH_OK) {
		fail(res, RP_SSH_DROPPED, "cannot start the command: %s", ssh_get_error(s));
		goto out;
	}
	while (off < inlen) {
		uint32_t n = inlen - off > 32768 ? 32768 : (uint32_t)(inlen - off);

		if ((rc = ssh_channel_write(ch, (const char *)input + off, n)) <= 0) {
			fail(res, RP_SSH_DROPPED, "writing the input failed: %s", ssh_get_error(s));
			goto out;
		}
		off += (size_t)rc;
	}
	if (ssh_channel_send_eof(ch) != SSH_OK) {
		fail(res, RP_SSH_DROPPED, "closing the input failed: %s", ssh_get_error(s));
		goto out;
	}
	for (;;) {
		int64_t now;
		int got = 0, want;

		rc = ssh_channel_read_timeout(ch, buf, sizeof buf, 0, POLL_MS);
		if (rc > 0) {
			out(arg, buf, (size_t)rc);
			got = 1;
		} else if (rc == SSH_ERROR) {
			fail(res, RP_SSH_DROPPED, "the session broke: %s", ssh_get_error(s));
			goto out;
		}
		while ((rc = ssh_channel_read_nonblocking(ch, buf, sizeof buf, 1)) > 0) {
			out(arg, buf, (size_t)rc);
			got = 1;
		}
		if (rc == SSH_ERROR) {
			fail(res, RP_SSH_DROPPED, "the session broke: %s", ssh_get_error(s));
			goto out;
		}
		if (ssh_channel_is_eof(ch) && !got && ssh_channel_poll(ch, 0) <= 0 &&
		    ssh_channel_poll(ch, 1) <= 0)
			break;
		now = mono_s();
		if (got)
			last_io = now;
		else if (now - last_io >= KEEPALIVE_S) {
			/* A node that vanished without a FIN shows up only when we write. */
			if (ssh_send_ignore(s, "") != SSH_OK) {
				fail(res, RP_SSH_DROPPED, "the session broke: %s",
				     ssh_get_error(s));
				goto out;
			}
			last_io = now;
		}
		if (stopping) {
			if (now >= stop_at)
				goto out;
			continue;
		}
		want = stop ? stop(arg) : 0;
		if (want == 2) {
			fail(res, RP_SSH_ABANDONED, "left running: rackpilotd is stopping");
			goto out;
		}
		if (want == 1 || (t->run_timeout_s && now - started >= (int64_t)t->run_timeout_s)) {
			if (want == 1)
				fail(res, RP_SSH_CANCELLED, "cancelled");
			else
				fail(res, RP_SSH_TIMEOUT, "ran past %u s", t->run_timeout_s);
			ssh_channel_request_send_signal(ch, "TERM");
			stopping = 1;
			stop_at = now + STOP_GRACE_S;
		}
	}
	res->exit_status = ssh_channel_get_exit_status(ch);
	if (!stopping) {
		if (res->exit_status < 0)
			fail(res, RP_SSH_DROPPED, "the command ended without an exit status");
		else
			res->status = RP_SSH_OK;
	}
out:
	if (ch) {
		ssh_channel_close(ch);
		ssh_channel_free(ch);
	}
	ssh_disconnect(s);
	ssh_free(s);
}
