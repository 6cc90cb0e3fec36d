-- 0016: webhooks. Each event that matches a webhook's patterns gets a delivery row in the
-- transaction that writes the event (store_event_text): the outbox, as durable as the event.
-- The leader POSTs each webhook's pending deliveries in event order (docs/webhooks.md).

CREATE TABLE webhooks (
    id                INTEGER PRIMARY KEY,
    uuid              TEXT NOT NULL UNIQUE,
    name              TEXT NOT NULL UNIQUE,
    url               TEXT NOT NULL,            -- http or https, checked by the API
    events            TEXT NOT NULL,            -- JSON array of patterns: "*", "a.b", "a.*"
    secret_sealed     TEXT,                     -- the HMAC key, sealed as BMC passwords are;
                                                -- NULL once --forget-secrets cleared it
    secret_updated_at INTEGER NOT NULL,
    enabled           INTEGER NOT NULL DEFAULT 1,
    version           INTEGER NOT NULL DEFAULT 1,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);

-- No foreign key to events: retention may remove an event first (the delivery then fails,
-- saying so).
CREATE TABLE webhook_deliveries (
    id           INTEGER PRIMARY KEY,
    webhook_id   INTEGER NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_id     INTEGER NOT NULL,
    action       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    state        TEXT NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      INTEGER NOT NULL,              -- pending: not tried again before then
    last_at      INTEGER,                       -- the latest attempt's start
    last_status  INTEGER,                       -- its HTTP status (NULL: none came back)
    last_error   TEXT,
    finished_at  INTEGER,
    UNIQUE (webhook_id, event_id)
);
-- The head of each webhook's queue and its count of pending ones; the log newest first.
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries(webhook_id, state, event_id);
CREATE INDEX webhook_deliveries_log ON webhook_deliveries(webhook_id, id);
CREATE INDEX webhook_deliveries_ended ON webhook_deliveries(finished_at)
    WHERE state <> 'pending';
