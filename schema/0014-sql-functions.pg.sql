-- 0014 on PostgreSQL: stand-ins for the SQLite functions the store's SQL uses, with the
-- same names and, for what the store asks of them, the same answers (compact JSON text,
-- JSON paths of the form '$.a.b', arrays for json_each). store/pg.c names the one
-- function with no stand-in (json_object, renamed to json_build_object).

-- The value at path in doc: strings without quotes, true/false as 1/0, other values as
-- JSON text, NULL when absent or JSON null.
CREATE FUNCTION json_extract(doc text, path text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE jsonb_typeof(v) WHEN 'string' THEN v #>> '{}' WHEN 'null' THEN NULL
         WHEN 'boolean' THEN CASE WHEN v = 'true'::jsonb THEN '1' ELSE '0' END
         ELSE v::text END
  FROM (SELECT (doc::jsonb) #> CASE WHEN path = '$' THEN '{}'::text[]
        ELSE string_to_array(substr(path, 3), '.') END AS v) x
$$;

-- doc as a JSON value (embedded as such by the aggregates below, not as a string).
CREATE FUNCTION json(doc text) RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT doc::json $$;

-- The elements of a JSON array: key (0-based index) and value (strings without quotes,
-- other values as JSON text).
CREATE FUNCTION json_each(doc text) RETURNS TABLE (key bigint, value text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT e.n - 1, CASE jsonb_typeof(e.v) WHEN 'string' THEN e.v #>> '{}' ELSE e.v::text END
  FROM jsonb_array_elements(doc::jsonb) WITH ORDINALITY AS e(v, n)
$$;

-- doc with two members set ('$.a' paths), as SQLite's json_set(doc, p1, v1, p2, v2).
CREATE FUNCTION json_set(doc text, p1 text, v1 bigint, p2 text, v2 bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT jsonb_set(jsonb_set(doc::jsonb, string_to_array(substr(p1, 3), '.'), to_jsonb(v1)),
                   string_to_array(substr(p2, 3), '.'), to_jsonb(v2))::text
$$;

-- strftime('%Y-%m-%dT%H:%M:%fZ', seconds, 'unixepoch'): the one form the store uses.
CREATE FUNCTION strftime(fmt text, t numeric, modifier text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN fmt = '%Y-%m-%dT%H:%M:%fZ' AND modifier = 'unixepoch' THEN
    to_char(to_timestamp(t) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END
$$;

-- json_group_array(v) and json_group_object(k, v): compact JSON text, [] and {} over no rows.
CREATE FUNCTION rp_json_array_step(state text, v anyelement) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN state IS NULL THEN '' ELSE state || ',' END || coalesce(to_json(v)::text, 'null')
$$;
CREATE FUNCTION rp_json_array_final(state text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '[' || coalesce(state, '') || ']' $$;
CREATE AGGREGATE json_group_array(anyelement) (
    SFUNC = rp_json_array_step, STYPE = text, FINALFUNC = rp_json_array_final);

CREATE FUNCTION rp_json_object_step(state text, k text, v anyelement) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN state IS NULL THEN '' ELSE state || ',' END || to_json(k)::text || ':' ||
         coalesce(to_json(v)::text, 'null')
$$;
CREATE FUNCTION rp_json_object_final(state text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '{' || coalesce(state, '') || '}' $$;
CREATE AGGREGATE json_group_object(text, anyelement) (
    SFUNC = rp_json_object_step, STYPE = text, FINALFUNC = rp_json_object_final);

-- instr(haystack, needle): where needle starts (1-based), 0 when it does not.
CREATE FUNCTION instr(haystack text, needle text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT strpos(haystack, needle) $$;
