/* util: identifiers, MACs, names, hosts, time, base64url, hashing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
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

/* Fingerprints as `ssh-keygen -lf` printed them for these keys. */
static void
test_sshkey(void **state)
{
	static const struct {
		const char *line, *type, *fp;
	} keys[] = {
	    {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEj+0zhiQEJuyA07cB1MguetKm2VQWyaex2sRJ6gWDus root@node"
	    "7",
	     "ssh-ed25519", "SHA256:Ad7+6NwavcLzMo8yJxTL/a7dIVzCjF5XyZulRQKTXpQ"},
	    {"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDWardLd7nzDTPA/E+KAlu7w+bfISFMYmkD+YtzOyFWI5aTnA/YlX"
	    "J7oDJpyPsJRWj92W5khs4jDQDVk2dXt6awoctPHCkiwAtsuVZ/omFAgFMX4qN9NdSIm0DoSRpuHP6ET/Rb9LXA02c6"
	    "R/whFd+I2U/f4z0BOWtpLO68b1zuhBlPFdTmsLZILVBa2dFtwhmlMCAp9BqNK7iDhLzdQt5Q/i9c2dmIVsbfH22HjS"
	    "uFGMVBUuJguut/dlxqug0nn6BlYm780rGwf6SBuzWlKtoQ+OL9DUec6NjeYvryrubO82Fxi8d35oEPRz5Tw7KqLYkL"
	    "740FEyf4Tfk85gSr/5JB root@vm",
	     "ssh-rsa", "SHA256:+K7GJshHLj8kSJ0JPMgrAzEO5rJPq5ooTIBviDvqB4U"},
	    {"ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBLd3BwpRQT4dEy1zkJ"
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_uuid),  cmocka_unit_test(test_mac),
	    cmocka_unit_test(test_names_hosts), cmocka_unit_test(test_time),
	    cmocka_unit_test(test_b64url_token_sha), cmocka_unit_test(test_buf),
	    cmocka_unit_test(test_sshkey),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
