/*
 * The ceiling: a minimal libmicrohttpd server with rackpilotd's daemon options that answers
 * every request with one fixed JSON body. rackpilotd's GET throughput is measured against it.
 *
 *   rp_ceiling PORT THREADS BODY_FILE
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

static char body[65536];
static size_t body_len;

static enum MHD_Result
answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
	if (*con_cls == NULL) {
		*con_cls = c;
		return MHD_YES;
	}
	r = MHD_create_response_from_buffer(body_len, body, MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ret;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sa = {0};
	struct MHD_Daemon *d;
	FILE *f;
	sigset_t s;
	int sig;

	if (argc != 4) {
		fprintf(stderr, "usage: rp_ceiling PORT THREADS BODY_FILE\n");
		return 2;
	}
	f = fopen(argv[3], "r");
	if (f == NULL)
		return 1;
	body_len = fread(body, 1, sizeof body, f);
	fclose(f);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	/* The same flags and options rackpilotd's http/daemon.c passes. */
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0,
	                     NULL, NULL, answer, NULL, MHD_OPTION_SOCK_ADDR, &sa,
	                     MHD_OPTION_THREAD_POOL_SIZE, (unsigned)atoi(argv[2]),
	                     MHD_OPTION_CONNECTION_TIMEOUT, 60U, MHD_OPTION_CONNECTION_LIMIT, 4096U,
	                     MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024U, MHD_OPTION_END);
	if (d == NULL)
		return 1;
	printf("listening on 127.0.0.1:%s\n", argv[1]);
	fflush(stdout);
	sigwait(&s, &sig);
	MHD_stop_daemon(d);
	return 0;
}
