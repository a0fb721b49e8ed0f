// A new session's row as the session-log tests make them: a shell session of
// alice's on box_a, open, made now; `over` changes what a test needs.
import type { NewSessionRow } from "../src/store/types.ts";

export function sessionRow(id: string, over: Partial<NewSessionRow> = {}): NewSessionRow {
  return {
    id,
    box_id: "box_a",
    agent: "shell",
    label: null,
    state: "open",
    owner: "alice",
    argv: "[]",
    pty: null,
    created_at: new Date().toISOString(),
    ...over,
  };
}
