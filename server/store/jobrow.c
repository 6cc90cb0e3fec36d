/* Marks that a running job's own work leaves on its row, inside the caller's transaction
 * (the job lifecycle itself, queueing to outcome, is jobs.c's). */
#include "internal.h"

enum rp_err
store_job_sent(struct conn *c, int64_t job_id, const char *what, const char *state, int64_t now)
{
	struct stmt *s =
	        STMT(c, "UPDATE jobs SET sent_at = coalesce(sent_at, ?2), updated_at = ?2, "
	                "phase = ?3 || ': ' || ?4, phase_at = ?2 WHERE id = ?1");
	int rc;

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, job_id);
	sql_bind_int(s, 2, now);
	sql_bind_text(s, 3, what);
	sql_bind_text(s, 4, state);
	rc = sql_step(s);
	sql_reset(s);
	return rc == SQL_DONE ? RP_ERR_OK : store_sqlerr(c, rc, "job sent mark");
}

enum rp_err
store_job_phase(struct conn *c, int64_t job_id, const char *what, const char *state, int64_t now)
{
	struct stmt *s = STMT(c, "UPDATE jobs SET phase = ?2 || ': ' || ?3, phase_at = ?4 WHERE "
	                         "id = ?1");
	int rc;

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, job_id);
	sql_bind_text(s, 2, what);
	sql_bind_text(s, 3, state);
	sql_bind_int(s, 4, now);
	rc = sql_step(s);
	sql_reset(s);
	return rc == SQL_DONE ? RP_ERR_OK : store_sqlerr(c, rc, "job phase");
}
