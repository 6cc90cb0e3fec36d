/* agent: configuration precedence, TLS fingerprints and pinned downloads from a real TLS peer
 * (openssl s_server), the output tail and UTF-8, plans, the resume rules, ${image} quoting,
 * real shell steps and their ready_port (/proc/net/tcp rows), file steps, authorized_keys and
 * MAC selection. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"

static char tmpdir[256];
static pid_t s_server_pid; /* a running openssl s_server (test_download_pinned), or 0 */

static int
setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rp-agent-test.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[300];

	(void)state;
	if (s_server_pid > 0) { /* a failed assertion left it running */
		kill(s_server_pid, SIGTERM);
		waitpid(s_server_pid, NULL, 0);
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
put_file(const char *rel, const char *text)
{
	char path[512], cmd[600];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
	snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static const char *
tpath(const char *rel)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, rel);
	return buf[i];
}

static int
utf8_ok(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);

	json_decref(j);
	return j != NULL;
}

/* ---- Configuration ------------------------------------------------------------------- */

static void
test_config_file(void **state)
{
	struct rp_agent_config c;
	struct rp_agent_flags f = {0};
	char err[512];

	(void)state;
	put_file("a.conf", "# agent\n"
	                   "url = https://rp.example:8443/\n"
	                   "  bootstrap_token=rpb_abc\n"
	                   "state_dir = /srv/rp\n"
	                   "\n"
	                   "ssh_address = 10.0.0.7\n"
	                   "ssh_port = 2222\n"
	                   "tls_verify = false\n"
	                   "reboot_command = \"/bin/echo  reboot \"\n"
	                   "heartbeat_s = 5\n");
	f.config = tpath("a.conf");
	f.root = tmpdir;
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.url, "https://rp.example:8443/");
	assert_string_equal(c.bootstrap_token, "rpb_abc");
	assert_string_equal(c.state_dir, "/srv/rp");
	assert_string_equal(c.token_file, "/srv/rp/token");
	assert_string_equal(c.ssh_address, "10.0.0.7");
	assert_int_equal(c.ssh_port, 2222);
	assert_int_equal(c.tls_verify, 0);
	assert_string_equal(c.reboot_command, "/bin/echo  reboot ");
	assert_int_equal(c.heartbeat_s, 5);
	assert_string_equal(c.ssh_host_key, "/etc/ssh/ssh_host_ed25519_key.pub");

	put_file("b.conf", "url = http://x\n# fine\nbogus = 1\n");
	f.config = tpath("b.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), -1);
	assert_non_null(strstr(err, "b.conf:3"));
	assert_non_null(strstr(err, "bogus"));

	put_file("c.conf", "ssh_port = 70000\n");
	f.config = tpath("c.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), -1);
	assert_non_null(strstr(err, "c.conf:1"));

	put_file("d.conf", "url\n");
	f.config = tpath("d.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), -1);
	assert_non_null(strstr(err, "d.conf:1"));

	put_file("e.conf", "state_dir = relative/dir\n");
	f.config = tpath("e.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), -1);

	/* A -c file must exist; the default one may be missing. */
	f.config = tpath("missing.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), -1);
	rp_agent_config_defaults(&c);
	assert_int_equal(rp_agent_config_file(&c, tpath("missing.conf"), 0, err, sizeof err), 0);
	assert_string_equal(c.state_dir, "/var/lib/rackpilot-agent");
}

static void
test_config_precedence(void **state)
{
	struct rp_agent_config c;
	struct rp_agent_flags f = {0};
	char err[512], conf[1024];

	(void)state;
	put_file("root/proc/cmdline", "BOOT_IMAGE=/vmlinuz quiet \"rackpilot.x=a b\" "
	                              "rackpilot.url=http://cmdline:8080 "
	                              "rackpilot.token=rpb_fromcmdline\n");
	put_file("empty.conf", "# nothing\n");
	f.config = tpath("empty.conf");
	f.root = tpath("root");

	/* Kernel command line alone. */
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.url, "http://cmdline:8080");
	assert_string_equal(c.bootstrap_token, "rpb_fromcmdline");

	/* The file beats the command line, key by key. */
	put_file("url.conf", "url = http://file:1\n");
	f.config = tpath("url.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.url, "http://file:1");
	assert_string_equal(c.bootstrap_token, "rpb_fromcmdline");

	/* Flags beat the file. */
	f.url = "http://flag:2";
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.url, "http://flag:2");
	f.url = NULL;

	/* root from the file decides which cmdline is read... */
	snprintf(conf, sizeof conf, "root = %s\nbootstrap_token = rpb_file\n", tpath("root"));
	put_file("root.conf", conf);
	f.config = tpath("root.conf");
	f.root = NULL;
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.url, "http://cmdline:8080");
	assert_string_equal(c.bootstrap_token, "rpb_file");

	/* ...unless --root says otherwise. */
	f.root = tpath("elsewhere");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.url, "");

	/* Quoted words and malformed values on the cmdline are tolerated. */
	rp_agent_config_defaults(&c);
	rp_agent_config_cmdline(&c, "rackpilot.url=ftp://no rackpilot.token=bad x=\"1 2\"");
	assert_string_equal(c.url, "");
	assert_string_equal(c.bootstrap_token, "");
	rp_agent_config_cmdline(&c, "\"rackpilot.url=http://q\" rackpilot.token=rpb_z");
	assert_string_equal(c.url, "http://q");
	assert_string_equal(c.bootstrap_token, "rpb_z");
}

/* ---- TLS fingerprints ---------------------------------------------------------------- */

/*
 * A known pair, made with openssl 3.0 on a throwaway key:
 *   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout k.pem \
 *       -out c.pem -days 2 -subj /CN=test -addext subjectAltName=IP:127.0.0.1
 *   openssl x509 -in c.pem -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum
 *   ... | openssl dgst -sha256 -binary | base64                  (the pin's base64)
 * Its public key, to check it again (`openssl pkey -pubin -outform DER | sha256sum`):
 *   -----BEGIN PUBLIC KEY-----
 *   MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAErgdiy2/LQeVych7G8SENpb0EJhzu
 *   TeA/9rdnltb757J45d1u0r37d4oeZIPKYaTLB6QwG/r8GWaY7XiR/lqOPQ==
 *   -----END PUBLIC KEY-----
 */
#define VEC_TAIL  "5faeb5ea6fd67b15107d83e46a9326d7f873973874e8d94e39144d7386cf86"
#define VEC_HEX   "a6" VEC_TAIL
#define VEC_UPPER "A65FAEB5EA6FD67B15107D83E46A9326D7F873973874E8D94E39144D7386CF86"
#define VEC_COLONS                                                                                 \
	"A6:5F:AE:B5:EA:6F:D6:7B:15:10:7D:83:E4:6A:93:26:D7:F8:73:97:38:74:E8:D9:4E:39:14:4D:73:"  \
	"86:CF:86"
#define VEC_PIN   "sha256//pl+utepv1nsVEH2D5GqTJtf4c5c4dOjZTjkUTXOGz4Y="
#define OTHER_HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void
test_tls_fingerprint(void **state)
{
	char hex[RP_TLS_FP_HEX], pin[RP_TLS_PIN_MAX], big[128], misplaced[96], dashes[96],
	        short31[96];
	const char *bad[] = {
	        "",
	        VEC_HEX "0",    /* 65 digits */
	        VEC_HEX + 1,    /* 63 */
	        VEC_HEX " ",    /* a blank */
	        VEC_HEX "\n",   /* a newline */
	        VEC_HEX "  -",  /* sha256sum's whole line */
	        "0x" VEC_HEX,   /* a prefix */
	        VEC_PIN,        /* curl's form */
	        VEC_COLONS ":", /* a colon too many */
	        ":" VEC_COLONS, /* ...in front */
	        misplaced,      /* a colon in the wrong place */
	        dashes,         /* other separators */
	        short31,        /* 31 pairs */
	        "g65faeb5ea6fd67b15107d83e46a9326d7f873973874e8d94e39144d7386cf86", /* not hex */
	};
	size_t i;

	(void)state;
	snprintf(misplaced, sizeof misplaced, "%s", VEC_COLONS); /* A6:5FA:E... */
	misplaced[5] = misplaced[6];
	misplaced[6] = ':';
	snprintf(dashes, sizeof dashes, "%s", VEC_COLONS);
	for (i = 0; dashes[i]; i++)
		dashes[i] = dashes[i] == ':' ? '-' : dashes[i];
	snprintf(short31, sizeof short31, "%.92s", VEC_COLONS);

	assert_int_equal(rp_tls_fingerprint_parse(VEC_HEX, hex), 0);
	assert_string_equal(hex, VEC_HEX);
	assert_int_equal(rp_tls_fingerprint_parse(VEC_COLONS, hex), 0);
	assert_string_equal(hex, VEC_HEX);
	assert_int_equal(rp_tls_fingerprint_parse(VEC_UPPER, hex), 0);
	assert_string_equal(hex, VEC_HEX);
	snprintf(big, sizeof big, "%s", VEC_COLONS);
	for (i = 0; big[i]; i++)
		big[i] = (char)tolower((unsigned char)big[i]);
	assert_int_equal(rp_tls_fingerprint_parse(big, big), 0); /* lower case, in place */
	assert_string_equal(big, VEC_HEX);
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(hex, sizeof hex, "untouched");
		assert_int_equal(rp_tls_fingerprint_parse(bad[i], hex), -1);
		assert_string_equal(hex, "untouched");
		assert_int_equal(rp_tls_pin_from_hex(bad[i], pin, sizeof pin), -1);
	}

	/* hex -> pin, in every accepted form; the pin -> hex way back. */
	assert_int_equal(rp_tls_pin_from_hex(VEC_HEX, pin, sizeof pin), 0);
	assert_string_equal(pin, VEC_PIN);
	assert_int_equal(rp_tls_pin_from_hex(VEC_COLONS, pin, sizeof pin), 0);
	assert_string_equal(pin, VEC_PIN);
	assert_int_equal(rp_tls_pin_from_hex(VEC_HEX, pin, RP_TLS_PIN_MAX - 1), -1);
	assert_int_equal(rp_tls_hex_from_pin(VEC_PIN, strlen(VEC_PIN), hex), 0);
	assert_string_equal(hex, VEC_HEX);
	/* As libcurl logs it: more text may follow; only 52 bytes are read. */
	assert_int_equal(rp_tls_hex_from_pin(VEC_PIN "\n", strlen(VEC_PIN) + 1, hex), 0);
	assert_string_equal(hex, VEC_HEX);
	/* The extremes of the alphabet ('A', '/'), base64 from Python's base64 module. */
	memset(big, '0', 64);
	big[64] = '\0';
	assert_int_equal(rp_tls_pin_from_hex(big, pin, sizeof pin), 0);
	assert_string_equal(pin, "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
	memset(big, 'f', 64);
	assert_int_equal(rp_tls_pin_from_hex(big, pin, sizeof pin), 0);
	assert_string_equal(pin, "sha256////////////////////////////////////////////8=");
	assert_int_equal(rp_tls_hex_from_pin(pin, strlen(pin), hex), 0);
	assert_string_equal(hex, big);
	/* Not pins: short, another hash, a non-canonical last character (spare bits set), no pad,
	 * a character outside the alphabet. */
	snprintf(hex, sizeof hex, "untouched");
	assert_int_equal(rp_tls_hex_from_pin(VEC_PIN, strlen(VEC_PIN) - 1, hex), -1);
	assert_int_equal(rp_tls_hex_from_pin(
	                         "sha384//pl+utepv1nsVEH2D5GqTJtf4c5c4dOjZTjkUTXOGz4Y=", 52, hex),
	                 -1);
	assert_int_equal(rp_tls_hex_from_pin(
	                         "sha256//pl+utepv1nsVEH2D5GqTJtf4c5c4dOjZTjkUTXOGz4Z=", 52, hex),
	                 -1);
	assert_int_equal(rp_tls_hex_from_pin("sha256//pl+utepv1nsVEH2D5GqTJtf4c5c4dOjZTjkUTXOGz4YA",
	                                     52, hex),
	                 -1);
	assert_int_equal(rp_tls_hex_from_pin(
	                         "sha256//pl+utepv1nsVEH2D5GqTJtf4c5c4dOjZTjkUTXOGz4-=", 52, hex),
	                 -1);
	assert_string_equal(hex, "untouched");
}

static void
test_config_fingerprint(void **state)
{
	struct rp_agent_config c;
	struct rp_agent_flags f = {0};
	char err[512], conf[256];

	(void)state;
	/* The file: every accepted form, stored as lowercase hex. */
	put_file("fp1.conf", "server_fingerprint = " VEC_COLONS "\n");
	f.config = tpath("fp1.conf");
	f.root = tpath("fproot-none");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.server_fingerprint, VEC_HEX);
	assert_int_equal(c.tls_verify, 1); /* untouched: the pin stands in for it without ca_file */
	put_file("fp2.conf", "server_fingerprint = \"" VEC_HEX "\"\n");
	f.config = tpath("fp2.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.server_fingerprint, VEC_HEX);

	/* Bad values in the file are errors naming file:line and the key. */
	put_file("fp3.conf", "# pinned\nserver_fingerprint = " VEC_HEX "0\n");
	f.config = tpath("fp3.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), -1);
	assert_non_null(strstr(err, "fp3.conf:2"));
	assert_non_null(strstr(err, "server_fingerprint"));
	assert_non_null(strstr(err, "64 hex digits"));
	put_file("fp4.conf", "server_fingerprint = zz" VEC_TAIL "\n");
	f.config = tpath("fp4.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), -1);
	assert_non_null(strstr(err, "fp4.conf:1"));
	put_file("fp5.conf", "server_fingerprint =\n");
	f.config = tpath("fp5.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), -1);

	/* The kernel command line: good forms are taken, bad ones ignored. */
	rp_agent_config_defaults(&c);
	rp_agent_config_cmdline(&c, "quiet rackpilot.tls_sha256=" VEC_HEX " ro");
	assert_string_equal(c.server_fingerprint, VEC_HEX);
	rp_agent_config_defaults(&c);
	rp_agent_config_cmdline(&c, "rackpilot.tls_sha256=" VEC_COLONS);
	assert_string_equal(c.server_fingerprint, VEC_HEX);
	rp_agent_config_defaults(&c);
	rp_agent_config_cmdline(&c, "rackpilot.tls_sha256=" VEC_UPPER);
	assert_string_equal(c.server_fingerprint, VEC_HEX);
	rp_agent_config_defaults(&c);
	rp_agent_config_cmdline(&c, "rackpilot.tls_sha256=" VEC_HEX "00 rackpilot.tls_sha256=abc "
	                            "rackpilot.tls_sha256=x" VEC_TAIL " rackpilot.tls_sha256=");
	assert_string_equal(c.server_fingerprint, "");
	/* A bad value does not clear an earlier good one. */
	rp_agent_config_cmdline(&c, "rackpilot.tls_sha256=" VEC_HEX " rackpilot.tls_sha256=abc");
	assert_string_equal(c.server_fingerprint, VEC_HEX);

	/* Precedence: the file beats the command line; without the key in the file the command
	 * line counts, next to the url it gives. */
	put_file("fproot/proc/cmdline",
	         "rackpilot.url=https://cmdline:8443 rackpilot.tls_sha256=" OTHER_HEX "\n");
	put_file("fp6.conf", "server_fingerprint = " VEC_HEX "\n");
	f.config = tpath("fp6.conf");
	f.root = tpath("fproot");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.server_fingerprint, VEC_HEX);
	assert_string_equal(c.url, "https://cmdline:8443");
	put_file("fp7.conf", "# nothing pinned here\n");
	f.config = tpath("fp7.conf");
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.server_fingerprint, OTHER_HEX);
	/* root from the file decides which cmdline is read, as for url. */
	snprintf(conf, sizeof conf, "root = %s\n", tpath("fproot"));
	put_file("fp8.conf", conf);
	f.config = tpath("fp8.conf");
	f.root = NULL;
	assert_int_equal(rp_agent_config_load(&c, &f, err, sizeof err), 0);
	assert_string_equal(c.server_fingerprint, OTHER_HEX);
}

/* ---- Pinned downloads from a real TLS peer -------------------------------------------- */

/* Runs cmd (a shell line) in tmpdir; 0 when it exits 0. */
static int
sh_in_tmp(const char *cmd)
{
	char line[2048];

	snprintf(line, sizeof line, "cd '%s' && %s", tmpdir, cmd);
	return system(line) == 0 ? 0 : -1;
}

/* openssl s_server -WWW serving tmpdir/www on 127.0.0.1 with cert.pem/key.pem: the port once
 * it accepts, or 0. */
static unsigned
s_server_start(void)
{
	int attempt;

	for (attempt = 0; attempt < 5; attempt++) {
		struct sockaddr_in sa = {.sin_family = AF_INET};
		socklen_t sl = sizeof sa;
		char port[16], log[600], *text = NULL;
		int s = socket(AF_INET, SOCK_STREAM, 0), i;

		/* A port the kernel just had free; s_server may still lose it to a race, then
		 * the next attempt takes another. */
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_true(s >= 0);
		assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
		assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
		close(s);
		snprintf(port, sizeof port, "127.0.0.1:%u", ntohs(sa.sin_port));
		snprintf(log, sizeof log, "%s/s_server.log", tmpdir);
		s_server_pid = fork();
		assert_true(s_server_pid >= 0);
		if (s_server_pid == 0) {
			char cert[600], key[600], www[600];
			int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			int in = open("/dev/null", O_RDONLY);

			snprintf(cert, sizeof cert, "%s/cert.pem", tmpdir);
			snprintf(key, sizeof key, "%s/key.pem", tmpdir);
			snprintf(www, sizeof www, "%s/www", tmpdir);
			if (fd < 0 || in < 0 || chdir(www) < 0)
				_exit(127);
			dup2(in, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			execlp("openssl", "openssl", "s_server", "-accept", port, "-cert", cert,
			       "-key", key, "-WWW", (char *)NULL);
			_exit(127);
		}
		for (i = 0; i < 200; i++) {
			struct timespec ts = {0, 50 * 1000000L};
			int up;

			free(text);
			text = NULL;
			up = rp_file_read(log, 1 << 20, &text, NULL) == 0 && strstr(text, "ACCEPT");
			if (up) {
				free(text);
				return ntohs(sa.sin_port);
			}
			if (waitpid(s_server_pid, NULL, WNOHANG) == s_server_pid)
				break;
			nanosleep(&ts, NULL);
		}
		free(text);
		kill(s_server_pid, SIGTERM);
		waitpid(s_server_pid, NULL, 0);
	}
	s_server_pid = 0;
	return 0;
}

/* Downloads url with cfg into a file: rp_agent_download's result, err and hex set. */
static int
fetch(const struct rp_agent_config *cfg, const char *url, char hex[RP_SHA256_HEX], char *err,
      size_t errlen)
{
	uint64_t bytes = 0;
	int fd = open(tpath("got"), O_RDWR | O_CREAT | O_TRUNC, 0600), rc;

	assert_true(fd >= 0);
	err[0] = '\0';
	rc = rp_agent_download(cfg, url, fd, 30, hex, &bytes, err, errlen);
	close(fd);
	return rc;
}

static void
test_download_pinned(void **state)
{
	struct rp_agent_config c;
	const char *ci = getenv("CI");
	char hex[RP_SHA256_HEX], want[RP_SHA256_HEX], fp[RP_TLS_FP_HEX], err[2048], url[256];
	unsigned port;
	int fd;

	(void)state;
	if (system("command -v openssl > /dev/null 2>&1") != 0) {
		/* .ci/deps installs it: in CI a missing openssl is a failure, not a skip. */
		if (ci && !strcmp(ci, "true"))
			fail_msg("openssl is not installed (CI=true)");
		skip();
	}
	assert_int_equal(
	        sh_in_tmp("mkdir -p www && printf 'an image, 2 lines\\nof bytes\\n' > www/img && "
	                  "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
	                  "-keyout key.pem -out cert.pem -days 2 -subj /CN=rp-test "
	                  "-addext subjectAltName=IP:127.0.0.1 2> /dev/null && "
	                  "openssl x509 -in cert.pem -noout -pubkey | openssl pkey -pubin "
	                  "-outform DER | sha256sum | cut -c1-64 > fp"),
	        0);
	assert_int_equal(rp_agent_read_line(tmpdir, "/fp", fp, sizeof fp), 0);
	fd = open(tpath("www/img"), O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(rp_fd_sha256(fd, want, NULL), 0);
	close(fd);
	port = s_server_start();
	assert_int_not_equal(port, 0);

	rp_agent_config_defaults(&c);
	snprintf(c.url, sizeof c.url, "https://127.0.0.1:%u/", port);
	/* Pinned, no ca_file: the pin stands in for CA verification of the self-signed cert. */
	snprintf(c.server_fingerprint, sizeof c.server_fingerprint, "%s", fp);
	assert_int_equal(fetch(&c, "/img", hex, err, sizeof err), 0);
	assert_string_equal(hex, want);
	snprintf(url, sizeof url, "https://127.0.0.1:%u/img", port);
	assert_int_equal(fetch(&c, url, hex, err, sizeof err), 0); /* absolute, same origin */
	assert_string_equal(hex, want);

	/* A wrong pin: refused at the handshake, with both keys named. */
	snprintf(c.server_fingerprint, sizeof c.server_fingerprint, "%s", OTHER_HEX);
	assert_int_equal(fetch(&c, "/img", hex, err, sizeof err), -1);
	assert_non_null(strstr(err, "does not match the pinned fingerprint " OTHER_HEX));
	assert_non_null(strstr(err, fp));
	assert_int_equal(fetch(&c, url, hex, err, sizeof err), -1);
	assert_non_null(strstr(err, "does not match the pinned fingerprint"));
	/* ...also with tls_verify off: the pin does not depend on it. */
	c.tls_verify = 0;
	assert_int_equal(fetch(&c, "/img", hex, err, sizeof err), -1);
	assert_non_null(strstr(err, "does not match the pinned fingerprint"));

	/* Another origin (the same peer under another name) is not the server: no pin there,
	 * tls_verify decides as before. */
	snprintf(url, sizeof url, "https://localhost:%u/img", port);
	assert_int_equal(fetch(&c, url, hex, err, sizeof err), 0);
	assert_string_equal(hex, want);
	c.tls_verify = 1;
	assert_int_equal(fetch(&c, url, hex, err, sizeof err), -1);
	assert_null(strstr(err, "pinned"));
	assert_non_null(strstr(err, "certificate"));

	/* Nothing pinned: the self-signed certificate fails CA verification. */
	c.server_fingerprint[0] = '\0';
	assert_int_equal(fetch(&c, "/img", hex, err, sizeof err), -1);
	assert_non_null(strstr(err, "certificate"));
	/* ...and with the certificate as ca_file it passes. */
	snprintf(c.ca_file, sizeof c.ca_file, "%s", tpath("cert.pem"));
	assert_int_equal(fetch(&c, "/img", hex, err, sizeof err), 0);
	assert_string_equal(hex, want);
	/* ca_file and a pin: both must hold. */
	snprintf(c.server_fingerprint, sizeof c.server_fingerprint, "%s", OTHER_HEX);
	assert_int_equal(fetch(&c, "/img", hex, err, sizeof err), -1);
	assert_non_null(strstr(err, "does not match the pinned fingerprint"));
	snprintf(c.server_fingerprint, sizeof c.server_fingerprint, "%s", fp);
	assert_int_equal(fetch(&c, "/img", hex, err, sizeof err), 0);

	kill(s_server_pid, SIGTERM);
	waitpid(s_server_pid, NULL, 0);
	s_server_pid = 0;
}

/* ---- Tail and UTF-8 ------------------------------------------------------------------ */

static void
check_clean(const char *in, size_t n, int skip, const char *want)
{
	size_t len;
	char *s = rp_agent_utf8_clean(in, n, skip, RP_STEP_OUTPUT_TAIL, &len);

	assert_non_null(s);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(s, want, len);
	assert_true(utf8_ok(s, len));
	free(s);
}

#define FFFD "\xef\xbf\xbd"

static void
test_utf8(void **state)
{
	(void)state;
	check_clean("plain\n", 6, 0, "plain\n");
	check_clean("a\xff"
	            "b",
	            3, 0, "a" FFFD "b");
	check_clean("\xc0\xaf", 2, 0, FFFD FFFD);                   /* overlong '/' */
	check_clean("\xed\xa0\x80", 3, 0, FFFD FFFD FFFD);          /* surrogate */
	check_clean("\xf4\x90\x80\x80", 4, 0, FFFD FFFD FFFD FFFD); /* above U+10FFFF */
	check_clean("x\xe2\x82", 3, 0, "x" FFFD);                   /* cut at the end: one U+FFFD */
	check_clean("\xe2\x82"
	            "A",
	            3, 0, FFFD "A");
	check_clean("a\0b", 3, 0, "a" FFFD "b");
	check_clean("\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9", 11, 0,
	            "\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9");
	/* A leading continuation byte is garbage unless bytes were lost in front of it. */
	check_clean("\x82\xac"
	            "ok",
	            4, 0, FFFD FFFD "ok");
	check_clean("\x82\xac"
	            "ok",
	            4, 1, "ok");
	check_clean("\x80\x80\x80\x80"
	            "ok",
	            6, 1, FFFD "ok"); /* at most 3 are a cut character */
}

static void
test_utf8_cap(void **state)
{
	unsigned char *junk = malloc(RP_STEP_OUTPUT_TAIL);
	size_t len, i;
	char *s;

	(void)state;
	/* Every byte invalid: the replacements triple the size; the oldest part goes. */
	memset(junk, 0xff, RP_STEP_OUTPUT_TAIL);
	s = rp_agent_utf8_clean(junk, RP_STEP_OUTPUT_TAIL, 0, RP_STEP_OUTPUT_TAIL, &len);
	assert_non_null(s);
	assert_true(len <= RP_STEP_OUTPUT_TAIL);
	assert_true(len > RP_STEP_OUTPUT_TAIL - 3);
	assert_int_equal(len % 3, 0);
	for (i = 0; i < len; i += 3)
		assert_memory_equal(s + i, FFFD, 3);
	assert_true(utf8_ok(s, len));
	free(s);
	free(junk);
}

static void
test_tail(void **state)
{
	struct rp_agent_tail *t = calloc(1, sizeof *t);
	size_t total = 200 * 1024 + 17, off = 0, step = 1, len;
	char *all = malloc(total), *s;

	(void)state;
	rp_agent_tail_add(t, "hello ", 6);
	rp_agent_tail_add(t, "world", 5);
	s = rp_agent_tail_text(t, &len);
	assert_string_equal(s, "hello world");
	assert_false(rp_agent_tail_truncated(t));
	free(s);

	/* Uneven pieces, one larger than the ring: exactly the last 64 KiB remain. */
	memset(t, 0, sizeof *t);
	for (size_t i = 0; i < total; i++)
		all[i] = (char)('a' + (i * 7 + i / 13) % 26);
	while (off < total) {
		size_t n = off > 100000 && off < 110000 ? 70000 : step;

		if (n > total - off)
			n = total - off;
		rp_agent_tail_add(t, all + off, n);
		off += n;
		step = step * 3 % 4099 + 1;
	}
	assert_int_equal(t->total, total);
	assert_true(rp_agent_tail_truncated(t));
	s = rp_agent_tail_text(t, &len);
	assert_int_equal(len, RP_STEP_OUTPUT_TAIL);
	assert_memory_equal(s, all + total - RP_STEP_OUTPUT_TAIL, RP_STEP_OUTPUT_TAIL);
	free(s);

	/* A character cut by the ring's start is dropped, not replaced. */
	memset(t, 0, sizeof *t);
	rp_agent_tail_add(t, "\xe2\x82\xac", 3);
	memset(all, 'x', RP_STEP_OUTPUT_TAIL);
	rp_agent_tail_add(t, all, RP_STEP_OUTPUT_TAIL - 2);
	assert_int_equal(t->total, RP_STEP_OUTPUT_TAIL + 1);
	s = rp_agent_tail_text(t, &len);
	assert_int_equal(len, RP_STEP_OUTPUT_TAIL - 2);
	assert_memory_equal(s, all, len);
	free(s);

	/* Exactly full is not truncated, and keeps its first byte. */
	memset(t, 0, sizeof *t);
	all[0] = 'A';
	rp_agent_tail_add(t, all, RP_STEP_OUTPUT_TAIL);
	assert_false(rp_agent_tail_truncated(t));
	s = rp_agent_tail_text(t, &len);
	assert_int_equal(len, RP_STEP_OUTPUT_TAIL);
	assert_int_equal(s[0], 'A');
	free(s);
	free(all);
	free(t);
}

/* ---- Plans --------------------------------------------------------------------------- */

#define JOB "0b9f5c1e-0000-4000-8000-000000000001"
#define SHA "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static struct rp_agent_plan *
parse(const char *steps, char *err, size_t errlen)
{
	char text[16384];

	snprintf(text, sizeof text, "{\"format\": 1, \"job\": \"" JOB "\", \"steps\": [%s]}",
	         steps);
	return rp_agent_plan_parse(text, strlen(text), JOB, err, errlen);
}

static void
test_plan_good(void **state)
{
	char err[512];
	struct rp_agent_plan *p;

	(void)state;
	p = parse("{\"id\": \"hostname\", \"type\": \"shell\", \"command\": \"hostname\", "
	          "\"env\": {\"A_1\": \"x\"}, \"cwd\": \"/tmp\", \"timeout_s\": 60},"
	          "{\"id\": \"motd\", \"type\": \"file\", \"path\": \"/etc/motd\", \"content\": "
	          "\"\", "
	          "\"mode\": \"0600\", \"owner\": \"root:root\"},"
	          "{\"id\": \"dl\", \"type\": \"file\", \"path\": \"/etc/x\", \"url\": "
	          "\"http://h/x\", "
	          "\"sha256\": \"" SHA "\"},"
	          "{\"id\": \"inv\", \"type\": \"inventory\", \"continue_on_error\": true},"
	          "{\"id\": \"fw\", \"type\": \"firmware\", \"command\": \"flash ${image}\", "
	          "\"image_url\": \"https://h/fw.bin\", \"sha256\": \"" SHA "\"},"
	          "{\"id\": \"bios.1\", \"type\": \"bios\", \"command\": \"setbios\", "
	          "\"rerun_interrupted\": true},"
	          "{\"id\": \"img_-.\", \"type\": \"image\", \"url\": \"http://h/i\", \"sha256\": "
	          "\"" SHA "\", \"device\": \"/dev/sda\"},"
	          "{\"id\": \"r\", \"type\": \"reboot\"}",
	          err, sizeof err);
	assert_non_null(p);
	assert_int_equal(p->nsteps, 8);
	assert_string_equal(p->steps[0].id, "hostname");
	assert_int_equal(p->steps[0].type, RP_STEP_SHELL);
	assert_int_equal(p->steps[0].timeout_s, 60);
	assert_true(p->steps[0].rerun_interrupted);
	assert_int_equal(p->steps[1].timeout_s, 3600);
	assert_false(p->steps[1].continue_on_error);
	assert_true(p->steps[3].continue_on_error);
	assert_int_equal(p->steps[4].type, RP_STEP_FIRMWARE);
	assert_false(p->steps[4].rerun_interrupted);
	assert_true(p->steps[5].rerun_interrupted);
	assert_false(p->steps[6].rerun_interrupted);
	assert_int_equal(p->steps[7].type, RP_STEP_REBOOT);
	assert_int_equal(p->steps[7].timeout_s, 900);
	rp_agent_plan_free(p);

	/* The longest id. */
	p = parse("{\"id\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", "
	          "\"type\": \"reboot\"}",
	          err, sizeof err);
	assert_non_null(p);
	rp_agent_plan_free(p);
	rp_agent_plan_free(NULL);
}

static void
test_plan_bad(void **state)
{
	static const struct {
		const char *steps, *why;
	} bad[] = {
	        {"{\"id\": \"a\", \"type\": \"shell\"}", "needs command"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"\"}", "non-empty"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": 1}", "non-empty"},
	        {"{\"id\": \"a\", \"type\": \"bios\", \"command\": \"t\", \"report\": \"yes\"}",
	         "report must be true or false"},
	        {"{\"id\": \"a\", \"type\": \"firmware\", \"command\": \"t\", \"report\": true}",
	         "unknown member 'report'"},
	        {"{\"id\": \"\", \"type\": \"reboot\"}", "id must be"},
	        {"{\"type\": \"reboot\"}", "id must be"},
	        {"{\"id\": \"a b\", \"type\": \"reboot\"}", "id must be"},
	        {"{\"id\": \"a/b\", \"type\": \"reboot\"}", "id must be"},
	        {"{\"id\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", "
	         "\"type\": \"reboot\"}",
	         "id must be"},
	        {"{\"id\": \"a\", \"type\": \"reboot\"}, {\"id\": \"a\", \"type\": \"inventory\"}",
	         "already used by step 1"},
	        {"{\"id\": \"a\", \"type\": \"dance\"}", "unknown type"},
	        {"{\"id\": \"a\"}", "unknown type"},
	        {"{\"id\": \"a\", \"type\": \"reboot\", \"timeout_s\": 0}", "timeout_s"},
	        {"{\"id\": \"a\", \"type\": \"reboot\", \"timeout_s\": 86401}", "timeout_s"},
	        {"{\"id\": \"a\", \"type\": \"reboot\", \"timeout_s\": \"60\"}", "timeout_s"},
	        {"{\"id\": \"a\", \"type\": \"reboot\", \"continue_on_error\": 1}",
	         "true or false"},
	        {"{\"id\": \"a\", \"type\": \"reboot\", \"rerun_interrupted\": \"no\"}",
	         "true or false"},
	        {"{\"id\": \"a\", \"type\": \"reboot\", \"command\": \"x\"}",
	         "unknown member 'command'"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"device\": \"/d\"}",
	         "unknown member 'device'"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"colour\": 1}",
	         "unknown member 'colour'"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"env\": [1]}", "env"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"env\": {\"1A\": "
	         "\"x\"}}",
	         "env '1A'"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"env\": {\"A\": 1}}",
	         "env 'A'"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"etc/motd\", \"content\": \"x\"}",
	         "absolute"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/\", \"content\": \"x\"}",
	         "absolute"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\"}", "content or url"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"content\": \"x\", "
	         "\"url\": \"http://h/x\", \"sha256\": \"" SHA "\"}",
	         "content or url"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"url\": "
	         "\"http://h/x\"}",
	         "sha256"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"url\": "
	         "\"ftp://h/x\", "
	         "\"sha256\": \"" SHA "\"}",
	         "http"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"content\": \"x\", "
	         "\"sha256\": \"" SHA "\"}",
	         "sha256 goes with url"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"url\": "
	         "\"http://h/x\", "
	         "\"sha256\": \"abc\"}",
	         "64 hex"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"content\": \"x\", "
	         "\"mode\": \"0999\"}",
	         "octal"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"content\": \"x\", "
	         "\"mode\": 420}",
	         "non-empty string"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"content\": \"x\", "
	         "\"owner\": \":root\"}",
	         "owner"},
	        {"{\"id\": \"a\", \"type\": \"file\", \"path\": \"/etc/motd\", \"content\": \"x\", "
	         "\"owner\": \"a:b:c\"}",
	         "owner"},
	        {"{\"id\": \"a\", \"type\": \"firmware\"}", "needs command"},
	        {"{\"id\": \"a\", \"type\": \"firmware\", \"command\": \"x\", \"image_url\": "
	         "\"http://h\"}",
	         "go together"},
	        {"{\"id\": \"a\", \"type\": \"bios\", \"command\": \"x\", \"sha256\": \"" SHA "\"}",
	         "go together"},
	        {"{\"id\": \"a\", \"type\": \"bios\", \"command\": \"flash ${image}\"}",
	         "no image_url"},
	        {"{\"id\": \"a\", \"type\": \"image\", \"url\": \"http://h/i\", \"sha256\": \"" SHA
	         "\"}",
	         "device"},
	        {"{\"id\": \"a\", \"type\": \"image\", \"url\": \"http://h/i\", \"sha256\": \"" SHA
	         "\", \"device\": \"sda\"}",
	         "device"},
	        {"{\"id\": \"a\", \"type\": \"image\", \"device\": \"/dev/sda\", \"sha256\": \"" SHA
	         "\"}",
	         "url"},
	        {"[]", "not an object"},
	};
	static const struct {
		const char *plan, *why;
	} bad_plans[] = {
	        {"", "not JSON"},
	        {"{\"format\": 1, \"job\": \"" JOB "\", \"steps\": [", "not JSON"},
	        {"[]", "not a JSON object"},
	        {"{\"format\": 2, \"job\": \"" JOB "\", \"steps\": []}", "format"},
	        {"{\"job\": \"" JOB "\", \"steps\": []}", "format"},
	        {"{\"format\": 1, \"steps\": [{\"id\": \"a\", \"type\": \"reboot\"}]}", "(none)"},
	        {"{\"format\": 1, \"job\": \"0b9f5c1e-0000-4000-8000-000000000002\", "
	         "\"steps\": [{\"id\": \"a\", \"type\": \"reboot\"}]}",
	         "not " JOB},
	        {"{\"format\": 1, \"job\": \"" JOB "\", \"steps\": []}", "1-100"},
	        {"{\"format\": 1, \"job\": \"" JOB "\", \"steps\": {}}", "1-100"},
	        {"{\"format\": 1, \"job\": \"" JOB "\", \"steps\": [], \"extra\": 1}", "'extra'"},
	        {"{\"format\": 1, \"format\": 1, \"job\": \"" JOB "\", \"steps\": []}", "not JSON"},
	};
	char err[512], many[8192], *big, *cut;
	struct rp_agent_plan *p;
	size_t i, n = 0;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		p = parse(bad[i].steps, err, sizeof err);
		if (p != NULL || strstr(err, bad[i].why) == NULL)
			fail_msg("case %zu: %s: got '%s', want '%s'", i, bad[i].steps, err,
			         bad[i].why);
	}
	for (i = 0; i < sizeof bad_plans / sizeof bad_plans[0]; i++) {
		err[0] = '\0';
		p = rp_agent_plan_parse(bad_plans[i].plan, strlen(bad_plans[i].plan), JOB, err,
		                        sizeof err);
		if (p != NULL || strstr(err, bad_plans[i].why) == NULL)
			fail_msg("plan %zu: got '%s', want '%s'", i, err, bad_plans[i].why);
	}

	/* 100 steps pass, 101 do not. */
	for (i = 0; i < 101; i++)
		n += (size_t)snprintf(many + n, sizeof many - n,
		                      "%s{\"id\": \"s%zu\", \"type\": \"reboot\"}", i ? "," : "",
		                      i);
	p = parse(many, err, sizeof err);
	assert_null(p);
	assert_non_null(strstr(err, "1-100"));
	for (cut = many; strstr(cut + 1, ",{"); cut = strstr(cut + 1, ",{"))
		;
	*cut = '\0';
	p = parse(many, err, sizeof err);
	assert_non_null(p);
	assert_int_equal(p->nsteps, 100);
	rp_agent_plan_free(p);

	/* A plan over the cap is refused before it is parsed. */
	big = malloc(RP_PLAN_MAX_BYTES + 2);
	memset(big, ' ', RP_PLAN_MAX_BYTES + 1);
	big[RP_PLAN_MAX_BYTES + 1] = '\0';
	p = rp_agent_plan_parse(big, RP_PLAN_MAX_BYTES + 1, JOB, err, sizeof err);
	assert_null(p);
	assert_non_null(strstr(err, "larger than"));
	free(big);
}

static void
test_plan_content_cap(void **state)
{
	char err[512], *steps;
	struct rp_agent_plan *p;
	size_t bl;

	(void)state;
	/* parse() above uses a small buffer; build this one by hand. */
	steps = malloc(RP_FILE_CONTENT_MAX + 512);
	bl = (size_t)sprintf(steps, "{\"format\": 1, \"job\": \"" JOB "\", \"steps\": [{\"id\": "
	                            "\"f\", \"type\": \"file\", \"path\": \"/x\", \"content\": \"");
	memset(steps + bl, 'x', RP_FILE_CONTENT_MAX);
	strcpy(steps + bl + RP_FILE_CONTENT_MAX, "\"}]}");
	p = rp_agent_plan_parse(steps, strlen(steps), JOB, err, sizeof err);
	assert_non_null(p);
	rp_agent_plan_free(p);
	memset(steps + bl, 'x', RP_FILE_CONTENT_MAX + 1);
	strcpy(steps + bl + RP_FILE_CONTENT_MAX + 1, "\"}]}");
	p = rp_agent_plan_parse(steps, strlen(steps), JOB, err, sizeof err);
	assert_null(p);
	assert_non_null(strstr(err, "content"));
	free(steps);
}

static void
test_decide(void **state)
{
	static const struct {
		enum rp_step_state s;
		int coe, rerun;
		enum rp_agent_decision want;
	} table[] = {
	        {RP_STATE_PENDING, 0, 1, RP_DECIDE_RUN},
	        {RP_STATE_PENDING, 1, 0, RP_DECIDE_RUN},
	        {RP_STATE_SUCCEEDED, 0, 0, RP_DECIDE_SKIP},
	        {RP_STATE_SUCCEEDED, 1, 1, RP_DECIDE_SKIP},
	        {RP_STATE_FAILED, 1, 0, RP_DECIDE_SKIP},
	        {RP_STATE_FAILED, 0, 1, RP_DECIDE_RUN},
	        {RP_STATE_SKIPPED, 1, 0, RP_DECIDE_SKIP},
	        {RP_STATE_SKIPPED, 0, 0, RP_DECIDE_RUN},
	        {RP_STATE_RUNNING, 0, 1, RP_DECIDE_RUN},
	        {RP_STATE_RUNNING, 1, 1, RP_DECIDE_RUN},
	        {RP_STATE_RUNNING, 0, 0, RP_DECIDE_INTERRUPTED},
	        {RP_STATE_RUNNING, 1, 0, RP_DECIDE_INTERRUPTED},
	};
	struct rp_agent_step st = {.id = "x", .type = RP_STEP_SHELL};
	enum rp_step_state s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof table / sizeof table[0]; i++) {
		st.continue_on_error = table[i].coe;
		st.rerun_interrupted = table[i].rerun;
		if (rp_agent_decide(table[i].s, &st) != table[i].want)
			fail_msg("row %zu", i);
	}
	assert_int_equal(rp_step_state_parse("running", &s), 0);
	assert_int_equal(s, RP_STATE_RUNNING);
	assert_int_equal(rp_step_state_parse("done", &s), -1);
	assert_string_equal(rp_step_type_name(RP_STEP_INVENTORY), "inventory");
}

/* ---- Shell steps --------------------------------------------------------------------- */

static struct rp_agent_outcome *
shell(const char *cmd, json_t *env, const char *cwd, unsigned timeout_s)
{
	struct rp_agent_outcome *o = rp_agent_outcome_new(-1);

	assert_non_null(o);
	assert_int_equal(rp_agent_shell(cmd, env, cwd, timeout_s, o), 0);
	return o;
}

static char *
output_of(struct rp_agent_outcome *o)
{
	size_t len;

	return rp_agent_tail_text(&o->tail, &len);
}

static void
test_shell_basic(void **state)
{
	struct rp_agent_outcome *o;
	json_t *env = json_pack("{s:s, s:s}", "RP_A", "one two", "HOME", "/nowhere");
	char *out;

	(void)state;
	setenv("RP_KEEP", "kept", 1);
	o = shell("echo \"$RP_A|$HOME|$RP_KEEP\"; pwd; echo err >&2; read x || echo eof", env,
	          "/tmp", 60);
	assert_true(o->succeeded);
	assert_int_equal(o->exit_code, 0);
	assert_string_equal(o->error, "");
	out = output_of(o);
	assert_string_equal(out, "one two|/nowhere|kept\n/tmp\nerr\neof\n");
	free(out);
	rp_agent_outcome_free(o);
	json_decref(env);

	o = shell("echo partial; exit 3", NULL, NULL, 60);
	assert_false(o->succeeded);
	assert_int_equal(o->exit_code, 3);
	assert_string_equal(o->error, "exit status 3");
	out = output_of(o);
	assert_string_equal(out, "partial\n");
	free(out);
	rp_agent_outcome_free(o);

	o = shell("kill -9 $$", NULL, NULL, 60);
	assert_false(o->succeeded);
	assert_int_equal(o->exit_code, -1);
	assert_string_equal(o->error, "killed by signal 9");
	rp_agent_outcome_free(o);

	/* A missing cwd fails before anything runs. */
	o = rp_agent_outcome_new(-1);
	assert_int_equal(rp_agent_shell("true", NULL, tpath("no-such-dir"), 60, o), -1);
	assert_false(o->succeeded);
	assert_non_null(strstr(o->error, "no-such-dir"));
	rp_agent_outcome_free(o);
}

/* 1 while pid is a live process (a zombie is dead). */
static int
alive(long pid)
{
	char path[64], *stat = NULL, *p;
	int live;

	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	if (rp_file_read(path, 4096, &stat, NULL) < 0)
		return 0;
	p = strrchr(stat, ')');
	live = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	free(stat);
	return live;
}

static void
test_shell_timeout(void **state)
{
	struct rp_agent_outcome *o;
	char cmd[512], *pidtext = NULL;
	long pid;

	(void)state;
	/* The sleep is a grandchild: only a signal to the whole group reaches it. */
	snprintf(cmd, sizeof cmd, "echo started; sleep 30 & echo $! > '%s'; wait",
	         tpath("sleep.pid"));
	o = shell(cmd, NULL, NULL, 1);
	assert_false(o->succeeded);
	assert_int_equal(o->exit_code, -1);
	assert_string_equal(o->error, "timed out after 1 s");
	assert_int_equal(o->tail.total, 8);
	assert_int_equal(rp_file_read(tpath("sleep.pid"), 64, &pidtext, NULL), 0);
	pid = strtol(pidtext, NULL, 10);
	assert_true(pid > 1);
	assert_false(alive(pid));
	free(pidtext);
	rp_agent_outcome_free(o);

	/* A shell that ignores SIGTERM gets SIGKILL after the grace period. */
	o = shell("trap '' TERM; sleep 30 & wait; while :; do sleep 1; done", NULL, NULL, 1);
	assert_false(o->succeeded);
	assert_string_equal(o->error, "timed out after 1 s");
	rp_agent_outcome_free(o);
}

static void
test_shell_big_output(void **state)
{
	struct rp_agent_outcome *o;
	struct rp_buf want = {0};
	json_t *body;
	size_t len;
	char *out;
	int i;

	(void)state;
	for (i = 1; i <= 200000; i++)
		rp_buf_printf(&want, "%d\n", i);
	assert_true(want.len > 1000000);
	o = shell("seq 1 200000", NULL, NULL, 120);
	assert_true(o->succeeded);
	assert_int_equal(o->tail.total, want.len);
	assert_true(rp_agent_tail_truncated(&o->tail));
	out = rp_agent_tail_text(&o->tail, &len);
	assert_int_equal(len, RP_STEP_OUTPUT_TAIL);
	assert_memory_equal(out, want.data + want.len - RP_STEP_OUTPUT_TAIL, RP_STEP_OUTPUT_TAIL);
	free(out);

	body = rp_agent_result_body(RP_STATE_SUCCEEDED, NULL, "boot-1", o);
	assert_non_null(body);
	assert_string_equal(json_string_value(json_object_get(body, "state")), "succeeded");
	assert_int_equal(json_string_length(json_object_get(body, "output")), RP_STEP_OUTPUT_TAIL);
	assert_int_equal(json_integer_value(json_object_get(body, "output_bytes")), want.len);
	assert_true(json_is_true(json_object_get(body, "output_truncated")));
	assert_int_equal(json_integer_value(json_object_get(body, "exit_code")), 0);
	assert_true(json_is_null(json_object_get(body, "error")));
	assert_true(json_is_null(json_object_get(body, "result")));
	json_decref(body);
	rp_agent_outcome_free(o);
	rp_buf_free(&want);
}

static void
test_result_body(void **state)
{
	struct rp_agent_outcome *o = rp_agent_outcome_new(-1);
	json_t *b;

	(void)state;
	b = rp_agent_result_body(RP_STATE_RUNNING, NULL, "boot-1", NULL);
	assert_int_equal(json_object_size(b), 2);
	assert_string_equal(json_string_value(json_object_get(b, "boot_id")), "boot-1");
	json_decref(b);
	b = rp_agent_result_body(RP_STATE_RUNNING, "0b9f2c1e-0000-4000-8000-000000000001", NULL,
	                         NULL);
	assert_int_equal(json_object_size(b), 2);
	assert_string_equal(json_string_value(json_object_get(b, "run")),
	                    "0b9f2c1e-0000-4000-8000-000000000001");
	json_decref(b);

	rp_agent_output(o, "bad \xff byte", 10);
	snprintf(o->error, sizeof o->error, "exit status 2");
	o->exit_code = 2;
	o->duration_ms = 12;
	b = rp_agent_result_body(RP_STATE_FAILED, NULL, NULL, o);
	assert_null(json_object_get(b, "boot_id"));
	assert_string_equal(json_string_value(json_object_get(b, "state")), "failed");
	assert_string_equal(json_string_value(json_object_get(b, "output")), "bad " FFFD " byte");
	assert_int_equal(json_integer_value(json_object_get(b, "output_bytes")), 10);
	assert_true(json_is_false(json_object_get(b, "output_truncated")));
	assert_string_equal(json_string_value(json_object_get(b, "error")), "exit status 2");
	assert_int_equal(json_integer_value(json_object_get(b, "duration_ms")), 12);
	json_decref(b);

	/* An error cut inside a character by snprintf still makes a valid body. */
	snprintf(o->error, sizeof o->error, "cwd /caf\xc3");
	b = rp_agent_result_body(RP_STATE_FAILED, NULL, NULL, o);
	assert_non_null(b);
	assert_string_equal(json_string_value(json_object_get(b, "error")), "cwd /caf" FFFD);
	json_decref(b);
	rp_agent_outcome_free(o);
	rp_agent_outcome_free(NULL);
}

/* ---- ready_port ---------------------------------------------------------------------- */

static void
test_plan_ready_port(void **state)
{
	static const struct {
		const char *steps, *why;
	} bad[] = {
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"ready_port\": 0}",
	         "ready_port must be a port number, 1-65535"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"ready_port\": 65536}",
	         "ready_port must be"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"ready_port\": -1}",
	         "ready_port must be"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"ready_port\": "
	         "\"5201\"}",
	         "ready_port must be"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"ready_port\": 5201.0}",
	         "ready_port must be"},
	        {"{\"id\": \"a\", \"type\": \"shell\", \"command\": \"x\", \"ready_port\": null}",
	         "ready_port must be"},
	        {"{\"id\": \"a\", \"type\": \"firmware\", \"command\": \"x\", \"ready_port\": "
	         "5201}",
	         "unknown member 'ready_port' for a firmware step"},
	        {"{\"id\": \"a\", \"type\": \"image\", \"url\": \"http://h/i\", \"sha256\": \"" SHA
	         "\", \"device\": \"/dev/sda\", \"ready_port\": 5201}",
	         "unknown member 'ready_port' for a image step"},
	        {"{\"id\": \"a\", \"type\": \"reboot\", \"ready_port\": 5201}",
	         "unknown member 'ready_port'"},
	};
	char err[512];
	struct rp_agent_plan *p;
	size_t i;

	(void)state;
	p = parse(
	        "{\"id\": \"srv\", \"type\": \"shell\", \"command\": \"iperf3 -s -1\", "
	        "\"ready_port\": 5201},"
	        "{\"id\": \"lo\", \"type\": \"shell\", \"command\": \"x\", \"ready_port\": 1},"
	        "{\"id\": \"hi\", \"type\": \"shell\", \"command\": \"x\", \"ready_port\": 65535}",
	        err, sizeof err);
	if (p == NULL)
		fail_msg("%s", err);
	assert_int_equal(p->nsteps, 3);
	assert_int_equal(json_integer_value(json_object_get(p->steps[0].obj, "ready_port")), 5201);
	rp_agent_plan_free(p);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		p = parse(bad[i].steps, err, sizeof err);
		if (p != NULL || strstr(err, bad[i].why) == NULL)
			fail_msg("case %zu: %s: got '%s', want '%s'", i, bad[i].steps, err,
			         bad[i].why);
	}
}

/* Captured shapes: a host with sshd, iperf3 -s (5201 = 0x1451) and a MySQL on 127.0.0.1
 * (3306), one SSH connection in, one connection out whose remote port is 5201, and a
 * TIME_WAIT from 5201; tcp6 with a dual-stack listener on 8080 (0x1F90) and a connection to
 * it. */
#define TCP_HEAD                                                                                   \
	"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "      \
	"timeout inode                                                     \n"
#define TCP_ROWS                                                                                   \
	"   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0       " \
	" "                                                                                        \
	"0 18811 1 0000000000000000 100 0 0 10 0                     \n"                           \
	"   1: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0       " \
	" "                                                                                        \
	"0 40312 1 0000000000000000 100 0 0 10 0                     \n"                           \
	"   2: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   108       " \
	" "                                                                                        \
	"0 21005 1 0000000000000000 100 0 0 10 0                     \n"                           \
	"   3: 0F00000A:0016 0100000A:D3C2 01 00000000:00000000 02:00095D4A 00000000     0       " \
	" "                                                                                        \
	"0 40221 2 0000000000000000 20 4 29 10 -1                   \n"                            \
	"   4: 0F00000A:B0F4 1000000A:4E21 01 00000000:00000000 00:00000000 00000000  1000       " \
	" "                                                                                        \
	"0 40999 1 0000000000000000 20 4 30 10 -1                   \n"                            \
	"   5: 0F00000A:9C40 1000000A:1452 06 00000000:00000000 03:00000F6A 00000000     0       " \
	" "                                                                                        \
	"0 0 3 0000000000000000\n"
#define TCP6_TEXT                                                                                  \
	"  sl  local_address                         remote_address                        st "    \
	"tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"                            \
	"   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A "    \
	"00000000:00000000 00:00000000 00000000     0        0 30211 1 0000000000000000 100 0 0 "  \
	"10 0\n"                                                                                   \
	"   1: 0000000000000000FFFF00000100007F:E2B4 0000000000000000FFFF00000100007F:1F90 01 "    \
	"00000000:00000000 00:00000000 00000000  1000        0 30380 1 0000000000000000 20 4 30 "  \
	"10 -1\n"                                                                                  \
	"   2: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:E2B4 01 "    \
	"00000000:00000000 00:00000000 00000000     0        0 30381 1 0000000000000000 20 4 30 "  \
	"10 -1\n"

static void
test_tcp_listening(void **state)
{
	static const char tcp[] = TCP_HEAD TCP_ROWS, tcp6[] = TCP6_TEXT;
	static const char *const junk[] = {
	        "",
	        TCP_HEAD,
	        "sl: 00000000:1451 00000000:0000 0A",         /* a first word in ":" is a row */
	        "   1: 00000000:1451 00000000:0000 0a\n",     /* lowercase state: still LISTEN */
	        "   1: 00000000:1451 00000000:0000",          /* no state */
	        "   1: 00000000:1451 00000000:0000 0A0",      /* not a state */
	        "   1: 000000001451 00000000:0000 0A\n",      /* no port */
	        "   1: 00000000:01451 00000000:0000 0A\n",    /* five digits */
	        "   1: 00000000:14G1 00000000:0000 0A\n",     /* not hex */
	        "   1 00000000:1451 00000000:0000 0A\n",      /* no colon after the row number */
	        "   1: 00000000: 00000000:0000 0A\n",         /* an empty port */
	        "\n\n\n   1: 00000000:1451 00000000:0000 0A", /* no final newline */
	};
	static const int junk_listens[] = {0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1};
	size_t i;

	(void)state;
	assert_true(rp_agent_tcp_listening(tcp, strlen(tcp), 22));
	assert_true(rp_agent_tcp_listening(tcp, strlen(tcp), 5201));
	assert_true(rp_agent_tcp_listening(tcp, strlen(tcp), 3306)); /* any address */
	/* ESTABLISHED and TIME_WAIT rows, local port or remote, are not listeners. */
	assert_false(rp_agent_tcp_listening(tcp, strlen(tcp), 0xB0F4));
	assert_false(rp_agent_tcp_listening(tcp, strlen(tcp), 0x4E21));
	assert_false(rp_agent_tcp_listening(tcp, strlen(tcp), 0x1452));
	assert_false(rp_agent_tcp_listening(tcp, strlen(tcp), 0x9C40));
	assert_false(rp_agent_tcp_listening(tcp, strlen(tcp), 8080));
	assert_false(rp_agent_tcp_listening(tcp, strlen(tcp), 0));
	assert_true(rp_agent_tcp_listening(tcp6, strlen(tcp6), 8080));
	assert_false(rp_agent_tcp_listening(tcp6, strlen(tcp6), 0xE2B4));
	assert_false(rp_agent_tcp_listening(tcp6, strlen(tcp6), 5201));
	/* Only len bytes count: the 5201 row cut off is not seen, whatever follows in memory. */
	assert_false(rp_agent_tcp_listening(tcp, strlen(TCP_HEAD) + 100, 5201));
	assert_true(rp_agent_tcp_listening(tcp, strlen(TCP_HEAD) + 100, 22));
	for (i = 0; i < sizeof junk / sizeof junk[0]; i++)
		if (rp_agent_tcp_listening(junk[i], strlen(junk[i]), 5201) != junk_listens[i])
			fail_msg("junk %zu: '%s'", i, junk[i]);
}

static void
test_progress_ready_body(void **state)
{
	struct rp_agent_progress p = {.kind = RP_PROGRESS_READY, .bytes_written = 9};
	json_t *b, *want = json_pack("{s:b}", "ready", 1);

	(void)state;
	b = rp_agent_progress_body("0b9f5c1e-0000-4000-8000-00000000000b", "boot-1", &p);
	assert_non_null(b);
	assert_string_equal(json_string_value(json_object_get(b, "state")), "running");
	assert_string_equal(json_string_value(json_object_get(b, "run")),
	                    "0b9f5c1e-0000-4000-8000-00000000000b");
	/* Only ready: no image counters beside it. */
	assert_true(json_equal(json_object_get(b, "progress"), want));
	assert_null(json_object_get(b, "exit_code"));
	json_decref(b);
	json_decref(want);
}

struct ready_seen {
	unsigned calls, ready;
};

static void
on_ready(void *arg, const struct rp_agent_progress *p)
{
	struct ready_seen *s = arg;

	s->calls++;
	s->ready += p->kind == RP_PROGRESS_READY;
}

/* One shell step of plan text (a steps array's one member) under root, progress into seen. */
static struct rp_agent_outcome *
ready_step(const char *root, const char *step, struct ready_seen *seen)
{
	struct rp_agent_config cfg;
	struct rp_agent_runner r = {
	        .cfg = &cfg, .echo_fd = -1, .progress = on_ready, .progress_arg = seen};
	struct rp_agent_outcome *o = rp_agent_outcome_new(-1);
	struct rp_agent_plan *p;
	char err[512];

	rp_agent_config_defaults(&cfg);
	snprintf(cfg.root, sizeof cfg.root, "%s", root);
	memset(seen, 0, sizeof *seen);
	p = parse(step, err, sizeof err);
	if (p == NULL)
		fail_msg("%s", err);
	assert_non_null(o);
	rp_agent_step_run(&r, &p->steps[0], o);
	rp_agent_plan_free(p);
	return o;
}

/* A free TCP port of this host (bound and let go). */
static unsigned
free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void
test_shell_ready(void **state)
{
	struct ready_seen seen;
	struct rp_agent_outcome *o;
	char step[1024], *out, want[64];
	unsigned port = free_port();

	(void)state;
	/* A real listener on the live system, after a second: ready once, and only after it
	 * listens (the command's own line comes first in the output). */
	snprintf(step, sizeof step,
	         "{\"id\": \"srv\", \"type\": \"shell\", \"ready_port\": %u, \"command\": "
	         "\"sleep 1; exec python3 -c 'import socket,sys,time; s=socket.socket(); "
	         "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
	         "s.bind((\\\"127.0.0.1\\\", "
	         "%u)); s.listen(); print(\\\"listening\\\", flush=True); time.sleep(1)'\"}",
	         port, port);
	o = ready_step("/", step, &seen);
	out = output_of(o);
	if (!o->succeeded)
		fail_msg("%s: %s", o->error, out);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.ready, 1);
	snprintf(want, sizeof want, "port %u is listening: ready\n", port);
	assert_non_null(strstr(out, want));
	assert_true(strstr(out, "listening\n") < strstr(out, want));
	free(out);
	rp_agent_outcome_free(o);

	/* Nothing listens: the step ends with no progress at all. */
	snprintf(step, sizeof step,
	         "{\"id\": \"quiet\", \"type\": \"shell\", \"ready_port\": %u, \"command\": "
	         "\"sleep 0.5\"}",
	         port);
	o = ready_step("/", step, &seen);
	assert_true(o->succeeded);
	assert_int_equal(seen.calls, 0);
	out = output_of(o);
	assert_null(strstr(out, "ready"));
	free(out);
	rp_agent_outcome_free(o);

	/* The files are read under root: a tree whose tcp6 lists the port listening makes the step
	 * ready at once, while the command only sleeps; a tree without them never does. */
	put_file("ready-root/proc/net/tcp", TCP_HEAD TCP_ROWS);
	put_file("ready-root/proc/net/tcp6", TCP6_TEXT);
	o = ready_step(tpath("ready-root"),
	               "{\"id\": \"r\", \"type\": \"shell\", \"ready_port\": 8080, \"command\": "
	               "\"sleep 0.5\"}",
	               &seen);
	assert_true(o->succeeded);
	assert_int_equal(seen.ready, 1);
	rp_agent_outcome_free(o);
	o = ready_step(tpath("no-such-root"),
	               "{\"id\": \"r\", \"type\": \"shell\", \"ready_port\": 8080, \"command\": "
	               "\"sleep 0.3\"}",
	               &seen);
	assert_true(o->succeeded);
	assert_int_equal(seen.calls, 0);
	rp_agent_outcome_free(o);

	/* Without ready_port nothing is watched, even where the port listens. */
	o = ready_step(tpath("ready-root"),
	               "{\"id\": \"r\", \"type\": \"shell\", \"command\": \"sleep 0.3\"}", &seen);
	assert_int_equal(seen.calls, 0);
	rp_agent_outcome_free(o);
}

/* ---- ${image} ------------------------------------------------------------------------ */

static void
test_subst_image(void **state)
{
	const char *path = "/var/lib/rp/images/it's a \"file\" $HOME `x`.bin";
	struct rp_agent_outcome *o;
	char *cmd, *q, *out;

	(void)state;
	q = rp_agent_shell_quote("it's");
	assert_string_equal(q, "'it'\\''s'");
	free(q);
	cmd = rp_agent_subst_image("flash ${image} && check ${image}; echo ${imag}", "/a/b'c");
	assert_string_equal(cmd, "flash '/a/b'\\''c' && check '/a/b'\\''c'; echo ${imag}");
	free(cmd);

	/* What the shell actually sees is the path, byte for byte. */
	cmd = rp_agent_subst_image("printf '%s|' ${image} ${image}", path);
	o = shell(cmd, NULL, NULL, 60);
	assert_true(o->succeeded);
	out = output_of(o);
	assert_int_equal(strlen(out), 2 * (strlen(path) + 1));
	assert_memory_equal(out, path, strlen(path));
	assert_memory_equal(out + strlen(path) + 1, path, strlen(path));
	free(out);
	free(cmd);
	rp_agent_outcome_free(o);
}

/* ---- file steps ---------------------------------------------------------------------- */

static void
run_step(const char *steps, struct rp_agent_outcome **out)
{
	struct rp_agent_config cfg;
	struct rp_agent_runner r = {.cfg = &cfg, .echo_fd = -1};
	struct rp_agent_plan *p;
	char err[512];

	rp_agent_config_defaults(&cfg);
	snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s/state", tmpdir);
	p = parse(steps, err, sizeof err);
	if (p == NULL)
		fail_msg("%s", err);
	*out = rp_agent_outcome_new(-1);
	rp_agent_step_run(&r, &p->steps[0], *out);
	rp_agent_plan_free(p);
}

static void
test_file_step(void **state)
{
	char steps[2048], *data = NULL;
	struct rp_agent_outcome *o;
	struct stat st;
	size_t len;

	(void)state;
	snprintf(steps, sizeof steps,
	         "{\"id\": \"f\", \"type\": \"file\", \"path\": \"%s\", \"content\": "
	         "\"line\\n\\u00e9\", "
	         "\"mode\": \"0640\"%s}",
	         tpath("motd"), geteuid() == 0 ? ", \"owner\": \"nobody\"" : "");
	run_step(steps, &o);
	assert_true(o->succeeded);
	assert_string_equal(o->error, "");
	assert_int_equal(rp_file_read(tpath("motd"), 100, &data, &len), 0);
	assert_int_equal(len, 7);
	assert_memory_equal(data, "line\n\xc3\xa9", 7);
	free(data);
	assert_int_equal(stat(tpath("motd"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	if (geteuid() == 0)
		assert_int_not_equal(st.st_uid, 0);
	rp_agent_outcome_free(o);

	/* Replacing keeps no temporary file behind. */
	snprintf(steps, sizeof steps,
	         "{\"id\": \"f\", \"type\": \"file\", \"path\": \"%s\", \"content\": \"\"}",
	         tpath("motd"));
	run_step(steps, &o);
	assert_true(o->succeeded);
	assert_int_equal(stat(tpath("motd"), &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	rp_agent_outcome_free(o);
	snprintf(steps, sizeof steps, "test $(ls -A '%s' | grep -c rackpilot-) = 0", tmpdir);
	assert_int_equal(system(steps), 0);

	snprintf(steps, sizeof steps,
	         "{\"id\": \"f\", \"type\": \"file\", \"path\": \"%s\", \"content\": \"x\"}",
	         tpath("no/such/dir/file"));
	run_step(steps, &o);
	assert_false(o->succeeded);
	assert_non_null(strstr(o->error, "does not exist"));
	rp_agent_outcome_free(o);

	snprintf(steps, sizeof steps,
	         "{\"id\": \"f\", \"type\": \"file\", \"path\": \"%s\", \"content\": \"x\", "
	         "\"owner\": \"no-such-user-rp\"}",
	         tpath("owned"));
	run_step(steps, &o);
	assert_false(o->succeeded);
	assert_non_null(strstr(o->error, "no such user"));
	assert_int_equal(access(tpath("owned"), F_OK), -1);
	rp_agent_outcome_free(o);
}

static void
test_image_step_refuses(void **state)
{
	char steps[1024];
	struct rp_agent_outcome *o;

	(void)state;
	/* Never created: a typo in device must not become a file. */
	snprintf(steps, sizeof steps,
	         "{\"id\": \"i\", \"type\": \"image\", \"url\": \"http://127.0.0.1:1/i\", "
	         "\"sha256\": \"" SHA "\", \"device\": \"%s\"}",
	         tpath("no-device"));
	run_step(steps, &o);
	assert_false(o->succeeded);
	assert_non_null(strstr(o->error, "No such file"));
	assert_int_equal(access(tpath("no-device"), F_OK), -1);
	rp_agent_outcome_free(o);
}

/* A bios step with report: stdout only is the dump (JSON object or Name=Value lines); what it
 * cannot parse fails the step, and a good dump gets as far as posting it (no server here). */
static void
test_bios_report(void **state)
{
	static const struct {
		const char *cmd, *why;
	} cases[] = {
	        {"printf '# tool v1\\nA = 1\\nB=Enabled\\n'; echo noise >&2",
	         "no server to post the BIOS values"},
	        {"echo '{\\\"A\\\": 1, \\\"B\\\": \\\"x\\\"}'",
	         "no server to post the BIOS values"},
	        {"echo garbage", "not Name=Value"},
	        {"echo '[1, 2]'", "not an object"},
	        {"echo '{\\\"A\\\": {\\\"x\\\": 1}}'", "not a scalar"},
	        {"true", "printed no attributes"},
	        {"echo A=1; exit 3", "exit"},
	};
	char steps[1024];
	struct rp_agent_outcome *o;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(steps, sizeof steps,
		         "{\"id\": \"b\", \"type\": \"bios\", \"command\": \"%s\", \"report\": "
		         "true}",
		         cases[i].cmd);
		run_step(steps, &o);
		assert_false(o->succeeded);
		if (strstr(o->error, cases[i].why) == NULL)
			fail_msg("%s: %s", cases[i].cmd, o->error);
		rp_agent_outcome_free(o);
	}
}

/* ---- authorized_keys and MACs -------------------------------------------------------- */

static void
test_authorized_keys(void **state)
{
	const char *key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIServer rackpilotd";
	char err[256], *data = NULL;
	struct stat st;

	(void)state;
	assert_int_equal(rp_agent_authorized_keys_add(tpath("ak1"), key, err, sizeof err), 0);
	assert_int_equal(stat(tpath("ak1"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(rp_file_read(tpath("ak1"), 4096, &data, NULL), 0);
	assert_string_equal(data, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIServer rackpilotd\n");
	free(data);

	/* Same type and key under options and another comment: nothing to add. */
	put_file("ak2", "# keys\ncommand=\"echo a b\",no-pty ssh-ed25519 "
	                "AAAAC3NzaC1lZDI1NTE5AAAAIServer old-comment\n");
	assert_int_equal(rp_agent_authorized_keys_add(tpath("ak2"), key, err, sizeof err), 0);
	assert_int_equal(rp_file_read(tpath("ak2"), 4096, &data, NULL), 0);
	assert_null(strstr(data, "rackpilotd"));
	free(data);

	/* Another key, no final newline: the new key gets its own line. */
	put_file("ak3", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther someone");
	assert_int_equal(rp_agent_authorized_keys_add(tpath("ak3"), key, err, sizeof err), 0);
	assert_int_equal(rp_agent_authorized_keys_add(tpath("ak3"), key, err, sizeof err), 0);
	assert_int_equal(rp_file_read(tpath("ak3"), 4096, &data, NULL), 0);
	assert_string_equal(data, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther someone\n"
	                          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIServer rackpilotd\n");
	free(data);

	assert_int_equal(rp_agent_authorized_keys_add(tpath("ak4"), "justoneword", err, sizeof err),
	                 -1);
	assert_int_equal(rp_agent_authorized_keys_add(tpath("ak4"), "a b\nc d", err, sizeof err),
	                 -1);
}

static void
test_macs(void **state)
{
	json_t *inv, *m;

	(void)state;
	inv = json_loads(
	        "{\"nics\": {\"items\": ["
	        "{\"name\": \"eno1\", \"mac\": \"3C:EC:EF:00:00:01\", \"pci\": \"0000:05:00.0\"},"
	        "{\"name\": \"lo\", \"mac\": \"00:00:00:00:00:00\", \"pci\": null},"
	        "{\"name\": \"ib0\", \"mac\": "
	        "\"80:00:02:08:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01\", "
	        "\"pci\": \"0000:06:00.0\"},"
	        "{\"name\": \"eth9\", \"mac\": \"00:00:00:00:00:00\", \"pci\": \"0000:07:00.0\"},"
	        "{\"name\": \"usb0\", \"mac\": \"02:00:00:00:00:09\", \"pci\": null},"
	        "{\"name\": \"eno2\", \"mac\": \"3c:ec:ef:00:00:02\", \"pci\": \"0000:05:00.1\"},"
	        "{\"name\": \"eno1d\", \"mac\": \"3c:ec:ef:00:00:01\", \"pci\": \"0000:05:00.2\"}"
	        "]}}",
	        0, NULL);
	m = rp_agent_macs(inv, tmpdir);
	assert_int_equal(json_array_size(m), 2);
	assert_string_equal(json_string_value(json_array_get(m, 0)), "3c:ec:ef:00:00:01");
	assert_string_equal(json_string_value(json_array_get(m, 1)), "3c:ec:ef:00:00:02");
	json_decref(m);
	json_decref(inv);

	/* No nics in the inventory: sysfs, physical (with a device link) first. */
	put_file("sys1/sys/class/net/lo/address", "00:00:00:00:00:00\n");
	put_file("sys1/sys/class/net/eth0/address", "52:54:00:12:34:56\n");
	put_file("sys1/sys/class/net/eth0/device/vendor", "0x1af4\n");
	put_file("sys1/sys/class/net/br0/address", "52:54:00:aa:bb:cc\n");
	inv = json_pack("{s:{s:s, s:s}}", "nics", "source", "/sys/class/net", "skipped", "none");
	m = rp_agent_macs(inv, tpath("sys1"));
	assert_int_equal(json_array_size(m), 1);
	assert_string_equal(json_string_value(json_array_get(m, 0)), "52:54:00:12:34:56");
	json_decref(m);

	/* Only virtual interfaces (a container): those, rather than nothing. */
	put_file("sys2/sys/class/net/lo/address", "00:00:00:00:00:00\n");
	put_file("sys2/sys/class/net/veth1/address", "0a:58:0a:f4:00:07\n");
	m = rp_agent_macs(inv, tpath("sys2"));
	assert_int_equal(json_array_size(m), 1);
	assert_string_equal(json_string_value(json_array_get(m, 0)), "0a:58:0a:f4:00:07");
	json_decref(m);

	m = rp_agent_macs(inv, tpath("nothing"));
	assert_int_equal(json_array_size(m), 0);
	json_decref(m);
	json_decref(inv);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_config_file),
	        cmocka_unit_test(test_config_precedence),
	        cmocka_unit_test(test_tls_fingerprint),
	        cmocka_unit_test(test_config_fingerprint),
	        cmocka_unit_test(test_download_pinned),
	        cmocka_unit_test(test_utf8),
	        cmocka_unit_test(test_utf8_cap),
	        cmocka_unit_test(test_tail),
	        cmocka_unit_test(test_plan_good),
	        cmocka_unit_test(test_bios_report),
	        cmocka_unit_test(test_plan_bad),
	        cmocka_unit_test(test_plan_content_cap),
	        cmocka_unit_test(test_decide),
	        cmocka_unit_test(test_shell_basic),
	        cmocka_unit_test(test_shell_timeout),
	        cmocka_unit_test(test_shell_big_output),
	        cmocka_unit_test(test_result_body),
	        cmocka_unit_test(test_subst_image),
	        cmocka_unit_test(test_file_step),
	        cmocka_unit_test(test_image_step_refuses),
	        cmocka_unit_test(test_authorized_keys),
	        cmocka_unit_test(test_macs),
	        cmocka_unit_test(test_plan_ready_port),
	        cmocka_unit_test(test_tcp_listening),
	        cmocka_unit_test(test_progress_ready_body),
	        cmocka_unit_test(test_shell_ready),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
