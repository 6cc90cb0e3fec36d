/* Field-spec validation of request bodies: types, ranges, names, MACs, read-only fields. */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "api.h"

static json_t *
why(const char *prefix, const char *field, const char *reason)
{
	char path[128];

	snprintf(path, sizeof path, "%s%s", prefix, field);
	return json_pack("{s:s, s:s}", "field", path, "reason", reason);
}

static int
tag_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i >= 64 || !(isalnum(c) || strchr("._:/=-", c)))
			return 0;
	}
	return i > 0;
}

/* Map keys: BIOS attribute and firmware component names. */
static int
key_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i >= 128 || !(isalnum(c) || strchr("._:/-[]", c)))
			return 0;
	}
	return i > 0;
}

static enum rp_err validate(json_t *obj, const struct rp_field *spec, int create,
                            const char *prefix, json_t **detail);

/* What each type asks before its own rule: the JSON type it must have ('s'tring, 'i'nteger,
 * 'n'umber, 'b'oolean, '[' array, '{' object; 0: none, its rule judges) and what to say when
 * it has another; for arrays and maps, what f->max counts; for strings, one predicate and
 * what to say when it fails. */
static const struct kind {
	char json;
	const char *type, *noun;
	int (*ok)(const char *);
	const char *rule;
} kinds[] = {
        [RP_F_STR] = {'s', "must be a string", NULL, NULL, NULL},
        [RP_F_NAME] = {'s', "must be a string", NULL, rp_name_valid,
                       "1-63 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit, "
                       "not a UUID"},
        [RP_F_KEY] = {'s', "must be a string", NULL, key_valid,
                      "1-128 characters of A-Z a-z 0-9 . _ : / - [ ]"},
        [RP_F_UUID] = {'s', "must be a string", NULL, rp_uuid_valid,
                       "must be a UUID (8-4-4-4-12 hex digits)"},
        [RP_F_HOST] = {'s', "must be a string", NULL, rp_host_valid,
                       "must be a host name or IP address (no port)"},
        [RP_F_ENUM] = {0, NULL, NULL, NULL, NULL},
        [RP_F_INT] = {'i', "must be an integer", NULL, NULL, NULL},
        [RP_F_NUM] = {'n', "must be a number", NULL, NULL, NULL},
        [RP_F_BOOL] = {'b', "must be true or false", NULL, NULL, NULL},
        [RP_F_TAGS] = {'[', "must be an array of strings", "tags", NULL, NULL},
        [RP_F_MACS] = {'[', "must be an array of strings", "MAC addresses", NULL, NULL},
        [RP_F_ENUM_LIST] = {'[', "must be an array of strings", "entries", NULL, NULL},
        [RP_F_LIST] = {'[', "must be an array of objects", "entries", NULL, NULL},
        [RP_F_ANY_ARRAY] = {'[', "must be an array", "entries", NULL, NULL},
        [RP_F_OBJECT] = {'{', "must be an object", NULL, NULL, NULL},
        [RP_F_ANY_OBJECT] = {'{', "must be an object", NULL, NULL, NULL},
        [RP_F_SCALAR_MAP] = {'{', "must be an object", "entries", NULL, NULL},
        [RP_F_STRING_MAP] = {'{', "must be an object", "entries", NULL, NULL},
        [RP_F_READ_ONLY] = {0, NULL, NULL, NULL, NULL},
        [RP_F_CHECK] = {0, NULL, NULL, NULL, NULL},
};

static int
has_type(const json_t *v, char json)
{
	switch (json) {
	case 's':
		return json_is_string(v);
	case 'i':
		return json_is_integer(v);
	case 'n':
		return json_is_number(v);
	case 'b':
		return json_is_boolean(v);
	case '[':
		return json_is_array(v);
	case '{':
		return json_is_object(v);
	}
	return 1;
}

static enum rp_err
check_value(json_t *v, const struct rp_field *f, int create, const char *prefix, json_t **detail)
{
	const struct kind *kind = &kinds[f->type];
	char reason[160], sub[80];
	const char *k;
	json_t *e;
	size_t i;

	if (!has_type(v, kind->json)) {
		snprintf(reason, sizeof reason, "%s", kind->type);
		goto bad;
	}
	if (kind->noun &&
	    (json_is_array(v) ? json_array_size(v) : json_object_size(v)) > (size_t)f->max) {
		snprintf(reason, sizeof reason, "at most %.0f %s", f->max, kind->noun);
		goto bad;
	}
	if (kind->ok && !kind->ok(json_string_value(v))) {
		snprintf(reason, sizeof reason, "%s", kind->rule);
		goto bad;
	}
	switch (f->type) {
	case RP_F_STR:
		if (json_string_length(v) > (size_t)f->max) {
			snprintf(reason, sizeof reason, "at most %.0f characters", f->max);
			goto bad;
		}
		if (strlen(json_string_value(v)) != json_string_length(v)) {
			snprintf(reason, sizeof reason, "must not contain NUL characters");
			goto bad;
		}
		return RP_ERR_OK;
	case RP_F_INT:
		if ((double)json_integer_value(v) < f->min ||
		    (double)json_integer_value(v) > f->max) {
			snprintf(reason, sizeof reason, "must be an integer from %.0f to %.0f",
			         f->min, f->max);
			goto bad;
		}
		return RP_ERR_OK;
	case RP_F_NUM:
		if (!isfinite(json_number_value(v)) || json_number_value(v) < f->min ||
		    json_number_value(v) > f->max) {
			snprintf(reason, sizeof reason, "must be a number from %g to %g", f->min,
			         f->max);
			goto bad;
		}
		return RP_ERR_OK;
	case RP_F_ENUM:
		if (rp_str_index(f->enums, json_string_value(v)) >= 0)
			return RP_ERR_OK;
		rp_str_one_of(reason, sizeof reason, "must be ", f->enums);
		goto bad;
	case RP_F_ENUM_LIST:
		json_array_foreach(v, i, e)
		{
			for (size_t y = 0; y < i && json_is_string(e); y++) {
				if (json_equal(json_array_get(v, y), e)) {
					snprintf(reason, sizeof reason, "%s listed twice",
					         json_string_value(e));
					goto bad;
				}
			}
			if (rp_str_index(f->enums, json_string_value(e)) < 0) {
				snprintf(sub, sizeof sub, "entry %zu: must be ", i);
				rp_str_one_of(reason, sizeof reason, sub, f->enums);
				goto bad;
			}
		}
		return RP_ERR_OK;
	case RP_F_TAGS:
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e) || !tag_valid(json_string_value(e))) {
				snprintf(reason, sizeof reason,
				         "tag %zu: 1-64 characters of A-Z a-z 0-9 . _ : / = -", i);
				goto bad;
			}
		}
		return RP_ERR_OK;
	case RP_F_MACS:
		json_array_foreach(v, i, e)
		{
			char mac[RP_MAC_BUF];
			size_t j;

			if (!json_is_string(e) || rp_mac_normalize(json_string_value(e), mac) < 0) {
				snprintf(reason, sizeof reason, "entry %zu is not a MAC address",
				         i);
				goto bad;
			}
			for (j = 0; j < i; j++) {
				if (strcmp(json_string_value(json_array_get(v, j)), mac) == 0) {
					snprintf(reason, sizeof reason, "MAC %s listed twice", mac);
					goto bad;
				}
			}
			json_array_set_new(v, i, json_string(mac));
		}
		return RP_ERR_OK;
	case RP_F_OBJECT:
		snprintf(sub, sizeof sub, "%s%s.", prefix, f->name);
		return validate(v, f->sub, create, sub, detail);
	case RP_F_SCALAR_MAP:
	case RP_F_STRING_MAP:
		json_object_foreach(v, k, e)
		{
			int ok = f->type == RP_F_STRING_MAP
			                 ? json_is_string(e) && json_string_length(e) <= 128
			                 : json_is_string(e) || json_is_number(e) ||
			                           json_is_boolean(e);

			/* In a patch, null removes the entry (RFC 7396). */
			if (!create && json_is_null(e))
				ok = 1;
			if (!key_valid(k)) {
				snprintf(reason, sizeof reason,
				         "key '%.40s': 1-128 characters of A-Z a-z 0-9 . _ : / - [ "
				         "]",
				         k);
				goto bad;
			}
			if (!ok) {
				snprintf(reason, sizeof reason, "value of '%.60s' must be %s", k,
				         f->type == RP_F_STRING_MAP
				                 ? "a string of at most 128 characters"
				                 : "a string, number or boolean");
				goto bad;
			}
		}
		return RP_ERR_OK;
	case RP_F_LIST:
		json_array_foreach(v, i, e)
		{
			enum rp_err r;

			snprintf(sub, sizeof sub, "%s%s[%zu].", prefix, f->name, i);
			if (!json_is_object(e)) {
				*detail = why(sub, "", "must be an object");
				return RP_ERR_INVALID_FIELD;
			}
			if ((r = validate(e, f->sub, 1, sub, detail)) != RP_ERR_OK)
				return r;
		}
		return RP_ERR_OK;
	case RP_F_READ_ONLY:
		*detail = why(prefix, f->name, "read-only field");
		return RP_ERR_READ_ONLY_FIELD;
	case RP_F_CHECK:
		snprintf(sub, sizeof sub, "%s%s", prefix, f->name);
		return f->check(v, sub, detail);
	default:
		/* The kinds table (bool, any object, name, key, UUID, host) said all there is. */
		return RP_ERR_OK;
	}
bad:
	*detail = why(prefix, f->name, reason);
	return RP_ERR_INVALID_FIELD;
}

static enum rp_err
validate(json_t *obj, const struct rp_field *spec, int create, const char *prefix, json_t **detail)
{
	const struct rp_field *f;
	const char *k;
	json_t *v;
	enum rp_err e;

	if (!json_is_object(obj)) {
		*detail = json_pack("{s:s}", "reason", "body must be a JSON object");
		return RP_ERR_BAD_REQUEST;
	}
	json_object_foreach(obj, k, v)
	{
		for (f = spec; f->name; f++)
			if (strcmp(f->name, k) == 0)
				break;
		if (f->name == NULL) {
			*detail = why(prefix, k, "unknown field");
			return RP_ERR_UNKNOWN_FIELD;
		}
		if (json_is_null(v) && f->type != RP_F_READ_ONLY) {
			if (f->flags & RP_F_NULLABLE)
				continue;
			/* A patch may null an optional field to restore its default. */
			if (!create && !(f->flags & RP_F_REQUIRED))
				continue;
			*detail = why(prefix, k, "must not be null");
			return RP_ERR_INVALID_FIELD;
		}
		if ((e = check_value(v, f, create, prefix, detail)) != RP_ERR_OK)
			return e;
	}
	if (!create)
		return RP_ERR_OK;
	for (f = spec; f->name; f++) {
		if ((f->flags & RP_F_REQUIRED) && json_object_get(obj, f->name) == NULL) {
			*detail = why(prefix, f->name, "required");
			return RP_ERR_MISSING_FIELD;
		}
	}
	return RP_ERR_OK;
}

enum rp_err
rp_api_validate(json_t *obj, const struct rp_field *spec, int create, json_t **detail)
{
	return validate(obj, spec, create, "", detail);
}

int
rp_api_field_known(const struct rp_field *spec, const char *name)
{
	for (; spec->name; spec++)
		if (strcmp(spec->name, name) == 0)
			return 1;
	return 0;
}
