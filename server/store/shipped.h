/*
 * shipped.h — the recipes rackpilotd ships (the scripts in recipes/), compiled in by
 * cmake/embed_recipes.cmake. Data only; server/store/recipes.c loads them
 * (rp_store_recipe_ship).
 */
#ifndef RP_STORE_SHIPPED_H
#define RP_STORE_SHIPPED_H

#include <stddef.h>

struct rp_shipped_recipe {
	const char *name; /* the recipe's name, as in its JSON */
	const char *json; /* {name, description, params, steps}: a POST /v1/recipes body */
};

/* Every shipped recipe, in file name order: rp_shipped_recipe_count of them. */
extern const struct rp_shipped_recipe rp_shipped_recipes[];
extern const size_t rp_shipped_recipe_count;

#endif
