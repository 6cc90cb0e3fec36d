/* rackpilot-agent: the program on each node. docs/agent-protocol.md is its contract. */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "rackpilot/version.h"

static void
usage(FILE *f)
{
	fprintf(f, "usage: rackpilot-agent [-c FILE] [--root DIR] [--url URL] COMMAND\n"
	           "commands:\n"
	           "  inventory            print the inventory as JSON\n"
	           "  register             register with a bootstrap token, save the agent token\n"
	           "  heartbeat            send one heartbeat and print the answer\n"
	           "  daemon               register if needed, then heartbeat until SIGTERM\n"
	           "  run-steps --job ID   run the plan on standard input\n"
	           "  version              print the version\n"
	           "-c FILE defaults to " RP_AGENT_CONF_DEFAULT " (which may be missing).\n");
}

/* Exit status for a failed register/heartbeat, in run-steps' terms. */
static int
exit_for(long st)
{
	if (st == RP_AGENT_ELOCAL)
		return RP_RUN_EXIT_USAGE;
	return rp_agent_transient(st) ? RP_RUN_EXIT_SERVER : 1;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
	        {"config", required_argument, NULL, 'c'}, {"root", required_argument, NULL, 'r'},
	        {"url", required_argument, NULL, 'u'},    {"job", required_argument, NULL, 'j'},
	        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	struct rp_agent_flags flags = {0};
	struct rp_agent_config cfg;
	struct rp_agent_client *cl = NULL;
	const char *job = NULL, *cmd;
	char err[2048], token[256];
	json_t *ans = NULL;
	int opt, fd, rc = RP_RUN_EXIT_USAGE;
	long st;

	/* Children and our own writes assume 0-2 exist; a closed one would be reused by the
	 * first file we open. */
	while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
	/* An inherited SIG_IGN for SIGCHLD would make children vanish before waitpid() sees
	 * them; libcurl with CURLOPT_NOSIGNAL leaves SIGPIPE to us. */
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);

	while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			flags.config = optarg;
			break;
		case 'r':
			flags.root = optarg;
			break;
		case 'u':
			flags.url = optarg;
			break;
		case 'j':
			job = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return RP_RUN_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return RP_RUN_EXIT_USAGE;
	}
	cmd = argv[optind];
	if (job && strcmp(cmd, "run-steps") != 0) {
		fprintf(stderr, "rackpilot-agent: --job goes with run-steps only\n");
		return RP_RUN_EXIT_USAGE;
	}
	if (!strcmp(cmd, "version")) {
		printf("rackpilot-agent %s\n", RP_VERSION);
		return 0;
	}
	if (strcmp(cmd, "inventory") && strcmp(cmd, "register") && strcmp(cmd, "heartbeat") &&
	    strcmp(cmd, "daemon") && strcmp(cmd, "run-steps")) {
		fprintf(stderr, "rackpilot-agent: unknown command '%s'\n", cmd);
		usage(stderr);
		return RP_RUN_EXIT_USAGE;
	}
	if (rp_agent_config_load(&cfg, &flags, err, sizeof err) < 0) {
		rp_log_error("%s", err);
		return RP_RUN_EXIT_USAGE;
	}

	if (!strcmp(cmd, "inventory")) {
		json_t *inv = rp_agent_inventory(cfg.root);

		if (inv == NULL) {
			rp_log_error("out of memory collecting the inventory");
			return 1;
		}
		rc = json_dumpf(inv, stdout, JSON_INDENT(2)) == 0 && putchar('\n') != EOF &&
		                     fflush(stdout) == 0
		             ? 0
		             : 1;
		json_decref(inv);
		return rc;
	}
	if (!strcmp(cmd, "daemon"))
		return rp_agent_daemon(&cfg);
	if (!strcmp(cmd, "run-steps")) {
		if (job == NULL) {
			fprintf(stderr, "rackpilot-agent: run-steps needs --job ID\n");
			return RP_RUN_EXIT_USAGE;
		}
		return rp_agent_run_steps(&cfg, job, STDIN_FILENO);
	}

	cl = rp_agent_client_new(&cfg);
	if (cl == NULL) {
		rp_log_error("out of memory");
		return 1;
	}
	if (!strcmp(cmd, "register")) {
		st = rp_agent_register(&cfg, cl, &ans, err, sizeof err);
		if (st != 0) {
			rp_log_error("register: %s", err);
			rc = exit_for(st);
			goto out;
		}
		printf("registered as node %s (%s)\n",
		       json_string_value(json_object_get(json_object_get(ans, "node"), "name")),
		       json_string_value(json_object_get(json_object_get(ans, "node"), "id")));
		rc = 0;
	} else {
		if (rp_agent_token_read(&cfg, token, sizeof token, err, sizeof err) < 0) {
			rp_log_error("heartbeat: %s", err);
			goto out;
		}
		st = rp_agent_heartbeat(&cfg, cl, token, &ans, err, sizeof err);
		explicit_bzero(token, sizeof token);
		if (st != 0) {
			rp_log_error("heartbeat: %s", err);
			rc = exit_for(st);
			goto out;
		}
		json_dumpf(ans, stdout, JSON_COMPACT);
		putchar('\n');
		rc = 0;
	}
out:
	json_decref(ans);
	rp_agent_client_free(cl);
	return rc;
}
