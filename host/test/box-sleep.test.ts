// BoxService.sleep/wake on a scripted engine (no VM): the state a sleep
// leaves, the events the sessions hear, one wake for many callers, a cold
// wake said out loud, and a failed sleep that leaves the box running.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Mux, TypedEvent } from "@hutch/shared";
import { openDb } from "../src/store/db.ts";
import { BoxStore } from "../src/store/boxes.ts";
import { BoxService } from "../src/box/service.ts";
import type { BoxHandle, Engine, Observed, SleepState } from "../src/engine/types.ts";
import type { Channel } from "../src/engine/channel.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-boxsleep-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

class SleepyEngine implements Engine {
  readonly name = "qemu" as const;
  readonly capabilities = {
    isolation: "vm" as const,
    pause: false,
    memorySnapshot: false,
    screenshot: false,
    agentsAtBoot: true,
    sleep: "memory" as const,
  };
  running = false;
  state: SleepState | null = null;
  wakes = 0;
  cold: string | null = null;
  failSleep = false;
  dieInSleep = false;
  async probe() {
    return { ok: true, engine: "qemu" as const, detail: "scripted" };
  }
  async create() {}
  async start(): Promise<undefined> {
    this.running = true;
  }
  async stop() {
    this.running = false;
    return { forced: false };
  }
  async kill() {
    this.running = false;
  }
  async sleep(): Promise<SleepState> {
    if (this.dieInSleep) {
      this.running = false;
      throw new Error("QEMU exited during the save");
    }
    if (this.failSleep) throw new Error("the disk is full");
    this.running = false;
    this.state = { keeps: "memory", bytes: 4096 };
    return this.state;
  }
  async wake() {
    this.wakes++;
    // No state to restore (the box died while it was saved): a cold boot, as the QEMU engine does.
    if (!this.state) this.cold ??= "the sleeping state is missing";
    // Slow enough that callers overlap.
    await Bun.sleep(50);
    this.state = null;
    this.running = true;
    return { cold: this.cold };
  }
  sleeping() {
    return this.state;
  }
  async inspect(): Promise<Observed> {
    return { running: this.running };
  }
  channel(b: BoxHandle) {
    return { kind: "unix" as const, path: join(b.dir, "agent.sock") };
  }
  async destroy() {}
  async leftovers() {
    return [];
  }
  async consoleTail() {
    return "";
  }
  async helloTimeoutMs() {
    return 1000;
  }
}

let n = 0;
async function running() {
  const store = new BoxStore(openDb(join(dir, `s${n++}.db`)));
  const engine = new SleepyEngine();
  const open = async (): Promise<Channel> => {
    if (!engine.running) throw new Error("not running");
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
  const boxes = new BoxService(store, { qemu: engine }, dir, open);
  const events: TypedEvent[] = [];
  boxes.events.add((_id, e) => void events.push(e));
  const box = await boxes.create({ name: `b${n}`, engine: "qemu", start: true }, null);
  return { boxes, engine, events, box };
}

test("a sleep leaves the box asleep with its state's size, and says who asked; a wake brings it back running", async () => {
  const { boxes, events, box } = await running();
  const slept = await boxes.sleep(box.id, { kind: "user", id: "alice" });
  expect(slept.state).toBe("asleep");
  expect(slept.sleep).toEqual({ keeps: "memory", bytes: 4096 });
  expect(events.map((e) => e.kind)).toEqual(["box.slept"]);
  expect(events[0]!.data).toMatchObject({ box: box.id, keeps: "memory", programsStopped: false, bytes: 4096, by: { id: "alice" } });
  expect(() => boxes.channel(box.id)).toThrow(/is asleep/);
  expect((await boxes.sleep(box.id)).state).toBe("asleep");
  const woke = await boxes.wake(box.id);
  expect(woke.state).toBe("running");
  expect(events.map((e) => e.kind)).toEqual(["box.slept", "box.woke"]);
  expect(events[1]!.data).toMatchObject({ programsKept: true });
});

test("callers that need an asleep box at once share one wake", async () => {
  const { boxes, engine, events, box } = await running();
  await boxes.sleep(box.id);
  const got = await Promise.all([boxes.awake(box.id), boxes.awake(box.id), boxes.wake(box.id), boxes.ensureRunning(box.id)]);
  expect(engine.wakes).toBe(1);
  expect(got.map((g) => ("box" in g ? g.box.state : g.state))).toEqual(["running", "running", "running", "running"]);
  expect(events.filter((e) => e.kind === "box.woke").length).toBe(1);
  expect((await boxes.wake(box.id)).state).toBe("running");
  expect(engine.wakes).toBe(1);
});

test("a wake that had to boot afresh says so", async () => {
  const { boxes, engine, events, box } = await running();
  await boxes.sleep(box.id);
  engine.cold = "the sleeping state is torn (3 bytes)";
  expect((await boxes.wake(box.id)).state).toBe("running");
  expect(events.map((e) => e.kind)).toEqual(["box.slept", "box.woke.cold", "box.woke"]);
  expect(events[1]!.data).toEqual({ box: box.id, reason: "the sleeping state is torn (3 bytes)" });
  expect(events[2]!.data).toMatchObject({ programsKept: false });
});

test("a sleep that cannot save leaves the box running, not failed", async () => {
  const { boxes, engine, box } = await running();
  engine.failSleep = true;
  await expect(boxes.sleep(box.id)).rejects.toThrow(/runs on: the disk is full/);
  const after = boxes.get(box.id);
  expect(after.state).toBe("running");
  expect(after.desired).toBe("running");
  expect(engine.running).toBe(true);
});

test("a box that dies while it is saved (QEMU killed mid-sleep) is asleep, not failed, with its programs lost; its wake boots afresh and says so", async () => {
  const { boxes, engine, events, box } = await running();
  engine.dieInSleep = true;
  const slept = await boxes.sleep(box.id);
  expect(slept.state).toBe("asleep");
  expect(events.map((e) => e.kind)).toEqual(["box.slept"]);
  expect(events[0]!.data).toMatchObject({ programsStopped: true, bytes: 0 });
  expect((await boxes.wake(box.id)).state).toBe("running");
  expect(events.map((e) => e.kind)).toEqual(["box.slept", "box.woke.cold", "box.woke"]);
  expect(events[2]!.data).toMatchObject({ programsKept: false });
});

test("a box that is not running cannot sleep, and one not asleep cannot be woken", async () => {
  const { boxes, box } = await running();
  await boxes.stop(box.id, null);
  await expect(boxes.sleep(box.id)).rejects.toThrow(/only a running box sleeps/);
  expect(() => boxes.wake(box.id)).toThrow(/not asleep/);
});
