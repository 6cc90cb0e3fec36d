/*
 * demo.h — `rackpilotd --demo`: a demo site (two racks of 8-GPU nodes on the fake BMC driver,
 * a BIOS profile, a firmware baseline, some drift) seeded into an empty database that is
 * marked as demo data for good. A database holding real data is never seeded.
 */
#ifndef RP_DEMO_H
#define RP_DEMO_H

#include <stddef.h>

#include "store/store.h"

/* Seed st when it is empty, or do nothing when it already is a demo database. -1 with why
 * when it holds real data or seeding fails. Firmware images are written to image_dir. */
int rp_demo_prepare(struct rp_store *st, const char *image_dir, char *why, size_t whylen);

#endif
