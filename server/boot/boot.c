/* iPXE scripts, image hashing, Range headers and dnsmasq's host file. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot.h"

/* Nothing that could end a line or open a quote reaches an iPXE command line. */
static int
safe(const char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\'' || *s == '\\' || *s == 0x7f)
			return 0;
	return 1;
}

/* Image names become URL path segments and the UEFI initrd= name. */
static int
plain_name(const char *s)
{
	size_t i;

	if (s == NULL || s[0] == '\0' || s[0] == '.')
		return 0;
	for (i = 0; s[i]; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("._-", s[i])))
			return 0;
	return 1;
}

/* What an echo line shows: printable ASCII without quotes, backslashes or iPXE's "${"
 * expansion, so a message never fails the script that carries it (a machine told why it
 * boots locally is better than one that gets a 500). */
static const char *
echo_text(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	for (; s && *s && n + 1 < len; s++)
		buf[n++] = ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f || *s == '"' ||
		            *s == '\'' || *s == '\\' || *s == '$')
		                   ? '_'
		                   : *s;
	buf[n] = '\0';
	return buf;
}

int
rp_boot_ipxe(const struct rp_boot_script *s, struct rp_buf *out)
{
	char who[128], why[256];

	if (!safe(s->base) || !safe(s->cmdline) || !safe(s->token) || !safe(s->agent_url) ||
	    !safe(s->tls_sha256))
		return -1;
	echo_text(s->who, who, sizeof who);
	echo_text(s->why, why, sizeof why);
	rp_buf_printf(out, "#!ipxe\n");
	if (s->kind == RP_BOOT_RAMDISK) {
		if (!plain_name(s->kernel) || !plain_name(s->initrd) || s->token == NULL)
			return -1;
		rp_buf_printf(out, "echo Rackpilot: %s (%s): agent ramdisk\n", who, why);
		/* UEFI kernels load the initrd by the name given here (Debian's iPXE offers no
		 * LoadFile2); BIOS kernels ignore it. BOOTIF lets the ramdisk pick the boot NIC. */
		rp_buf_printf(out,
		              "kernel %s/boot/images/%s initrd=%s%s%s rackpilot.url=%s%s%s "
		              "rackpilot.token=%s BOOTIF=01-${net0/mac:hexhyp}\n",
		              s->base, s->kernel, s->initrd, s->cmdline && s->cmdline[0] ? " " : "",
		              s->cmdline ? s->cmdline : "", s->agent_url ? s->agent_url : s->base,
		              s->tls_sha256 ? " rackpilot.tls_sha256=" : "",
		              s->tls_sha256 ? s->tls_sha256 : "", s->token);
		rp_buf_printf(out, "initrd %s/boot/images/%s\n", s->base, s->initrd);
		rp_buf_printf(out, "boot\n");
	} else {
		rp_buf_printf(out, "echo Rackpilot: %s (%s): booting from the local disk\n", who,
		              why);
		/* UEFI: back to the firmware's boot order. BIOS: the first disk, else back too. */
		rp_buf_printf(out, "iseq ${platform} efi && exit ||\n");
		rp_buf_printf(out, "sanboot --no-describe --drive 0x80 || exit\n");
	}
	return out->oom ? -1 : 0;
}

static int
number(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t n = 0;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (n > (UINT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*v = n;
	return 0;
}

int
rp_boot_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
	uint64_t a = 0, b = 0;
	int has_a, has_b;

	if (h == NULL)
		return 0;
	while (*h == ' ')
		h++;
	if (strncmp(h, "bytes=", 6) != 0)
		return 0; /* another unit: ignore the header, as RFC 9110 allows */
	h += 6;
	while (*h == ' ')
		h++;
	has_a = number(&h, &a) == 0;
	while (*h == ' ')
		h++;
	if (*h != '-')
		return 0;
	h++;
	while (*h == ' ')
		h++;
	has_b = number(&h, &b) == 0;
	while (*h == ' ')
		h++;
	if (*h != '\0')
		return 0; /* several ranges, or garbage: send the whole file */
	if (!has_a && !has_b)
		return 0;
	if (!has_a) {
		/* The last b bytes. */
		if (b == 0 || size == 0)
			return -1;
		if (b > size)
			b = size;
		*off = size - b;
		*len = b;
		return 1;
	}
	if (has_b && b < a)
		return 0;
	if (a >= size)
		return -1;
	if (!has_b || b >= size)
		b = size - 1;
	*off = a;
	*len = b - a + 1;
	return 1;
}

int
rp_boot_dnsmasq_update(const char *path, const char *pidfile, const char *content, size_t len,
                       char *why, size_t whylen)
{
	char *text = NULL;
	size_t tlen;
	long pid;

	/* The file is read by dnsmasq as the user it drops to: world-readable, no secrets. */
	if (rp_file_write_private(path, content, len, 0644) < 0) {
		snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	if (pidfile == NULL || pidfile[0] == '\0')
		return 0;
	if (rp_file_read(pidfile, 64, &text, &tlen) < 0) {
		snprintf(why, whylen, "wrote %s but cannot read %s: %s", path, pidfile,
		         strerror(errno));
		return -1;
	}
	pid = strtol(text, NULL, 10);
	free(text);
	if (pid <= 1 || kill((pid_t)pid, SIGHUP) < 0) {
		snprintf(why, whylen, "wrote %s but cannot signal dnsmasq (pid %ld from %s): %s",
		         path, pid, pidfile, pid <= 1 ? "not a pid" : strerror(errno));
		return -1;
	}
	return 0;
}
