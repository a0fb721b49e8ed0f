// Numbered schema migrations: index i takes the schema from version i to i+1.
// Append only; never edit one that has shipped.
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE boxes (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    engine TEXT NOT NULL,
    state TEXT NOT NULL,
    desired TEXT NOT NULL,
    reason TEXT,
    config TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  );
  CREATE TABLE ops (
    id TEXT PRIMARY KEY,
    box_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    idem_key TEXT UNIQUE,
    status TEXT NOT NULL,
    phase TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  );
  CREATE INDEX ops_box ON ops(box_id, status);
  `,
  `
  CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    box_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    label TEXT,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    argv TEXT NOT NULL,
    pty TEXT,
    driver TEXT,
    driver_lease_ms INTEGER,
    driver_expires_at INTEGER,
    last_seq INTEGER NOT NULL DEFAULT 0,
    pty_chunks INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    closed_at TEXT
  );
  CREATE INDEX sessions_box ON sessions(box_id);
  CREATE TABLE events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    idem_key TEXT,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID;
  CREATE UNIQUE INDEX events_idem ON events(session_id, idem_key) WHERE idem_key IS NOT NULL;
  CREATE TABLE pty_chunks (
    session_id TEXT NOT NULL,
    chunk INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session_id, chunk)
  ) WITHOUT ROWID;
  `,
  `
  CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    sealed BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  );
  CREATE TABLE box_policy (
    box_id TEXT PRIMARY KEY,
    allow TEXT NOT NULL,
    bindings TEXT NOT NULL,
    stubs TEXT NOT NULL DEFAULT '{}'
  );
  CREATE TABLE egress_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    box_id TEXT NOT NULL,
    decision TEXT NOT NULL,
    record TEXT NOT NULL
  );
  CREATE INDEX egress_box ON egress_log(box_id, id);
  CREATE INDEX egress_box_decision ON egress_log(box_id, decision, id);
  `,
  `
  CREATE TABLE session_turns (
    session_id TEXT PRIMARY KEY,
    turn TEXT NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE session_anchors (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID;
  `,
  `
  CREATE TABLE users (
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    user TEXT NOT NULL REFERENCES users(name),
    hash BLOB NOT NULL,
    scopes TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at INTEGER,
    last_used_at TEXT,
    revoked_at TEXT
  ) WITHOUT ROWID;
  CREATE INDEX tokens_user ON tokens(user);
  CREATE TABLE box_owners (
    box_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE box_shares (
    box_id TEXT NOT NULL,
    user TEXT NOT NULL,
    mode TEXT NOT NULL,
    PRIMARY KEY (box_id, user)
  ) WITHOUT ROWID;
  CREATE TABLE snapshot_owners (
    snap_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL
  ) WITHOUT ROWID;
  `,
  `
  ALTER TABLE sessions ADD COLUMN pty_bytes INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE sessions ADD COLUMN pty_dropped INTEGER NOT NULL DEFAULT 0;
  UPDATE sessions SET pty_bytes = (SELECT COALESCE(SUM(length(data)), 0) FROM pty_chunks WHERE session_id = sessions.id);
  CREATE INDEX sessions_owner ON sessions(owner);
  `,
  `
  ALTER TABLE box_policy ADD COLUMN unlisted TEXT NOT NULL DEFAULT 'deny';
  ALTER TABLE box_policy ADD COLUMN approval_ms INTEGER;
  `,
  `
  CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    box_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    agent TEXT NOT NULL,
    prompt TEXT NOT NULL,
    cron TEXT,
    at INTEGER,
    max_run_ms INTEGER NOT NULL,
    catch_up TEXT NOT NULL,
    spread_ms INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    next_at INTEGER,
    last_run TEXT,
    runs INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX schedules_due ON schedules(state, next_at);
  CREATE INDEX schedules_box ON schedules(box_id);
  `,
  `
  CREATE TABLE replicas (
    stream TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    applied INTEGER NOT NULL
  ) WITHOUT ROWID;
  ALTER TABLE users ADD COLUMN quota TEXT;
  `,
  `
  CREATE TABLE pools (
    engine TEXT NOT NULL,
    image TEXT NOT NULL,
    spec TEXT NOT NULL,
    PRIMARY KEY (engine, image)
  ) WITHOUT ROWID;
  `,
];
