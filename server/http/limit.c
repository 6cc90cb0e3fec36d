/*
 * Per-address token buckets for the endpoints anyone can call (the boot scripts and images,
 * agent registration). A fixed table, so a flood of addresses costs no memory: a new address
 * takes the stalest slot of a short probe run, which at worst forgives a forgotten address
 * (it starts again with a full bucket); it never punishes one that was not seen.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http.h"

#define SLOTS   4096 /* power of two */
#define PROBE   8
#define STRIPES 16

struct bucket {
	unsigned char key[16]; /* IPv4 as v4-mapped; IPv6 by its /64, what one host controls */
	int used;
	double tokens;
	int64_t last_ms;
};

struct rp_limit {
	double rate, burst;
	pthread_mutex_t mu[STRIPES];
	struct bucket b[SLOTS];
};

struct rp_limit *
rp_limit_new(double rate, double burst)
{
	struct rp_limit *l;
	int i;

	if (rate <= 0 || burst < 1 || (l = calloc(1, sizeof *l)) == NULL)
		return NULL;
	l->rate = rate;
	l->burst = burst;
	for (i = 0; i < STRIPES; i++)
		pthread_mutex_init(&l->mu[i], NULL);
	return l;
}

void
rp_limit_free(struct rp_limit *l)
{
	int i;

	if (l == NULL)
		return;
	for (i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&l->mu[i]);
	free(l);
}

static int
key_of(const struct sockaddr *sa, unsigned char k[16])
{
	memset(k, 0, 16);
	if (sa->sa_family == AF_INET) {
		k[10] = k[11] = 0xff;
		memcpy(k + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;

		/* v4-mapped addresses are IPv4 hosts: keep all of them. */
		memcpy(k, a, IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)a) ? 16 : 8);
		return 0;
	}
	return -1;
}

static uint32_t
hash(const unsigned char k[16])
{
	uint32_t h = 2166136261u; /* FNV-1a */
	int i;

	for (i = 0; i < 16; i++)
		h = (h ^ k[i]) * 16777619u;
	return h;
}

unsigned
rp_limit_take(struct rp_limit *l, const struct sockaddr *sa, int64_t now_ms)
{
	unsigned char k[16];
	struct bucket *b = NULL, *stalest = NULL;
	uint32_t h;
	unsigned wait = 0, i, stripe;
	double t;

	if (l == NULL || sa == NULL || key_of(sa, k) < 0)
		return 0;
	h = hash(k);
	/* A probe run never crosses a stripe, so one lock covers it. */
	stripe = (h & (SLOTS - 1)) / (SLOTS / STRIPES);
	pthread_mutex_lock(&l->mu[stripe]);
	for (i = 0; i < PROBE; i++) {
		struct bucket *c =
		        &l->b[stripe * (SLOTS / STRIPES) + ((h + i) & (SLOTS / STRIPES - 1))];

		if (c->used && memcmp(c->key, k, 16) == 0) {
			b = c;
			break;
		}
		if (stalest == NULL || !c->used || (stalest->used && c->last_ms < stalest->last_ms))
			stalest = c;
	}
	if (b == NULL) {
		b = stalest;
		memcpy(b->key, k, 16);
		b->used = 1;
		b->tokens = l->burst;
		b->last_ms = now_ms;
	}
	t = b->tokens + (double)(now_ms - b->last_ms) / 1000.0 * l->rate;
	b->tokens = t > l->burst ? l->burst : t;
	b->last_ms = now_ms;
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
	} else {
		/* Whole seconds until one token is back, at least one. */
		wait = (unsigned)((1.0 - b->tokens) / l->rate) + 1;
	}
	pthread_mutex_unlock(&l->mu[stripe]);
	return wait;
}
