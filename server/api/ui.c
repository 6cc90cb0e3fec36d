/*
 * The web view (/ui/): the files of web/, compiled into the binary by cmake/embed_web.cmake,
 * so one rackpilotd serves its own view with nothing to install. They hold no secret and need
 * no token; the page asks for one and sends it with every API call.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api.h"

static const struct {
	const char *ext;
	const char *type;
} types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".json", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
};

static const char *
content_type(const char *name)
{
	const char *dot = strrchr(name, '.');
	size_t i;

	for (i = 0; dot && i < sizeof types / sizeof types[0]; i++)
		if (!strcasecmp(dot, types[i].ext))
			return types[i].type;
	return "application/octet-stream";
}

/* Static files: revalidated by ETag on every use; scripts only from here, no inline code, no
 * framing (clickjacking); no sniffing of types; no Referer carrying a node's name away. */
static const char *const headers[] = {
        "Cache-Control",
        "no-cache",
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'",
        "X-Content-Type-Options",
        "nosniff",
        "Referrer-Policy",
        "no-referrer",
        NULL,
};

/* The data is static: nothing to release. */
static void
keep(void *p)
{
	(void)p;
}

/* If-None-Match: "*", or a list of entity tags (weak ones compare by their tag, RFC 9110
 * 13.1.2), one of which is etag. */
static int
none_match(const char *header, const char *etag)
{
	size_t n = strlen(etag);
	const char *p = header;

	while (p && *p) {
		p += strspn(p, " \t,");
		if (*p == '*')
			return 1;
		if (!strncmp(p, "W/", 2))
			p += 2;
		if (!strncmp(p, etag, n) &&
		    (p[n] == '\0' || p[n] == ',' || p[n] == ' ' || p[n] == '\t'))
			return 1;
		p = strchr(p, ',');
	}
	return 0;
}

static void
serve(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name)
{
	const struct rp_web_file *f = NULL;
	size_t i;

	for (i = 0; i < rp_api_web_file_count; i++)
		if (!strcmp(rp_api_web_files[i].name, name)) {
			f = &rp_api_web_files[i];
			break;
		}
	if (f == NULL) {
		rp_api_error(rs, RP_ERR_NOT_FOUND, json_pack("{s:s+}", "path", "/ui/", name));
		return;
	}
	snprintf(rs->etag, sizeof rs->etag, "%s", f->etag);
	rs->headers = headers;
	if (rq->if_none_match && none_match(rq->if_none_match, f->etag)) {
		rs->status = 304;
		return;
	}
	rs->status = 200;
	rs->text = (char *)f->data; /* sent as is, never written to */
	rs->text_len = f->len;
	rs->text_free = keep;
	rs->content_type = content_type(f->name);
}

void
rp_api_ui_index(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	serve(rq, rs, "index.html");
}

void
rp_api_ui_file(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	serve(rq, rs, rq->params[0]);
}
