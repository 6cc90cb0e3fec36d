/* The demo site: every record goes through the same store calls the API makes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"
#include "util/util.h"

#define ACTOR    "rackpilotd --demo"
#define RACKS    2
#define PER_RACK 8
#define GIB      (1024LL * 1024 * 1024)

static const char *const bios_golden[][2] = {
        {"Above4GDecoding", "Enabled"}, {"SriovSupport", "Enabled"},
        {"NumaNodesPerSocket", "NPS1"}, {"WorkloadProfile", "HPC"},
        {"PcieAcsControl", "Disabled"},
};

static const char *const fw_golden[][3] = {
        /* component, baseline version, image file */
        {"bmc", "2.14.3", "demo-bmc-2.14.3.bin"},
        {"bios", "2.1.7", "demo-bios-2.1.7.bin"},
        {"hca.mlx5_0", "28.39.1002", "demo-cx7-28.39.1002.bin"},
};

/* A firmware image file in the image store (its bytes say what it is), recorded. */
static int
demo_image(struct rp_store *st, const char *dir, const char *file, char *why, size_t whylen)
{
	char path[1024], body[128], hex[RP_SHA256_HEX];
	json_t *in = NULL, *out = NULL, *detail = NULL;
	int fd = -1, n, rc = -1;
	enum rp_err e;

	n = snprintf(body, sizeof body, "rackpilot demo firmware image %s\n", file);
	snprintf(path, sizeof path, "%s/%s", dir, file);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0 ||
	    write(fd, body, (size_t)n) != n || fsync(fd) < 0) {
		snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	rp_sha256_hex(body, (size_t)n, hex);
	in = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s}", "name", file, "kind", "firmware", "file",
	               file, "size", n, "sha256", hex, "description",
	               "demo data: not a real image");
	if ((e = rp_store_image_create(st, in, ACTOR, &out, &detail)) != RP_ERR_OK) {
		snprintf(why, whylen, "image %s: %s", file, rp_err_message(e));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	json_decref(in);
	json_decref(out);
	json_decref(detail);
	return rc;
}

/* What the agent would report for node i of the demo (docs/inventory.md); node 5 of rack 2
 * has lost a GPU, node 3 of rack 1 half of its memory. */
static json_t *
demo_inventory(int rack, int i, const char *name, const char *serial)
{
	json_t *gpus = json_array(), *hcas = json_array(), *dimms = json_array();
	int ngpu = (rack == 2 && i == 5) ? 7 : 8, ndimm = (rack == 1 && i == 3) ? 16 : 32, k;
	char buf[64];

	for (k = 0; k < ngpu; k++) {
		snprintf(buf, sizeof buf, "0000:%02x:00.0", 0x18 + 0x10 * k);
		json_array_append_new(gpus,
		                      json_pack("{s:i, s:s, s:s, s:i, s:s}", "index", k, "name",
		                                "NVIDIA H100 80GB HBM3", "vbios", "96.00.99.00.01",
		                                "memory_mib", 81559, "pci", buf));
	}
	for (k = 0; k < 8; k++) {
		snprintf(buf, sizeof buf, "mlx5_%d", k);
		json_array_append_new(hcas, json_pack("{s:s, s:i, s:s, s:s, s:i, s:s, s:s}",
		                                      "device", buf, "port", 1, "state", "ACTIVE",
		                                      "rate", "400 Gb/sec (4X NDR)", "rate_gbps",
		                                      400, "link_layer", "InfiniBand", "fw_version",
		                                      "28.39.1002"));
	}
	for (k = 0; k < ndimm; k++) {
		snprintf(buf, sizeof buf, "P%d_DIMM%02d", k / 16, k % 16);
		json_array_append_new(dimms, json_pack("{s:s, s:I, s:s, s:i}", "locator", buf,
		                                       "size_bytes", (json_int_t)(64 * GIB), "type",
		                                       "DDR5", "speed_mts", 4800));
	}
	return json_pack(
	        "{s:i, s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s, s:i, s:i, s:i, s:i}, "
	        "s:{s:I, s:{s:i, s:i, s:o}}, s:{s:[{s:s, s:I, s:s, s:b}, {s:s, s:I, s:s, s:b}]}, "
	        "s:{s:[{s:s, s:s, s:b, s:i}]}, s:{s:i, s:i}, s:{s:i, s:o}, s:{s:o}, s:b}",
	        "format", 1, "agent_version", "demo", "hostname", name, "system", "vendor",
	        "Supermicro", "product", "SYS-821GE-TNHR", "serial", serial, "bios", "version",
	        "2.1.7", "cpu", "model", "Intel(R) Xeon(R) Platinum 8480+", "sockets", 2, "cores",
	        112, "threads", 224, "numa_nodes", 2, "memory", "total_bytes",
	        (json_int_t)(ndimm * 64 * GIB), "dimms", "count", ndimm, "populated", ndimm,
	        "items", dimms, "disks", "items", "name", "nvme0n1", "size_bytes",
	        (json_int_t)3840755982336LL, "model", "SAMSUNG MZQL23T8HCLS", "nvme", 1, "name",
	        "nvme1n1", "size_bytes", (json_int_t)3840755982336LL, "model",
	        "SAMSUNG MZQL23T8HCLS", "nvme", 1, "nics", "items", "name", "eno1", "mac",
	        "3c:ec:ef:00:00:01", "link", 1, "speed_mbps", 25000, "pci", "gpu_count", ngpu,
	        "hca_count", 8, "gpus", "count", ngpu, "items", gpus, "infiniband", "items", hcas,
	        "demo", 1);
}

static int
seed(struct rp_store *st, const char *image_dir, char *why, size_t whylen)
{
	json_t *in = NULL, *out = NULL, *detail = NULL, *attrs = NULL, *comps = NULL;
	char name[64], serial[32], mac[32];
	int r, i, rc = -1;
	size_t k;
	enum rp_err e;

#define TRY(what, call)                                                                            \
	do {                                                                                       \
		json_decref(out), json_decref(detail);                                             \
		out = detail = NULL;                                                               \
		if ((e = (call)) != RP_ERR_OK) {                                                   \
			snprintf(why, whylen, "demo: %s: %s", what, rp_err_message(e));            \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

	for (k = 0; k < sizeof fw_golden / sizeof fw_golden[0]; k++)
		if (demo_image(st, image_dir, fw_golden[k][2], why, whylen) < 0)
			goto out;
	attrs = json_object();
	for (k = 0; k < sizeof bios_golden / sizeof bios_golden[0]; k++)
		json_object_set_new(attrs, bios_golden[k][0], json_string(bios_golden[k][1]));
	in = json_pack("{s:s, s:s, s:s, s:O}", "name", "h100-golden", "node_class", "gpu-h100-8x",
	               "description", "demo data: the BIOS every H100 node should have",
	               "attributes", attrs);
	TRY("BIOS profile", rp_store_bios_profile_create(st, in, ACTOR, &out, &detail));
	json_decref(in);
	comps = json_object();
	for (k = 0; k < sizeof fw_golden / sizeof fw_golden[0]; k++)
		json_object_set_new(comps, fw_golden[k][0],
		                    json_pack("{s:s, s:s, s:s}", "version", fw_golden[k][1],
		                              "image", fw_golden[k][2], "method", "redfish"));
	in = json_pack("{s:s, s:s, s:s, s:O}", "name", "h100-baseline", "node_class", "gpu-h100-8x",
	               "description", "demo data: the firmware baseline for H100 nodes",
	               "components", comps);
	TRY("firmware baseline", rp_store_baseline_create(st, in, ACTOR, &out, &detail));
	for (r = 1; r <= RACKS; r++) {
		json_decref(in);
		snprintf(name, sizeof name, "demo-r%02d", r);
		in = json_pack("{s:s, s:s, s:s, s:i, s:s}", "name", name, "site", "demo-dc", "row",
		               "A", "u_height", 42, "description", "demo data");
		TRY("rack", rp_store_rack_create(st, in, ACTOR, &out, &detail));
		for (i = 1; i <= PER_RACK; i++) {
			json_t *fw, *bios;
			int u = 2 + (i - 1) * 5;

			snprintf(name, sizeof name, "gpu-r%02d-u%02d", r, u);
			snprintf(serial, sizeof serial, "DEMO%02d%02d", r, i);
			snprintf(mac, sizeof mac, "02:de:00:00:%02x:%02x", r, i);
			json_decref(in);
			in = json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:s, s:[s,s], s:[s], "
			               "s:{s:s, s:s}}",
			               "name", name, "rack", r == 1 ? "demo-r01" : "demo-r02",
			               "u_position", u, "u_height", 4, "serial", serial, "vendor",
			               "Supermicro", "model", "SYS-821GE-TNHR", "node_class",
			               "gpu-h100-8x", "tags", "demo",
			               i <= 4 ? "training" : "inference", "macs", mac, "bmc",
			               "driver", "fake", "address", "demo");
			TRY("node", rp_store_node_create(st, in, ACTOR, &out, &detail));
			json_decref(in);
			in = demo_inventory(r, i, name, serial);
			TRY("inventory", rp_store_node_inventory_set(st, name, "demo", in, ACTOR));
			/* Drift: one node runs an old BMC, one has SR-IOV off. */
			fw = json_pack("[{s:s, s:s, s:b}, {s:s, s:s, s:b}, {s:s, s:s, s:b}]",
			               "component", "bmc", "version",
			               (r == 2 && i == 2) ? "2.12.0" : "2.14.3", "updateable", 1,
			               "component", "bios", "version", "2.1.7", "updateable", 1,
			               "component", "hca.mlx5_0", "version", "28.39.1002",
			               "updateable", 1);
			TRY("firmware", rp_store_node_firmware_set(st, name, "demo", fw, ACTOR));
			json_decref(fw);
			bios = json_deep_copy(attrs);
			if (r == 1 && i == 6)
				json_object_set_new(bios, "SriovSupport", json_string("Disabled"));
			TRY("BIOS", rp_store_node_bios_set(st, name, "demo", bios, ACTOR));
			json_decref(bios);
		}
	}
	/* One node waits for a technician, as in any bring-up. */
	json_decref(in);
	in = json_pack("{s:b, s:s}", "maintenance", 1, "maintenance_reason",
	               "demo data: reseat GPU 5 (7 of 8 visible)");
	TRY("maintenance", rp_store_node_update(st, "gpu-r02-u22", in, 0, ACTOR, &out, &detail));
	rc = 0;
#undef TRY
out:
	json_decref(in);
	json_decref(out);
	json_decref(detail);
	json_decref(attrs);
	json_decref(comps);
	return rc;
}

int
rp_demo_prepare(struct rp_store *st, const char *image_dir, char *why, size_t whylen)
{
	int demo = 0, empty = 0;

	if (rp_store_demo_get(st, &demo, &empty) != RP_ERR_OK) {
		snprintf(why, whylen, "demo: cannot read the database");
		return -1;
	}
	if (demo && !empty)
		return 0;
	if (!demo && !empty) {
		snprintf(why, whylen,
		         "--demo: this database holds real data (racks or nodes); "
		         "demo data goes only into an empty one (the default "
		         "--data-dir with --demo is ./var-demo)");
		return -1;
	}
	/* Marked first: an interrupted seeding leaves a demo database, never a real one. */
	if (!demo && rp_store_demo_mark(st) != RP_ERR_OK) {
		snprintf(why, whylen, "demo: cannot mark the database");
		return -1;
	}
	if (seed(st, image_dir, why, whylen) < 0)
		return -1;
	rp_log_info("demo: seeded %d racks of %d nodes (fake BMCs); this database is demo data",
	            RACKS, PER_RACK);
	return 0;
}
