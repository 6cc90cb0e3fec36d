/* The service manager's notification protocol (sd_notify(3)), by hand: one datagram of
 * "KEY=VALUE" lines to the AF_UNIX socket $NOTIFY_SOCKET names (a path, or '@' for Linux's
 * abstract namespace). A few lines of libc instead of libsystemd for the server: it needs READY,
 * RELOADING, STOPPING and WATCHDOG, nothing else of that library. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

int
rp_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len;
	ssize_t n;
	int fd;

	if (path == NULL || path[0] == '\0')
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof sa.sun_path) {
		errno = EINVAL;
		return -1;
	}
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
	           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
	close(fd);
	return n < 0 ? -1 : 1;
}

int64_t
rp_notify_watchdog_ms(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	char *end;
	long long v;

	if (usec == NULL || getenv("NOTIFY_SOCKET") == NULL)
		return 0;
	/* Meant for this process, not a child it started (systemd sets WATCHDOG_PID). */
	if (pid && strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	v = strtoll(usec, &end, 10);
	if (end == usec || *end || v <= 0)
		return 0;
	return v / 1000 > 0 ? v / 1000 : 1;
}
