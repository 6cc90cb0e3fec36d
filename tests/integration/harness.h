/*
 * harness.h — integration tests run the real rackpilotd on 127.0.0.1 with an ephemeral port
 * and a temporary data directory, and talk to it over HTTP with libcurl.
 */
#ifndef RP_TEST_HARNESS_H
#define RP_TEST_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

#include <cmocka.h>
#include <jansson.h>

struct server {
	pid_t pid;
	char dir[256];    /* data directory (temporary unless given) */
	char base[128];   /* "http://127.0.0.1:PORT" ("https://" after server_tls) */
	char boot[128];   /* the boot listener, "http://127.0.0.1:PORT", or "" */
	char pin[96];     /* "sha256//BASE64" public-key pin for requests; "": none checked */
	char cacert[256]; /* CA file for requests; "": none */
	char admin[128];  /* admin token read from admin.token */
	char log[300];    /* server stderr */
};

struct reply {
	long status;
	json_t *json; /* parsed body when it is JSON, else NULL */
	char *body;   /* raw body, NUL-terminated */
	size_t len;
	char etag[64];
	char location[256];
	char allow[128];
	char ctype[128];
	char request_id[80];
	char csp[256];
	char nosniff[32];
	char retry_after[16];
};

/* The suite's PostgreSQL run (RP_TEST_PG=DIR, tests/pg/cluster.sh): the database of data
 * directory dir as rackpilotd's --database value, made on first use and recorded in
 * dir/.test-database (so a restart finds it); NULL in the SQLite run. Static storage. */
const char *test_database(const char *dir);

/* test_database(dir) as a flag for a shell command line (" --database '...'"), or "". */
const char *test_database_flag(const char *dir);

/* Run sql (no double quotes in it) on the database of data directory dir (its SQLite file or
 * its PostgreSQL database) with the database's own client: system()'s status. */
int test_sql(const char *dir, const char *sql);

/* Start rackpilotd with a new temporary data dir (dir NULL) or the given one, plus extra
 * arguments (NULL-terminated array, may be NULL), on the database test_database names when
 * there is one. The sensor sweep is off (--sensor-sync-interval 0) unless extra turns it on.
 * Fails the test when it does not come up. */
void server_start(struct server *s, const char *dir, const char *const *extra);

/* The server speaks HTTPS: requests go to https:// and check its certificate against pin
 * ("sha256//BASE64", may be NULL) and/or cacert (a file, may be NULL; neither: unchecked). */
void server_tls(struct server *s, const char *pin, const char *cacert);

/* Stop it: SIGTERM (graceful) or SIGKILL, and wait. */
void server_stop(struct server *s, int sig);

/* Remove the data directory. */
void server_cleanup(struct server *s);

/* One HTTP request. token may be NULL; ctype/body may be NULL; headers is a NULL-terminated
 * list of "Name: value" lines or NULL. Returns the status. */
long req(struct server *s, const char *token, const char *method, const char *path,
         const char *ctype, const char *body, size_t len, const char *const *headers,
         struct reply *out);

/* Source address of the harness's requests (CURLOPT_INTERFACE, e.g. "127.0.0.2"); NULL:
 * the kernel's choice. Per thread. */
extern __thread const char *req_source;

/* req() to a full URL (another listener of the server) instead of s->base + path. */
long req_url(struct server *s, const char *token, const char *method, const char *url,
             const char *ctype, const char *body, size_t len, const char *const *headers,
             struct reply *out);

/* JSON request with a body built by json_pack(fmt, ...) (fmt NULL: no body). */
long call(struct server *s, const char *token, const char *method, const char *path,
          struct reply *out, const char *fmt, ...);

/* Free a reply's buffers. */
void reply_free(struct reply *r);

/* Assert r is an error reply with this status and code. */
void assert_error(struct reply *r, long status, const char *code);

/* Create a token of role; returns its secret in buf (cap 128). */
void make_token(struct server *s, const char *role, char *buf);

/* Number of items in GET path (all pages). */
long count_all(struct server *s, const char *path);

/* Poll GET /v1/jobs/ID until the job ends (at most timeout_s). Returns the final job object
 * (caller decrefs); fails the test on a timeout. */
json_t *wait_job(struct server *s, const char *id, int timeout_s);

/* Create a node from a json_pack format; fails the test unless 201. */
void make_node(struct server *s, const char *fmt, ...);

/* The Redfish mock BMC (tests/redfish/mock_bmc.py): count BMCs on consecutive loopback ports. */
struct mock {
	pid_t pid;
	int base, count;
	int tls;
	char ready[256];
};

/* Start it with extra arguments (NULL-terminated, may be NULL), on free ports. */
void mock_start(struct mock *m, int count, const char *const *extra);
void mock_stop(struct mock *m);

/* GET / POST the mock's control API of BMC i (no auth): /__mock/state, /__mock/config... */
json_t *mock_get(struct mock *m, int i, const char *path);
void mock_post(struct mock *m, int i, const char *path, const char *json);

/* Shell helpers for peers started by scripts: sh() fails the test unless the command exits 0;
 * sh_rc() returns its exit status (-1 when it did not exit). */
/* The first of n consecutive loopback TCP ports that nothing listens on now, outside the
 * ranges the kernel hands out and the mock BMCs spread over (61000-64999), spread by pid so
 * that parallel test binaries start apart. For tests that must name their ports. */
int free_ports(int n);

void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int sh_rc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Contents of a small file into buf (len bytes), "" when missing. Returns buf. */
const char *slurp(const char *path, char *buf, size_t len);

/* A string member of o, or NULL. */
const char *jstr(json_t *o, const char *key);

/* Run a sensor sweep on s now (POST /v1/sensors/sync, admin token) and wait for its end (20 s
 * at most): its state, GET /v1/sensors/sync (a new reference); fails the test otherwise. */
json_t *sensor_sync(struct server *s);

/* GET path on s with its admin token: the JSON body (a new reference); fails the test on
 * anything but 200. */
json_t *get_json(struct server *s, const char *path);

/* ---- Simulated machines for the lifecycle tests (acceptance, fabric) ---------------- */

/* A real sshd + rackpilot-agent on a loopback address (tests/ssh/sshnode.sh) whose /proc and
 * /sys are a fixture tree (tests/fixtures/inventory/FIXTURE), started the first time it
 * boots. */
struct simnode {
	char name[32], dir[300], addr[32], mac[20];
	const char *fixture;
	int started;
};

/* Start S for a simulated rack: a fresh work dir from tmpl ("/tmp/rp-x-XXXXXX", into
 * workdir), a config without the power sync in workdir/rackpilotd.conf (conf), the API on a
 * fixed loopback port (listen_at; *port the simulated nodes' SSH port), started with args;
 * then a stand-in kernel and initrd and the "default" boot profile, so that a commission
 * PXE-boots. */
void simrack_start(const char *tmpl, char *workdir, size_t wlen, char *conf, size_t clen,
                   char *listen_at, size_t llen, int *port, const char *const *args);

/* Stop the started nodes' sshds (their agents were one-shot) and remove workdir unless
 * RP_KEEP is set; then group_teardown. For a group's teardown. */
int simrack_stop(struct simnode *nodes, size_t n, const char *workdir, void **state);

/* Wait up to tenths x 0.1 s for node's provision_state to be state: 1 when it is. */
int node_wait_state(struct server *s, const char *node, const char *state, int tenths);

/* Whether n's commission (the node's provision job) waits for its agent to register. */
int simnode_waits(struct server *s, const struct simnode *n);

/* n boots the ramdisk script s gives its MAC: the script's bootstrap token goes to its agent
 * (its sshd starts the first time, on port, running the agent binary agent), which
 * registers; fails the test when either does not work. */
void simnode_boot(struct server *s, struct simnode *n, int port, const char *agent);

/* The result of node's check in an acceptance report (fails the test when there is none),
 * and the check that it has state want (failing with the result when not). */
json_t *accept_result(json_t *run, const char *node, const char *check);
void accept_expect(json_t *run, const char *node, const char *check, const char *want);

/* The server of a test group: group_setup starts it with defaults, group_teardown stops it
 * (SIGTERM, expecting a clean exit) and removes its data. For cmocka_run_group_tests. */
extern struct server S;
int group_setup(void **state);
int group_teardown(void **state);

/* Path to the rackpilotd binary under test and the source tree (from CMake). */
extern const char *rp_test_bin;
extern const char *rp_test_src;

#endif
