/* util: identifiers, MACs, names, hosts, time, base64url, hashing, secrets at rest. */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/util.h"

static void
test_uuid(void **state)
{
	char a[RP_UUID_BUF], b[RP_UUID_BUF];

	(void)state;
	assert_int_equal(rp_uuid_new(a), 0);
	assert_int_equal(rp_uuid_new(b), 0);
	assert_string_not_equal(a, b);
	assert_true(rp_uuid_valid(a));
	assert_int_equal(a[14], '4');
	assert_true(strchr("89ab", a[19]) != NULL);
	assert_null(strpbrk(a, "ABCDEF")); /* lowercase, as stored and compared */
	assert_true(rp_uuid_valid("0B5E5C1E-0000-4000-8000-000000000000"));
	assert_false(rp_uuid_valid("0b5e5c1e-0000-4000-8000-00000000000"));
	assert_false(rp_uuid_valid("0b5e5c1e_0000-4000-8000-000000000000"));
	assert_false(rp_uuid_valid(NULL));
}

static void
test_mac(void **state)
{
	char m[RP_MAC_BUF];

	(void)state;
	assert_int_equal(rp_mac_normalize("AA-BB-CC-DD-EE-0F", m), 0);
	assert_string_equal(m, "aa:bb:cc:dd:ee:0f");
	assert_int_equal(rp_mac_normalize("aabb.ccdd.ee0f", m), 0);
	assert_string_equal(m, "aa:bb:cc:dd:ee:0f");
	assert_int_equal(rp_mac_normalize("aabbccddee0f", m), 0);
	assert_string_equal(m, "aa:bb:cc:dd:ee:0f");
	assert_int_equal(rp_mac_normalize("aa:bb:cc:dd:ee", m), -1);
	assert_int_equal(rp_mac_normalize("aa:bb:cc:dd:ee:0f:11", m), -1);
	assert_int_equal(rp_mac_normalize("aa:bb:cc:dd:ee:0g", m), -1);
	assert_int_equal(rp_mac_normalize("aa:bb:cc:dd:ee0f", m), -1);
	assert_int_equal(rp_mac_normalize("", m), -1);
}

static void
test_names_hosts(void **state)
{
	char long64[65];

	(void)state;
	assert_true(rp_name_valid("gpu-r01-u07"));
	assert_true(rp_name_valid("R01.a_b"));
	assert_false(rp_name_valid("-x"));
	assert_false(rp_name_valid(""));
	assert_false(rp_name_valid("a/b"));
	assert_false(rp_name_valid("a b"));
	assert_false(rp_name_valid("0b5e5c1e-0000-4000-8000-000000000000"));
	memset(long64, 'a', 64);
	long64[64] = '\0';
	assert_false(rp_name_valid(long64));
	long64[63] = '\0';
	assert_true(rp_name_valid(long64));
	assert_true(rp_host_valid("10.0.0.1"));
	assert_true(rp_host_valid("bmc-07.rack1.example.net"));
	assert_true(rp_host_valid("fe80::1"));
	assert_false(rp_host_valid("10.0.0.1:623"));
	assert_false(rp_host_valid("a b"));
	assert_false(rp_host_valid(""));
}

static void
test_time(void **state)
{
	char buf[RP_TIME_BUF];
	int64_t ms;

	(void)state;
	assert_string_equal(rp_time_format(1764477000123, buf), "2025-11-30T04:30:00.123Z");
	assert_int_equal(rp_time_parse("2025-11-30T04:30:00.123Z", &ms), 0);
	assert_int_equal(ms, 1764477000123);
	assert_int_equal(rp_time_parse("2025-11-30T05:30:00+01:00", &ms), 0);
	assert_int_equal(ms, 1764477000000);
	assert_int_equal(rp_time_parse("1764477000", &ms), 0);
	assert_int_equal(ms, 1764477000000);
	assert_int_equal(rp_time_parse("2025-11-30", &ms), -1);
	assert_int_equal(rp_time_parse("2025-13-30T00:00:00Z", &ms), -1);
	assert_int_equal(rp_time_parse("2025-11-30T04:30:00", &ms), -1);
	assert_int_equal(rp_time_parse("yesterday", &ms), -1);
}

static void
test_b64url_token_sha(void **state)
{
	char enc[64], tok[RP_TOKEN_BUF], hex[RP_SHA256_HEX];
	unsigned char dec[32];

	(void)state;
	assert_int_equal(rp_b64url_encode("\xfb\xff", 2, enc), 3);
	assert_string_equal(enc, "-_8");
	assert_int_equal(rp_b64url_decode("-_8", dec, sizeof dec), 2);
	assert_memory_equal(dec, "\xfb\xff", 2);
	assert_int_equal(rp_b64url_decode("a+b", dec, sizeof dec), -1);
	assert_int_equal(rp_b64url_decode("-_9", dec, sizeof dec), -1); /* non-zero padding bits */
	assert_int_equal(rp_b64url_decode("AAAAAAAA", dec, 2), -1);     /* overflows the cap */
	assert_int_equal(rp_token_new("rpt_", tok), 0);
	assert_int_equal(strlen(tok), 47);
	assert_int_equal(strncmp(tok, "rpt_", 4), 0);
	rp_sha256_hex("abc", 3, hex);
	assert_string_equal(hex,
	                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void
test_buf(void **state)
{
	struct rp_buf b = {0};
	int i;

	(void)state;
	for (i = 0; i < 1000; i++)
		rp_buf_printf(&b, "%d,", i);
	assert_int_equal(b.len, strlen(b.data));
	assert_int_equal(strncmp(b.data, "0,1,2,", 6), 0);
	rp_buf_free(&b);
	assert_null(b.data);
}

/* A capped buffer: exactly max bytes fit, one more is refused and marks it, what it held
 * stays readable, and every later append is refused too. */
static size_t line_of(char *buf, size_t cap, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static size_t
line_of(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = rp_vline(buf, cap, fmt, ap);
	va_end(ap);
	return n;
}

/* One line, newline included, cut to the buffer with the newline kept. */
static void
test_str_lists(void **state)
{
	static const char *const names[] = {"ipmi", "redfish", "fake", NULL};
	char buf[64];

	(void)state;
	assert_int_equal(rp_str_index(names, "ipmi"), 0);
	assert_int_equal(rp_str_index(names, "fake"), 2);
	assert_int_equal(rp_str_index(names, "IPMI"), -1);
	assert_int_equal(rp_str_index(names, ""), -1);
	assert_int_equal(rp_str_index(names, NULL), -1);
	rp_str_one_of(buf, sizeof buf, "must be ", names);
	assert_string_equal(buf, "must be one of: ipmi, redfish, fake");
	/* Cut to fit, never past the buffer. */
	rp_str_one_of(buf, 20, "must be ", names);
	assert_string_equal(buf, "must be one of: ipm");
}

static void
test_vline(void **state)
{
	char b[8];

	(void)state;
	assert_int_equal(line_of(b, sizeof b, "%s", "ab"), 3);
	assert_string_equal(b, "ab\n");
	assert_int_equal(line_of(b, sizeof b, "%s", "abcdef"), 7);
	assert_string_equal(b, "abcdef\n");
	assert_int_equal(line_of(b, sizeof b, "%d-%s", 12, "toolongforit"), 7);
	assert_string_equal(b, "12-too\n");
	assert_int_equal(line_of(b, 2, "%s", "x"), 1);
	assert_string_equal(b, "\n");
}

static void
test_buf_cap(void **state)
{
	struct rp_buf b;

	(void)state;
	rp_buf_init(&b, 8);
	assert_int_equal(rp_buf_append(&b, "abcd", 4), 0);
	assert_int_equal(rp_buf_printf(&b, "%s", "efgh"), 0);
	assert_int_equal(b.len, 8);
	assert_false(b.toobig);
	assert_int_equal(rp_buf_append(&b, "i", 1), -1);
	assert_true(b.toobig);
	assert_false(b.oom);
	assert_int_equal(b.len, 8);
	assert_string_equal(b.data, "abcdefgh");
	assert_int_equal(rp_buf_append(&b, "", 0), -1);
	assert_int_equal(rp_buf_printf(&b, "x"), -1);
	assert_string_equal(b.data, "abcdefgh");
	rp_buf_free(&b);
	assert_null(b.data);

	/* One append past the cap from empty, and one that would wrap size_t. */
	rp_buf_init(&b, 4);
	assert_int_equal(rp_buf_append(&b, "abcde", 5), -1);
	assert_true(b.toobig);
	assert_int_equal(b.len, 0);
	rp_buf_free(&b);
	rp_buf_init(&b, 4);
	assert_int_equal(rp_buf_append(&b, "ab", 2), 0);
	assert_int_equal(rp_buf_append(&b, "x", SIZE_MAX), -1);
	assert_true(b.toobig);
	assert_string_equal(b.data, "ab");
	rp_buf_free(&b);

	/* Zero-initialised: no cap. */
	b = (struct rp_buf){0};
	assert_int_equal(rp_buf_printf(&b, "%0*d", 100000, 7), 0);
	assert_int_equal(b.len, 100000);
	assert_false(b.toobig);
	rp_buf_free(&b);
}

/* Fingerprints as `ssh-keygen -lf` printed them for these keys. */
static void
test_sshkey(void **state)
{
	static const struct {
		const char *line, *type, *fp;
	} keys[] = {
	        {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEj+0zhiQEJuyA07cB1MguetKm2VQWyaex2sRJ6gWDus "
	         "root@node"
	         "7",
	         "ssh-ed25519", "SHA256:Ad7+6NwavcLzMo8yJxTL/a7dIVzCjF5XyZulRQKTXpQ"},
	        {"ssh-rsa "
	         "AAAAB3NzaC1yc2EAAAADAQABAAABAQDWardLd7nzDTPA/E+KAlu7w+bfISFMYmkD+YtzOyFWI5aTnA/"
	         "YlX"
	         "J7oDJpyPsJRWj92W5khs4jDQDVk2dXt6awoctPHCkiwAtsuVZ/omFAgFMX4qN9NdSIm0DoSRpuHP6ET/"
	         "Rb9LXA02c6"
	         "R/whFd+I2U/f4z0BOWtpLO68b1zuhBlPFdTmsLZILVBa2dFtwhmlMCAp9BqNK7iDhLzdQt5Q/"
	         "i9c2dmIVsbfH22HjS"
	         "uFGMVBUuJguut/"
	         "dlxqug0nn6BlYm780rGwf6SBuzWlKtoQ+OL9DUec6NjeYvryrubO82Fxi8d35oEPRz5Tw7KqLYkL"
	         "740FEyf4Tfk85gSr/5JB root@vm",
	         "ssh-rsa", "SHA256:+K7GJshHLj8kSJ0JPMgrAzEO5rJPq5ooTIBviDvqB4U"},
	        {"ecdsa-sha2-nistp256 "
	         "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBLd3BwpRQT4dEy1zkJ"
	         "6SrUmq3FDG4Fhc2w23P3t9MMWS9TbCfNw4x/e1kBOzZoXFjTUCifKMDPsA6yNtU3VDL7Y= root@vm",
	         "ecdsa-sha2-nistp256", "SHA256:OsTZY1L48gpWNvWmdQ/YGX+kDffN6wU9htQNhGBZGH4"},
	};
	struct rp_sshkey k;
	char bad[2200];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		assert_int_equal(rp_sshkey_parse(keys[i].line, &k), 0);
		assert_string_equal(k.type, keys[i].type);
		assert_string_equal(k.fingerprint, keys[i].fp);
	}
	/* Mislabelled: an ed25519 blob declared as RSA. */
	snprintf(bad, sizeof bad, "ssh-rsa %s", strchr(keys[0].line, ' ') + 1);
	assert_int_equal(rp_sshkey_parse(bad, &k), -1);
	/* A blob that is not base64, a truncated one, and no blob at all. */
	assert_int_equal(rp_sshkey_parse("ssh-ed25519 AAAA!AAAAAAAAAAAAAAAAAAAA", &k), -1);
	snprintf(bad, sizeof bad, "%.40s", keys[0].line);
	assert_int_equal(rp_sshkey_parse(bad, &k), -1);
	assert_int_equal(rp_sshkey_parse("ssh-ed25519", &k), -1);
	assert_int_equal(rp_sshkey_parse("", &k), -1);
	assert_int_equal(rp_sshkey_parse(NULL, &k), -1);
}

/* ---- Secrets at rest ----------------------------------------------------------------- */

static char sdir[64];   /* "/tmp/rp-secret-XXXXXX" */
static char kpath[128]; /* sdir/secret.key */
static char knew[128];  /* sdir/secret.key.new */

static int
setup_secret(void **state)
{
	(void)state;
	snprintf(sdir, sizeof sdir, "/tmp/rp-secret-XXXXXX");
	if (mkdtemp(sdir) == NULL)
		return -1;
	snprintf(kpath, sizeof kpath, "%s/secret.key", sdir);
	snprintf(knew, sizeof knew, "%s/secret.key.new", sdir);
	return 0;
}

static int
rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int
teardown_secret(void **state)
{
	(void)state;
	return nftw(sdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void
put(const char *path, const char *text, size_t len, mode_t mode)
{
	FILE *f;

	unlink(path);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static int
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Load path (no creation), expecting a refusal whose reason names the path and has hint. */
static void
refused(const char *path, const char *hint)
{
	struct rp_secrets *s = NULL;
	char why[512] = "";

	assert_int_equal(rp_secrets_load(path, 0, &s, why, sizeof why), -1);
	assert_null(s);
	if (strstr(why, path) == NULL || strstr(why, hint) == NULL)
		fail_msg("reason \"%s\" lacks the path or \"%s\"", why, hint);
}

static struct rp_secrets *
load_ok(const char *path, int create)
{
	struct rp_secrets *s = NULL;
	char why[512] = "";

	if (rp_secrets_load(path, create, &s, why, sizeof why) != 0)
		fail_msg("load %s: %s", path, why);
	assert_non_null(s);
	return s;
}

static char *
seal_ok(struct rp_secrets *s, const void *p, size_t n)
{
	char *out = NULL;

	assert_int_equal(rp_secrets_seal(s, p, n, &out), 0);
	assert_non_null(out);
	return out;
}

/* Open sealed with s and compare with want (n bytes). */
static void
opens_to(struct rp_secrets *s, const char *sealed, const void *want, size_t n)
{
	char *plain = NULL, why[256] = "";
	size_t len = 0;

	if (rp_secrets_open(s, sealed, &plain, &len, why, sizeof why) != 0)
		fail_msg("open: %s", why);
	assert_int_equal(len, n);
	assert_memory_equal(plain, want, n);
	assert_int_equal(plain[n], '\0');
	rp_secrets_plain_free(plain, len);
}

/* Expect open to fail with a reason containing hint; the out-params stay as they were. */
static void
open_fails(struct rp_secrets *s, const char *sealed, const char *hint)
{
	char *plain = (char *)"untouched", why[256] = "";
	size_t len = 7;

	assert_int_equal(rp_secrets_open(s, sealed, &plain, &len, why, sizeof why), -1);
	assert_string_equal(plain, "untouched");
	assert_int_equal(len, 7);
	if (strstr(why, hint) == NULL)
		fail_msg("reason \"%s\" lacks \"%s\"", why, hint);
}

static void
test_secret_keyfile(void **state)
{
	struct rp_secrets *s, *t;
	char *text = NULL, path[192], id[RP_SECRET_KEY_ID_BUF], why[512] = "";
	size_t len = 0;
	struct stat st;

	(void)state;
	/* No file and no creation: refused, and nothing is made. */
	refused(kpath, "does not exist");
	assert_false(exists(kpath));

	s = load_ok(kpath, 1);
	assert_int_equal(stat(kpath, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	snprintf(path, sizeof path, "%s.tmp", kpath);
	assert_false(exists(path));
	assert_false(exists(knew));
	assert_null(rp_secrets_next_key_id(s));
	snprintf(id, sizeof id, "%s", rp_secrets_key_id(s));
	assert_int_equal(strlen(id), 16);
	assert_int_equal(strspn(id, "0123456789abcdef"), 16);

	/* The file: one line, magic, 43 base64url characters, the key id. */
	assert_int_equal(rp_file_read(kpath, 4096, &text, &len), 0);
	assert_int_equal(len, 85);
	assert_int_equal(strncmp(text, "rackpilot-secret-key-v1 ", 24), 0);
	assert_int_equal(strspn(text + 24,
	                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
	                 43);
	assert_int_equal(text[67], ' ');
	assert_memory_equal(text + 68, id, 16);
	assert_int_equal(text[84], '\n');
	rp_secrets_free(s);

	/* Loading again (create or not) finds the same key; create never replaces a file. */
	s = load_ok(kpath, 1);
	assert_string_equal(rp_secrets_key_id(s), id);
	rp_secrets_free(s);
	s = load_ok(kpath, 0);
	assert_string_equal(rp_secrets_key_id(s), id);
	rp_secrets_free(s);

	/* Without the newline (an editor's doing) it still loads. */
	snprintf(path, sizeof path, "%s/nonl.key", sdir);
	put(path, text, 84, 0600);
	t = load_ok(path, 0);
	assert_string_equal(rp_secrets_key_id(t), id);
	rp_secrets_free(t);

	/* Open to group or others: refused, with the fix, and never the key in the reason. */
	assert_int_equal(chmod(kpath, 0644), 0);
	refused(kpath, "chmod 600");
	assert_int_equal(rp_secrets_load(kpath, 1, &s, why, sizeof why), -1);
	assert_null(strstr(why, "rackpilot-secret-key-v1 "));
	{
		char b64[44];

		memcpy(b64, text + 24, 43);
		b64[43] = '\0';
		assert_null(strstr(why, b64));
	}
	assert_int_equal(chmod(kpath, 0640), 0);
	refused(kpath, "mode 0640");
	assert_int_equal(chmod(kpath, 0602), 0);
	refused(kpath, "chmod 600");
	assert_int_equal(chmod(kpath, 0600), 0);

	/* Another user's file (root only can make one). */
	if (geteuid() == 0) {
		snprintf(path, sizeof path, "%s/other.key", sdir);
		put(path, text, len, 0600);
		assert_int_equal(chown(path, 12345, 12345), 0);
		refused(path, "owned by uid 12345");
	}

	/* Garbage, wrong size, a wrong magic, a damaged key, a damaged id, an empty file. */
	snprintf(path, sizeof path, "%s/bad.key", sdir);
	put(path, "hello\n", 6, 0600);
	refused(path, "not a rackpilot key file");
	put(path, text, 60, 0600);
	refused(path, "not a rackpilot key file");
	{
		char big[200];

		memset(big, 'A', sizeof big);
		memcpy(big, text, len);
		put(path, big, sizeof big, 0600);
		refused(path, "not a rackpilot key file");
	}
	put(path, "", 0, 0600);
	refused(path, "not a rackpilot key file");
	{
		char bad[85];

		memcpy(bad, text, sizeof bad);
		bad[0] = 'R';
		put(path, bad, sizeof bad, 0600);
		refused(path, "not a rackpilot key file");
		memcpy(bad, text, sizeof bad);
		bad[24] = bad[24] == 'A' ? 'B' : 'A';
		put(path, bad, sizeof bad, 0600);
		refused(path, "damaged");
		memcpy(bad, text, sizeof bad);
		bad[70] = bad[70] == '0' ? '1' : '0';
		put(path, bad, sizeof bad, 0600);
		refused(path, "damaged");
		memcpy(bad, text, sizeof bad);
		bad[30] = '+'; /* standard base64, not base64url */
		put(path, bad, sizeof bad, 0600);
		refused(path, "not a rackpilot key file");
	}

	/* A directory, a symbolic link (even to a good key file), a FIFO. */
	snprintf(path, sizeof path, "%s/dir.key", sdir);
	assert_int_equal(mkdir(path, 0700), 0);
	refused(path, "not a regular file");
	assert_int_equal(rp_secrets_load(path, 1, &s, why, sizeof why), -1);
	snprintf(path, sizeof path, "%s/link.key", sdir);
	assert_int_equal(symlink(kpath, path), 0);
	refused(path, "symbolic link");
	snprintf(path, sizeof path, "%s/fifo.key", sdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	refused(path, "not a regular file");

	/* A bad PATH.new refuses the whole load: it may hold the key that sealed the values. */
	put(knew, "junk\n", 5, 0600);
	s = NULL;
	assert_int_equal(rp_secrets_load(kpath, 1, &s, why, sizeof why), -1);
	assert_null(s);
	assert_non_null(strstr(why, knew));
	assert_non_null(strstr(why, "not a rackpilot key file"));
	assert_int_equal(chmod(knew, 0644), 0);
	assert_int_equal(rp_secrets_load(kpath, 0, &s, why, sizeof why), -1);
	assert_non_null(strstr(why, knew));
	assert_int_equal(unlink(knew), 0);

	/* PATH gone but PATH.new there: never make a fresh key over the loss. */
	snprintf(path, sizeof path, "%s/lost.key", sdir);
	{
		char lostnew[200];

		snprintf(lostnew, sizeof lostnew, "%s.new", path);
		put(lostnew, text, len, 0600);
		assert_int_equal(rp_secrets_load(path, 1, &s, why, sizeof why), -1);
		assert_non_null(strstr(why, lostnew));
		assert_false(exists(path));
	}
	/* A PATH.tmp left by a crash is not the key; creation starts over. */
	snprintf(path, sizeof path, "%s/crashed.key.tmp", sdir);
	put(path, "half", 4, 0600);
	snprintf(path, sizeof path, "%s/crashed.key", sdir);
	t = load_ok(path, 1);
	assert_string_not_equal(rp_secrets_key_id(t), id);
	rp_secrets_free(t);
	snprintf(path, sizeof path, "%s/crashed.key.tmp", sdir);
	assert_false(exists(path));

	assert_int_equal(rp_secrets_load(NULL, 1, &s, why, sizeof why), -1);
	rp_secrets_free(NULL);
	free(text);
}

static void
test_secret_seal_open(void **state)
{
	static const char pw[] = "correct-horse-battery-staple";
	unsigned char bin[300], big[RP_SECRET_MAX + 1];
	char long_pw[256], *a, *b, *c, *bad, id[RP_SECRET_KEY_ID_BUF], small[8];
	struct rp_secrets *s;
	size_t i, hdr;

	(void)state;
	s = load_ok(kpath, 1);
	hdr = strlen("rpsec1:") + 16 + 1;

	/* Empty, a 255-byte password, binary with NULs. */
	a = seal_ok(s, "", 0);
	opens_to(s, a, "", 0);
	free(a);
	a = seal_ok(s, NULL, 0);
	opens_to(s, a, "", 0);
	free(a);
	memset(long_pw, 'p', 255);
	long_pw[255] = '\0';
	a = seal_ok(s, long_pw, 255);
	opens_to(s, a, long_pw, 255);
	free(a);
	for (i = 0; i < sizeof bin; i++)
		bin[i] = (unsigned char)(i * 7);
	a = seal_ok(s, bin, sizeof bin);
	opens_to(s, a, bin, sizeof bin);
	free(a);
	memset(big, 0x5a, sizeof big);
	a = seal_ok(s, big, RP_SECRET_MAX);
	opens_to(s, a, big, RP_SECRET_MAX);
	free(a);
	a = NULL;
	errno = 0;
	assert_int_equal(rp_secrets_seal(s, big, RP_SECRET_MAX + 1, &a), -1);
	assert_int_equal(errno, EINVAL);
	assert_null(a);

	/* The form; the same plaintext twice: different nonces, different strings. */
	a = seal_ok(s, pw, strlen(pw));
	b = seal_ok(s, pw, strlen(pw));
	assert_string_not_equal(a, b);
	assert_memory_not_equal(a + hdr, b + hdr, 32); /* the nonce's 24 bytes */
	assert_true(rp_secrets_is_sealed(a));
	assert_int_equal(strncmp(a, "rpsec1:", 7), 0);
	assert_memory_equal(a + 7, rp_secrets_key_id(s), 16);
	assert_int_equal(a[7 + 16], ':');
	assert_int_equal(
	        strspn(a + hdr, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
	        strlen(a + hdr));
	assert_null(strstr(a, pw));
	assert_null(strstr(a, "horse"));
	assert_int_equal(rp_secrets_sealed_key_id(a, id, sizeof id), 0);
	assert_string_equal(id, rp_secrets_key_id(s));
	assert_int_equal(rp_secrets_sealed_key_id(a, small, sizeof small), -1);
	opens_to(s, a, pw, strlen(pw));
	opens_to(s, b, pw, strlen(pw));

	/* Every byte position of the nonce and ciphertext is authenticated. */
	bad = strdup(a);
	assert_non_null(bad);
	for (i = hdr; bad[i] != '\0'; i++) {
		char was = bad[i];

		/* 'A' and 'Q' differ in the high bits, so the last character stays canonical. */
		bad[i] = was == 'A' ? 'Q' : 'A';
		{
			char *plain = NULL, why[256] = "";
			size_t len = 0;

			assert_int_equal(rp_secrets_open(s, bad, &plain, &len, why, sizeof why),
			                 -1);
			assert_null(plain);
		}
		bad[i] = was;
	}
	bad[hdr] = bad[hdr] == 'A' ? 'Q' : 'A'; /* the nonce */
	open_fails(s, bad, "failed authentication");
	free(bad);
	bad = strdup(a);
	bad[strlen(bad) - 5] = bad[strlen(bad) - 5] == 'A' ? 'Q' : 'A'; /* the tag */
	open_fails(s, bad, "failed authentication");
	free(bad);

	/* Another key id: unknown, and the reason names both. */
	bad = strdup(a);
	bad[7] = bad[7] == '0' ? '1' : '0';
	open_fails(s, bad, "sealed under key");
	open_fails(s, bad, rp_secrets_key_id(s));
	{
		char other[17];

		memcpy(other, bad + 7, 16);
		other[16] = '\0';
		open_fails(s, bad, other);
	}
	free(bad);

	/* Malformed: truncated, extended, no prefix, bad id, bad base64. */
	bad = strdup(a);
	bad[hdr + 20] = '\0';
	open_fails(s, bad, "wrong length");
	free(bad);
	assert_int_equal(asprintf(&bad, "%sAA", a), (int)strlen(a) + 2);
	open_fails(s, bad, "");
	free(bad);
	open_fails(s, pw, "not a sealed secret");
	open_fails(s, "", "not a sealed secret");
	open_fails(s, "rpsec1:", "not a sealed secret");
	open_fails(s, "rpsec1:0123456789ABCDEF:AAAA", "not a sealed secret");
	open_fails(s, "rpsec1:0123456789abcde:AAAA", "not a sealed secret");
	open_fails(s, NULL, "not a sealed secret");
	bad = strdup(a);
	bad[hdr + 3] = '*';
	open_fails(s, bad, "base64url");
	free(bad);
	assert_false(rp_secrets_is_sealed(pw));
	assert_false(rp_secrets_is_sealed(NULL));
	assert_false(rp_secrets_is_sealed("rpsec"));
	assert_int_equal(rp_secrets_sealed_key_id(pw, id, sizeof id), -1);
	assert_int_equal(rp_secrets_sealed_key_id("rpsec1:xyz", id, sizeof id), -1);

	/* Sealed under another key file: refused, naming both ids. */
	{
		char other[160];
		struct rp_secrets *o;

		snprintf(other, sizeof other, "%s/other.key", sdir);
		o = load_ok(other, 1);
		assert_string_not_equal(rp_secrets_key_id(o), rp_secrets_key_id(s));
		c = seal_ok(o, pw, strlen(pw));
		open_fails(s, c, rp_secrets_key_id(o));
		open_fails(s, c, rp_secrets_key_id(s));
		open_fails(s, c, "restore the key file");
		open_fails(o, a, rp_secrets_key_id(s));
		opens_to(o, c, pw, strlen(pw));
		free(c);
		rp_secrets_free(o);
	}
	rp_secrets_plain_free(NULL, 0);
	free(a);
	free(b);
	rp_secrets_free(s);
}

static void
test_secret_rotation(void **state)
{
	static const char pw[] = "bmc-password-1";
	char old_id[RP_SECRET_KEY_ID_BUF], new_id[RP_SECRET_KEY_ID_BUF], why[512] = "";
	char *old_val, *new_val, *text = NULL;
	struct rp_secrets *s, *t;
	struct stat st;
	size_t len;

	(void)state;
	s = load_ok(kpath, 1);
	snprintf(old_id, sizeof old_id, "%s", rp_secrets_key_id(s));
	old_val = seal_ok(s, pw, strlen(pw));

	/* Nothing to finish or abort yet. */
	assert_int_equal(rp_secrets_rotate_finish(s, why, sizeof why), -1);
	assert_int_equal(rp_secrets_rotate_abort(s, why, sizeof why), -1);

	/* Begin: PATH.new, private; seal uses the new key, open takes both. */
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	assert_int_equal(stat(knew, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_non_null(rp_secrets_next_key_id(s));
	snprintf(new_id, sizeof new_id, "%s", rp_secrets_next_key_id(s));
	assert_string_not_equal(new_id, old_id);
	assert_string_equal(rp_secrets_key_id(s), old_id);
	new_val = seal_ok(s, pw, strlen(pw));
	assert_memory_equal(new_val + 7, new_id, 16);
	opens_to(s, old_val, pw, strlen(pw));
	opens_to(s, new_val, pw, strlen(pw));

	/* Begin again: the same PATH.new, the same next key. */
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	assert_string_equal(rp_secrets_next_key_id(s), new_id);

	/* A value under neither key names all three ids. */
	{
		char other[160], *c;
		struct rp_secrets *o;

		snprintf(other, sizeof other, "%s/other.key", sdir);
		o = load_ok(other, 1);
		c = seal_ok(o, pw, strlen(pw));
		open_fails(s, c, old_id);
		open_fails(s, c, new_id);
		open_fails(s, c, rp_secrets_key_id(o));
		free(c);
		rp_secrets_free(o);
	}

	/* Finish: PATH holds the new key, PATH.new is gone, the old key is no more. */
	assert_int_equal(rp_secrets_rotate_finish(s, why, sizeof why), 0);
	assert_false(exists(knew));
	assert_string_equal(rp_secrets_key_id(s), new_id);
	assert_null(rp_secrets_next_key_id(s));
	opens_to(s, new_val, pw, strlen(pw));
	open_fails(s, old_val, old_id);
	open_fails(s, old_val, "restore the key file");
	free(new_val);
	new_val = seal_ok(s, pw, strlen(pw));
	assert_memory_equal(new_val + 7, new_id, 16);
	assert_int_equal(stat(kpath, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(rp_file_read(kpath, 4096, &text, &len), 0);
	assert_memory_equal(text + 68, new_id, 16);
	free(text);
	t = load_ok(kpath, 0);
	assert_string_equal(rp_secrets_key_id(t), new_id);
	assert_null(rp_secrets_next_key_id(t));
	opens_to(t, new_val, pw, strlen(pw));
	rp_secrets_free(t);
	assert_int_equal(rp_secrets_rotate_finish(s, why, sizeof why), -1);

	/* Abort: PATH.new removed, the current key kept and used again. */
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	assert_true(exists(knew));
	assert_string_not_equal(rp_secrets_next_key_id(s), new_id);
	assert_int_equal(rp_secrets_rotate_abort(s, why, sizeof why), 0);
	assert_false(exists(knew));
	assert_null(rp_secrets_next_key_id(s));
	assert_string_equal(rp_secrets_key_id(s), new_id);
	opens_to(s, new_val, pw, strlen(pw));
	free(old_val);
	old_val = seal_ok(s, pw, strlen(pw));
	assert_memory_equal(old_val + 7, new_id, 16);
	t = load_ok(kpath, 0);
	assert_string_equal(rp_secrets_key_id(t), new_id);
	assert_null(rp_secrets_next_key_id(t));
	rp_secrets_free(t);

	/* PATH.new replaced behind the rotation's back: neither finish nor abort touches it. */
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	{
		char other[160];

		snprintf(other, sizeof other, "%s/third.key", sdir);
		rp_secrets_free(load_ok(other, 1));
		assert_int_equal(rename(other, knew), 0);
	}
	why[0] = '\0';
	assert_int_equal(rp_secrets_rotate_finish(s, why, sizeof why), -1);
	assert_non_null(strstr(why, "not the next key"));
	assert_int_equal(rp_secrets_rotate_abort(s, why, sizeof why), -1);
	assert_true(exists(knew));
	assert_string_equal(rp_secrets_key_id(s), new_id);
	assert_int_equal(unlink(knew), 0);
	assert_int_equal(rp_secrets_rotate_finish(s, why, sizeof why), -1);
	assert_non_null(strstr(why, "has gone"));
	assert_string_equal(rp_secrets_key_id(s), new_id);
	opens_to(s, old_val, pw, strlen(pw));

	free(old_val);
	free(new_val);
	rp_secrets_free(s);
}

/* kill -9 between the steps, simulated by freeing without finish or abort. */
static void
test_secret_interrupted(void **state)
{
	static const char pw[] = "bmc-password-2";
	char old_id[RP_SECRET_KEY_ID_BUF], new_id[RP_SECRET_KEY_ID_BUF], why[512] = "";
	char *old_val, *new_val, *c = NULL;
	struct rp_secrets *s;

	(void)state;
	s = load_ok(kpath, 1);
	snprintf(old_id, sizeof old_id, "%s", rp_secrets_key_id(s));
	old_val = seal_ok(s, pw, strlen(pw));
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	snprintf(new_id, sizeof new_id, "%s", rp_secrets_next_key_id(s));
	new_val = seal_ok(s, pw, strlen(pw));
	rp_secrets_free(s);

	/* The start after the crash: both keys, open takes either, seal waits for a decision. */
	s = load_ok(kpath, 0);
	assert_string_equal(rp_secrets_key_id(s), old_id);
	assert_non_null(rp_secrets_next_key_id(s));
	assert_string_equal(rp_secrets_next_key_id(s), new_id);
	opens_to(s, old_val, pw, strlen(pw));
	opens_to(s, new_val, pw, strlen(pw));
	errno = 0;
	assert_int_equal(rp_secrets_seal(s, pw, strlen(pw), &c), -1);
	assert_int_equal(errno, EBUSY);
	assert_null(c);

	/* The database had not committed: abort; the old key stays, seal works again. */
	assert_int_equal(rp_secrets_rotate_abort(s, why, sizeof why), 0);
	assert_false(exists(knew));
	assert_string_equal(rp_secrets_key_id(s), old_id);
	c = seal_ok(s, pw, strlen(pw));
	assert_memory_equal(c + 7, old_id, 16);
	free(c);
	rp_secrets_free(s);

	/* Again, and this time the re-seal had committed: finish. */
	s = load_ok(kpath, 0);
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	snprintf(new_id, sizeof new_id, "%s", rp_secrets_next_key_id(s));
	free(new_val);
	new_val = seal_ok(s, pw, strlen(pw));
	rp_secrets_free(s);
	s = load_ok(kpath, 1);
	assert_string_equal(rp_secrets_next_key_id(s), new_id);
	assert_int_equal(rp_secrets_rotate_finish(s, why, sizeof why), 0);
	assert_string_equal(rp_secrets_key_id(s), new_id);
	opens_to(s, new_val, pw, strlen(pw));
	open_fails(s, old_val, old_id);
	c = seal_ok(s, pw, strlen(pw));
	free(c);
	rp_secrets_free(s);

	/* Or the rotation itself is run again: begin reuses PATH.new, sealing resumes. */
	s = load_ok(kpath, 0);
	snprintf(old_id, sizeof old_id, "%s", rp_secrets_key_id(s));
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	snprintf(new_id, sizeof new_id, "%s", rp_secrets_next_key_id(s));
	rp_secrets_free(s);
	s = load_ok(kpath, 0);
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	assert_string_equal(rp_secrets_next_key_id(s), new_id);
	c = seal_ok(s, pw, strlen(pw));
	assert_memory_equal(c + 7, new_id, 16);
	assert_int_equal(rp_secrets_rotate_finish(s, why, sizeof why), 0);
	opens_to(s, c, pw, strlen(pw));
	free(c);
	rp_secrets_free(s);

	free(old_val);
	free(new_val);
}

static void
test_secret_derive(void **state)
{
	unsigned char a[RP_SECRET_DERIVE_BYTES], b[RP_SECRET_DERIVE_BYTES];
	unsigned char c[RP_SECRET_DERIVE_BYTES], zero[RP_SECRET_DERIVE_BYTES] = {0};
	char other[160], why[256];
	struct rp_secrets *s, *o;

	(void)state;
	s = load_ok(kpath, 1);
	snprintf(other, sizeof other, "%s/other.key", sdir);
	o = load_ok(other, 1);

	assert_int_equal(rp_secrets_derive(s, "bootstrap-token", "node-1", 6, a), 0);
	assert_int_equal(rp_secrets_derive(s, "bootstrap-token", "node-1", 6, b), 0);
	assert_memory_equal(a, b, sizeof a);
	assert_memory_not_equal(a, zero, sizeof a);
	assert_int_equal(rp_secrets_derive(s, "bootstrap-token", "node-2", 6, c), 0);
	assert_memory_not_equal(a, c, sizeof a);
	assert_int_equal(rp_secrets_derive(s, "other-use", "node-1", 6, c), 0);
	assert_memory_not_equal(a, c, sizeof a);
	assert_int_equal(rp_secrets_derive(o, "bootstrap-token", "node-1", 6, c), 0);
	assert_memory_not_equal(a, c, sizeof a);
	/* The boundary between context and message counts. */
	assert_int_equal(rp_secrets_derive(s, "ab", "c", 1, b), 0);
	assert_int_equal(rp_secrets_derive(s, "a", "bc", 2, c), 0);
	assert_memory_not_equal(b, c, sizeof b);
	assert_int_equal(rp_secrets_derive(s, "ctx", NULL, 0, b), 0);
	assert_int_equal(rp_secrets_derive(s, "ctx", "", 0, c), 0);
	assert_memory_equal(b, c, sizeof b);
	assert_int_equal(rp_secrets_derive(s, "", "x", 1, c), -1);
	assert_int_equal(rp_secrets_derive(s, NULL, "x", 1, c), -1);

	/* The same key loaded again derives the same; a rotation in progress changes nothing,
	 * finishing it does. */
	rp_secrets_free(s);
	s = load_ok(kpath, 0);
	assert_int_equal(rp_secrets_derive(s, "bootstrap-token", "node-1", 6, b), 0);
	assert_memory_equal(a, b, sizeof a);
	assert_int_equal(rp_secrets_rotate_begin(s, why, sizeof why), 0);
	assert_int_equal(rp_secrets_derive(s, "bootstrap-token", "node-1", 6, b), 0);
	assert_memory_equal(a, b, sizeof a);
	assert_int_equal(rp_secrets_rotate_finish(s, why, sizeof why), 0);
	assert_int_equal(rp_secrets_derive(s, "bootstrap-token", "node-1", 6, b), 0);
	assert_memory_not_equal(a, b, sizeof a);

	rp_secrets_free(s);
	rp_secrets_free(o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_uuid),
	        cmocka_unit_test(test_mac),
	        cmocka_unit_test(test_names_hosts),
	        cmocka_unit_test(test_time),
	        cmocka_unit_test(test_b64url_token_sha),
	        cmocka_unit_test(test_buf),
	        cmocka_unit_test(test_buf_cap),
	        cmocka_unit_test(test_vline),
	        cmocka_unit_test(test_str_lists),
	        cmocka_unit_test(test_sshkey),
	        cmocka_unit_test_setup_teardown(test_secret_keyfile, setup_secret, teardown_secret),
	        cmocka_unit_test_setup_teardown(test_secret_seal_open, setup_secret,
	                                        teardown_secret),
	        cmocka_unit_test_setup_teardown(test_secret_rotation, setup_secret,
	                                        teardown_secret),
	        cmocka_unit_test_setup_teardown(test_secret_interrupted, setup_secret,
	                                        teardown_secret),
	        cmocka_unit_test_setup_teardown(test_secret_derive, setup_secret, teardown_secret),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
