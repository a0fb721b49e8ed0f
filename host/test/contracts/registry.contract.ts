// The registry's contract: what every backend of BoxRegistry (with its
// OpJournal), AuthTables, BrokerTables and ScheduleTable (store/types.ts)
// must do, in their async form (RegistryAsync: the SQLite tables through
// asyncRegistry, JetStream KV as it is). They are one suite because they are
// one registry: a box's create op, owner and policy are written with it, and
// deleting it removes them all.
import { describe, expect, test } from "bun:test";
import type { EgressDecision, EgressRecord } from "@hutch/shared";
import { EGRESS_KEPT, type RegistryAsync, type ScheduleRow } from "../../src/store/types.ts";
import { fails, type MakeStorage, type StorageTest, withStorage } from "./storage.ts";

function schedule(id: string, boxId: string, over: Partial<ScheduleRow> = {}): ScheduleRow {
  return {
    id,
    box_id: boxId,
    owner: "alice",
    agent: "shell",
    prompt: "echo hi",
    cron: "* * * * *",
    at: null,
    max_run_ms: 60_000,
    catch_up: "once",
    spread_ms: 7000,
    state: "active",
    next_at: 1000,
    last_run: null,
    runs: 0,
    skipped: 0,
    created_at: `2026-01-01T00:00:0${id.at(-1)}.000Z`,
    ...over,
  };
}

const hash = (n: number) => new Uint8Array(32).fill(n);

function record(n: number, decision: EgressDecision = "allowed"): EgressRecord {
  return {
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
    decision,
    host: `h${n}.example`,
    port: 443,
    bytesUp: n,
    bytesDown: 0,
    ms: 1,
  };
}

export function describeRegistryContract(name: string, make: MakeStorage<RegistryAsync>): void {
  const run = (fn: StorageTest<RegistryAsync>) => () => withStorage(make, fn);

  describe(`BoxRegistry and OpJournal contract: ${name}`, () => {
    test(
      "a new box is stored with its pending create op, found by id or name, listed oldest first",
      run(async ({ boxes }) => {
        const { box, op } = await boxes.insertBox("web", "process", "running", null, { cpus: 2 });
        expect(box).toMatchObject({ name: "web", engine: "process", state: "creating", desired: "running", reason: null });
        expect(JSON.parse(box.config)).toEqual({ cpus: 2 });
        expect(op).toMatchObject({ boxId: box.id, kind: "create", status: "pending" });
        expect(await boxes.byId(box.id)).toEqual(box);
        expect(await boxes.byName("web")).toEqual(box);
        expect(await boxes.find(box.id)).toEqual(box);
        expect(await boxes.find("web")).toEqual(box);
        expect(await boxes.find("nope")).toBeNull();
        expect(await boxes.op(op.id)).toEqual(op);
        expect(await boxes.pendingOps(box.id)).toEqual([op]);
        const second = (await boxes.insertBox("db", "process", "stopped", null)).box;
        expect((await boxes.list()).map((b) => b.name)).toEqual(["web", "db"]);
        expect(JSON.parse(second.config)).toEqual({});
        expect(await boxes.byId("box_missing")).toBeNull();
        expect(await boxes.op("op_missing")).toBeNull();
        expect(await boxes.pendingOps("box_missing")).toEqual([]);
      }),
    );

    test(
      "a taken name or a used idempotency key is refused, and nothing of the box is stored",
      run(async ({ boxes }) => {
        const { op } = await boxes.insertBox("web", "process", "running", "key-1");
        await fails(() => boxes.insertBox("web", "process", "running", null));
        await fails(() => boxes.insertBox("other", "process", "running", "key-1"));
        expect((await boxes.list()).map((b) => b.name)).toEqual(["web"]);
        expect(await boxes.byName("other")).toBeNull();
        expect(await boxes.opByKey("key-1")).toEqual(op);
        expect(await boxes.opByKey("key-2")).toBeNull();
      }),
    );

    test(
      "request sets the desired state and records its op together; a used key changes nothing",
      run(async ({ boxes }) => {
        const { box, op: create } = await boxes.insertBox("web", "process", "running", null);
        const stop = await boxes.request(box.id, "stop", "stopped", "stop-1");
        expect(stop).toMatchObject({ boxId: box.id, kind: "stop", status: "pending" });
        expect((await boxes.byId(box.id))?.desired).toBe("stopped");
        expect(await boxes.opByKey("stop-1")).toEqual(stop);
        expect((await boxes.pendingOps(box.id)).map((o) => o.id)).toEqual([create.id, stop.id]);
        await fails(() => boxes.request(box.id, "start", "running", "stop-1"));
        expect((await boxes.byId(box.id))?.desired).toBe("stopped");
        expect(await boxes.pendingOps(box.id)).toHaveLength(2);
      }),
    );

    test(
      "settleOps settles a box's pending ops, done or failed with the error, and leaves settled ones be",
      run(async ({ boxes }) => {
        const { box, op: create } = await boxes.insertBox("web", "process", "running", null);
        const other = (await boxes.insertBox("db", "process", "running", null)).op;
        await boxes.settleOps(box.id, null);
        expect(await boxes.op(create.id)).toMatchObject({ status: "done" });
        expect((await boxes.op(create.id))?.error).toBeUndefined();
        const stop = await boxes.request(box.id, "stop", "stopped", null);
        await boxes.settleOps(box.id, "the engine refused");
        expect(await boxes.op(stop.id)).toMatchObject({ status: "failed", error: "the engine refused" });
        expect(await boxes.op(create.id)).toMatchObject({ status: "done" });
        expect(await boxes.pendingOps(box.id)).toEqual([]);
        expect(await boxes.op(other.id)).toMatchObject({ status: "pending" });
      }),
    );

    test(
      "setState records the state and its reason; setConfig replaces the settings",
      run(async ({ boxes }) => {
        const { box } = await boxes.insertBox("web", "process", "running", null, { cpus: 1, memory: "1G" });
        await boxes.setState(box.id, "failed", "it crashed");
        expect(await boxes.byId(box.id)).toMatchObject({ state: "failed", reason: "it crashed" });
        await boxes.setState(box.id, "running");
        expect(await boxes.byId(box.id)).toMatchObject({ state: "running", reason: null });
        await boxes.setConfig(box.id, { cpus: 4 });
        expect(JSON.parse((await boxes.byId(box.id))!.config)).toEqual({ cpus: 4 });
      }),
    );

    test(
      "deleting a box removes every row that names it, and only those; again is harmless",
      run(async ({ boxes, auth, broker }) => {
        const { box, op } = await boxes.insertBox("web", "process", "running", "k", {}, { allow: ["example.com"], bindings: [] }, "alice");
        const keep = (await boxes.insertBox("db", "process", "running", null, {}, undefined, "alice")).box;
        await auth.share(box.id, "bob", "read");
        await auth.share(keep.id, "bob", "drive");
        await broker.logEgress(box.id, record(1));
        expect(await boxes.countRows(box.id)).toBeGreaterThan(0);
        await boxes.deleteBox(box.id);
        expect(await boxes.countRows(box.id)).toBe(0);
        expect(await boxes.byId(box.id)).toBeNull();
        expect(await boxes.op(op.id)).toBeNull();
        expect(await boxes.opByKey("k")).toBeNull();
        expect(await auth.owner(box.id)).toBeNull();
        expect(await auth.shares(box.id)).toEqual([]);
        expect(await broker.policy(box.id)).toEqual({ allow: [], bindings: [], stubs: {} });
        expect(await broker.egress(box.id, undefined, 10)).toEqual([]);
        await boxes.deleteBox(box.id);
        expect(await boxes.byId(keep.id)).not.toBeNull();
        expect(await auth.owner(keep.id)).toBe("alice");
        expect(await auth.shares(keep.id)).toEqual([{ box: keep.id, user: "bob", mode: "drive" }]);
        // The name is free again.
        expect((await boxes.insertBox("web", "process", "running", null)).box.name).toBe("web");
      }),
    );

    test(
      "a box's owner and policy are stored with it",
      run(async ({ boxes, auth, broker }) => {
        const { box } = await boxes.insertBox(
          "web",
          "process",
          "running",
          null,
          {},
          { allow: ["a.example"], bindings: ["anthropic"] },
          "alice",
        );
        expect(await auth.owner(box.id)).toBe("alice");
        expect(await broker.policy(box.id)).toEqual({ allow: ["a.example"], bindings: ["anthropic"], stubs: {} });
        const local = (await boxes.insertBox("mine", "process", "running", null)).box;
        expect(await auth.owner(local.id)).toBeNull();
        expect(await broker.policy(local.id)).toEqual({ allow: [], bindings: [], stubs: {} });
        // A box made again from another server's (a fleet's move or failover) keeps what its unlisted hosts get.
        const held = (
          await boxes.insertBox(
            "held",
            "process",
            "running",
            null,
            {},
            { allow: [], bindings: [], unlisted: "ask", approvalTimeoutMs: 60_000 },
          )
        ).box;
        expect(await broker.policy(held.id)).toEqual({ allow: [], bindings: [], stubs: {}, unlisted: "ask", approvalMs: 60_000 });
      }),
    );

    test(
      "two handles see one registry: a name taken through one is refused through the other",
      run(async ({ boxes: a }, more) => {
        const b = (await more()).store.boxes;
        const { box, op } = await a.insertBox("web", "process", "running", "key-1");
        expect(await b.find("web")).toEqual(box);
        await fails(() => b.insertBox("web", "process", "running", null));
        expect(await b.opByKey("key-1")).toEqual(op);
        await b.settleOps(box.id, null);
        expect(await a.pendingOps(box.id)).toEqual([]);
      }),
    );

    test(
      "two handles racing for one name: one box is made, the other is refused and no second box shows",
      run(async ({ boxes: a }, more) => {
        const b = (await more()).store.boxes;
        for (let round = 0; round < 5; round++) {
          const name = `race-${round}`;
          const results = await Promise.allSettled([
            a.insertBox(name, "process", "running", null),
            b.insertBox(name, "process", "running", null),
          ]);
          const won = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
          expect(won).toHaveLength(1);
          expect(await b.byName(name)).toEqual(won[0]!.box);
          expect(await a.pendingOps(won[0]!.box.id)).toEqual([won[0]!.op]);
        }
        expect((await a.list()).map((x) => x.name)).toEqual(["race-0", "race-1", "race-2", "race-3", "race-4"]);
      }),
    );

    test(
      "two handles racing with one idempotency key: one op is recorded, for one box or one request",
      run(async ({ boxes: a }, more) => {
        const b = (await more()).store.boxes;
        const results = await Promise.allSettled([
          a.insertBox("one", "process", "running", "create-1"),
          b.insertBox("two", "process", "running", "create-1"),
        ]);
        const won = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
        expect(won).toHaveLength(1);
        expect(await a.opByKey("create-1")).toEqual(won[0]!.op);
        expect((await b.list()).map((x) => x.id)).toEqual([won[0]!.box.id]);
        const box = won[0]!.box.id;
        const asked = await Promise.allSettled([a.request(box, "stop", "stopped", "stop-1"), b.request(box, "stop", "stopped", "stop-1")]);
        const ops = asked.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
        expect(ops).toHaveLength(1);
        expect(await b.opByKey("stop-1")).toEqual(ops[0]!);
        expect((await a.pendingOps(box)).map((o) => o.kind)).toEqual(["create", "stop"]);
      }),
    );

    test(
      "what was acknowledged is there after a reopen",
      run(async ({ boxes, auth }, _more, reopen) => {
        const { box } = await boxes.insertBox("web", "process", "running", "key-1", { cpus: 2 }, undefined, "alice");
        const stop = await boxes.request(box.id, "stop", "stopped", null);
        await boxes.setState(box.id, "running", "up");
        await auth.share(box.id, "bob", "read");
        const before = await boxes.byId(box.id);
        const again = await reopen();
        expect(await again.boxes.byId(box.id)).toEqual(before);
        expect(await again.boxes.pendingOps(box.id)).toHaveLength(2);
        expect(await again.boxes.op(stop.id)).toEqual(stop);
        expect((await again.boxes.opByKey("key-1"))?.kind).toBe("create");
        expect(await again.auth.owner(box.id)).toBe("alice");
        expect(await again.auth.shareMode(box.id, "bob")).toBe("read");
      }),
    );
  });

  describe(`AuthTables contract: ${name}`, () => {
    test(
      "users are added once and listed by name with their live token counts",
      run(async ({ auth }) => {
        expect(await auth.addUser("bob")).toBe(true);
        expect(await auth.addUser("alice")).toBe(true);
        expect(await auth.addUser("bob")).toBe(false);
        expect(await auth.hasUser("bob")).toBe(true);
        expect(await auth.hasUser("carol")).toBe(false);
        await auth.insertToken("tok_a1", "alice", hash(1), ["read"], null);
        await auth.insertToken("tok_a2", "alice", hash(2), ["read"], null);
        await auth.revoke("tok_a2");
        const users = await auth.users();
        expect(users.map((u) => [u.name, u.tokens])).toEqual([
          ["alice", 1],
          ["bob", 0],
        ]);
        expect(users.every((u) => !Number.isNaN(Date.parse(u.createdAt)))).toBe(true);
      }),
    );

    test(
      "a token keeps its hash, scopes and expiry; it needs a user and a free id",
      run(async ({ auth }) => {
        await auth.addUser("alice");
        const row = await auth.insertToken("tok_1", "alice", hash(7), ["read", "write"], 1_900_000_000_000);
        expect(row).toMatchObject({ id: "tok_1", user: "alice", expires_at: 1_900_000_000_000, last_used_at: null, revoked_at: null });
        expect(new Uint8Array(row.hash)).toEqual(hash(7));
        expect(JSON.parse(row.scopes)).toEqual(["read", "write"]);
        expect(await auth.token("tok_1")).toEqual(row);
        expect(await auth.token("tok_missing")).toBeNull();
        await fails(() => auth.insertToken("tok_2", "nobody", hash(1), ["read"], null));
        await fails(() => auth.insertToken("tok_1", "alice", hash(8), ["read"], null));
        expect(new Uint8Array((await auth.token("tok_1"))!.hash)).toEqual(hash(7));
        expect(await auth.token("tok_2")).toBeNull();
      }),
    );

    test(
      "tokens list by id, of one user when asked; revoke once; touch marks use",
      run(async ({ auth }) => {
        await auth.addUser("alice");
        await auth.addUser("bob");
        await auth.insertToken("tok_c", "alice", hash(1), ["read"], null);
        await auth.insertToken("tok_a", "bob", hash(2), ["read"], null);
        await auth.insertToken("tok_b", "alice", hash(3), ["admin"], null);
        expect((await auth.tokens()).map((t) => t.id)).toEqual(["tok_a", "tok_b", "tok_c"]);
        expect((await auth.tokens("alice")).map((t) => t.id)).toEqual(["tok_b", "tok_c"]);
        expect(await auth.revoke("tok_b")).toBe(true);
        const revokedAt = (await auth.token("tok_b"))?.revoked_at;
        expect(revokedAt).toBeString();
        await Bun.sleep(5);
        expect(await auth.revoke("tok_b")).toBe(false);
        expect((await auth.token("tok_b"))?.revoked_at).toBe(revokedAt!);
        expect(await auth.revoke("tok_missing")).toBe(false);
        expect((await auth.token("tok_c"))?.revoked_at).toBeNull();
        await auth.touch("tok_c");
        expect(Date.parse((await auth.token("tok_c"))!.last_used_at!)).not.toBeNaN();
        expect((await auth.token("tok_a"))?.last_used_at).toBeNull();
      }),
    );

    test(
      "a snapshot's owner is kept apart from its box's; none is null",
      run(async ({ auth }) => {
        expect(await auth.owner("box_none")).toBeNull();
        expect(await auth.snapshotOwner("snap_1")).toBeNull();
        await auth.setSnapshotOwner("snap_1", "alice");
        await auth.setSnapshotOwner("snap_2", "bob");
        await auth.setSnapshotOwner("snap_1", "carol");
        expect(await auth.snapshotOwner("snap_1")).toBe("carol");
        expect(await auth.snapshotOwner("snap_2")).toBe("bob");
      }),
    );

    test(
      "a share has one mode per box and user, listed by user, and can be withdrawn once",
      run(async ({ auth }) => {
        await auth.share("box_1", "carol", "drive");
        await auth.share("box_1", "bob", "drive");
        await auth.share("box_1", "bob", "read");
        await auth.share("box_2", "bob", "drive");
        expect(await auth.shareMode("box_1", "bob")).toBe("read");
        expect(await auth.shareMode("box_1", "dave")).toBeNull();
        expect(await auth.shares("box_1")).toEqual([
          { box: "box_1", user: "bob", mode: "read" },
          { box: "box_1", user: "carol", mode: "drive" },
        ]);
        expect(await auth.unshare("box_1", "bob")).toBe(true);
        expect(await auth.unshare("box_1", "bob")).toBe(false);
        expect(await auth.shareMode("box_1", "bob")).toBeNull();
        expect(await auth.shareMode("box_2", "bob")).toBe("drive");
      }),
    );

    test(
      "users, tokens and shares outlive a reopen and are seen by another handle",
      run(async ({ auth }, more, reopen) => {
        await auth.addUser("alice");
        await auth.insertToken("tok_1", "alice", hash(1), ["read"], null);
        expect((await (await more()).store.auth.token("tok_1"))?.user).toBe("alice");
        await auth.revoke("tok_1");
        await auth.share("box_1", "alice", "read");
        await auth.setSnapshotOwner("snap_1", "alice");
        const again = (await reopen()).auth;
        expect(await again.hasUser("alice")).toBe(true);
        expect((await again.token("tok_1"))?.revoked_at).toBeString();
        expect(await again.shareMode("box_1", "alice")).toBe("read");
        expect(await again.snapshotOwner("snap_1")).toBe("alice");
      }),
    );
  });

  describe(`BrokerTables contract: ${name}`, () => {
    test(
      "a sealed secret is stored, replaced and removed; the list names it and never holds its value",
      run(async ({ broker }) => {
        await broker.setSecret("openai", new Uint8Array([1, 2, 3]));
        await broker.setSecret("anthropic", new Uint8Array([4, 5]));
        const first = (await broker.secrets()).find((s) => s.name === "openai")!;
        await Bun.sleep(5);
        await broker.setSecret("openai", new Uint8Array([9]));
        expect(new Uint8Array((await broker.sealed("openai"))!)).toEqual(new Uint8Array([9]));
        const list = await broker.secrets();
        expect(list.map((s) => s.name)).toEqual(["anthropic", "openai"]);
        expect(list.every((s) => Object.keys(s).sort().join() === "createdAt,name,updatedAt")).toBe(true);
        const replaced = list.find((s) => s.name === "openai")!;
        expect(replaced.createdAt).toBe(first.createdAt);
        expect(Date.parse(replaced.updatedAt)).toBeGreaterThan(Date.parse(first.updatedAt));
        expect(await broker.removeSecret("openai")).toBe(true);
        expect(await broker.removeSecret("openai")).toBe(false);
        expect(await broker.sealed("openai")).toBeUndefined();
      }),
    );

    test(
      "a box's policy is empty until saved, then replaced whole",
      run(async ({ broker }) => {
        expect(await broker.policy("box_1")).toEqual({ allow: [], bindings: [], stubs: {} });
        await broker.savePolicy("box_1", { allow: ["a.example"], bindings: ["anthropic"], stubs: { ANTHROPIC_API_KEY: "stub" } });
        await broker.savePolicy("box_2", { allow: ["b.example"], bindings: [], stubs: {} });
        await broker.savePolicy("box_1", { allow: [], bindings: ["openai"], stubs: {} });
        expect(await broker.policy("box_1")).toEqual({ allow: [], bindings: ["openai"], stubs: {} });
        expect(await broker.policy("box_2")).toEqual({ allow: ["b.example"], bindings: [], stubs: {} });
      }),
    );

    test(
      "a policy's unlisted rule and approval time are kept, and the defaults read as absent",
      run(async ({ broker }) => {
        await broker.savePolicy("box_1", { allow: [], bindings: [], stubs: {}, unlisted: "ask", approvalMs: 120_000 });
        expect(await broker.policy("box_1")).toEqual({ allow: [], bindings: [], stubs: {}, unlisted: "ask", approvalMs: 120_000 });
        await broker.savePolicy("box_1", { allow: [], bindings: [], stubs: {}, unlisted: "deny", approvalMs: null });
        expect(await broker.policy("box_1")).toEqual({ allow: [], bindings: [], stubs: {} });
      }),
    );

    test(
      "the egress log reads the latest decisions oldest first, by decision when asked",
      run(async ({ broker }) => {
        for (let i = 0; i < 6; i++) await broker.logEgress("box_1", record(i, i % 2 ? "denied" : "allowed"));
        await broker.logEgress("box_2", record(99));
        expect((await broker.egress("box_1", undefined, 3)).map((r) => r.bytesUp)).toEqual([3, 4, 5]);
        expect((await broker.egress("box_1", "denied", 10)).map((r) => r.bytesUp)).toEqual([1, 3, 5]);
        expect(await broker.egress("box_1", "injected", 10)).toEqual([]);
        expect(await broker.egress("box_2", undefined, 10)).toEqual([record(99)]);
      }),
    );

    test(
      "the egress log of a box is bounded: its latest EGRESS_KEPT are kept, and at most a tenth more",
      run(async ({ broker }) => {
        const n = EGRESS_KEPT + EGRESS_KEPT / 5;
        for (let i = 0; i < n; i++) await broker.logEgress("box_1", record(i));
        await broker.logEgress("box_2", record(0));
        const kept = await broker.egress("box_1", undefined, n);
        expect(kept.length).toBeGreaterThanOrEqual(EGRESS_KEPT);
        expect(kept.length).toBeLessThanOrEqual(EGRESS_KEPT + EGRESS_KEPT / 10);
        expect(kept.map((r) => r.bytesUp)).toEqual(Array.from({ length: kept.length }, (_, i) => n - kept.length + i));
        expect(await broker.egress("box_2", undefined, 10)).toHaveLength(1);
      }),
    );

    test(
      "secrets and policies outlive a reopen",
      run(async ({ broker }, _more, reopen) => {
        await broker.setSecret("anthropic", new Uint8Array([7, 7]));
        await broker.savePolicy("box_1", { allow: ["a.example"], bindings: [], stubs: {} });
        await broker.logEgress("box_1", record(1));
        const again = (await reopen()).broker;
        expect(new Uint8Array((await again.sealed("anthropic"))!)).toEqual(new Uint8Array([7, 7]));
        expect((await again.policy("box_1")).allow).toEqual(["a.example"]);
        expect(await again.egress("box_1", undefined, 10)).toEqual([record(1)]);
      }),
    );
  });

  describe(`ScheduleTable contract: ${name}`, () => {
    test(
      "a schedule is stored whole, listed by owner and box oldest first, changed by field and removed",
      run(async ({ schedules }) => {
        const a = schedule("sch_1", "box_1");
        await schedules.insertSchedule(a);
        await schedules.insertSchedule(schedule("sch_2", "box_2", { owner: "bob", cron: null, at: 5000, next_at: 5000 }));
        expect(await schedules.schedule("sch_1")).toEqual(a);
        expect(await schedules.schedule("sch_missing")).toBeNull();
        await fails(() => schedules.insertSchedule(schedule("sch_1", "box_3")));
        expect((await schedules.schedules()).map((r) => r.id)).toEqual(["sch_1", "sch_2"]);
        expect((await schedules.schedules({ owner: "bob" })).map((r) => r.id)).toEqual(["sch_2"]);
        expect((await schedules.schedules({ boxId: "box_1", owner: "bob" })).map((r) => r.id)).toEqual([]);
        expect(await schedules.updateSchedule("sch_1", { state: "paused", next_at: null, runs: 3 })).toBe(true);
        expect(await schedules.schedule("sch_1")).toEqual({ ...a, state: "paused", next_at: null, runs: 3 });
        expect(await schedules.updateSchedule("sch_missing", { runs: 1 })).toBe(false);
        expect(await schedules.removeSchedule("sch_1")).toBe(true);
        expect(await schedules.removeSchedule("sch_1")).toBe(false);
      }),
    );

    test(
      "due: active ones at or before now, soonest first; a claim moves the next run only from the time it was read, on any handle",
      run(async ({ schedules }, more) => {
        await schedules.insertSchedule(schedule("sch_1", "box_1", { next_at: 3000 }));
        await schedules.insertSchedule(schedule("sch_2", "box_1", { next_at: 2000 }));
        await schedules.insertSchedule(schedule("sch_3", "box_1", { next_at: 1000, state: "paused" }));
        await schedules.insertSchedule(schedule("sch_4", "box_1", { next_at: 9000 }));
        expect((await schedules.dueSchedules(3000)).map((r) => r.id)).toEqual(["sch_2", "sch_1"]);
        const other = (await more()).store.schedules;
        expect(await schedules.claimRun("sch_2", 2000, 62_000, { skipped: 1 })).toBe(true);
        expect(await other.claimRun("sch_2", 2000, 62_000, { skipped: 5 })).toBe(false);
        expect(await other.schedule("sch_2")).toMatchObject({ next_at: 62_000, skipped: 1 });
        // A one-off's claim ends it; a paused one is never claimed.
        expect(await other.claimRun("sch_1", 3000, null, { state: "done" })).toBe(true);
        expect(await schedules.schedule("sch_1")).toMatchObject({ next_at: null, state: "done" });
        expect(await schedules.claimRun("sch_3", 1000, 2000, {})).toBe(false);
        expect(await schedules.dueSchedules(3000)).toEqual([]);
      }),
    );

    test(
      "two handles claiming the same due run at once: exactly one wins, and its change is the one stored",
      run(async ({ schedules: a }, more) => {
        const b = (await more()).store.schedules;
        for (let round = 0; round < 5; round++) {
          const id = `sch_${round}`;
          await a.insertSchedule(schedule(id, "box_1", { next_at: 1000 }));
          const won = await Promise.all([
            a.claimRun(id, 1000, 61_000, { runs: 1, skipped: 1 }),
            b.claimRun(id, 1000, 61_000, { runs: 1, skipped: 2 }),
          ]);
          expect(won.filter(Boolean)).toHaveLength(1);
          expect(await b.schedule(id)).toMatchObject({ next_at: 61_000, runs: 1, skipped: won[0] ? 1 : 2 });
        }
      }),
    );

    test(
      "deleting a box deletes its schedules with it, and schedules outlive a reopen",
      run(async ({ boxes, schedules }, _more, reopen) => {
        const { box } = await boxes.insertBox("web", "process", "stopped", null);
        await schedules.insertSchedule(schedule("sch_1", box.id));
        await schedules.insertSchedule(schedule("sch_2", "box_other"));
        expect(await boxes.countRows(box.id)).toBeGreaterThan(1);
        await boxes.deleteBox(box.id);
        expect(await boxes.countRows(box.id)).toBe(0);
        expect(await schedules.schedule("sch_1")).toBeNull();
        const again = (await reopen()).schedules;
        expect((await again.schedules()).map((r) => r.id)).toEqual(["sch_2"]);
      }),
    );
  });
}
