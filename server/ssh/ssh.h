/*
 * ssh.h — rackpilotd's SSH client (libssh): its own key, and running one command on a node
 * whose host key is pinned.
 *
 * The server has one ed25519 key in DATA_DIR/ssh/id_ed25519 (created on first start, mode
 * 0600; a key others can read is refused, as OpenSSH refuses one). Nodes put its public half
 * in authorized_keys. A connection checks the host key against the pinned one before it
 * authenticates, so a swapped or impostor machine never sees a command or a plan.
 * Calls are blocking; one session per thread.
 */
#ifndef RP_SSH_H
#define RP_SSH_H

#include <stddef.h>

struct rp_ssh_key;

/* Load the server key from dir (created 0700 when missing), generating it on first use.
 * Returns 0, or -1 with a message in why (bad permissions, unreadable key). */
int rp_ssh_key_load(const char *dir, struct rp_ssh_key **out, char *why, size_t whylen);

/* The public key as an authorized_keys line ("ssh-ed25519 AAAA... rackpilotd"). Owned by k. */
const char *rp_ssh_key_public(const struct rp_ssh_key *k);

/* Accepts NULL. */
void rp_ssh_key_free(struct rp_ssh_key *k);

enum rp_ssh_status {
	RP_SSH_OK,        /* the command ran and exited; see exit_status */
	RP_SSH_CONNECT,   /* could not connect (refused, unreachable, timeout): transient */
	RP_SSH_HOSTKEY,   /* the host presented another key than the pinned one: permanent */
	RP_SSH_AUTH,      /* our key was not accepted: permanent */
	RP_SSH_DROPPED,   /* the session broke before the command exited: transient */
	RP_SSH_TIMEOUT,   /* the command ran past run_timeout_s and was told to stop */
	RP_SSH_CANCELLED, /* stop() asked to cancel; the command was told to stop */
	RP_SSH_ABANDONED, /* stop() asked to leave; the session was closed as it was */
	RP_SSH_INTERNAL
};

struct rp_ssh_target {
	const char *host;
	int port;
	const char *user;
	const char *key_type; /* pinned host key: type ("ssh-ed25519") and base64 blob */
	const char *key_b64;
	unsigned connect_timeout_s; /* connection and authentication */
	unsigned run_timeout_s;     /* the whole command; 0: none */
};

struct rp_ssh_result {
	enum rp_ssh_status status;
	int exit_status;    /* -1 when the command did not report one */
	char error[256];    /* what went wrong, for people */
	char presented[64]; /* fingerprint of the host key the node presented, if any */
};

/* Connect, verify the host key, authenticate with k, run command, write input to its
 * standard input and close it, and pass everything it prints (stdout and stderr) to
 * out(arg, data, len) as it arrives. stop(arg) is polled about twice a second: 1 asks the
 * command to stop (SIGTERM through the channel) and keeps reading for a while; 2 closes the
 * session at once. res is always filled. */
void rp_ssh_exec(const struct rp_ssh_key *k, const struct rp_ssh_target *t, const char *command,
                 const void *input, size_t inlen,
                 void (*out)(void *arg, const char *data, size_t len), int (*stop)(void *arg),
                 void *arg, struct rp_ssh_result *res);

/* Name of a status ("host key mismatch"), for messages. */
const char *rp_ssh_status_name(enum rp_ssh_status s);

#endif
