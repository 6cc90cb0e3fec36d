/* Per-route request counters and latency histograms; relaxed atomics, no locks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

static const int codes[] = {200, 201, 202, 204, 304, 400, 401, 403, 404,
                            405, 409, 412, 413, 415, 500, 503, 0};
#define NCODES (sizeof codes / sizeof codes[0])
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                0.05,   0.1,   0.25,   0.5,   1,    2.5};
#define NBOUNDS (sizeof bounds / sizeof bounds[0])

struct route_stats {
	uint64_t count[NCODES];
	uint64_t bucket[NBOUNDS + 1];
	uint64_t sum_ns;
};

struct rp_metrics {
	size_t n;
	struct route_stats r[];
};

struct rp_metrics *
rp_metrics_new(size_t nroutes)
{
	struct rp_metrics *m = calloc(1, sizeof *m + (nroutes + 1) * sizeof m->r[0]);

	if (m)
		m->n = nroutes + 1;
	return m;
}

void
rp_metrics_free(struct rp_metrics *m)
{
	free(m);
}

void
rp_metrics_observe(struct rp_metrics *m, size_t route, int status, int64_t ns)
{
	struct route_stats *r;
	size_t i;

	if (m == NULL)
		return;
	r = &m->r[route < m->n ? route : m->n - 1];
	for (i = 0; i + 1 < NCODES && codes[i] != status; i++)
		;
	__atomic_add_fetch(&r->count[i], 1, __ATOMIC_RELAXED);
	for (i = 0; i < NBOUNDS && (double)ns / 1e9 > bounds[i]; i++)
		;
	__atomic_add_fetch(&r->bucket[i], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->sum_ns, (uint64_t)(ns > 0 ? ns : 0), __ATOMIC_RELAXED);
}

void
rp_metrics_render(struct rp_metrics *m, const char *(*label)(size_t route, void *arg), void *arg,
                  struct rp_buf *b)
{
	size_t i, j;

	rp_buf_printf(b, "# HELP rackpilot_http_requests_total HTTP requests by route and status.\n"
	                 "# TYPE rackpilot_http_requests_total counter\n");
	for (i = 0; i < m->n; i++) {
		const char *l = label(i, arg);

		for (j = 0; j < NCODES; j++) {
			uint64_t v = __atomic_load_n(&m->r[i].count[j], __ATOMIC_RELAXED);
			char code[16] = "other";

			if (v == 0)
				continue;
			if (codes[j])
				snprintf(code, sizeof code, "%d", codes[j]);
			rp_buf_printf(
			        b, "rackpilot_http_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
			        l, code, (unsigned long long)v);
		}
	}
	rp_buf_printf(b,
	              "# HELP rackpilot_http_request_duration_seconds Request latency by route.\n"
	              "# TYPE rackpilot_http_request_duration_seconds histogram\n");
	for (i = 0; i < m->n; i++) {
		const char *l = label(i, arg);
		uint64_t cum = 0;

		for (j = 0; j <= NBOUNDS; j++)
			cum += __atomic_load_n(&m->r[i].bucket[j], __ATOMIC_RELAXED);
		if (cum == 0)
			continue;
		cum = 0;
		for (j = 0; j <= NBOUNDS; j++) {
			char le[32] = "+Inf";

			cum += __atomic_load_n(&m->r[i].bucket[j], __ATOMIC_RELAXED);
			if (j < NBOUNDS)
				snprintf(le, sizeof le, "%g", bounds[j]);
			rp_buf_printf(b,
			              "rackpilot_http_request_duration_seconds_bucket{route=\"%s\","
			              "le=\"%s\"} %llu\n",
			              l, le, (unsigned long long)cum);
		}
		rp_buf_printf(b, "rackpilot_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
		              l, (double)__atomic_load_n(&m->r[i].sum_ns, __ATOMIC_RELAXED) / 1e9);
		rp_buf_printf(b,
		              "rackpilot_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
		              l, (unsigned long long)cum);
	}
}
