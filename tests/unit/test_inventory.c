/* agent inventory: exact values from the fixture trees (tests/fixtures/inventory/), NIC
 * addresses from a list shaped as getifaddrs(3) makes it, skipped sources, and garbage that
 * must not crash or hang the collector. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "inventory.h"

#ifndef RP_FIXTURES
#error "RP_FIXTURES must name tests/fixtures/inventory"
#endif

/* --- checks on a path into the inventory ("pci.devices.3.address") --------------------- */

static json_t *
at(json_t *j, const char *path)
{
	char buf[256], *tok, *save = NULL;

	snprintf(buf, sizeof buf, "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok != NULL && j != NULL;
	     tok = strtok_r(NULL, ".", &save))
		j = json_is_array(j) ? json_array_get(j, strtoul(tok, NULL, 10))
		                     : json_object_get(j, tok);
	return j;
}

static void
mismatch(json_t *v, const char *path, const char *want, const char *file, int line)
{
	char *got = v != NULL ? json_dumps(v, JSON_ENCODE_ANY) : NULL;

	print_error("%s: got %s, want %s\n", path, got != NULL ? got : "(missing)", want);
	free(got);
	_fail(file, line);
}

static void
check_str(json_t *j, const char *path, const char *want, const char *file, int line)
{
	json_t *v = at(j, path);
	char w[512];

	if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0) {
		snprintf(w, sizeof w, "\"%s\"", want);
		mismatch(v, path, w, file, line);
	}
}

static void
check_int(json_t *j, const char *path, long long want, const char *file, int line)
{
	json_t *v = at(j, path);
	char w[64];

	if (!json_is_integer(v) || json_integer_value(v) != want) {
		snprintf(w, sizeof w, "%lld", want);
		mismatch(v, path, w, file, line);
	}
}

static void
check_null(json_t *j, const char *path, const char *file, int line)
{
	json_t *v = at(j, path);

	if (!json_is_null(v))
		mismatch(v, path, "null", file, line);
}

static void
check_bool(json_t *j, const char *path, int want, const char *file, int line)
{
	json_t *v = at(j, path);

	if (!json_is_boolean(v) || json_is_true(v) != !!want)
		mismatch(v, path, want ? "true" : "false", file, line);
}

static void
check_len(json_t *j, const char *path, size_t want, const char *file, int line)
{
	json_t *v = at(j, path);
	char w[64];

	if (!json_is_array(v) || json_array_size(v) != want) {
		snprintf(w, sizeof w, "an array of %zu", want);
		mismatch(v, path, w, file, line);
	}
}

/* A section that is only {"source": src, "skipped": why}. */
static void
check_skipped(json_t *j, const char *path, const char *src, const char *why, const char *file,
              int line)
{
	json_t *v = at(j, path);
	char p[128];

	snprintf(p, sizeof p, "%s.source", path);
	check_str(j, p, src, file, line);
	snprintf(p, sizeof p, "%s.skipped", path);
	check_str(j, p, why, file, line);
	if (json_object_size(v) != 2)
		mismatch(v, path, "only source and skipped", file, line);
}

#define STR(j, p, w)        check_str(j, p, w, __FILE__, __LINE__)
#define INT(j, p, w)        check_int(j, p, w, __FILE__, __LINE__)
#define NUL(j, p)           check_null(j, p, __FILE__, __LINE__)
#define BOOL(j, p, w)       check_bool(j, p, w, __FILE__, __LINE__)
#define LEN(j, p, w)        check_len(j, p, w, __FILE__, __LINE__)
#define SKIPPED(j, p, s, w) check_skipped(j, p, s, w, __FILE__, __LINE__)

/* The item of array path whose key equals value, or NULL. */
static json_t *
find(json_t *j, const char *path, const char *key, const char *value)
{
	json_t *v;
	size_t i;

	json_array_foreach(at(j, path), i, v)
	{
		if (json_is_string(json_object_get(v, key)) &&
		    strcmp(json_string_value(json_object_get(v, key)), value) == 0)
			return v;
	}
	return NULL;
}

static json_t *
fixture(const char *name)
{
	char root[PATH_MAX];
	json_t *j;

	snprintf(root, sizeof root, "%s/%s", RP_FIXTURES, name);
	j = rp_agent_inventory(root);
	assert_non_null(j);
	return j;
}

/* Every section names its source, wherever it came from. */
static void
check_sources(json_t *j)
{
	static const char *const sections[] = {"system", "cpu", "memory", "memory.dimms", "disks",
	                                       "nics",   "pci", "gpus",   "infiniband",   "lldp"};
	char p[64];
	size_t i;

	INT(j, "format", 1);
	STR(j, "agent_version", "0.1.0");
	assert_true(json_is_string(json_object_get(j, "collected_at")));
	for (i = 0; i < sizeof sections / sizeof *sections; i++) {
		snprintf(p, sizeof p, "%s.source", sections[i]);
		assert_true(json_is_string(at(j, p)));
	}
}

/* --- fixtures ------------------------------------------------------------------------- */

/* Captured from the 2-core Debian VM this project is built on. */
static void
test_vm(void **state)
{
	json_t *j = fixture("vm");

	(void)state;
	check_sources(j);
	STR(j, "hostname", "vm");
	STR(j, "boot_id", "88c27491-d78e-45a4-b765-bc8ef5edbee6");
	SKIPPED(j, "system", "/sys/class/dmi/id", "no such directory");

	STR(j, "cpu.model", "Intel(R) Xeon(R) Processor");
	INT(j, "cpu.sockets", 1);
	INT(j, "cpu.cores", 2);
	INT(j, "cpu.threads", 2);
	INT(j, "cpu.numa_nodes", 1);
	BOOL(j, "cpu.flags.avx512f", 1);
	BOOL(j, "cpu.flags.amx_tile", 1);
	BOOL(j, "cpu.flags.vmx", 0);
	BOOL(j, "cpu.flags.svm", 0);

	INT(j, "memory.total_bytes", 24684084LL * 1024);
	SKIPPED(j, "memory.dimms", "dmidecode -t memory", "not installed");

	/* loop0-7 and zram0 are left out. */
	LEN(j, "disks.items", 1);
	STR(j, "disks.items.0.name", "vda");
	INT(j, "disks.items.0.size_bytes", 536870912LL * 512);
	STR(j, "disks.items.0.serial", "overlayblk");
	NUL(j, "disks.items.0.model");
	BOOL(j, "disks.items.0.nvme", 0);
	BOOL(j, "disks.items.0.rotational", 1);
	BOOL(j, "disks.items.0.removable", 0);

	/* lo and the ifb devices have no device link. */
	LEN(j, "nics.items", 1);
	STR(j, "nics.items.0.name", "eth0");
	STR(j, "nics.items.0.mac", "02:fc:00:00:00:01");
	STR(j, "nics.items.0.driver", "virtio_net");
	BOOL(j, "nics.items.0.link", 1);
	NUL(j, "nics.items.0.speed_mbps");
	INT(j, "nics.items.0.mtu", 1400);
	STR(j, "nics.items.0.pci", "0000:00:03.0"); /* through the virtio2 level */
	STR(j, "nics.items.0.operstate", "up");
	LEN(j, "nics.items.0.addresses", 0); /* a tree's NICs never get the host's addresses */

	LEN(j, "pci.devices", 6);
	INT(j, "pci.gpu_count", 0);
	INT(j, "pci.hca_count", 0);
	STR(j, "pci.devices.0.address", "0000:00:00.0");
	NUL(j, "pci.devices.0.driver");
	STR(j, "pci.devices.3.address", "0000:00:03.0");
	STR(j, "pci.devices.3.class", "0x020000");
	STR(j, "pci.devices.3.vendor", "0x1af4");
	STR(j, "pci.devices.3.device", "0x1041");
	STR(j, "pci.devices.3.driver", "virtio-pci");
	NUL(j, "pci.devices.3.numa_node");

	STR(j, "gpus.source", "/sys/bus/pci/devices");
	INT(j, "gpus.count", 0);
	LEN(j, "gpus.items", 0);
	STR(j, "gpus.nvidia_smi", "not installed");
	SKIPPED(j, "infiniband", "/sys/class/infiniband", "no such directory");
	SKIPPED(j, "lldp", "lldpctl -f json", "not installed");
	json_decref(j);
}

/* What both HGX trees share. */
static void
check_hgx_common(json_t *j)
{
	json_t *v;
	size_t i, ndr = 0;

	check_sources(j);
	STR(j, "hostname", "gpu-r01-u07");
	STR(j, "system.vendor", "Supermicro");
	STR(j, "system.product", "SYS-821GE-TNHR");
	STR(j, "system.serial", "S7X00412");
	STR(j, "system.uuid", "2c1f6e80-5b0a-11ee-8000-3cecef6a1b20");
	STR(j, "system.board", "X13DEG-OAD");
	STR(j, "system.bios.vendor", "American Megatrends International, LLC.");
	STR(j, "system.bios.version", "2.1");
	STR(j, "system.bios.date", "05/16/2024");

	STR(j, "cpu.model", "Intel(R) Xeon(R) Platinum 8480+");
	INT(j, "cpu.sockets", 2);
	INT(j, "cpu.cores", 112);
	INT(j, "cpu.threads", 224);
	INT(j, "cpu.numa_nodes", 2);
	BOOL(j, "cpu.flags.amx_tile", 1);
	BOOL(j, "cpu.flags.avx512_bf16", 1);
	BOOL(j, "cpu.flags.vmx", 1);
	BOOL(j, "cpu.flags.svm", 0);

	STR(j, "memory.dimms.source", "dmidecode -t memory");
	INT(j, "memory.dimms.count", 32);
	LEN(j, "memory.dimms.items", 32);
	STR(j, "memory.dimms.items.0.locator", "P1-DIMMA1");
	STR(j, "memory.dimms.items.0.bank_locator", "P0_Node0_Channel0_Dimm0");
	BOOL(j, "memory.dimms.items.0.populated", 1);
	INT(j, "memory.dimms.items.0.size_bytes", 64LL << 30);
	STR(j, "memory.dimms.items.0.type", "DDR5");
	INT(j, "memory.dimms.items.0.speed_mts", 4800);
	STR(j, "memory.dimms.items.0.manufacturer", "Samsung");
	STR(j, "memory.dimms.items.0.part_number", "M321R8GA0BB0-CQKZJ");
	STR(j, "memory.dimms.items.0.serial", "4A1C3E41");
	STR(j, "memory.dimms.items.31.locator", "P2-DIMMH2");

	/* 2 boot + 8 data NVMe; loop0 is left out. */
	LEN(j, "disks.items", 10);
	STR(j, "disks.items.0.name", "nvme0n1");
	INT(j, "disks.items.0.size_bytes", 960197124096LL);
	STR(j, "disks.items.0.model", "SAMSUNG MZ1L2960HCJR-00A07"); /* space padding trimmed */
	STR(j, "disks.items.0.serial", "S665NE0T600201");
	STR(j, "disks.items.0.wwid", "eui.0025388b1c0a0000");
	BOOL(j, "disks.items.0.nvme", 1);
	BOOL(j, "disks.items.0.rotational", 0);
	BOOL(j, "disks.items.0.removable", 0);
	STR(j, "disks.items.1.name", "nvme1n1");
	INT(j, "disks.items.1.size_bytes", 960197124096LL);
	for (i = 2; i < 10; i++) {
		char p[64], name[16];

		snprintf(p, sizeof p, "disks.items.%zu.name", i);
		snprintf(name, sizeof name, "nvme%zun1", i);
		STR(j, p, name);
		snprintf(p, sizeof p, "disks.items.%zu.size_bytes", i);
		INT(j, p, 3840755982336LL);
		snprintf(p, sizeof p, "disks.items.%zu.model", i);
		STR(j, p, "SAMSUNG MZQL23T8HCLS-00A07");
	}
	STR(j, "disks.items.9.name", "nvme9n1"); /* natural order: not after nvme1n1 */

	/* lo and docker0 are left out. */
	LEN(j, "nics.items", 3);
	STR(j, "nics.items.0.name", "eno1");
	STR(j, "nics.items.0.mac", "3c:ec:ef:6a:1b:20");
	STR(j, "nics.items.0.driver", "igb");
	BOOL(j, "nics.items.0.link", 1);
	INT(j, "nics.items.0.speed_mbps", 1000);
	INT(j, "nics.items.0.mtu", 1500);
	STR(j, "nics.items.0.pci", "0000:04:00.0");
	STR(j, "nics.items.0.operstate", "up");
	STR(j, "nics.items.1.name", "eno2");
	STR(j, "nics.items.1.mac", "3c:ec:ef:6a:1b:21");
	STR(j, "nics.items.1.pci", "0000:04:00.1");
	STR(j, "nics.items.2.name", "enp225s0np0");
	STR(j, "nics.items.2.mac", "58:a2:e1:4c:7e:20");
	STR(j, "nics.items.2.driver", "mlx5_core");
	INT(j, "nics.items.2.speed_mbps", 200000);
	INT(j, "nics.items.2.mtu", 9000);
	STR(j, "nics.items.2.pci", "0000:e1:00.0");
	for (i = 0; i < 3; i++) {
		char p[64];

		snprintf(p, sizeof p, "nics.items.%zu.addresses", i);
		LEN(j, p, 0);
	}

	/* 8 InfiniBand HCAs plus the RoCE port: docs/inventory.md counts both. */
	INT(j, "pci.hca_count", 9);
	v = find(j, "pci.devices", "address", "0000:18:00.0");
	assert_non_null(v);
	STR(v, "class", "0x030200");
	STR(v, "vendor", "0x10de");
	STR(v, "device", "0x2330");
	STR(v, "driver", "nvidia");
	INT(v, "numa_node", 0);
	v = find(j, "pci.devices", "address", "0000:db:00.0");
	assert_non_null(v);
	INT(v, "numa_node", 1);
	v = find(j, "pci.devices", "address", "0000:19:00.0");
	assert_non_null(v);
	STR(v, "class", "0x020700");
	STR(v, "vendor", "0x15b3");
	STR(v, "device", "0x1021");
	STR(v, "driver", "mlx5_core");
	/* An NVSwitch is NVIDIA but no GPU; the BMC's VGA is a display but not NVIDIA. */
	v = find(j, "pci.devices", "address", "0000:1c:00.0");
	assert_non_null(v);
	STR(v, "class", "0x068000");
	v = find(j, "pci.devices", "address", "0000:02:00.0");
	assert_non_null(v);
	STR(v, "class", "0x030000");
	STR(v, "driver", "ast");

	STR(j, "gpus.source", "nvidia-smi");
	STR(j, "gpus.items.0.name", "NVIDIA H100 80GB HBM3");
	INT(j, "gpus.items.0.index", 0);
	STR(j, "gpus.items.0.serial", "1654923011401");
	STR(j, "gpus.items.0.uuid", "GPU-5c1e7a42-0b3d-4e9f-8a21-3f6d0c9e71a0");
	STR(j, "gpus.items.0.vbios", "96.00.74.00.01");
	INT(j, "gpus.items.0.memory_mib", 81559);
	STR(j, "gpus.items.0.driver", "550.54.15");
	STR(j, "gpus.items.0.pci", "0000:18:00.0"); /* from 00000000:18:00.0 */

	LEN(j, "infiniband.items", 9);
	STR(j, "infiniband.items.0.device", "mlx5_0");
	INT(j, "infiniband.items.0.port", 1);
	STR(j, "infiniband.items.0.state", "ACTIVE");
	STR(j, "infiniband.items.0.phys_state", "LinkUp");
	STR(j, "infiniband.items.0.rate", "400 Gb/sec (4X NDR)");
	INT(j, "infiniband.items.0.rate_gbps", 400);
	STR(j, "infiniband.items.0.link_layer", "InfiniBand");
	STR(j, "infiniband.items.0.fw_version", "28.39.1002");
	STR(j, "infiniband.items.0.board_id", "MT_0000000838");
	STR(j, "infiniband.items.0.node_guid", "a088:c203:0063:1a40");
	STR(j, "infiniband.items.0.port_guid", "a088:c203:0063:1a40");
	INT(j, "infiniband.items.0.lid", 17);
	STR(j, "infiniband.items.0.pci", "0000:19:00.0");
	STR(j, "infiniband.items.7.device", "mlx5_7");
	INT(j, "infiniband.items.7.lid", 24);
	STR(j, "infiniband.items.7.pci", "0000:dc:00.0");
	STR(j, "infiniband.items.8.device", "mlx5_8");
	STR(j, "infiniband.items.8.link_layer", "Ethernet");
	INT(j, "infiniband.items.8.rate_gbps", 200);
	INT(j, "infiniband.items.8.lid", 0);
	STR(j, "infiniband.items.8.port_guid", "5aa2:e1ff:fe4c:7e20");
	STR(j, "infiniband.items.8.pci", "0000:e1:00.0");
	STR(j, "infiniband.items.8.board_id", "MT_0000000834");
	json_array_foreach(at(j, "infiniband.items"), i, v)
	{
		if (strcmp(json_string_value(json_object_get(v, "link_layer")), "InfiniBand") ==
		            0 &&
		    strcmp(json_string_value(json_object_get(v, "state")), "ACTIVE") == 0 &&
		    json_integer_value(json_object_get(v, "rate_gbps")) == 400)
			ndr++;
	}
	assert_int_equal(ndr, 8);

	LEN(j, "lldp.neighbors", 2);
	STR(j, "lldp.neighbors.0.interface", "eno1");
	STR(j, "lldp.neighbors.0.chassis", "leaf-r01-a");
	STR(j, "lldp.neighbors.0.chassis_id", "0c:42:a1:5e:7f:00");
	STR(j, "lldp.neighbors.0.port", "Ethernet1/7");
	STR(j, "lldp.neighbors.0.port_description", "gpu-r01-u07 eno1");
	STR(j, "lldp.neighbors.0.mgmt_ip", "10.1.0.11");
	STR(j, "lldp.neighbors.1.interface", "eno2");
	STR(j, "lldp.neighbors.1.chassis", "leaf-r01-b");
	STR(j, "lldp.neighbors.1.port", "Ethernet1/7");
	STR(j, "lldp.neighbors.1.port_description", "gpu-r01-u07 eno2");
	STR(j, "lldp.neighbors.1.mgmt_ip", "10.1.0.12");
}

static void
test_gpu_h100_8x(void **state)
{
	json_t *j = fixture("gpu-h100-8x"), *v;
	long long sum = 0;
	size_t i;

	(void)state;
	check_hgx_common(j);
	INT(j, "memory.total_bytes", 2163527872512LL);
	INT(j, "memory.dimms.populated", 32);
	json_array_foreach(at(j, "memory.dimms.items"), i, v) sum +=
	        json_integer_value(json_object_get(v, "size_bytes"));
	assert_int_equal(sum, 2LL << 40);
	LEN(j, "pci.devices", 68);
	INT(j, "pci.gpu_count", 8);
	INT(j, "gpus.count", 8);
	LEN(j, "gpus.items", 8);
	json_array_foreach(at(j, "gpus.items"), i, v)
	{
		INT(v, "index", (long long)i);
		STR(v, "name", "NVIDIA H100 80GB HBM3");
		INT(v, "memory_mib", 81559);
	}
	STR(j, "gpus.items.6.pci", "0000:ba:00.0");
	STR(j, "gpus.items.7.pci", "0000:db:00.0");
	STR(j, "gpus.items.7.uuid", "GPU-c6f81b30-a9d4-4e67-8b2c-5e3a7f0d9c18");
	json_decref(j);
}

/* The same server with GPU 0000:ba:00.0 off the bus and two DIMM slots empty: what rack
 * acceptance must report as "GPU count 7, expected 8" and "DIMM count 30, expected 32". */
static void
test_gpu_h100_7x_missing(void **state)
{
	json_t *j = fixture("gpu-h100-7x-missing"), *v;
	size_t i;

	(void)state;
	check_hgx_common(j);
	INT(j, "pci.gpu_count", 7);
	INT(j, "gpus.count", 7);
	LEN(j, "gpus.items", 7);
	assert_null(find(j, "gpus.items", "pci", "0000:ba:00.0"));
	assert_null(find(j, "pci.devices", "address", "0000:ba:00.0"));
	assert_non_null(
	        find(j, "pci.devices", "address", "0000:b7:01.0")); /* its empty root port */
	LEN(j, "pci.devices", 67);
	INT(j, "gpus.items.6.index", 6);
	STR(j, "gpus.items.6.pci", "0000:db:00.0");

	INT(j, "memory.dimms.count", 32);
	INT(j, "memory.dimms.populated", 30);
	INT(j, "memory.total_bytes", 1978602460LL * 1024);
	json_array_foreach(at(j, "memory.dimms.items"), i, v)
	{
		const char *loc = json_string_value(json_object_get(v, "locator"));
		int empty = strcmp(loc, "P1-DIMMF2") == 0 || strcmp(loc, "P2-DIMMB2") == 0;

		BOOL(v, "populated", !empty);
		INT(v, "size_bytes", empty ? 0 : 64LL << 30);
		if (empty) {
			NUL(v, "type");
			NUL(v, "speed_mts");
			NUL(v, "manufacturer"); /* "NO DIMM" */
			NUL(v, "part_number");
			NUL(v, "serial");
		}
	}
	json_decref(j);
}

/* Only /proc/cpuinfo (an arm64 one) and /proc/meminfo: everything else is skipped. */
static void
test_minimal(void **state)
{
	json_t *j = fixture("minimal");

	(void)state;
	check_sources(j);
	NUL(j, "hostname");
	NUL(j, "boot_id");
	SKIPPED(j, "system", "/sys/class/dmi/id", "no such directory");
	STR(j, "cpu.source", "/proc/cpuinfo");
	assert_null(at(j, "cpu.skipped"));
	INT(j, "cpu.threads", 4);
	NUL(j, "cpu.model");
	NUL(j, "cpu.sockets");
	NUL(j, "cpu.cores");
	BOOL(j, "cpu.flags.aes", 1);
	BOOL(j, "cpu.flags.avx2", 0);
	NUL(j, "cpu.numa_nodes");
	STR(j, "cpu.numa_source", "/sys/devices/system/node");
	STR(j, "cpu.numa_skipped", "no such directory");
	STR(j, "memory.source", "/proc/meminfo");
	INT(j, "memory.total_bytes", 16108348LL * 1024);
	SKIPPED(j, "memory.dimms", "dmidecode -t memory", "not installed");
	SKIPPED(j, "disks", "/sys/block", "no such directory");
	SKIPPED(j, "nics", "/sys/class/net", "no such directory");
	SKIPPED(j, "pci", "/sys/bus/pci/devices", "no such directory");
	SKIPPED(j, "gpus", "nvidia-smi", "not installed; /sys/bus/pci/devices: no such directory");
	SKIPPED(j, "infiniband", "/sys/class/infiniband", "no such directory");
	SKIPPED(j, "lldp", "lldpctl -f json", "not installed");
	json_decref(j);
}

static void
test_root_spellings(void **state)
{
	char root[PATH_MAX];
	json_t *a, *b;

	(void)state;
	snprintf(root, sizeof root, "%s/minimal//", RP_FIXTURES);
	a = rp_agent_inventory(root);
	b = fixture("minimal");
	assert_non_null(a);
	json_object_del(a, "collected_at");
	json_object_del(b, "collected_at");
	assert_true(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	/* The live system, however it looks: never NULL, every section there, every NIC with
	 * its addresses (getifaddrs). */
	a = rp_agent_inventory(NULL);
	assert_non_null(a);
	check_sources(a);
	{
		json_t *it;
		size_t i;

		json_array_foreach(at(a, "nics.items"), i, it)
		        assert_true(json_is_array(json_object_get(it, "addresses")));
	}
	json_decref(a);
	a = rp_agent_inventory("/nonexistent/rackpilot-inventory");
	assert_non_null(a);
	SKIPPED(a, "cpu", "/proc/cpuinfo", "no such file");
	json_decref(a);
}

/* --- NIC addresses ------------------------------------------------------------------- */

static struct sockaddr_in
v4(const char *a)
{
	struct sockaddr_in s = {.sin_family = AF_INET};

	assert_int_equal(inet_pton(AF_INET, a, &s.sin_addr), 1);
	return s;
}

static struct sockaddr_in6
v6(const char *a)
{
	struct sockaddr_in6 s = {.sin6_family = AF_INET6};

	assert_int_equal(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
	return s;
}

/* The vm tree (one NIC, eth0) with a list shaped as getifaddrs(3) makes it: eth0's packet
 * entry (the MAC) and its IPv4 and IPv6 addresses, an alias label, a host route without a
 * netmask, and entries of other interfaces (lo, eth01, a bridge) and without an address. */
static void
test_nic_addresses(void **state)
{
	struct sockaddr_in a1 = v4("10.0.0.7"), m1 = v4("255.255.255.0"), a2 = v4("10.0.0.8"),
	                   m2 = v4("255.255.255.255"), a3 = v4("192.0.2.1"), lo = v4("127.0.0.1"),
	                   mlo = v4("255.0.0.0"), other = v4("10.9.9.9"), m0 = v4("0.0.0.0");
	struct sockaddr_in6 b1 = v6("fe80::5054:ff:fe12:3456"), n1 = v6("ffff:ffff:ffff:ffff::"),
	                    b2 = v6("2001:db8:0:7::7"), n2 = v6("ffff:ffff:ffff:fff0::");
	struct sockaddr pk = {.sa_family = AF_PACKET};
	struct ifaddrs l[11];
	char root[PATH_MAX];
	json_t *j;
	size_t i;

	(void)state;
	memset(l, 0, sizeof l);
	l[0] = (struct ifaddrs){.ifa_name = "lo", .ifa_addr = &pk};
	l[1] = (struct ifaddrs){.ifa_name = "eth0", .ifa_addr = &pk};
	l[2] = (struct ifaddrs){.ifa_name = "lo",
	                        .ifa_addr = (struct sockaddr *)&lo,
	                        .ifa_netmask = (struct sockaddr *)&mlo};
	l[3] = (struct ifaddrs){.ifa_name = "eth0",
	                        .ifa_addr = (struct sockaddr *)&a1,
	                        .ifa_netmask = (struct sockaddr *)&m1};
	l[4] = (struct ifaddrs){.ifa_name = "eth0:1",
	                        .ifa_addr = (struct sockaddr *)&a2,
	                        .ifa_netmask = (struct sockaddr *)&m2};
	l[5] = (struct ifaddrs){.ifa_name = "eth01",
	                        .ifa_addr = (struct sockaddr *)&other,
	                        .ifa_netmask = (struct sockaddr *)&m1};
	l[6] = (struct ifaddrs){.ifa_name = "eth0", .ifa_addr = (struct sockaddr *)&a3};
	l[7] = (struct ifaddrs){.ifa_name = "eth0"}; /* no address (a down tunnel's) */
	l[8] = (struct ifaddrs){.ifa_name = "eth0",
	                        .ifa_addr = (struct sockaddr *)&b1,
	                        .ifa_netmask = (struct sockaddr *)&n1};
	l[9] = (struct ifaddrs){.ifa_name = "eth0",
	                        .ifa_addr = (struct sockaddr *)&b2,
	                        .ifa_netmask = (struct sockaddr *)&n2};
	l[10] = (struct ifaddrs){.ifa_name = "br0",
	                         .ifa_addr = (struct sockaddr *)&other,
	                         .ifa_netmask = (struct sockaddr *)&m0};
	for (i = 0; i + 1 < sizeof l / sizeof l[0]; i++)
		l[i].ifa_next = &l[i + 1];
	snprintf(root, sizeof root, "%s/vm", RP_FIXTURES);
	j = rp_agent_inventory_from(root, l);
	assert_non_null(j);
	STR(j, "nics.items.0.name", "eth0");
	LEN(j, "nics.items.0.addresses", 5);
	STR(j, "nics.items.0.addresses.0", "10.0.0.7/24");
	STR(j, "nics.items.0.addresses.1", "10.0.0.8/32");
	STR(j, "nics.items.0.addresses.2", "192.0.2.1/32");
	STR(j, "nics.items.0.addresses.3", "fe80::5054:ff:fe12:3456/64");
	STR(j, "nics.items.0.addresses.4", "2001:db8:0:7::7/60");
	json_decref(j);
	/* No list: every NIC still has the member, empty. */
	j = rp_agent_inventory_from(root, NULL);
	LEN(j, "nics.items.0.addresses", 0);
	json_decref(j);
}

/* --- garbage in temporary trees ------------------------------------------------------- */

static char tmp[64]; /* "/tmp/rp-inventory-XXXXXX" */

static int
setup_tmp(void **state)
{
	(void)state;
	snprintf(tmp, sizeof tmp, "/tmp/rp-inventory-XXXXXX");
	return mkdtemp(tmp) == NULL ? -1 : 0;
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
teardown_tmp(void **state)
{
	(void)state;
	return nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void
mkparents(const char *path)
{
	char p[PATH_MAX], *s;

	snprintf(p, sizeof p, "%s", path);
	for (s = p + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		if (mkdir(p, 0755) != 0)
			assert_int_equal(errno, EEXIST);
		*s = '/';
	}
}

/* Write len bytes of data to TMP/rel. */
static void
put_file(const char *rel, const void *data, size_t len)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof p, "%s%s", tmp, rel);
	mkparents(p);
	f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void
put_str(const char *rel, const char *s)
{
	put_file(rel, s, strlen(s));
}

static void
put_exec(const char *rel, const char *script)
{
	char p[PATH_MAX];

	put_str(rel, script);
	snprintf(p, sizeof p, "%s%s", tmp, rel);
	assert_int_equal(chmod(p, 0755), 0);
}

static void
put_link(const char *rel, const char *target)
{
	char p[PATH_MAX];

	snprintf(p, sizeof p, "%s%s", tmp, rel);
	mkparents(p);
	assert_int_equal(symlink(target, p), 0);
}

/* A cpuinfo cut at any byte — mid-record, mid-line, mid-flags — is parsed as far as it goes. */
static void
test_truncated_cpuinfo(void **state)
{
	char src[PATH_MAX], *buf;
	static const size_t cuts[] = {0, 1, 10, 600, 700, 5000, 100000};
	size_t len, i, k, procs;
	json_t *j;
	FILE *f;

	(void)state;
	snprintf(src, sizeof src, "%s/gpu-h100-8x/proc/cpuinfo", RP_FIXTURES);
	f = fopen(src, "rb");
	assert_non_null(f);
	buf = malloc(1 << 20);
	assert_non_null(buf);
	len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	for (i = 0; i < sizeof cuts / sizeof *cuts; i++) {
		put_file("/proc/cpuinfo", buf, cuts[i]);
		j = rp_agent_inventory(tmp);
		assert_non_null(j);
		STR(j, "cpu.source", "/proc/cpuinfo");
		for (k = 0, procs = 0; k + 11 <= cuts[i]; k++)
			if ((k == 0 || buf[k - 1] == '\n') &&
			    strncmp(buf + k, "processor\t:", 11) == 0)
				procs++;
		if (procs == 0)
			NUL(j, "cpu.threads");
		else
			INT(j, "cpu.threads", (long long)procs);
		if (cuts[i] >= 700)
			STR(j, "cpu.model", "Intel(R) Xeon(R) Platinum 8480+");
		if (cuts[i] == 700)
			BOOL(j, "cpu.flags.sse4_2", 0); /* cut inside "sse4_" */
		json_decref(j);
	}
	assert_true(len > 100000);
	free(buf);
}

/* Many processors, no newline at the end; and 17 MiB without any newline at all. */
static void
test_huge_cpuinfo(void **state)
{
	size_t size = 17u << 20, len = 0, p;
	char *buf = malloc(size);
	json_t *j;

	(void)state;
	assert_non_null(buf);
	for (p = 0; p < 20000; p++)
		len += (size_t)sprintf(buf + len,
		                       "processor\t: %zu\nphysical id\t: %zu\ncore id\t\t: %zu\n\n",
		                       p, p % 4, (p / 4) % 2500);
	put_file("/proc/cpuinfo", buf, len - 2);
	j = rp_agent_inventory(tmp);
	assert_non_null(j);
	INT(j, "cpu.threads", 20000);
	INT(j, "cpu.sockets", 4);
	INT(j, "cpu.cores", 10000);
	NUL(j, "cpu.flags");
	json_decref(j);

	memset(buf, 'x', size);
	put_file("/proc/cpuinfo", buf, size);
	j = rp_agent_inventory(tmp);
	assert_non_null(j);
	NUL(j, "cpu.threads");
	json_decref(j);
	free(buf);
}

/* Tools that print garbage: NUL bytes, invalid UTF-8, an overlong line, near-miss rows. */
static void
test_garbage_tools(void **state)
{
	char junk[300000];
	size_t i, n = 0;
	json_t *j;

	(void)state;
	for (i = 0; i < 4096; i++)
		junk[n++] = (char)(i * 7 + 3);
	n += (size_t)sprintf(junk + n, "\n1,2,3,4,5,6,7,8\n0, x, y, z, v, 1, d, 00000000:zz:00.0\n"
	                               "0, a, b, c, d, e, f, 00000000:18:00.0, extra\n"
	                               ", , , , , , , \n,,,,,,,\nMemory Device\n\tSize: 64 GB\n"
	                               "{\"lldp\": \n\xff\xfe\xc3\x28 Handle 0x0001\n");
	memset(junk + n, 'A', sizeof junk - n - 1);
	n = sizeof junk - 1;
	junk[n] = '\0';
	put_file("/usr/bin/junk", junk, n);
	put_exec("/usr/bin/nvidia-smi", "#!/bin/sh\ncat \"${0%/*}/junk\"\n");
	put_exec("/usr/bin/dmidecode", "#!/bin/sh\ncat \"${0%/*}/junk\"\n");
	put_exec("/usr/bin/lldpctl", "#!/bin/sh\ncat \"${0%/*}/junk\"\n");
	put_link("/sys/bus/pci/devices/0000:18:00.0", "../../../devices/pci0000:00/0000:18:00.0");
	put_str("/sys/devices/pci0000:00/0000:18:00.0/class", "0x030200\n");
	put_str("/sys/devices/pci0000:00/0000:18:00.0/vendor", "0x10de\n");
	put_str("/sys/devices/pci0000:00/0000:18:00.0/device", "0x2330\n");
	j = rp_agent_inventory(tmp);
	assert_non_null(j);
	/* No row is 8 fields with an index and a PCI address: fall back to PCI. */
	STR(j, "gpus.source", "/sys/bus/pci/devices");
	STR(j, "gpus.nvidia_smi", "no GPU rows in output");
	INT(j, "gpus.count", 1);
	STR(j, "gpus.items.0.pci", "0000:18:00.0");
	NUL(j, "gpus.items.0.name");
	/* The junk has one Memory Device (with a 64 GB Size) and no Locator. */
	INT(j, "memory.dimms.count", 1);
	INT(j, "memory.dimms.populated", 1);
	NUL(j, "memory.dimms.items.0.locator");
	SKIPPED(j, "lldp", "lldpctl -f json", "unparseable output");
	json_decref(j);

	/* Failing tools: nvidia-smi without a driver exits 6 ("No devices were found"). */
	put_exec("/usr/bin/nvidia-smi", "#!/bin/sh\necho 'No devices were found'\nexit 6\n");
	put_exec("/usr/bin/dmidecode",
	         "#!/bin/sh\necho '# No SMBIOS nor DMI entry point found, sorry.'\n");
	put_exec("/usr/bin/lldpctl", "#!/bin/sh\nkill -9 $$\n");
	j = rp_agent_inventory(tmp);
	assert_non_null(j);
	STR(j, "gpus.source", "/sys/bus/pci/devices");
	STR(j, "gpus.nvidia_smi", "exit status 6");
	SKIPPED(j, "memory.dimms", "dmidecode -t memory", "no memory devices in output");
	SKIPPED(j, "lldp", "lldpctl -f json", "killed by signal 9");
	json_decref(j);

	/* A fixture tool that is no executable is not installed. */
	put_str("/usr/bin/nvidia-smi", "not a script");
	{
		char p[PATH_MAX];

		snprintf(p, sizeof p, "%s/usr/bin/nvidia-smi", tmp);
		assert_int_equal(chmod(p, 0644), 0);
	}
	j = rp_agent_inventory(tmp);
	assert_non_null(j);
	STR(j, "gpus.nvidia_smi", "not installed");
	json_decref(j);
}

/* Near-miss values inside otherwise good tool output. */
static void
test_odd_values(void **state)
{
	json_t *j;

	(void)state;
	put_exec("/usr/bin/nvidia-smi", "#!/bin/sh\n"
	                                "printf '0, NVIDIA H100 \\377\\376 80GB, [N/A], GPU-1, "
	                                "[Not Supported], [N/A], 550.54.15, "
	                                "00000000:1B:00.0\\n'\n"
	                                "printf 'garbage\\n1, NVIDIA H100 80GB HBM3, 1, GPU-2, "
	                                "96.00.74.00.01, 81559, 550.54.15, "
	                                "0000:9a:00.0\\n'\n");
	put_exec("/usr/bin/dmidecode",
	         "#!/bin/sh\ncat <<'EOF'\n"
	         "Handle 0x0011, DMI type 17, 92 bytes\nMemory Device\n\tSize: "
	         "99999999999999999999 GB\n"
	         "\tSpeed: -5 MT/s\n\tLocator: A\n"
	         "Handle 0x0012, DMI type 17, 92 bytes\nMemory Device\n\tSize: 18014398509481984 "
	         "TB\n"
	         "\tLocator: B\n"
	         "Handle 0x0013, DMI type 17, 92 bytes\nMemory Device\n\tSize: 32 GiB\n\tSpeed: "
	         "4800 MHz\n"
	         "\tLocator: C\n"
	         "Handle 0x0014, DMI type 17, 92 bytes\nMemory Device\n\tSize: Unknown\n\tLocator: "
	         "D\n"
	         "Handle 0x0015, DMI type 17, 92 bytes\nMemory Device\n\tSize: 0 MB\n\tLocator: E\n"
	         "Handle 0x0016, DMI type 20, 35 bytes\nMemory Device Mapped Address\n\tRange "
	         "Size: 64 GB\n"
	         "EOF\n");
	/* lldpd's json0 shape, a nameless chassis, and one interface as an object. */
	put_exec(
	        "/usr/bin/lldpctl",
	        "#!/bin/sh\ncat <<'EOF'\n"
	        "{\"lldp\": [{\"interface\": [{\"name\": \"eno1\", \"via\": \"LLDP\", \"chassis\": "
	        "[{\"id\": "
	        "[{\"type\": \"mac\", \"value\": \"00:11:22:33:44:55\"}], \"name\": [{\"value\": "
	        "\"switch-a\"}], \"mgmt-ip\": [{\"value\": \"192.0.2.10\"}]}], \"port\": [{\"id\": "
	        "[{\"type\": \"ifname\", \"value\": \"swp1\"}], \"descr\": [{\"value\": \" "
	        "\"}]}]}, "
	        "{\"name\": \"eno2\", \"chassis\": [{\"id\": [{\"type\": \"mac\", \"value\": "
	        "\"66:77:88:99:aa:bb\"}]}], \"port\": [{\"id\": [{\"value\": \"Gi1/0/2\"}]}]}, 42, "
	        "\"x\", {\"eno3\": [{\"chassis\": {\"id\": {\"value\": \"c\"}}, \"port\": "
	        "7}]}]}]}\n"
	        "EOF\n");
	j = rp_agent_inventory(tmp);
	assert_non_null(j);
	STR(j, "gpus.source", "nvidia-smi");
	INT(j, "gpus.count", 2);
	STR(j, "gpus.items.0.name", "NVIDIA H100 ?? 80GB"); /* invalid UTF-8 made '?' */
	NUL(j, "gpus.items.0.serial");
	NUL(j, "gpus.items.0.vbios");
	NUL(j, "gpus.items.0.memory_mib");
	STR(j, "gpus.items.0.pci", "0000:1b:00.0");
	STR(j, "gpus.items.1.pci", "0000:9a:00.0");

	INT(j, "memory.dimms.count", 5);
	/* Only E says it is empty; A and B (sizes too big to hold) and D are of unknown size. */
	INT(j, "memory.dimms.populated", 4);
	NUL(j, "memory.dimms.items.0.size_bytes");
	NUL(j, "memory.dimms.items.0.speed_mts");
	NUL(j, "memory.dimms.items.1.size_bytes");
	INT(j, "memory.dimms.items.2.size_bytes", 32LL << 30);
	INT(j, "memory.dimms.items.2.speed_mts", 4800);
	BOOL(j, "memory.dimms.items.3.populated", 1);
	NUL(j, "memory.dimms.items.3.size_bytes");
	BOOL(j, "memory.dimms.items.4.populated", 0);

	LEN(j, "lldp.neighbors", 3);
	STR(j, "lldp.neighbors.0.interface", "eno1");
	STR(j, "lldp.neighbors.0.chassis", "switch-a");
	STR(j, "lldp.neighbors.0.chassis_id", "00:11:22:33:44:55");
	STR(j, "lldp.neighbors.0.port", "swp1");
	NUL(j, "lldp.neighbors.0.port_description");
	STR(j, "lldp.neighbors.0.mgmt_ip", "192.0.2.10");
	STR(j, "lldp.neighbors.1.chassis", "66:77:88:99:aa:bb"); /* no name: the id */
	NUL(j, "lldp.neighbors.1.mgmt_ip");
	STR(j, "lldp.neighbors.2.interface", "eno3");
	NUL(j, "lldp.neighbors.2.port");
	json_decref(j);
}

/* Symlink loops, links out of the root, absolute links, FIFOs, directories and garbage where
 * files should be: nothing crashes, hangs or escapes the root. */
static void
test_hostile_tree(void **state)
{
	char p[PATH_MAX], link[64], target[64];
	json_t *j;
	int i;

	(void)state;
	put_link("/sys/class/net/eth0", "eth0");
	put_link("/sys/class/net/eth1", "eth2");
	put_link("/sys/class/net/eth2", "eth1");
	put_link("/sys/class/net/eth3/device", "device");
	/* Out of the root: ".." stops at it, so this is ROOT/etc, which is not there. */
	put_link("/sys/class/net/eth4", "../../../../../../../../../../../../etc");
	put_link("/sys/class/net/eth4x", "/etc");
	/* Absolute links are taken inside the root. */
	put_link("/sys/class/net/eth5", "/sys/devices/pci0000:00/0000:00:19.0/net/eth5");
	put_link("/sys/devices/pci0000:00/0000:00:19.0/net/eth5/device",
	         "/sys/devices/pci0000:00/0000:00:19.0");
	put_link("/sys/devices/pci0000:00/0000:00:19.0/driver", "/sys/bus/pci/drivers/e1000e");
	put_str("/sys/devices/pci0000:00/0000:00:19.0/net/eth5/address", "AA:BB:CC:DD:EE:05\n");
	put_str("/sys/devices/pci0000:00/0000:00:19.0/net/eth5/speed", "-1\n");
	put_str("/sys/devices/pci0000:00/0000:00:19.0/net/eth5/mtu", "banana\n");
	put_str("/sys/devices/pci0000:00/0000:00:19.0/net/eth5/operstate", "down\n");
	/* A chain longer than the kernel's 40 links. */
	for (i = 0; i < 50; i++) {
		snprintf(link, sizeof link, "/sys/block/l%d", i);
		snprintf(target, sizeof target, "l%d", i + 1);
		put_link(link, target);
	}
	put_link("/sys/block/sda", "../block/sda");
	put_link("/sys/class/infiniband/mlx5_0", "../infiniband/mlx5_0");
	put_link("/sys/class/infiniband/mlx5_1/ports/1", ".");
	put_link("/sys/bus/pci/devices/0000:00:01.0", ".");
	put_str("/sys/bus/pci/devices/0000:00:02.0/class", "zz\n");
	put_str("/sys/bus/pci/devices/0000:00:02.0/numa_node", "-1\n");
	put_link("/sys/class/dmi/id", "id");
	put_file("/proc/sys/kernel/hostname", "gpu\0node\n", 9);
	put_str("/proc/sys/kernel/random/boot_id/x", "a directory, not a file\n");
	snprintf(p, sizeof p, "%s/proc/meminfo", tmp);
	assert_int_equal(mkfifo(p, 0644), 0);
	put_str("/proc/cpuinfo", "");

	j = rp_agent_inventory(tmp);
	assert_non_null(j);
	STR(j, "hostname", "gpu node");
	NUL(j, "boot_id");
	SKIPPED(j, "system", "/sys/class/dmi/id", "symlink loop");
	/* The FIFO is refused, not read (which would block); the DIMMs come from elsewhere. */
	STR(j, "memory.source", "/proc/meminfo");
	STR(j, "memory.skipped", "not a regular file");
	assert_null(at(j, "memory.total_bytes"));
	SKIPPED(j, "memory.dimms", "dmidecode -t memory", "not installed");
	NUL(j, "cpu.threads");
	LEN(j, "disks.items", 0);
	LEN(j, "nics.items", 1);
	STR(j, "nics.items.0.name", "eth5");
	STR(j, "nics.items.0.mac", "aa:bb:cc:dd:ee:05");
	STR(j, "nics.items.0.driver", "e1000e"); /* a dangling link still names its driver */
	BOOL(j, "nics.items.0.link", 0);         /* no carrier file */
	NUL(j, "nics.items.0.speed_mbps");
	NUL(j, "nics.items.0.mtu");
	STR(j, "nics.items.0.pci", "0000:00:19.0");
	STR(j, "nics.items.0.operstate", "down");
	LEN(j, "pci.devices", 2);
	NUL(j, "pci.devices.0.class");
	NUL(j, "pci.devices.1.class");
	NUL(j, "pci.devices.1.numa_node");
	INT(j, "pci.gpu_count", 0);
	/* mlx5_0 loops; mlx5_1's port 1 is its own ports directory: a port with nothing known. */
	LEN(j, "infiniband.items", 1);
	STR(j, "infiniband.items.0.device", "mlx5_1");
	NUL(j, "infiniband.items.0.state");
	NUL(j, "infiniband.items.0.rate_gbps");
	NUL(j, "infiniband.items.0.lid");
	NUL(j, "infiniband.items.0.board_id");
	json_decref(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_vm),
	        cmocka_unit_test(test_gpu_h100_8x),
	        cmocka_unit_test(test_gpu_h100_7x_missing),
	        cmocka_unit_test(test_minimal),
	        cmocka_unit_test(test_root_spellings),
	        cmocka_unit_test(test_nic_addresses),
	        cmocka_unit_test_setup_teardown(test_truncated_cpuinfo, setup_tmp, teardown_tmp),
	        cmocka_unit_test_setup_teardown(test_huge_cpuinfo, setup_tmp, teardown_tmp),
	        cmocka_unit_test_setup_teardown(test_garbage_tools, setup_tmp, teardown_tmp),
	        cmocka_unit_test_setup_teardown(test_odd_values, setup_tmp, teardown_tmp),
	        cmocka_unit_test_setup_teardown(test_hostile_tree, setup_tmp, teardown_tmp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
