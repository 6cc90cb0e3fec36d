/* The comparisons of rack acceptance: inventory vs. bill of materials, links and cabling. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "accept.h"
#include "internal.h"

const char *const rp_accept_checks[] = {"bmc",    "power", "pxe",     "inventory",     "firmware",
                                        "bios",   "links", "burn_in", "power_thermal", "sel",
                                        "fabric", "nccl",  NULL};

#define GIB (1024.0 * 1024 * 1024)

/* ---- The bill of materials ----------------------------------------------------------- */

enum kind { K_COUNT, K_POSITIVE, K_PERCENT, K_MODEL, K_ENUM, K_ENVELOPE, K_SIZE, K_IFNAMES };

struct member {
	const char *group, *name;
	enum kind kind;
};

/* Every member a bom may carry: group NULL is top level. */
static const struct member bom_members[] = {
        {"gpus", "count", K_COUNT},
        {"gpus", "model", K_MODEL},
        {"memory", "total_gib", K_POSITIVE},
        {"memory", "dimms", K_COUNT},
        {"memory", "tolerance_pct", K_PERCENT},
        {"cpu", "model", K_MODEL},
        {"cpu", "sockets", K_COUNT},
        {"disks", "count", K_COUNT},
        {"disks", "min_size_gb", K_POSITIVE},
        {"nics", "count", K_COUNT},
        {"nics", "min_speed_mbps", K_POSITIVE},
        {"hcas", "count", K_COUNT},
        {"hcas", "rate_gbps", K_POSITIVE},
        {"hcas", "link_layer", K_ENUM},
        {"fabric", "envelope_pct", K_ENVELOPE},
        {"fabric", "ethernet_gbps", K_POSITIVE},
        {"fabric", "interfaces", K_IFNAMES},
        {"nccl", "min_busbw_gbytes_s", K_POSITIVE},
        {"nccl", "max_bytes", K_SIZE},
        {"nccl", "gpus_per_node", K_COUNT},
};

/* An interface name as Linux allows it (IFNAMSIZ - 1), in the characters a bom should use. */
static int
ifname_ok(json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);

	return s && n >= 1 && n <= 15 && strlen(s) == n &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static enum rp_err
why(json_t **detail, enum rp_err e, const char *field, const char *fmt, ...)
{
	char buf[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	*detail = json_pack("{s:s, s:s}", "field", field, "reason", buf);
	return e;
}

enum rp_err
rp_accept_bom_check(json_t *bom, json_t **detail)
{
	const char *g, *k;
	json_t *grp, *v;
	char field[160];
	size_t i;

	if (!json_is_object(bom))
		return why(detail, RP_ERR_INVALID_FIELD, "bom", "must be an object");
	json_object_foreach(bom, g, grp)
	{
		int known = 0;

		for (i = 0; i < sizeof bom_members / sizeof bom_members[0]; i++)
			known |= !strcmp(bom_members[i].group, g);
		snprintf(field, sizeof field, "bom.%.64s", g);
		if (!known)
			return why(detail, RP_ERR_UNKNOWN_FIELD, field,
			           "unknown part (gpus, memory, cpu, disks, nics, hcas, fabric, "
			           "nccl)");
		if (!json_is_object(grp))
			return why(detail, RP_ERR_INVALID_FIELD, field, "must be an object");
		json_object_foreach(grp, k, v)
		{
			const struct member *m = NULL;

			for (i = 0; i < sizeof bom_members / sizeof bom_members[0]; i++)
				if (!strcmp(bom_members[i].group, g) &&
				    !strcmp(bom_members[i].name, k))
					m = &bom_members[i];
			snprintf(field, sizeof field, "bom.%.64s.%.64s", g, k);
			if (m == NULL)
				return why(detail, RP_ERR_UNKNOWN_FIELD, field, "unknown member");
			switch (m->kind) {
			case K_COUNT:
				if (!json_is_integer(v) || json_integer_value(v) < 0 ||
				    json_integer_value(v) > 100000)
					return why(detail, RP_ERR_INVALID_FIELD, field,
					           "must be a whole number from 0 to 100000");
				break;
			case K_POSITIVE:
				if (!json_is_number(v) || json_number_value(v) <= 0 ||
				    json_number_value(v) > 1e9)
					return why(detail, RP_ERR_INVALID_FIELD, field,
					           "must be a number above 0");
				break;
			case K_PERCENT:
				if (!json_is_number(v) || json_number_value(v) < 0 ||
				    json_number_value(v) > 50)
					return why(detail, RP_ERR_INVALID_FIELD, field,
					           "must be a number from 0 to 50");
				break;
			case K_MODEL:
				if (!json_is_string(v) || json_string_length(v) == 0 ||
				    json_string_length(v) > 128)
					return why(detail, RP_ERR_INVALID_FIELD, field,
					           "must be a string of 1-128 bytes");
				break;
			case K_ENUM:
				if (!json_is_string(v) ||
				    (strcmp(json_string_value(v), "InfiniBand") != 0 &&
				     strcmp(json_string_value(v), "Ethernet") != 0))
					return why(detail, RP_ERR_INVALID_FIELD, field,
					           "must be InfiniBand or Ethernet");
				break;
			case K_ENVELOPE:
				if (!json_is_number(v) || json_number_value(v) < 1 ||
				    json_number_value(v) > 100)
					return why(detail, RP_ERR_INVALID_FIELD, field,
					           "must be a number from 1 to 100");
				break;
			case K_SIZE:
				/* Bytes: 1 TiB is past any GPU's memory. */
				if (!json_is_integer(v) || json_integer_value(v) < 1 ||
				    json_integer_value(v) > (json_int_t)1 << 40)
					return why(detail, RP_ERR_INVALID_FIELD, field,
					           "must be a whole number of bytes from 1 to "
					           "1099511627776");
				break;
			case K_IFNAMES: {
				json_t *e;
				size_t j, l;

				if (!json_is_array(v) || json_array_size(v) < 1 ||
				    json_array_size(v) > 64)
					return why(detail, RP_ERR_INVALID_FIELD, field,
					           "must be an array of 1-64 interface names");
				json_array_foreach(v, j, e)
				{
					if (!ifname_ok(e))
						return why(
						        detail, RP_ERR_INVALID_FIELD, field,
						        "entry %zu: must be an interface name of "
						        "1-15 characters A-Z a-z 0-9 . _ -",
						        j);
					for (l = 0; l < j; l++)
						if (json_equal(json_array_get(v, l), e))
							return why(detail, RP_ERR_INVALID_FIELD,
							           field,
							           "entry %zu: %s listed twice", j,
							           json_string_value(e));
				}
				break;
			}
			}
		}
	}
	return RP_ERR_OK;
}

/* ---- Findings ------------------------------------------------------------------------ */

static void
finding(json_t *findings, const char *item, json_t *expected, json_t *actual, const char *fix,
        const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_array_append_new(findings,
	                      json_pack("{s:s, s:o, s:o, s:s, s:s}", "item", item, "expected",
	                                expected ? expected : json_null(), "actual",
	                                actual ? actual : json_null(), "message", msg, "fix", fix));
}

/* 2048 -> "2,048" */
static const char *
grouped(long long v, char *buf, size_t len)
{
	char raw[32];
	size_t n, i, o = 0;

	snprintf(raw, sizeof raw, "%lld", v < 0 ? -v : v);
	n = strlen(raw);
	if (v < 0 && o + 1 < len)
		buf[o++] = '-';
	for (i = 0; i < n && o + 2 < len; i++) {
		if (i > 0 && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = raw[i];
	}
	buf[o] = '\0';
	return buf;
}

static json_t *
group(json_t *bom, const char *g, const char *k)
{
	return json_object_get(json_object_get(bom, g), k);
}

/* Case-insensitive substring: "H100" matches "NVIDIA H100 80GB HBM3". */
static int
model_matches(const char *have, const char *want)
{
	return have && want && strcasestr(have, want) != NULL;
}

/* want vs. have of a count; the fix reads "<n> <unit> missing|extra: <advice>". */
static int
count_compare(json_t *findings, const char *item, json_t *want, json_t *have, const char *what,
              const char *unit, const char *advice, const char *unreported)
{
	char fix[300], a[32], b[32];
	json_int_t w, h;

	if (want == NULL)
		return 0;
	w = json_integer_value(want);
	if (!json_is_integer(have)) {
		finding(findings, item, json_integer(w), json_string("not reported"), unreported,
		        "%s not reported by the node, expected %s", what, grouped(w, a, sizeof a));
		return 1;
	}
	h = json_integer_value(have);
	if (h == w)
		return 0;
	snprintf(fix, sizeof fix, "%lld %s %s: %s", (long long)(h < w ? w - h : h - w), unit,
	         h < w ? "missing" : "extra", advice);
	finding(findings, item, json_integer(w), json_integer(h), fix, "%s %s, expected %s", what,
	        grouped(h, a, sizeof a), grouped(w, b, sizeof b));
	return 1;
}

int
rp_accept_bom(json_t *bom, json_t *inv, json_t *findings)
{
	json_t *v, *it, *items;
	size_t i;
	int n = 0;

	if (!json_is_object(inv))
		return -1;
	/* GPUs: nvidia-smi's count when it ran, else the PCI scan's. */
	v = json_object_get(json_object_get(inv, "gpus"), "count");
	if (!json_is_integer(v))
		v = json_object_get(json_object_get(inv, "pci"), "gpu_count");
	n += count_compare(findings, "gpus.count", group(bom, "gpus", "count"), v, "GPU count",
	                   "GPU(s)",
	                   "check seating, power cables and the BMC event log, then "
	                   "nvidia-smi",
	                   "install the GPU driver (nvidia-smi) on the ramdisk, or check lspci");
	if ((v = group(bom, "gpus", "model")) != NULL) {
		const char *want = json_string_value(v);

		items = json_object_get(json_object_get(inv, "gpus"), "items");
		if (json_array_size(items) == 0) {
			finding(findings, "gpus.model", json_string(want),
			        json_string("not reported"), "install nvidia-smi on the ramdisk",
			        "GPU model not reported, expected %s", want);
			n++;
		}
		json_array_foreach(items, i, it)
		{
			const char *name = json_string_value(json_object_get(it, "name"));

			if (model_matches(name, want))
				continue;
			finding(findings, "gpus.model", json_string(want),
			        json_string(name ? name : "?"),
			        "swap the GPU for the ordered model", "GPU %d is %s, expected %s",
			        (int)json_integer_value(json_object_get(it, "index")),
			        name ? name : "?", want);
			n++;
			break;
		}
	}

	/* Memory: the DIMMs' sum when dmidecode ran; else the kernel's total, which is a little
	 * less (firmware and kernel keep some): within tolerance_pct, 5 by default. */
	{
		json_t *mem = json_object_get(inv, "memory"),
		       *dimms = json_object_get(mem, "dimms");
		json_t *want = group(bom, "memory", "total_gib");
		json_t *tol = group(bom, "memory", "tolerance_pct");
		double pct = json_is_number(tol) ? json_number_value(tol) / 100 : 0.05;
		char a[32], b[32], empty[200] = "";
		double have_gib = -1;
		size_t e = 0;
		int tolerance = 0;

		if (json_is_array(json_object_get(dimms, "items"))) {
			double sum = 0;

			json_array_foreach(json_object_get(dimms, "items"), i, it)
			{
				if (json_is_true(json_object_get(it, "populated")))
					sum += (double)json_integer_value(
					        json_object_get(it, "size_bytes"));
				else if (e < sizeof empty)
					e += (size_t)snprintf(
					        empty + e, sizeof empty - e, "%s%s", e ? ", " : "",
					        json_string_value(json_object_get(it, "locator"))
					                ?: "?");
			}
			have_gib = sum / GIB;
		} else if (json_is_integer(json_object_get(mem, "total_bytes"))) {
			have_gib = (double)json_integer_value(json_object_get(mem, "total_bytes")) /
			           GIB;
			tolerance = 1;
		}
		if (want) {
			double w = json_number_value(want);
			/* Below 4 GiB (small VMs) whole GiB say nothing ("1 GiB, expected 0 GiB").
			 */
			int mib = w < 4;
			const char *unit = mib ? "MiB" : "GiB";
			double scale = mib ? 1024 : 1;

			if (have_gib < 0) {
				finding(findings, "memory.total_gib", json_real(w),
				        json_string("not reported"),
				        "check /proc/meminfo on the ramdisk",
				        "memory not reported, expected "
				        "%s %s",
				        grouped((long long)(w * scale + 0.5), a, sizeof a), unit);
				n++;
			} else if (tolerance
			                   ? (have_gib < w * (1 - pct) || have_gib > w * (1 + pct))
			                   : (have_gib + 0.5 < w || have_gib - 0.5 > w)) {
				char fix[300], note[80] = "";

				snprintf(fix, sizeof fix, "%s%s%s",
				         have_gib < w ? "add or reseat DIMMs"
				                      : "remove the extra DIMMs",
				         empty[0] ? "; empty slots: " : "", empty);
				if (tolerance)
					snprintf(note, sizeof note,
					         " (kernel total, %g %% tolerance; dmidecode "
					         "absent)",
					         pct * 100);
				finding(findings, "memory.total_gib", json_real(w),
				        mib ? json_real((double)(long long)(have_gib * 1000 + 0.5) /
				                        1000)
				            : json_integer((json_int_t)(have_gib + 0.5)),
				        fix, "memory %s %s, expected %s %s%s",
				        grouped((long long)(have_gib * scale + 0.5), a, sizeof a),
				        unit, grouped((long long)(w * scale + 0.5), b, sizeof b),
				        unit, note);
				n++;
			}
		}
		if (group(bom, "memory", "dimms")) {
			char fix[400];

			snprintf(fix, sizeof fix, "%s%s", empty[0] ? "empty slots " : "",
			         empty[0] ? empty : "check the BMC's memory inventory");
			n += count_compare(findings, "memory.dimms", group(bom, "memory", "dimms"),
			                   json_object_get(dimms, "populated"), "DIMM count",
			                   "DIMM(s)", fix, "install dmidecode on the ramdisk");
		}
	}

	/* CPU. */
	n += count_compare(findings, "cpu.sockets", group(bom, "cpu", "sockets"),
	                   json_object_get(json_object_get(inv, "cpu"), "sockets"), "CPU sockets",
	                   "CPU(s)", "check the CPU population against the order",
	                   "check /proc/cpuinfo");
	if ((v = group(bom, "cpu", "model")) != NULL) {
		const char *have =
		        json_string_value(json_object_get(json_object_get(inv, "cpu"), "model"));

		if (!model_matches(have, json_string_value(v))) {
			finding(findings, "cpu.model", json_incref(v),
			        json_string(have ? have : "not reported"),
			        "swap the CPUs for the ordered model", "CPU %s, expected %s",
			        have ? have : "not reported", json_string_value(v));
			n++;
		}
	}

	/* Disks of at least min_size_gb (10^9 bytes), not removable. */
	if (group(bom, "disks", "count")) {
		double min = json_number_value(group(bom, "disks", "min_size_gb")) * 1e9;
		json_int_t c = 0;

		items = json_object_get(json_object_get(inv, "disks"), "items");
		json_array_foreach(items, i, it)
		{
			if (!json_is_true(json_object_get(it, "removable")) &&
			    (double)json_integer_value(json_object_get(it, "size_bytes")) >= min)
				c++;
		}
		v = json_is_array(items) ? json_integer(c) : NULL;
		n += count_compare(findings, "disks.count", group(bom, "disks", "count"), v,
		                   min > 0 ? "disks (of the ordered size)" : "disk count",
		                   "disk(s)", "check the drive bays and the backplane",
		                   "check /sys/block on the ramdisk");
		json_decref(v);
	}

	/* NICs: physical ones (on PCI). */
	if (group(bom, "nics", "count")) {
		json_int_t c = 0;

		items = json_object_get(json_object_get(inv, "nics"), "items");
		json_array_foreach(items, i, it) c += json_is_string(json_object_get(it, "pci"));
		v = json_is_array(items) ? json_integer(c) : NULL;
		n += count_compare(findings, "nics.count", group(bom, "nics", "count"), v,
		                   "NIC count", "NIC(s)", "check the cards and risers",
		                   "check /sys/class/net");
		json_decref(v);
	}

	/* HCAs: InfiniBand/RoCE ports, of one link layer when the bom names it. */
	if (group(bom, "hcas", "count")) {
		const char *ll = json_string_value(group(bom, "hcas", "link_layer"));
		json_int_t c = 0;

		items = json_object_get(json_object_get(inv, "infiniband"), "items");
		json_array_foreach(items, i, it)
		{
			if (ll == NULL ||
			    !strcmp(json_string_value(json_object_get(it, "link_layer")) ?: "", ll))
				c++;
		}
		v = json_is_array(items) ? json_integer(c) : NULL;
		n += count_compare(findings, "hcas.count", group(bom, "hcas", "count"), v,
		                   ll && !strcmp(ll, "Ethernet") ? "RoCE port count"
		                                                 : "HCA port count",
		                   "HCA port(s)", "check the adapters and their firmware",
		                   "check /sys/class/infiniband (rdma modules loaded?)");
		json_decref(v);
	}
	return n;
}

/* ---- Cabling and links --------------------------------------------------------------- */

enum rp_err
rp_accept_cable_check(json_t *e, json_t **detail)
{
	static const char *const keys[] = {"node",   "interface", "port_guid",
	                                   "switch", "port",      NULL};
	const char *k;
	json_t *v;
	size_t i;

	if (!json_is_object(e))
		return why(detail, RP_ERR_INVALID_FIELD, "cabling", "each entry must be an object");
	json_object_foreach(e, k, v)
	{
		for (i = 0; keys[i] && strcmp(keys[i], k); i++)
			;
		if (keys[i] == NULL)
			return why(detail, RP_ERR_UNKNOWN_FIELD, k,
			           "unknown member of a cabling entry");
		if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 128)
			return why(detail, RP_ERR_INVALID_FIELD, k,
			           "must be a string of 1-128 bytes");
	}
	for (i = 0; i < 5; i++) {
		if (i == 1 || i == 2)
			continue;
		if (!json_object_get(e, keys[i]))
			return why(detail, RP_ERR_MISSING_FIELD, keys[i],
			           "a cabling entry needs it");
	}
	if (!json_object_get(e, "interface") == !json_object_get(e, "port_guid"))
		return why(detail, RP_ERR_INVALID_FIELD, "interface",
		           "give exactly one of interface (name or MAC) and port_guid");
	return RP_ERR_OK;
}

json_t *
accept_nic_of(json_t *inv, const char *ifname)
{
	json_t *it;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(inv, "nics"), "items"), i, it)
	{
		if (!strcmp(json_string_value(json_object_get(it, "name")) ?: "", ifname) ||
		    !strcasecmp(json_string_value(json_object_get(it, "mac")) ?: "", ifname))
			return it;
	}
	return NULL;
}

int
rp_accept_links(json_t *bom, json_t *cabling, json_t *inv, json_t *findings, int *unverified)
{
	json_t *it, *e;
	double min_mbps = json_number_value(group(bom, "nics", "min_speed_mbps"));
	double min_gbps = json_number_value(group(bom, "hcas", "rate_gbps"));
	const char *ll = json_string_value(group(bom, "hcas", "link_layer"));
	size_t i, j;
	int n = 0, unv = 0;

	/* Physical NICs with a link must run at the rated speed; the ones cabled must be up. */
	json_array_foreach(json_object_get(json_object_get(inv, "nics"), "items"), i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name")) ?: "?";
		json_int_t sp = json_integer_value(json_object_get(it, "speed_mbps"));
		char item[160];
		int cabled = 0;

		if (!json_is_string(json_object_get(it, "pci")))
			continue;
		json_array_foreach(cabling, j, e)
		{
			const char *want = json_string_value(json_object_get(e, "interface"));

			cabled |= want && accept_nic_of(inv, want) == it;
		}
		snprintf(item, sizeof item, "link.%s", name);
		if (!json_is_true(json_object_get(it, "link"))) {
			if (cabled) {
				finding(findings, item, json_string("up"), json_string("down"),
				        "check the cable, the optic and the switch port",
				        "%s: link down, but it is cabled", name);
				n++;
			}
			continue;
		}
		if (min_mbps > 0 && (double)sp < min_mbps && cabled) {
			char a[32], b[32];

			finding(findings, item, json_real(min_mbps), json_integer(sp),
			        "check the cable/optic type and the switch port's speed",
			        "%s: link at %s Mb/s, rated %s Mb/s", name,
			        grouped(sp, a, sizeof a),
			        grouped((long long)min_mbps, b, sizeof b));
			n++;
		}
	}
	json_array_foreach(json_object_get(json_object_get(inv, "infiniband"), "items"), i, it)
	{
		const char *dev = json_string_value(json_object_get(it, "device")) ?: "?";
		const char *state = json_string_value(json_object_get(it, "state")) ?: "?";
		json_int_t rate = json_integer_value(json_object_get(it, "rate_gbps"));
		char item[160];

		if (ll && strcmp(json_string_value(json_object_get(it, "link_layer")) ?: "", ll))
			continue;
		snprintf(item, sizeof item, "link.%s", dev);
		if (strcmp(state, "ACTIVE") != 0) {
			finding(findings, item, json_string("ACTIVE"), json_string(state),
			        "check the cable and the subnet manager", "%s: port %s, not ACTIVE",
			        dev, state);
			n++;
		} else if (min_gbps > 0 && (double)rate < min_gbps) {
			finding(findings, item, json_real(min_gbps), json_integer(rate),
			        "check the cable type and the switch port",
			        "%s: %lld Gb/s, rated %.0f Gb/s", dev, (long long)rate, min_gbps);
			n++;
		}
	}

	/* Cabling: each entry against the neighbour the node sees on that port. */
	json_array_foreach(cabling, j, e)
	{
		const char *ifname = json_string_value(json_object_get(e, "interface"));
		const char *guid = json_string_value(json_object_get(e, "port_guid"));
		const char *sw = json_string_value(json_object_get(e, "switch"));
		const char *port = json_string_value(json_object_get(e, "port"));
		json_t *nb = NULL, *nic = ifname ? accept_nic_of(inv, ifname) : NULL, *want;
		char item[200], plan[300];
		const char *local = nic ? json_string_value(json_object_get(nic, "name")) : ifname;

		snprintf(item, sizeof item, "cabling.%s", ifname ? ifname : guid);
		snprintf(plan, sizeof plan, "%s %s", sw, port);
		want = json_pack("{s:s, s:s}", "switch", sw, "port", port);
		if (ifname) {
			json_t *lldp = json_object_get(json_object_get(inv, "lldp"), "neighbors");

			json_array_foreach(lldp, i, it)
			{
				if (local &&
				    !strcmp(json_string_value(json_object_get(it, "interface"))
				                    ?: "",
				            local))
					nb = it;
			}
			if (nic == NULL) {
				finding(findings, item, want, json_string("no such interface"),
				        "fix the cabling plan or check the NIC",
				        "%s: the node has no such "
				        "interface (plan: %s)",
				        ifname, plan);
				n++;
				continue;
			}
			if (!json_is_array(lldp)) {
				finding(findings, item, want, json_string("not reported"),
				        "run lldpd on the node's image to verify cabling",
				        "%s: no LLDP data (lldpd absent), plan says %s", local,
				        plan);
				n++, unv++;
				continue;
			}
		} else {
			json_array_foreach(
			        json_object_get(json_object_get(inv, "infiniband"), "items"), i, it)
			{
				if (!strcasecmp(json_string_value(json_object_get(it, "port_guid"))
				                        ?: "",
				                guid))
					nb = json_object_get(it, "neighbor");
			}
			if (nb == NULL) {
				finding(findings, item, want, json_string("not reported"),
				        "verify with ibnetdiscover from the fabric side",
				        "port %s: the node reports no InfiniBand neighbour, plan "
				        "says %s",
				        guid, plan);
				n++, unv++;
				continue;
			}
		}
		if (nb == NULL) {
			finding(findings, item, want, json_string("no neighbour"),
			        "check that the cable is plugged at both ends",
			        "%s: no LLDP neighbour seen, plan says %s", local, plan);
			n++;
			continue;
		}
		{
			const char *hsw = json_string_value(json_object_get(nb, "chassis")) ?:
			                  json_string_value(json_object_get(nb, "switch")) ?: "?";
			const char *hport = json_string_value(json_object_get(nb, "port")) ?: "?";

			if (!strcmp(hsw, sw) && !strcmp(hport, port)) {
				json_decref(want);
				continue;
			}
			finding(findings, item, want,
			        json_pack("{s:s, s:s}", "switch", hsw, "port", hport),
			        "move the cable to the planned port, or fix the plan",
			        "%s: cabled to %s %s, plan says %s", ifname ? local : guid, hsw,
			        hport, plan);
			n++;
		}
	}
	if (unverified)
		*unverified = unv;
	return n;
}
