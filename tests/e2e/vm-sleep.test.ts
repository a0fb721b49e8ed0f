// test: vm
// VM boxes that sleep to zero and wake with their programs running: one VM
// under tcg, put to sleep and woken again and again (host/src/engine/qemu/README.md).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { installTestImage, makeHome, onTerminal, waitFor, type Home } from "../helpers.ts";

let h: Home;
let boxId: string;

/** QEMU processes running for a box (its id is on their command line). */
function qemuFor(id: string): number[] {
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(`process=hutch-${id}`);
      } catch {
        return false;
      }
    })
    .map(Number);
}

interface BoxJson {
  id: string;
  state: string;
  sleep?: { keeps: string; bytes: number };
}

async function info(name: string): Promise<BoxJson> {
  const r = await h.run(["box", "info", name, "--json"]);
  return JSON.parse(r.stdout) as BoxJson;
}

async function sh(cmd: string): Promise<string> {
  const r = await h.run(["exec", "s", "--", "sh", "-c", cmd]);
  if (r.code !== 0) throw new Error(`exec ${cmd}: ${r.code} ${r.stderr}`);
  return r.stdout.trim();
}

/** The counter file's last value. */
async function counter(): Promise<number> {
  return Number((await sh("tail -n1 /workspace/c")) || -1);
}

beforeAll(async () => {
  h = makeHome("hutch-vmsleep-");
  Object.assign(h.env, { HUTCH_QEMU_ACCEL: "tcg" });
  await installTestImage(h);
  expect((await h.run(["box", "create", "s", "--engine", "qemu", "--memory", "768M", "--start"])).code).toBe(0);
  boxId = (await info("s")).id;
}, 900_000);
afterAll(() => h.cleanup(), 120_000);

describe("a VM box asleep", () => {
  test("sleeps to no process and wakes with its loop (same pid, counter going on) and its terminal's screen, ten times", async () => {
    await sh("i=0; while :; do echo $i >> /workspace/c; i=$((i+1)); sleep 0.2; done > /dev/null 2>&1 & echo $! > /workspace/loop.pid");
    const loopPid = await sh("cat /workspace/loop.pid");
    const r = await h.run(["run", "s", "--detach"]);
    expect(r.code).toBe(0);
    const sid = r.stdout.trim();
    expect((await h.run(["session", "driver", "acquire", sid])).code).toBe(0);
    expect((await h.run(["session", "send", sid, "echo screen-$((6*7))"])).code).toBe(0);
    await waitFor("the shell's output", async () => (await h.run(["session", "log", sid])).stdout.includes("screen-42"), 60_000);
    expect((await h.run(["session", "driver", "release", sid])).code).toBe(0);
    const attached = onTerminal(h, ["session", "attach", sid]);
    await attached.until("screen-42", 60_000);

    for (let cycle = 1; cycle <= 10; cycle++) {
      const before = await counter();
      const s = await h.run(["box", "sleep", "s", "--json"]);
      expect(s.code, s.stderr).toBe(0);
      expect((JSON.parse(s.stdout) as BoxJson).state).toBe("asleep");
      expect(qemuFor(boxId)).toEqual([]);
      const asleep = await info("s");
      expect(asleep.state).toBe("asleep");
      expect(asleep.sleep?.keeps).toBe("memory");
      expect(asleep.sleep!.bytes).toBeGreaterThan(0);
      if (cycle === 1) {
        // The attached terminal lost its box: it ends, and attaching again shows the same screen.
        await attached.proc.exited;
      }
      const w = await h.run(["box", "wake", "s"]);
      expect(w.code, w.stderr).toBe(0);
      expect(w.stderr).toContain("waking s");
      expect(qemuFor(boxId).length).toBe(1);
      expect(await sh("cat /workspace/loop.pid")).toBe(loopPid);
      expect(await sh(`kill -0 ${loopPid} && echo alive`)).toBe("alive");
      const after = await waitFor("the counter to go on", async () => {
        const n = await counter();
        return n > before ? n : null;
      });
      // Going on, not started again: every value once, in order, from 0.
      const all = (await sh("cat /workspace/c")).split("\n").map(Number);
      expect(all).toEqual(all.map((_, i) => i));
      expect(after).toBeGreaterThan(before);
    }
    const again = onTerminal(h, ["session", "attach", sid]);
    await again.until("screen-42", 60_000);
    again.type("echo back-$((1+1))\n");
    await again.until("back-2", 60_000);
    again.type("\x01d");
    expect(await again.proc.exited).toBe(0);
    // The guest's clock follows the host's after the wakes.
    const guestNow = Number(await sh("date +%s"));
    expect(Math.abs(guestNow - Date.now() / 1000)).toBeLessThan(5);
  }, 900_000);
});
