/*
 * Serial over LAN through freeipmi's libipmiconsole, as ConMan uses it: the library's engine
 * threads own the RMCP+ session and the SOL payload, and each session is one socket to the
 * caller. The engine starts at the first session (a process that never opens a console runs no
 * engine threads) and stops at rp_bmc_global_cleanup.
 *
 * What the library does, measured against ipmi_sim (tests/ipmi/solprobe.c): submit returns at
 * once and SOL comes up or fails within the session timeout; after it is up, a failure shows as
 * EOF on the socket, and the context's errnum says why (25 session timeout: the BMC went away;
 * 26 excess retransmissions: another client took SOL over).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <freeipmi/freeipmi.h>
#include <ipmiconsole.h>

#include "bmc.h"
#include "util/util.h"

#define ENGINE_THREADS 4     /* libipmiconsole's engine: each thread runs many sessions */
#define SOL_SESSION_MS 60000 /* libipmiconsole's session timeout */
#define TEARDOWN_S     3     /* a stop waits this long for SOL to be deactivated */

struct rp_bmc_sol {
	ipmiconsole_ctx_t ctx;
	int fd;
	char host[300];
};

static pthread_mutex_t engine_mu = PTHREAD_MUTEX_INITIALIZER;
static int engine_up;

static int
engine_start(struct rp_bmc_err *err)
{
	int rc = 0;

	pthread_mutex_lock(&engine_mu);
	if (!engine_up) {
		if (ipmiconsole_engine_init(ENGINE_THREADS, 0) < 0)
			rc = rp_bmc_fail(err, RP_BMC_PROTOCOL, "cannot start the SOL engine: %s",
			                 strerror(errno));
		else
			engine_up = 1;
	}
	pthread_mutex_unlock(&engine_mu);
	return rc;
}

struct teardown {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
};

static void *
teardown_thread(void *arg)
{
	struct teardown *t = arg;

	/* Deactivates SOL at every BMC and closes the sessions: quick when the BMCs answer, a
	 * session timeout when they do not. */
	ipmiconsole_engine_teardown(1);
	pthread_mutex_lock(&t->mu);
	t->done = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

void
rp_bmc_sol_engine_stop(void)
{
	static struct teardown t = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
	struct timespec until;
	pthread_t th;

	pthread_mutex_lock(&engine_mu);
	if (!engine_up) {
		pthread_mutex_unlock(&engine_mu);
		return;
	}
	engine_up = 0;
	pthread_mutex_unlock(&engine_mu);
	/* A stop does not wait on BMCs that are gone: a few seconds for a clean teardown, then
	 * the process goes on (and ends) without it; those BMCs end the sessions themselves. */
	if (pthread_create(&th, NULL, teardown_thread, &t) != 0)
		return;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += TEARDOWN_S;
	pthread_mutex_lock(&t.mu);
	while (!t.done && pthread_cond_timedwait(&t.cv, &t.mu, &until) == 0)
		;
	pthread_mutex_unlock(&t.mu);
	if (t.done)
		pthread_join(th, NULL);
	else
		pthread_detach(th);
}

/* libfreeipmi's workaround flags (options.workarounds) as libipmiconsole spells them. */
static unsigned
workarounds(unsigned freeipmi)
{
	static const struct {
		long from;
		unsigned to;
	} map[] = {
	        {IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_AUTHENTICATION_CAPABILITIES,
	         IPMICONSOLE_WORKAROUND_AUTHENTICATION_CAPABILITIES},
	        {IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_INTEL_2_0_SESSION,
	         IPMICONSOLE_WORKAROUND_INTEL_2_0_SESSION},
	        {IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUPERMICRO_2_0_SESSION,
	         IPMICONSOLE_WORKAROUND_SUPERMICRO_2_0_SESSION},
	        {IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUN_2_0_SESSION,
	         IPMICONSOLE_WORKAROUND_SUN_2_0_SESSION},
	        {IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE,
	         IPMICONSOLE_WORKAROUND_OPEN_SESSION_PRIVILEGE},
	        {IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_NON_EMPTY_INTEGRITY_CHECK_VALUE,
	         IPMICONSOLE_WORKAROUND_NON_EMPTY_INTEGRITY_CHECK_VALUE},
	        {IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_NO_CHECKSUM_CHECK,
	         IPMICONSOLE_WORKAROUND_NO_CHECKSUM_CHECK},
	};
	unsigned out = 0;
	size_t i;

	for (i = 0; i < sizeof map / sizeof map[0]; i++)
		if (freeipmi & (unsigned)map[i].from)
			out |= map[i].to;
	return out;
}

static int
sol_error(struct rp_bmc_sol *s, struct rp_bmc_err *err)
{
	int e = ipmiconsole_ctx_errnum(s->ctx);
	const char *m = ipmiconsole_ctx_strerror(e);
	enum rp_bmc_errkind k;

	switch (e) {
	case IPMICONSOLE_ERR_USERNAME_INVALID:
	case IPMICONSOLE_ERR_PASSWORD_INVALID:
	case IPMICONSOLE_ERR_K_G_INVALID:
	case IPMICONSOLE_ERR_PRIVILEGE_LEVEL_INSUFFICIENT:
	case IPMICONSOLE_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED:
		k = RP_BMC_AUTH;
		break;
	case IPMICONSOLE_ERR_SOL_INUSE:
	case IPMICONSOLE_ERR_SOL_STOLEN:
	case IPMICONSOLE_ERR_EXCESS_RETRANSMISSIONS_SENT:
	case IPMICONSOLE_ERR_BMC_BUSY:
		k = RP_BMC_BUSY;
		break;
	case IPMICONSOLE_ERR_CONNECTION_TIMEOUT:
	case IPMICONSOLE_ERR_SESSION_TIMEOUT:
		k = RP_BMC_UNREACHABLE;
		break;
	case IPMICONSOLE_ERR_SOL_UNAVAILABLE:
	case IPMICONSOLE_ERR_IPMI_2_0_UNAVAILABLE:
	case IPMICONSOLE_ERR_CIPHER_SUITE_ID_UNAVAILABLE:
	case IPMICONSOLE_ERR_SOL_REQUIRES_ENCRYPTION:
	case IPMICONSOLE_ERR_SOL_REQUIRES_NO_ENCRYPTION:
	case IPMICONSOLE_ERR_BMC_ERROR:
		k = RP_BMC_UNSUPPORTED;
		break;
	default:
		k = RP_BMC_PROTOCOL;
	}
	return rp_bmc_fail(err, k, "SOL on %s: %s%s", s->host, m ? m : "unknown error",
	                   e == IPMICONSOLE_ERR_EXCESS_RETRANSMISSIONS_SENT
	                           ? " (another client took SOL over, or the BMC ended it)"
	                           : "");
}

struct rp_bmc_sol *
rp_bmc_sol_open(const struct rp_bmc_target *t, int steal, struct rp_bmc_err *err)
{
	struct ipmiconsole_ipmi_config ipmi = {0};
	struct ipmiconsole_protocol_config proto;
	struct ipmiconsole_engine_config eng = {0};
	struct rp_bmc_sol *s = NULL, *out = NULL;
	char password[sizeof t->password];
	unsigned session_ms;
	int flags;

	/* libipmiconsole 1.6 reads the port as a signed short and calls a higher one an
	 * invalid host name: say what it is. */
	if (t->port > 32767) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
		            "SOL on %s port %u: libipmiconsole takes IPMI ports up to 32767",
		            t->host, t->port);
		return NULL;
	}
	if (engine_start(err) < 0)
		return NULL;
	if ((s = calloc(1, sizeof *s)) == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		return NULL;
	}
	s->fd = -1;
	/* libipmiconsole takes "host:port" for ports other than 623. */
	if (t->port && t->port != 623)
		snprintf(s->host, sizeof s->host, strchr(t->host, ':') ? "[%s]:%u" : "%s:%u",
		         t->host, t->port);
	else
		snprintf(s->host, sizeof s->host, "%s", t->host);
	snprintf(password, sizeof password, "%s", t->password);
	ipmi.username = (char *)t->username;
	ipmi.password = password;
	ipmi.privilege_level = t->privilege == 2   ? IPMICONSOLE_PRIVILEGE_USER
	                       : t->privilege == 3 ? IPMICONSOLE_PRIVILEGE_OPERATOR
	                                           : IPMICONSOLE_PRIVILEGE_ADMIN;
	ipmi.cipher_suite_id = t->cipher_suite;
	ipmi.workaround_flags = workarounds(t->workarounds);
	/* < 0: the library's defaults (60 s session, 20 s keepalive); a test may shorten them
	 * to see a BMC that went away sooner (keepalives then within the session timeout, as
	 * the library requires). */
	memset(&proto, 0xff, sizeof proto);
	session_ms = rp_bmc_env_limit("RP_BMC_SOL_SESSION_MS", SOL_SESSION_MS);
	proto.session_timeout_len = session_ms < SOL_SESSION_MS ? (int)session_ms : -1;
	proto.retransmission_timeout_len = -1;
	proto.retransmission_backoff_count = -1;
	proto.keepalive_timeout_len = session_ms < SOL_SESSION_MS ? (int)session_ms / 2 : -1;
	proto.retransmission_keepalive_timeout_len =
	        session_ms < SOL_SESSION_MS ? (int)session_ms / 4 : -1;
	proto.acceptable_packet_errors_count = -1;
	proto.maximum_retransmission_count = -1;
	eng.behavior_flags = steal ? 0 : IPMICONSOLE_BEHAVIOR_ERROR_ON_SOL_INUSE;
	if ((s->ctx = ipmiconsole_ctx_create(s->host, &ipmi, &proto, &eng)) == NULL) {
		rp_bmc_fail(err, RP_BMC_REJECTED, "SOL on %s: cannot set up the session: %s",
		            s->host, strerror(errno));
		goto out;
	}
	if (ipmiconsole_engine_submit(s->ctx, NULL, NULL) < 0) {
		sol_error(s, err);
		goto out;
	}
	if ((s->fd = ipmiconsole_ctx_fd(s->ctx)) < 0) {
		sol_error(s, err);
		goto out;
	}
	if ((flags = fcntl(s->fd, F_GETFL)) < 0 || fcntl(s->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "SOL on %s: %s", s->host, strerror(errno));
		goto out;
	}
	out = s;
	s = NULL;
out:
	explicit_bzero(password, sizeof password);
	rp_bmc_sol_close(s);
	return out;
}

int
rp_bmc_sol_fd(const struct rp_bmc_sol *s)
{
	return s->fd;
}

int
rp_bmc_sol_state(struct rp_bmc_sol *s, struct rp_bmc_err *err)
{
	switch (ipmiconsole_ctx_status(s->ctx)) {
	case IPMICONSOLE_CTX_STATUS_SUBMITTED:
	case IPMICONSOLE_CTX_STATUS_NOT_SUBMITTED:
		return 0;
	case IPMICONSOLE_CTX_STATUS_SOL_ESTABLISHED:
		/* Up, unless the engine ended it since (its errnum says so). */
		if (ipmiconsole_ctx_errnum(s->ctx) == IPMICONSOLE_ERR_SUCCESS)
			return 1;
		return sol_error(s, err);
	default:
		return sol_error(s, err);
	}
}

int
rp_bmc_sol_break(struct rp_bmc_sol *s, struct rp_bmc_err *err)
{
	if (ipmiconsole_ctx_generate_break(s->ctx) < 0)
		return sol_error(s, err);
	return 0;
}

void
rp_bmc_sol_close(struct rp_bmc_sol *s)
{
	if (s == NULL)
		return;
	if (s->ctx)
		ipmiconsole_ctx_destroy(s->ctx);
	if (s->fd >= 0)
		close(s->fd);
	free(s);
}
