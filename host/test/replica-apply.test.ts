// A fleet server's file as a replica: what SessionStore.applyBatch and
// AuthStore's apply methods do with records another server wrote (the
// follow loops that feed them run against a real cluster in
// tests/e2e/cluster.test.ts). Records are applied in stream order, once;
// a gap is refused, never papered over.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDb } from "../src/store/db.ts";
import { AuthStore } from "../src/store/auth.ts";
import { eventHead, eventLine, SessionStore } from "../src/store/sessions.ts";
import type { TokenRow } from "../src/store/types.ts";
import { sessionRow } from "./session-rows.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-replica-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const db = openDb(join(dir, "hutch.db"));
const sessions = new SessionStore(db);
const auth = new AuthStore(db);

const line = (id: string, seq: number, text: string) =>
  eventLine(
    eventHead(id),
    seq,
    "2026-12-05T00:00:00.000Z",
    JSON.stringify({ kind: "user", id: "alice" }),
    "annotation.added",
    JSON.stringify({ text }),
  );

function session(id: string): void {
  sessions.insert(sessionRow(id, { box_id: "box_elsewhere", created_at: "2026-12-05T00:00:00.000Z" }));
}

describe("a session log's replica", () => {
  test("stores another writer's batch with its seqs, times and keys, and reads it back as the same wire lines", () => {
    session("ses_rep1");
    const seen: number[] = [];
    sessions.onStored((_id, seq) => seen.push(seq));
    const lines = [line("ses_rep1", 1, "a"), line("ses_rep1", 2, "b")];
    const stored = sessions.applyBatch("ses_rep1", 1, lines, [[1, "key-b"]]);
    expect(stored.map((e) => [e.seq, e.kind])).toEqual([
      [1, "annotation.added"],
      [2, "annotation.added"],
    ]);
    expect(seen).toEqual([1, 2]);
    expect(sessions.readText("ses_rep1", 1, 10).text).toBe(lines.join("\n"));
    expect(sessions.last("ses_rep1")).toBe(2);
    // The key came with the batch: a local append with it answers the stored seq, storing nothing.
    expect(
      sessions.append("ses_rep1", [
        { kind: "annotation.added", data: { text: "b" }, actor: { kind: "user", id: "alice" }, idempotencyKey: "key-b" },
      ]),
    ).toEqual([{ seq: 2, fresh: false, json: "" }]);
  });

  test("a batch applied before is skipped; one that would leave a gap is refused and stores nothing", () => {
    session("ses_rep2");
    sessions.applyBatch("ses_rep2", 1, [line("ses_rep2", 1, "a")]);
    expect(sessions.applyBatch("ses_rep2", 1, [line("ses_rep2", 1, "a")])).toEqual([]);
    expect(() => sessions.applyBatch("ses_rep2", 3, [line("ses_rep2", 3, "c")])).toThrow("a batch from seq 3 after seq 1");
    expect(() => sessions.applyBatch("ses_rep2", 2, [line("ses_rep2", 5, "x")])).toThrow("has seq 5");
    expect(sessions.last("ses_rep2")).toBe(1);
    expect(() => sessions.applyBatch("ses_none", 1, [line("ses_none", 1, "a")])).toThrow("does not exist");
  });
});

describe("users, tokens and shares as a replica", () => {
  const token = (over: Partial<TokenRow> = {}): TokenRow => ({
    id: "tok_000000000001",
    user: "bob",
    hash: new Uint8Array(32).fill(7),
    scopes: '["read","write"]',
    created_at: "2026-12-05T00:00:00.000Z",
    expires_at: null,
    last_used_at: null,
    revoked_at: null,
    ...over,
  });

  test("a token arrives with its user; a revocation is told once; this server's last use is kept", () => {
    expect(auth.applyToken(token())).toBe(false);
    expect(auth.hasUser("bob")).toBe(true);
    expect(auth.applyToken(token())).toBe(false);
    expect(auth.token("tok_000000000001")!.last_used_at).toBeNull();
    auth.touch("tok_000000000001");
    const used = auth.token("tok_000000000001")!.last_used_at;
    expect(used).toBeString();
    const revoked = token({ revoked_at: "2026-12-05T01:00:00.000Z" });
    expect(auth.applyToken(revoked)).toBe(true);
    expect(auth.applyToken(revoked)).toBe(false);
    expect(auth.token("tok_000000000001")).toMatchObject({ revoked_at: "2026-12-05T01:00:00.000Z", last_used_at: used });
  });

  test("shares and owners follow their records, deletions included", () => {
    auth.applyShare("box_x", "bob", "read");
    expect(auth.shareMode("box_x", "bob")).toBe("read");
    auth.applyShare("box_x", "bob", null);
    expect(auth.shareMode("box_x", "bob")).toBeNull();
    auth.applySnapshotOwner("snap_1", "bob");
    expect(auth.snapshotOwner("snap_1")).toBe("bob");
    auth.applySnapshotOwner("snap_1", null);
    expect(auth.snapshotOwner("snap_1")).toBeNull();
  });
});
