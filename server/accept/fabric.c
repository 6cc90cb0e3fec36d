/* Across nodes: which pairs run when, which ports each pair tests with which tool at what rate,
 * the shell commands of a test, and the tools' outputs read back (perftest, iperf3, nccl-tests).
 * Pure: the jobs layer runs the commands over SSH and hands the outputs back here. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "accept.h"
#include "internal.h"

/* Outputs are peer-fed (a node prints them): anything larger is refused, not scanned. */
#define MAX_OUT     (8u << 20)
#define MAX_NODES   4096
#define MAX_ALL     512 /* all_pairs: n(n-1)/2 pairs, 130816 at 512 */
#define MAX_TOKENS  32
#define MAX_NAME    64  /* a device name or an address, as the inventory reports it */
#define MAX_ADDR    255 /* a host name at most */
#define DEF_ENVELOP 90

static void
say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

static json_t *
group(json_t *bom, const char *g, const char *k)
{
	return json_object_get(json_object_get(bom, g), k);
}

/* ---- The schedule --------------------------------------------------------------------- */

static int
add_pair(json_t *round, size_t a, size_t b)
{
	return json_array_append_new(round, json_pack("[I, I]", (json_int_t)a, (json_int_t)b));
}

/* Appends round unless it is empty; 0, or -1 when out of memory. */
static int
add_round(json_t *rounds, json_t *round)
{
	if (json_array_size(round) == 0) {
		json_decref(round);
		return 0;
	}
	return json_array_append_new(rounds, round);
}

json_t *
rp_accept_fabric_schedule(size_t n, int all_pairs)
{
	json_t *rounds = NULL, *round, *ret = NULL;
	size_t r, i, k, m;

	if (n > MAX_NODES || (all_pairs && n > MAX_ALL))
		goto out;
	if ((rounds = json_array()) == NULL)
		goto out;
	if (n < 2) {
		ret = rounds;
		rounds = NULL;
		goto out;
	}
	if (!all_pairs && n == 2) {
		/* The ring of two: each way once, as each node of a longer ring sends once and
		 * receives once (the tools measure one direction). */
		for (r = 0; r < 2; r++) {
			if ((round = json_array()) == NULL || add_pair(round, r, 1 - r) != 0 ||
			    add_round(rounds, round) != 0) {
				json_decref(round);
				goto out;
			}
		}
	} else if (!all_pairs) {
		/* The cycle's pair i is [i, i+1]: even i are disjoint, odd i too (for an even n
		 * the last odd one closes the cycle); an odd n leaves [n-1, 0] for a third. */
		for (r = 0; r < (n % 2 ? 3u : 2u); r++) {
			if ((round = json_array()) == NULL)
				goto out;
			for (i = 0; i < n; i++) {
				int in = r == 2 ? i == n - 1
				                : (i % 2 == r && !(n % 2 && i == n - 1));

				if (in && add_pair(round, i, (i + 1) % n) != 0) {
					json_decref(round);
					goto out;
				}
			}
			if (add_round(rounds, round) != 0)
				goto out;
		}
	} else {
		/* The circle method over m = n rounded up to even (index n is the bye): m - 1
		 * fixed at the centre, the others rotate; round r pairs r with the centre and
		 * r+k with r-k around the circle of m - 1. */
		m = n + n % 2;
		for (r = 0; r < m - 1; r++) {
			if ((round = json_array()) == NULL)
				goto out;
			for (k = 0; k < m / 2; k++) {
				size_t a = k == 0 ? r : (r + k) % (m - 1);
				size_t b = k == 0 ? m - 1 : (r + (m - 1) - k) % (m - 1);

				if (a >= n || b >= n)
					continue;
				if (add_pair(round, a < b ? a : b, a < b ? b : a) != 0) {
					json_decref(round);
					goto out;
				}
			}
			if (add_round(rounds, round) != 0)
				goto out;
		}
	}
	ret = rounds;
	rounds = NULL;
out:
	json_decref(rounds);
	return ret;
}

/* ---- The tests of a pair -------------------------------------------------------------- */

/* Does "10.0.0.7/24" (or "10.0.0.7") hold addr? */
static int
addr_is(const char *cidr, const char *addr)
{
	size_t n = strcspn(cidr, "/");

	return addr && strlen(addr) == n && strncasecmp(cidr, addr, n) == 0;
}

static int
nic_holds(json_t *nic, const char *addr)
{
	json_t *a;
	size_t i;

	json_array_foreach(json_object_get(nic, "addresses"), i, a)
	{
		if (json_is_string(a) && addr_is(json_string_value(a), addr))
			return 1;
	}
	return 0;
}

/* The first IPv4 of a NIC's addresses, without its prefix length, in buf; NULL when none. */
static const char *
nic_ipv4(json_t *nic, char *buf, size_t len)
{
	json_t *a;
	size_t i, n;

	json_array_foreach(json_object_get(nic, "addresses"), i, a)
	{
		const char *s = json_string_value(a);
		unsigned o[4];
		char tail;

		if (s == NULL || (n = strcspn(s, "/")) >= len || n < 7)
			continue;
		memcpy(buf, s, n);
		buf[n] = '\0';
		/* Dotted quad only: sscanf would take " 1.2.3.4" or "1.2.3.4x" otherwise. */
		if (strspn(buf, "0123456789.") == n &&
		    sscanf(buf, "%3u.%3u.%3u.%3u%c", &o[0], &o[1], &o[2], &o[3], &tail) == 4 &&
		    o[0] < 256 && o[1] < 256 && o[2] < 256 && o[3] < 256)
			return buf;
	}
	return NULL;
}

/* Does any NIC of the inventory report an address? A booted node always has one (its agent
 * registered through it): none at all means an agent or a tree that does not report them. */
static int
reports_addresses(json_t *inv)
{
	json_t *it;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(inv, "nics"), "items"), i, it)
	{
		if (json_array_size(json_object_get(it, "addresses")) > 0)
			return 1;
	}
	return 0;
}

static int
ll_matches(json_t *port, const char *ll)
{
	return ll == NULL ||
	       !strcmp(json_string_value(json_object_get(port, "link_layer")) ?: "", ll);
}

/* A port's device and number when the inventory reports them sanely; else 0. */
static int
port_id(json_t *port, const char **dev, json_int_t *num)
{
	json_t *d = json_object_get(port, "device"), *p = json_object_get(port, "port");

	if (!json_is_string(d) || json_string_length(d) == 0 || json_string_length(d) > MAX_NAME ||
	    strlen(json_string_value(d)) != json_string_length(d) || !json_is_integer(p) ||
	    json_integer_value(p) < 1 || json_integer_value(p) > 255)
		return 0;
	*dev = json_string_value(d);
	*num = json_integer_value(p);
	return 1;
}

static int
by_port(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	int c = strcmp(json_string_value(json_object_get(x, "device")),
	               json_string_value(json_object_get(y, "device")));

	if (c != 0)
		return c;
	return (int)(json_integer_value(json_object_get(x, "port")) -
	             json_integer_value(json_object_get(y, "port")));
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The test object: line <= 0 is "no line rate" (null); skip NULL when it runs. */
static json_t *
test_new(const char *port, const char *tool, double line, double env, const char *address,
         const char *skip)
{
	json_t *t = json_pack("{s:s, s:s}", "port", port, "tool", tool);

	if (t == NULL)
		return NULL;
	json_object_set_new(t, "address", address ? json_string(address) : json_null());
	json_object_set_new(t, "line_gbps", line > 0 ? json_real(line) : json_null());
	json_object_set_new(t, "min_gbps", line > 0 ? json_real(line * env / 100) : json_null());
	if (skip)
		json_object_set_new(t, "skip", json_string(skip));
	return t;
}

/* InfiniBand/RoCE ports of the server, paired with the client's of the same device and port. */
static int
ib_tests(json_t *bom, json_t *inv_s, json_t *inv_c, const char *ssh_addr, const char *tool,
         double env, json_t *tests)
{
	json_t *items = json_object_get(json_object_get(inv_s, "infiniband"), "items");
	json_t *citems = json_object_get(json_object_get(inv_c, "infiniband"), "items");
	const char *ll = json_string_value(group(bom, "hcas", "link_layer"));
	json_t *rate = group(bom, "hcas", "rate_gbps"), *it, *cit, **v = NULL;
	size_t i, j, n = 0;
	int rc = -1;

	if (json_array_size(items) > 0 && (v = calloc(json_array_size(items), sizeof *v)) == NULL)
		goto out;
	json_array_foreach(items, i, it)
	{
		const char *dev;
		json_int_t num;

		if (port_id(it, &dev, &num) && ll_matches(it, ll))
			v[n++] = it;
	}
	if (n > 1)
		qsort(v, n, sizeof *v, by_port);
	for (i = 0; i < n; i++) {
		const char *dev = NULL, *skip = NULL, *cdev = NULL;
		json_int_t num = 0, cnum = 0;
		double line = -1;
		char port[MAX_NAME + 8], why[MAX_NAME + 64];
		json_t *peer = NULL, *t;

		port_id(v[i], &dev, &num);
		json_array_foreach(citems, j, cit)
		{
			if (peer == NULL && port_id(cit, &cdev, &cnum) && ll_matches(cit, ll) &&
			    !strcmp(cdev, dev) && cnum == num)
				peer = cit;
		}
		/* The rated speed when the order names one; else what both ends negotiated. */
		if (json_is_number(rate) && json_number_value(rate) > 0) {
			line = json_number_value(rate);
		} else {
			json_t *rs = json_object_get(v[i], "rate_gbps");
			json_t *rp = json_object_get(peer, "rate_gbps");

			if (json_is_number(rs) && json_number_value(rs) > 0)
				line = json_number_value(rs);
			if (json_is_number(rp) && json_number_value(rp) > 0 &&
			    (line <= 0 || json_number_value(rp) < line))
				line = json_number_value(rp);
		}
		snprintf(port, sizeof port, "%s/%lld", dev, (long long)num);
		if (peer == NULL) {
			snprintf(why, sizeof why, "the client has no port %s", port);
			skip = why;
		} else if (line <= 0) {
			skip = "no line rate: the bom names no hcas.rate_gbps and the nodes "
			       "report none";
		} else if (ssh_addr == NULL || ssh_addr[0] == '\0') {
			skip = "no address for the server";
		}
		t = test_new(port, tool, line, env, ssh_addr && ssh_addr[0] ? ssh_addr : NULL,
		             skip);
		if (t == NULL)
			goto out;
		json_object_set_new(t, "device", json_string(dev));
		json_object_set_new(t, "ib_port", json_integer(num));
		if (json_array_append_new(tests, t) != 0)
			goto out;
	}
	rc = 0;
out:
	free(v);
	return rc;
}

/* Is this NIC the netdev of an InfiniBand/RoCE port tested with perftest (same PCI function)? */
static int
is_ib_port(json_t *nic, json_t *inv, const char *ll)
{
	const char *pci = json_string_value(json_object_get(nic, "pci"));
	json_t *it;
	size_t i;

	if (pci == NULL || pci[0] == '\0')
		return 0;
	json_array_foreach(json_object_get(json_object_get(inv, "infiniband"), "items"), i, it)
	{
		if (ll_matches(it, ll) &&
		    !strcmp(json_string_value(json_object_get(it, "pci")) ?: "", pci))
			return 1;
	}
	return 0;
}

#define MAX_IFS 64

static int
eth_tests(json_t *bom, json_t *inv_s, json_t *cabling, const char *ssh_addr, double env,
          json_t *tests)
{
	const char *ll = json_string_value(group(bom, "hcas", "link_layer"));
	json_t *want = group(bom, "fabric", "interfaces"), *e, *it;
	json_t *gbps = group(bom, "fabric", "ethernet_gbps");
	json_t *minsp = group(bom, "nics", "min_speed_mbps");
	const char *names[MAX_IFS];
	size_t i, n = 0;
	int any_addr = reports_addresses(inv_s);

	/* Which interfaces: the order's, else the cabled ones, else the one SSH reaches. */
	if (json_is_array(want)) {
		json_array_foreach(want, i, e)
		{
			if (json_is_string(e) && n < MAX_IFS)
				names[n++] = json_string_value(e);
		}
	} else {
		json_array_foreach(cabling, i, e)
		{
			const char *s = json_string_value(json_object_get(e, "interface"));
			json_t *nic;

			if (s == NULL || n >= MAX_IFS)
				continue;
			nic = accept_nic_of(inv_s, s);
			if (nic && is_ib_port(nic, inv_s, ll))
				continue;
			if (nic && json_is_string(json_object_get(nic, "name")))
				s = json_string_value(json_object_get(nic, "name"));
			names[n++] = s;
		}
	}
	if (n == 0 && !json_is_array(want) && ssh_addr && ssh_addr[0]) {
		json_array_foreach(json_object_get(json_object_get(inv_s, "nics"), "items"), i, it)
		{
			if (nic_holds(it, ssh_addr) &&
			    json_is_string(json_object_get(it, "name"))) {
				names[n++] = json_string_value(json_object_get(it, "name"));
				break;
			}
		}
	}
	if (n > 1)
		qsort(names, n, sizeof *names, by_name);
	for (i = 0; i < n; i++) {
		json_t *nic, *sp, *t;
		const char *addr = NULL, *skip = NULL;
		char v4[64], why[128];
		double line = -1;

		if (i > 0 && !strcmp(names[i], names[i - 1]))
			continue; /* cabled twice (a MAC and a name): one test */
		nic = accept_nic_of(inv_s, names[i]);
		sp = json_object_get(nic, "speed_mbps");
		if (json_is_number(gbps) && json_number_value(gbps) > 0)
			line = json_number_value(gbps);
		else if (json_is_number(sp) && json_number_value(sp) > 0)
			line = json_number_value(sp) / 1000;
		else if (json_is_number(minsp) && json_number_value(minsp) > 0)
			line = json_number_value(minsp) / 1000;
		if (nic) {
			addr = nic_ipv4(nic, v4, sizeof v4);
			if (addr == NULL && ssh_addr && ssh_addr[0] &&
			    (nic_holds(nic, ssh_addr) || !any_addr))
				addr = ssh_addr;
		}
		if (nic == NULL) {
			snprintf(why, sizeof why, "the server has no interface %.64s", names[i]);
			skip = why;
		} else if (line <= 0) {
			skip = "no line rate: the bom names no fabric.ethernet_gbps or "
			       "nics.min_speed_mbps and the node reports no speed";
		} else if (addr == NULL) {
			snprintf(why, sizeof why, "no IPv4 address on %.64s", names[i]);
			skip = why;
		}
		t = test_new(names[i], "iperf3", line, env, addr, skip);
		if (t == NULL)
			return -1;
		json_object_set_new(t, "interface", json_string(names[i]));
		if (json_array_append_new(tests, t) != 0)
			return -1;
	}
	return 0;
}

json_t *
rp_accept_fabric_tests(json_t *bom, json_t *inv_s, json_t *inv_c, json_t *cabling,
                       const char *ssh_addr, json_t *opts)
{
	json_t *tests = json_array(), *ret = NULL, *pct = group(bom, "fabric", "envelope_pct");
	const char *tool = json_string_value(json_object_get(opts, "ib_tool"));
	double env = DEF_ENVELOP;

	if (tests == NULL)
		goto out;
	if (json_is_number(pct) && json_number_value(pct) > 0 && json_number_value(pct) <= 100)
		env = json_number_value(pct);
	if (tool == NULL || strcmp(tool, "ib_read_bw") != 0)
		tool = "ib_write_bw";
	if (ssh_addr && strlen(ssh_addr) > MAX_ADDR)
		ssh_addr = NULL; /* not an address: the tests say "no address" */
	if (ib_tests(bom, inv_s, inv_c, ssh_addr, tool, env, tests) != 0 ||
	    eth_tests(bom, inv_s, cabling, ssh_addr, env, tests) != 0)
		goto out;
	ret = tests;
	tests = NULL;
out:
	json_decref(tests);
	return ret;
}

/* ---- Commands ------------------------------------------------------------------------- */

struct sb {
	char *p;
	size_t len, cap;
	int err;
};

static void
sb_add(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->cap - b->len)
		b->err = 1;
	else
		b->len += (size_t)n;
}

/* ' value', single-quoted: ' becomes '\'' and nothing else is special inside. */
static void
sb_quote(struct sb *b, const char *v)
{
	sb_add(b, " '");
	for (; *v && !b->err; v++) {
		if (*v == '\'')
			sb_add(b, "'\\''");
		else
			sb_add(b, "%c", *v);
	}
	sb_add(b, "'");
}

static void
sb_int(struct sb *b, long long v)
{
	char s[32];

	snprintf(s, sizeof s, "%lld", v);
	sb_quote(b, s);
}

/* A string member fit for a command line: 1..max bytes, no NUL inside, no leading '-' (a
 * positional argument that looks like an option would be taken as one). */
static const char *
arg_of(json_t *test, const char *k, size_t max)
{
	json_t *v = json_object_get(test, k);
	const char *s = json_string_value(v);

	if (s == NULL || s[0] == '\0' || s[0] == '-' || json_string_length(v) > max ||
	    strlen(s) != json_string_length(v))
		return NULL;
	return s;
}

/* The guard and the tool's common arguments. */
static void
cmd_start(struct sb *b, const char *tool)
{
	sb_add(b,
	       "command -v %s >/dev/null 2>&1 || { echo '%s is not installed on this node'; "
	       "exit 77; }; exec %s",
	       tool, tool, tool);
}

int
rp_accept_fabric_commands(json_t *test, int tcp_port, int duration_s, char *server, size_t slen,
                          char *client, size_t clen)
{
	const char *tool = json_string_value(json_object_get(test, "tool"));
	const char *addr = arg_of(test, "address", MAX_ADDR), *dev = NULL;
	struct sb s = {0}, c = {0};
	json_int_t ibp = 0;
	int perf, rc = -1;

	if (!json_is_object(test) || json_object_get(test, "skip") || tool == NULL ||
	    server == NULL || client == NULL || slen == 0 || clen == 0 || tcp_port < 1 ||
	    tcp_port > 65535 || duration_s < 1 || duration_s > 86400 || addr == NULL)
		goto out;
	perf = !strcmp(tool, "ib_write_bw") || !strcmp(tool, "ib_read_bw");
	if (!perf && strcmp(tool, "iperf3") != 0)
		goto out;
	if (perf) {
		json_t *p = json_object_get(test, "ib_port");

		if ((dev = arg_of(test, "device", MAX_NAME)) == NULL || !json_is_integer(p) ||
		    (ibp = json_integer_value(p)) < 1 || ibp > 255)
			goto out;
	}
	/* Built aside, copied out only when both fit. */
	if ((s.p = malloc(slen)) == NULL || (c.p = malloc(clen)) == NULL)
		goto out;
	s.cap = slen;
	c.cap = clen;
	s.p[0] = c.p[0] = '\0';
	if (perf) {
		struct sb *v[2] = {&s, &c};
		int i;

		/* Duration mode (-D) on both sides; the client names the server last. */
		for (i = 0; i < 2; i++) {
			cmd_start(v[i], tool);
			sb_add(v[i], " -d");
			sb_quote(v[i], dev);
			sb_add(v[i], " -i");
			sb_int(v[i], ibp);
			sb_add(v[i], " -p");
			sb_int(v[i], tcp_port);
			sb_add(v[i], " -F --report_gbits -D");
			sb_int(v[i], duration_s);
		}
		sb_quote(&c, addr);
	} else {
		/* -1: the server exits after one client, so the step ends with the test. */
		cmd_start(&s, "iperf3");
		sb_add(&s, " -s -1 -p");
		sb_int(&s, tcp_port);
		cmd_start(&c, "iperf3");
		sb_add(&c, " -c");
		sb_quote(&c, addr);
		sb_add(&c, " -p");
		sb_int(&c, tcp_port);
		sb_add(&c, " -t");
		sb_int(&c, duration_s);
		sb_add(&c, " -J");
	}
	if (s.err || c.err)
		goto out;
	memcpy(server, s.p, s.len + 1);
	memcpy(client, c.p, c.len + 1);
	rc = 0;
out:
	free(s.p);
	free(c.p);
	return rc;
}

/* ---- Outputs -------------------------------------------------------------------------- */

/* The next line of text at *p (without its end of line, CR dropped) in buf, truncated to
 * fit; 0 at the end of the text. */
static int
next_line(const char **p, char *buf, size_t len)
{
	const char *s = *p, *e;
	size_t n;

	if (*s == '\0')
		return 0;
	e = strchr(s, '\n');
	n = e ? (size_t)(e - s) : strlen(s);
	*p = e ? e + 1 : s + n;
	if (n > 0 && s[n - 1] == '\r')
		n--;
	if (n >= len)
		n = len - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return 1;
}

/* Splits buf in place at blanks; returns how many tokens (at most max). */
static size_t
tokens(char *buf, char **tok, size_t max)
{
	size_t n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(buf, " \t", &save); t && n < max; t = strtok_r(NULL, " \t", &save))
		tok[n++] = t;
	return n;
}

static int
whole(const char *s, long long *v)
{
	char *end;

	if (!isdigit((unsigned char)s[0]))
		return 0;
	*v = strtoll(s, &end, 10);
	return *end == '\0' && *v >= 0;
}

static int
real(const char *s, double *v)
{
	char *end;

	if (!isdigit((unsigned char)s[0]) && s[0] != '-' && s[0] != '.')
		return 0;
	*v = strtod(s, &end);
	return *end == '\0' && isfinite(*v);
}

/* The output to scan, or NULL with why. */
static int
scannable(const char *out, char *why, size_t len)
{
	if (out == NULL || out[0] == '\0') {
		say(why, len, "no output");
		return 0;
	}
	if (strnlen(out, MAX_OUT + 1) > MAX_OUT) {
		say(why, len, "output over 8 MiB, not read");
		return 0;
	}
	return 1;
}

/* The first line saying what went wrong (the tool's own message, our exit-77 guard's), for
 * the report when there is no result; NULL when none. */
static const char *
first_error(const char *out, const char *const *marks, char *buf, size_t len)
{
	const char *p = out;
	size_t i;

	while (next_line(&p, buf, len)) {
		for (i = 0; marks[i]; i++) {
			if (strcasestr(buf, marks[i])) {
				char *s = buf;

				while (*s == ' ' || *s == '\t')
					s++;
				return s;
			}
		}
	}
	return NULL;
}

static const char *const perf_marks[] = {"not installed", "couldn't", "unable",
                                         "failed",        "error",    NULL};

int
rp_accept_parse_perftest(const char *out, double *gbps, char *why, size_t len)
{
	const char *p = out, *err;
	char line[1024], *tok[MAX_TOKENS];
	double unit = 0, bw = 0, v;
	long long best = -1, bytes;
	size_t n, col = 0, i;
	int rc = -1;

	if (!scannable(out, why, len))
		goto out;
	while (next_line(&p, line, sizeof line)) {
		if (strstr(line, "#bytes") && strstr(line, "BW average[")) {
			/* The header names the column ("BW peak" is one, "#sl" comes in with QoS)
			 * and the unit: Gb/sec with --report_gbits, else MB/sec (perftest < 24.x)
			 * or MiB/sec, both 2^20 bytes. */
			n = tokens(line, tok, MAX_TOKENS);
			unit = 0;
			for (i = 0, col = 0; i < n; i++) {
				if (!strcmp(tok[i], "BW"))
					continue;
				if (!strncmp(tok[i], "average[", 8)) {
					if (!strcmp(tok[i] + 8, "Gb/sec]"))
						unit = 1;
					else if (!strcmp(tok[i] + 8, "MB/sec]") ||
					         !strcmp(tok[i] + 8, "MiB/sec]"))
						unit = 1048576.0 * 8 / 1e9;
					break;
				}
				col++;
			}
			continue;
		}
		if (unit == 0)
			continue;
		/* A result row: the size, then numbers; warnings between are skipped. */
		n = tokens(line, tok, MAX_TOKENS);
		if (n <= col || !whole(tok[0], &bytes) || !real(tok[col], &v) || v < 0)
			continue;
		if (bytes >= best) {
			best = bytes;
			bw = v * unit;
		}
	}
	if (best < 0) {
		err = first_error(out, perf_marks, line, sizeof line);
		if (err)
			say(why, len, "no result line: %s", err);
		else
			say(why, len, "no result line");
		goto out;
	}
	*gbps = bw;
	rc = 0;
out:
	return rc;
}

int
rp_accept_parse_iperf3(const char *out, double *gbps, char *why, size_t len)
{
	const char *p = out, *start = NULL, *err;
	static const char *const marks[] = {"not installed", "iperf3: error", "error -", NULL};
	char line[1024];
	json_t *j = NULL, *v, *end;
	json_error_t je;
	int rc = -1;

	if (!scannable(out, why, len))
		goto out;
	/* iperf3 -J prints one object, its braces alone on their lines; what is around it
	 * (the agent's framing, a late "iperf3: error" line) is not JSON. */
	while (start == NULL) {
		const char *at = p;

		if (!next_line(&p, line, sizeof line))
			break;
		if (line[0] == '{' && line[1 + strspn(line + 1, " \t")] == '\0')
			start = at;
	}
	if (start == NULL) {
		err = first_error(out, marks, line, sizeof line);
		say(why, len, "no JSON output%s%s", err ? ": " : "", err ? err : "");
		goto out;
	}
	j = json_loads(start, JSON_DISABLE_EOF_CHECK, &je);
	if (!json_is_object(j)) {
		say(why, len, "no JSON output: %s (line %d)", je.text, je.line);
		goto out;
	}
	if ((v = json_object_get(j, "error")) != NULL) {
		say(why, len, "%s", json_is_string(v) ? json_string_value(v) : "iperf3 failed");
		goto out;
	}
	end = json_object_get(j, "end");
	v = json_object_get(json_object_get(end, "sum_received"), "bits_per_second");
	if (!json_is_number(v))
		v = json_object_get(json_object_get(end, "sum"), "bits_per_second");
	if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0) {
		say(why, len, "no end.sum_received.bits_per_second in the JSON output");
		goto out;
	}
	*gbps = json_number_value(v) / 1e9;
	rc = 0;
out:
	json_decref(j);
	return rc;
}

static const char *const nccl_marks[] = {"not installed", "failure", "NCCL WARN", "error", NULL};

int
rp_accept_parse_nccl(const char *out, double *busbw, double *avg, long long *bytes, char *why,
                     size_t len)
{
	const char *p = out, *err;
	char line[1024], *tok[MAX_TOKENS];
	size_t n, i, bcol = 0, wcol[2] = {0, 0}, nw = 0;
	long long best = -1, size, oob = 0;
	double bw = 0, a = -1, v;
	int head = 0, rc = -1;

	if (!scannable(out, why, len))
		goto out;
	while (next_line(&p, line, sizeof line)) {
		if (line[0] == '#') {
			char *s = line + 1;

			n = tokens(s, tok, MAX_TOKENS);
			/* "#  size  count  type  redop  root  time  algbw  busbw  #wrong ...":
			 * busbw's column and the #wrong ones (before 2.13 "error", a
			 * relative error, not a count; "root" came in then too). */
			if (n > 2 && !strcmp(tok[0], "size")) {
				head = 0;
				nw = 0;
				for (i = 0; i < n; i++) {
					if (!strcmp(tok[i], "busbw") && !head) {
						bcol = i;
						head = 1;
					} else if (!strcmp(tok[i], "#wrong") && nw < 2) {
						wcol[nw++] = i;
					}
				}
				continue;
			}
			/* "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 120.456". */
			if (n >= 6 && !strcmp(tok[0], "Out") && !strcmp(tok[2], "bounds") &&
			    !strcmp(tok[4], ":"))
				whole(tok[5], &oob);
			if (n >= 5 && !strcmp(tok[0], "Avg") && !strcmp(tok[2], "bandwidth") &&
			    !strcmp(tok[3], ":") && real(tok[4], &v) && v >= 0)
				a = v;
			continue;
		}
		if (!head)
			continue;
		n = tokens(line, tok, MAX_TOKENS);
		if (n <= bcol || !whole(tok[0], &size) || !real(tok[bcol], &v) || v < 0)
			continue;
		for (i = 0; i < nw; i++) {
			double w;

			/* N/A: checking was off (-c 0); not a wrong value. */
			if (wcol[i] >= n || !strcmp(tok[wcol[i]], "N/A"))
				continue;
			if (!real(tok[wcol[i]], &w) || w > 0) {
				say(why, len, "%s wrong values at %lld bytes (%s)", tok[wcol[i]],
				    size, i == 0 ? "out-of-place" : "in-place");
				goto out;
			}
		}
		if (size >= best) {
			best = size;
			bw = v;
		}
	}
	if (best < 0) {
		err = first_error(out, nccl_marks, line, sizeof line);
		say(why, len, "no result row%s%s", err ? ": " : "", err ? err : "");
		goto out;
	}
	if (oob > 0) {
		say(why, len, "%lld out of bounds values", oob);
		goto out;
	}
	*busbw = bw;
	*avg = a;
	*bytes = best;
	rc = 0;
out:
	return rc;
}
