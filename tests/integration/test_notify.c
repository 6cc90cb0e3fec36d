/* rackpilotd under a service manager (Type=notify, WatchdogSec=, ExecReload=kill -HUP): the
 * notifications arrive on the socket NOTIFY_SOCKET names, as systemd would read them (READY
 * once serving, WATCHDOG while the main loop runs, RELOADING then READY around a SIGHUP,
 * STOPPING at the end), and a SIGHUP rereads the configuration: log_level changes at once,
 * other changes are named as waiting for the next start, a broken file changes nothing. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char work[64], conf[128], sock[96];

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static int fd = -1;

static void
write_conf(const char *settings)
{
	FILE *f = fopen(conf, "w");

	assert_non_null(f);
	fprintf(f, "[server]\npower_sync_interval = 0\n%s", settings);
	fclose(f);
}

/* The next notification that starts with prefix (others, such as WATCHDOG=1, are passed
 * over), within timeout_ms: 1 with it in buf, else 0. */
static int
next(const char *prefix, char *buf, size_t len, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;

	for (;;) {
		int64_t left = end - now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return 0;
		if ((n = recv(fd, buf, len - 1, 0)) < 0)
			return 0;
		buf[n] = '\0';
		if (!strncmp(buf, prefix, strlen(prefix)))
			return 1;
	}
}

static int
log_has(const char *needle)
{
	char buf[65536];

	slurp(S.log, buf, sizeof buf);
	return strstr(buf, needle) != NULL;
}

static void
test_notify(void **state)
{
	const char *args[] = {"-c", conf, NULL};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[2048], want[1200];
	int i;

	(void)state;
	snprintf(work, sizeof work, "/tmp/rp-notify-%d", (int)getpid());
	sh("rm -rf '%s' && mkdir -m 700 '%s'", work, work);
	snprintf(conf, sizeof conf, "%s/rackpilotd.conf", work);
	snprintf(sock, sizeof sock, "%s/notify.sock", work);
	assert_true((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) >= 0);
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	write_conf("log_level = info\njob_workers = 4\n");
	setenv("NOTIFY_SOCKET", sock, 1);
	setenv("WATCHDOG_USEC", "600000", 1);
	server_start(&S, NULL, args);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");

	assert_true(next("READY=1", buf, sizeof buf, 5000));
	snprintf(want, sizeof want, "READY=1\nSTATUS=serving on %s", S.base + strlen("http://"));
	assert_string_equal(buf, want);
	/* Fed every third of the 600 ms asked for. */
	for (i = 0; i < 3; i++)
		assert_true(next("WATCHDOG=1", buf, sizeof buf, 400));

	/* A reload of the same file changes nothing, and says so (what the start filled in,
	 * such as image_dir under the data directory, is not a change). */
	kill(S.pid, SIGHUP);
	assert_true(next("RELOADING=1\nMONOTONIC_USEC=", buf, sizeof buf, 3000));
	assert_true(next("READY=1", buf, sizeof buf, 3000));
	usleep(300000);
	assert_true(log_has("SIGHUP: configuration reread"));
	assert_false(log_has("taking effect at the next start"));

	/* A reload: log_level at once, job_workers at the next start. */
	write_conf("log_level = debug\njob_workers = 7\n");
	kill(S.pid, SIGHUP);
	assert_true(next("RELOADING=1\nMONOTONIC_USEC=", buf, sizeof buf, 3000));
	assert_true(next("READY=1", buf, sizeof buf, 3000));
	usleep(300000); /* the log is flushed by the quarter-second tick */
	assert_true(log_has("SIGHUP: log_level = debug"));
	/* Only job_workers: nothing else differs from the file the server started with. */
	assert_true(log_has("taking effect at the next start: job_workers\n"));
	/* A file that no longer reads changes nothing, and the server goes on. */
	write_conf("log_level = chatty\n");
	kill(S.pid, SIGHUP);
	assert_true(next("READY=1", buf, sizeof buf, 3000));
	usleep(300000);
	assert_true(log_has("the running configuration stays"));
	assert_int_equal(count_all(&S, "/v1/nodes"), 0);

	server_stop(&S, SIGTERM);
	assert_true(next("STOPPING=1", buf, sizeof buf, 3000));
	server_cleanup(&S);
	close(fd);
	sh("rm -rf '%s'", work);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_notify),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
