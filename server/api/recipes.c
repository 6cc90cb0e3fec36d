/* /v1/recipes: named, parameterised step plans. */
#include "api.h"

static const struct rp_field recipe_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"description", RP_F_STR, RP_F_NULLABLE, 0, 1024},
        {"params", RP_F_ANY_OBJECT},
        {"steps", RP_F_ANY_ARRAY, RP_F_REQUIRED, 0, 100},
        {"version", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {NULL},
};

/* The plan is checked as a template here and again, filled in, when a job uses it. */
static enum rp_err
recipe_check(json_t *body, json_t **detail)
{
	json_t *steps = json_object_get(body, "steps");
	enum rp_err e;

	if ((e = rp_api_recipe_params_check(json_object_get(body, "params"), detail)) != RP_ERR_OK)
		return e;
	return steps ? rp_api_plan_check(steps, 1, detail) : RP_ERR_OK;
}

static const char *const recipe_filters[] = {NULL};

static const struct rp_crud recipes = {
        .what = "recipe",
        .collection = "/v1/recipes",
        .spec = recipe_fields,
        .filters = recipe_filters,
        .sortable = 1,
        RP_CRUD_STORE(recipe),
        .check = recipe_check,
};

RP_CRUD_HANDLERS(recipes, &recipes)
