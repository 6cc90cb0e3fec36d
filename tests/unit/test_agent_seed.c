/* rp_agent_disk_finish (agent/seed.c): disk images made by the real sfdisk (GPT and MBR),
 * copied into larger files as an image is written to a bigger disk, finished, then checked with
 * the real tools: sfdisk --verify/--json (table valid, backup GPT at the disk's end, root grown
 * up to the seed), blkid (vfat, CIDATA), fsck.fat, mtools (the files' exact contents, their
 * long names) and, where loop devices and vfat are there, the kernel's own vfat. Also: refusals
 * (no free slot, extended partitions, no table, too little room, hostile GPT fields), a second
 * run replacing its seed, a non-Linux last partition, a 4096-byte-sector loop device, EFI
 * entries through a stand-in efibootmgr, and a deterministic bit-flipping run over GPT and MBR
 * sectors (for the ASan build). A missing tool skips, or fails under CI=true. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "agent.h"

#define MIB (1024 * 1024)

static char tmpdir[64];
static char saved_path[4400];
static char loopdev[64];  /* a loop device a failed assertion left attached, or "" */
static char efi_dir[128]; /* what rp_agent_efi_dir points at when a test says "EFI" */
static char shm[64];      /* test_fuzz_tables' directory on /dev/shm, or "" */

static const char meta_data[] = "instance-id: node-17\nlocal-hostname: node-17\n";
static const char user_data[] = "#cloud-config\n"
                                "write_files:\n"
                                "  - path: /etc/rackpilot/token\n"
                                "    content: rp-secret-token-7f3a9c\n";
static const char network_config[] = "version: 2\n"
                                     "ethernets:\n"
                                     "  eno1:\n"
                                     "    dhcp4: true\n";

static int
setup(void **state)
{
	const char *p = getenv("PATH");

	(void)state;
	if (p == NULL || strlen(p) > 4000)
		p = "/usr/bin:/bin";
	/* sfdisk, blkid and fsck.fat live in sbin, which a non-login PATH may lack. */
	snprintf(saved_path, sizeof saved_path, "%s%s", p,
	         strstr(p, "/usr/sbin") ? "" : ":/usr/sbin:/sbin");
	setenv("PATH", saved_path, 1);
	setenv("MTOOLS_SKIP_CHECK", "1", 1);
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rp-seed-test.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[400];

	(void)state;
	if (loopdev[0]) {
		snprintf(cmd, sizeof cmd, "losetup -d %s 2>/dev/null", loopdev);
		if (system(cmd) != 0)
			fprintf(stderr, "could not detach %s\n", loopdev);
		loopdev[0] = '\0';
	}
	if (shm[0] && snprintf(cmd, sizeof cmd, "rm -rf '%s'", shm) > 0 && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", shm);
	snprintf(cmd, sizeof cmd, "umount '%s/mnt' 2>/dev/null; rm -rf '%s'", tmpdir, tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Each test starts with a clean PATH and "not EFI". */
static int
before(void **state)
{
	char cmd[400];

	(void)state;
	setenv("PATH", saved_path, 1);
	rp_agent_efi_dir = "/nonexistent/rp-seed-test-efi";
	snprintf(cmd, sizeof cmd, "rm -rf '%s'/* && mkdir -p '%s/mnt'", tmpdir, tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *
tpath(const char *rel)
{
	static char buf[8][512];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, rel);
	return buf[i];
}

static int __attribute__((format(printf, 1, 2))) sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A command's standard output (and error, when the command says 2>&1); *status its exit
 * status. New string. */
static char *__attribute__((format(printf, 2, 3))) capture(int *status, const char *fmt, ...)
{
	char cmd[4096], *buf = NULL;
	size_t len = 0, cap = 0;
	va_list ap;
	FILE *f;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	f = popen(cmd, "r");
	assert_non_null(f);
	for (;;) {
		if (cap - len < 4097) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		size_t n = fread(buf + len, 1, cap - len - 1, f);

		if (n == 0)
			break;
		len += n;
	}
	buf[len] = '\0';
	st = pclose(f);
	if (status)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return buf;
}

static int
in_ci(void)
{
	const char *ci = getenv("CI");

	return ci && strcmp(ci, "true") == 0;
}

/* The real tools these checks need: a skip when one is missing, a failure in CI. */
static int
tools_missing(void)
{
	static const char *const tools[] = {"sfdisk", "blkid", "fsck.fat", "mkfs.fat", "mtype",
	                                    "mdir",   "mcopy", "mmd",      "dd",       NULL};
	int i;

	for (i = 0; tools[i]; i++)
		if (sh("command -v %s >/dev/null 2>&1", tools[i]) != 0) {
			if (in_ci())
				fail_msg("%s is not installed (CI=true; .ci/deps installs "
				         "util-linux, "
				         "dosfstools and mtools)",
				         tools[i]);
			print_message("skipped: %s is not installed\n", tools[i]);
			return 1;
		}
	return 0;
}

#define NEED_TOOLS()                                                                               \
	do {                                                                                       \
		if (tools_missing())                                                               \
			skip();                                                                    \
	} while (0)

/* A file of size MiB holding the table script makes (sfdisk's input). */
static void
make_image(const char *rel, unsigned mib, const char *script)
{
	assert_int_equal(sh("truncate -s %uM '%s' && printf '%s' | sfdisk -q '%s' >/dev/null 2>&1",
	                    mib, tpath(rel), script, tpath(rel)),
	                 0);
}

/* The image rel copied to the start of a zeroed file of mib MiB: a bigger disk. */
static void
make_disk(const char *image, const char *disk, unsigned mib)
{
	assert_int_equal(sh("rm -f '%s' && truncate -s %uM '%s' && dd if='%s' of='%s' bs=1M "
	                    "conv=notrunc status=none",
	                    tpath(disk), mib, tpath(disk), tpath(image), tpath(disk)),
	                 0);
}

static json_t *
seed_step(int grow, const char *user)
{
	json_t *step = json_pack("{s:b, s:{s:s, s:s, s:s}}", "grow", grow, "seed", "meta-data",
	                         meta_data, "user-data", user, "network-config", network_config);

	assert_non_null(step);
	return step;
}

/* rp_agent_disk_finish on tmpdir/disk; the result (new) when rc == want. */
static json_t *
finish(const char *disk, json_t *step, int want, char *err, size_t errlen)
{
	json_t *result = json_object();
	int rc;

	err[0] = '\0';
	rc = rp_agent_disk_finish(tpath(disk), step, result, err, errlen);
	if (rc != want)
		fail_msg("rp_agent_disk_finish: %d (%s)", rc, err);
	if (rc < 0) {
		assert_true(err[0] != '\0');
		/* The seed is secret: no error may carry it. */
		assert_null(strstr(err, "rp-secret-token"));
		assert_int_equal(json_object_size(result), 0);
	}
	return result;
}

static json_int_t
jint(json_t *o, const char *path)
{
	char copy[256], *save = NULL, *k;
	json_t *v = o;

	snprintf(copy, sizeof copy, "%s", path);
	for (k = strtok_r(copy, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
		v = isdigit((unsigned char)k[0]) && json_is_array(v)
		            ? json_array_get(v, (size_t)atoi(k))
		            : json_object_get(v, k);
	if (!json_is_integer(v))
		fail_msg("%s is not an integer", path);
	return json_integer_value(v);
}

static const char *
jstr(json_t *o, const char *path)
{
	char copy[256], *save = NULL, *k;
	json_t *v = o;

	snprintf(copy, sizeof copy, "%s", path);
	for (k = strtok_r(copy, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
		v = isdigit((unsigned char)k[0]) && json_is_array(v)
		            ? json_array_get(v, (size_t)atoi(k))
		            : json_object_get(v, k);
	return json_string_value(v);
}

/* sfdisk --json of a disk, parsed. */
static json_t *
sfdisk_json(const char *dev)
{
	int st;
	char *text = capture(&st, "sfdisk --json '%s' 2>/dev/null", dev);
	json_t *j = json_loads(text, 0, NULL);

	if (st != 0 || j == NULL)
		fail_msg("sfdisk --json %s: %d: %s", dev, st, text);
	free(text);
	return j;
}

/* sfdisk --verify and sfdisk -l say nothing is wrong: no error, no backup GPT header away
 * from the disk's end, no protective MBR of the wrong size. */
static void
assert_table_clean(const char *dev)
{
	int st;
	char *v = capture(&st, "sfdisk --verify '%s' 2>&1", dev), *l;

	if (st != 0 || !strstr(v, "No errors detected") || strstr(v, "mismatch") ||
	    strstr(v, "not on the end"))
		fail_msg("sfdisk --verify %s: %d: %s", dev, st, v);
	free(v);
	l = capture(&st, "sfdisk -l '%s' 2>&1", dev);
	if (st != 0 || strstr(l, "not on the end") || strstr(l, "mismatch") ||
	    strstr(l, "corrupt") || strstr(l, "nvalid") || strstr(l, "rror"))
		fail_msg("sfdisk -l %s: %d: %s", dev, st, l);
	free(l);
}

/* haystack (which may be NULL) contains needle. */
#define assert_contains(haystack, needle)                                                          \
	do {                                                                                       \
		const char *h_ = (haystack);                                                       \
		if (h_ == NULL || strstr(h_, (needle)) == NULL)                                    \
			fail_msg("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", (needle));  \
	} while (0)

/* The seed at byte start (size bytes) of dev: vfat labelled CIDATA per blkid, clean per
 * fsck.fat, holding exactly the files given (mtools), with their long names. */
static void
assert_seed(const char *dev, json_int_t start, json_int_t size, const char *user)
{
	int st;
	char *out;

	out = capture(&st, "blkid -p -o export -O %lld -S %lld '%s'", (long long)start,
	              (long long)size, dev);
	if (st != 0 || !strstr(out, "TYPE=vfat") || !strstr(out, "LABEL=CIDATA"))
		fail_msg("blkid: %d: %s", st, out);
	free(out);

	assert_int_equal(sh("dd if='%s' of='%s' bs=64K iflag=skip_bytes,count_bytes skip=%lld "
	                    "count=%lld status=none",
	                    dev, tpath("seed.img"), (long long)start, (long long)size),
	                 0);
	out = capture(&st, "blkid -p -o export '%s'", tpath("seed.img"));
	if (st != 0 || !strstr(out, "LABEL=CIDATA") || !strstr(out, "LABEL_FATBOOT=CIDATA"))
		fail_msg("blkid seed.img: %d: %s", st, out);
	free(out);
	out = capture(&st, "fsck.fat -n '%s' 2>&1", tpath("seed.img"));
	if (st != 0 || strstr(out, "arning") || strstr(out, "nvalid") || strstr(out, "differ") ||
	    strstr(out, "rror") || !strstr(out, " files, "))
		fail_msg("fsck.fat: %d: %s", st, out);
	free(out);

	out = capture(&st, "mtype -i '%s@@%lld' ::meta-data 2>/dev/null", dev, (long long)start);
	assert_int_equal(st, 0);
	assert_string_equal(out, meta_data);
	free(out);
	out = capture(&st, "mtype -i '%s@@%lld' ::user-data 2>/dev/null", dev, (long long)start);
	assert_int_equal(st, 0);
	assert_string_equal(out, user);
	free(out);
	out = capture(&st, "mtype -i '%s@@%lld' ::network-config 2>/dev/null", dev,
	              (long long)start);
	assert_int_equal(st, 0);
	assert_string_equal(out, network_config);
	free(out);
	out = capture(&st, "mdir -i '%s@@%lld' :: 2>&1", dev, (long long)start);
	if (st != 0 || !strstr(out, "meta-data") || !strstr(out, "user-data") ||
	    !strstr(out, "network-config") || !strstr(out, "CIDATA") || !strstr(out, "META-D~1"))
		fail_msg("mdir: %d: %s", st, out);
	free(out);
}

/* The kernel's vfat reads the same files, where loop devices and vfat exist (else says why). */
static void
maybe_mount(const char *dev, json_int_t start, json_int_t size, const char *user)
{
	int st;
	char *out;

	if (geteuid() != 0) {
		print_message("not mounted: not root\n");
		return;
	}
	out = capture(&st, "mount -t vfat -o loop,ro,offset=%lld,sizelimit=%lld '%s' '%s' 2>&1",
	              (long long)start, (long long)size, dev, tpath("mnt"));
	if (st != 0) {
		print_message("not mounted (no loop device or vfat here): %s", out);
		free(out);
		return;
	}
	free(out);
	out = capture(&st, "cat '%s/user-data'", tpath("mnt"));
	assert_string_equal(out, user);
	free(out);
	out = capture(&st, "cat '%s/meta-data'", tpath("mnt"));
	assert_string_equal(out, meta_data);
	free(out);
	assert_int_equal(sh("umount '%s'", tpath("mnt")), 0);
}

/* The "is this EFI" check looks at tmpdir/efi (which stand_in_efibootmgr makes). */
static void
use_efi(void)
{
	snprintf(efi_dir, sizeof efi_dir, "%s/efi", tmpdir);
	rp_agent_efi_dir = efi_dir;
}

static char *
sha(const char *rel)
{
	int st;
	char *out = capture(&st, "sha256sum < '%s'", tpath(rel));

	assert_int_equal(st, 0);
	return out;
}

/* ---- GPT ------------------------------------------------------------------------------ */

#define GPT_SCRIPT "label: gpt\\n,1M,21686148-6449-6E6F-744E-656564454649\\n,16M,U\\n,,L\\n"

static void
test_gpt_seed_and_grow(void **state)
{
	json_t *step, *res, *j;
	char err[1024], *dump;
	json_int_t start, size, root_bytes;

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, GPT_SCRIPT);
	j = sfdisk_json(tpath("img"));
	root_bytes = jint(j, "partitiontable.partitions.2.size") * 512;
	assert_int_equal(jint(j, "partitiontable.partitions.2.start"), 18 * MIB / 512);
	json_decref(j);
	make_disk("img", "disk", 64);
	step = seed_step(1, user_data);
	res = finish("disk", step, 0, err, sizeof err);

	assert_string_equal(jstr(res, "partition_table"), "gpt");
	assert_int_equal(jint(res, "seed.partition"), 4);
	assert_string_equal(jstr(res, "seed.label"), "CIDATA");
	assert_string_equal(jstr(res, "seed.filesystem"), "FAT16");
	start = jint(res, "seed.start_bytes");
	size = jint(res, "seed.size_bytes");
	assert_int_equal(start % MIB, 0);
	assert_true(size >= 8 * MIB);
	/* The seed ends at the last usable sector: 64 MiB less the backup GPT (33 sectors). */
	assert_int_equal(start + size, 64 * MIB - 33 * 512);
	assert_int_equal(jint(res, "grown.partition"), 3);
	assert_int_equal(jint(res, "grown.from_bytes"), root_bytes);
	assert_int_equal(jint(res, "grown.to_bytes"), start - 18 * MIB);
	dump = json_dumps(res, 0);
	assert_null(strstr(dump, "rp-secret-token"));
	free(dump);

	assert_table_clean(tpath("disk"));
	j = sfdisk_json(tpath("disk"));
	assert_int_equal(jint(j, "partitiontable.lastlba"), 64 * MIB / 512 - 34);
	assert_int_equal(json_array_size(json_object_get(json_object_get(j, "partitiontable"),
	                                                 "partitions")),
	                 4);
	assert_int_equal(jint(j, "partitiontable.partitions.3.start") * 512, start);
	assert_int_equal(jint(j, "partitiontable.partitions.3.size") * 512, size);
	assert_string_equal(jstr(j, "partitiontable.partitions.3.type"),
	                    "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7");
	assert_string_equal(jstr(j, "partitiontable.partitions.3.name"), "cidata");
	/* The root ends just before the seed; the others are as sfdisk made them. */
	assert_int_equal((jint(j, "partitiontable.partitions.2.start") +
	                  jint(j, "partitiontable.partitions.2.size")) *
	                         512,
	                 start);
	assert_int_equal(jint(j, "partitiontable.partitions.0.start"), 2048);
	assert_int_equal(jint(j, "partitiontable.partitions.1.size"), 32768);
	json_decref(j);

	assert_seed(tpath("disk"), start, size, user_data);
	maybe_mount(tpath("disk"), start, size, user_data);
	json_decref(res);
	json_decref(step);
}

/* A second run (a retried step) replaces its seed: same slot, new contents, no fifth
 * partition; the root already reaches the seed. */
static void
test_gpt_rerun_replaces(void **state)
{
	json_t *step, *res, *j;
	char err[1024];
	static const char user2[] = "#cloud-config\nhostname: second-run\n";

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, GPT_SCRIPT);
	make_disk("img", "disk", 64);
	step = seed_step(1, user_data);
	json_decref(finish("disk", step, 0, err, sizeof err));
	json_decref(step);

	step = seed_step(1, user2);
	res = finish("disk", step, 0, err, sizeof err);
	assert_int_equal(jint(res, "seed.partition"), 4);
	assert_true(json_is_true(json_object_get(json_object_get(res, "seed"), "replaced")));
	assert_contains(jstr(res, "not_grown"), "already reaches");
	assert_table_clean(tpath("disk"));
	j = sfdisk_json(tpath("disk"));
	assert_int_equal(json_array_size(json_object_get(json_object_get(j, "partitiontable"),
	                                                 "partitions")),
	                 4);
	json_decref(j);
	assert_seed(tpath("disk"), jint(res, "seed.start_bytes"), jint(res, "seed.size_bytes"),
	            user2);
	json_decref(res);
	json_decref(step);

	/* Grow alone afterwards: the seed stays and bounds the root. */
	step = json_pack("{s:b}", "grow", 1);
	res = finish("disk", step, 0, err, sizeof err);
	assert_contains(jstr(res, "not_grown"), "already reaches");
	assert_null(json_object_get(res, "seed"));
	json_decref(res);
	json_decref(step);
	assert_table_clean(tpath("disk"));
}

/* The same disk size as the image: the backup stays, and there is no room for a seed. */
static void
test_gpt_too_small(void **state)
{
	json_t *step, *res;
	char err[1024], *before, *after;

	(void)state;
	NEED_TOOLS();
	make_image("disk", 32, GPT_SCRIPT);
	before = sha("disk");
	step = seed_step(1, user_data);
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "too small for the seed");
	after = sha("disk");
	assert_string_equal(before, after);
	free(before);
	free(after);
	json_decref(res);
	json_decref(step);

	/* Grow alone: sfdisk left the end of the last MiB free, and the root takes it; then
	 * there is nothing more. */
	step = json_pack("{s:b}", "grow", 1);
	res = finish("disk", step, 0, err, sizeof err);
	assert_int_equal(jint(res, "grown.to_bytes"), (32 * MIB - 34 * 512) - 18 * MIB + 512);
	json_decref(res);
	assert_table_clean(tpath("disk"));
	res = finish("disk", step, 0, err, sizeof err);
	assert_contains(jstr(res, "not_grown"), "already reaches");
	json_decref(res);
	json_decref(step);
}

/* grow alone on a bigger disk: the root takes all, the backup moves to the end. */
static void
test_gpt_grow_only(void **state)
{
	json_t *step, *res, *j;
	char err[1024];

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, GPT_SCRIPT);
	make_disk("img", "disk", 48);
	step = json_pack("{s:b}", "grow", 1);
	res = finish("disk", step, 0, err, sizeof err);
	assert_int_equal(jint(res, "grown.partition"), 3);
	assert_int_equal(jint(res, "grown.to_bytes"), (48 * MIB - 34 * 512) - 18 * MIB + 512);
	assert_table_clean(tpath("disk"));
	j = sfdisk_json(tpath("disk"));
	assert_int_equal(jint(j, "partitiontable.partitions.2.start") +
	                         jint(j, "partitiontable.partitions.2.size") - 1,
	                 48 * MIB / 512 - 34);
	json_decref(j);
	json_decref(res);
	json_decref(step);
}

/* The last partition is Microsoft basic data: not grown, and said why. */
static void
test_gpt_not_linux(void **state)
{
	json_t *step, *res;
	char err[1024];

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, "label: gpt\\n,16M,L\\n,,EBD0A0A2-B9E5-4433-87C0-68B6B72699C7\\n");
	make_disk("img", "disk", 64);
	step = seed_step(1, user_data);
	res = finish("disk", step, 0, err, sizeof err);
	assert_string_equal(jstr(res, "not_grown"),
	                    "the last partition (2) is type EBD0A0A2-B9E5-4433-87C0-68B6B72699C7, "
	                    "not a Linux filesystem");
	assert_int_equal(jint(res, "seed.partition"), 3);
	assert_table_clean(tpath("disk"));
	assert_seed(tpath("disk"), jint(res, "seed.start_bytes"), jint(res, "seed.size_bytes"),
	            user_data);
	json_decref(res);
	json_decref(step);
}

/* ---- MBR ------------------------------------------------------------------------------ */

static void
test_mbr_seed_and_grow(void **state)
{
	json_t *step, *res, *j;
	char err[1024];
	json_int_t start, size;

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, "label: dos\\n,8M,e\\n,,83\\n");
	assert_int_equal(
	        sh("mkfs.fat -F 16 -s 1 --offset 2048 '%s' 8192 >/dev/null 2>&1", tpath("img")), 0);
	make_disk("img", "disk", 64);
	step = seed_step(1, user_data);
	res = finish("disk", step, 0, err, sizeof err);
	assert_string_equal(jstr(res, "partition_table"), "mbr");
	assert_int_equal(jint(res, "seed.partition"), 3);
	start = jint(res, "seed.start_bytes");
	size = jint(res, "seed.size_bytes");
	assert_int_equal(start + size, 64 * MIB);
	assert_int_equal(start % MIB, 0);
	assert_int_equal(jint(res, "grown.partition"), 2);
	assert_int_equal(jint(res, "grown.from_bytes"), 23 * MIB);
	assert_int_equal(jint(res, "grown.to_bytes"), start - 9 * MIB);

	assert_table_clean(tpath("disk"));
	j = sfdisk_json(tpath("disk"));
	assert_string_equal(jstr(j, "partitiontable.label"), "dos");
	assert_string_equal(jstr(j, "partitiontable.partitions.2.type"), "c");
	assert_int_equal(jint(j, "partitiontable.partitions.2.start") * 512, start);
	assert_int_equal(jint(j, "partitiontable.partitions.1.start") * 512 +
	                         jint(j, "partitiontable.partitions.1.size") * 512,
	                 start);
	assert_string_equal(jstr(j, "partitiontable.partitions.0.type"), "e");
	json_decref(j);
	assert_seed(tpath("disk"), start, size, user_data);
	maybe_mount(tpath("disk"), start, size, user_data);
	json_decref(res);
	json_decref(step);

	/* Again: the seed is known by its FAT label and replaced in place. */
	step = seed_step(1, user_data);
	res = finish("disk", step, 0, err, sizeof err);
	assert_int_equal(jint(res, "seed.partition"), 3);
	assert_true(json_is_true(json_object_get(json_object_get(res, "seed"), "replaced")));
	assert_table_clean(tpath("disk"));
	json_decref(res);
	json_decref(step);
}

static void
test_mbr_not_linux(void **state)
{
	json_t *step, *res;
	char err[1024];

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, "label: dos\\n,8M,83\\n,8M,c\\n");
	make_disk("img", "disk", 64);
	step = seed_step(1, user_data);
	res = finish("disk", step, 0, err, sizeof err);
	assert_string_equal(jstr(res, "not_grown"),
	                    "the last partition (2) is type 0x0c, not a Linux filesystem");
	assert_int_equal(jint(res, "seed.partition"), 3);
	assert_table_clean(tpath("disk"));
	json_decref(res);
	json_decref(step);
}

static void
test_mbr_refusals(void **state)
{
	json_t *step, *res;
	char err[1024], *before, *after;

	(void)state;
	NEED_TOOLS();
	step = seed_step(1, user_data);

	make_image("img", 32, "label: dos\\n,4M,83\\n,4M,83\\n,4M,83\\n,4M,83\\n");
	make_disk("img", "disk", 64);
	before = sha("disk");
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "no free primary MBR slot");
	after = sha("disk");
	assert_string_equal(before, after);
	free(before);
	free(after);
	json_decref(res);

	make_image("img", 32, "label: dos\\n,4M,83\\n,,E\\n,8M,83\\n");
	make_disk("img", "disk", 64);
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "extended/logical partitions are not supported");
	json_decref(res);

	/* No table at all: zeros, and a bare filesystem. */
	assert_int_equal(sh("truncate -s 64M '%s'", tpath("zero")), 0);
	res = finish("zero", step, -1, err, sizeof err);
	assert_contains(err, "no partition table");
	json_decref(res);
	assert_int_equal(
	        sh("truncate -s 64M '%s' && mkfs.fat '%s' >/dev/null", tpath("fat"), tpath("fat")),
	        0);
	res = finish("fat", step, -1, err, sizeof err);
	assert_contains(err, "no partition table");
	json_decref(res);

	/* Not a block device or a file. */
	res = finish("mnt", step, -1, err, sizeof err);
	assert_contains(err, "neither a block device nor a file");
	json_decref(res);
	json_decref(step);
}

/* ---- the request ---------------------------------------------------------------------- */

static void
test_request_checks(void **state)
{
	json_t *step, *res;
	char err[1024];

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, GPT_SCRIPT);
	make_disk("img", "disk", 64);

	step = json_pack("{s:{s:s, s:s}}", "seed", "meta-data", "x", "network-config", "y");
	res = finish("disk", step, -1, err, sizeof err);
	assert_string_equal(err, "seed.user-data is missing");
	json_decref(res);
	json_decref(step);

	step = json_pack("{s:{s:s, s:s, s:s, s:s}}", "seed", "meta-data", "x", "user-data",
	                 "rp-secret-token", "network-config", "z", "userdata", "oops");
	res = finish("disk", step, -1, err, sizeof err);
	assert_string_equal(err, "seed: unknown member userdata");
	json_decref(res);
	json_decref(step);

	step = seed_step(1, user_data);
	json_object_set_new(json_object_get(step, "seed"), "label", json_string("a b"));
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "seed.label");
	json_decref(res);
	json_decref(step);

	step = json_pack("{s:s}", "grow", "yes");
	res = finish("disk", step, -1, err, sizeof err);
	assert_string_equal(err, "grow must be true or false");
	json_decref(res);
	json_decref(step);

	step = json_pack("{s:{s:s}}", "uefi", "loader", "EFI/debian/shimx64.efi");
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "uefi.loader must be");
	json_decref(res);
	json_decref(step);

	/* Nothing asked: nothing done, nothing said. */
	step = json_pack("{s:b}", "grow", 0);
	res = finish("disk", step, 0, err, sizeof err);
	assert_int_equal(json_object_size(res), 0);
	json_decref(res);
	json_decref(step);

	/* A label of the operator's, vendor-data, and no network-config (cloud-init then
	 * uses DHCP). */
	step = seed_step(0, user_data);
	json_object_del(json_object_get(step, "seed"), "network-config");
	json_object_set_new(json_object_get(step, "seed"), "label", json_string("cidata"));
	json_object_set_new(json_object_get(step, "seed"), "vendor-data",
	                    json_string("#cloud-config\n"));
	res = finish("disk", step, 0, err, sizeof err);
	assert_null(json_object_get(res, "grown"));
	assert_null(json_object_get(res, "not_grown"));
	{
		int st;
		char *out = capture(&st, "mtype -i '%s@@%lld' ::vendor-data", tpath("disk"),
		                    (long long)jint(res, "seed.start_bytes"));

		assert_string_equal(out, "#cloud-config\n");
		free(out);
		out = capture(&st, "mdir -i '%s@@%lld' :: 2>&1", tpath("disk"),
		              (long long)jint(res, "seed.start_bytes"));
		assert_contains(out, "vendor-data");
		assert_null(strstr(out, "network-config"));
		free(out);
	}
	json_decref(res);
	json_decref(step);
}

/* ---- hostile GPTs --------------------------------------------------------------------- */

static void
put32le(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static uint32_t
get32le(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Sectors 0-33 of a 512-byte-sector GPT disk, in and out. */
static void
head_io(const char *rel, unsigned char *buf, int write)
{
	int fd = open(tpath(rel), write ? O_WRONLY : O_RDONLY);

	assert_true(fd >= 0);
	if (write)
		assert_int_equal(pwrite(fd, buf, 34 * 512, 0), 34 * 512);
	else
		assert_int_equal(pread(fd, buf, 34 * 512, 0), 34 * 512);
	close(fd);
}

/* The header's and (when entries) the entry array's CRCs made right again. */
static void
fix_crcs(unsigned char *head, int entries)
{
	unsigned char *h = head + 512;
	uint32_t hsize = get32le(h + 12), n = get32le(h + 80), es = get32le(h + 84);

	if (entries && (uint64_t)n * es <= 32 * 512)
		put32le(h + 88, (uint32_t)crc32(0, head + 1024, n * es));
	if (hsize >= 92 && hsize <= 512) {
		put32le(h + 16, 0);
		put32le(h + 16, (uint32_t)crc32(0, h, hsize));
	}
}

static void
test_gpt_hostile(void **state)
{
	static const struct {
		unsigned off, width; /* into the header sector; width 4 or 8 */
		uint64_t value;
		int fix;
		const char *says;
	} cases[] = {
	        {80, 4, 0xFFFFFFFFu, 1, "entry array"},            /* entry count */
	        {84, 4, 0x80000000u, 1, "entry array"},            /* entry size */
	        {84, 4, 100, 1, "entry array"},                    /* entry size below 128 */
	        {84, 4, 129, 1, "entry array"},                    /* not a power of two */
	        {80, 4, 0, 1, "entry array"},                      /* no entries */
	        {12, 4, 0x7FFFFFFF, 0, "header size"},             /* header size */
	        {12, 4, 91, 0, "header size"},                     /* too short */
	        {16, 4, 0x12345678, 0, "checksum"},                /* header CRC wrong */
	        {88, 4, 0x12345678, 2, "checksum"},                /* entries CRC wrong */
	        {72, 8, 0xFFFFFFFFFFFFFFF0ull, 1, "inconsistent"}, /* entry array LBA */
	        {72, 8, 1, 1, "inconsistent"},                     /* entries over the header */
	        {32, 8, 0xFFFFFFFFFFFFFFFFull, 1, "larger than the device"}, /* alternate LBA */
	        {40, 8, 0, 1, "inconsistent"}, /* first usable before the array */
	        {48, 8, 0xFFFFFFFFFFFFFF00ull, 1, "inconsistent"}, /* last usable past alt */
	        {24, 8, 7, 1, "LBA 1"},                            /* my LBA */
	};
	unsigned char pristine[34 * 512], head[34 * 512];
	json_t *step, *res;
	char err[1024];
	size_t i;

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, GPT_SCRIPT);
	make_disk("img", "disk", 64);
	head_io("disk", pristine, 0);
	step = seed_step(1, user_data);
	for (i = 0; i < sizeof cases / sizeof *cases; i++) {
		unsigned char *h = head + 512;

		memcpy(head, pristine, sizeof head);
		if (cases[i].width == 4)
			put32le(h + cases[i].off, (uint32_t)cases[i].value);
		else {
			put32le(h + cases[i].off, (uint32_t)cases[i].value);
			put32le(h + cases[i].off + 4, (uint32_t)(cases[i].value >> 32));
		}
		if (cases[i].fix == 1)
			fix_crcs(head, 0);
		if (cases[i].fix == 2) {
			put32le(h + 16, 0);
			put32le(h + 16, (uint32_t)crc32(0, h, get32le(h + 12)));
		}
		head_io("disk", head, 1);
		res = finish("disk", step, -1, err, sizeof err);
		if (!strstr(err, cases[i].says))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err, cases[i].says);
		json_decref(res);
	}

	/* A partition past the usable space, CRCs right. */
	memcpy(head, pristine, sizeof head);
	put32le(head + 1024 + 2 * 128 + 40, 0x7FFFFFFF);
	fix_crcs(head, 1);
	head_io("disk", head, 1);
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "outside the usable space");
	json_decref(res);

	/* Overlapping partitions. */
	memcpy(head, pristine, sizeof head);
	put32le(head + 1024 + 2 * 128 + 32, 5000);
	fix_crcs(head, 1);
	head_io("disk", head, 1);
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "overlap");
	json_decref(res);

	/* A table the image made for a bigger disk than this one. */
	make_image("big", 64, GPT_SCRIPT);
	assert_int_equal(sh("truncate -s 32M '%s'", tpath("big")), 0);
	res = finish("big", step, -1, err, sizeof err);
	assert_contains(err, "larger than the device");
	json_decref(res);
	json_decref(step);
}

/* Deterministic random damage to GPT headers, entry arrays and MBRs (CRCs sometimes made
 * right again, so that the checks behind them run too): never a crash or an out-of-bounds
 * read (ASan), always an answer with a reason. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t
rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void
test_fuzz_tables(void **state)
{
	unsigned char pristine[2][34 * 512], head[34 * 512];
	static const uint64_t extremes[] = {
	        0, 1, 2, 33, 34, 127, 128, 0x7FFFFFFF, 0xFFFFFFFF, 0x100000000, 1ull << 63, ~0ull};
	static const unsigned fields[] = {12, 16, 24, 32, 40, 48, 72, 80, 84, 88};
	json_t *step, *res;
	char err[1024];
	int i, ok = 0, refused = 0;

	(void)state;
	NEED_TOOLS();
	/* Small disks keep the iterations cheap, and on tmpfs (/dev/shm) each accepted one's
	 * fsync costs nothing; they are linked into tmpdir for tpath(). */
	make_image("img", 4, "label: gpt\\n,1M,U\\n,,L\\n");
	make_disk("img", "gpt", 16);
	head_io("gpt", pristine[0], 0);
	make_image("img", 4, "label: dos\\n,1M,ef\\n,,83\\n");
	make_disk("img", "mbr", 16);
	head_io("mbr", pristine[1], 0);
	snprintf(shm, sizeof shm, "/dev/shm/rp-seed-fuzz.XXXXXX");
	if (mkdtemp(shm) != NULL) {
		if (sh("mv '%s' '%s' '%s' && ln -s '%s/gpt' '%s' && ln -s '%s/mbr' '%s'",
		       tpath("gpt"), tpath("mbr"), shm, shm, tpath("gpt"), shm, tpath("mbr")) != 0)
			fail_msg("cannot move the fuzz disks to %s", shm);
	} else {
		shm[0] = '\0';
	}
	step = seed_step(1, user_data);
	for (i = 0; i < 3000; i++) {
		int kind = (int)(rng() % 6), mbr = kind == 5, k, n;
		unsigned char *h = head + 512;

		memcpy(head, pristine[mbr], sizeof head);
		switch (kind) {
		case 0: /* bits anywhere in the header, CRC left wrong */
		case 1: /* the same, CRC made right */
			n = 1 + (int)(rng() % 8);
			for (k = 0; k < n; k++)
				h[rng() % 92] ^= (unsigned char)(1u << (rng() % 8));
			if (kind == 1)
				fix_crcs(head, 0);
			break;
		case 2: /* bits in the entries, both CRCs right */
			n = 1 + (int)(rng() % 16);
			for (k = 0; k < n; k++)
				head[1024 + rng() % (32 * 512)] ^=
				        (unsigned char)(1u << (rng() % 8));
			fix_crcs(head, 1);
			break;
		case 3: { /* a field set to an extreme value, CRCs right */
			unsigned f = fields[rng() % (sizeof fields / sizeof *fields)];
			uint64_t v = extremes[rng() % (sizeof extremes / sizeof *extremes)];

			put32le(h + f, (uint32_t)v);
			if (f == 24 || f == 32 || f == 40 || f == 48 || f == 72)
				put32le(h + f + 4, (uint32_t)(v >> 32));
			fix_crcs(head, 1);
			break;
		}
		case 4: /* random bytes in the protective MBR's entries */
			n = 1 + (int)(rng() % 8);
			for (k = 0; k < n; k++)
				head[446 + rng() % 66] = (unsigned char)rng();
			break;
		default: /* an MBR's entries: random bytes */
			n = 1 + (int)(rng() % 8);
			for (k = 0; k < n; k++)
				head[446 + rng() % 64] = (unsigned char)rng();
			break;
		}
		head_io(mbr ? "mbr" : "gpt", head, 1);
		err[0] = '\0';
		res = json_object();
		if (rp_agent_disk_finish(tpath(mbr ? "mbr" : "gpt"), step, res, err, sizeof err) ==
		    0) {
			json_int_t s = jint(res, "seed.start_bytes"),
			           z = jint(res, "seed.size_bytes");

			/* Whatever it accepted, it wrote inside the disk. */
			assert_true(s > 0 && z >= 8 * MIB && s + z <= 16 * MIB);
			ok++;
		} else {
			assert_true(err[0] != '\0');
			assert_int_equal(json_object_size(res), 0);
			refused++;
		}
		json_decref(res);
	}
	print_message("fuzz: %d accepted, %d refused\n", ok, refused);
	if (shm[0])
		assert_int_equal(sh("rm -rf '%s'", shm), 0);
	shm[0] = '\0';
	assert_true(ok > 0 && refused > 0);
	json_decref(step);
}

/* ---- 4096-byte sectors on a real block device (a loop device) ------------------------- */

static void
test_loop_4k(void **state)
{
	json_t *step, *res, *j;
	char err[1024], *out;
	int st;
	json_int_t start, size;

	(void)state;
	NEED_TOOLS();
	if (geteuid() != 0) {
		print_message("skipped: loop devices need root\n");
		skip();
	}
	assert_int_equal(sh("truncate -s 32M '%s'", tpath("disk")), 0);
	out = capture(&st, "losetup -b 4096 -P -f --show '%s' 2>/dev/null", tpath("disk"));
	if (st != 0 || strncmp(out, "/dev/loop", 9) != 0) {
		print_message("skipped: no loop device with 4096-byte sectors here\n");
		free(out);
		skip();
	}
	snprintf(loopdev, sizeof loopdev, "%.*s", (int)strcspn(out, "\n"), out);
	free(out);
	assert_int_equal(
	        sh("printf 'label: gpt\\n,16M,U\\n,,L\\n' | sfdisk -q %s >/dev/null 2>&1", loopdev),
	        0);
	assert_int_equal(sh("losetup -d %s", loopdev), 0);
	loopdev[0] = '\0';
	/* The disk is bigger than the image. */
	assert_int_equal(sh("truncate -s 64M '%s'", tpath("disk")), 0);
	out = capture(&st, "losetup -b 4096 -P -f --show '%s'", tpath("disk"));
	assert_int_equal(st, 0);
	snprintf(loopdev, sizeof loopdev, "%.*s", (int)strcspn(out, "\n"), out);
	free(out);

	step = seed_step(1, user_data);
	err[0] = '\0';
	res = json_object();
	if (rp_agent_disk_finish(loopdev, step, res, err, sizeof err) != 0)
		fail_msg("%s: %s", loopdev, err);
	assert_string_equal(jstr(res, "partition_table"), "gpt");
	assert_string_equal(jstr(res, "seed.filesystem"), "FAT12");
	assert_null(json_object_get(res, "reread")); /* BLKRRPART did its work */
	start = jint(res, "seed.start_bytes");
	size = jint(res, "seed.size_bytes");
	/* 4096-byte sectors: 6 for the backup's entries and header. */
	assert_int_equal(start + size, 64 * MIB - 5 * 4096);
	assert_int_equal(jint(res, "grown.to_bytes"), start - 17 * MIB);
	assert_table_clean(loopdev);
	j = sfdisk_json(loopdev);
	assert_int_equal(jint(j, "partitiontable.sectorsize"), 4096);
	assert_int_equal(jint(j, "partitiontable.partitions.2.start") * 4096, start);
	json_decref(j);
	assert_seed(loopdev, start, size, user_data);
	json_decref(res);
	assert_int_equal(sh("losetup -d %s", loopdev), 0);
	loopdev[0] = '\0';

	/* The same disk as a file: its 4096-byte GPT is found at byte 4096, the seed replaced. */
	res = finish("disk", step, 0, err, sizeof err);
	assert_true(json_is_true(json_object_get(json_object_get(res, "seed"), "replaced")));
	assert_int_equal(jint(res, "seed.start_bytes"), start);
	assert_seed(tpath("disk"), start, size, user_data);
	json_decref(res);
	json_decref(step);
}

/* ---- EFI entries ---------------------------------------------------------------------- */

#if defined(__aarch64__)
#define SHIM     "shimaa64.efi"
#define GRUB     "grubaa64.efi"
#define FALLBACK "BOOTAA64.EFI"
#else
#define SHIM     "shimx64.efi"
#define GRUB     "grubx64.efi"
#define FALLBACK "BOOTX64.EFI"
#endif

/* A stand-in efibootmgr on PATH: each call's arguments a line in efi.log. `-v` lists an entry
 * "debian" on the ESP (whose GUID is $ESP_UUID) and one elsewhere; `-c` fails when efi.fail
 * exists, else prints what efibootmgr prints: the new entry first in BootOrder. */
static void
stand_in_efibootmgr(void)
{
	FILE *f;
	char path[600];

	assert_int_equal(sh("mkdir -p '%s' '%s'", tpath("bin"), tpath("efi")), 0);
	snprintf(path, sizeof path, "%s", tpath("bin/efibootmgr"));
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
	        "#!/bin/sh\n"
	        "echo \"$*\" >> '%s'\n"
	        "case \"$1\" in\n"
	        "-v) printf 'BootCurrent: 0001\\nBootOrder: 0001,0003\\n'\n"
	        "    printf 'Boot0001* "
	        "other\\tHD(1,GPT,0a0a0a0a-0000-4000-8000-000000000000,0x800,0x8000)/"
	        "File(\\\\EFI\\\\other\\\\shimx64.efi)\\n'\n"
	        "    printf 'Boot0003* "
	        "debian\\tHD(2,GPT,%%s,0x1000,0x8000)/File(\\\\EFI\\\\debian\\\\shimx64.efi)\\n' "
	        "\"$(echo $ESP_UUID | tr A-Z a-z)\"\n"
	        "    printf 'Boot0005* "
	        "debian\\tHD(1,GPT,0b0b0b0b-0000-4000-8000-000000000000,0x800,0x8000)/"
	        "File(\\\\EFI\\\\debian\\\\shimx64.efi)\\n' ;;\n"
	        "-c) [ -e '%s' ] && { echo 'Could not prepare Boot variable: No space left on "
	        "device' >&2; exit 5; }\n"
	        "    printf 'BootCurrent: 0001\\nBootOrder: 0007,0001,0005\\nBoot0001* "
	        "other\\nBoot0005* debian\\nBoot0007* debian\\n' ;;\n"
	        "esac\n"
	        "exit 0\n",
	        tpath("efi.log"), tpath("efi.fail"));
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
}

/* An ESP (a FAT of bits bits, mib MiB) written at byte offset of image, holding files (paths,
 * space-separated). */
static void
make_esp(const char *image, long long offset, unsigned mib, int bits, const char *files)
{
	assert_int_equal(sh("rm -f '%s' && mkfs.fat -F %d -s 1 -C '%s' %u >/dev/null 2>&1 && "
	                    "echo loader > '%s' && for f in %s; do p=; "
	                    "for c in $(dirname $f | tr / ' '); do p=\"$p/$c\"; "
	                    "mmd -D s -i '%s' \"::$p\" >/dev/null 2>&1; done; "
	                    "mcopy -i '%s' '%s' \"::$f\" || exit 1; done && "
	                    "dd if='%s' of='%s' bs=1M seek=%lld oflag=seek_bytes conv=notrunc "
	                    "status=none",
	                    tpath("esp"), bits, tpath("esp"), mib * 1024, tpath("payload"), files,
	                    tpath("esp"), tpath("esp"), tpath("payload"), tpath("esp"),
	                    tpath(image), offset),
	                 0);
}

static void
test_efi_entry(void **state)
{
	json_t *step, *res, *j;
	char err[1024], *log, *uuid, env[128];
	char want[1024];
	int st;

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, GPT_SCRIPT);
	make_esp("img", 2 * MIB, 16, 16,
	         "EFI/BOOT/" FALLBACK " EFI/BOOT/" GRUB " EFI/debian/" GRUB " EFI/debian/" SHIM);
	make_disk("img", "disk", 64);
	j = sfdisk_json(tpath("disk"));
	uuid = strdup(jstr(j, "partitiontable.partitions.1.uuid"));
	json_decref(j);
	snprintf(env, sizeof env, "%s", uuid);
	setenv("ESP_UUID", env, 1);
	stand_in_efibootmgr();
	use_efi();
	setenv("PATH", tpath("bin"), 1);
	{
		char p[5000];

		snprintf(p, sizeof p, "%s:%s", tpath("bin"), saved_path);
		setenv("PATH", p, 1);
	}

	step = seed_step(1, user_data);
	json_object_set_new(step, "uefi", json_object());
	res = finish("disk", step, 0, err, sizeof err);
	assert_string_equal(jstr(res, "efi.entry"), "Boot0007");
	assert_string_equal(jstr(res, "efi.loader"), "\\EFI\\debian\\" SHIM);
	assert_string_equal(jstr(res, "efi.label"), "debian");
	assert_int_equal(jint(res, "efi.partition"), 2);
	/* Only the entry on this ESP with this label is replaced, not the other disk's. */
	assert_int_equal(json_array_size(json_object_get(json_object_get(res, "efi"), "replaced")),
	                 1);
	assert_string_equal(jstr(res, "efi.replaced.0"), "Boot0003");
	log = capture(&st, "cat '%s'", tpath("efi.log"));
	snprintf(want, sizeof want,
	         "-v\n-b 0003 -B\n-c -d %s -p 2 -L debian -l \\EFI\\debian\\" SHIM "\n",
	         tpath("disk"));
	assert_string_equal(log, want);
	free(log);
	assert_seed(tpath("disk"), jint(res, "seed.start_bytes"), jint(res, "seed.size_bytes"),
	            user_data);
	json_decref(res);
	json_decref(step);

	/* Given loader and label; efibootmgr -c failing fails the step. */
	assert_int_equal(sh("rm -f '%s'", tpath("efi.log")), 0);
	step = json_pack("{s:{s:s, s:s}}", "uefi", "loader", "\\EFI\\BOOT\\" FALLBACK, "label",
	                 "Rack OS");
	res = finish("disk", step, 0, err, sizeof err);
	assert_string_equal(jstr(res, "efi.loader"), "\\EFI\\BOOT\\" FALLBACK);
	assert_string_equal(jstr(res, "efi.label"), "Rack OS");
	assert_null(json_object_get(res, "seed"));
	json_decref(res);
	assert_int_equal(sh("touch '%s'", tpath("efi.fail")), 0);
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "efibootmgr -c failed");
	assert_contains(err, "No space left on device");
	json_decref(res);
	assert_int_equal(sh("rm -f '%s'", tpath("efi.fail")), 0);
	json_decref(step);

	/* A given loader without a label: its vendor directory names the entry. */
	step = json_pack("{s:{s:s}}", "uefi", "loader", "\\EFI\\debian\\" GRUB);
	res = finish("disk", step, 0, err, sizeof err);
	assert_string_equal(jstr(res, "efi.label"), "debian");
	assert_string_equal(jstr(res, "efi.loader"), "\\EFI\\debian\\" GRUB);
	json_decref(res);
	json_decref(step);

	/* A loader that is not on the ESP. */
	step = json_pack("{s:{s:s}}", "uefi", "loader", "\\EFI\\fedora\\" SHIM);
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "is not on the ESP");
	json_decref(res);
	json_decref(step);
	free(uuid);
}

/* Discovery on a FAT32 ESP with only the fallback loader; and one with no loader at all. */
static void
test_efi_discovery(void **state)
{
	json_t *step, *res;
	char err[1024], p[5000];

	(void)state;
	NEED_TOOLS();
	make_image("img", 64, "label: gpt\\n,40M,U\\n,,L\\n");
	make_esp("img", MIB, 40, 32, "EFI/BOOT/" FALLBACK " EFI/tools/shell.efi");
	make_disk("img", "disk", 96);
	setenv("ESP_UUID", "none", 1);
	stand_in_efibootmgr();
	use_efi();
	snprintf(p, sizeof p, "%s:%s", tpath("bin"), saved_path);
	setenv("PATH", p, 1);

	step = json_pack("{s:{}}", "uefi");
	res = finish("disk", step, 0, err, sizeof err);
	assert_string_equal(jstr(res, "efi.loader"), "\\EFI\\BOOT\\" FALLBACK);
	assert_string_equal(jstr(res, "efi.label"), "Linux");
	assert_int_equal(jint(res, "efi.partition"), 1);
	json_decref(res);

	make_image("img", 64, "label: gpt\\n,40M,U\\n,,L\\n");
	make_esp("img", MIB, 40, 32, "EFI/tools/shell.efi");
	make_disk("img", "disk", 96);
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "no boot loader on the ESP");
	json_decref(res);

	/* No ESP at all. */
	make_image("img", 32, "label: gpt\\n,,L\\n");
	make_disk("img", "disk", 64);
	res = finish("disk", step, -1, err, sizeof err);
	assert_contains(err, "no EFI system partition");
	json_decref(res);
	json_decref(step);
}

/* Deterministic random damage to an ESP's boot sector, FATs and directories: the loader
 * search never crashes or reads out of bounds (ASan), and answers either way. */
static void
test_fuzz_esp(void **state)
{
	enum { REGION = 192 * 1024 };
	static unsigned char pristine[REGION], esp[REGION];
	static const unsigned bpb[] = {11, 13, 14, 16, 17, 19, 22, 32, 36, 44};
	json_t *step, *res;
	char err[1024], p[5000];
	int i, k, n, fd, found = 0, refused = 0;

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, GPT_SCRIPT);
	make_esp("img", 2 * MIB, 16, 16, "EFI/BOOT/" FALLBACK " EFI/debian/" SHIM);
	make_disk("img", "disk", 40);
	fd = open(tpath("disk"), O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, pristine, REGION, 2 * MIB), REGION);
	setenv("ESP_UUID", "none", 1);
	stand_in_efibootmgr();
	use_efi();
	snprintf(p, sizeof p, "%s:%s", tpath("bin"), saved_path);
	setenv("PATH", p, 1);
	step = json_pack("{s:{}}", "uefi");
	for (i = 0; i < 600; i++) {
		memcpy(esp, pristine, REGION);
		n = 1 + (int)(rng() % 6);
		switch (rng() % 3) {
		case 0: /* the boot sector */
			for (k = 0; k < n; k++)
				esp[rng() % 512] = (unsigned char)rng();
			break;
		case 1: /* a BPB field at an extreme */
			for (k = 0; k < n; k++) {
				unsigned f = bpb[rng() % (sizeof bpb / sizeof *bpb)];
				uint32_t v = rng() % 2 ? 0xFFFFFFFFu : (uint32_t)(rng() % 4);

				put32le(esp + f, v);
			}
			break;
		default: /* anywhere: FATs, the root directory, the first directories */
			for (k = 0; k < n * 4; k++)
				esp[rng() % REGION] = (unsigned char)rng();
			break;
		}
		assert_int_equal(pwrite(fd, esp, REGION, 2 * MIB), REGION);
		err[0] = '\0';
		res = json_object();
		if (rp_agent_disk_finish(tpath("disk"), step, res, err, sizeof err) == 0) {
			assert_non_null(jstr(res, "efi.loader"));
			found++;
		} else {
			assert_true(err[0] != '\0');
			refused++;
		}
		json_decref(res);
	}
	close(fd);
	print_message("fuzz esp: %d found a loader, %d refused\n", found, refused);
	assert_true(found > 0 && refused > 0);
	json_decref(step);
}

static void
test_efi_legacy_and_missing(void **state)
{
	json_t *step, *res;
	char err[1024], *before, *after;

	(void)state;
	NEED_TOOLS();
	make_image("img", 32, GPT_SCRIPT);
	make_disk("img", "disk", 64);
	stand_in_efibootmgr();

	/* No /sys/firmware/efi: nothing to do for EFI, the rest done. */
	step = seed_step(1, user_data);
	json_object_set_new(step, "uefi", json_object());
	res = finish("disk", step, 0, err, sizeof err);
	assert_string_equal(jstr(res, "efi.skipped"), "legacy boot: no EFI entry needed");
	assert_non_null(json_object_get(res, "seed"));
	json_decref(res);
	assert_int_equal(access(tpath("efi.log"), F_OK), -1);

	/* EFI firmware but no efibootmgr: refused before the disk is touched. */
	make_disk("img", "disk", 64);
	before = sha("disk");
	use_efi();
	setenv("PATH", tpath("empty"), 1);
	res = finish("disk", step, -1, err, sizeof err);
	assert_string_equal(err, "efibootmgr is not installed in the ramdisk");
	setenv("PATH", saved_path, 1);
	after = sha("disk");
	assert_string_equal(before, after);
	free(before);
	free(after);
	json_decref(res);
	json_decref(step);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup(test_gpt_seed_and_grow, before),
	        cmocka_unit_test_setup(test_gpt_rerun_replaces, before),
	        cmocka_unit_test_setup(test_gpt_too_small, before),
	        cmocka_unit_test_setup(test_gpt_grow_only, before),
	        cmocka_unit_test_setup(test_gpt_not_linux, before),
	        cmocka_unit_test_setup(test_mbr_seed_and_grow, before),
	        cmocka_unit_test_setup(test_mbr_not_linux, before),
	        cmocka_unit_test_setup(test_mbr_refusals, before),
	        cmocka_unit_test_setup(test_request_checks, before),
	        cmocka_unit_test_setup(test_gpt_hostile, before),
	        cmocka_unit_test_setup(test_fuzz_tables, before),
	        cmocka_unit_test_setup(test_loop_4k, before),
	        cmocka_unit_test_setup(test_efi_entry, before),
	        cmocka_unit_test_setup(test_efi_discovery, before),
	        cmocka_unit_test_setup(test_fuzz_esp, before),
	        cmocka_unit_test_setup(test_efi_legacy_and_missing, before),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
