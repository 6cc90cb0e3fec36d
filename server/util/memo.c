/* Direct-mapped memo table with striped locks and reference-counted values; see util.h. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define STRIPES   64
#define MAX_VALUE (64 * 1024)

struct blob {
	unsigned refs;
	size_t len;
	char data[];
};

struct slot {
	char *key;
	struct blob *val;
	uint64_t gen;
};

struct rp_memo {
	size_t mask;
	pthread_mutex_t lock[STRIPES];
	uint64_t hits, misses;
	struct slot slot[];
};

static uint64_t
hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

static void
unref(struct blob *b)
{
	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(b);
}

struct rp_memo *
rp_memo_new(size_t slots)
{
	struct rp_memo *m;
	size_t n = STRIPES;
	int i;

	/* At least STRIPES slots, so a slot's stripe is a function of its index. */
	while (n < slots)
		n <<= 1;
	m = calloc(1, sizeof *m + n * sizeof m->slot[0]);
	if (m == NULL)
		return NULL;
	m->mask = n - 1;
	for (i = 0; i < STRIPES; i++)
		pthread_mutex_init(&m->lock[i], NULL);
	return m;
}

void
rp_memo_free(struct rp_memo *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i <= m->mask; i++) {
		free(m->slot[i].key);
		unref(m->slot[i].val);
	}
	for (i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&m->lock[i]);
	free(m);
}

char *
rp_memo_get(struct rp_memo *m, const char *key, uint64_t gen, size_t *len)
{
	uint64_t h = hash(key);
	struct slot *s = &m->slot[h & m->mask];
	pthread_mutex_t *l = &m->lock[h % STRIPES];
	struct blob *b = NULL;

	pthread_mutex_lock(l);
	if (s->key && s->gen == gen && strcmp(s->key, key) == 0) {
		b = s->val;
		__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(l);
	if (b == NULL) {
		__atomic_add_fetch(&m->misses, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	__atomic_add_fetch(&m->hits, 1, __ATOMIC_RELAXED);
	*len = b->len;
	return b->data;
}

void
rp_memo_release(void *value)
{
	if (value)
		unref((struct blob *)((char *)value - offsetof(struct blob, data)));
}

void
rp_memo_put(struct rp_memo *m, const char *key, uint64_t gen, const void *val, size_t len)
{
	uint64_t h = hash(key);
	struct slot *s = &m->slot[h & m->mask];
	pthread_mutex_t *l = &m->lock[h % STRIPES];
	struct blob *b, *old = NULL;
	char *k, *oldkey = NULL;

	if (len > MAX_VALUE)
		return;
	k = strdup(key);
	b = malloc(sizeof *b + len + 1);
	if (k == NULL || b == NULL) {
		free(k);
		free(b);
		return;
	}
	b->refs = 1;
	b->len = len;
	memcpy(b->data, val, len);
	b->data[len] = '\0';
	pthread_mutex_lock(l);
	/* An older generation never overwrites a newer one. */
	if (s->key && s->gen > gen) {
		pthread_mutex_unlock(l);
		free(k);
		free(b);
		return;
	}
	oldkey = s->key;
	old = s->val;
	s->key = k;
	s->val = b;
	s->gen = gen;
	pthread_mutex_unlock(l);
	free(oldkey);
	unref(old);
}

void
rp_memo_stats(struct rp_memo *m, uint64_t *hits, uint64_t *misses)
{
	*hits = __atomic_load_n(&m->hits, __ATOMIC_RELAXED);
	*misses = __atomic_load_n(&m->misses, __ATOMIC_RELAXED);
}
