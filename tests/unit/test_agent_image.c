/* agent images: image steps writing raw, gzip (two members too), zstd, xz and qcow2 (v2, v3,
 * compressed with zlib and zstd, small and large clusters, metadata preallocation) made at
 * test time by the real tools from a raw image with holes and zero runs, served over HTTP by a
 * listener of this test, into a file full of garbage, compared byte for byte with the raw
 * image. Truncated and corrupt streams, formats that do not match, qcow2 images the agent
 * refuses, digests that do not match, the size limit, progress, and the plan's new members.
 * A tool missing skips, except under CI=true, where it fails. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"

#define JOB "0b9f5c1e-0000-4000-8000-000000000001"
#define SHA "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

/* 6 MiB and three sectors: not a whole number of clusters of any size the tests use. */
#define RAW_SIZE ((6u << 20) + 1536)

static char tmpdir[256];

static const char *
tpath(const char *rel)
{
	static char buf[8][512];
	static int i;

	i = (i + 1) % 8;
	if ((size_t)snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, rel) >= sizeof buf[i])
		fail_msg("path too long: %s", rel);
	return buf[i];
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Run a shell command in tmpdir; its exit status. */
static int
sh(const char *fmt, ...)
{
	char cmd[4096];
	size_t n;
	va_list ap;
	int st;

	n = (size_t)snprintf(cmd, sizeof cmd, "cd '%s' && ", tmpdir);
	va_start(ap, fmt);
	vsnprintf(cmd + n, sizeof cmd - n, fmt, ap);
	va_end(ap);
	st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char loopdev[64]; /* attached by test_block_device, "" when none */

static void
loop_detach(void)
{
	if (loopdev[0]) {
		sh("losetup -d %s", loopdev);
		loopdev[0] = '\0';
	}
}

/* ---- The HTTP server ------------------------------------------------------------------- */

/* One connection at a time, GET only, files of tmpdir/www. "/nolen/NAME" answers without a
 * Content-Length (the end is the close), "/cut/NAME" announces all of NAME and sends half. */
static int srv_fd = -1;
static unsigned srv_port;
static pthread_t srv_thread;

static void
send_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		c += w;
		n -= (size_t)w;
	}
}

static void
serve_one(int c)
{
	char req[8192], path[600], head[256], *name, *sp;
	size_t got = 0, len, sent = 0;
	int nolen = 0, cut = 0, fd;
	struct stat st;
	ssize_t r;
	char buf[65536];

	while (got < sizeof req - 1 && (r = recv(c, req + got, sizeof req - 1 - got, 0)) > 0) {
		got += (size_t)r;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[got] = '\0';
	if (strncmp(req, "GET /", 5) != 0 || (sp = strchr(req + 4, ' ')) == NULL)
		return;
	*sp = '\0';
	name = req + 5;
	if (!strncmp(name, "nolen/", 6))
		nolen = 1, name += 6;
	else if (!strncmp(name, "cut/", 4))
		cut = 1, name += 4;
	if ((size_t)snprintf(path, sizeof path, "%s/www/%s", tmpdir, name) >= sizeof path ||
	    strstr(name, "..") || (fd = open(path, O_RDONLY)) < 0) {
		static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
		                         "Connection: close\r\n\r\n";

		send_all(c, nf, sizeof nf - 1);
		return;
	}
	fstat(fd, &st);
	len = (size_t)st.st_size;
	if (nolen)
		snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
	else
		snprintf(head, sizeof head,
		         "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		         len);
	send_all(c, head, strlen(head));
	if (cut)
		len /= 2;
	while (sent < len && (r = read(fd, buf, sizeof buf)) > 0) {
		size_t k = (size_t)r < len - sent ? (size_t)r : len - sent;

		send_all(c, buf, k);
		sent += k;
	}
	close(fd);
}

static void *
serve(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(srv_fd, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break; /* shut down */
		}
		serve_one(c);
		close(c);
	}
	return NULL;
}

static int
server_start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;

	srv_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv_fd < 0 || bind(srv_fd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(srv_fd, 16) < 0 || getsockname(srv_fd, (struct sockaddr *)&a, &al) < 0)
		return -1;
	srv_port = ntohs(a.sin_port);
	return pthread_create(&srv_thread, NULL, serve, NULL) == 0 ? 0 : -1;
}

static int
setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rp-agent-image-test.XXXXXX");
	if (mkdtemp(tmpdir) == NULL || sh("mkdir www") != 0)
		return -1;
	return server_start();
}

static int
teardown(void **state)
{
	(void)state;
	loop_detach(); /* a failed assertion left it attached */
	if (srv_fd >= 0) {
		shutdown(srv_fd, SHUT_RDWR);
		pthread_join(srv_thread, NULL);
		close(srv_fd);
	}
	return sh("cd / && rm -rf '%s'", tmpdir) == 0 ? 0 : -1;
}

/* ---- Fixtures --------------------------------------------------------------------------- */

/* Every tool there, or the test skipped (failed under CI=true). */
static int
tools(const char *names)
{
	char list[256], *save = NULL, *t;

	snprintf(list, sizeof list, "%s", names);
	for (t = strtok_r(list, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (sh("command -v %s > /dev/null 2>&1", t) == 0)
			continue;
		if (getenv("CI") && !strcmp(getenv("CI"), "true"))
			fail_msg("%s is not installed (CI=true: this fails instead of skipping)",
			         t);
		print_message("skipped: %s is not installed\n", t);
		return 0;
	}
	return 1;
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The raw image: a label, noise, text (compressible), runs of written zeros, and holes,
 * placed across cluster edges of every size used. */
static void
make_raw(void)
{
	static const char *words[] = {"rack", "pilot", "node", "boot", "image", "disk", "cloud"};
	static const struct {
		uint64_t off, len;
		char kind; /* n: noise, t: text, z: written zeros */
	} parts[] = {
	        {0, 100000, 'n'},
	        {(1u << 20) - 700, 300000, 't'},
	        {(2u << 20) + 3, 140000, 'z'},
	        {(3u << 20) + 7, 65536 * 2 + 5, 'n'},
	        {(4u << 20) + 4096, 900000, 't'},
	        {(5u << 20) + 600000, 3000, 'n'},
	        {RAW_SIZE - 1000, 1000, 'n'},
	};
	unsigned char *img = calloc(1, RAW_SIZE);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t i, j;
	int fd;

	assert_non_null(img);
	for (i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		unsigned char *p = img + parts[i].off;

		for (j = 0; j < parts[i].len;) {
			uint64_t r = xorshift(&seed);

			if (parts[i].kind == 'z') {
				p[j++] = 0;
			} else if (parts[i].kind == 'n') {
				size_t k;

				for (k = 0; k < 8 && j < parts[i].len; k++, r >>= 8)
					p[j++] = (unsigned char)r;
			} else {
				const char *w = words[r % 7];

				while (*w && j < parts[i].len)
					p[j++] = (unsigned char)*w++;
				if (j < parts[i].len)
					p[j++] = r & 0x100 ? '\n' : ' ';
			}
		}
	}
	/* Not a magic number of any format. */
	memcpy(img, "RPIMAGE1", 8);
	fd = open(tpath("raw.img"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	/* Holes where the image is zero and nothing wrote. */
	for (i = 0; i < RAW_SIZE; i += 65536) {
		size_t k = RAW_SIZE - i < 65536 ? RAW_SIZE - i : 65536, z;

		for (z = 0; z < k && img[i + z] == 0; z++)
			;
		if (z < k)
			assert_int_equal(pwrite(fd, img + i, k, (off_t)i), (ssize_t)k);
	}
	assert_int_equal(ftruncate(fd, RAW_SIZE), 0);
	close(fd);
	free(img);
}

/* The served files, made once: name, format, and how. */
static const struct fixture {
	const char *name, *format, *tools, *cmd;
} fixtures[] = {
        {"raw.img", "raw", "", "cp raw.img www/raw.img"},
        {"img.gz", "gzip", "gzip", "gzip -c raw.img > www/img.gz"},
        {"two.gz", "gzip", "gzip head tail",
         "head -c 2000000 raw.img | gzip -c > a.gz && tail -c +2000001 raw.img | gzip -1 -c > "
         "b.gz && cat a.gz b.gz > www/two.gz"},
        {"img.zst", "zstd", "zstd", "zstd -q -c raw.img > www/img.zst"},
        {"two.zst", "zstd", "zstd head tail",
         "head -c 3000000 raw.img | zstd -q -c > a.zst && tail -c +3000001 raw.img | zstd -q "
         "-c > b.zst && cat a.zst b.zst > www/two.zst"},
        {"img.xz", "xz", "xz", "xz -c raw.img > www/img.xz"},
        {"two.xz", "xz", "xz head tail",
         "head -c 1000000 raw.img | xz -c > a.xz && tail -c +1000001 raw.img | xz -1 -c > "
         "b.xz && cat a.xz b.xz > www/two.xz"},
        {"img.qcow2", "qcow2", "qemu-img",
         "qemu-img convert -f raw -O qcow2 raw.img www/img.qcow2"},
        {"c.qcow2", "qcow2", "qemu-img", "qemu-img convert -c -f raw -O qcow2 raw.img www/c.qcow2"},
        {"v2.qcow2", "qcow2", "qemu-img",
         "qemu-img convert -f raw -O qcow2 -o compat=0.10 raw.img www/v2.qcow2"},
        {"v2c.qcow2", "qcow2", "qemu-img",
         "qemu-img convert -c -f raw -O qcow2 -o compat=0.10 raw.img www/v2c.qcow2"},
        /* Small clusters: many L2 tables, and compressed data before its table. */
        {"c4k.qcow2", "qcow2", "qemu-img",
         "qemu-img convert -c -f raw -O qcow2 -o cluster_size=4096 raw.img www/c4k.qcow2"},
        {"c512.qcow2", "qcow2", "qemu-img",
         "qemu-img convert -c -f raw -O qcow2 -o cluster_size=512 raw.img www/c512.qcow2"},
        {"2m.qcow2", "qcow2", "qemu-img",
         "qemu-img convert -f raw -O qcow2 -o cluster_size=2M raw.img www/2m.qcow2"},
        {"zstd.qcow2", "qcow2", "qemu-img",
         "qemu-img convert -c -f raw -O qcow2 -o compression_type=zstd raw.img "
         "www/zstd.qcow2"},
        {"prealloc.qcow2", "qcow2", "qemu-img",
         "qemu-img convert -f raw -O qcow2 -o preallocation=metadata raw.img "
         "www/prealloc.qcow2"},
};

static int fixtures_made;

/* The raw image and every fixture; 0 when a tool is missing (skipped). */
static int
make_fixtures(void)
{
	size_t i;

	if (fixtures_made)
		return 1;
	if (!tools("gzip zstd xz qemu-img head tail cat"))
		return 0;
	make_raw();
	for (i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
		if (sh("%s", fixtures[i].cmd) != 0)
			fail_msg("making %s: %s", fixtures[i].name, fixtures[i].cmd);
	fixtures_made = 1;
	return 1;
}

static void
sha_of(const char *path, char hex[RP_SHA256_HEX])
{
	assert_int_equal(rp_file_sha256(path, hex, NULL), 0);
}

/* A target of n bytes of garbage (not zero: zeroing shows). */
static void
garbage(const char *path, size_t n)
{
	unsigned char *b = malloc(n ? n : 1);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_non_null(b);
	assert_true(fd >= 0);
	memset(b, 0xa5, n);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	close(fd);
	free(b);
}

/* Byte for byte, all of a and as much of b (which may go on); the offset of the first
 * difference, or -1. */
static long long
differs(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	static unsigned char x[65536], y[65536];
	long long off = 0, at = -1;

	assert_non_null(fa);
	assert_non_null(fb);
	for (;;) {
		size_t na = fread(x, 1, sizeof x, fa), nb = fread(y, 1, sizeof y, fb), i;

		for (i = 0; i < na && i < nb; i++)
			if (x[i] != y[i])
				break;
		if (i < na) {
			at = off + (long long)i;
			break;
		}
		if (na == 0)
			break;
		off += (long long)na;
	}
	fclose(fa);
	fclose(fb);
	return at;
}

/* ---- Running image steps ---------------------------------------------------------------- */

struct seen {
	unsigned calls;
	struct rp_agent_progress last;
};

static void
on_progress(void *arg, const struct rp_agent_progress *p)
{
	struct seen *s = arg;

	s->calls++;
	s->last = *p;
}

/* Run an image step of url (a path of the test server) to dev; extra: more members. */
static struct rp_agent_outcome *
image_step(const char *url, const char *sha, const char *format, const char *dev, const char *extra,
           struct seen *seen)
{
	struct rp_agent_config cfg;
	struct rp_agent_runner r = {.cfg = &cfg, .echo_fd = -1};
	struct rp_agent_plan *p;
	struct rp_agent_outcome *o;
	char text[4096], fmt[64] = "", err[512];

	rp_agent_config_defaults(&cfg);
	snprintf(cfg.url, sizeof cfg.url, "http://127.0.0.1:%u", srv_port);
	snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s/state", tmpdir);
	if (seen) {
		memset(seen, 0, sizeof *seen);
		r.progress = on_progress;
		r.progress_arg = seen;
	}
	if (format)
		snprintf(fmt, sizeof fmt, ", \"format\": \"%s\"", format);
	snprintf(text, sizeof text,
	         "{\"format\": 1, \"job\": \"" JOB "\", \"steps\": [{\"id\": \"os\", \"type\": "
	         "\"image\", \"url\": \"%s\", \"sha256\": \"%s\", \"device\": \"%s\"%s%s}]}",
	         url, sha, dev, fmt, extra ? extra : "");
	p = rp_agent_plan_parse(text, strlen(text), JOB, err, sizeof err);
	if (p == NULL)
		fail_msg("plan: %s", err);
	o = rp_agent_outcome_new(-1);
	assert_non_null(o);
	rp_agent_step_run(&r, &p->steps[0], o);
	rp_agent_plan_free(p);
	return o;
}

static json_int_t
res_int(const struct rp_agent_outcome *o, const char *key)
{
	json_t *v = json_object_get(o->result, key);

	if (!json_is_integer(v))
		fail_msg("result member %s is not an integer", key);
	return json_integer_value(v);
}

static void
test_formats(void **state)
{
	char hex[RP_SHA256_HEX], url[300];
	struct stat st;
	size_t i;

	(void)state;
	if (!make_fixtures())
		skip();
	for (i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
		const struct fixture *f = &fixtures[i];
		struct rp_agent_outcome *o;
		struct seen seen;
		long long at;

		snprintf(url, sizeof url, "www/%s", f->name);
		sha_of(tpath(url), hex);
		/* A file stands for a disk: larger than the image (it keeps its size and what
		 * follows the image), or smaller (it grows to the image's size). */
		garbage(tpath("disk"), i % 2 ? RAW_SIZE + 3000000 : 1000);
		snprintf(url, sizeof url, "/%s", f->name);
		o = image_step(url, hex, i % 3 == 0 && !strcmp(f->format, "raw") ? NULL : f->format,
		               tpath("disk"), NULL, &seen);
		if (!o->succeeded)
			fail_msg("%s: %s", f->name, o->error);
		at = differs(tpath("raw.img"), tpath("disk"));
		if (at >= 0)
			fail_msg("%s: the written image differs from raw.img at %lld", f->name, at);
		assert_int_equal(stat(tpath("disk"), &st), 0);
		assert_int_equal(st.st_size, i % 2 ? RAW_SIZE + 3000000 : RAW_SIZE);
		assert_string_equal(json_string_value(json_object_get(o->result, "format")),
		                    f->format);
		assert_string_equal(json_string_value(json_object_get(o->result, "sha256")), hex);
		snprintf(url, sizeof url, "www/%s", f->name);
		assert_int_equal(stat(tpath(url), &st), 0);
		assert_int_equal(res_int(o, "bytes_read"), st.st_size);
		assert_true(res_int(o, "bytes_written") > 0);
		assert_true(res_int(o, "bytes_written") <= RAW_SIZE);
		assert_true(json_is_number(json_object_get(o->result, "seconds")));
		assert_true(res_int(o, "rate_bps") >= 0);
		if (!strcmp(f->format, "qcow2")) {
			assert_int_equal(res_int(o, "virtual_size"), RAW_SIZE);
			assert_int_equal(res_int(o, "bytes_written") + res_int(o, "bytes_zeroed"),
			                 RAW_SIZE);
		} else {
			assert_int_equal(res_int(o, "bytes_written"), RAW_SIZE);
		}
		/* The last progress is the end: all of it read, and the total known. */
		assert_true(seen.calls >= 1);
		assert_int_equal(seen.last.bytes_read, st.st_size);
		assert_int_equal(seen.last.total, st.st_size);
		assert_int_equal(seen.last.bytes_written, res_int(o, "bytes_written"));
		{
			size_t len;
			char *out = rp_agent_tail_text(&o->tail, &len);

			assert_non_null(out);
			assert_non_null(strstr(out, "sha256 verified"));
			free(out);
		}
		rp_agent_outcome_free(o);
	}
}

/* A server that does not say how long the download is: total is not known. */
static void
test_no_length(void **state)
{
	char hex[RP_SHA256_HEX];
	struct rp_agent_outcome *o;
	struct seen seen;

	(void)state;
	if (!make_fixtures())
		skip();
	sha_of(tpath("www/img.zst"), hex);
	garbage(tpath("disk"), 10);
	o = image_step("/nolen/img.zst", hex, "zstd", tpath("disk"), NULL, &seen);
	if (!o->succeeded)
		fail_msg("%s", o->error);
	assert_int_equal(differs(tpath("raw.img"), tpath("disk")), -1);
	assert_int_equal(seen.last.total, -1);
	rp_agent_outcome_free(o);
}

static void
expect_failure(const char *url, const char *sha_of_file, const char *format, const char *why)
{
	char hex[RP_SHA256_HEX];
	struct rp_agent_outcome *o;

	if (sha_of_file)
		sha_of(tpath(sha_of_file), hex);
	else
		snprintf(hex, sizeof hex, "%s", SHA);
	garbage(tpath("disk"), 4096);
	o = image_step(url, hex, format, tpath("disk"), NULL, NULL);
	if (o->succeeded || strstr(o->error, why) == NULL)
		fail_msg("%s as %s: got '%s', want '%s'", url, format ? format : "raw",
		         o->succeeded ? "success" : o->error, why);
	assert_null(json_object_get(o->result, "bytes_written"));
	rp_agent_outcome_free(o);
}

static uint64_t
be64_at(int fd, uint64_t off)
{
	unsigned char b[8];
	uint64_t v = 0;
	int i;

	assert_int_equal(pread(fd, b, 8, (off_t)off), 8);
	for (i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

/* A copy of src (a compressed qcow2 image of 64 KiB clusters) whose first compressed cluster
 * starts with bytes no deflate stream starts with. */
static void
corrupt_compressed(const char *src, const char *name)
{
	char dst[300];
	uint64_t l1, l2, x = 0;
	int fd, j;

	assert_int_equal(sh("cp www/%s www/%s", src, name), 0);
	snprintf(dst, sizeof dst, "www/%s", name);
	fd = open(tpath(dst), O_RDWR);
	assert_true(fd >= 0);
	l1 = be64_at(fd, 40);
	l2 = be64_at(fd, l1) & 0x00fffffffffffe00ull;
	for (j = 0; j < 8192 && !(x >> 62 & 1); j++)
		x = be64_at(fd, l2 + 8 * (uint64_t)j);
	assert_true(x >> 62 & 1);
	assert_int_equal(
	        pwrite(fd, "\377\377\377\377\377\377\377\377", 8, (off_t)(x & ((1ull << 54) - 1))),
	        8);
	close(fd);
}

/* Cut short or damaged: never a success, and the message says which. The digest given is the
 * bad file's own, so only the decoding can tell. */
static void
test_truncated_corrupt(void **state)
{
	static const struct {
		const char *src, *name, *cmd, *format, *why;
	} cases[] = {
	        {"img.gz", "cut.gz", "head -c 200000", "gzip", "gzip data is truncated"},
	        {"img.zst", "cut.zst", "head -c 200000", "zstd", "zstd data is truncated"},
	        {"img.xz", "cut.xz", "head -c 200000", "xz", "xz data is truncated"},
	        {"two.gz", "cut2.gz", "head -c -10", "gzip", "gzip data is truncated"},
	        {"img.qcow2", "cut.qcow2", "head -c 600000", "qcow2", "qcow2 image is truncated"},
	        {"c.qcow2", "cutc.qcow2", "head -c 300", "qcow2", "qcow2 image is truncated"},
	        {"img.gz", "bad.gz", "FLIP", "gzip", "gzip data is corrupt"},
	        {"img.zst", "bad.zst", "FLIP", "zstd", "zstd data is corrupt"},
	        {"img.xz", "bad.xz", "FLIP", "xz", "xz data is corrupt"},
	        {"c.qcow2", "bad.qcow2", "FLIPQ", "qcow2", "is corrupt"},
	        {"img.gz", "junk.gz", "JUNK", "gzip", "is not gzip"},
	};
	char url[300];
	size_t i;

	(void)state;
	if (!make_fixtures())
		skip();
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (!strcmp(cases[i].cmd, "FLIP"))
			/* Bytes in the middle of the compressed data changed. */
			assert_int_equal(sh("cp www/%s www/%s && printf 'RACKPILOT' | dd of=www/%s "
			                    "bs=1 seek=150000 conv=notrunc status=none",
			                    cases[i].src, cases[i].name, cases[i].name),
			                 0);
		else if (!strcmp(cases[i].cmd, "FLIPQ"))
			corrupt_compressed(cases[i].src, cases[i].name);
		else if (!strcmp(cases[i].cmd, "JUNK"))
			assert_int_equal(sh("cat www/%s > www/%s && printf 'not a gzip member' >> "
			                    "www/%s",
			                    cases[i].src, cases[i].name, cases[i].name),
			                 0);
		else
			assert_int_equal(
			        sh("%s www/%s > www/%s", cases[i].cmd, cases[i].src, cases[i].name),
			        0);
		snprintf(url, sizeof url, "/%s", cases[i].name);
		snprintf(url + 200, 100, "www/%s", cases[i].name);
		expect_failure(url, url + 200, cases[i].format, cases[i].why);
	}
	/* A download cut short by the server: the transfer fails. */
	expect_failure("/cut/img.gz", "www/img.gz", "gzip", "download /cut/img.gz");
}

static void
test_mismatch(void **state)
{
	(void)state;
	if (!make_fixtures())
		skip();
	expect_failure("/img.gz", "www/img.gz", "zstd", "the image is gzip but the step says zstd");
	expect_failure("/img.xz", "www/img.xz", NULL, "the image is xz but the step says raw");
	expect_failure("/img.qcow2", "www/img.qcow2", "raw",
	               "the image is qcow2 but the step says raw");
	expect_failure("/img.zst", "www/img.zst", "qcow2",
	               "the image is zstd but the step says qcow2");
	expect_failure("/raw.img", "www/raw.img", "xz",
	               "the image is not xz: it starts with 52 50 49 4d 41 47 45 31");
	assert_int_equal(sh("printf '' > www/empty"), 0);
	expect_failure("/empty", "www/empty", "gzip", "the download is empty");
	expect_failure("/nothing-here", NULL, "gzip", "HTTP 404");
}

/* A good image with the wrong digest: the step fails and says the device is corrupt. */
static void
test_sha_mismatch(void **state)
{
	(void)state;
	if (!make_fixtures())
		skip();
	expect_failure("/img.gz", NULL, "gzip", "sha256 mismatch");
	expect_failure("/c.qcow2", NULL, "qcow2", "sha256 mismatch");
	expect_failure("/raw.img", NULL, NULL, "now holds a corrupt image");
}

/* What the qcow2 header says is checked before anything is written. */
static void
test_qcow2_refused(void **state)
{
	static const struct {
		const char *name, *cmd, *why;
	} cases[] = {
	        {"backed.qcow2",
	         "qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 www/backed.qcow2",
	         "has a backing file (base.qcow2)"},
	        {"ext.qcow2",
	         "qemu-img convert -f raw -O qcow2 -o extended_l2=on raw.img www/ext.qcow2",
	         "extended L2 entries"},
	        /* crypt_method = 1 (AES) */
	        {"aes.qcow2",
	         "cp www/img.qcow2 www/aes.qcow2 && printf '\\001' | dd of=www/aes.qcow2 "
	         "bs=1 seek=35 conv=notrunc status=none",
	         "encrypted (AES)"},
	        /* cluster_bits = 22 */
	        {"cb.qcow2",
	         "cp www/img.qcow2 www/cb.qcow2 && printf '\\026' | dd of=www/cb.qcow2 "
	         "bs=1 seek=23 conv=notrunc status=none",
	         "cluster_bits 22 is out of range"},
	        /* incompatible feature bit 7 */
	        {"inc.qcow2",
	         "cp www/img.qcow2 www/inc.qcow2 && printf '\\200' | dd of=www/inc.qcow2 "
	         "bs=1 seek=79 conv=notrunc status=none",
	         "incompatible features the agent does not know (0x80)"},
	        /* the corrupt bit */
	        {"bad.qcow2",
	         "cp www/img.qcow2 www/bad.qcow2 && printf '\\002' | dd of=www/bad.qcow2 "
	         "bs=1 seek=79 conv=notrunc status=none",
	         "marked corrupt"},
	        /* an L1 table too small for the virtual size */
	        {"l1.qcow2",
	         "cp www/img.qcow2 www/l1.qcow2 && printf '\\000' | dd of=www/l1.qcow2 "
	         "bs=1 seek=39 conv=notrunc status=none",
	         "its L1 table has 0 entries"},
	        /* version 4 */
	        {"v4.qcow2",
	         "cp www/img.qcow2 www/v4.qcow2 && printf '\\004' | dd of=www/v4.qcow2 "
	         "bs=1 seek=7 conv=notrunc status=none",
	         "the image is not qcow2"},
	};
	char url[300];
	size_t i;

	(void)state;
	if (!make_fixtures())
		skip();
	/* The backing file's name is relative to the image's directory. */
	assert_int_equal(sh("qemu-img create -q -f qcow2 www/base.qcow2 8M"), 0);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (sh("%s", cases[i].cmd) != 0)
			fail_msg("making %s", cases[i].name);
		snprintf(url, sizeof url, "/%s", cases[i].name);
		snprintf(url + 200, 100, "www/%s", cases[i].name);
		expect_failure(url, url + 200, "qcow2", cases[i].why);
		/* Refused at the header: the target is as it was. */
		assert_int_equal(sh("test $(stat -c %%s disk) = 4096 && ! cmp -s -n 4096 disk "
		                    "/dev/zero"),
		                 0);
	}
}

static void
put_be64(int fd, uint64_t off, uint64_t v)
{
	unsigned char b[8];
	int i;

	for (i = 7; i >= 0; i--, v >>= 8)
		b[i] = (unsigned char)v;
	assert_int_equal(pwrite(fd, b, 8, (off_t)off), 8);
}

/* Copy len bytes at from to the end of fd (a whole cluster, 64 KiB); where they went. */
static uint64_t
move_to_end(int fd, uint64_t from, size_t len)
{
	static unsigned char buf[65536];
	struct stat st;
	uint64_t at;

	assert_int_equal(fstat(fd, &st), 0);
	at = ((uint64_t)st.st_size + 65535) & ~65535ull;
	memset(buf, 0, sizeof buf);
	assert_true(len <= sizeof buf);
	assert_int_equal(pread(fd, buf, len, (off_t)from), (ssize_t)len);
	assert_int_equal(pwrite(fd, buf, sizeof buf, (off_t)at), (ssize_t)sizeof buf);
	return at;
}

/* Layouts `qemu-img convert` does not write, made from its output by moving tables to the
 * end: what comes before its table is found among the bytes kept; what was not kept (a table's
 * own bytes) is refused, with the advice to convert. */
static void
test_qcow2_layouts(void **state)
{
	static const char *names[] = {"l1end.qcow2", "l2end.qcow2", "back.qcow2"};
	char hex[RP_SHA256_HEX], url[300];
	struct rp_agent_outcome *o;
	uint64_t l1, l2, at;
	size_t i;
	int fd;

	(void)state;
	if (!make_fixtures())
		skip();
	for (i = 0; i < 3; i++) {
		assert_int_equal(sh("cp www/img.qcow2 www/%s", names[i]), 0);
		snprintf(url, sizeof url, "www/%s", names[i]);
		fd = open(tpath(url), O_RDWR);
		assert_true(fd >= 0);
		l1 = be64_at(fd, 40);
		if (i == 0) {
			/* The L1 table last: every L2 table and cluster comes before it. */
			at = move_to_end(fd, l1, 8);
			put_be64(fd, 40, at);
		} else {
			/* The L2 table last: its clusters come before it. */
			l2 = be64_at(fd, l1) & 0x00fffffffffffe00ull;
			at = move_to_end(fd, l2, 65536);
			put_be64(fd, l1, at | (1ull << 63));
			/* A cluster "at" the L1 table: bytes the stream gave to a table. */
			if (i == 2)
				put_be64(fd, at + 8 * 2, l1 | (1ull << 63));
		}
		close(fd);
		sha_of(tpath(url), hex);
		garbage(tpath("disk"), RAW_SIZE);
		snprintf(url, sizeof url, "/%s", names[i]);
		o = image_step(url, hex, "qcow2", tpath("disk"), NULL, NULL);
		if (i < 2) {
			if (!o->succeeded)
				fail_msg("%s: %s", names[i], o->error);
			assert_int_equal(differs(tpath("raw.img"), tpath("disk")), -1);
		} else if (o->succeeded || !strstr(o->error, "needs reading backwards") ||
		           !strstr(o->error, "qemu-img convert -O qcow2")) {
			fail_msg("%s: %s", names[i], o->succeeded ? "succeeded" : o->error);
		}
		rp_agent_outcome_free(o);
	}
}

/* grow, seed or uefi: once the image is written and verified, rp_agent_disk_finish (seed.c)
 * has the disk; whatever it says, the seed's text is never in the step's output. */
static void
test_finish(void **state)
{
	char hex[RP_SHA256_HEX], *out;
	struct rp_agent_outcome *o;
	size_t len;

	(void)state;
	if (!make_fixtures())
		skip();
	sha_of(tpath("www/img.gz"), hex);
	garbage(tpath("disk"), 64u << 20);
	o = image_step("/img.gz", hex, "gzip", tpath("disk"),
	               ", \"grow\": true, \"seed\": {\"meta-data\": \"instance-id: i-1\\n\", "
	               "\"user-data\": \"password: s3cr3t-xyzzy\"}",
	               NULL);
	out = rp_agent_tail_text(&o->tail, &len);
	assert_non_null(out);
	assert_non_null(strstr(out, "finishing"));
	assert_null(strstr(out, "s3cr3t-xyzzy"));
	assert_null(strstr(o->error, "s3cr3t-xyzzy"));
	/* The image itself was written and verified before. */
	assert_non_null(strstr(out, "sha256 verified"));
	assert_int_equal(differs(tpath("raw.img"), tpath("disk")), -1);
	if (o->succeeded)
		assert_string_equal(json_string_value(json_object_get(o->result, "format")),
		                    "gzip");
	else
		assert_true(o->error[0] != '\0');
	free(out);
	rp_agent_outcome_free(o);
}

/* The target's size is a hard limit: a stream is stopped before it writes past it, a qcow2
 * image whose virtual size is larger is refused at its header. (A block device's size comes
 * from BLKGETSIZE64; here the limit is given.) */
static void
test_limit(void **state)
{
	static const struct {
		const char *file;
		enum rp_agent_image_format f;
		const char *why;
	} cases[] = {
	        {"www/raw.img", RP_IMAGE_RAW, "the target holds 4194304 bytes, the image has"},
	        {"www/img.xz", RP_IMAGE_XZ, "the target holds 4194304 bytes, the image has"},
	        {"www/img.qcow2", RP_IMAGE_QCOW2,
	         "virtual size (6292992 bytes) is larger than the target (4194304 bytes)"},
	};
	static unsigned char buf[1 << 16];
	size_t i;

	(void)state;
	if (!make_fixtures())
		skip();
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int in = open(tpath(cases[i].file), O_RDONLY), out;
		struct rp_agent_image *im;
		struct rp_agent_image_stats st;
		ssize_t n;
		int rc = 0;

		garbage(tpath("disk"), 0);
		out = open(tpath("disk"), O_WRONLY);
		assert_true(in >= 0 && out >= 0);
		im = rp_agent_image_new(out, 0, cases[i].f, 4u << 20);
		assert_non_null(im);
		while (rc == 0 && (n = read(in, buf, sizeof buf)) > 0)
			rc = rp_agent_image_feed(im, buf, (size_t)n);
		if (rc == 0)
			rc = rp_agent_image_finish(im);
		assert_int_equal(rc, -1);
		if (strstr(rp_agent_image_error(im), cases[i].why) == NULL)
			fail_msg("%s: got '%s'", cases[i].file, rp_agent_image_error(im));
		rp_agent_image_stats(im, &st);
		assert_true(st.bytes_written <= 4u << 20);
		/* Nothing more is taken after a failure. */
		assert_int_equal(rp_agent_image_feed(im, buf, 1), -1);
		rp_agent_image_free(im);
		close(in);
		close(out);
		assert_int_equal(sh("test $(stat -c %%s disk) -le 4194304"), 0);
	}
	rp_agent_image_free(NULL);
}

/* Streams whose decoded length is a whole number of the writer's buffers (4 MiB), fed in
 * pieces of every size: a decoder that ends exactly where the buffer fills is done. */
static void
test_whole_buffers(void **state)
{
	static const struct {
		const char *cmd;
		enum rp_agent_image_format f;
	} cases[] = {
	        {"gzip -c r8.img > r8.gz", RP_IMAGE_GZIP},
	        {"zstd -q -c r8.img > r8.zst", RP_IMAGE_ZSTD},
	        {"xz -c r8.img > r8.xz", RP_IMAGE_XZ},
	        {"cp r8.img r8.raw", RP_IMAGE_RAW},
	        {"qemu-img convert -f raw -O qcow2 r8.img r8.qcow2", RP_IMAGE_QCOW2},
	};
	static const size_t pieces[] = {1 << 20, 65536, 4093, 1};
	static unsigned char buf[1 << 20];
	size_t i, j;

	(void)state;
	if (!make_fixtures())
		skip();
	assert_int_equal(sh("cat raw.img raw.img | head -c 8388608 > r8.img"), 0);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *name = strrchr(cases[i].cmd, ' ') + 1;

		assert_int_equal(sh("%s", cases[i].cmd), 0);
		for (j = 0; j < sizeof pieces / sizeof pieces[0]; j++) {
			int in, out, rc = 0;
			struct rp_agent_image *im;
			ssize_t n;

			/* A piece of one byte is slow: the small streams only. */
			if (pieces[j] == 1 && cases[i].f != RP_IMAGE_QCOW2 &&
			    cases[i].f != RP_IMAGE_ZSTD)
				continue;
			garbage(tpath("disk"), 100);
			in = open(tpath(name), O_RDONLY);
			out = open(tpath("disk"), O_WRONLY);
			assert_true(in >= 0 && out >= 0);
			im = rp_agent_image_new(out, 0, cases[i].f, 0);
			assert_non_null(im);
			while (rc == 0 && (n = read(in, buf, pieces[j])) > 0)
				rc = rp_agent_image_feed(im, buf, (size_t)n);
			if (rc == 0)
				rc = rp_agent_image_finish(im);
			if (rc != 0)
				fail_msg("%s in pieces of %zu: %s", name, pieces[j],
				         rp_agent_image_error(im));
			rp_agent_image_free(im);
			close(in);
			close(out);
			if (differs(tpath("r8.img"), tpath("disk")) != -1)
				fail_msg("%s in pieces of %zu: differs", name, pieces[j]);
		}
	}
}

/* ---- A block device ---------------------------------------------------------------------- */

/* A loop device over a file of bytes garbage bytes; 0 when there is none to be had here. */
static int
loop_attach(size_t bytes)
{
	char cmd[600];
	FILE *p;

	garbage(tpath("blk"), bytes);
	snprintf(cmd, sizeof cmd, "losetup -f --show '%s' 2>/dev/null", tpath("blk"));
	p = popen(cmd, "r");
	assert_non_null(p);
	if (fgets(loopdev, sizeof loopdev, p) == NULL)
		loopdev[0] = '\0';
	pclose(p);
	loopdev[strcspn(loopdev, "\n")] = '\0';
	return strncmp(loopdev, "/dev/loop", 9) == 0;
}

/* On a real block device: its size (BLKGETSIZE64) is the limit, and qcow2's clusters without
 * data are zeroed with BLKZEROOUT. Needs root and a free loop device; skipped without. */
static void
test_block_device(void **state)
{
	static const struct {
		const char *file, *format, *why;
	} big[] = {
	        {"raw.img", "raw", "the target holds 4194304 bytes, the image has 6292992"},
	        {"img.gz", "gzip",
	         "the decoded image is larger than the target: the target holds "
	         "4194304 bytes"},
	        {"img.qcow2", "qcow2",
	         "virtual size (6292992 bytes) is larger than the target (4194304 bytes)"},
	};
	char hex[RP_SHA256_HEX], url[300];
	struct rp_agent_outcome *o;
	size_t i;

	(void)state;
	if (!make_fixtures())
		skip();
	if (geteuid() != 0 || !tools("losetup")) {
		print_message("skipped: loop devices need root and losetup\n");
		skip();
	}
	if (!loop_attach(7u << 20)) {
		print_message("skipped: no loop device here\n");
		skip();
	}
	for (i = 0; i < 2; i++) {
		const char *name = i ? "c.qcow2" : "img.zst";

		snprintf(url, sizeof url, "www/%s", name);
		sha_of(tpath(url), hex);
		snprintf(url, sizeof url, "/%s", name);
		o = image_step(url, hex, i ? "qcow2" : "zstd", loopdev, NULL, NULL);
		if (!o->succeeded)
			fail_msg("%s to %s: %s", name, loopdev, o->error);
		assert_int_equal(differs(tpath("raw.img"), loopdev), -1);
		if (i)
			assert_true(res_int(o, "bytes_zeroed") > 0);
		rp_agent_outcome_free(o);
	}
	loop_detach();
	/* The device is as long as it was: 7 MiB, the garbage after the image still there. */
	{
		unsigned char tail[1000];
		struct stat st;
		int fd = open(tpath("blk"), O_RDONLY);
		size_t k;

		assert_true(fd >= 0);
		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(st.st_size, 7u << 20);
		assert_int_equal(pread(fd, tail, sizeof tail, st.st_size - 1000), 1000);
		for (k = 0; k < sizeof tail; k++)
			assert_int_equal(tail[k], 0xa5);
		close(fd);
	}

	if (!loop_attach(4u << 20))
		fail_msg("no second loop device");
	for (i = 0; i < sizeof big / sizeof big[0]; i++) {
		snprintf(url, sizeof url, "www/%s", big[i].file);
		sha_of(tpath(url), hex);
		snprintf(url, sizeof url, "/%s", big[i].file);
		o = image_step(url, hex, big[i].format, loopdev, NULL, NULL);
		if (o->succeeded || strstr(o->error, big[i].why) == NULL)
			fail_msg("%s to %s: got '%s', want '%s'", big[i].file, loopdev,
			         o->succeeded ? "success" : o->error, big[i].why);
		rp_agent_outcome_free(o);
	}
	loop_detach();
}

/* ---- Plans and bodies --------------------------------------------------------------------- */

static struct rp_agent_plan *
parse_image(const char *extra, char *err, size_t errlen)
{
	char text[8192];

	snprintf(text, sizeof text,
	         "{\"format\": 1, \"job\": \"" JOB "\", \"steps\": [{\"id\": \"os\", \"type\": "
	         "\"image\", \"url\": \"/i\", \"sha256\": \"" SHA "\", \"device\": "
	         "\"/dev/sda\"%s}]}",
	         extra);
	return rp_agent_plan_parse(text, strlen(text), JOB, err, errlen);
}

static void
test_plan(void **state)
{
#define MD "\"meta-data\": \"instance-id: x\\n\", \"user-data\": \"#cloud-config\\n\""
	static const char *good[] = {
	        "",
	        ", \"format\": \"raw\"",
	        ", \"format\": \"gzip\"",
	        ", \"format\": \"zstd\"",
	        ", \"format\": \"xz\"",
	        ", \"format\": \"qcow2\", \"grow\": true",
	        ", \"grow\": false",
	        ", \"seed\": {" MD "}",
	        ", \"seed\": {\"meta-data\": \"\", \"user-data\": \"\"}",
	        ", \"seed\": {" MD ", \"network-config\": \"version: 2\\n\", \"vendor-data\": "
	        "\"#cloud-config\\n\", \"label\": \"cidata\"}",
	        ", \"seed\": {" MD ", \"label\": \"CIDATA_0-9a\"}",
	        ", \"uefi\": {}",
	        ", \"uefi\": {\"loader\": \"\\\\EFI\\\\ubuntu\\\\shimx64.efi\", \"label\": "
	        "\"Ubuntu 24.04\"}",
	        ", \"format\": \"qcow2\", \"grow\": true, \"seed\": {" MD "}, \"uefi\": "
	        "{\"label\": \"os\"}",
	};
	static const struct {
		const char *extra, *why;
	} bad[] = {
	        {", \"format\": \"bzip2\"", "format must be one of: raw, gzip, zstd, xz, qcow2"},
	        {", \"format\": \"\"", "format must be a non-empty string"},
	        {", \"format\": 1", "format must be a non-empty string"},
	        {", \"grow\": \"yes\"", "grow must be true or false"},
	        {", \"grow\": 1", "grow must be true or false"},
	        {", \"seed\": \"user-data\"", "seed must be an object"},
	        {", \"seed\": {}", "seed needs meta-data"},
	        {", \"seed\": {\"meta-data\": \"x\"}", "seed needs user-data"},
	        {", \"seed\": {" MD ", \"userdata\": \"x\"}", "unknown member 'userdata' in seed"},
	        {", \"seed\": {\"meta-data\": \"\", \"user-data\": 1}",
	         "seed.user-data must be a string of at most 262144 bytes"},
	        {", \"seed\": {" MD ", \"label\": \"\"}", "seed.label must be 1-11 of"},
	        {", \"seed\": {" MD ", \"label\": \"cidata-012345\"}",
	         "seed.label must be 1-11 of"},
	        {", \"seed\": {" MD ", \"label\": \"ci data\"}", "seed.label must be 1-11 of"},
	        {", \"seed\": {\"meta-data\": \"a\\u0000b\", \"user-data\": \"\"}", "not JSON"},
	        {", \"uefi\": true", "uefi must be an object"},
	        {", \"uefi\": {\"entry\": \"x\"}", "unknown member 'entry' in uefi"},
	        {", \"uefi\": {\"label\": \"\"}",
	         "uefi.label must be a non-empty string of printable ASCII of at most 64"},
	        {", \"uefi\": {\"label\": \"tab\\there\"}", "uefi.label must be"},
	        {", \"uefi\": {\"label\": "
	         "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
	         "uefi.label must be"},
	        {", \"uefi\": {\"loader\": 5}", "uefi.loader must be an ESP path"},
	        {", \"uefi\": {\"loader\": \"EFI/ubuntu/shimx64.efi\"}",
	         "uefi.loader must be an ESP path"},
	        {", \"uefi\": {\"loader\": \"\\\\EFI\\\\\\\\x.efi\"}",
	         "uefi.loader must be an ESP path"},
	};
	char err[512], *big, *text;
	struct rp_agent_plan *p;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		p = parse_image(good[i], err, sizeof err);
		if (p == NULL)
			fail_msg("good %zu: %s", i, err);
		rp_agent_plan_free(p);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		p = parse_image(bad[i].extra, err, sizeof err);
		if (p != NULL || strstr(err, bad[i].why) == NULL)
			fail_msg("bad %zu (%s): got '%s', want '%s'", i, bad[i].extra, err,
			         bad[i].why);
	}
	/* Only image steps carry them. */
	for (i = 0; i < 4; i++) {
		static const char *members[] = {"\"format\": \"raw\"", "\"grow\": true",
		                                "\"seed\": {}", "\"uefi\": {}"};
		char t[512];

		snprintf(t, sizeof t,
		         "{\"format\": 1, \"job\": \"" JOB
		         "\", \"steps\": [{\"id\": \"a\", \"type\": "
		         "\"shell\", \"command\": \"x\", %s}]}",
		         members[i]);
		p = rp_agent_plan_parse(t, strlen(t), JOB, err, sizeof err);
		assert_null(p);
		assert_non_null(strstr(err, "unknown member"));
	}
	/* A seed member of RP_AGENT_SEED_MAX bytes passes, one more does not. */
	big = malloc(RP_AGENT_SEED_MAX + 2);
	text = malloc(RP_AGENT_SEED_MAX + 512);
	assert_non_null(big);
	assert_non_null(text);
	for (n = RP_AGENT_SEED_MAX; n <= RP_AGENT_SEED_MAX + 1; n++) {
		memset(big, 'x', n);
		big[n] = '\0';
		snprintf(text, RP_AGENT_SEED_MAX + 512,
		         "{\"format\": 1, \"job\": \"" JOB "\", \"steps\": [{\"id\": \"os\", "
		         "\"type\": \"image\", \"url\": \"/i\", \"sha256\": \"" SHA "\", "
		         "\"device\": \"/dev/sda\", \"seed\": {\"meta-data\": \"\", "
		         "\"user-data\": \"%s\"}}]}",
		         big);
		p = rp_agent_plan_parse(text, strlen(text), JOB, err, sizeof err);
		if (n == RP_AGENT_SEED_MAX) {
			if (p == NULL)
				fail_msg("%s", err);
		} else {
			assert_null(p);
			assert_non_null(strstr(err, "seed.user-data must be a string of at most"));
		}
		rp_agent_plan_free(p);
	}
	free(big);
	free(text);
}

static void
test_formats_named(void **state)
{
	enum rp_agent_image_format f;

	(void)state;
	assert_int_equal(rp_agent_image_format_parse("qcow2", &f), 0);
	assert_int_equal(f, RP_IMAGE_QCOW2);
	assert_int_equal(rp_agent_image_format_parse("raw", &f), 0);
	assert_int_equal(f, RP_IMAGE_RAW);
	assert_int_equal(rp_agent_image_format_parse("gz", &f), -1);
	assert_int_equal(rp_agent_image_format_parse(NULL, &f), -1);
	assert_string_equal(rp_agent_image_format_name(RP_IMAGE_XZ), "xz");
	assert_string_equal(rp_agent_image_format_name(RP_IMAGE__COUNT), "?");
}

static void
test_progress_body(void **state)
{
	struct rp_agent_progress p = {
	        .bytes_read = 10, .bytes_written = 40, .total = 100, .rate_bps = 7};
	json_t *b, *pr;

	(void)state;
	b = rp_agent_progress_body("0b9f5c1e-0000-4000-8000-00000000000a", "boot-1", &p);
	assert_non_null(b);
	assert_string_equal(json_string_value(json_object_get(b, "state")), "running");
	assert_string_equal(json_string_value(json_object_get(b, "run")),
	                    "0b9f5c1e-0000-4000-8000-00000000000a");
	assert_string_equal(json_string_value(json_object_get(b, "boot_id")), "boot-1");
	pr = json_object_get(b, "progress");
	assert_int_equal(json_integer_value(json_object_get(pr, "bytes_read")), 10);
	assert_int_equal(json_integer_value(json_object_get(pr, "bytes_written")), 40);
	assert_int_equal(json_integer_value(json_object_get(pr, "total")), 100);
	assert_int_equal(json_integer_value(json_object_get(pr, "rate_bps")), 7);
	assert_int_equal(json_object_size(pr), 4);
	assert_null(json_object_get(b, "exit_code"));
	json_decref(b);
	p.total = -1;
	b = rp_agent_progress_body("0b9f5c1e-0000-4000-8000-00000000000a", NULL, &p);
	assert_true(json_is_null(json_object_get(json_object_get(b, "progress"), "total")));
	assert_null(json_object_get(b, "boot_id"));
	json_decref(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_formats_named), cmocka_unit_test(test_plan),
	        cmocka_unit_test(test_progress_body), cmocka_unit_test(test_formats),
	        cmocka_unit_test(test_no_length),     cmocka_unit_test(test_truncated_corrupt),
	        cmocka_unit_test(test_mismatch),      cmocka_unit_test(test_sha_mismatch),
	        cmocka_unit_test(test_qcow2_refused), cmocka_unit_test(test_limit),
	        cmocka_unit_test(test_whole_buffers), cmocka_unit_test(test_qcow2_layouts),
	        cmocka_unit_test(test_finish),        cmocka_unit_test(test_block_device),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
