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
];
