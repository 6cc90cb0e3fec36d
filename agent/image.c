/*
 * Images written as they stream in: raw, gzip (any number of members), zstd (of frames), xz
 * (of streams) and qcow2, decoded between the download and the device, with no copy on the
 * node. The download hashes what it receives (download.c); this file sees each piece once and
 * writes in pieces of OUT_CAP.
 *
 * qcow2 is read in one pass. The header gives the L1 table's place, the L1 table the L2
 * tables', each L2 table the places of the clusters it maps. Every place the stream has still
 * to reach waits in a heap ordered by file offset; when the stream gets there, its bytes go to
 * what waits (a table gathered, a run of clusters written at its guest offset, a compressed
 * cluster inflated). QEMU allocates a table before the clusters it maps, so what `qemu-img
 * convert` writes hardly looks back: only compressed data, which QEMU packs into the rest of
 * a cluster begun before the table. For that and for other layouts the last
 * RP_QCOW2_LOOKBEHIND_MAX bytes that no table or plain cluster took are kept, and a reference
 * further back is refused. What no L2 entry gives data (unallocated, zero clusters) is
 * zeroed: BLKZEROOUT, punched holes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include "agent.h"

#define OUT_CAP     (4u << 20) /* bytes per write */
#define ZEROS_CAP   (1u << 20) /* a buffer of zeros, where zeroing must write */
#define MAGIC_LEN   8          /* bytes that tell the formats apart */
#define QHEAD_MIN   512        /* a qcow2 header: its first cluster, of 512 bytes at least */
#define QHEAD_LEN   4096       /* gathered before it is read (a backing file's name is in it) */
#define XZ_MEMLIMIT (1ull << 30)
#define XZ_THREADS  8
/* Places of the file the stream feeds at once (compressed clusters may share a sector). */
#define ACTIVE_MAX 8
#define SEG_MIN    (64u << 10)
#define SEG_MAX    (1u << 20)
#define SEGS_MAX   512

static const char *format_names[] = {
#define RP_AGENT_IMAGE_FORMAT_NAME(name, wire) wire,
        RP_AGENT_IMAGE_FORMATS(RP_AGENT_IMAGE_FORMAT_NAME)
#undef RP_AGENT_IMAGE_FORMAT_NAME
};

const char *
rp_agent_image_format_name(enum rp_agent_image_format f)
{
	return (unsigned)f < RP_IMAGE__COUNT ? format_names[f] : "?";
}

int
rp_agent_image_format_parse(const char *name, enum rp_agent_image_format *f)
{
	int i;

	for (i = 0; name && i < RP_IMAGE__COUNT; i++) {
		if (!strcmp(name, format_names[i])) {
			*f = (enum rp_agent_image_format)i;
			return 0;
		}
	}
	return -1;
}

/* ---- qcow2 state ----------------------------------------------------------------------- */

enum ext_kind { EXT_L1, EXT_L2, EXT_DATA, EXT_COMP };

/* A place in the file the stream has still to reach. */
struct ext {
	uint64_t host;  /* file offset */
	uint64_t guest; /* DATA, COMP: where it goes; L2: the first guest offset it maps */
	uint64_t len;   /* COMP: the most its compressed data may take */
	enum ext_kind kind;
};

/* A place the stream is in. */
struct slot {
	int used;
	struct ext e;
	uint64_t got;       /* bytes of e taken */
	unsigned char *buf; /* L1, L2: the table; COMP: the cluster inflated */
	size_t cap;
	size_t made; /* COMP: bytes inflated */
	int done;    /* COMP: the whole cluster inflated */
	int zinit;
	z_stream z;
	ZSTD_DCtx *zd;
};

/* Bytes no place claimed, kept for a table that comes later and points back. */
struct seg {
	uint64_t host;
	size_t len, cap;
	unsigned char *data;
};

struct qcow {
	unsigned version, cluster_bits, ctype; /* ctype: 0 zlib, 1 zstd */
	uint64_t cluster, vsize, l2_cover;
	uint64_t pos; /* file offset of the next byte */
	int l1_done;
	struct ext *heap;
	size_t nheap, heapcap;
	struct slot slot[ACTIVE_MAX];
	size_t nactive;
	struct seg *segs;
	size_t nseg, kept;
	uint64_t zoff, zlen; /* a run of guest bytes to zero, not yet zeroed */
};

struct rp_agent_image {
	int fd, blk;
	enum rp_agent_image_format fmt;
	uint64_t limit;
	int failed, started;
	char err[768];
	unsigned char head[QHEAD_LEN];
	size_t headlen;
	struct rp_agent_image_stats st;
	unsigned char *out; /* out[0..outlen) goes to outoff */
	size_t outlen;
	uint64_t outoff;
	unsigned char *zeros;
	uint64_t dpos; /* decoded bytes of a stream format */
	int more;      /* the decoder may hold output it could not give (its buffer was full) */
	int zinit, zend;
	unsigned members;
	z_stream z;
	ZSTD_DCtx *zd;
	size_t zleft; /* zstd's hint: 0 at the end of a frame */
	int xinit;
	lzma_stream x;
	struct qcow *q;
};

static int fail(struct rp_agent_image *im, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int
fail(struct rp_agent_image *im, const char *fmt, ...)
{
	va_list ap;

	if (im->failed)
		return -1;
	va_start(ap, fmt);
	vsnprintf(im->err, sizeof im->err, fmt, ap);
	va_end(ap);
	im->failed = 1;
	return -1;
}

static uint64_t
be64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- Writing --------------------------------------------------------------------------- */

static int
pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = pwrite(fd, c, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		c += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int
flush_out(struct rp_agent_image *im)
{
	if (im->outlen == 0)
		return 0;
	if (pwrite_all(im->fd, im->out, im->outlen, im->outoff) < 0)
		return fail(im, "writing %zu bytes at offset %llu: %s", im->outlen,
		            (unsigned long long)im->outoff, strerror(errno));
	im->st.bytes_written += im->outlen;
	im->outlen = 0;
	return 0;
}

/* Where bytes for offset off go in the output buffer, and how many fit; NULL when a write
 * failed. */
static unsigned char *
out_room(struct rp_agent_image *im, uint64_t off, size_t *room)
{
	if (im->outlen && (im->outoff + im->outlen != off || im->outlen == OUT_CAP) &&
	    flush_out(im) < 0)
		return NULL;
	if (im->outlen == 0)
		im->outoff = off;
	*room = OUT_CAP - im->outlen;
	return im->out + im->outlen;
}

/* n bytes put where out_room() said. */
static int
out_commit(struct rp_agent_image *im, size_t n)
{
	uint64_t end = im->outoff + im->outlen + n;

	/* Checked before they reach the device: nothing past its end is ever written. */
	if (im->limit && end > im->limit)
		return fail(im,
		            "the decoded image is larger than the target: the target holds %llu "
		            "bytes, the image has %llu and more",
		            (unsigned long long)im->limit, (unsigned long long)end);
	im->outlen += n;
	return im->outlen == OUT_CAP ? flush_out(im) : 0;
}

static int
emit(struct rp_agent_image *im, uint64_t off, const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n > 0) {
		size_t room, k;
		unsigned char *o = out_room(im, off, &room);

		if (o == NULL)
			return -1;
		k = n < room ? n : room;
		memcpy(o, c, k);
		if (out_commit(im, k) < 0)
			return -1;
		c += k;
		n -= k;
		off += k;
	}
	return 0;
}

static int
write_zeros(struct rp_agent_image *im, uint64_t off, uint64_t len)
{
	if (im->zeros == NULL && (im->zeros = calloc(1, ZEROS_CAP)) == NULL)
		return fail(im, "out of memory");
	while (len > 0) {
		size_t k = len < ZEROS_CAP ? (size_t)len : ZEROS_CAP;

		if (pwrite_all(im->fd, im->zeros, k, off) < 0)
			return fail(im, "zeroing at offset %llu: %s", (unsigned long long)off,
			            strerror(errno));
		off += k;
		len -= k;
	}
	return 0;
}

/* Make [off, off + len) read as zeros: by the target's own means (BLKZEROOUT, a hole) where
 * it has them, else by writing zeros. */
static int
zero_now(struct rp_agent_image *im, uint64_t off, uint64_t len)
{
	if (len == 0)
		return 0;
	if (im->blk) {
		/* Whole pages only: a page shared with data just written stays in the cache. */
		uint64_t a = (off + 4095) & ~4095ull, b = (off + len) & ~4095ull;
		uint64_t r[2] = {a, b - a};

		if (a < b && ioctl(im->fd, BLKZEROOUT, r) == 0) {
			if (write_zeros(im, off, a - off) < 0 ||
			    write_zeros(im, b, off + len - b) < 0)
				return -1;
			goto done;
		}
	} else {
		if (fallocate(im->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		              (off_t)len) == 0)
			goto done;
		if (errno != EOPNOTSUPP && errno != ENOSYS)
			return fail(im, "zeroing %llu bytes at offset %llu: %s",
			            (unsigned long long)len, (unsigned long long)off,
			            strerror(errno));
	}
	if (write_zeros(im, off, len) < 0)
		return -1;
done:
	im->st.bytes_zeroed += len;
	return 0;
}

/* ---- Stream formats -------------------------------------------------------------------- */

/* What the first n bytes say a stream is: a format's name, or NULL when none known. Strict
 * enough that random bytes (a raw image) pass as raw but once in 2^26. */
static const char *
sniff(const unsigned char *b, size_t n)
{
	if (n >= 4 && b[0] == 0x1f && b[1] == 0x8b && b[2] == 8 && !(b[3] & 0xe0))
		return "gzip";
	if (n >= 4 && !memcmp(b, "\x28\xb5\x2f\xfd", 4))
		return "zstd";
	/* A skippable frame (pzstd starts with one). */
	if (n >= 4 && (b[0] & 0xf0) == 0x50 && !memcmp(b + 1, "\x2a\x4d\x18", 3))
		return "zstd";
	if (n >= 6 && !memcmp(b, "\3757zXZ\0", 6))
		return "xz";
	if (n >= 8 && !memcmp(b, "QFI\xfb\0\0\0", 7) && (b[7] == 2 || b[7] == 3))
		return "qcow2";
	if (n >= 4 && !memcmp(b, "BZh", 3) && b[3] >= '1' && b[3] <= '9')
		return "bzip2";
	if (n >= 4 && !memcmp(b, "\x04\x22\x4d\x18", 4))
		return "lz4";
	if (n >= 4 && !memcmp(b, "KDMV", 4))
		return "vmdk";
	if (n >= 8 && !memcmp(b, "vhdxfile", 8))
		return "vhdx";
	return NULL;
}

static int
gzip_feed(struct rp_agent_image *im, const unsigned char *p, size_t n)
{
	im->z.next_in = (Bytef *)p;
	im->z.avail_in = (uInt)n;
	for (;;) {
		size_t room, got;
		unsigned char *o;
		int ret;

		if (im->z.avail_in == 0 && !im->more)
			return 0;
		if (im->zend) {
			/* Another member: `cat a.gz b.gz` is one gzip file. */
			inflateReset(&im->z);
			im->zend = 0;
		}
		if ((o = out_room(im, im->dpos, &room)) == NULL)
			return -1;
		im->z.next_out = o;
		im->z.avail_out = (uInt)room;
		ret = inflate(&im->z, Z_NO_FLUSH);
		got = room - im->z.avail_out;
		im->dpos += got;
		if (got && out_commit(im, got) < 0)
			return -1;
		im->more = im->z.avail_out == 0;
		if (ret == Z_STREAM_END) {
			im->zend = 1;
			im->members++;
			im->more = 0;
		} else if (ret == Z_BUF_ERROR) {
			if (!im->more)
				return 0;
		} else if (ret != Z_OK) {
			if (im->members > 0 && im->z.total_in < 10)
				return fail(im, "what follows gzip member %u is not gzip: %s",
				            im->members, im->z.msg ? im->z.msg : "bad header");
			return fail(im, "the gzip data is corrupt: %s",
			            im->z.msg ? im->z.msg : zError(ret));
		}
	}
}

static int
zstd_feed(struct rp_agent_image *im, const unsigned char *p, size_t n)
{
	ZSTD_inBuffer in = {p, n, 0};

	for (;;) {
		ZSTD_outBuffer ob;
		size_t room, r;
		unsigned char *o;

		if (in.pos == in.size && !im->more)
			return 0;
		if ((o = out_room(im, im->dpos, &room)) == NULL)
			return -1;
		ob.dst = o;
		ob.size = room;
		ob.pos = 0;
		r = ZSTD_decompressStream(im->zd, &ob, &in);
		if (ZSTD_isError(r))
			return fail(im, "the zstd data is corrupt: %s", ZSTD_getErrorName(r));
		im->dpos += ob.pos;
		if (ob.pos && out_commit(im, ob.pos) < 0)
			return -1;
		im->zleft = r;
		/* At a frame's end all is flushed, and a call without input would start the next
		 * frame, which is not there. */
		im->more = r != 0 && ob.pos == ob.size;
	}
}

static int
xz_error(struct rp_agent_image *im, lzma_ret ret)
{
	switch (ret) {
	case LZMA_MEM_ERROR:
		return fail(im, "out of memory decoding xz");
	case LZMA_MEMLIMIT_ERROR:
		return fail(im, "the xz data needs more than the %llu MiB the agent allows",
		            XZ_MEMLIMIT >> 20);
	case LZMA_FORMAT_ERROR:
		return fail(im, "what follows the xz data is not xz");
	case LZMA_OPTIONS_ERROR:
		return fail(im, "the xz data uses options this liblzma does not support");
	case LZMA_BUF_ERROR:
		return fail(im, "the xz data is truncated");
	default:
		return fail(im, "the xz data is corrupt (liblzma error %d)", (int)ret);
	}
}

static int
xz_code(struct rp_agent_image *im, const unsigned char *p, size_t n, lzma_action action)
{
	im->x.next_in = p;
	im->x.avail_in = n;
	for (;;) {
		size_t room, got;
		unsigned char *o;
		lzma_ret ret;

		if (action == LZMA_RUN && im->x.avail_in == 0 && !im->more)
			return 0;
		if ((o = out_room(im, im->dpos, &room)) == NULL)
			return -1;
		im->x.next_out = o;
		im->x.avail_out = room;
		ret = lzma_code(&im->x, action);
		got = room - im->x.avail_out;
		im->dpos += got;
		if (got && out_commit(im, got) < 0)
			return -1;
		im->more = im->x.avail_out == 0;
		if (ret == LZMA_STREAM_END)
			return 0;
		if (ret == LZMA_BUF_ERROR && action == LZMA_RUN)
			return 0;
		if (ret != LZMA_OK)
			return xz_error(im, ret);
	}
}

static int
xz_init(struct rp_agent_image *im)
{
	lzma_stream init = LZMA_STREAM_INIT;
	lzma_ret ret;

	im->x = init;
#if LZMA_VERSION >= 50040002
	{
		/* Blocks decode in parallel where the encoder made several (xz -T). */
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		lzma_mt mt = {
		        .flags = LZMA_CONCATENATED,
		        .threads = cpus < 1            ? 1
		                   : cpus > XZ_THREADS ? XZ_THREADS
		                                       : (uint32_t)cpus,
		        .memlimit_threading = XZ_MEMLIMIT,
		        .memlimit_stop = XZ_MEMLIMIT,
		};

		ret = lzma_stream_decoder_mt(&im->x, &mt);
	}
#else
	ret = lzma_stream_decoder(&im->x, XZ_MEMLIMIT, LZMA_CONCATENATED);
#endif
	if (ret != LZMA_OK)
		return -1;
	im->xinit = 1;
	return 0;
}

/* ---- qcow2 ------------------------------------------------------------------------------ */

#define L1_OFFSET     0x00fffffffffffe00ull
#define L1_RESERVED   0x7f000000000001ffull
#define L2_OFFSET     0x00fffffffffffe00ull
#define L2_RESERVED   0x3f000000000001feull
#define L2_COMPRESSED (1ull << 62)
#define L2_ZERO       1ull
#define MAX_OFFSET    (1ull << 56)

#define HINT "; `qemu-img convert -O qcow2 IN OUT` writes one the agent can stream"

static int
heap_push(struct rp_agent_image *im, const struct ext *e)
{
	struct qcow *q = im->q;
	size_t i;

	if (q->nheap == q->heapcap) {
		size_t cap = q->heapcap ? q->heapcap * 2 : 1024;
		struct ext *h;

		if (q->nheap >= RP_QCOW2_PENDING_MAX)
			return fail(im,
			            "the qcow2 image maps more than %u clusters ahead of the "
			            "stream" HINT,
			            RP_QCOW2_PENDING_MAX);
		if ((h = realloc(q->heap, cap * sizeof *h)) == NULL)
			return fail(im, "out of memory");
		q->heap = h;
		q->heapcap = cap;
	}
	i = q->nheap++;
	while (i > 0 && q->heap[(i - 1) / 2].host > e->host) {
		q->heap[i] = q->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	q->heap[i] = *e;
	return 0;
}

static struct ext
heap_pop(struct qcow *q)
{
	struct ext top = q->heap[0], last = q->heap[--q->nheap];
	size_t i = 0, c;

	while ((c = 2 * i + 1) < q->nheap) {
		if (c + 1 < q->nheap && q->heap[c + 1].host < q->heap[c].host)
			c++;
		if (q->heap[c].host >= last.host)
			break;
		q->heap[i] = q->heap[c];
		i = c;
	}
	if (q->nheap)
		q->heap[i] = last;
	return top;
}

static const char *
kind_name(enum ext_kind k)
{
	return k == EXT_L1 ? "the L1 table" : k == EXT_L2 ? "an L2 table" : "a data cluster";
}

/* Guest bytes [off, off + len) read as zeros: joined to the waiting run when they follow it. */
static int
zero(struct rp_agent_image *im, uint64_t off, uint64_t len)
{
	struct qcow *q = im->q;

	if (off >= q->vsize)
		return 0;
	if (len > q->vsize - off)
		len = q->vsize - off;
	if (q->zlen && q->zoff + q->zlen == off) {
		q->zlen += len;
		return 0;
	}
	if (zero_now(im, q->zoff, q->zlen) < 0)
		return -1;
	q->zoff = off;
	q->zlen = len;
	return 0;
}

static struct slot *
slot_start(struct rp_agent_image *im, const struct ext *e)
{
	struct qcow *q = im->q;
	struct slot *s = NULL;
	size_t i, need;

	for (i = 0; i < ACTIVE_MAX && s == NULL; i++)
		if (!q->slot[i].used)
			s = &q->slot[i];
	if (s == NULL) {
		fail(im,
		     "the qcow2 image has more than %d clusters overlapping at file offset %llu",
		     ACTIVE_MAX, (unsigned long long)e->host);
		return NULL;
	}
	need = e->kind == EXT_L1 || e->kind == EXT_L2 ? (size_t)e->len
	       : e->kind == EXT_COMP                  ? (size_t)q->cluster
	                                              : 0;
	if (need > s->cap) {
		unsigned char *b = realloc(s->buf, need);

		if (b == NULL) {
			fail(im, "out of memory");
			return NULL;
		}
		s->buf = b;
		s->cap = need;
	}
	if (e->kind == EXT_COMP && q->ctype == 0) {
		if (!s->zinit) {
			if (inflateInit2(&s->z, -15) != Z_OK) {
				fail(im, "out of memory");
				return NULL;
			}
			s->zinit = 1;
		} else {
			inflateReset(&s->z);
		}
	} else if (e->kind == EXT_COMP) {
		if (s->zd == NULL && (s->zd = ZSTD_createDCtx()) == NULL) {
			fail(im, "out of memory");
			return NULL;
		}
		ZSTD_DCtx_reset(s->zd, ZSTD_reset_session_only);
	}
	s->used = 1;
	s->e = *e;
	s->got = 0;
	s->made = 0;
	s->done = 0;
	q->nactive++;
	return s;
}

/* The next n bytes of the place s waits on. */
static int
slot_take(struct rp_agent_image *im, struct slot *s, const unsigned char *p, size_t n)
{
	struct qcow *q = im->q;
	uint64_t guest;

	switch (s->e.kind) {
	case EXT_L1:
	case EXT_L2:
		memcpy(s->buf + s->got, p, n);
		break;
	case EXT_DATA:
		guest = s->e.guest + s->got;
		if (guest < q->vsize &&
		    emit(im, guest, p, n < q->vsize - guest ? n : (size_t)(q->vsize - guest)) < 0)
			return -1;
		break;
	case EXT_COMP:
		if (s->done)
			break;
		if (q->ctype == 0) {
			int ret;

			s->z.next_in = (Bytef *)p;
			s->z.avail_in = (uInt)n;
			s->z.next_out = s->buf + s->made;
			s->z.avail_out = (uInt)(q->cluster - s->made);
			ret = inflate(&s->z, Z_NO_FLUSH);
			s->made = q->cluster - s->z.avail_out;
			if (ret == Z_STREAM_END || s->made == q->cluster)
				s->done = 1;
			else if (ret != Z_OK && ret != Z_BUF_ERROR)
				return fail(
				        im,
				        "the qcow2 image's compressed cluster at file offset %llu "
				        "is corrupt: %s",
				        (unsigned long long)s->e.host,
				        s->z.msg ? s->z.msg : zError(ret));
		} else {
			ZSTD_inBuffer in = {p, n, 0};
			ZSTD_outBuffer ob = {s->buf, q->cluster, s->made};
			size_t r;

			while (in.pos < in.size && !s->done) {
				r = ZSTD_decompressStream(s->zd, &ob, &in);
				if (ZSTD_isError(r))
					return fail(im,
					            "the qcow2 image's compressed cluster at file "
					            "offset %llu is corrupt: %s",
					            (unsigned long long)s->e.host,
					            ZSTD_getErrorName(r));
				/* The frame's end, or a whole cluster: what follows is not ours. */
				s->done = r == 0 || ob.pos == ob.size;
			}
			s->made = ob.pos;
		}
		break;
	}
	s->got += n;
	return 0;
}

static int push(struct rp_agent_image *im, const struct ext *e);

static int
l1_parse(struct rp_agent_image *im, const struct slot *s)
{
	struct qcow *q = im->q;
	uint64_t i, n = s->e.len / 8;

	for (i = 0; i < n; i++) {
		uint64_t v = be64(s->buf + 8 * i), off = v & L1_OFFSET;
		struct ext e = {
		        .host = off, .guest = i * q->l2_cover, .len = q->cluster, .kind = EXT_L2};

		if (v & L1_RESERVED)
			return fail(
			        im,
			        "the qcow2 image is corrupt: L1 entry %llu has reserved bits set",
			        (unsigned long long)i);
		if (off == 0) {
			if (zero(im, e.guest, q->l2_cover) < 0)
				return -1;
			continue;
		}
		if ((off & (q->cluster - 1)) || off < q->cluster)
			return fail(im, "the qcow2 image is corrupt: L1 entry %llu points at %llu",
			            (unsigned long long)i, (unsigned long long)off);
		if (push(im, &e) < 0)
			return -1;
	}
	q->l1_done = 1;
	return 0;
}

static int
l2_parse(struct rp_agent_image *im, const struct slot *s)
{
	struct qcow *q = im->q;
	struct ext run = {.kind = EXT_DATA};
	uint64_t j, n = q->cluster / 8, xb = 62 - (q->cluster_bits - 8);

	for (j = 0; j < n; j++) {
		uint64_t v = be64(s->buf + 8 * j), guest = s->e.guest + j * q->cluster, off;

		if (guest >= q->vsize)
			break;
		if (v & L2_COMPRESSED) {
			struct ext e = {.guest = guest, .kind = EXT_COMP};
			uint64_t sectors = (v >> xb) & ((1ull << (62 - xb)) - 1);

			e.host = v & ((1ull << xb) - 1);
			e.len = (sectors + 1) * 512 - (e.host & 511);
			if (e.host < q->cluster || e.host >= MAX_OFFSET)
				return fail(
				        im,
				        "the qcow2 image is corrupt: a compressed cluster at %llu "
				        "points at %llu",
				        (unsigned long long)guest, (unsigned long long)e.host);
			if ((run.len && push(im, &run) < 0) || push(im, &e) < 0)
				return -1;
			run.len = 0;
			continue;
		}
		off = v & L2_OFFSET;
		if ((v & L2_RESERVED) || (q->version == 2 && (v & L2_ZERO)))
			return fail(
			        im,
			        "the qcow2 image is corrupt: the L2 entry for %llu has reserved "
			        "bits set",
			        (unsigned long long)guest);
		if ((v & L2_ZERO) || off == 0) {
			if ((run.len && push(im, &run) < 0) || zero(im, guest, q->cluster) < 0)
				return -1;
			run.len = 0;
			continue;
		}
		if ((off & (q->cluster - 1)) || off < q->cluster)
			return fail(
			        im,
			        "the qcow2 image is corrupt: the cluster at %llu points at %llu",
			        (unsigned long long)guest, (unsigned long long)off);
		if (run.len && run.host + run.len == off && run.guest + run.len == guest) {
			run.len += q->cluster;
			continue;
		}
		if (run.len && push(im, &run) < 0)
			return -1;
		run.host = off;
		run.guest = guest;
		run.len = q->cluster;
	}
	return run.len ? push(im, &run) : 0;
}

/* The stream has passed all of s (or a compressed cluster has inflated whole). */
static int
slot_end(struct rp_agent_image *im, struct slot *s)
{
	struct qcow *q = im->q;
	int rc = 0;

	/* Still in use while its table is read: what it points back at takes other slots. */
	switch (s->e.kind) {
	case EXT_L1:
		rc = l1_parse(im, s);
		break;
	case EXT_L2:
		rc = l2_parse(im, s);
		break;
	case EXT_DATA:
		break;
	case EXT_COMP: {
		uint64_t want =
		        q->vsize - s->e.guest < q->cluster ? q->vsize - s->e.guest : q->cluster;

		if (s->made < want)
			rc = fail(im,
			          "the qcow2 image's compressed cluster at file offset %llu is "
			          "corrupt: it inflates to %zu bytes, not %llu",
			          (unsigned long long)s->e.host, s->made, (unsigned long long)want);
		else
			rc = emit(im, s->e.guest, s->buf, (size_t)want);
		break;
	}
	}
	s->used = 0;
	q->nactive--;
	return rc;
}

/* Bytes [host, host + n) that no place claimed, kept in case one turns out to later. */
static int
keep(struct rp_agent_image *im, uint64_t host, const unsigned char *p, size_t n)
{
	struct qcow *q = im->q;

	while (n > 0) {
		struct seg *last = q->nseg ? &q->segs[q->nseg - 1] : NULL;
		size_t k;

		if (last == NULL || last->host + last->len != host || last->len == last->cap) {
			size_t cap = n < SEG_MIN ? SEG_MIN : n > SEG_MAX ? SEG_MAX : n;

			while (q->nseg &&
			       (q->kept + cap > RP_QCOW2_LOOKBEHIND_MAX || q->nseg == SEGS_MAX)) {
				q->kept -= q->segs[0].cap;
				free(q->segs[0].data);
				memmove(q->segs, q->segs + 1, --q->nseg * sizeof *q->segs);
			}
			if (q->segs == NULL &&
			    (q->segs = calloc(SEGS_MAX, sizeof *q->segs)) == NULL)
				return fail(im, "out of memory");
			last = &q->segs[q->nseg];
			if ((last->data = malloc(cap)) == NULL)
				return fail(im, "out of memory");
			last->host = host;
			last->len = 0;
			last->cap = cap;
			q->kept += cap;
			q->nseg++;
		}
		k = last->cap - last->len < n ? last->cap - last->len : n;
		memcpy(last->data + last->len, p, k);
		last->len += k;
		host += k;
		p += k;
		n -= k;
	}
	return 0;
}

/* A place the stream has passed already: from what was kept, or refused. */
static int
behind(struct rp_agent_image *im, const struct ext *e)
{
	struct qcow *q = im->q;
	uint64_t upto = e->host + e->len < q->pos ? e->host + e->len : q->pos, h = e->host;
	struct slot *s = slot_start(im, e);

	if (s == NULL)
		return -1;
	while (h < upto && !s->done) {
		const struct seg *g = NULL;
		size_t i, k;

		for (i = 0; i < q->nseg && g == NULL; i++)
			if (q->segs[i].host <= h && h < q->segs[i].host + q->segs[i].len)
				g = &q->segs[i];
		if (g == NULL)
			return fail(
			        im,
			        "the qcow2 image needs reading backwards: %s at file offset %llu "
			        "comes before the table that points at it" HINT,
			        kind_name(e->kind), (unsigned long long)e->host);
		k = g->host + g->len - h < upto - h ? (size_t)(g->host + g->len - h)
		                                    : (size_t)(upto - h);
		if (slot_take(im, s, g->data + (h - g->host), k) < 0)
			return -1;
		h += k;
	}
	/* The rest, if any, comes with the stream: the slot stays. */
	return s->done || e->host + e->len <= q->pos ? slot_end(im, s) : 0;
}

static int
push(struct rp_agent_image *im, const struct ext *e)
{
	if (e->host + e->len > MAX_OFFSET)
		return fail(im, "the qcow2 image is corrupt: %s at file offset %llu",
		            kind_name(e->kind), (unsigned long long)e->host);
	return e->host >= im->q->pos ? heap_push(im, e) : behind(im, e);
}

static int
qcow_done(const struct qcow *q)
{
	return q->l1_done && q->nheap == 0 && q->nactive == 0;
}

static int
qcow_feed(struct rp_agent_image *im, const unsigned char *p, size_t n)
{
	struct qcow *q = im->q;
	uint64_t start = q->pos, end = q->pos + n;

	while (q->pos < end) {
		uint64_t b = end;
		const unsigned char *piece;
		size_t i;
		int owned;

		if (qcow_done(q)) {
			/* Snapshots, bitmaps, refcounts: nothing more is written. */
			q->pos = end;
			break;
		}
		while (q->nheap && q->heap[0].host <= q->pos) {
			struct ext e = heap_pop(q);

			if (slot_start(im, &e) == NULL)
				return -1;
		}
		if (q->nheap && q->heap[0].host < b)
			b = q->heap[0].host;
		for (i = 0; i < ACTIVE_MAX; i++)
			if (q->slot[i].used && q->slot[i].e.host + q->slot[i].e.len < b)
				b = q->slot[i].e.host + q->slot[i].e.len;
		if (b <= q->pos)
			return fail(im, "internal error: the qcow2 reader stalled at %llu",
			            (unsigned long long)q->pos);
		piece = p + (q->pos - start);
		owned = 0;
		for (i = 0; i < ACTIVE_MAX; i++) {
			if (!q->slot[i].used)
				continue;
			if (slot_take(im, &q->slot[i], piece, (size_t)(b - q->pos)) < 0)
				return -1;
			owned |= q->slot[i].e.kind != EXT_COMP;
		}
		/* Tables and plain clusters own their clusters. A compressed cluster's sectors
		 * are shared: QEMU packs the next compressed data into the tail of the last
		 * one, even when that data's L2 table comes later. */
		if (!owned && keep(im, q->pos, piece, (size_t)(b - q->pos)) < 0)
			return -1;
		q->pos = b;
		for (i = 0; i < ACTIVE_MAX; i++) {
			struct slot *s = &q->slot[i];

			if (s->used && (s->done || s->e.host + s->e.len == q->pos) &&
			    slot_end(im, s) < 0)
				return -1;
		}
	}
	return 0;
}

/* The first n bytes (QHEAD_MIN at least). */
static int
qcow_header(struct rp_agent_image *im, const unsigned char *h, size_t n)
{
	struct qcow *q = im->q;
	uint64_t backing = be64(h + 8), l1_off = be64(h + 40), need;
	uint32_t backing_len = be32(h + 16), crypt = be32(h + 32), l1_size = be32(h + 36);

	q->version = be32(h + 4);
	q->cluster_bits = be32(h + 20);
	q->vsize = be64(h + 24);
	if (q->cluster_bits < 9 || q->cluster_bits > 21)
		return fail(im, "the qcow2 image's cluster_bits %u is out of range (9-21)",
		            q->cluster_bits);
	q->cluster = 1ull << q->cluster_bits;
	q->l2_cover = q->cluster / 8 * q->cluster;
	if (q->version == 3) {
		uint64_t incompat = be64(h + 72);
		uint32_t hlen = be32(h + 100);

		if (hlen < 104 || hlen > q->cluster)
			return fail(im, "the qcow2 image is corrupt: header_length %u", hlen);
		if (incompat & 2)
			return fail(im,
			            "the qcow2 image is marked corrupt; `qemu-img check -r all` "
			            "repairs it");
		if (incompat & 4)
			return fail(im, "the qcow2 image keeps its data in an external data file, "
			                "which the agent cannot reach" HINT);
		if (incompat & 16)
			return fail(im, "the qcow2 image uses extended L2 entries (subclusters), "
			                "which the agent does not read" HINT);
		if (incompat & 8)
			q->ctype = hlen > 104 ? h[104] : 0;
		if (q->ctype > 1)
			return fail(im, "the qcow2 image's compression type %u is unknown",
			            q->ctype);
		/* Bit 0 (dirty) is about refcounts, which a reader does not need. */
		if (incompat & ~0x1full)
			return fail(im,
			            "the qcow2 image has incompatible features the agent does not "
			            "know (0x%llx)" HINT,
			            (unsigned long long)(incompat & ~0x1full));
	}
	if (backing) {
		char name[256] = "";
		size_t i;

		if (backing < n && backing_len < sizeof name && backing + backing_len <= n) {
			memcpy(name, h + backing, backing_len);
			name[backing_len] = '\0';
			for (i = 0; i < backing_len; i++)
				if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] > 0x7e)
					name[i] = '?';
		}
		return fail(im,
		            "the qcow2 image has a backing file%s%s%s; the agent writes "
		            "standalone images only" HINT,
		            name[0] ? " (" : "", name, name[0] ? ")" : "");
	}
	if (crypt)
		return fail(im,
		            "the qcow2 image is encrypted (%s); the agent does not decrypt images",
		            crypt == 1   ? "AES"
		            : crypt == 2 ? "LUKS"
		                         : "an unknown method");
	if (q->vsize > MAX_OFFSET)
		return fail(im, "the qcow2 image's virtual size %llu is out of range",
		            (unsigned long long)q->vsize);
	if (im->limit && q->vsize > im->limit)
		return fail(im,
		            "the image's virtual size (%llu bytes) is larger than the target "
		            "(%llu bytes)",
		            (unsigned long long)q->vsize, (unsigned long long)im->limit);
	need = q->vsize / q->l2_cover + (q->vsize % q->l2_cover != 0);
	if (l1_size < need)
		return fail(im,
		            "the qcow2 image is corrupt: its L1 table has %u entries, its size "
		            "needs %llu",
		            l1_size, (unsigned long long)need);
	if (need > RP_QCOW2_L1_MAX)
		return fail(im,
		            "the qcow2 image's L1 table has %llu entries, more than the %u the "
		            "agent accepts" HINT,
		            (unsigned long long)need, RP_QCOW2_L1_MAX);
	q->pos = QHEAD_MIN;
	if (need == 0) {
		q->l1_done = 1;
		return 0;
	}
	if ((l1_off & (q->cluster - 1)) || l1_off < q->cluster)
		return fail(im, "the qcow2 image is corrupt: its L1 table is at %llu",
		            (unsigned long long)l1_off);
	{
		/* Only the entries the virtual size needs; the rest map nothing. */
		struct ext e = {.host = l1_off, .len = need * 8, .kind = EXT_L1};

		return push(im, &e);
	}
}

static int
qcow_finish(struct rp_agent_image *im)
{
	struct qcow *q = im->q;
	uint64_t at = UINT64_MAX;
	const char *what = NULL;
	size_t i;

	for (i = 0; i < ACTIVE_MAX; i++) {
		if (q->slot[i].used && q->slot[i].e.host < at) {
			at = q->slot[i].e.host;
			what = kind_name(q->slot[i].e.kind);
		}
	}
	if (q->nheap && q->heap[0].host < at) {
		at = q->heap[0].host;
		what = kind_name(q->heap[0].kind);
	}
	if (what)
		return fail(im,
		            "the qcow2 image is truncated: it ends at %llu bytes, %s at file "
		            "offset %llu is missing",
		            (unsigned long long)q->pos, what, (unsigned long long)at);
	if (!q->l1_done)
		return fail(im, "the qcow2 image is truncated");
	if (zero_now(im, q->zoff, q->zlen) < 0)
		return -1;
	q->zlen = 0;
	return 0;
}

static void
qcow_free(struct qcow *q)
{
	size_t i;

	if (q == NULL)
		return;
	for (i = 0; i < ACTIVE_MAX; i++) {
		free(q->slot[i].buf);
		if (q->slot[i].zinit)
			inflateEnd(&q->slot[i].z);
		ZSTD_freeDCtx(q->slot[i].zd);
	}
	for (i = 0; i < q->nseg; i++)
		free(q->segs[i].data);
	free(q->segs);
	free(q->heap);
	free(q);
}

/* ---- The writer ------------------------------------------------------------------------ */

struct rp_agent_image *
rp_agent_image_new(int fd, int blk, enum rp_agent_image_format f, uint64_t limit)
{
	struct rp_agent_image *im = calloc(1, sizeof *im), *res = NULL;

	if (im == NULL)
		return NULL;
	im->fd = fd;
	im->blk = blk;
	im->fmt = f;
	im->limit = limit;
	im->zleft = 1;
	if (posix_memalign((void **)&im->out, 4096, OUT_CAP) != 0) {
		im->out = NULL;
		goto out;
	}
	switch (f) {
	case RP_IMAGE_GZIP:
		/* 15 + 16: gzip wrapper only, so a zlib stream is not taken for one. */
		if (inflateInit2(&im->z, 15 + 16) != Z_OK)
			goto out;
		im->zinit = 1;
		break;
	case RP_IMAGE_ZSTD:
		if ((im->zd = ZSTD_createDCtx()) == NULL)
			goto out;
		break;
	case RP_IMAGE_XZ:
		if (xz_init(im) < 0)
			goto out;
		break;
	case RP_IMAGE_QCOW2:
		if ((im->q = calloc(1, sizeof *im->q)) == NULL)
			goto out;
		break;
	case RP_IMAGE_RAW:
	case RP_IMAGE__COUNT:
		break;
	}
	res = im;
	im = NULL;
out:
	rp_agent_image_free(im);
	return res;
}

void
rp_agent_image_free(struct rp_agent_image *im)
{
	if (im == NULL)
		return;
	if (im->zinit)
		inflateEnd(&im->z);
	ZSTD_freeDCtx(im->zd);
	if (im->xinit)
		lzma_end(&im->x);
	qcow_free(im->q);
	free(im->out);
	free(im->zeros);
	free(im);
}

static int
body_piece(struct rp_agent_image *im, const unsigned char *p, size_t n)
{
	switch (im->fmt) {
	case RP_IMAGE_RAW:
		im->dpos += n;
		return emit(im, im->dpos - n, p, n);
	case RP_IMAGE_GZIP:
		return gzip_feed(im, p, n);
	case RP_IMAGE_ZSTD:
		return zstd_feed(im, p, n);
	case RP_IMAGE_XZ:
		return xz_code(im, p, n, LZMA_RUN);
	case RP_IMAGE_QCOW2:
		return qcow_feed(im, p, n);
	case RP_IMAGE__COUNT:
		break;
	}
	return fail(im, "unknown image format");
}

static int
body(struct rp_agent_image *im, const unsigned char *p, size_t n)
{
	/* zlib counts its input in uInt. */
	while (n > (1u << 30)) {
		if (body_piece(im, p, 1u << 30) < 0)
			return -1;
		p += 1u << 30;
		n -= 1u << 30;
	}
	return body_piece(im, p, n);
}

/* The head is in (or the stream ended before it filled): check the magic, then feed it. */
static int
start(struct rp_agent_image *im)
{
	const char *want = rp_agent_image_format_name(im->fmt);
	const char *got = sniff(im->head, im->headlen);

	im->started = 1;
	if (im->headlen == 0)
		return fail(im, "the download is empty");
	if (im->fmt == RP_IMAGE_RAW && got)
		return fail(im, "the image is %s but the step says raw (give its format)", got);
	if (im->fmt != RP_IMAGE_RAW && got == NULL) {
		char hex[3 * MAGIC_LEN + 1] = "";
		size_t i, k = 0;

		for (i = 0; i < im->headlen && i < MAGIC_LEN; i++)
			k += (size_t)snprintf(hex + k, sizeof hex - k, "%s%02x", i ? " " : "",
			                      im->head[i]);
		return fail(im, "the image is not %s: it starts with %s", want, hex);
	}
	if (got && strcmp(got, want))
		return fail(im, "the image is %s but the step says %s", got, want);
	if (im->fmt == RP_IMAGE_QCOW2) {
		if (im->headlen < QHEAD_MIN)
			return fail(im, "the qcow2 image is truncated: %zu bytes", im->headlen);
		if (qcow_header(im, im->head, im->headlen) < 0)
			return -1;
		/* Past the smallest header cluster, the head is the stream's like any bytes. */
		return qcow_feed(im, im->head + QHEAD_MIN, im->headlen - QHEAD_MIN);
	}
	return body(im, im->head, im->headlen);
}

int
rp_agent_image_feed(struct rp_agent_image *im, const void *data, size_t n)
{
	const unsigned char *p = data;

	if (im->failed)
		return -1;
	im->st.bytes_in += n;
	if (!im->started) {
		size_t need = im->fmt == RP_IMAGE_QCOW2 ? QHEAD_LEN : MAGIC_LEN;
		size_t k = need - im->headlen < n ? need - im->headlen : n;

		memcpy(im->head + im->headlen, p, k);
		im->headlen += k;
		p += k;
		n -= k;
		if (im->headlen < need)
			return 0;
		if (start(im) < 0)
			return -1;
	}
	return n ? body(im, p, n) : 0;
}

int
rp_agent_image_finish(struct rp_agent_image *im)
{
	uint64_t size;

	if (im->failed)
		return -1;
	if (!im->started && start(im) < 0)
		return -1;
	switch (im->fmt) {
	case RP_IMAGE_GZIP:
		if (!im->zend)
			return fail(im, "the gzip data is truncated: it ends inside member %u",
			            im->members + 1);
		break;
	case RP_IMAGE_ZSTD:
		if (im->zleft != 0)
			return fail(im, "the zstd data is truncated: it ends inside a frame");
		break;
	case RP_IMAGE_XZ:
		if (xz_code(im, NULL, 0, LZMA_FINISH) < 0)
			return -1;
		break;
	case RP_IMAGE_QCOW2:
		if (qcow_finish(im) < 0)
			return -1;
		break;
	case RP_IMAGE_RAW:
	case RP_IMAGE__COUNT:
		break;
	}
	if (flush_out(im) < 0)
		return -1;
	size = im->q ? im->q->vsize : im->dpos;
	/* A regular file stands for a disk (tests): it is as large as it was, like a disk, or
	 * grows to hold the image; never shorter, so that what follows the image (a seed at
	 * the disk's end) has room. */
	if (!im->blk) {
		struct stat fst;

		if (fstat(im->fd, &fst) < 0 ||
		    ((uint64_t)fst.st_size < size && ftruncate(im->fd, (off_t)size) < 0))
			return fail(im, "setting the size to %llu: %s", (unsigned long long)size,
			            strerror(errno));
	}
	return 0;
}

const char *
rp_agent_image_error(const struct rp_agent_image *im)
{
	return im->failed ? im->err : "";
}

void
rp_agent_image_stats(const struct rp_agent_image *im, struct rp_agent_image_stats *st)
{
	*st = im->st;
	st->size = im->q ? im->q->vsize : im->dpos;
}
