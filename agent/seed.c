/*
 * seed.c — finishing a disk after its image is written (rp_agent_disk_finish): the root
 * partition grown over the space the image left unused (growpart's job), a cloud-init NoCloud
 * seed (a FAT filesystem written here) in a new partition at the disk's end, and an EFI boot
 * entry (efibootmgr). The ramdisk has no sfdisk, growpart or mkfs.vfat, so the partition table
 * (MBR or GPT) and the seed's filesystem are read and written here. The table is the image's,
 * i.e. whatever was downloaded: every field is checked before it is used, and nothing is read
 * outside the disk or a partition.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/fs.h>
#include <zlib.h>

#include "agent.h"

extern char **environ;

const char *rp_agent_efi_dir = "/sys/firmware/efi";

#define MIB              (1024 * 1024)
#define SEED_MIN         (8 * MIB)  /* the seed partition's least size */
#define SEED_CONTENT_MAX (64 * MIB) /* the seed's files together */
#define GPT_ARRAY_MAX    MIB        /* the most bytes of GPT entries read */
#define OLD_SEED_WIPE    (64 * MIB) /* the most of a replaced seed wiped */
#define REREAD_TRIES     5
#define EFI_TIMEOUT_MS   60000
#define EFI_OUTPUT_MAX   (64 * 1024)
#define EFI_SUBDIRS      64

#if defined(__aarch64__)
#define EFI_ARCH     "aa64"
#define EFI_FALLBACK "BOOTAA64.EFI"
#else
#define EFI_ARCH     "x64"
#define EFI_FALLBACK "BOOTX64.EFI"
#endif

#define TYPE_LINUX_FS  "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
#define TYPE_ROOT_X64  "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"
#define TYPE_ROOT_A64  "B921B045-1DF0-41C3-AF44-4C6F280D3FAE"
#define TYPE_BASIC     "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7"
#define TYPE_ESP       "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
#define MBR_SEED_TYPE  0x0c
#define MBR_LINUX_TYPE 0x83
#define MBR_ESP_TYPE   0xef
#define MBR_GPT_TYPE   0xee

static void __attribute__((format(printf, 3, 4)))
say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- little-endian fields, GUIDs ------------------------------------------------------ */

static uint16_t
le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t
le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void
put16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void
put32(unsigned char *p, uint32_t v)
{
	put16(p, v);
	put16(p + 2, v >> 16);
}

static void
put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* A GUID's text into its on-disk bytes: the first three groups are little-endian. The texts
 * are this file's constants, so a malformed one is a bug: all zero then. */
static void
guid_bytes(const char *text, unsigned char out[16])
{
	static const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
	unsigned char raw[16];
	size_t i, n = 0;

	for (i = 0; text[i] && n < 32; i++) {
		int v;

		if (text[i] == '-')
			continue;
		if (!isxdigit((unsigned char)text[i]))
			break;
		v = isdigit((unsigned char)text[i]) ? text[i] - '0'
		                                    : tolower((unsigned char)text[i]) - 'a' + 10;
		if (n % 2 == 0)
			raw[n / 2] = (unsigned char)(v << 4);
		else
			raw[n / 2] |= (unsigned char)v;
		n++;
	}
	memset(out, 0, 16);
	if (n == 32)
		for (i = 0; i < 16; i++)
			out[order[i]] = raw[i];
}

static int
guid_is(const unsigned char *g, const char *text)
{
	unsigned char b[16];

	guid_bytes(text, b);
	return memcmp(g, b, 16) == 0;
}

/* On-disk bytes as canonical upper-case text; out holds 37 bytes. */
static void
guid_text(const unsigned char *g, char *out)
{
	snprintf(out, 37, "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X",
	         g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12],
	         g[13], g[14], g[15]);
}

/* ---- the disk ------------------------------------------------------------------------- */

struct disk {
	const char *dev;
	int fd;
	int blk;          /* a block device; else a regular file */
	unsigned ss;      /* logical sector size, bytes */
	uint64_t sectors; /* size in sectors */
};

/* Read or write n bytes at byte offset off, which must lie inside the disk. */
static int
disk_io(struct disk *d, int write, uint64_t off, void *buf, size_t n, char *err, size_t errlen)
{
	unsigned char *p = buf;
	size_t done = 0;

	if (off > d->sectors * d->ss || n > d->sectors * d->ss - off) {
		say(err, errlen, "%s: %s past the end of the disk (byte %llu)", d->dev,
		    write ? "writing" : "reading", (unsigned long long)off);
		return -1;
	}
	while (done < n) {
		ssize_t r = write ? pwrite(d->fd, p + done, n - done, (off_t)(off + done))
		                  : pread(d->fd, p + done, n - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			say(err, errlen, "%s: %s at byte %llu: %s", d->dev,
			    write ? "write" : "read", (unsigned long long)(off + done),
			    r < 0 ? strerror(errno) : "unexpected end of file");
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

static int
disk_rd(struct disk *d, uint64_t lba, void *buf, size_t nsec, char *err, size_t errlen)
{
	if (lba > d->sectors)
		lba = d->sectors + 1; /* disk_io says "past the end" */
	return disk_io(d, 0, lba * d->ss, buf, nsec * d->ss, err, errlen);
}

static int
disk_wr(struct disk *d, uint64_t lba, const void *buf, size_t nsec, char *err, size_t errlen)
{
	if (lba > d->sectors)
		lba = d->sectors + 1;
	return disk_io(d, 1, lba * d->ss, (void *)buf, nsec * d->ss, err, errlen);
}

/* Write n zero bytes at byte offset off. */
static int
disk_zero(struct disk *d, uint64_t off, uint64_t n, char *err, size_t errlen)
{
	static const unsigned char zero[64 * 1024];

	while (n > 0) {
		size_t k = n < sizeof zero ? (size_t)n : sizeof zero;

		if (disk_io(d, 1, off, (void *)zero, k, err, errlen) < 0)
			return -1;
		off += k;
		n -= k;
	}
	return 0;
}

static int
disk_open(struct disk *d, const char *dev, char *err, size_t errlen)
{
	struct stat st;
	int flags = O_RDWR | O_CLOEXEC | O_NOCTTY;

	d->dev = dev;
	d->fd = -1;
	if (stat(dev, &st) < 0) {
		say(err, errlen, "%s: %s", dev, strerror(errno));
		return -1;
	}
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode)) {
		say(err, errlen, "%s is neither a block device nor a file", dev);
		return -1;
	}
	d->blk = S_ISBLK(st.st_mode);
	/* Exclusive, as the image was written: Linux refuses while a partition is mounted. */
	if (d->blk)
		flags |= O_EXCL;
	d->fd = open(dev, flags);
	if (d->fd < 0) {
		say(err, errlen, "%s: %s", dev,
		    errno == EBUSY ? "in use (mounted?)" : strerror(errno));
		return -1;
	}
	if (d->blk) {
		uint64_t bytes;
		int ss;

		if (ioctl(d->fd, BLKSSZGET, &ss) < 0 || ioctl(d->fd, BLKGETSIZE64, &bytes) < 0) {
			say(err, errlen, "%s: cannot learn its size: %s", dev, strerror(errno));
			return -1;
		}
		if (ss != 512 && ss != 4096) {
			say(err, errlen, "%s has %d-byte sectors; only 512 and 4096 are supported",
			    dev, ss);
			return -1;
		}
		d->ss = (unsigned)ss;
		d->sectors = bytes / d->ss;
	} else {
		d->ss = 512;
		d->sectors = (uint64_t)st.st_size / d->ss;
	}
	if (d->sectors < 64) {
		say(err, errlen, "%s is too small to hold a partitioned disk (%llu bytes)", dev,
		    (unsigned long long)d->sectors * d->ss);
		return -1;
	}
	return 0;
}

/* ---- the partition table -------------------------------------------------------------- */

/* One used partition. */
struct part {
	unsigned slot;          /* table index: the partition's number is slot + 1 */
	uint64_t first, last;   /* LBAs, inclusive */
	unsigned char type[16]; /* GPT: type GUID (disk order) */
	unsigned mbr_type;      /* MBR: type byte */
	unsigned char uuid[16]; /* GPT: unique partition GUID */
};

struct table {
	int gpt;
	unsigned char *mbr; /* sector 0 */
	/* GPT only: the primary header's sector and entry array, and its fields. */
	unsigned char *hdr, *ents;
	uint32_t hsize, nent, esize;
	uint64_t alt, ents_lba, ents_sectors;
	/* Where partitions may lie on this disk (for GPT: once the backup is at its end). */
	uint64_t usable_first, usable_last;
	unsigned nslots;    /* entries in the table: 4, or the GPT's count */
	struct part *parts; /* used ones, sorted by first */
	size_t nparts;
};

static void
table_free(struct table *t)
{
	free(t->mbr);
	free(t->hdr);
	free(t->ents);
	free(t->parts);
}

static int
part_cmp(const void *a, const void *b)
{
	const struct part *x = a, *y = b;

	return x->first < y->first ? -1 : x->first > y->first;
}

/* Sort the used partitions and refuse overlaps: free space is computed from them. */
static int
parts_check(struct disk *d, struct table *t, char *err, size_t errlen)
{
	size_t i;

	qsort(t->parts, t->nparts, sizeof *t->parts, part_cmp);
	for (i = 1; i < t->nparts; i++)
		if (t->parts[i].first <= t->parts[i - 1].last) {
			say(err, errlen, "%s: partitions %u and %u overlap", d->dev,
			    t->parts[i - 1].slot + 1, t->parts[i].slot + 1);
			return -1;
		}
	if (t->nparts == 0) {
		say(err, errlen,
		    t->gpt ? "the GPT of %s holds no partitions"
		           : "%s has no partition table (its MBR lists no partitions)",
		    d->dev);
		return -1;
	}
	return 0;
}

static int
mbr_extended(unsigned type)
{
	return type == 0x05 || type == 0x0f || type == 0x85;
}

static int
mbr_parse(struct disk *d, struct table *t, char *err, size_t errlen)
{
	unsigned i;

	t->nslots = 4;
	t->parts = calloc(4, sizeof *t->parts);
	if (t->parts == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	/* A boot flag other than 0 or 0x80 means sector 0 is no MBR (a filesystem's boot
	 * sector carries 55 AA too). */
	for (i = 0; i < 4; i++) {
		const unsigned char *e = t->mbr + 446 + 16 * i;

		if (e[0] != 0 && e[0] != 0x80) {
			say(err, errlen, "%s has no partition table (sector 0 is not an MBR)",
			    d->dev);
			return -1;
		}
	}
	for (i = 0; i < 4; i++) {
		const unsigned char *e = t->mbr + 446 + 16 * i;
		uint64_t start = le32(e + 8), count = le32(e + 12);
		struct part *p;

		if (e[4] == 0 || count == 0)
			continue;
		if (mbr_extended(e[4])) {
			say(err, errlen,
			    "%s: partition %u is an extended partition (type 0x%02x): "
			    "extended/logical partitions are not supported",
			    d->dev, i + 1, e[4]);
			return -1;
		}
		if (start == 0 || start + count > d->sectors) {
			say(err, errlen,
			    "%s: MBR partition %u (sectors %llu+%llu) does not fit the disk",
			    d->dev, i + 1, (unsigned long long)start, (unsigned long long)count);
			return -1;
		}
		p = &t->parts[t->nparts++];
		p->slot = i;
		p->first = start;
		p->last = start + count - 1;
		p->mbr_type = e[4];
	}
	t->usable_first = 1;
	/* The MBR's 32-bit fields reach 2 TiB of 512-byte sectors; beyond is out of reach. */
	t->usable_last = d->sectors - 1 < 0xFFFFFFFFu ? d->sectors - 1 : 0xFFFFFFFFu;
	return parts_check(d, t, err, errlen);
}

static uint32_t
gpt_crc(const unsigned char *p, size_t n)
{
	uLong c = crc32(0L, Z_NULL, 0);

	while (n > 0) {
		uInt k = n > 0x40000000u ? 0x40000000u : (uInt)n;

		c = crc32(c, p, k);
		p += k;
		n -= k;
	}
	return (uint32_t)c;
}

/* The header's CRC: over hsize bytes with the CRC field taken as zero. */
static uint32_t
gpt_hdr_crc(const unsigned char *h, uint32_t hsize)
{
	unsigned char tmp[4096];

	memcpy(tmp, h, hsize);
	memset(tmp + 16, 0, 4);
	return gpt_crc(tmp, hsize);
}

static int
gpt_parse(struct disk *d, struct table *t, char *err, size_t errlen)
{
	const unsigned char *h = t->hdr;
	uint64_t first_usable, last_usable, bytes;
	uint32_t i;

	/* The header was read; its signature checked by the caller. */
	t->hsize = le32(h + 12);
	if (t->hsize < 92 || t->hsize > d->ss) {
		say(err, errlen, "%s: GPT header size %u is invalid", d->dev, t->hsize);
		return -1;
	}
	if (gpt_hdr_crc(h, t->hsize) != le32(h + 16)) {
		say(err, errlen, "%s: the GPT header's checksum is wrong (damaged table)", d->dev);
		return -1;
	}
	if (le64(h + 24) != 1) {
		say(err, errlen, "%s: the primary GPT header does not say it is at LBA 1", d->dev);
		return -1;
	}
	t->alt = le64(h + 32);
	first_usable = le64(h + 40);
	last_usable = le64(h + 48);
	t->ents_lba = le64(h + 72);
	t->nent = le32(h + 80);
	t->esize = le32(h + 84);
	if (t->esize < 128 || t->esize > 4096 || (t->esize & (t->esize - 1)) != 0 || t->nent == 0 ||
	    (uint64_t)t->nent * t->esize > GPT_ARRAY_MAX) {
		say(err, errlen, "%s: GPT entry array of %u entries of %u bytes is not supported",
		    d->dev, t->nent, t->esize);
		return -1;
	}
	bytes = (uint64_t)t->nent * t->esize;
	t->ents_sectors = (bytes + d->ss - 1) / d->ss;
	if (t->alt >= d->sectors) {
		say(err, errlen,
		    "%s: the GPT describes a disk of %llu sectors, larger than the device "
		    "(%llu sectors)",
		    d->dev, (unsigned long long)t->alt + 1, (unsigned long long)d->sectors);
		return -1;
	}
	if (t->ents_lba < 2 || t->ents_lba > d->sectors ||
	    t->ents_lba + t->ents_sectors > first_usable || first_usable > last_usable ||
	    last_usable >= t->alt) {
		say(err, errlen, "%s: the GPT header's LBAs are inconsistent", d->dev);
		return -1;
	}
	t->ents = malloc(t->ents_sectors * d->ss);
	if (t->ents == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	if (disk_rd(d, t->ents_lba, t->ents, t->ents_sectors, err, errlen) < 0)
		return -1;
	if (gpt_crc(t->ents, bytes) != le32(h + 88)) {
		say(err, errlen, "%s: the GPT entry array's checksum is wrong (damaged table)",
		    d->dev);
		return -1;
	}
	t->nslots = t->nent;
	/* The backup moves to the disk's last sectors: what lies before it is usable. */
	t->usable_first = first_usable;
	if (d->sectors < t->ents_sectors + 3 || d->sectors - 2 - t->ents_sectors < first_usable) {
		say(err, errlen, "%s is too small for its GPT", d->dev);
		return -1;
	}
	t->usable_last = d->sectors - 2 - t->ents_sectors;
	t->parts = calloc(t->nent, sizeof *t->parts);
	if (t->parts == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < t->nent; i++) {
		const unsigned char *e = t->ents + (size_t)i * t->esize;
		static const unsigned char unused[16];
		struct part *p;

		if (memcmp(e, unused, 16) == 0)
			continue;
		p = &t->parts[t->nparts++];
		p->slot = i;
		memcpy(p->type, e, 16);
		memcpy(p->uuid, e + 16, 16);
		p->first = le64(e + 32);
		p->last = le64(e + 40);
		if (p->first < first_usable || p->first > p->last || p->last > last_usable ||
		    p->last > t->usable_last) {
			say(err, errlen,
			    "%s: GPT partition %u (LBA %llu-%llu) lies outside the "
			    "usable space",
			    d->dev, i + 1, (unsigned long long)p->first,
			    (unsigned long long)p->last);
			return -1;
		}
	}
	return parts_check(d, t, err, errlen);
}

static int
table_read(struct disk *d, struct table *t, char *err, size_t errlen)
{
	unsigned i;
	int pmbr = 0;

	t->mbr = malloc(4096);
	t->hdr = malloc(4096);
	if (t->mbr == NULL || t->hdr == NULL) {
		say(err, errlen, "out of memory");
		return -1;
	}
	if (disk_rd(d, 0, t->mbr, 1, err, errlen) < 0)
		return -1;
	if (t->mbr[510] != 0x55 || t->mbr[511] != 0xaa) {
		say(err, errlen, "%s has no partition table (no MBR signature in sector 0)",
		    d->dev);
		return -1;
	}
	for (i = 0; i < 4; i++)
		if (t->mbr[446 + 16 * i + 4] == MBR_GPT_TYPE)
			pmbr = 1;
	if (!pmbr)
		return mbr_parse(d, t, err, errlen);
	t->gpt = 1;
	if (disk_rd(d, 1, t->hdr, 1, err, errlen) < 0)
		return -1;
	/* A file has no sector size of its own: an image made for 4096-byte sectors has its
	 * header at byte 4096. */
	if (memcmp(t->hdr, "EFI PART", 8) != 0 && !d->blk) {
		unsigned char probe[8];

		if (disk_io(d, 0, 4096, probe, sizeof probe, err, errlen) == 0 &&
		    memcmp(probe, "EFI PART", 8) == 0) {
			d->sectors = d->sectors * 512 / 4096;
			d->ss = 4096;
			if (disk_rd(d, 0, t->mbr, 1, err, errlen) < 0 ||
			    disk_rd(d, 1, t->hdr, 1, err, errlen) < 0)
				return -1;
		}
	}
	if (memcmp(t->hdr, "EFI PART", 8) != 0) {
		say(err, errlen, "%s has a protective MBR but no GPT header", d->dev);
		return -1;
	}
	return gpt_parse(d, t, err, errlen);
}

static const struct part *
part_last(const struct table *t, const struct part *skip)
{
	const struct part *best = NULL;
	size_t i;

	for (i = 0; i < t->nparts; i++)
		if (&t->parts[i] != skip && (best == NULL || t->parts[i].last > best->last))
			best = &t->parts[i];
	return best;
}

static int
part_linux(const struct table *t, const struct part *p)
{
	if (!t->gpt)
		return p->mbr_type == MBR_LINUX_TYPE;
	return guid_is(p->type, TYPE_LINUX_FS) || guid_is(p->type, TYPE_ROOT_X64) ||
	       guid_is(p->type, TYPE_ROOT_A64);
}

static void
part_type_text(const struct table *t, const struct part *p, char *buf, size_t n)
{
	char g[37];

	if (!t->gpt) {
		snprintf(buf, n, "0x%02x", p->mbr_type);
		return;
	}
	guid_text(p->type, g);
	snprintf(buf, n, "%s", g);
}

/* 1 when GPT entry e is named name (ASCII). */
static int
gpt_named(const unsigned char *e, const char *name)
{
	size_t i, n = strlen(name);

	for (i = 0; i < 36; i++) {
		uint16_t c = le16(e + 56 + 2 * i);

		if (i == n)
			return c == 0;
		if (c != (unsigned char)name[i])
			return 0;
	}
	return n == 36;
}

/* ---- the seed's FAT filesystem -------------------------------------------------------- */

struct seed_file {
	const char *name;
	const char *data;
	size_t len;
};

struct fat_layout {
	unsigned ss, spc, bits;
	uint32_t total, fatsz, root_secs, data_start, clusters;
};

/* FAT12 or FAT16 over sectors sectors of ss bytes: 1 reserved sector, 2 FATs, 512 root
 * entries. The type follows from the cluster count alone (< 4085: FAT12), as every reader
 * decides; counts near the limits are avoided, since old readers disagree there. */
static int
fat_plan(unsigned ss, uint64_t sectors, struct fat_layout *l)
{
	unsigned spc, bits;

	if (sectors > 0xFFFFFFFFu)
		return -1;
	memset(l, 0, sizeof *l);
	l->ss = ss;
	l->total = (uint32_t)sectors;
	l->root_secs = 512 * 32 / ss;
	for (spc = 1; spc <= 128 && spc * ss <= 32768; spc *= 2)
		for (bits = 12; bits <= 16; bits += 4) {
			uint64_t fatsz = 1, clusters = 0, meta;

			for (;;) {
				uint64_t need;

				meta = 1 + 2 * fatsz + l->root_secs;
				if (meta >= sectors)
					break;
				clusters = (sectors - meta) / spc;
				need = ((clusters + 2) * bits + 8 * ss - 1) / (8 * ss);
				if (need <= fatsz)
					break;
				fatsz = need;
			}
			if (meta >= sectors || fatsz > 0xFFFF)
				continue;
			if ((bits == 12 && clusters >= 16 && clusters <= 4084 - 16) ||
			    (bits == 16 && clusters >= 4085 + 16 && clusters <= 65524 - 16)) {
				l->spc = spc;
				l->bits = bits;
				l->fatsz = (uint32_t)fatsz;
				l->data_start = (uint32_t)meta;
				l->clusters = (uint32_t)clusters;
				return 0;
			}
		}
	return -1;
}

static void
fat_set(const struct fat_layout *l, unsigned char *fat, uint32_t n, uint32_t v)
{
	if (l->bits == 16) {
		put16(fat + 2 * n, v);
		return;
	}
	if (n & 1) {
		fat[n + n / 2] = (unsigned char)((fat[n + n / 2] & 0x0f) | (v << 4 & 0xf0));
		fat[n + n / 2 + 1] = (unsigned char)(v >> 4);
	} else {
		fat[n + n / 2] = (unsigned char)v;
		fat[n + n / 2 + 1] = (unsigned char)((fat[n + n / 2 + 1] & 0xf0) | (v >> 8 & 0x0f));
	}
}

static unsigned char
lfn_sum(const unsigned char short_name[11])
{
	unsigned char s = 0;
	int i;

	for (i = 0; i < 11; i++)
		s = (unsigned char)(((s & 1) << 7) + (s >> 1) + short_name[i]);
	return s;
}

/* The 8.3 alias of a long name: its first 6 valid characters upper-cased and "~N", with an
 * extension from the part after the last dot. */
static void
short_alias(const char *name, unsigned n, unsigned char out[11])
{
	const char *dot = strrchr(name, '.');
	size_t i, k = 0, end = dot && dot != name ? (size_t)(dot - name) : strlen(name);
	char tail[8];
	size_t tl;

	memset(out, ' ', 11);
	for (i = 0; i < end && k < 6; i++) {
		unsigned char c = (unsigned char)toupper((unsigned char)name[i]);

		if (c == '.' || c == ' ')
			continue;
		out[k++] = isalnum(c) || strchr("!#$%&'()-@^_`{}~", c) ? c : '_';
	}
	tl = (size_t)snprintf(tail, sizeof tail, "~%u", n);
	if (k + tl > 8)
		k = 8 - tl;
	memcpy(out + k, tail, tl);
	if (dot && dot != name)
		for (i = 0, k = 8; dot[1 + i] && k < 11; i++) {
			unsigned char c = (unsigned char)toupper((unsigned char)dot[1 + i]);

			out[k++] = isalnum(c) || strchr("!#$%&'()-@^_`{}~", c) ? c : '_';
		}
}

static void
fat_stamp(unsigned char *e, time_t now)
{
	struct tm tm;
	unsigned t, dt;

	gmtime_r(&now, &tm);
	if (tm.tm_year < 80)
		tm = (struct tm){.tm_year = 80, .tm_mday = 1};
	t = (unsigned)(tm.tm_hour << 11 | tm.tm_min << 5 | tm.tm_sec / 2);
	dt = (unsigned)((tm.tm_year - 80) << 9 | (tm.tm_mon + 1) << 5 | tm.tm_mday);
	put16(e + 14, t); /* created */
	put16(e + 16, dt);
	put16(e + 18, dt); /* accessed */
	put16(e + 22, t);  /* written */
	put16(e + 24, dt);
}

/* The whole filesystem as l->total sectors in a new buffer (*out, which holds the seed's
 * secrets: the caller wipes it). hidden: the partition's first LBA (for the BPB). */
static int
fat_build(const struct fat_layout *l, uint64_t hidden, const char *label,
          const struct seed_file *files, size_t nfiles, unsigned char **out, char *err,
          size_t errlen)
{
	size_t bytes = (size_t)l->total * l->ss, cbytes = (size_t)l->spc * l->ss, i, ent = 0;
	unsigned char *img = calloc(1, bytes), *b, *root, lab[11], shorts[8][11];
	uint32_t next = 2, serial;
	time_t now = time(NULL);
	int rc = -1;

	if (img == NULL) {
		say(err, errlen, "out of memory for the seed's filesystem");
		goto out;
	}
	if (nfiles > 8) {
		say(err, errlen, "too many seed files");
		goto out;
	}
	memset(lab, ' ', sizeof lab);
	memcpy(lab, label, strlen(label));
	if (rp_random(&serial, sizeof serial) < 0)
		serial = (uint32_t)now;

	b = img;
	b[0] = 0xeb;
	b[1] = 0x3c;
	b[2] = 0x90;
	memcpy(b + 3, "MSWIN4.1", 8);
	put16(b + 11, l->ss);
	b[13] = (unsigned char)l->spc;
	put16(b + 14, 1);
	b[16] = 2;
	put16(b + 17, 512);
	put16(b + 19, l->total < 65536 ? l->total : 0);
	b[21] = 0xf8;
	put16(b + 22, l->fatsz);
	put16(b + 24, 63);
	put16(b + 26, 255);
	put32(b + 28, hidden <= 0xFFFFFFFFu ? (uint32_t)hidden : 0);
	put32(b + 32, l->total < 65536 ? 0 : l->total);
	b[36] = 0x80;
	b[38] = 0x29;
	put32(b + 39, serial);
	memcpy(b + 43, lab, 11);
	memcpy(b + 54, l->bits == 12 ? "FAT12   " : "FAT16   ", 8);
	b[62] = 0xeb; /* not bootable: jmp $ */
	b[63] = 0xfe;
	b[510] = 0x55;
	b[511] = 0xaa;

	root = img + (size_t)(1 + 2 * l->fatsz) * l->ss;
	memcpy(root, lab, 11);
	root[11] = 0x08;
	fat_stamp(root, now);
	ent = 1;

	fat_set(l, img + l->ss, 0, l->bits == 12 ? 0xff8 : 0xfff8);
	fat_set(l, img + l->ss, 1, l->bits == 12 ? 0xfff : 0xffff);
	for (i = 0; i < nfiles; i++) {
		const struct seed_file *f = &files[i];
		size_t nl = strlen(f->name), nlfn = (nl + 12) / 13, k, j;
		uint32_t nclus = (uint32_t)((f->len + cbytes - 1) / cbytes), first = 0, c;
		unsigned n = 1;
		unsigned char *e, sum;

		for (;;) {
			short_alias(f->name, n, shorts[i]);
			for (j = 0; j < i && memcmp(shorts[j], shorts[i], 11) != 0; j++)
				;
			if (j == i)
				break;
			n++;
		}
		sum = lfn_sum(shorts[i]);
		if (ent + nlfn + 1 > 512 || nclus > l->clusters + 2 - next) {
			say(err, errlen, "the seed's files do not fit its filesystem");
			goto out;
		}
		/* Long name entries come last part first, the first of them marked 0x40. */
		for (k = nlfn; k > 0; k--) {
			static const int at[13] = {1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30};

			e = root + 32 * ent++;
			e[0] = (unsigned char)(k | (k == nlfn ? 0x40 : 0));
			e[11] = 0x0f;
			e[13] = sum;
			for (j = 0; j < 13; j++) {
				size_t at_char = (k - 1) * 13 + j;
				uint32_t u = at_char < nl    ? (unsigned char)f->name[at_char]
				             : at_char == nl ? 0x0000
				                             : 0xffff;

				put16(e + at[j], u);
			}
		}
		e = root + 32 * ent++;
		memcpy(e, shorts[i], 11);
		e[11] = 0x20;
		fat_stamp(e, now);
		if (nclus > 0) {
			first = next;
			for (c = 0; c < nclus; c++)
				fat_set(l, img + l->ss, first + c,
				        c + 1 < nclus ? first + c + 1
				                      : (l->bits == 12 ? 0xfff : 0xffff));
			memcpy(img + ((size_t)l->data_start + (size_t)(first - 2) * l->spc) * l->ss,
			       f->data, f->len);
			next += nclus;
		}
		put16(e + 26, first);
		put32(e + 28, (uint32_t)f->len);
	}
	memcpy(img + (size_t)(1 + l->fatsz) * l->ss, img + l->ss, (size_t)l->fatsz * l->ss);
	*out = img;
	img = NULL;
	rc = 0;
out:
	if (img) {
		explicit_bzero(img, bytes);
		free(img);
	}
	return rc;
}

/* ---- reading an ESP's FAT (EFI loader discovery) -------------------------------------- */

struct fat {
	struct disk *d;
	uint64_t base, bytes; /* the partition, byte offset and size */
	unsigned bps, spc, bits;
	uint64_t fat_off, root_off, data_off; /* from base */
	uint32_t root_ents, root_clus, clusters;
};

static int
fat_rd(struct fat *f, uint64_t off, void *buf, size_t n)
{
	char ignored[16];

	if (off > f->bytes || n > f->bytes - off)
		return -1;
	return disk_io(f->d, 0, f->base + off, buf, n, ignored, sizeof ignored);
}

static int
fat_open(struct disk *d, const struct part *p, struct fat *f)
{
	unsigned char b[512];
	uint64_t reserved, nfats, total, fatsz, root_secs, data;

	memset(f, 0, sizeof *f);
	f->d = d;
	f->base = p->first * d->ss;
	f->bytes = (p->last - p->first + 1) * d->ss;
	if (fat_rd(f, 0, b, sizeof b) < 0 || b[510] != 0x55 || b[511] != 0xaa)
		return -1;
	f->bps = le16(b + 11);
	f->spc = b[13];
	reserved = le16(b + 14);
	nfats = b[16];
	f->root_ents = le16(b + 17);
	total = le16(b + 19) ? le16(b + 19) : le32(b + 32);
	fatsz = le16(b + 22) ? le16(b + 22) : le32(b + 36);
	if ((f->bps != 512 && f->bps != 1024 && f->bps != 2048 && f->bps != 4096) || f->spc == 0 ||
	    (f->spc & (f->spc - 1)) != 0 || reserved == 0 || nfats == 0 || fatsz == 0 ||
	    total * f->bps > f->bytes)
		return -1;
	root_secs = ((uint64_t)f->root_ents * 32 + f->bps - 1) / f->bps;
	data = reserved + nfats * fatsz + root_secs;
	if (data >= total)
		return -1;
	f->clusters = (uint32_t)((total - data) / f->spc);
	f->bits = f->clusters < 4085 ? 12 : f->clusters < 65525 ? 16 : 32;
	if ((f->bits == 32) != (le16(b + 22) == 0))
		return -1;
	if (f->bits != 32 && f->root_ents == 0)
		return -1;
	f->root_clus = f->bits == 32 ? le32(b + 44) : 0;
	f->fat_off = reserved * f->bps;
	f->root_off = (reserved + nfats * fatsz) * f->bps;
	f->data_off = data * f->bps;
	/* The FAT must hold an entry for every cluster. */
	if (fatsz * f->bps * 8 / f->bits < (uint64_t)f->clusters + 2)
		return -1;
	return 0;
}

/* The cluster after c, or 0 at the chain's end or on a bad link. */
static uint32_t
fat_next(struct fat *f, uint32_t c)
{
	unsigned char b[4];
	uint32_t v;

	if (c < 2 || c >= f->clusters + 2)
		return 0;
	if (f->bits == 12) {
		if (fat_rd(f, f->fat_off + c + c / 2, b, 2) < 0)
			return 0;
		v = le16(b);
		v = c & 1 ? v >> 4 : v & 0xfff;
	} else if (f->bits == 16) {
		if (fat_rd(f, f->fat_off + 2 * (uint64_t)c, b, 2) < 0)
			return 0;
		v = le16(b);
	} else {
		if (fat_rd(f, f->fat_off + 4 * (uint64_t)c, b, 4) < 0)
			return 0;
		v = le32(b) & 0x0fffffff;
	}
	return v >= 2 && v < f->clusters + 2 ? v : 0;
}

/* A directory entry as fat_dir() reports it. */
struct fat_ent {
	char name[256]; /* the long name (non-ASCII characters as '?'), else the 8.3 one */
	int dir;
	uint32_t clus;
};

/* Long name assembly across entries. */
struct lfn {
	char name[256];
	int expect; /* ordinal the next entry must have; 0: none pending */
	unsigned char sum;
	int ok;
};

static void
lfn_take(struct lfn *s, const unsigned char *e)
{
	static const int at[13] = {1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30};
	int ord = e[0] & 0x3f, j;

	if (e[0] & 0x40) {
		memset(s->name, 0, sizeof s->name);
		s->sum = e[13];
		s->expect = ord;
		s->ok = ord >= 1 && ord <= 20;
	}
	if (!s->ok || ord != s->expect || e[13] != s->sum) {
		s->ok = 0;
		return;
	}
	for (j = 0; j < 13; j++) {
		uint16_t u = le16(e + at[j]);
		size_t k = (size_t)(ord - 1) * 13 + (size_t)j;

		if (u == 0 || u == 0xffff || k >= sizeof s->name - 1)
			continue;
		s->name[k] = u < 0x80 ? (char)u : '?';
	}
	s->expect--;
}

/* Call found() for each entry of the directory at cluster dir (0: a FAT12/16 root); found()
 * returning 1 stops. 0 when done or stopped, -1 when it cannot be read. */
static int
fat_dir(struct fat *f, uint32_t dir, int (*found)(void *, const struct fat_ent *), void *arg)
{
	unsigned char buf[4096];
	struct lfn lfn = {0};
	uint64_t off, len, pos, steps = 0, seen = 0;
	uint32_t clus = dir;

	if (dir == 0 && f->bits == 32)
		clus = f->root_clus;
	for (;;) {
		if (clus == 0) {
			off = f->root_off;
			len = (uint64_t)f->root_ents * 32;
		} else {
			if (clus < 2 || clus >= f->clusters + 2)
				return -1;
			off = f->data_off + (uint64_t)(clus - 2) * f->spc * f->bps;
			len = (uint64_t)f->spc * f->bps;
		}
		for (pos = 0; pos < len; pos += sizeof buf) {
			size_t n = len - pos < sizeof buf ? (size_t)(len - pos) : sizeof buf, i;

			if (fat_rd(f, off + pos, buf, n) < 0)
				return -1;
			for (i = 0; i + 32 <= n; i += 32) {
				const unsigned char *e = buf + i;
				struct fat_ent fe = {{0}};
				size_t k, m = 0;

				/* FAT directories hold at most 65536 entries; a longer chain
				 * is damage, and would only cost time. */
				if (e[0] == 0 || ++seen > 65536)
					return 0;
				if (e[0] == 0xe5) {
					lfn.ok = 0;
					continue;
				}
				if ((e[11] & 0x3f) == 0x0f) {
					lfn_take(&lfn, e);
					continue;
				}
				if (e[11] & 0x08) { /* a volume label */
					lfn.ok = 0;
					continue;
				}
				if (lfn.ok && lfn.expect == 0 && lfn_sum(e) == lfn.sum &&
				    lfn.name[0]) {
					memcpy(fe.name, lfn.name, sizeof fe.name);
				} else {
					/* Windows NT's case bits: a lower-case 8.3 name needs
					 * no long name. */
					/* Bytes of an OEM code page become '?', as in long
					 * names: the name goes into JSON, which is UTF-8. */
					for (k = 0; k < 8 && e[k] != ' '; k++)
						fe.name[m++] =
						        e[k] >= 0x80 || (k == 0 && e[k] == 0x05)
						                ? '?'
						                : (char)(e[12] & 0x08
						                                 ? tolower(e[k])
						                                 : e[k]);
					if (e[8] != ' ')
						fe.name[m++] = '.';
					for (k = 8; k < 11 && e[k] != ' '; k++)
						fe.name[m++] =
						        e[k] >= 0x80
						                ? '?'
						                : (char)(e[12] & 0x10
						                                 ? tolower(e[k])
						                                 : e[k]);
				}
				lfn.ok = 0;
				fe.dir = (e[11] & 0x10) != 0;
				fe.clus = le16(e + 26) |
				          (f->bits == 32 ? (uint32_t)le16(e + 20) << 16 : 0);
				if (strcmp(fe.name, ".") == 0 || strcmp(fe.name, "..") == 0)
					continue;
				if (found(arg, &fe))
					return 0;
			}
		}
		if (clus == 0)
			return 0;
		/* A chain longer than the filesystem's clusters is a loop. */
		if (++steps > f->clusters)
			return -1;
		clus = fat_next(f, clus);
		if (clus == 0)
			return 0;
	}
}

struct fat_find {
	const char *want;
	int dir;
	struct fat_ent got;
	int found;
};

static int
find_cb(void *arg, const struct fat_ent *e)
{
	struct fat_find *q = arg;

	if (e->dir != q->dir || strcasecmp(e->name, q->want) != 0)
		return 0;
	q->got = *e;
	q->found = 1;
	return 1;
}

/* The entry want (a file, or a directory when dir) in directory at; 1 found, 0 not, -1
 * unreadable. */
static int
fat_find(struct fat *f, uint32_t at, const char *want, int dir, struct fat_ent *got)
{
	struct fat_find q = {.want = want, .dir = dir};

	if (fat_dir(f, at, find_cb, &q) < 0)
		return -1;
	if (q.found)
		*got = q.got;
	return q.found;
}

struct subdirs {
	struct fat_ent e[EFI_SUBDIRS];
	size_t n;
};

static int
subdir_cb(void *arg, const struct fat_ent *e)
{
	struct subdirs *s = arg;

	if (e->dir && s->n < EFI_SUBDIRS)
		s->e[s->n++] = *e;
	return 0;
}

/* Whether the loader path (\EFI\x\y.efi) names a file on the ESP: 1, 0, -1 unreadable. */
static int
efi_loader_exists(struct fat *f, const char *loader)
{
	char copy[256], *save = NULL, *c, *nextc;
	struct fat_ent e = {{0}};
	uint32_t at = 0;
	int r;

	snprintf(copy, sizeof copy, "%s", loader);
	c = strtok_r(copy, "\\", &save);
	while (c) {
		nextc = strtok_r(NULL, "\\", &save);
		r = fat_find(f, at, c, nextc != NULL, &e);
		if (r <= 0)
			return r;
		at = e.clus;
		if (nextc && at == 0)
			return 0; /* ".." to the root, or a broken entry */
		c = nextc;
	}
	return 1;
}

/* The first of \EFI\*\shim<arch>.efi, \EFI\*\grub<arch>.efi, \EFI\BOOT\BOOT<ARCH>.EFI on the
 * ESP, as its names are written there, into loader; its directory (the default label) into
 * vendor. 0, or -1 with err set. */
static int
efi_discover(struct fat *f, char *loader, size_t ln, char *vendor, size_t vn, char *err,
             size_t errlen)
{
	static const char *const want[] = {"shim" EFI_ARCH ".efi", "grub" EFI_ARCH ".efi"};
	struct subdirs *s = calloc(1, sizeof *s);
	struct fat_ent efi, e;
	size_t w, i;
	int rc = -1;

	if (s == NULL) {
		say(err, errlen, "out of memory");
		goto out;
	}
	if (fat_find(f, 0, "EFI", 1, &efi) != 1 || fat_dir(f, efi.clus, subdir_cb, s) < 0) {
		say(err, errlen, "the ESP has no readable \\EFI directory; give uefi.loader");
		goto out;
	}
	for (w = 0; w < sizeof want / sizeof *want; w++)
		for (i = 0; i < s->n; i++)
			if (fat_find(f, s->e[i].clus, want[w], 0, &e) == 1) {
				if ((size_t)snprintf(loader, ln, "\\%s\\%s\\%s", efi.name,
				                     s->e[i].name, e.name) >= ln) {
					say(err, errlen, "the ESP's loader path is too long");
					goto out;
				}
				snprintf(vendor, vn, "%s", s->e[i].name);
				rc = 0;
				goto out;
			}
	for (i = 0; i < s->n; i++)
		if (strcasecmp(s->e[i].name, "BOOT") == 0 &&
		    fat_find(f, s->e[i].clus, EFI_FALLBACK, 0, &e) == 1) {
			if ((size_t)snprintf(loader, ln, "\\%s\\%s\\%s", efi.name, s->e[i].name,
			                     e.name) >= ln) {
				say(err, errlen, "the ESP's loader path is too long");
				goto out;
			}
			snprintf(vendor, vn, "%s", "Linux");
			rc = 0;
			goto out;
		}
	say(err, errlen,
	    "no boot loader on the ESP (looked for \\EFI\\*\\shim%s.efi, \\EFI\\*\\grub%s.efi, "
	    "\\EFI\\BOOT\\%s); give uefi.loader",
	    EFI_ARCH, EFI_ARCH, EFI_FALLBACK);
out:
	free(s);
	return rc;
}

/* ---- efibootmgr ----------------------------------------------------------------------- */

/* path of an executable named name on PATH into buf. 0, or -1 when there is none. */
static int
find_tool(const char *name, char *buf, size_t n)
{
	const char *path = getenv("PATH"), *p, *end;

	if (path == NULL || *path == '\0')
		path = "/usr/sbin:/usr/bin:/sbin:/bin";
	for (p = path; *p; p = *end ? end + 1 : end) {
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		if (end == p)
			continue;
		if (snprintf(buf, n, "%.*s/%s", (int)(end - p), p, name) < (int)n &&
		    access(buf, X_OK) == 0)
			return 0;
	}
	return -1;
}

static int
collect(void *arg, const void *p, size_t n)
{
	struct rp_buf *b = arg;

	/* What passes the cap is dropped, not refused: efibootmgr must finish its work. */
	if (!b->toobig && rp_buf_append(b, p, n) < 0 && b->oom)
		return -1;
	return 0;
}

/* Run efibootmgr with args (NULL-terminated, argv[0] not included); its output into out
 * (capped). 0 when it exited 0; else -1 with err naming what failed and its output's end. */
static int
efi_run(const char *tool, const char *const *args, struct rp_buf *out, char *err, size_t errlen)
{
	char *argv[16];
	struct rp_agent_proc p = {0};
	struct rp_agent_proc_end end = {0};
	size_t i;

	argv[0] = (char *)"efibootmgr";
	for (i = 0; args[i] && i < 14; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	rp_buf_init(out, EFI_OUTPUT_MAX);
	p.path = tool;
	p.argv = argv;
	p.envp = environ;
	p.stderr_output = 1;
	p.timeout_ms = EFI_TIMEOUT_MS;
	p.grace_ms = 2000;
	p.cancel = &rp_agent_cancelled;
	p.output = collect;
	p.arg = out;
	if (rp_agent_proc_run(&p, &end) < 0) {
		say(err, errlen, "cannot run %s: %s", tool, strerror(errno));
		return -1;
	}
	if (end.timed_out || end.exec_errno || !WIFEXITED(end.status) ||
	    WEXITSTATUS(end.status) != 0) {
		const char *o = out->len ? out->data : "";
		size_t ol = strlen(o);

		say(err, errlen, "efibootmgr %s failed (%s): %s", args[0],
		    end.timed_out           ? "timed out"
		    : end.exec_errno        ? strerror(end.exec_errno)
		    : WIFEXITED(end.status) ? "exit status not 0"
		                            : "killed by a signal",
		    ol > 400 ? o + ol - 400 : o);
		return -1;
	}
	return 0;
}

/* The boot number (4 hex digits) at s, after "Boot": 1 and num set, else 0. */
static int
boot_num(const char *s, char num[5])
{
	int i;

	for (i = 0; i < 4; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	memcpy(num, s, 4);
	num[4] = '\0';
	return 1;
}

/* From `efibootmgr -v` output, the entries labelled label whose device path names the same
 * ESP (GPT: its partition GUID; MBR: the disk signature and partition number): a previous
 * run's, to be replaced rather than piled up in NVRAM. */
static size_t
efi_stale(const char *listing, const char *label, const char *esp_id, char found[][5], size_t max)
{
	const char *line = listing;
	size_t n = 0, ll = strlen(label);

	while (line && *line && n < max) {
		const char *eol = strchr(line, '\n'), *p;
		char num[5], text[1024];

		snprintf(text, sizeof text, "%.*s", eol ? (int)(eol - line) : (int)strlen(line),
		         line);
		line = eol ? eol + 1 : NULL;
		if (strncmp(text, "Boot", 4) != 0 || !boot_num(text + 4, num))
			continue;
		p = text + 8;
		if (*p == '*')
			p++;
		while (*p == ' ')
			p++;
		if (strncmp(p, label, ll) == 0 && (p[ll] == '\t' || p[ll] == ' ') &&
		    strcasestr(p + ll, esp_id) != NULL)
			memcpy(found[n++], num, 5);
	}
	return n;
}

/* The new entry from `efibootmgr -c` output: the first of BootOrder (where -c puts it), else
 * the last line naming label. 1 and num set, else 0. */
static int
efi_created(const char *o, const char *label, char num[5])
{
	const char *p = strstr(o, "BootOrder: "), *line;
	int got = 0;

	if (p && boot_num(p + 11, num))
		return 1;
	for (line = o; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *q = line + 8;

		if (strncmp(line, "Boot", 4) != 0 || !boot_num(line + 4, num))
			continue;
		if (*q == '*')
			q++;
		while (*q == ' ')
			q++;
		if (strncmp(q, label, strlen(label)) == 0)
			got = 1;
	}
	return got;
}

/* ---- the request ---------------------------------------------------------------------- */

struct seed_req {
	int want;
	char label[12]; /* upper case: the FAT label */
	char name[12];  /* lower case: the GPT partition's name */
	struct seed_file files[4];
	size_t nfiles, bytes;
};

struct efi_req {
	int want;
	int legacy;         /* no EFI firmware: nothing to do */
	const char *loader; /* NULL: discover */
	const char *label;  /* NULL: the loader's vendor directory */
	char tool[RP_AGENT_PATH_MAX];
};

static int
seed_parse(json_t *seed, struct seed_req *s, char *err, size_t errlen)
{
	static const char *const names[] = {"meta-data", "user-data", "network-config",
	                                    "vendor-data"};
	const char *key, *label = "cidata";
	json_t *v;
	size_t i;

	if (!json_is_object(seed)) {
		say(err, errlen, "seed must be an object");
		return -1;
	}
	json_object_foreach(seed, key, v)
	{
		if (strcmp(key, "label") == 0) {
			if (!json_is_string(v)) {
				say(err, errlen, "seed.label must be a string");
				return -1;
			}
			label = json_string_value(v);
			continue;
		}
		for (i = 0; i < 4 && strcmp(key, names[i]) != 0; i++)
			;
		if (i == 4) {
			say(err, errlen, "seed: unknown member %s", key);
			return -1;
		}
		if (!json_is_string(v)) {
			say(err, errlen, "seed.%s must be a string", key);
			return -1;
		}
	}
	for (i = 0; i < 4; i++) {
		v = json_object_get(seed, names[i]);
		if (v == NULL) {
			/* What cloud-init's NoCloud requires; without network-config it
			 * configures the first NIC with DHCP. */
			if (i < 2) {
				say(err, errlen, "seed.%s is missing", names[i]);
				return -1;
			}
			continue;
		}
		s->files[s->nfiles].name = names[i];
		s->files[s->nfiles].data = json_string_value(v);
		s->files[s->nfiles].len = json_string_length(v);
		if (s->files[s->nfiles].len > SEED_CONTENT_MAX - s->bytes) {
			say(err, errlen, "the seed's files exceed %d MiB", SEED_CONTENT_MAX / MIB);
			return -1;
		}
		s->bytes += s->files[s->nfiles].len;
		s->nfiles++;
	}
	if (strlen(label) < 1 || strlen(label) > 11 ||
	    strspn(label, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                  "abcdefghijklmnopqrstuvwxyz"
	                  "0123456789_-") != strlen(label)) {
		say(err, errlen, "seed.label must be 1-11 of A-Z, a-z, 0-9, '_', '-'");
		return -1;
	}
	for (i = 0; label[i]; i++) {
		s->label[i] = (char)toupper((unsigned char)label[i]);
		s->name[i] = (char)tolower((unsigned char)label[i]);
	}
	/* The defaults were longer: end the copies here ("ab" is not "ABDATA"). */
	s->label[i] = '\0';
	s->name[i] = '\0';
	s->want = 1;
	return 0;
}

static int
printable(const char *s, size_t max)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	return 1;
}

static int
efi_parse(json_t *uefi, struct efi_req *e, char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	struct stat st;

	if (!json_is_object(uefi)) {
		say(err, errlen, "uefi must be an object");
		return -1;
	}
	json_object_foreach(uefi, key, v)
	{
		if (strcmp(key, "loader") != 0 && strcmp(key, "label") != 0) {
			say(err, errlen, "uefi: unknown member %s", key);
			return -1;
		}
		if (!json_is_string(v) || !printable(json_string_value(v), 255)) {
			say(err, errlen, "uefi.%s must be 1-255 printable ASCII characters", key);
			return -1;
		}
	}
	e->loader = json_string_value(json_object_get(uefi, "loader"));
	e->label = json_string_value(json_object_get(uefi, "label"));
	if (e->loader && (e->loader[0] != '\\' || strstr(e->loader, "\\\\"))) {
		say(err, errlen, "uefi.loader must be an ESP path like \\EFI\\debian\\shim%s.efi",
		    EFI_ARCH);
		return -1;
	}
	e->want = 1;
	if (stat(rp_agent_efi_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		e->legacy = 1;
		return 0;
	}
	/* Checked before the disk is touched: a UEFI deploy without an entry may not boot. */
	if (find_tool("efibootmgr", e->tool, sizeof e->tool) < 0) {
		say(err, errlen, "efibootmgr is not installed in the ramdisk");
		return -1;
	}
	return 0;
}

/* ---- putting it together -------------------------------------------------------------- */

/* CHS of an LBA as an MBR entry holds it (255 heads, 63 sectors; past cylinder 1023 the
 * "use LBA" marker fdisk writes). */
static void
chs(uint64_t lba, unsigned char out[3])
{
	uint64_t c = lba / (255 * 63), h = lba / 63 % 255, s = lba % 63 + 1;

	if (c > 1023) {
		out[0] = 0xfe;
		out[1] = 0xff;
		out[2] = 0xff;
		return;
	}
	out[0] = (unsigned char)h;
	out[1] = (unsigned char)(s | (c >> 2 & 0xc0));
	out[2] = (unsigned char)c;
}

/* 1 when MBR partition p holds a seed this function made: type 0x0c and a FAT boot sector
 * with the label. */
static int
mbr_is_seed(struct disk *d, const struct part *p, const char *label)
{
	unsigned char b[4096], lab[11];
	char ignored[16];

	if (p->mbr_type != MBR_SEED_TYPE || disk_rd(d, p->first, b, 1, ignored, sizeof ignored) < 0)
		return 0;
	memset(lab, ' ', sizeof lab);
	memcpy(lab, label, strlen(label));
	return b[510] == 0x55 && b[511] == 0xaa && b[38] == 0x29 && memcmp(b + 43, lab, 11) == 0 &&
	       memcmp(b + 54, "FAT1", 4) == 0;
}

struct layout {
	const struct part *seed; /* a seed an earlier run made, at the disk's end; or NULL */
	const struct part *root; /* the last partition that is not that seed */
	unsigned seed_slot;
	uint64_t seed_first, seed_last; /* the new seed */
	uint64_t root_last;             /* the root's last LBA after growing */
	const char *not_grown;          /* why not, or NULL */
	char why[160];
};

static int
plan_layout(struct disk *d, struct table *t, int grow, const struct seed_req *s, struct layout *L,
            char *err, size_t errlen)
{
	const struct part *last = part_last(t, NULL);
	uint64_t align = MIB / d->ss, limit = t->usable_last;
	size_t i;

	if (t->gpt ? guid_is(last->type, TYPE_BASIC) &&
	                     gpt_named(t->ents + (size_t)last->slot * t->esize, s->name)
	           : mbr_is_seed(d, last, s->label))
		L->seed = last;
	L->root = part_last(t, L->seed);
	/* A seed that stays (none requested this time) bounds the root's growth. */
	if (L->seed && !s->want)
		limit = L->seed->first - 1;
	if (s->want) {
		uint64_t want = (uint64_t)s->bytes + s->bytes / 8 + 2 * MIB, have, free_from;

		want = want < SEED_MIN ? SEED_MIN : (want + MIB - 1) / MIB * MIB;
		want /= d->ss;
		free_from = L->root ? L->root->last + 1 : t->usable_first;
		L->seed_last = t->usable_last;
		L->seed_first = t->usable_last + 1 >= want
		                        ? (t->usable_last + 1 - want) / align * align
		                        : 0;
		if (L->seed_first < free_from || L->seed_first < t->usable_first) {
			have = t->usable_last + 1 > free_from ? t->usable_last + 1 - free_from : 0;
			say(err, errlen,
			    "%s: the free space at the end of the disk (%llu KiB) is too small for "
			    "the seed partition (%llu KiB)",
			    d->dev, (unsigned long long)(have * d->ss / 1024),
			    (unsigned long long)(want * d->ss / 1024));
			return -1;
		}
		limit = L->seed_first - 1;
		if (L->seed) {
			L->seed_slot = L->seed->slot;
		} else {
			/* The first slot no used partition holds. */
			for (L->seed_slot = 0; L->seed_slot < t->nslots; L->seed_slot++) {
				for (i = 0; i < t->nparts && t->parts[i].slot != L->seed_slot; i++)
					;
				if (i == t->nparts)
					break;
			}
			if (L->seed_slot == t->nslots) {
				say(err, errlen,
				    t->gpt ? "%s: no free GPT entry for the seed partition"
				           : "%s: no free primary MBR slot for the seed partition "
				             "(all 4 are used)",
				    d->dev);
				return -1;
			}
		}
	}
	L->root_last = L->root ? L->root->last : 0;
	if (!grow)
		return 0;
	if (L->root == NULL) {
		L->not_grown = "there is no partition to grow";
	} else if (!part_linux(t, L->root)) {
		char type[40];

		part_type_text(t, L->root, type, sizeof type);
		snprintf(L->why, sizeof L->why,
		         "the last partition (%u) is type %s, not a Linux filesystem",
		         L->root->slot + 1, type);
		L->not_grown = L->why;
	} else if (L->root->last >= limit) {
		snprintf(L->why, sizeof L->why,
		         "partition %u already reaches the end of the free space",
		         L->root->slot + 1);
		L->not_grown = L->why;
	} else {
		L->root_last = limit;
		/* The MBR's count field is 32 bits. */
		if (!t->gpt && L->root_last - L->root->first + 1 > 0xFFFFFFFFu)
			L->root_last = L->root->first + 0xFFFFFFFFu - 1;
	}
	return 0;
}

static int
write_gpt(struct disk *d, struct table *t, const struct layout *L, const struct seed_req *s,
          char *err, size_t errlen)
{
	uint64_t bytes = (uint64_t)t->nent * t->esize;
	uint64_t new_alt = d->sectors - 1, bents = new_alt - t->ents_sectors;
	unsigned char *h = t->hdr, *backup = NULL;
	size_t i;
	int rc = -1;

	if (s->want) {
		unsigned char *e = t->ents + (size_t)L->seed_slot * t->esize;
		unsigned char type[16], uuid[16];

		guid_bytes(TYPE_BASIC, type);
		if (rp_random(uuid, sizeof uuid) < 0) {
			say(err, errlen, "no randomness for the seed's partition GUID");
			goto out;
		}
		uuid[7] = (unsigned char)((uuid[7] & 0x0f) | 0x40); /* version 4 */
		uuid[8] = (unsigned char)((uuid[8] & 0x3f) | 0x80);
		memset(e, 0, t->esize);
		memcpy(e, type, 16);
		memcpy(e + 16, uuid, 16);
		put64(e + 32, L->seed_first);
		put64(e + 40, L->seed_last);
		for (i = 0; s->name[i]; i++)
			put16(e + 56 + 2 * i, (unsigned char)s->name[i]);
	}
	if (L->root && L->root_last != L->root->last)
		put64(t->ents + (size_t)L->root->slot * t->esize + 40, L->root_last);

	put64(h + 32, new_alt);
	put64(h + 48, t->usable_last);
	put32(h + 88, gpt_crc(t->ents, bytes));
	put32(h + 16, gpt_hdr_crc(h, t->hsize));
	backup = calloc(1, d->ss);
	if (backup == NULL) {
		say(err, errlen, "out of memory");
		goto out;
	}
	memcpy(backup, h, t->hsize);
	put64(backup + 24, new_alt);
	put64(backup + 32, 1);
	put64(backup + 72, bents);
	put32(backup + 16, gpt_hdr_crc(backup, t->hsize));

	/* The backup first: a stop before the primary is written leaves the old primary
	 * whole, and a tool repairs the backup from it. */
	if (disk_wr(d, bents, t->ents, t->ents_sectors, err, errlen) < 0 ||
	    disk_wr(d, new_alt, backup, 1, err, errlen) < 0 ||
	    disk_wr(d, t->ents_lba, t->ents, t->ents_sectors, err, errlen) < 0 ||
	    disk_wr(d, 1, h, 1, err, errlen) < 0)
		goto out;
	/* A protective MBR (one 0xEE entry from LBA 1) covers the whole disk, as far as 32
	 * bits reach; a hybrid MBR is left as it is. */
	{
		unsigned used = 0, pm = 4;

		for (i = 0; i < 4; i++) {
			const unsigned char *e = t->mbr + 446 + 16 * i;

			if (e[4] != 0) {
				used++;
				if (e[4] == MBR_GPT_TYPE && le32(e + 8) == 1)
					pm = (unsigned)i;
			}
		}
		if (used == 1 && pm < 4) {
			uint64_t n = d->sectors - 1;

			put32(t->mbr + 446 + 16 * pm + 12,
			      n > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)n);
			if (disk_wr(d, 0, t->mbr, 1, err, errlen) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	free(backup);
	return rc;
}

static int
write_mbr(struct disk *d, struct table *t, const struct layout *L, const struct seed_req *s,
          char *err, size_t errlen)
{
	if (s->want) {
		unsigned char *e = t->mbr + 446 + 16 * L->seed_slot;

		memset(e, 0, 16);
		chs(L->seed_first, e + 1);
		e[4] = MBR_SEED_TYPE;
		chs(L->seed_last, e + 5);
		put32(e + 8, (uint32_t)L->seed_first);
		put32(e + 12, (uint32_t)(L->seed_last - L->seed_first + 1));
	}
	if (L->root && L->root_last != L->root->last) {
		unsigned char *e = t->mbr + 446 + 16 * L->root->slot;

		chs(L->root_last, e + 5);
		put32(e + 12, (uint32_t)(L->root_last - L->root->first + 1));
	}
	return disk_wr(d, 0, t->mbr, 1, err, errlen);
}

/* Have the kernel read the new table (a block device only). */
static int
reread(struct disk *d, json_t *out, char *err, size_t errlen)
{
	int i;

	for (i = 0;; i++) {
		if (ioctl(d->fd, BLKRRPART) == 0)
			return 0;
		/* Partition scanning off (a loop device without -P): nothing to tell. */
		if (errno == EINVAL) {
			json_object_set_new(out, "reread",
			                    json_string("not supported by the device"));
			return 0;
		}
		if (errno != EBUSY || i + 1 >= REREAD_TRIES)
			break;
		sleep(1);
	}
	say(err, errlen,
	    "%s: the kernel did not re-read the partition table: %s (a partition is in use?); the "
	    "new table is on disk",
	    d->dev, strerror(errno));
	return -1;
}

/* What the EFI entry will say, settled before the disk is written. */
struct efi_plan {
	unsigned part; /* the ESP's number */
	char loader[300];
	char label[256];
	char id[64]; /* how `efibootmgr -v` names the ESP: GPT partition GUID or MBR HD() */
};

static int
efi_prepare(struct disk *d, struct table *t, const struct efi_req *e, struct efi_plan *p, char *err,
            size_t errlen)
{
	const struct part *esp = NULL;
	char vendor[256] = "";
	struct fat fat;
	size_t i;
	int fat_ok;

	for (i = 0; i < t->nparts && esp == NULL; i++)
		if (t->gpt ? guid_is(t->parts[i].type, TYPE_ESP)
		           : t->parts[i].mbr_type == MBR_ESP_TYPE)
			esp = &t->parts[i];
	if (esp == NULL) {
		say(err, errlen, "%s has no EFI system partition", d->dev);
		return -1;
	}
	p->part = esp->slot + 1;
	fat_ok = fat_open(d, esp, &fat) == 0;
	if (e->loader) {
		snprintf(p->loader, sizeof p->loader, "%s", e->loader);
		if (fat_ok && efi_loader_exists(&fat, e->loader) == 0) {
			say(err, errlen, "uefi.loader %s is not on the ESP (partition %u)",
			    e->loader, p->part);
			return -1;
		}
		if (sscanf(p->loader, "\\%*[^\\]\\%255[^\\]\\", vendor) != 1 ||
		    strcasecmp(vendor, "BOOT") == 0)
			snprintf(vendor, sizeof vendor, "Linux");
	} else if (!fat_ok) {
		say(err, errlen,
		    "the ESP (partition %u) is not a FAT filesystem this agent reads; give "
		    "uefi.loader",
		    p->part);
		return -1;
	} else if (efi_discover(&fat, p->loader, sizeof p->loader, vendor, sizeof vendor, err,
	                        errlen) < 0) {
		return -1;
	}
	snprintf(p->label, sizeof p->label, "%s", e->label ? e->label : vendor);
	if (t->gpt)
		guid_text(esp->uuid, p->id);
	else
		snprintf(p->id, sizeof p->id, "HD(%u,MBR,0x%x,", p->part, le32(t->mbr + 440));
	return 0;
}

/* Replace a previous run's entry for this ESP and label, create the new one. */
static json_t *
efi_apply(struct disk *d, const struct efi_req *e, const struct efi_plan *p, char *err,
          size_t errlen)
{
	char tool_err[512], stale[16][5], num[5], pnum[16];
	struct rp_buf o = {0};
	json_t *res = NULL, *removed = json_array();
	size_t i, n = 0;

	snprintf(pnum, sizeof pnum, "%u", p->part);
	/* Listing may fail where creating works (odd firmware): then nothing is replaced. */
	{
		const char *args[] = {"-v", NULL};

		if (efi_run(e->tool, args, &o, tool_err, sizeof tool_err) == 0 && o.len)
			n = efi_stale(o.data, p->label, p->id, stale, 16);
		rp_buf_free(&o);
	}
	for (i = 0; i < n; i++) {
		const char *args[] = {"-b", stale[i], "-B", NULL};

		if (efi_run(e->tool, args, &o, err, errlen) < 0)
			goto out;
		rp_buf_free(&o);
		json_array_append_new(removed, json_sprintf("Boot%s", stale[i]));
	}
	{
		const char *args[] = {"-c", "-d",     d->dev, "-p",      pnum,
		                      "-L", p->label, "-l",   p->loader, NULL};

		if (efi_run(e->tool, args, &o, err, errlen) < 0)
			goto out;
	}
	res = json_pack("{s:s, s:i, s:s, s:s, s:O}", "disk", d->dev, "partition", (int)p->part,
	                "loader", p->loader, "label", p->label, "replaced", removed);
	if (res == NULL) {
		say(err, errlen, "out of memory");
		goto out;
	}
	json_object_set_new(res, "entry",
	                    efi_created(o.len ? o.data : "", p->label, num)
	                            ? json_sprintf("Boot%s", num)
	                            : json_null());
out:
	rp_buf_free(&o);
	json_decref(removed);
	return res;
}

int
rp_agent_disk_finish(const char *dev, json_t *step, json_t *result, char *err, size_t errlen)
{
	struct disk d = {.fd = -1};
	struct table t = {0};
	struct seed_req s = {.label = "CIDATA", .name = "cidata"};
	struct efi_req e = {0};
	struct efi_plan ep = {0};
	struct layout L = {0};
	struct fat_layout fl = {0};
	json_t *out = json_object(), *gv = json_object_get(step, "grow"), *v;
	unsigned char *fs = NULL;
	size_t fs_bytes = 0;
	int rc = -1, grow = json_is_true(gv), change;

	if (out == NULL) {
		say(err, errlen, "out of memory");
		goto out;
	}
	if (gv && !json_is_boolean(gv)) {
		say(err, errlen, "grow must be true or false");
		goto out;
	}
	if ((v = json_object_get(step, "seed")) && seed_parse(v, &s, err, errlen) < 0)
		goto out;
	if ((v = json_object_get(step, "uefi")) && efi_parse(v, &e, err, errlen) < 0)
		goto out;
	if (e.want && e.legacy)
		json_object_set_new(
		        out, "efi",
		        json_pack("{s:s}", "skipped", "legacy boot: no EFI entry needed"));
	if (!grow && !s.want && (!e.want || e.legacy))
		goto done;

	/* Everything that can fail without writing comes first: a refusal leaves the disk as
	 * the image step wrote it. */
	if (disk_open(&d, dev, err, errlen) < 0 || table_read(&d, &t, err, errlen) < 0)
		goto out;
	json_object_set_new(out, "partition_table", json_string(t.gpt ? "gpt" : "mbr"));
	if (plan_layout(&d, &t, grow, &s, &L, err, errlen) < 0)
		goto out;
	if (e.want && !e.legacy && efi_prepare(&d, &t, &e, &ep, err, errlen) < 0)
		goto out;
	if (s.want) {
		uint64_t n = L.seed_last - L.seed_first + 1;

		if (fat_plan(d.ss, n, &fl) < 0) {
			say(err, errlen, "no FAT12/16 layout fits a seed of %llu sectors",
			    (unsigned long long)n);
			goto out;
		}
		fs_bytes = (size_t)fl.total * fl.ss;
		if (fat_build(&fl, L.seed_first, s.label, s.files, s.nfiles, &fs, err, errlen) < 0)
			goto out;
	}

	/* The image's backup GPT header, when it moves, lies in free space or past the root's
	 * filesystem: left there, a tool could take it for this disk's. */
	change = s.want || (L.root && L.root_last != L.root->last) ||
	         (t.gpt && t.alt != d.sectors - 1);
	if (change && t.gpt && t.alt != d.sectors - 1 && t.alt > part_last(&t, NULL)->last &&
	    disk_zero(&d, t.alt * d.ss, d.ss, err, errlen) < 0)
		goto out;
	if (s.want) {
		/* A replaced seed's secrets must not linger in what becomes free space. */
		if (L.seed) {
			uint64_t ob = (L.seed->last - L.seed->first + 1) * d.ss;

			if (disk_zero(&d, L.seed->first * d.ss,
			              ob < OLD_SEED_WIPE ? ob : OLD_SEED_WIPE, err, errlen) < 0)
				goto out;
		}
		if (disk_wr(&d, L.seed_first, fs, fl.total, err, errlen) < 0)
			goto out;
	}
	if (change && (t.gpt ? write_gpt(&d, &t, &L, &s, err, errlen)
	                     : write_mbr(&d, &t, &L, &s, err, errlen)) < 0)
		goto out;
	if (fsync(d.fd) < 0) {
		say(err, errlen, "fsync %s: %s", dev, strerror(errno));
		goto out;
	}
	if (change && d.blk && reread(&d, out, err, errlen) < 0)
		goto out;

	if (s.want)
		json_object_set_new(out, "seed",
		                    json_pack("{s:i, s:I, s:I, s:s, s:s, s:b}", "partition",
		                              (int)L.seed_slot + 1, "start_bytes",
		                              (json_int_t)(L.seed_first * d.ss), "size_bytes",
		                              (json_int_t)((L.seed_last - L.seed_first + 1) * d.ss),
		                              "label", s.label, "filesystem",
		                              fl.bits == 12 ? "FAT12" : "FAT16", "replaced",
		                              L.seed != NULL));
	if (grow && L.not_grown)
		json_object_set_new(out, "not_grown", json_string(L.not_grown));
	else if (grow)
		json_object_set_new(
		        out, "grown",
		        json_pack(
		                "{s:i, s:I, s:I}", "partition", (int)L.root->slot + 1, "from_bytes",
		                (json_int_t)((L.root->last - L.root->first + 1) * d.ss), "to_bytes",
		                (json_int_t)((L.root_last - L.root->first + 1) * d.ss)));
	if (e.want && !e.legacy) {
		json_t *entry = efi_apply(&d, &e, &ep, err, errlen);

		if (entry == NULL)
			goto out;
		json_object_set_new(out, "efi", entry);
	}
done:
	json_object_update(result, out);
	rc = 0;
out:
	if (fs) {
		explicit_bzero(fs, fs_bytes);
		free(fs);
	}
	if (d.fd >= 0)
		close(d.fd);
	table_free(&t);
	json_decref(out);
	return rc;
}
