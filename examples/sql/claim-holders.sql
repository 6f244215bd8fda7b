-- Transactions open for more than 5 seconds, oldest first: the usual holders of a busy
-- claim (EO_CLAIM_BUSY) are among them.
SELECT pid, state, now() - xact_start AS open_for, query
  FROM pg_stat_activity
 WHERE state <> 'idle' AND xact_start < now() - interval '5 seconds'
 ORDER BY xact_start;
