-- Which run of a step its last 'running' report came from: the agent names each start of a
-- step with a fresh UUID, so that a 'running' report sent again after a lost answer (the
-- server stopped between committing it and replying) is told apart from a real second run
-- and does not count one (store/steps.c rp_store_step_report).
ALTER TABLE job_steps ADD COLUMN run_id TEXT;
