-- 0014: nothing on SQLite. The JSON and time functions the store's SQL uses are SQLite's own;
-- 0014-sql-functions.pg.sql makes PostgreSQL stand-ins of the same names.
SELECT 1;
