// The reconciler as a table: every stored state × every desired state, on a
// scripted engine (no sandbox, no VM), each also with the daemon "crashing"
// between phases: the engine call at that phase does its work and then never
// returns, the service is abandoned there, and a new one over the same
// database must drive the box where it was asked to go, exactly once.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BoxState, DesiredState, Mux } from "@hutch/shared";
import { openDb } from "../src/store/db.ts";
import { BoxStore } from "../src/store/boxes.ts";
import type { OpKind } from "../src/store/types.ts";
import { BoxService } from "../src/box/service.ts";
import type { BoxHandle, Engine, Observed } from "../src/engine/types.ts";
import type { Channel } from "../src/engine/channel.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-reconcile-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Phase = "create" | "start" | "connect" | "stop" | "kill" | "destroy" | "pause" | "resume";

/** A machine that is running, paused or off, with a log of the calls made on it. */
class ScriptedEngine implements Engine {
  readonly name = "process" as const;
  readonly capabilities = {
    isolation: "namespace" as const,
    pause: true,
    memorySnapshot: false,
    screenshot: false,
    agentsAtBoot: false,
    sleep: null,
  };
  running = false;
  paused = false;
  exists = false;
  calls: string[] = [];
  /** The call that does its work and then hangs: the daemon dies right there. */
  crashAt?: Phase;

  private step(phase: Phase, work: () => void): Promise<void> {
    this.calls.push(phase);
    work();
    if (this.crashAt === phase) {
      this.crashAt = undefined;
      return new Promise(() => {});
    }
    return Promise.resolve();
  }

  async probe() {
    return { ok: true, engine: "process" as const, detail: "scripted" };
  }
  create(_b: BoxHandle) {
    return this.step("create", () => (this.exists = true));
  }
  async start(_b: BoxHandle): Promise<undefined> {
    await this.step("start", () => {
      this.exists = true;
      this.running = true;
      this.paused = false;
    });
  }
  async stop(_b: BoxHandle, _t: number, requestShutdown: () => void) {
    requestShutdown();
    await this.step("stop", () => {
      this.running = false;
      this.paused = false;
    });
    return { forced: false };
  }
  kill(_b: BoxHandle) {
    return this.step("kill", () => {
      this.running = false;
      this.paused = false;
    });
  }
  pause(_b: BoxHandle) {
    return this.step("pause", () => (this.paused = true));
  }
  resume(_b: BoxHandle) {
    return this.step("resume", () => (this.paused = false));
  }
  async inspect(): Promise<Observed> {
    return { running: this.running, ...(this.paused ? { paused: true } : {}) };
  }
  channel(b: BoxHandle) {
    return { kind: "unix" as const, path: join(b.dir, "agent.sock") };
  }
  destroy(_b: BoxHandle) {
    return this.step("destroy", () => (this.exists = false));
  }
  async leftovers() {
    return this.exists || this.running ? ["the scripted box"] : [];
  }
  async consoleTail() {
    return "(scripted)";
  }
  async helloTimeoutMs() {
    return 1000;
  }
}

/** The guest side of a channel: says hello at once, unless the box is not running (or the daemon "crashes" here). */
function opener(engine: ScriptedEngine) {
  return async (): Promise<Channel> => {
    engine.calls.push("connect");
    if (engine.crashAt === "connect") {
      engine.crashAt = undefined;
      return new Promise(() => {});
    }
    if (!engine.running || engine.paused) throw new Error("the box stopped before its guest answered");
    let alive = true;
    return {
      mux: {
        get alive() {
          return alive;
        },
        control() {},
      } as unknown as Mux,
      hello: { protocol: 1, agent: "scripted", version: "0.0.0", capabilities: [] } as unknown as Channel["hello"],
      close: () => {
        alive = false;
      },
    };
  };
}

const STATES: BoxState[] = ["creating", "stopped", "starting", "running", "paused", "stopping", "failed"];
const DESIRED: DesiredState[] = ["stopped", "running", "paused", "deleted"];
const OP: Record<DesiredState, OpKind> = { stopped: "stop", running: "start", paused: "pause", asleep: "sleep", deleted: "delete" };

/** What the engine really does in each stored state (a "starting" box may or may not have come up). */
function observedFor(state: BoxState): { running: boolean; paused: boolean }[] {
  if (state === "running") return [{ running: true, paused: false }];
  if (state === "paused") return [{ running: true, paused: true }];
  if (state === "starting" || state === "stopping" || state === "failed")
    return [
      { running: false, paused: false },
      { running: true, paused: false },
    ];
  return [{ running: false, paused: false }];
}

/** Phases the drive toward `desired` can pass through, where a crash can land. */
function crashPoints(state: BoxState, desired: DesiredState, from: { running: boolean; paused: boolean }): (Phase | undefined)[] {
  if (state === "creating" && desired === "running") return [undefined, "create", "start", "connect"];
  if (state === "creating" && desired === "stopped") return [undefined, "create"];
  if (desired === "running")
    return from.running ? (from.paused ? [undefined, "resume"] : [undefined, "connect"]) : [undefined, "start", "connect"];
  if (desired === "stopped") return from.running ? [undefined, "stop"] : [undefined];
  if (desired === "paused") return from.running && !from.paused ? [undefined, "pause"] : [undefined];
  return from.running ? [undefined, "stop", "kill", "destroy"] : [undefined, "kill", "destroy"];
}

let n = 0;
function setup(state: BoxState, desired: DesiredState, seen: { running: boolean; paused: boolean }) {
  const db = openDb(join(dir, `r${n++}.db`));
  const store = new BoxStore(db);
  const engine = new ScriptedEngine();
  Object.assign(engine, seen, { exists: state !== "creating" });
  const { box } = store.insertBox(`b${n}`, "process", "stopped", null);
  store.settleOps(box.id, null);
  if (state !== "creating") store.setState(box.id, state);
  store.request(box.id, OP[desired], desired, null);
  const service = () => new BoxService(store, { process: engine }, dir, opener(engine));
  return { db, store, engine, id: box.id, service };
}

/** Where the box must end up for a desired state, given where it started. */
function expectConverged(s: ReturnType<typeof setup>, desired: DesiredState, from: { running: boolean }) {
  const row = s.store.byId(s.id);
  if (desired === "deleted") {
    expect(row).toBeNull();
    expect(s.engine.exists).toBe(false);
    expect(s.engine.running).toBe(false);
    return;
  }
  expect(s.store.pendingOps(s.id)).toEqual([]);
  if (desired === "running") {
    expect(row!.state).toBe("running");
    expect(s.engine.running && !s.engine.paused).toBe(true);
  } else if (desired === "stopped") {
    expect(row!.state).toBe("stopped");
    expect(s.engine.running).toBe(false);
  } else if (from.running) {
    expect(row!.state).toBe("paused");
    expect(s.engine.paused).toBe(true);
  } else {
    // Pausing a box that is not running is refused: it fails, saying so.
    expect(row!.state).toBe("failed");
    expect(row!.reason).toContain("not running");
  }
}

const cells = STATES.flatMap((state) =>
  DESIRED.flatMap((desired) =>
    observedFor(state).flatMap((seen) => crashPoints(state, desired, seen).map((crash) => ({ state, desired, seen, crash }))),
  ),
);

describe("the reconciler, every state × every desired state", () => {
  test.each(
    cells.map(
      (c) =>
        [
          `${c.state} → ${c.desired} (engine ${c.seen.running ? (c.seen.paused ? "paused" : "running") : "off"})${c.crash ? `, daemon dies during ${c.crash}` : ""}`,
          c,
        ] as const,
    ),
  )("%s", async (_name, c) => {
    const s = setup(c.state, c.desired, c.seen);
    try {
      if (c.crash) {
        s.engine.crashAt = c.crash;
        const first = s.service();
        void first.reconcile(s.id);
        // The first daemon is now stuck inside the crash point: wait until it got there, then leave it.
        for (let i = 0; i < 200 && s.engine.crashAt !== undefined; i++) await Bun.sleep(1);
        expect(s.engine.crashAt).toBeUndefined();
        // Abandoned, not closed: a dead daemon finishes nothing.
      }
      const second = s.service();
      await second.recover();
      expectConverged(s, c.desired, c.seen);
      // Once there, another pass changes nothing: the reconciler is level-triggered and idempotent.
      const calls = s.engine.calls.length;
      if (c.desired !== "deleted") {
        await second.reconcile(s.id);
        expect(s.engine.calls.slice(calls)).toEqual([]);
      }
      await second.close();
    } finally {
      s.db.close();
    }
  });

  test("a failed box with nothing asked of it stays failed: the reconciler never restart-loops", async () => {
    const s = setup("stopped", "running", { running: false, paused: false });
    s.store.settleOps(s.id, null);
    s.store.setState(s.id, "failed", "it crashed");
    await s.service().recover();
    expect(s.store.byId(s.id)!.state).toBe("failed");
    expect(s.engine.calls).toEqual([]);
    s.db.close();
  });
});
