/* Step plans and recipes: what a plan may contain (docs/agent-protocol.md), and how a recipe
 * becomes a plan. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "rackpilot/agent.h"

static const char *const step_types[] = {
#define STEP_NAME(sym, name) name,
        RP_STEP_TYPES(STEP_NAME)
#undef STEP_NAME
                NULL};

#define COMMON                                                                                     \
	{"id", RP_F_STR, 0, 0, RP_STEP_ID_MAX},                                                    \
	        {"type", RP_F_ENUM, RP_F_REQUIRED, 0, 0, step_types},                              \
	        {"timeout_s", RP_F_INT, 0, 1, 86400}, {"continue_on_error", RP_F_BOOL},            \
	{                                                                                          \
		"rerun_interrupted", RP_F_BOOL                                                     \
	}

static const struct rp_field shell_fields[] = {
        COMMON,
        {"command", RP_F_STR, RP_F_REQUIRED, 0, 65536},
        {"env", RP_F_ANY_OBJECT},
        {"cwd", RP_F_STR, 0, 0, 4096},
        /* The agent reports the step ready once something listens on this TCP port. */
        {"ready_port", RP_F_INT, 0, 1, 65535},
        {NULL},
};

static const struct rp_field file_fields[] = {
        COMMON,
        {"path", RP_F_STR, RP_F_REQUIRED, 0, 4096},
        {"content", RP_F_STR, 0, 0, RP_FILE_CONTENT_MAX},
        {"url", RP_F_STR, 0, 0, 2048},
        {"sha256", RP_F_STR, 0, 0, 64},
        {"mode", RP_F_STR, 0, 0, 4},
        {"owner", RP_F_STR, 0, 0, 64},
        {NULL},
};

static const struct rp_field bare_fields[] = {COMMON, {NULL}};

static const struct rp_field tool_fields[] = {
        COMMON,
        {"command", RP_F_STR, RP_F_REQUIRED, 0, 65536},
        {"image_url", RP_F_STR, 0, 0, 2048},
        {"sha256", RP_F_STR, 0, 0, 64},
        {NULL},
};

/* A bios step may also report what the tool printed as the node's BIOS values. */
static const struct rp_field bios_fields[] = {
        COMMON,
        {"command", RP_F_STR, RP_F_REQUIRED, 0, 65536},
        {"image_url", RP_F_STR, 0, 0, 2048},
        {"sha256", RP_F_STR, 0, 0, 64},
        {"report", RP_F_BOOL, 0},
        {NULL},
};

static const char *const image_formats[] = {"raw", "gzip", "zstd", "xz", "qcow2", NULL};

/* format: how the file is encoded (the agent decodes while it writes); grow, seed and uefi
 * finish the disk afterwards (docs/deploy.md; a deploy fills seed in when it sends the
 * plan). */
/* A plan is stored in clear: a seed (secrets) is never part of it, only the empty marker a
 * deploy fills in when it pushes the plan. */
static enum rp_err
seed_marker(json_t *v, const char *path, json_t **detail)
{
	if (json_is_object(v) && json_object_size(v) == 0)
		return RP_ERR_OK;
	*detail = json_pack("{s:s, s:s}", "field", path, "reason",
	                    "{} (a deploy renders the seed when it sends the plan; give the "
	                    "deploy a config instead)");
	return RP_ERR_INVALID_FIELD;
}

static const struct rp_field uefi_fields[] = {
        {"loader", RP_F_STR, 0, 1, 255},
        {"label", RP_F_STR, 0, 1, 64},
        {NULL},
};

static const struct rp_field image_fields[] = {
        COMMON,
        {"url", RP_F_STR, RP_F_REQUIRED, 0, 2048},
        {"sha256", RP_F_STR, RP_F_REQUIRED, 0, 64},
        {"device", RP_F_STR, RP_F_REQUIRED, 0, 4096},
        {"format", RP_F_ENUM, 0, 0, 0, image_formats},
        {"grow", RP_F_BOOL},
        {"seed", RP_F_CHECK, 0, 0, 0, NULL, NULL, seed_marker},
        {"uefi", RP_F_OBJECT, 0, 0, 0, NULL, uefi_fields},
        {NULL},
};

static const struct {
	const char *type;
	const struct rp_field *spec;
} specs[] = {
        {"shell", shell_fields},    {"file", file_fields},     {"reboot", bare_fields},
        {"inventory", bare_fields}, {"firmware", tool_fields}, {"bios", bios_fields},
        {"image", image_fields},
};

static enum rp_err
bad(json_t **detail, enum rp_err e, size_t i, const char *member, const char *reason)
{
	char field[96];

	if (member)
		snprintf(field, sizeof field, "steps[%zu].%s", i, member);
	else
		snprintf(field, sizeof field, "steps[%zu]", i);
	*detail = json_pack("{s:s, s:s}", "field", field, "reason", reason);
	return e;
}

static int
templated_str(json_t *v, int templated)
{
	return templated && json_is_string(v) && strstr(json_string_value(v), "${") != NULL;
}

static int
id_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!(isalnum((unsigned char)s[i]) || strchr("._-", s[i])))
			return 0;
	return i > 0 && i <= RP_STEP_ID_MAX;
}

static int
env_name_valid(const char *s)
{
	size_t i;

	if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (i = 1; s[i]; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return 0;
	return i <= 128;
}

/* Formats that only mean something once placeholders are filled in. */
static enum rp_err
check_formats(json_t *step, size_t i, int templated, json_t **detail)
{
	json_t *v;
	const char *k, *s;

	if ((v = json_object_get(step, "path")) && !templated_str(v, templated) &&
	    json_string_value(v)[0] != '/')
		return bad(detail, RP_ERR_INVALID_FIELD, i, "path", "must be an absolute path");
	if ((v = json_object_get(step, "device")) && !templated_str(v, templated) &&
	    json_string_value(v)[0] != '/')
		return bad(detail, RP_ERR_INVALID_FIELD, i, "device", "must be an absolute path");
	if ((v = json_object_get(step, "sha256")) && !templated_str(v, templated) &&
	    !rp_api_sha256_valid(json_string_value(v)))
		return bad(detail, RP_ERR_INVALID_FIELD, i, "sha256", "64 hexadecimal digits");
	if ((v = json_object_get(step, "mode")) && !templated_str(v, templated)) {
		s = json_string_value(v);
		if (strlen(s) < 3 || strspn(s, "01234567") != strlen(s))
			return bad(detail, RP_ERR_INVALID_FIELD, i, "mode",
			           "an octal mode such as \"0644\"");
	}
	for (k = "url"; k; k = strcmp(k, "url") == 0 ? "image_url" : NULL) {
		if ((v = json_object_get(step, k)) && !templated_str(v, templated)) {
			s = json_string_value(v);
			/* "/boot/images/x" is on rackpilotd itself: the agent knows where that is.
			 */
			if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0 &&
			    !(s[0] == '/' && s[1] != '/'))
				return bad(detail, RP_ERR_INVALID_FIELD, i, k,
				           "an http:// or https:// URL, or a path on rackpilotd "
				           "(/boot/...)");
		}
	}
	return RP_ERR_OK;
}

static enum rp_err
check_step(json_t *step, size_t i, int templated, json_t **detail)
{
	const char *type = json_string_value(json_object_get(step, "type"));
	const struct rp_field *spec = NULL;
	json_t *v, *sub = NULL;
	const char *k;
	size_t n;
	enum rp_err e;

	if (!json_is_object(step))
		return bad(detail, RP_ERR_INVALID_FIELD, i, NULL, "must be an object");
	if (type == NULL)
		return bad(detail,
		           json_object_get(step, "type") ? RP_ERR_INVALID_FIELD
		                                         : RP_ERR_MISSING_FIELD,
		           i, "type",
		           "a step type: shell, file, reboot, inventory, firmware, bios, image");
	for (n = 0; n < sizeof specs / sizeof specs[0]; n++)
		if (!strcmp(specs[n].type, type))
			spec = specs[n].spec;
	if (spec == NULL)
		return bad(detail, RP_ERR_INVALID_FIELD, i, "type",
		           "a step type: shell, file, reboot, inventory, firmware, bios, image");
	/* Said plainly rather than as an unknown member: only a shell step runs a server. */
	if (spec != shell_fields && json_object_get(step, "ready_port"))
		return bad(detail, RP_ERR_INVALID_FIELD, i, "ready_port",
		           "only shell steps have one");
	if ((e = rp_api_validate(step, spec, 1, &sub)) != RP_ERR_OK) {
		/* Say which step: "command" becomes "steps[2].command". */
		char field[128];

		snprintf(field, sizeof field, "steps[%zu].%s", i,
		         json_string_value(json_object_get(sub, "field")) ?: "");
		json_object_set_new(sub, "field", json_string(field));
		*detail = sub;
		return e;
	}
	if ((v = json_object_get(step, "id")) && !id_valid(json_string_value(v)))
		return bad(detail, RP_ERR_INVALID_FIELD, i, "id",
		           "1-64 characters of A-Z a-z 0-9 . _ -");
	if (!strcmp(type, "file")) {
		int content = json_object_get(step, "content") != NULL;
		int url = json_object_get(step, "url") != NULL;

		if (content == url)
			return bad(detail, content ? RP_ERR_INVALID_FIELD : RP_ERR_MISSING_FIELD, i,
			           "content", "give either content or url (with sha256)");
		if (url && json_object_get(step, "sha256") == NULL)
			return bad(detail, RP_ERR_MISSING_FIELD, i, "sha256",
			           "a file from a URL needs its sha256");
	}
	if ((!strcmp(type, "firmware") || !strcmp(type, "bios")) &&
	    (json_object_get(step, "image_url") != NULL) !=
	            (json_object_get(step, "sha256") != NULL))
		return bad(detail, RP_ERR_MISSING_FIELD, i,
		           json_object_get(step, "image_url") ? "sha256" : "image_url",
		           "image_url and sha256 go together");
	if ((v = json_object_get(step, "env"))) {
		if (json_object_size(v) > 64)
			return bad(detail, RP_ERR_INVALID_FIELD, i, "env", "at most 64 variables");
		json_object_foreach(v, k, sub)
		{
			if (!env_name_valid(k))
				return bad(detail, RP_ERR_INVALID_FIELD, i, "env",
				           "variable names are letters, digits and _, not starting "
				           "with a digit");
			if (!json_is_string(sub) || json_string_length(sub) > 4096 ||
			    strlen(json_string_value(sub)) != json_string_length(sub))
				return bad(detail, RP_ERR_INVALID_FIELD, i, "env",
				           "values are strings of at most 4096 bytes");
		}
	}
	return check_formats(step, i, templated, detail);
}

enum rp_err
rp_api_plan_check(json_t *steps, int templated, json_t **detail)
{
	json_t *step, *other;
	size_t i, j;
	enum rp_err e;

	if (!json_is_array(steps) || json_array_size(steps) == 0 ||
	    json_array_size(steps) > RP_PLAN_MAX_STEPS) {
		*detail = json_pack("{s:s, s:s}", "field", "steps", "reason",
		                    "an array of 1 to 100 steps");
		return steps == NULL ? RP_ERR_MISSING_FIELD : RP_ERR_INVALID_FIELD;
	}
	json_array_foreach(steps, i, step)
	{
		if ((e = check_step(step, i, templated, detail)) != RP_ERR_OK)
			return e;
		if (json_object_get(step, "id") == NULL) {
			char id[32];

			snprintf(id, sizeof id, "step-%zu", i + 1);
			json_object_set_new(step, "id", json_string(id));
		}
	}
	json_array_foreach(steps, i, step)
	{
		for (j = 0; j < i; j++) {
			other = json_array_get(steps, j);
			if (json_equal(json_object_get(step, "id"), json_object_get(other, "id")))
				return bad(detail, RP_ERR_INVALID_FIELD, i, "id",
				           "step ids must be unique");
		}
	}
	return RP_ERR_OK;
}

/* ---- Recipes --------------------------------------------------------------------------- */

static const struct rp_field param_fields[] = {
        {"required", RP_F_BOOL},
        {"default", RP_F_STR, RP_F_NULLABLE, 0, 4096},
        {"description", RP_F_STR, RP_F_NULLABLE, 0, 512},
        {NULL},
};

enum rp_err
rp_api_recipe_params_check(json_t *params, json_t **detail)
{
	const char *k;
	json_t *v, *sub = NULL;
	enum rp_err e;

	if (params == NULL)
		return RP_ERR_OK;
	if (!json_is_object(params) || json_object_size(params) > 32) {
		*detail = json_pack("{s:s, s:s}", "field", "params", "reason",
		                    "an object of at most 32 arguments");
		return RP_ERR_INVALID_FIELD;
	}
	json_object_foreach(params, k, v)
	{
		char field[96];

		snprintf(field, sizeof field, "params.%.64s", k);
		if (!env_name_valid(k) || strlen(k) > 64) {
			*detail = json_pack(
			        "{s:s, s:s}", "field", field, "reason",
			        "names are letters, digits and _, not starting with a digit");
			return RP_ERR_INVALID_FIELD;
		}
		if ((e = rp_api_validate(v, param_fields, 1, &sub)) != RP_ERR_OK) {
			char f2[160];

			snprintf(f2, sizeof f2, "%s.%s", field,
			         json_string_value(json_object_get(sub, "field")) ?: "");
			json_object_set_new(sub, "field", json_string(f2));
			*detail = sub;
			return e;
		}
	}
	return RP_ERR_OK;
}

enum rp_err
rp_api_recipe_expand(json_t *recipe, json_t *args, json_t **out, json_t **detail)
{
	json_t *params = json_object_get(recipe, "params"), *values = json_object(), *v, *p;
	const char *k;
	char field[96];
	enum rp_err e = RP_ERR_INVALID_FIELD;

	if (args != NULL && !json_is_object(args)) {
		*detail = json_pack("{s:s, s:s}", "field", "args", "reason", "must be an object");
		goto out;
	}
	json_object_foreach(args, k, v)
	{
		snprintf(field, sizeof field, "args.%.64s", k);
		if (json_object_get(params, k) == NULL) {
			*detail = json_pack("{s:s, s:s}", "field", field, "reason",
			                    "the recipe has no such argument");
			e = RP_ERR_UNKNOWN_FIELD;
			goto out;
		}
		if (json_is_string(v) && json_string_length(v) <= 4096 &&
		    strlen(json_string_value(v)) == json_string_length(v)) {
			json_object_set(values, k, v);
		} else if (json_is_integer(v)) {
			json_object_set_new(
			        values, k,
			        json_sprintf("%" JSON_INTEGER_FORMAT, json_integer_value(v)));
		} else if (json_is_boolean(v)) {
			json_object_set_new(values, k,
			                    json_string(json_is_true(v) ? "true" : "false"));
		} else {
			*detail = json_pack("{s:s, s:s}", "field", field, "reason",
			                    "a string (at most 4096 bytes), integer or boolean");
			goto out;
		}
	}
	json_object_foreach(params, k, p)
	{
		if (json_object_get(values, k))
			continue;
		if (json_is_true(json_object_get(p, "required"))) {
			snprintf(field, sizeof field, "args.%.64s", k);
			*detail = json_pack("{s:s, s:s}", "field", field, "reason",
			                    "required by the recipe");
			e = RP_ERR_MISSING_FIELD;
			goto out;
		}
		v = json_object_get(p, "default");
		json_object_set_new(values, k,
		                    json_string(json_is_string(v) ? json_string_value(v) : ""));
	}
	*out = rp_store_recipe_fill(json_object_get(recipe, "steps"), values);
	e = RP_ERR_OK;
out:
	json_decref(values);
	return e;
}
