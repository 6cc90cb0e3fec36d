/*
 * internal.h — private to server/accept/: what compare.c and fabric.c share.
 */
#ifndef RP_ACCEPT_INTERNAL_H
#define RP_ACCEPT_INTERNAL_H

#include <jansson.h>

/* The item of inv's nics.items that name names: by interface name, or by MAC (any case).
 * Borrowed, or NULL. */
json_t *accept_nic_of(json_t *inv, const char *name);

#endif
