/*
 * TLS on the API (docs/security.md), against the real rackpilotd and curl/openssl as peers:
 * the certificate rackpilotd makes for itself (its public-key pin as logged, its SAN), one
 * signed by a CA made here with openssl, plain HTTP refused on the TLS port, a wrong pin
 * refused before anything is sent, the plain-HTTP boot listener serving /boot/ only with
 * scripts that point the agent at the HTTPS API and its pin, and a certificate replaced on
 * SIGHUP while an open connection (an event stream) carries on.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char workdir[256];

/* The public-key pin of a PEM certificate as openssl computes it: 64 hex digits into hex,
 * and curl's "sha256//BASE64" into pin (either may be NULL). */
static void
pin_of(const char *cert, char *hex, char *pin)
{
	char cmd[1200], out[256];
	FILE *p;

	snprintf(cmd, sizeof cmd,
	         "openssl x509 -in %s -noout -pubkey | openssl pkey -pubin -outform DER | "
	         "sha256sum | cut -c1-64",
	         cert);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, sizeof out, p));
	pclose(p);
	out[strcspn(out, "\n")] = '\0';
	assert_int_equal(strlen(out), 64);
	if (hex)
		snprintf(hex, 65, "%.64s", out);
	if (pin) {
		snprintf(cmd, sizeof cmd, "printf %s | xxd -r -p | base64", out);
		p = popen(cmd, "r");
		assert_non_null(p);
		assert_non_null(fgets(out, sizeof out, p));
		pclose(p);
		out[strcspn(out, "\n")] = '\0';
		snprintf(pin, 96, "sha256//%.80s", out);
	}
}

/* A server with tls = on on loopback (auto would keep loopback plain). */
static void
start_tls(struct server *s, const char *dir, const char *extra_conf, const char *const *more)
{
	static char conf[400];
	const char *args[12] = {"-c", conf};
	FILE *f;
	int i;

	snprintf(conf, sizeof conf, "%s/tls-%d.conf", workdir, getpid());
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[server]\ntls = on\npower_sync_interval = 0\n%s", extra_conf ? extra_conf : "");
	fclose(f);
	for (i = 0; more && more[i] && i < 9; i++)
		args[2 + i] = more[i];
	server_start(s, dir, args);
}

/* The certificate rackpilotd makes: ECDSA P-256, SAN 127.0.0.1, its pin logged, files 0600;
 * HTTPS works with the pin and with the certificate as CA; a wrong pin and plain HTTP do not. */
static void
test_self_signed(void **state)
{
	struct server s;
	char cert[400], hex[65], pin[96], cmd[1500], log[16384];
	struct reply r;
	struct stat sb;

	(void)state;
	start_tls(&s, NULL, NULL, NULL);
	snprintf(cert, sizeof cert, "%s/tls/cert.pem", s.dir);
	pin_of(cert, hex, pin);
	slurp(s.log, log, sizeof log);
	snprintf(cmd, sizeof cmd, "public-key SHA-256 fingerprint %s", hex);
	assert_non_null(strstr(log, cmd));
	snprintf(cmd, sizeof cmd, "%s/tls/key.pem", s.dir);
	assert_int_equal(stat(cmd, &sb), 0);
	assert_int_equal(sb.st_mode & 077, 0);
	sh("openssl x509 -in %s -noout -text | grep -q 'IP Address:127.0.0.1'", cert);
	sh("openssl x509 -in %s -noout -text | grep -q 'ASN1 OID: prime256v1'", cert);
	/* Pinned, and verified as a CA by name (its SAN) as well. */
	server_tls(&s, pin, cert);
	assert_int_equal(call(&s, s.admin, "GET", "/v1", &r, NULL), 200);
	reply_free(&r);
	/* A wrong pin: curl stops at the handshake (exit 90). */
	snprintf(cmd, sizeof cmd,
	         "curl -s -o /dev/null -k --pinnedpubkey "
	         "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= -H 'Authorization: Bearer "
	         "%s' "
	         "%s/v1",
	         s.admin, s.base);
	assert_int_equal(sh_rc("%s", cmd), 90);
	/* Plain HTTP to the TLS port gets no answer. */
	snprintf(cmd, sizeof cmd, "curl -s -o /dev/null --max-time 5 http://%s/healthz",
	         s.base + strlen("https://"));
	assert_int_not_equal(sh_rc("%s", cmd), 0);
	/* Without a CA or pin, a client refuses the unknown certificate. */
	snprintf(cmd, sizeof cmd, "curl -s -o /dev/null %s/healthz", s.base);
	assert_int_equal(sh_rc("%s", cmd), 60);
	/* A second start keeps the certificate (clients pinned it). */
	server_stop(&s, SIGTERM);
	{
		char dir[256];

		snprintf(dir, sizeof dir, "%s", s.dir);
		start_tls(&s, dir, NULL, NULL);
	}
	{
		char again[65];

		pin_of(cert, again, NULL);
		assert_string_equal(again, hex);
	}
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

/* Make a CA and a server certificate it signs (SAN ip) under workdir/name-*. */
static void
make_ca_cert(const char *name, const char *ip)
{
	sh("cd %s && openssl ecparam -name prime256v1 -genkey -noout -out %s-ca.key 2>/dev/null && "
	   "openssl req -x509 -new -key %s-ca.key -subj /CN=%s-ca -days 2 -out %s-ca.pem && "
	   "openssl ecparam -name prime256v1 -genkey -noout -out %s.key 2>/dev/null && "
	   "openssl req -new -key %s.key -subj /CN=rackpilotd -out %s.csr && "
	   "printf 'subjectAltName=IP:%s\\nextendedKeyUsage=serverAuth\\n' > %s.ext && "
	   "openssl x509 -req -in %s.csr -CA %s-ca.pem -CAkey %s-ca.key -CAcreateserial -days 2 "
	   "-extfile %s.ext -out %s.pem 2>/dev/null",
	   workdir, name, name, name, name, name, name, name, ip, name, name, name, name, name,
	   name);
}

/* A CA-signed certificate from --tls-cert/--tls-key: verified by the CA and the address. */
static void
test_ca_signed(void **state)
{
	char cert[400], key[400], ca[400], other[400], cmd[1500];
	const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
	struct server s;
	struct reply r;

	(void)state;
	make_ca_cert("srv", "127.0.0.1");
	make_ca_cert("elsewhere", "127.0.0.1");
	snprintf(cert, sizeof cert, "%s/srv.pem", workdir);
	snprintf(key, sizeof key, "%s/srv.key", workdir);
	snprintf(ca, sizeof ca, "%s/srv-ca.pem", workdir);
	snprintf(other, sizeof other, "%s/elsewhere-ca.pem", workdir);
	server_start(&s, NULL, args);
	server_tls(&s, NULL, ca);
	assert_int_equal(call(&s, s.admin, "GET", "/v1", &r, NULL), 200);
	reply_free(&r);
	/* Another CA does not vouch for it; nor does the right CA for another name. */
	snprintf(cmd, sizeof cmd, "curl -s -o /dev/null --cacert %s %s/healthz", other, s.base);
	assert_int_equal(sh_rc("%s", cmd), 60);
	snprintf(cmd, sizeof cmd,
	         "curl -s -o /dev/null --cacert %s --resolve wrong.example:%s:127.0.0.1 "
	         "https://wrong.example:%s/healthz",
	         ca, strrchr(s.base, ':') + 1, strrchr(s.base, ':') + 1);
	assert_int_equal(sh_rc("%s", cmd), 60);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	/* A key that is not the certificate's, and a missing file: refused at start, named. */
	{
		char bad[400], log[8192];

		snprintf(bad, sizeof bad, "%s/elsewhere.key", workdir);
		snprintf(cmd, sizeof cmd,
		         "%s --data-dir %s/badkey --listen 127.0.0.1:0 --tls-cert %s --tls-key %s "
		         "> %s/badkey.log 2>&1",
		         rp_test_bin, workdir, cert, bad, workdir);
		assert_int_not_equal(sh_rc("%s", cmd), 0);
		snprintf(cmd, sizeof cmd, "%s/badkey.log", workdir);
		slurp(cmd, log, sizeof log);
		assert_non_null(strstr(log, "is not the private key of the certificate"));
		snprintf(cmd, sizeof cmd,
		         "%s --data-dir %s/badkey --listen 127.0.0.1:0 --tls-cert %s/nope.pem "
		         "--tls-key %s "
		         "> %s/badkey.log 2>&1",
		         rp_test_bin, workdir, workdir, key, workdir);
		assert_int_not_equal(sh_rc("%s", cmd), 0);
		snprintf(cmd, sizeof cmd, "%s/badkey.log", workdir);
		slurp(cmd, log, sizeof log);
		assert_non_null(strstr(log, "nope.pem"));
		/* Only one of the pair: a configuration error. */
		snprintf(cmd, sizeof cmd, "%s -n --tls-cert %s > %s/badkey.log 2>&1", rp_test_bin,
		         cert, workdir);
		assert_int_not_equal(sh_rc("%s", cmd), 0);
	}
}

/* A boot profile on s (reached with pin), so that an unknown MAC gets the ramdisk. */
static void
boot_profile(struct server *s, const char *pin)
{
	char path[400], cmd[1500];
	struct reply r;
	int i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "%s/img%d", workdir, i);
		sh("head -c 1000 /dev/urandom > %s", path);
		snprintf(cmd, sizeof cmd,
		         "curl -sf -o /dev/null -X PUT --pinnedpubkey '%s' -k -H 'Authorization: "
		         "Bearer "
		         "%s' --data-binary @%s '%s/v1/images/img%d?kind=%s'",
		         pin, s->admin, path, s->base, i, i ? "initrd" : "kernel");
		sh("%s", cmd);
	}
	assert_int_equal(call(s, s->admin, "POST", "/v1/boot-profiles", &r, "{s:s, s:s, s:s}",
	                      "name", "default", "kernel", "img0", "initrd", "img1"),
	                 201);
	reply_free(&r);
}

/* The boot listener: plain HTTP, /boot/ only; its scripts send the agent to the HTTPS API
 * with the pin. */
static void
test_boot_listener(void **state)
{
	struct server s;
	char cert[400], hex[65], pin[96], url[300], want[300];
	struct reply r;

	(void)state;
	start_tls(&s, NULL, NULL, NULL);
	assert_true(strncmp(s.boot, "http://127.0.0.1:", 17) == 0);
	snprintf(cert, sizeof cert, "%s/tls/cert.pem", s.dir);
	pin_of(cert, hex, pin);
	server_tls(&s, pin, NULL);
	boot_profile(&s, pin);
	snprintf(url, sizeof url, "%s/boot/ipxe?mac=02:71:00:00:00:01", s.boot);
	assert_int_equal(req_url(&s, NULL, "GET", url, NULL, NULL, 0, NULL, &r), 200);
	/* Images from the boot listener; the agent to the API, with its pin. */
	snprintf(want, sizeof want, "kernel %s/boot/images/img0 ", s.boot);
	assert_non_null(strstr(r.body, want));
	snprintf(want, sizeof want, "rackpilot.url=%s ", s.base);
	assert_non_null(strstr(r.body, want));
	snprintf(want, sizeof want, "rackpilot.tls_sha256=%s ", hex);
	assert_non_null(strstr(r.body, want));
	reply_free(&r);
	snprintf(url, sizeof url, "%s/boot/images/img0", s.boot);
	assert_int_equal(req_url(&s, NULL, "GET", url, NULL, NULL, 0, NULL, &r), 200);
	assert_int_equal(r.len, 1000);
	reply_free(&r);
	/* Nothing else is served there, tokens or not. */
	snprintf(url, sizeof url, "%s/v1/nodes", s.boot);
	assert_int_equal(req_url(&s, s.admin, "GET", url, NULL, NULL, 0, NULL, &r), 404);
	reply_free(&r);
	snprintf(url, sizeof url, "%s/v1/agent/register", s.boot);
	assert_int_equal(req_url(&s, NULL, "POST", url, "application/json", "{}", 2, NULL, &r),
	                 404);
	reply_free(&r);
	snprintf(url, sizeof url, "%s/ui/", s.boot);
	assert_int_equal(req_url(&s, NULL, "GET", url, NULL, NULL, 0, NULL, &r), 404);
	reply_free(&r);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

/* SIGHUP: new handshakes get the new certificate, an open connection keeps going, a broken
 * replacement is refused and the old one stays. */
static void
test_reload(void **state)
{
	char cert[400], key[400], old_pin[96], new_pin[96], cmd[1500], out[400], log[65536];
	const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
	struct server s;
	struct reply r;
	int i, got = 0;

	(void)state;
	make_ca_cert("r1", "127.0.0.1");
	make_ca_cert("r2", "127.0.0.1");
	snprintf(cert, sizeof cert, "%s/live.pem", workdir);
	snprintf(key, sizeof key, "%s/live.key", workdir);
	sh("cp %s/r1.pem %s && cp %s/r1.key %s", workdir, cert, workdir, key);
	pin_of(cert, NULL, old_pin);
	server_start(&s, NULL, args);
	server_tls(&s, old_pin, NULL);
	/* An event stream, open across the reload. */
	snprintf(out, sizeof out, "%s/stream.out", workdir);
	snprintf(
	        cmd, sizeof cmd,
	        "curl -sN -k --pinnedpubkey '%s' -H 'Authorization: Bearer %s' %s/v1/events/stream "
	        "> %s 2>&1 & echo $! > %s/stream.pid",
	        old_pin, s.admin, s.base, out, workdir);
	sh("%s", cmd);
	usleep(500000);
	sh("cp %s/r2.pem %s && cp %s/r2.key %s", workdir, cert, workdir, key);
	pin_of(cert, NULL, new_pin);
	kill(s.pid, SIGHUP);
	for (i = 0; i < 50 && !got; i++) {
		usleep(100000);
		slurp(s.log, log, sizeof log);
		got = strstr(log, "TLS certificate") && strstr(log, "reloaded") != NULL;
	}
	assert_true(got);
	/* New connections: the new key; and boot scripts give the agents the new pin. */
	server_tls(&s, new_pin, NULL);
	assert_int_equal(call(&s, s.admin, "GET", "/v1", &r, NULL), 200);
	reply_free(&r);
	boot_profile(&s, new_pin);
	{
		char url[300], hex[65], want[120];

		pin_of(cert, hex, NULL);
		snprintf(url, sizeof url, "%s/boot/ipxe?mac=02:71:00:00:00:0e", s.boot);
		assert_int_equal(req_url(&s, NULL, "GET", url, NULL, NULL, 0, NULL, &r), 200);
		snprintf(want, sizeof want, "rackpilot.tls_sha256=%s ", hex);
		assert_non_null(strstr(r.body, want));
		reply_free(&r);
	}
	snprintf(cmd, sizeof cmd, "curl -s -o /dev/null -k --pinnedpubkey '%s' %s/healthz", old_pin,
	         s.base);
	assert_int_equal(sh_rc("%s", cmd), 90);
	/* The stream opened before still delivers: a change after the reload reaches it. */
	assert_int_equal(
	        call(&s, s.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "after-reload"), 201);
	reply_free(&r);
	for (got = 0, i = 0; i < 50 && !got; i++) {
		char text[8192];

		usleep(100000);
		slurp(out, text, sizeof text);
		got = strstr(text, "after-reload") != NULL;
	}
	assert_true(got);
	/* A broken file: refused, the current certificate stays. */
	sh("echo garbage > %s", cert);
	kill(s.pid, SIGHUP);
	for (got = 0, i = 0; i < 50 && !got; i++) {
		usleep(100000);
		slurp(s.log, log, sizeof log);
		got = strstr(log, "not reloaded, the old one stays") != NULL;
	}
	assert_true(got);
	assert_int_equal(call(&s, s.admin, "GET", "/v1", &r, NULL), 200);
	reply_free(&r);
	{
		char pid[32];

		snprintf(cmd, sizeof cmd, "%s/stream.pid", workdir);
		slurp(cmd, pid, sizeof pid);
		kill(atoi(pid), SIGTERM);
	}
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

/* Run rackpilotd in network namespace ns on addr with extra config; wait for its listening
 * line; its stdout in out, its log in log. Returns its pid. */
static pid_t
start_in_ns(const char *ns, const char *dir, const char *conf, const char *addr, const char *out,
            const char *log)
{
	char cmd[1500], text[512];
	FILE *p;
	int i;

	/* The last run's words must not be read as this one's. */
	sh("rm -f %s %s", out, log);
	snprintf(cmd, sizeof cmd,
	         "ip netns exec %s %s -c %s --data-dir %s --listen %s > %s 2> %s < /dev/null & "
	         "echo $!",
	         ns, rp_test_bin, conf, dir, addr, out, log);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(text, sizeof text, p));
	pclose(p);
	for (i = 0; i < 200; i++) {
		char got[512];

		slurp(out, got, sizeof got);
		if (strstr(got, "listening on "))
			break;
		usleep(100000);
	}
	return (pid_t)atoi(text);
}

/* On an address that is not loopback TLS is the default (a certificate made for that address);
 * plain HTTP there only with tls = off, and a warning. In a network namespace of the test's own
 * (a loopback interface with a 10.x address): nothing leaves the machine. */
static void
test_non_loopback_default(void **state)
{
	char ns[32], dir[300], conf[300], out[300], log[300], text[8192], cmd[1500], cert[400];
	char hex[65], pin[96];
	pid_t pid;
	FILE *f;

	(void)state;
	snprintf(ns, sizeof ns, "rptls%d", (int)getpid() % 100000);
	if (sh_rc("ip netns add %s 2> /dev/null && ip netns exec %s true", ns, ns) != 0) {
		sh_rc("ip netns del %s 2> /dev/null", ns);
		/* The one thing a machine may truly lack (a chroot, no CAP_SYS_ADMIN): said, not
		 * hidden. */
		print_message("SKIPPED test_non_loopback_default: cannot create network namespaces "
		              "here\n");
		return;
	}
	sh("ip -n %s link set lo up && ip -n %s addr add 10.250.0.1/32 dev lo", ns, ns);
	snprintf(dir, sizeof dir, "%s/nl", workdir);
	snprintf(conf, sizeof conf, "%s/nl.conf", workdir);
	snprintf(out, sizeof out, "%s/nl.out", workdir);
	snprintf(log, sizeof log, "%s/nl.log", workdir);
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[server]\npower_sync_interval = 0\n");
	fclose(f);
	pid = start_in_ns(ns, dir, conf, "10.250.0.1:0", out, log);
	slurp(out, text, sizeof text);
	assert_non_null(strstr(text, "listening on 10.250.0.1:"));
	assert_non_null(strstr(text, "boot listening on 10.250.0.1:"));
	slurp(log, text, sizeof text);
	assert_non_null(strstr(text, "made a self-signed certificate for 10.250.0.1"));
	snprintf(cert, sizeof cert, "%s/tls/cert.pem", dir);
	sh("openssl x509 -in %s -noout -text | grep -q 'IP Address:10.250.0.1'", cert);
	pin_of(cert, hex, pin);
	{
		char addr[64];

		slurp(out, text, sizeof text);
		sscanf(strstr(text, "listening on ") + 13, "%63s", addr);
		/* Checked like an operator's client would: by the certificate (its SAN is the
		 * address) and the pin. */
		snprintf(cmd, sizeof cmd,
		         "ip netns exec %s curl -sf -o /dev/null --cacert %s --pinnedpubkey '%s' "
		         "https://%s/healthz",
		         ns, cert, pin, addr);
		sh("%s", cmd);
		snprintf(cmd, sizeof cmd,
		         "ip netns exec %s curl -s -o /dev/null --max-time 5 http://%s/healthz", ns,
		         addr);
		assert_int_not_equal(sh_rc("%s", cmd), 0);
	}
	kill(pid, SIGTERM);
	sh_rc("while kill -0 %d 2> /dev/null; do sleep 0.1; done", (int)pid);
	/* tls = off: plain, and said at every start. */
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[server]\npower_sync_interval = 0\ntls = off\n");
	fclose(f);
	pid = start_in_ns(ns, dir, conf, "10.250.0.1:0", out, log);
	slurp(log, text, sizeof text);
	assert_non_null(strstr(text, "tls = off: the API on 10.250.0.1:0 is plain HTTP"));
	slurp(out, text, sizeof text);
	assert_null(strstr(text, "boot listening"));
	kill(pid, SIGTERM);
	sh_rc("while kill -0 %d 2> /dev/null; do sleep 0.1; done", (int)pid);
	sh_rc("ip netns del %s", ns);
}

static int
setup(void **state)
{
	(void)state;
	if (sh_rc("command -v openssl > /dev/null && command -v xxd > /dev/null") != 0)
		fail_msg("openssl and xxd are needed (.ci/deps installs them)");
	snprintf(workdir, sizeof workdir, "/tmp/rp-tls-XXXXXX");
	assert_non_null(mkdtemp(workdir));
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	if (getenv("RP_KEEP") == NULL)
		sh_rc("rm -rf %s", workdir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_self_signed),          cmocka_unit_test(test_ca_signed),
	        cmocka_unit_test(test_boot_listener),        cmocka_unit_test(test_reload),
	        cmocka_unit_test(test_non_loopback_default),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
