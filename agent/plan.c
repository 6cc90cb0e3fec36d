/* Plans: parse and check everything before the first step runs, and the resume rules. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* clang-format off */
static const char *type_names[] = {
#define RP_STEP_TYPE_NAME(name, wire) wire,
	RP_STEP_TYPES(RP_STEP_TYPE_NAME)
#undef RP_STEP_TYPE_NAME
};

static const char *state_names[] = {
#define RP_STEP_STATE_NAME(name, wire) wire,
	RP_STEP_STATES(RP_STEP_STATE_NAME)
#undef RP_STEP_STATE_NAME
};
/* clang-format on */

const char *
rp_step_type_name(enum rp_step_type t)
{
	return (unsigned)t < RP_STEP__COUNT ? type_names[t] : "?";
}

const char *
rp_step_state_name(enum rp_step_state s)
{
	return (unsigned)s < RP_STATE__COUNT ? state_names[s] : "?";
}

int
rp_step_state_parse(const char *name, enum rp_step_state *s)
{
	int i;

	for (i = 0; name && i < RP_STATE__COUNT; i++) {
		if (!strcmp(name, state_names[i])) {
			*s = (enum rp_step_state)i;
			return 0;
		}
	}
	return -1;
}

static int
type_parse(const char *name, enum rp_step_type *t)
{
	int i;

	for (i = 0; i < RP_STEP__COUNT; i++) {
		if (!strcmp(name, type_names[i])) {
			*t = (enum rp_step_type)i;
			return 0;
		}
	}
	return -1;
}

enum {
	M_COMMAND = 1 << 0,
	M_ENV = 1 << 1,
	M_CWD = 1 << 2,
	M_PATH = 1 << 3,
	M_CONTENT = 1 << 4,
	M_URL = 1 << 5,
	M_SHA256 = 1 << 6,
	M_MODE = 1 << 7,
	M_OWNER = 1 << 8,
	M_IMAGE_URL = 1 << 9,
	M_DEVICE = 1 << 10,
	M_REPORT = 1 << 11,
	M_FORMAT = 1 << 12,
	M_GROW = 1 << 13,
	M_SEED = 1 << 14,
	M_UEFI = 1 << 15,
	M_READY_PORT = 1 << 16,
};

static const struct {
	const char *name;
	unsigned bit;
} members[] = {
        {"command", M_COMMAND},
        {"env", M_ENV},
        {"cwd", M_CWD},
        {"path", M_PATH},
        {"content", M_CONTENT},
        {"url", M_URL},
        {"sha256", M_SHA256},
        {"mode", M_MODE},
        {"owner", M_OWNER},
        {"image_url", M_IMAGE_URL},
        {"device", M_DEVICE},
        {"report", M_REPORT},
        {"format", M_FORMAT},
        {"grow", M_GROW},
        {"seed", M_SEED},
        {"uefi", M_UEFI},
        {"ready_port", M_READY_PORT},
};

/* The members each type may carry beyond the common ones. */
static const unsigned allowed[RP_STEP__COUNT] = {
        [RP_STEP_SHELL] = M_COMMAND | M_ENV | M_CWD | M_READY_PORT,
        [RP_STEP_FILE] = M_PATH | M_CONTENT | M_URL | M_SHA256 | M_MODE | M_OWNER,
        [RP_STEP_REBOOT] = 0,
        [RP_STEP_INVENTORY] = 0,
        [RP_STEP_FIRMWARE] = M_COMMAND | M_IMAGE_URL | M_SHA256,
        [RP_STEP_BIOS] = M_COMMAND | M_IMAGE_URL | M_SHA256 | M_REPORT,
        [RP_STEP_IMAGE] = M_URL | M_SHA256 | M_DEVICE | M_FORMAT | M_GROW | M_SEED | M_UEFI,
};

/* clang-format off */
static const char *const image_formats[] = {
#define RP_IMAGE_FORMAT_NAME(name, wire) wire,
	RP_AGENT_IMAGE_FORMATS(RP_IMAGE_FORMAT_NAME)
#undef RP_IMAGE_FORMAT_NAME
	NULL
};
/* clang-format on */

/* A member of an image step's seed or uefi object: the longest it may be, what it must look
 * like. The plan is refused here, before an image overwrites the disk, for what would make
 * rp_agent_disk_finish() refuse it afterwards. */
enum str_kind {
	S_TEXT,      /* anything (a seed file) */
	S_FS_LABEL,  /* 1-11 of A-Z a-z 0-9 _ - (a FAT label) */
	S_PRINTABLE, /* printable ASCII */
	S_LOADER,    /* printable ASCII, an ESP path: \EFI\... */
};

struct str_member {
	const char *name;
	size_t max;
	enum str_kind kind;
	int required;
};

static const struct str_member seed_members[] = {
        {"meta-data", RP_AGENT_SEED_MAX, S_TEXT, 1},
        {"user-data", RP_AGENT_SEED_MAX, S_TEXT, 1},
        {"network-config", RP_AGENT_SEED_MAX, S_TEXT, 0},
        {"vendor-data", RP_AGENT_SEED_MAX, S_TEXT, 0},
        {"label", 11, S_FS_LABEL, 0},
};

static const struct str_member uefi_members[] = {
        {"loader", 255, S_LOADER, 0},
        {"label", 64, S_PRINTABLE, 0},
};

static int
id_valid(const char *s)
{
	size_t n = strlen(s), i;

	if (n < 1 || n > RP_STEP_ID_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static int
env_name_valid(const char *s)
{
	size_t i;

	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
		return 0;
	for (i = 1; s[i]; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

static int
url_valid(const char *s)
{
	/* A path ("/boot/images/x") is on the server the agent reports to. */
	return (!strncmp(s, "http://", 7) && s[7]) || (!strncmp(s, "https://", 8) && s[8]) ||
	       (s[0] == '/' && s[1] != '/' && s[1] != '\0');
}

static int
mode_valid(const char *s)
{
	size_t n = strlen(s), i;

	if (n < 1 || n > 4)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '7')
			return 0;
	return 1;
}

static int
owner_valid(const char *s)
{
	const char *colon = strchr(s, ':');

	if (s[0] == '\0' || s[0] == ':' || strchr(s, ' ') || strlen(s) > 256)
		return 0;
	return colon == NULL || (colon[1] != '\0' && strchr(colon + 1, ':') == NULL);
}

static void fail(char *err, size_t errlen, size_t i, const char *id, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

static int
str_kind_ok(const char *v, size_t n, enum str_kind kind)
{
	size_t i;

	if (kind == S_TEXT)
		return 1;
	if (n == 0)
		return 0;
	if (kind == S_FS_LABEL)
		return strspn(v,
		              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") ==
		       n;
	for (i = 0; i < n; i++)
		if (v[i] < 0x20 || v[i] > 0x7e)
			return 0;
	return kind != S_LOADER || (v[0] == '\\' && strstr(v, "\\\\") == NULL);
}

/* An object of string members from the table (n rows). 0, or -1 with why. */
static int
check_strings(json_t *o, const char *what, const struct str_member *t, size_t n, char *why,
              size_t whylen)
{
	static const char *const looks[] = {
	        [S_TEXT] = "a string",
	        [S_FS_LABEL] = "1-11 of A-Z a-z 0-9 _ -",
	        [S_PRINTABLE] = "a non-empty string of printable ASCII",
	        [S_LOADER] = "an ESP path of printable ASCII such as \\EFI\\debian\\shimx64.efi",
	};
	const char *key;
	json_t *v;
	size_t k;

	if (!json_is_object(o)) {
		snprintf(why, whylen, "%s must be an object", what);
		return -1;
	}
	json_object_foreach(o, key, v)
	{
		for (k = 0; k < n && strcmp(key, t[k].name); k++)
			;
		if (k == n) {
			snprintf(why, whylen, "unknown member '%.64s' in %s", key, what);
			return -1;
		}
		/* No NUL inside: the plan's parser refuses \u0000. */
		if (!json_is_string(v) || json_string_length(v) > t[k].max ||
		    !str_kind_ok(json_string_value(v), json_string_length(v), t[k].kind)) {
			if (t[k].kind == S_FS_LABEL)
				snprintf(why, whylen, "%s.%s must be %s", what, key,
				         looks[t[k].kind]);
			else
				snprintf(why, whylen, "%s.%s must be %s of at most %zu bytes", what,
				         key, looks[t[k].kind], t[k].max);
			return -1;
		}
	}
	for (k = 0; k < n; k++) {
		if (t[k].required && json_object_get(o, t[k].name) == NULL) {
			snprintf(why, whylen, "%s needs %s", what, t[k].name);
			return -1;
		}
	}
	return 0;
}

static void
fail(char *err, size_t errlen, size_t i, const char *id, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (id)
		snprintf(err, errlen, "step %zu (%s): %s", i + 1, id, msg);
	else
		snprintf(err, errlen, "step %zu: %s", i + 1, msg);
}

/* The value of a non-empty string member, else NULL. */
static const char *
get_string(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);

	return json_is_string(v) && json_string_length(v) > 0 ? json_string_value(v) : NULL;
}

static int
check_step(json_t *o, size_t i, struct rp_agent_step *st, char *err, size_t errlen)
{
	const char *key, *type, *s;
	json_t *v;
	unsigned have = 0;
	size_t k;

	if (!json_is_object(o)) {
		fail(err, errlen, i, NULL, "not an object");
		return -1;
	}
	st->id = json_string_value(json_object_get(o, "id"));
	if (st->id == NULL || !id_valid(st->id)) {
		fail(err, errlen, i, NULL, "id must be 1-%d of A-Z a-z 0-9 . _ -", RP_STEP_ID_MAX);
		return -1;
	}
	type = json_string_value(json_object_get(o, "type"));
	if (type == NULL || type_parse(type, &st->type) < 0) {
		fail(err, errlen, i, st->id, "unknown type '%s'", type ? type : "(none)");
		return -1;
	}
	st->timeout_s = st->type == RP_STEP_REBOOT ? 900 : 3600;
	st->continue_on_error = 0;
	st->rerun_interrupted = !(st->type == RP_STEP_FIRMWARE || st->type == RP_STEP_BIOS ||
	                          st->type == RP_STEP_IMAGE);
	st->obj = o;

	json_object_foreach(o, key, v)
	{
		if (!strcmp(key, "id") || !strcmp(key, "type"))
			continue;
		if (!strcmp(key, "timeout_s")) {
			if (!json_is_integer(v) || json_integer_value(v) < 1 ||
			    json_integer_value(v) > 86400) {
				fail(err, errlen, i, st->id, "timeout_s must be 1-86400");
				return -1;
			}
			st->timeout_s = (unsigned)json_integer_value(v);
			continue;
		}
		if (!strcmp(key, "continue_on_error") || !strcmp(key, "rerun_interrupted")) {
			if (!json_is_boolean(v)) {
				fail(err, errlen, i, st->id, "%s must be true or false", key);
				return -1;
			}
			*(key[0] == 'c' ? &st->continue_on_error : &st->rerun_interrupted) =
			        json_is_true(v);
			continue;
		}
		for (k = 0; k < sizeof members / sizeof members[0]; k++)
			if (!strcmp(key, members[k].name))
				break;
		if (k == sizeof members / sizeof members[0] ||
		    !(allowed[st->type] & members[k].bit)) {
			fail(err, errlen, i, st->id, "unknown member '%s' for a %s step", key,
			     type);
			return -1;
		}
		if ((members[k].bit == M_REPORT || members[k].bit == M_GROW) &&
		    !json_is_boolean(v)) {
			fail(err, errlen, i, st->id, "%s must be true or false", key);
			return -1;
		}
		if (members[k].bit == M_READY_PORT &&
		    (!json_is_integer(v) || json_integer_value(v) < 1 ||
		     json_integer_value(v) > 65535)) {
			fail(err, errlen, i, st->id, "ready_port must be a port number, 1-65535");
			return -1;
		}
		/* Every other type-specific member but env, seed, uefi and ready_port is a
		 * non-empty string. */
		if (!(members[k].bit &
		      (M_ENV | M_CONTENT | M_REPORT | M_GROW | M_SEED | M_UEFI | M_READY_PORT)) &&
		    get_string(o, key) == NULL) {
			fail(err, errlen, i, st->id, "%s must be a non-empty string", key);
			return -1;
		}
		have |= members[k].bit;
	}

	switch (st->type) {
	case RP_STEP_SHELL:
		if (!(have & M_COMMAND)) {
			fail(err, errlen, i, st->id, "shell needs command");
			return -1;
		}
		if (have & M_ENV) {
			json_t *env = json_object_get(o, "env");

			if (!json_is_object(env)) {
				fail(err, errlen, i, st->id, "env must be an object of strings");
				return -1;
			}
			json_object_foreach(env, key, v)
			{
				if (!env_name_valid(key) || !json_is_string(v)) {
					fail(err, errlen, i, st->id,
					     "env '%s' must be NAME: \"string\"", key);
					return -1;
				}
			}
		}
		break;
	case RP_STEP_FILE:
		s = get_string(o, "path");
		if (s == NULL || s[0] != '/' || s[strlen(s) - 1] == '/') {
			fail(err, errlen, i, st->id, "file needs an absolute path to a file");
			return -1;
		}
		if (!!(have & M_CONTENT) == !!(have & M_URL)) {
			fail(err, errlen, i, st->id, "file needs content or url, not both");
			return -1;
		}
		if (have & M_CONTENT) {
			v = json_object_get(o, "content");
			if (!json_is_string(v) || json_string_length(v) > RP_FILE_CONTENT_MAX) {
				fail(err, errlen, i, st->id,
				     "content must be a string of at most %d bytes",
				     RP_FILE_CONTENT_MAX);
				return -1;
			}
			if (have & M_SHA256) {
				fail(err, errlen, i, st->id, "sha256 goes with url, not content");
				return -1;
			}
		} else if (!url_valid(get_string(o, "url")) || !(have & M_SHA256)) {
			fail(err, errlen, i, st->id, "url must be http(s) and come with sha256");
			return -1;
		}
		if ((have & M_MODE) && !mode_valid(get_string(o, "mode"))) {
			fail(err, errlen, i, st->id,
			     "mode must be an octal string such as \"0644\"");
			return -1;
		}
		if ((have & M_OWNER) && !owner_valid(get_string(o, "owner"))) {
			fail(err, errlen, i, st->id, "owner must be user or user:group");
			return -1;
		}
		break;
	case RP_STEP_FIRMWARE:
	case RP_STEP_BIOS:
		if (!(have & M_COMMAND)) {
			fail(err, errlen, i, st->id, "%s needs command", type);
			return -1;
		}
		if (!!(have & M_IMAGE_URL) != !!(have & M_SHA256)) {
			fail(err, errlen, i, st->id, "image_url and sha256 go together");
			return -1;
		}
		if ((have & M_IMAGE_URL) && !url_valid(get_string(o, "image_url"))) {
			fail(err, errlen, i, st->id, "image_url must be http(s)");
			return -1;
		}
		if (!(have & M_IMAGE_URL) && strstr(get_string(o, "command"), "${image}")) {
			fail(err, errlen, i, st->id,
			     "command uses ${image} but there is no image_url");
			return -1;
		}
		break;
	case RP_STEP_IMAGE:
		if (!(have & M_URL) || !url_valid(get_string(o, "url")) || !(have & M_SHA256)) {
			fail(err, errlen, i, st->id, "image needs an http(s) url and sha256");
			return -1;
		}
		s = get_string(o, "device");
		if (s == NULL || s[0] != '/') {
			fail(err, errlen, i, st->id, "image needs an absolute device path");
			return -1;
		}
		if ((have & M_FORMAT) && rp_str_index(image_formats, get_string(o, "format")) < 0) {
			char one[128];

			rp_str_one_of(one, sizeof one, "format must be ", image_formats);
			fail(err, errlen, i, st->id, "%s", one);
			return -1;
		}
		{
			char why[256];

			if (((have & M_SEED) &&
			     check_strings(json_object_get(o, "seed"), "seed", seed_members,
			                   sizeof seed_members / sizeof seed_members[0], why,
			                   sizeof why) < 0) ||
			    ((have & M_UEFI) &&
			     check_strings(json_object_get(o, "uefi"), "uefi", uefi_members,
			                   sizeof uefi_members / sizeof uefi_members[0], why,
			                   sizeof why) < 0)) {
				fail(err, errlen, i, st->id, "%s", why);
				return -1;
			}
		}
		break;
	case RP_STEP_REBOOT:
	case RP_STEP_INVENTORY:
	case RP_STEP__COUNT:
		break;
	}
	if ((have & M_SHA256) && !rp_agent_sha256_valid(get_string(o, "sha256"))) {
		fail(err, errlen, i, st->id, "sha256 must be 64 hex digits");
		return -1;
	}
	return 0;
}

struct rp_agent_plan *
rp_agent_plan_parse(const char *text, size_t len, const char *job, char *err, size_t errlen)
{
	struct rp_agent_plan *p = NULL, *res = NULL;
	json_error_t je;
	json_t *steps, *v;
	const char *key;
	size_t i, j;

	if (len > RP_PLAN_MAX_BYTES) {
		snprintf(err, errlen, "plan larger than %d bytes", RP_PLAN_MAX_BYTES);
		return NULL;
	}
	p = calloc(1, sizeof *p);
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->json = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (p->json == NULL) {
		snprintf(err, errlen, "plan is not JSON: line %d: %s", je.line, je.text);
		goto out;
	}
	if (!json_is_object(p->json)) {
		snprintf(err, errlen, "plan is not a JSON object");
		goto out;
	}
	json_object_foreach(p->json, key, v)
	{
		if (strcmp(key, "format") && strcmp(key, "job") && strcmp(key, "steps")) {
			snprintf(err, errlen, "unknown plan member '%s'", key);
			goto out;
		}
	}
	v = json_object_get(p->json, "format");
	if (!json_is_integer(v) || json_integer_value(v) != RP_AGENT_FORMAT) {
		snprintf(err, errlen, "plan format must be %d", RP_AGENT_FORMAT);
		goto out;
	}
	p->job = json_string_value(json_object_get(p->json, "job"));
	if (p->job == NULL || strcmp(p->job, job) != 0) {
		snprintf(err, errlen, "plan is for job %s, not %s", p->job ? p->job : "(none)",
		         job);
		goto out;
	}
	steps = json_object_get(p->json, "steps");
	if (!json_is_array(steps) || json_array_size(steps) < 1 ||
	    json_array_size(steps) > RP_PLAN_MAX_STEPS) {
		snprintf(err, errlen, "steps must be an array of 1-%d steps", RP_PLAN_MAX_STEPS);
		goto out;
	}
	for (i = 0; i < json_array_size(steps); i++) {
		if (check_step(json_array_get(steps, i), i, &p->steps[i], err, errlen) < 0)
			goto out;
		for (j = 0; j < i; j++) {
			if (!strcmp(p->steps[j].id, p->steps[i].id)) {
				fail(err, errlen, i, p->steps[i].id, "id already used by step %zu",
				     j + 1);
				goto out;
			}
		}
	}
	p->nsteps = i;
	res = p;
	p = NULL;
out:
	rp_agent_plan_free(p);
	return res;
}

void
rp_agent_plan_free(struct rp_agent_plan *p)
{
	if (p == NULL)
		return;
	json_decref(p->json);
	free(p);
}

enum rp_agent_decision
rp_agent_decide(enum rp_step_state s, const struct rp_agent_step *st)
{
	switch (s) {
	case RP_STATE_SUCCEEDED:
		return RP_DECIDE_SKIP;
	case RP_STATE_FAILED:
	case RP_STATE_SKIPPED:
		return st->continue_on_error ? RP_DECIDE_SKIP : RP_DECIDE_RUN;
	case RP_STATE_RUNNING:
		return st->rerun_interrupted ? RP_DECIDE_RUN : RP_DECIDE_INTERRUPTED;
	case RP_STATE_PENDING:
	case RP_STATE__COUNT:
		break;
	}
	return RP_DECIDE_RUN;
}
