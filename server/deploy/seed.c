/*
 * The cloud-init NoCloud seed of a deploy (deploy.h): config checks, the merge of a class's
 * defaults with a request, network-config v2 from the inventory, and the seed's three files.
 * YAML is written by a small block-style emitter (every string double-quoted, which YAML
 * reads as JSON reads it) and operator YAML is only parsed, by libyaml, to refuse what
 * cloud-init would refuse to load.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "deploy.h"
#include "util/util.h"

#define KEYS_MAX   100
#define KEY_MAX    8192
#define META_MAX   32
#define NICS_MAX   64
#define YAML_DEPTH 32

/* ---- Errors ------------------------------------------------------------------------------ */

static enum rp_err bad(json_t **detail, enum rp_err e, const char *field, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static enum rp_err
bad(json_t **detail, enum rp_err e, const char *field, const char *fmt, ...)
{
	char reason[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof reason, fmt, ap);
	va_end(ap);
	*detail = json_pack("{s:s, s:s}", "field", field, "reason", reason);
	return e;
}

/* A field's path into buf (cut short if it must: it only names the field in an error). */
static void fld(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
fld(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, n, fmt, ap);
	va_end(ap);
}

static int
puts_(struct rp_buf *b, const char *s)
{
	return rp_buf_append(b, s, strlen(s));
}

/* ---- Small checks ------------------------------------------------------------------------ */

static int
hostname_valid(const char *s)
{
	size_t n = strlen(s), label = 0, i;

	if (n < 1 || n > 253 || s[0] == '.' || s[n - 1] == '.')
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return 0;
		if (c == '-' && label == 0)
			return 0;
		if (++label > 63)
			return 0;
	}
	return s[n - 1] != '-';
}

/* One OpenSSH public key line: TYPE BASE64 [comment], printable ASCII. */
static int
pubkey_valid(const char *s)
{
	static const char *const types[] = {"ssh-ed25519 ",
	                                    "ssh-rsa ",
	                                    "ecdsa-sha2-nistp256 ",
	                                    "ecdsa-sha2-nistp384 ",
	                                    "ecdsa-sha2-nistp521 ",
	                                    "sk-ssh-ed25519@openssh.com ",
	                                    "sk-ecdsa-sha2-nistp256@openssh.com ",
	                                    NULL};
	const char *p = NULL;
	size_t i, b64;

	for (i = 0; s[i]; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return 0;
	if (i > KEY_MAX)
		return 0;
	for (i = 0; types[i]; i++)
		if (!strncmp(s, types[i], strlen(types[i]))) {
			p = s + strlen(types[i]);
			break;
		}
	if (p == NULL)
		return 0;
	b64 = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=");
	return b64 >= 16 && (p[b64] == '\0' || p[b64] == ' ');
}

/* An IP address (v4 or v6) with, when cidr, a /prefix. The address alone (canonical) goes
 * to out (INET6_ADDRSTRLEN) when not NULL. */
static int
ip_valid(const char *s, int cidr, char *out)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	unsigned char bin[16];
	int fam;
	long pfx = -1;

	if (strlen(s) >= sizeof buf)
		return 0;
	snprintf(buf, sizeof buf, "%s", s);
	slash = strchr(buf, '/');
	if (slash) {
		*slash++ = '\0';
		pfx = strtol(slash, &end, 10);
		if (*slash == '\0' || *end != '\0')
			return 0;
	}
	if ((cidr && slash == NULL) || (!cidr && slash))
		return 0;
	fam = strchr(buf, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(fam, buf, bin) != 1)
		return 0;
	if (slash && (pfx < 1 || pfx > (fam == AF_INET ? 32 : 128)))
		return 0;
	if (out && inet_ntop(fam, bin, out, INET6_ADDRSTRLEN) == NULL)
		return 0;
	return 1;
}

static int
only_members(json_t *o, const char *const *names, const char **unknown)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(o, k, v)
	{
		for (i = 0; names[i]; i++)
			if (!strcmp(k, names[i]))
				break;
		if (names[i] == NULL) {
			*unknown = k;
			return 0;
		}
	}
	return 1;
}

/* user_data: "#cloud-config" then YAML whose root is a mapping (or nothing), "#!" a script,
 * "## template: jinja" a template cloud-init renders first (not parsed here). */
static enum rp_err
user_data_check(const char *ud, size_t len, const char *field, json_t **detail)
{
	yaml_parser_t p;
	yaml_event_t ev;
	enum rp_err e = RP_ERR_OK;
	int done = 0, depth = 0, docs = 0, root_seen = 0;

	if (len > RP_DEPLOY_USER_DATA_MAX)
		return bad(detail, RP_ERR_INVALID_FIELD, field, "at most %d bytes",
		           RP_DEPLOY_USER_DATA_MAX);
	if (strlen(ud) != len)
		return bad(detail, RP_ERR_INVALID_FIELD, field, "holds a NUL byte");
	if (!strncmp(ud, "#!", 2) || !strncmp(ud, "## template: jinja", 18))
		return RP_ERR_OK;
	if (strncmp(ud, "#cloud-config", 13) != 0 ||
	    (ud[13] != '\n' && ud[13] != '\r' && ud[13] != '\0' && ud[13] != ' '))
		return bad(detail, RP_ERR_INVALID_FIELD, field,
		           "user data must start with \"#cloud-config\" (YAML), \"#!\" (a script) "
		           "or \"## template: jinja\"");
	if (!yaml_parser_initialize(&p))
		return RP_ERR_INTERNAL;
	yaml_parser_set_input_string(&p, (const unsigned char *)ud, len);
	while (!done) {
		if (!yaml_parser_parse(&p, &ev)) {
			e = bad(detail, RP_ERR_INVALID_FIELD, field,
			        "not valid YAML: %s at line %zu, column %zu",
			        p.problem ? p.problem : "error", p.problem_mark.line + 1,
			        p.problem_mark.column + 1);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				e = bad(detail, RP_ERR_INVALID_FIELD, field,
				        "cloud-config is one YAML document; this has several");
			break;
		case YAML_MAPPING_START_EVENT:
		case YAML_SEQUENCE_START_EVENT:
		case YAML_SCALAR_EVENT:
		case YAML_ALIAS_EVENT:
			if (depth == 0 && !root_seen) {
				root_seen = 1;
				/* An empty document reads as a null scalar: nothing to merge. */
				if (ev.type != YAML_MAPPING_START_EVENT &&
				    !(ev.type == YAML_SCALAR_EVENT && ev.data.scalar.length == 0))
					e = bad(detail, RP_ERR_INVALID_FIELD, field,
					        "cloud-config must be a YAML mapping (key: value "
					        "at "
					        "the top), line %zu",
					        ev.start_mark.line + 1);
			}
			if (ev.type == YAML_MAPPING_START_EVENT ||
			    ev.type == YAML_SEQUENCE_START_EVENT)
				depth++;
			if (depth > 64)
				e = bad(detail, RP_ERR_INVALID_FIELD, field,
				        "nested deeper than 64 levels");
			break;
		case YAML_MAPPING_END_EVENT:
		case YAML_SEQUENCE_END_EVENT:
			depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
		if (e != RP_ERR_OK)
			break;
	}
	yaml_parser_delete(&p);
	return e;
}

/* ---- Config check ------------------------------------------------------------------------ */

static const char *const bond_modes[] = {"balance-rr", "active-backup", "balance-xor", "broadcast",
                                         "802.3ad",    "balance-tlb",   "balance-alb", NULL};

/* A set of strings seen so far (addresses, NIC names), for duplicates. */
static int
seen_add(json_t *set, const char *s)
{
	if (json_object_get(set, s))
		return 0;
	json_object_set_new(set, s, json_true());
	return 1;
}

static enum rp_err
mtu_check(json_t *v, const char *field, json_t **detail)
{
	if (v &&
	    (!json_is_integer(v) || json_integer_value(v) < 576 || json_integer_value(v) > 65520))
		return bad(detail, RP_ERR_INVALID_FIELD, field, "an integer from 576 to 65520");
	return RP_ERR_OK;
}

/* address (CIDR) and gateway of an interface or bond at path; addresses into seen. */
static enum rp_err
addr_check(json_t *o, const char *path, json_t *seen, json_t **detail)
{
	const char *a = json_string_value(json_object_get(o, "address"));
	const char *g = json_string_value(json_object_get(o, "gateway"));
	char field[160], canon[INET6_ADDRSTRLEN];

	fld(field, sizeof field, "%s.address", path);
	if (json_object_get(o, "address") && (a == NULL || !ip_valid(a, 1, canon)))
		return bad(detail, RP_ERR_INVALID_FIELD, field,
		           "an IP address with its prefix length, e.g. 10.0.0.5/24");
	if (a && !seen_add(seen, canon))
		return bad(detail, RP_ERR_INVALID_FIELD, field, "address %s is given twice", canon);
	fld(field, sizeof field, "%s.gateway", path);
	if (json_object_get(o, "gateway") && (g == NULL || !ip_valid(g, 0, NULL)))
		return bad(detail, RP_ERR_INVALID_FIELD, field, "an IP address");
	if (g && a == NULL)
		return bad(detail, RP_ERR_INVALID_FIELD, field, "a gateway needs an address");
	fld(field, sizeof field, "%s.dhcp", path);
	if (json_object_get(o, "dhcp") && !json_is_boolean(json_object_get(o, "dhcp")))
		return bad(detail, RP_ERR_INVALID_FIELD, field, "true or false");
	if (a && json_is_true(json_object_get(o, "dhcp")))
		return bad(detail, RP_ERR_INVALID_FIELD, field, "either dhcp or an address");
	fld(field, sizeof field, "%s.mtu", path);
	return mtu_check(json_object_get(o, "mtu"), field, detail);
}

static enum rp_err
nic_name_check(json_t *v, const char *field, json_t *names, json_t **detail)
{
	const char *s = json_string_value(v);

	if (s == NULL || s[0] == '\0' || strlen(s) > 32 ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:_-") !=
	            strlen(s))
		return bad(detail, RP_ERR_INVALID_FIELD, field,
		           "a NIC name (eno1) or MAC address as the inventory shows it");
	if (!seen_add(names, s))
		return bad(detail, RP_ERR_INVALID_FIELD, field, "NIC %s is named twice", s);
	return RP_ERR_OK;
}

/* Characters a YAML reader refuses or changes (DEL, C1 controls with NEL, the line and
 * paragraph separators, U+FFFE/U+FFFF), and other controls but tab and newline. */
static int
yaml_text_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	for (; *p; p++) {
		if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7f)
			return 0;
		if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return 0;
		if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
			return 0;
		if (p[0] == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf))
			return 0;
	}
	return 1;
}

/* cloud-init's own network form goes out as YAML as given: what YAML reads back the same
 * (no odd characters, keys up to 256 bytes, no reals, at most 16 levels). */
static enum rp_err
v2_safe(json_t *v, const char *path, int depth, json_t **detail)
{
	const char *k;
	json_t *x;
	size_t i;
	enum rp_err e;

	if (depth > 16)
		return bad(detail, RP_ERR_INVALID_FIELD, path, "nested deeper than 16 levels");
	if (json_is_real(v))
		return bad(detail, RP_ERR_INVALID_FIELD, path,
		           "no fractional numbers in a network config");
	if (json_is_string(v) &&
	    (strlen(json_string_value(v)) != json_string_length(v) ||
	     !yaml_text_ok(json_string_value(v)) || json_string_length(v) > 4096))
		return bad(detail, RP_ERR_INVALID_FIELD, path,
		           "a string of at most 4096 bytes without control characters");
	json_object_foreach(v, k, x)
	{
		if (strlen(k) < 1 || strlen(k) > 256 || !yaml_text_ok(k) || strchr(k, '\n'))
			return bad(detail, RP_ERR_INVALID_FIELD, path,
			           "keys of 1 to 256 bytes without control characters");
		if ((e = v2_safe(x, path, depth + 1, detail)) != RP_ERR_OK)
			return e;
	}
	json_array_foreach(v, i,
	                   x) if ((e = v2_safe(x, path, depth + 1, detail)) != RP_ERR_OK) return e;
	return RP_ERR_OK;
}

static enum rp_err
network_check(json_t *n, const char *path, json_t **detail)
{
	static const char *const members[] = {"address",    "gateway", "nameservers",
	                                      "search",     "mtu",     "bonds",
	                                      "interfaces", "dhcp",    NULL};
	static const char *const bond_members[] = {"name",    "interfaces", "mode", "mtu",
	                                           "address", "gateway",    "dhcp", NULL};
	static const char *const if_members[] = {"name", "address", "gateway", "dhcp", "mtu", NULL};
	static const char *const v2_members[] = {"version", "ethernets", "bonds", "vlans",
	                                         "bridges", "renderer",  NULL};
	json_t *seen = json_object(), *names = json_object(), *v, *item, *m;
	char field[200];
	const char *unk = NULL;
	enum rp_err e = RP_ERR_OK;
	size_t i, j;

	if (!json_is_object(n)) {
		e = bad(detail, RP_ERR_INVALID_FIELD, path, "an object");
		goto out;
	}
	if (json_object_get(n, "version")) {
		/* cloud-init's own form, taken as it is: the shape only. */
		if (json_integer_value(json_object_get(n, "version")) != 2 ||
		    !json_is_integer(json_object_get(n, "version"))) {
			fld(field, sizeof field, "%s.version", path);
			e = bad(detail, RP_ERR_INVALID_FIELD, field,
			        "2 (cloud-init network-config version 2)");
			goto out;
		}
		if (!only_members(n, v2_members, &unk)) {
			fld(field, sizeof field, "%s.%s", path, unk);
			e = bad(detail, RP_ERR_UNKNOWN_FIELD, field,
			        "network-config version 2 has ethernets, bonds, vlans, bridges "
			        "and renderer");
			goto out;
		}
		if ((e = v2_safe(n, path, 0, detail)) != RP_ERR_OK)
			goto out;
		for (i = 1; v2_members[i]; i++) {
			v = json_object_get(n, v2_members[i]);
			if (v && !json_is_object(v) && strcmp(v2_members[i], "renderer") != 0) {
				fld(field, sizeof field, "%s.%s", path, v2_members[i]);
				e = bad(detail, RP_ERR_INVALID_FIELD, field, "an object");
				goto out;
			}
		}
		goto out;
	}
	if (!only_members(n, members, &unk)) {
		fld(field, sizeof field, "%s.%s", path, unk);
		e = bad(detail, RP_ERR_UNKNOWN_FIELD, field, "not a network member");
		goto out;
	}
	if ((e = addr_check(n, path, seen, detail)) != RP_ERR_OK)
		goto out;
	fld(field, sizeof field, "%s.nameservers", path);
	v = json_object_get(n, "nameservers");
	if (v && (!json_is_array(v) || json_array_size(v) > 8)) {
		e = bad(detail, RP_ERR_INVALID_FIELD, field, "an array of at most 8 IP addresses");
		goto out;
	}
	json_array_foreach(v, i, item) if (!json_is_string(item) ||
	                                   !ip_valid(json_string_value(item), 0, NULL))
	{
		fld(field, sizeof field, "%s.nameservers[%zu]", path, i);
		e = bad(detail, RP_ERR_INVALID_FIELD, field, "an IP address");
		goto out;
	}
	v = json_object_get(n, "search");
	if (v && (!json_is_array(v) || json_array_size(v) > 8)) {
		fld(field, sizeof field, "%s.search", path);
		e = bad(detail, RP_ERR_INVALID_FIELD, field, "an array of at most 8 domains");
		goto out;
	}
	json_array_foreach(v, i, item) if (!json_is_string(item) ||
	                                   !hostname_valid(json_string_value(item)))
	{
		fld(field, sizeof field, "%s.search[%zu]", path, i);
		e = bad(detail, RP_ERR_INVALID_FIELD, field, "a domain name");
		goto out;
	}
	v = json_object_get(n, "bonds");
	if (v && (!json_is_array(v) || json_array_size(v) > 16)) {
		fld(field, sizeof field, "%s.bonds", path);
		e = bad(detail, RP_ERR_INVALID_FIELD, field, "an array of at most 16 bonds");
		goto out;
	}
	json_array_foreach(v, i, item)
	{
		const char *name = json_string_value(json_object_get(item, "name"));
		char bp[160];

		fld(bp, sizeof bp, "%s.bonds[%zu]", path, i);
		if (!json_is_object(item)) {
			e = bad(detail, RP_ERR_INVALID_FIELD, bp, "an object");
			goto out;
		}
		if (!only_members(item, bond_members, &unk)) {
			fld(field, sizeof field, "%s.%s", bp, unk);
			e = bad(detail, RP_ERR_UNKNOWN_FIELD, field, "not a bond member");
			goto out;
		}
		fld(field, sizeof field, "%s.name", bp);
		if (name == NULL || strlen(name) < 1 || strlen(name) > 15 ||
		    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(name)) {
			e = bad(detail, RP_ERR_INVALID_FIELD, field,
			        "1 to 15 lowercase letters and digits (bond0)");
			goto out;
		}
		if (!seen_add(names, name)) {
			e = bad(detail, RP_ERR_INVALID_FIELD, field, "%s is named twice", name);
			goto out;
		}
		fld(field, sizeof field, "%s.mode", bp);
		if ((m = json_object_get(item, "mode")) != NULL) {
			for (j = 0; bond_modes[j]; j++)
				if (!strcmp(json_string_value(m) ?: "", bond_modes[j]))
					break;
			if (bond_modes[j] == NULL) {
				e = bad(detail, RP_ERR_INVALID_FIELD, field,
				        "balance-rr, active-backup, balance-xor, broadcast, "
				        "802.3ad, "
				        "balance-tlb or balance-alb");
				goto out;
			}
		}
		m = json_object_get(item, "interfaces");
		fld(field, sizeof field, "%s.interfaces", bp);
		if (!json_is_array(m) || json_array_size(m) < 1 || json_array_size(m) > 16) {
			e = bad(detail, RP_ERR_INVALID_FIELD, field, "an array of 1 to 16 NICs");
			goto out;
		}
		json_array_foreach(m, j, item)
		{
			fld(field, sizeof field, "%s.interfaces[%zu]", bp, j);
			if ((e = nic_name_check(item, field, names, detail)) != RP_ERR_OK)
				goto out;
		}
		if ((e = addr_check(json_array_get(v, i), bp, seen, detail)) != RP_ERR_OK)
			goto out;
	}
	v = json_object_get(n, "interfaces");
	if (v && (!json_is_array(v) || json_array_size(v) > NICS_MAX)) {
		fld(field, sizeof field, "%s.interfaces", path);
		e = bad(detail, RP_ERR_INVALID_FIELD, field, "an array of at most %d NICs",
		        NICS_MAX);
		goto out;
	}
	json_array_foreach(v, i, item)
	{
		char ip[160];

		fld(ip, sizeof ip, "%s.interfaces[%zu]", path, i);
		if (!json_is_object(item)) {
			e = bad(detail, RP_ERR_INVALID_FIELD, ip, "an object");
			goto out;
		}
		if (!only_members(item, if_members, &unk)) {
			fld(field, sizeof field, "%s.%s", ip, unk);
			e = bad(detail, RP_ERR_UNKNOWN_FIELD, field, "not an interface member");
			goto out;
		}
		fld(field, sizeof field, "%s.name", ip);
		if ((e = nic_name_check(json_object_get(item, "name"), field, names, detail)) !=
		            RP_ERR_OK ||
		    (e = addr_check(item, ip, seen, detail)) != RP_ERR_OK)
			goto out;
	}
out:
	json_decref(seen);
	json_decref(names);
	return e;
}

enum rp_err
rp_deploy_config_check(json_t *cfg, const char *path, json_t **detail)
{
	static const char *const members[] = {
	        "hostname", "ssh_authorized_keys", "user_data", "network", "meta", NULL};
	const char *unk = NULL, *k;
	char field[200];
	json_t *v, *item;
	size_t i;
	enum rp_err e;

	if (!json_is_object(cfg))
		return bad(detail, RP_ERR_INVALID_FIELD, path, "an object");
	if (!only_members(cfg, members, &unk)) {
		fld(field, sizeof field, "%s.%s", path, unk);
		return bad(detail, RP_ERR_UNKNOWN_FIELD, field,
		           "a deploy config has hostname, ssh_authorized_keys, user_data, network "
		           "and meta");
	}
	fld(field, sizeof field, "%s.hostname", path);
	v = json_object_get(cfg, "hostname");
	if (v && (!json_is_string(v) || !hostname_valid(json_string_value(v))))
		return bad(detail, RP_ERR_INVALID_FIELD, field,
		           "a host name: labels of letters, digits and '-', at most 253 bytes");
	v = json_object_get(cfg, "ssh_authorized_keys");
	fld(field, sizeof field, "%s.ssh_authorized_keys", path);
	if (v && (!json_is_array(v) || json_array_size(v) > KEYS_MAX))
		return bad(detail, RP_ERR_INVALID_FIELD, field, "an array of at most %d keys",
		           KEYS_MAX);
	json_array_foreach(v, i, item)
	{
		if (!json_is_string(item) || !pubkey_valid(json_string_value(item))) {
			fld(field, sizeof field, "%s.ssh_authorized_keys[%zu]", path, i);
			return bad(detail, RP_ERR_INVALID_FIELD, field,
			           "an OpenSSH public key on one line: TYPE BASE64 [comment]");
		}
	}
	v = json_object_get(cfg, "user_data");
	fld(field, sizeof field, "%s.user_data", path);
	if (v && !json_is_string(v))
		return bad(detail, RP_ERR_INVALID_FIELD, field, "a string");
	if (v && (e = user_data_check(json_string_value(v), json_string_length(v), field,
	                              detail)) != RP_ERR_OK)
		return e;
	v = json_object_get(cfg, "meta");
	fld(field, sizeof field, "%s.meta", path);
	if (v && (!json_is_object(v) || json_object_size(v) > META_MAX))
		return bad(detail, RP_ERR_INVALID_FIELD, field,
		           "an object of at most %d names and strings", META_MAX);
	json_object_foreach(v, k, item)
	{
		fld(field, sizeof field, "%s.meta.%.64s", path, k);
		if (strlen(k) < 1 || strlen(k) > 63 ||
		    strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(k) ||
		    !strcmp(k, "instance-id") || !strcmp(k, "local-hostname") ||
		    !strncmp(k, "rackpilot", 9) || !strcmp(k, "public-keys"))
			return bad(detail, RP_ERR_INVALID_FIELD, field,
			           "names are 1 to 63 of a-z 0-9 _ -, and not instance-id, "
			           "local-hostname, public-keys or rackpilot*");
		if (!json_is_string(item) || json_string_length(item) > 1024 ||
		    strlen(json_string_value(item)) != json_string_length(item) ||
		    !yaml_text_ok(json_string_value(item)))
			return bad(detail, RP_ERR_INVALID_FIELD, field,
			           "a string of at most 1024 bytes without control characters");
	}
	v = json_object_get(cfg, "network");
	fld(field, sizeof field, "%s.network", path);
	if (v && (e = network_check(v, field, detail)) != RP_ERR_OK)
		return e;
	return RP_ERR_OK;
}

/* ---- Resolve ----------------------------------------------------------------------------- */

static int
nic_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 32 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:_-") == n;
}

/* The inventory's NIC (name or MAC, case-insensitive), or NULL. */
static json_t *
nic_find(json_t *inv, const char *key)
{
	json_t *items = json_object_get(json_object_get(inv, "nics"), "items"), *it;
	size_t i;

	json_array_foreach(items, i, it)
	{
		const char *n = json_string_value(json_object_get(it, "name"));
		const char *m = json_string_value(json_object_get(it, "mac"));

		/* The agent's word: a NIC without both, or with a name no OS has, is none. */
		if (n == NULL || m == NULL || !nic_name_ok(n) || strlen(m) > 64)
			continue;
		if (!strcmp(n, key) || !strcasecmp(m, key))
			return it;
	}
	return NULL;
}

/* A v2 ethernet for nic: matched by MAC (the OS may name it otherwise than the ramdisk). */
static json_t *
ethernet(const char *mac)
{
	return json_pack("{s:{s:s}}", "match", "macaddress", mac);
}

/* Addressing of o (the spec's top, a bond or an interface) into v2 object dst. */
static void
addressing(json_t *o, json_t *dst, int dhcp_default, json_t *addresses)
{
	const char *a = json_string_value(json_object_get(o, "address"));
	const char *g = json_string_value(json_object_get(o, "gateway"));
	char canon[INET6_ADDRSTRLEN];

	if (a) {
		json_object_set_new(dst, "addresses", json_pack("[s]", a));
		if (ip_valid(a, 1, canon))
			json_array_append_new(addresses, json_string(canon));
		if (g)
			/* "0.0.0.0/0" rather than "default": cloud-init's v2 reader (22.4,
			 * Debian 12) takes only addresses. */
			json_object_set_new(dst, "routes",
			                    json_pack("[{s:s, s:s}]", "to",
			                              strchr(g, ':') ? "::/0" : "0.0.0.0/0", "via",
			                              g));
	} else if (json_is_true(json_object_get(o, "dhcp")) ||
	           (dhcp_default && !json_is_false(json_object_get(o, "dhcp")))) {
		json_object_set_new(dst, "dhcp4", json_true());
	}
	if (json_object_get(o, "mtu"))
		json_object_set(dst, "mtu", json_object_get(o, "mtu"));
}

/* The static addresses of a network-config v2 object (every "addresses" list of its
 * ethernets, bonds, vlans and bridges), canonical, into addresses. */
static void
v2_addresses(json_t *v2, json_t *addresses)
{
	static const char *const kinds[] = {"ethernets", "bonds", "vlans", "bridges", NULL};
	char canon[INET6_ADDRSTRLEN];
	const char *k;
	json_t *dev, *a;
	size_t i, j;

	for (i = 0; kinds[i]; i++)
		json_object_foreach(json_object_get(v2, kinds[i]), k, dev) json_array_foreach(
		        json_object_get(dev, "addresses"), j,
		        a) if (json_is_string(a) && ip_valid(json_string_value(a), 1, canon))
		        json_array_append_new(addresses, json_string(canon));
}

static int
has_addressing(json_t *o)
{
	return json_object_get(o, "address") || json_object_get(o, "gateway") ||
	       json_object_get(o, "dhcp") || json_object_get(o, "mtu");
}

/* spec (from origin, "config" or "deploy_defaults", for the fields of errors) against the
 * node. */
static enum rp_err
network_resolve(json_t *spec, const char *origin, const struct rp_deploy_node *node, json_t **net,
                json_t *addresses, json_t **detail)
{
	json_t *eth = json_object(), *bonds = json_object(), *v2 = NULL, *boot = NULL, *item, *m;
	const char *boot_id = NULL;
	char field[200], *boot_bond = NULL;
	enum rp_err e = RP_ERR_OK;
	size_t i, j;

	if (spec && json_object_get(spec, "version")) {
		*net = json_deep_copy(spec);
		v2_addresses(*net, addresses);
		goto out;
	}
	/* The boot NIC: the first enrolled MAC the inventory shows, else the first MAC. */
	json_array_foreach(node->macs, i, item)
	{
		if ((boot = nic_find(node->inventory, json_string_value(item) ?: "")) != NULL)
			break;
	}
	if (boot) {
		boot_id = json_string_value(json_object_get(boot, "name"));
		json_object_set_new(eth, boot_id,
		                    ethernet(json_string_value(json_object_get(boot, "mac"))));
	} else if (json_string_value(json_array_get(node->macs, 0))) {
		boot_id = "boot0";
		json_object_set_new(eth, boot_id,
		                    ethernet(json_string_value(json_array_get(node->macs, 0))));
	} else {
		fld(field, sizeof field, "%s.network", origin);
		e = bad(detail, RP_ERR_CONFLICT, field,
		        "nothing is known of the node's NICs (no MAC, no inventory): commission "
		        "it, or give network as network-config version 2");
		goto out;
	}
	json_array_foreach(json_object_get(spec, "bonds"), i, item)
	{
		json_t *b = json_object(), *members = json_array();
		const char *bname = json_string_value(json_object_get(item, "name"));

		json_array_foreach(json_object_get(item, "interfaces"), j, m)
		{
			json_t *nic = nic_find(node->inventory, json_string_value(m));
			const char *id;

			fld(field, sizeof field, "%s.network.bonds[%zu].interfaces[%zu]", origin, i,
			    j);
			if (nic == NULL) {
				e = bad(detail, RP_ERR_INVALID_FIELD, field,
				        "the node's inventory shows no NIC %s",
				        json_string_value(m));
				json_decref(b);
				json_decref(members);
				goto out;
			}
			id = json_string_value(json_object_get(nic, "name"));
			if (boot_id && !strcmp(id, boot_id) && boot_bond == NULL) {
				boot_bond = strdup(bname);
			} else if (json_object_get(eth, id)) {
				e = bad(detail, RP_ERR_INVALID_FIELD, field,
				        "NIC %s already has another role", id);
				json_decref(b);
				json_decref(members);
				goto out;
			}
			json_object_set_new(
			        eth, id, ethernet(json_string_value(json_object_get(nic, "mac"))));
			json_array_append_new(members, json_string(id));
		}
		json_object_set_new(b, "interfaces", members);
		json_object_set_new(b, "parameters",
		                    json_pack("{s:s}", "mode",
		                              json_string_value(json_object_get(item, "mode"))
		                                      ?: "active-backup"));
		addressing(item, b, 0, addresses);
		json_object_set_new(bonds, bname, b);
	}
	/* The boot NIC, or the bond it is in, takes the top's address or DHCP. */
	if (boot_bond) {
		json_t *b = json_object_get(bonds, boot_bond), *top, *given = NULL;

		json_array_foreach(
		        json_object_get(spec, "bonds"), i,
		        item) if (!strcmp(json_string_value(json_object_get(item, "name")) ?: "",
		                          boot_bond)) given = item;
		if (has_addressing(given) && has_addressing(spec)) {
			fld(field, sizeof field, "%s.network.address", origin);
			e = bad(detail, RP_ERR_INVALID_FIELD, field,
			        "the boot NIC is in bond %s, which has its own addressing: give it "
			        "once, at the top or in the bond",
			        boot_bond);
			goto out;
		}
		top = spec ? json_incref(spec) : json_object();
		if (!has_addressing(given))
			addressing(top, b, 1, addresses);
		json_decref(top);
	} else {
		json_t *top = spec ? json_incref(spec) : json_object();

		addressing(top, json_object_get(eth, boot_id), 1, addresses);
		json_decref(top);
	}
	json_array_foreach(json_object_get(spec, "interfaces"), i, item)
	{
		const char *key = json_string_value(json_object_get(item, "name"));
		json_t *nic = nic_find(node->inventory, key), *en;
		const char *id;

		fld(field, sizeof field, "%s.network.interfaces[%zu].name", origin, i);
		if (nic == NULL) {
			e = bad(detail, RP_ERR_INVALID_FIELD, field,
			        "the node's inventory shows no NIC %s", key);
			goto out;
		}
		id = json_string_value(json_object_get(nic, "name"));
		if ((boot_id && !strcmp(id, boot_id)) || json_object_get(eth, id)) {
			e = bad(detail, RP_ERR_INVALID_FIELD, field,
			        "NIC %s is the boot NIC or in a bond: configure it there", id);
			goto out;
		}
		en = ethernet(json_string_value(json_object_get(nic, "mac")));
		addressing(item, en, 0, addresses);
		json_object_set_new(eth, id, en);
	}
	if (spec && (json_object_get(spec, "nameservers") || json_object_get(spec, "search"))) {
		json_t *ns = json_object();
		json_t *target = boot_bond ? json_object_get(bonds, boot_bond)
		                           : json_object_get(eth, boot_id);

		if (json_object_get(spec, "nameservers"))
			json_object_set(ns, "addresses", json_object_get(spec, "nameservers"));
		if (json_object_get(spec, "search"))
			json_object_set(ns, "search", json_object_get(spec, "search"));
		json_object_set_new(target, "nameservers", ns);
	}
	v2 = json_pack("{s:i, s:O}", "version", 2, "ethernets", eth);
	if (json_object_size(bonds) > 0)
		json_object_set(v2, "bonds", bonds);
	*net = v2;
out:
	free(boot_bond);
	json_decref(eth);
	json_decref(bonds);
	return e;
}

enum rp_err
rp_deploy_resolve(json_t *defaults, json_t *cfg, const struct rp_deploy_node *node, json_t **out,
                  json_t **detail)
{
	json_t *r = json_object(), *keys = json_array(), *ud = json_array(), *meta = json_object();
	json_t *addresses = json_array(), *net = NULL, *spec, *v, *item;
	json_t *srcs[2] = {defaults, cfg};
	const char *host, *k;
	enum rp_err e = RP_ERR_INTERNAL;
	size_t i, s;

	if (r == NULL || keys == NULL || ud == NULL || meta == NULL || addresses == NULL)
		goto out;
	host = json_string_value(json_object_get(cfg, "hostname"))
	               ?: json_string_value(json_object_get(defaults, "hostname"));
	if (host == NULL) {
		host = node->name;
		if (!hostname_valid(host)) {
			e = bad(detail, RP_ERR_INVALID_FIELD, "config.hostname",
			        "the node's name %s is not a host name: give one", host);
			goto out;
		}
	}
	for (s = 0; s < 2; s++) {
		json_array_foreach(json_object_get(srcs[s], "ssh_authorized_keys"), i, item)
		{
			size_t j;
			json_t *have;
			int dup = 0;

			json_array_foreach(keys, j, have) dup |= json_equal(have, item);
			if (!dup)
				json_array_append(keys, item);
		}
		/* A copy: the callers wipe their own strings when they are done. */
		if ((v = json_object_get(srcs[s], "user_data")) != NULL)
			json_array_append_new(
			        ud, json_stringn(json_string_value(v), json_string_length(v)));
		json_object_foreach(json_object_get(srcs[s], "meta"), k, item)
		        json_object_set(meta, k, item);
	}
	spec = json_object_get(cfg, "network");
	if ((e = network_resolve(spec ?: json_object_get(defaults, "network"),
	                         spec ? "config" : "deploy_defaults", node, &net, addresses,
	                         detail)) != RP_ERR_OK)
		goto out;
	json_object_set_new(r, "hostname", json_string(host));
	json_object_set_new(r, "ssh_authorized_keys", keys);
	json_object_set_new(r, "user_data", ud);
	json_object_set_new(r, "meta", meta);
	json_object_set_new(r, "network", net);
	json_object_set_new(r, "addresses", addresses);
	json_object_set_new(r, "node",
	                    json_pack("{s:s, s:s?, s:s?}", "name", node->name, "rack", node->rack,
	                              "class", node->cls));
	keys = ud = meta = net = addresses = NULL;
	*out = r;
	r = NULL;
	e = RP_ERR_OK;
out:
	json_decref(r);
	json_decref(keys);
	json_decref(ud);
	json_decref(meta);
	json_decref(net);
	json_decref(addresses);
	return e;
}

/* ---- YAML -------------------------------------------------------------------------------- */

static int
plain_key(const char *k)
{
	static const char *const words[] = {"y",    "n",     "yes",  "no", "on", "off",
	                                    "true", "false", "null", "~",  NULL};
	size_t i;

	if (k[0] == '\0' || !((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= 'A' && k[0] <= 'Z')))
		return 0;
	if (strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
	    strlen(k))
		return 0;
	for (i = 0; words[i]; i++)
		if (!strcasecmp(k, words[i]))
			return 0;
	return 1;
}

static int
scalar(struct rp_buf *b, json_t *v)
{
	char *s = json_dumps(v, JSON_ENCODE_ANY);
	int rc = s ? puts_(b, s) : -1;

	free(s);
	return rc;
}

static int
indent(struct rp_buf *b, int n)
{
	while (n-- > 0)
		if (puts_(b, " ") < 0)
			return -1;
	return 0;
}

static int
leaf(json_t *v)
{
	return !(json_is_object(v) && json_object_size(v) > 0) &&
	       !(json_is_array(v) && json_array_size(v) > 0);
}

static int emit(struct rp_buf *b, json_t *v, int ind, int depth, int inline_first);

/* A mapping or sequence value after "key:" or "-": on the next lines, deeper. */
static int
child(struct rp_buf *b, json_t *v, int ind, int depth)
{
	if (leaf(v)) {
		if (puts_(b, " ") < 0)
			return -1;
		if (json_is_object(v))
			return puts_(b, "{}\n");
		if (json_is_array(v))
			return puts_(b, "[]\n");
		return scalar(b, v) < 0 || puts_(b, "\n") < 0 ? -1 : 0;
	}
	return puts_(b, "\n") < 0 ? -1 : emit(b, v, ind, depth + 1, 0);
}

/* inline_first: the first line goes on the current one (after "- "), unindented. */
static int
emit(struct rp_buf *b, json_t *v, int ind, int depth, int inline_first)
{
	const char *k;
	json_t *item;
	size_t i;

	if (depth > YAML_DEPTH)
		return -1;
	if (json_is_object(v)) {
		json_object_foreach(v, k, item)
		{
			json_t *key = json_string(k);
			int rc =
			        indent(b, inline_first ? 0 : ind) < 0 ||
			                        (plain_key(k) ? puts_(b, k) : scalar(b, key)) < 0 ||
			                        puts_(b, ":") < 0 ||
			                        child(b, item, ind + 2, depth) < 0
			                ? -1
			                : 0;

			json_decref(key);
			if (rc < 0)
				return -1;
			inline_first = 0;
		}
		return 0;
	}
	json_array_foreach(v, i, item)
	{
		if (indent(b, inline_first ? 0 : ind) < 0 || puts_(b, "-") < 0)
			return -1;
		inline_first = 0;
		/* A mapping in a list starts on the dash's line: "- to: ...". */
		if (json_is_object(item) && !leaf(item)) {
			if (puts_(b, " ") < 0 || emit(b, item, ind + 2, depth + 1, 1) < 0)
				return -1;
		} else if (child(b, item, ind + 2, depth) < 0) {
			return -1;
		}
	}
	return 0;
}

char *
rp_deploy_yaml(json_t *v)
{
	struct rp_buf b;
	char *out = NULL;

	rp_buf_init(&b, 1 << 20);
	if ((leaf(v) ? (scalar(&b, v) < 0 || puts_(&b, "\n") < 0) : emit(&b, v, 0, 0, 0) < 0))
		goto out;
	out = b.data;
	b.data = NULL;
out:
	rp_buf_free(&b);
	return out;
}

/* ---- The seed ---------------------------------------------------------------------------- */

/* The first-boot script: POSIX sh, curl or wget, values it sends reduced to safe bytes. The
 * token is single-use and bound to this deploy; with https and a pin, curl checks the
 * server's public key. */
static int
report_script(struct rp_buf *b, const struct rp_deploy_report *rep, const char *instance_id)
{
	char pin64[64] = "";

	if (rep->pin && strlen(rep->pin) == 64) {
		unsigned char raw[32];
		size_t i, n;

		for (i = 0; i < 32; i++) {
			unsigned x;

			if (sscanf(rep->pin + 2 * i, "%2x", &x) != 1)
				return -1;
			raw[i] = (unsigned char)x;
		}
		/* curl's pin is standard, padded base64: base64url with the two letters swapped. */
		n = rp_b64url_encode(raw, sizeof raw, pin64);
		for (i = 0; i < n; i++)
			pin64[i] = pin64[i] == '-' ? '+' : pin64[i] == '_' ? '/' : pin64[i];
		while (n % 4)
			pin64[n++] = '=';
		pin64[n] = '\0';
	}
	return rp_buf_printf(
	        b,
	        "#!/bin/sh\n"
	        "# Rackpilot: report this deploy's first boot to rackpilotd, once. The token\n"
	        "# works for this deploy only, and only once.\n"
	        "url='%s'\n"
	        "token='%s'\n"
	        "pin='%s%s'\n"
	        "instance='%s'\n"
	        "clean() { tr -cd 'A-Za-z0-9._:/%%\\n-' | cut -c1-250; }\n"
	        "host=$( (hostname 2>/dev/null || cat /proc/sys/kernel/hostname) | clean)\n"
	        "kernel=$(uname -r | clean)\n"
	        "addrs=\n"
	        "for a in $(ip -o addr show scope global 2>/dev/null | awk '{print $4}' | clean); "
	        "do\n"
	        "\taddrs=\"$addrs${addrs:+,}\\\"$a\\\"\"\n"
	        "done\n"
	        "body=\"{\\\"instance_id\\\":\\\"$instance\\\",\\\"hostname\\\":\\\"$host\\\","
	        "\\\"kernel\\\":\\\"$kernel\\\",\\\"addresses\\\":[$addrs]}\"\n"
	        "post() {\n"
	        "\tif command -v curl >/dev/null 2>&1; then\n"
	        "\t\tif [ -n \"${pin#sha256//}\" ]; then set -- -k --pinnedpubkey \"$pin\"; else "
	        "set "
	        "--; fi\n"
	        "\t\tcurl -sS -m 20 -o /dev/null -w '%%{http_code}' \"$@\" -H \"Authorization: "
	        "Bearer $token\" \\\n"
	        "\t\t\t-H 'Content-Type: application/json' --data-binary \"$body\" \"$url\"\n"
	        "\telse\n"
	        "\t\t# Plain http only, in practice: busybox wget checks no certificate (and\n"
	        "\t\t# some builds cannot talk TLS to rackpilotd), GNU wget refuses a self-signed\n"
	        "\t\t# one. Install curl for a pinned https report. No -T: busybox 1.35 crashes\n"
	        "\t\t# on it; timeout(1) bounds the try instead.\n"
	        "\t\tif out=$(timeout 20 wget -q -O /dev/null --header \"Authorization: Bearer "
	        "$token\" "
	        "\\\n"
	        "\t\t\t--header 'Content-Type: application/json' --post-data \"$body\" \"$url\" "
	        "2>&1); then\n"
	        "\t\t\techo 200\n"
	        "\t\telse\n"
	        "\t\t\tcase $out in *409*) echo 409 ;; *) echo 0 ;; esac\n"
	        "\t\tfi\n"
	        "\tfi\n"
	        "}\n"
	        "# About 6 minutes at most: cloud-init's last stage waits for this script.\n"
	        "i=0\n"
	        "while [ $i -lt 24 ]; do\n"
	        "\tcode=$(post)\n"
	        "\tcase $code in\n"
	        "\t200) echo \"rackpilot: first boot reported ($host, $kernel)\" >&2; exit 0 ;;\n"
	        "\t# 409: reported already (an answer lost on the way): done all the same.\n"
	        "\t409) echo \"rackpilot: first boot was reported already\" >&2; exit 0 ;;\n"
	        "\t4*) echo \"rackpilot: rackpilotd refused the report (HTTP $code)\" >&2; exit 1 "
	        ";;\n"
	        "\tesac\n"
	        "\ti=$((i + 1))\n"
	        "\tsleep 5\n"
	        "done\n"
	        "echo \"rackpilot: could not report the first boot to $url\" >&2\n"
	        "exit 1\n",
	        rep->url, rep->token, pin64[0] ? "sha256//" : "", pin64, instance_id);
}

static int
part(struct rp_buf *b, const char *boundary, const char *type, const char *name, const char *extra,
     const char *body)
{
	size_t n = strlen(body);

	return rp_buf_printf(b,
	                     "--%s\nContent-Type: %s\nMIME-Version: 1.0\nContent-Disposition: "
	                     "attachment; filename=\"%s\"\n%s\n",
	                     boundary, type, name, extra ? extra : "") < 0 ||
	                       puts_(b, body) < 0 ||
	                       (n > 0 && body[n - 1] != '\n' && puts_(b, "\n") < 0)
	               ? -1
	               : 0;
}

static void
wipe_buf(struct rp_buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	rp_buf_free(b);
}

static char *
user_data(json_t *resolved, const char *instance_id, const struct rp_deploy_report *rep)
{
	struct rp_buf b, cc, sh;
	char boundary[48], name[48], *out = NULL, *keys = NULL;
	unsigned char rnd[8];
	json_t *item, *kv;
	size_t i;

	rp_buf_init(&b, 1 << 20);
	rp_buf_init(&cc, 1 << 20);
	rp_buf_init(&sh, 1 << 16);
	if (rp_random(rnd, sizeof rnd) < 0)
		goto out;
	snprintf(boundary, sizeof boundary, "rackpilot-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
	         rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	if (rp_buf_printf(&b,
	                  "Content-Type: multipart/mixed; boundary=\"%s\"\nMIME-Version: 1.0\n\n",
	                  boundary) < 0)
		goto out;
	json_array_foreach(json_object_get(resolved, "user_data"), i, item)
	{
		const char *ud = json_string_value(item);
		const char *type = !strncmp(ud, "#!", 2) ? "text/x-shellscript; charset=\"utf-8\""
		                   : !strncmp(ud, "## template: jinja", 18)
		                           ? "text/jinja2; charset=\"utf-8\""
		                           : "text/cloud-config; charset=\"utf-8\"";

		snprintf(name, sizeof name, "operator-%zu%s", i + 1,
		         !strncmp(ud, "#!", 2) ? ".sh" : ".cfg");
		if (part(&b, boundary, type, name, NULL, ud) < 0)
			goto out;
	}
	if (json_array_size(json_object_get(resolved, "ssh_authorized_keys")) > 0) {
		kv = json_pack("{s:O}", "ssh_authorized_keys",
		               json_object_get(resolved, "ssh_authorized_keys"));
		keys = rp_deploy_yaml(kv);
		json_decref(kv);
		if (keys == NULL || rp_buf_printf(&cc, "#cloud-config\n%s", keys) < 0)
			goto out;
		/* Appended to the operator's lists (cloud-init's default would replace them). */
		if (part(&b, boundary, "text/cloud-config; charset=\"utf-8\"", "rackpilot.cfg",
		         "Merge-Type: list(append)+dict(no_replace,recurse_list)+str()\n",
		         cc.data) < 0)
			goto out;
	}
	if (rep) {
		if (report_script(&sh, rep, instance_id) < 0 ||
		    /* cloud-init runs scripts in name order: this one after runcmd's. */
		    part(&b, boundary, "text/x-shellscript; charset=\"us-ascii\"",
		         "zz-rackpilot-first-boot.sh", NULL, sh.data) < 0)
			goto out;
	}
	if (rp_buf_printf(&b, "--%s--\n", boundary) < 0)
		goto out;
	out = b.data;
	b.data = NULL;
out:
	free(keys);
	wipe_buf(&b);
	wipe_buf(&cc);
	wipe_buf(&sh);
	return out;
}

json_t *
rp_deploy_seed(json_t *resolved, const char *instance_id, const struct rp_deploy_report *rep)
{
	json_t *meta = json_object(), *node = json_object_get(resolved, "node"), *seed = NULL,
	       *item;
	char *md = NULL, *nc = NULL, *ud = NULL;
	const char *k;

	if (meta == NULL)
		return NULL;
	json_object_set_new(meta, "instance-id", json_string(instance_id));
	json_object_set(meta, "local-hostname", json_object_get(resolved, "hostname"));
	/* For user-data templates ({{ ds.meta_data.rackpilot_node }}). */
	json_object_set(meta, "rackpilot_node", json_object_get(node, "name"));
	if (json_object_get(node, "rack"))
		json_object_set(meta, "rackpilot_rack", json_object_get(node, "rack"));
	if (json_object_get(node, "class"))
		json_object_set(meta, "rackpilot_class", json_object_get(node, "class"));
	json_object_foreach(json_object_get(resolved, "meta"), k, item)
	        json_object_set(meta, k, item);
	if ((md = rp_deploy_yaml(meta)) == NULL ||
	    (nc = rp_deploy_yaml(json_object_get(resolved, "network"))) == NULL ||
	    (ud = user_data(resolved, instance_id, rep)) == NULL)
		goto out;
	seed = json_pack("{s:s, s:s, s:s}", "meta-data", md, "user-data", ud, "network-config", nc);
out:
	json_decref(meta);
	free(md);
	free(nc);
	if (ud)
		explicit_bzero(ud, strlen(ud));
	free(ud);
	return seed;
}

void
rp_deploy_seed_free(json_t *seed)
{
	const char *k;
	json_t *v;

	if (seed == NULL)
		return;
	/* jansson keeps its own copy of each string: wipe it in place before the release. */
	json_object_foreach(seed, k, v) if (json_is_string(v) && v->refcount == 1)
	        explicit_bzero((char *)json_string_value(v), json_string_length(v));
	json_decref(seed);
}

/* ---- First-boot report ------------------------------------------------------------------- */

enum rp_err
rp_deploy_report_check(json_t *body, json_t **detail)
{
	static const char *const members[] = {"instance_id", "hostname", "kernel", "addresses",
	                                      NULL};
	const char *unk = NULL, *s;
	json_t *a, *item;
	size_t i, j;

	if (!json_is_object(body))
		return bad(detail, RP_ERR_INVALID_FIELD, "body", "an object");
	if (!only_members(body, members, &unk))
		return bad(detail, RP_ERR_UNKNOWN_FIELD, unk,
		           "a first-boot report has instance_id, hostname, kernel and addresses");
	if (!json_is_string(json_object_get(body, "instance_id")))
		return bad(detail, RP_ERR_MISSING_FIELD, "instance_id", "the seed's instance-id");
	for (i = 0; i < 3; i++) {
		const char *f = members[i];
		size_t max = i == 2 ? 128 : 253;

		if ((s = json_string_value(json_object_get(body, f))) == NULL) {
			if (json_object_get(body, f))
				return bad(detail, RP_ERR_INVALID_FIELD, f, "a string");
			continue;
		}
		if (strlen(s) > max || strlen(s) != json_string_length(json_object_get(body, f)))
			return bad(detail, RP_ERR_INVALID_FIELD, f, "at most %zu bytes", max);
		for (j = 0; s[j]; j++)
			if ((unsigned char)s[j] < 0x21 || (unsigned char)s[j] > 0x7e)
				return bad(detail, RP_ERR_INVALID_FIELD, f,
				           "printable ASCII without spaces");
	}
	a = json_object_get(body, "addresses");
	if (a && (!json_is_array(a) || json_array_size(a) > 64))
		return bad(detail, RP_ERR_INVALID_FIELD, "addresses",
		           "an array of at most 64 addresses");
	json_array_foreach(a, i, item)
	{
		s = json_string_value(item);
		if (s == NULL || !(ip_valid(s, 0, NULL) || ip_valid(s, 1, NULL))) {
			char field[32];

			fld(field, sizeof field, "addresses[%zu]", i);
			return bad(detail, RP_ERR_INVALID_FIELD, field,
			           "an IP address, optionally with /prefix");
		}
	}
	return RP_ERR_OK;
}
