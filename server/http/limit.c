/*
 * Per-address token buckets for the endpoints anyone can call (the boot scripts and images,
 * agent registration). A fixed table, so a flood of addresses costs no memory: a new address
 * takes the stalest slot of a short probe run (keyed hashing: nobody can choose addresses that
 * land in one run), which at worst forgives a forgotten address (it starts again with a full
 * bucket); it never punishes one that was not seen.
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
	unsigned char key[16]; /* the whole address (IPv4 as v4-mapped) */
	int used;
	double tokens;
	int64_t last_ms;
};

struct rp_limit {
	double rate, burst;
	uint64_t seed[2]; /* the hash is keyed: nobody can aim addresses at one probe run */
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
	if (rp_random(l->seed, sizeof l->seed) < 0) {
		free(l);
		return NULL;
	}
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

		/* The whole address, not the /64: a boot network is one /64, and a rack rebooting
		 * at once must not share one bucket. A host that takes many addresses of its /64
		 * gets many buckets; the table's size bounds what that costs. */
		memcpy(k, a, 16);
		return 0;
	}
	return -1;
}

/* FNV-1a from a secret basis, finished with splitmix64's mixer under a second secret. */
static uint32_t
hash(const struct rp_limit *l, const unsigned char k[16])
{
	uint64_t h = 14695981039346656037ULL ^ l->seed[0];
	int i;

	for (i = 0; i < 16; i++)
		h = (h ^ k[i]) * 1099511628211ULL;
	h ^= l->seed[1];
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
	return (uint32_t)(h ^ (h >> 31));
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
	h = hash(l, k);
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
	/* now_ms is monotonic (rp_limit_take's contract); a clock that went back gives nothing. */
	t = b->tokens +
	    (now_ms > b->last_ms ? (double)(now_ms - b->last_ms) / 1000.0 * l->rate : 0);
	b->tokens = t > l->burst ? l->burst : t;
	b->last_ms = now_ms;
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
	} else {
		/* Whole seconds until one token is back, at least one (rate >= 1/s: a few). */
		double w = (1.0 - b->tokens) / l->rate;

		wait = w < 3600 ? (unsigned)w + 1 : 3600;
	}
	pthread_mutex_unlock(&l->mu[stripe]);
	return wait;
}
