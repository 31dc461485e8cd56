-- cairn store schema v11: what several servers on one store share beyond the records themselves.
-- A cancel asked of a deployment that another server runs is recorded on the run; the running server sees it when it
-- renews its claim and cancels there.
ALTER TABLE deployments ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;

-- The results of long-running operations polled through `Location` (`/subscriptions/{s}/operationresults/{id}`):
-- a deployment delete or what-if (done at once) or a bulk delete (running, claimed by the server running it, until
-- it ends), so any server answers the poll. status is NULL while running; each row lives until expires_at (Unix
-- milliseconds). The body is the API's answer (never secrets).
CREATE TABLE operation_results (
    id               TEXT PRIMARY KEY,
    subscription_key TEXT NOT NULL,
    status           INTEGER,
    body             TEXT,
    owner            TEXT,
    owner_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    format_version   INTEGER NOT NULL
);

CREATE INDEX operation_results_expiry ON operation_results (expires_at);
