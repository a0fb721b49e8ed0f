// test: vm
// VM boxes that sleep to zero and wake with their programs running: one VM
// under tcg, put to sleep and woken again and again (host/src/engine/qemu/README.md).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { installTestImage, makeHome, onTerminal, pidAlive, qemuFor, waitFor, type Home } from "../helpers.ts";

let h: Home;
let boxId: string;

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
  test("sleeps to no process and wakes with its loop (same pid, counter going on) and its attached terminal, ten times", async () => {
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
    // The terminal attached before the first sleep is still attached: the connection was held across each one.
    attached.type("echo back-$((1+1))\n");
    await attached.until("back-2", 60_000);
    attached.type("\x01d");
    expect(await attached.proc.exited).toBe(0);
    // And attaching again shows the same screen.
    const again = onTerminal(h, ["session", "attach", sid]);
    await again.until("back-2", 60_000);
    again.type("\x01d");
    expect(await again.proc.exited).toBe(0);
    // The guest's clock follows the host's after the wakes.
    const guestNow = Number(await sh("date +%s"));
    expect(Math.abs(guestNow - Date.now() / 1000)).toBeLessThan(5);
  }, 900_000);
});

function daemonLog(): string {
  return readFileSync(join(h.home, "daemon.log"), "utf8");
}

describe("waking on demand, and crashes", () => {
  test("two concurrent execs on a sleeping box cause one wake, each with its own exit code and bytes", async () => {
    expect((await h.run(["box", "sleep", "s"])).code).toBe(0);
    const woke = (daemonLog().match(/box woke/g) ?? []).length;
    const [a, b] = await Promise.all([
      h.run(["exec", "s", "--", "sh", "-c", "echo one; exit 3"]),
      h.run(["exec", "s", "--", "sh", "-c", "echo two; exit 5"]),
    ]);
    expect([a.code, a.stdout]).toEqual([3, "one\n"]);
    expect([b.code, b.stdout]).toEqual([5, "two\n"]);
    expect(a.stderr + b.stderr).toContain("waking s");
    expect((daemonLog().match(/box woke/g) ?? []).length).toBe(woke + 1);
    expect((await info("s")).state).toBe("running");
  }, 300_000);

  test("an exec running when the box sleeps carries on after the wake, to its own output and exit code", async () => {
    await sh("rm -f /workspace/started");
    const running = h.run(["exec", "s", "--", "sh", "-c", "echo before; touch /workspace/started; sleep 6; echo after-$((2+3)); exit 7"]);
    await waitFor(
      "the exec to start",
      async () => ((await sh("test -e /workspace/started && echo yes || true")) === "yes" ? true : null),
      120_000,
    );
    const s = await h.run(["box", "sleep", "s"]);
    expect(s.code, s.stderr).toBe(0);
    expect(qemuFor(boxId)).toEqual([]);
    expect((await h.run(["box", "wake", "s"])).code).toBe(0);
    const r = await running;
    expect([r.code, r.stdout]).toEqual([7, "before\nafter-5\n"]);
    expect(daemonLog()).toMatch(/box woke .*streamsKept"?[:=]true/);
  }, 300_000);

  test("the sleeping state holds what is in the guest's memory (a marker) and never the real secret, only its stub", async () => {
    const real = `sk-ant-real-${crypto.randomUUID()}`;
    expect((await h.run(["secret", "set", "anthropic"], { stdin: real })).code).toBe(0);
    expect((await h.run(["box", "policy", "s", "--secret", "anthropic"])).code).toBe(0);
    const marker = `marker-${crypto.randomUUID()}`;
    // In a tmpfs: RAM, not the disk.
    await sh(`printf %s ${marker} > /dev/shm/marker`);
    // A request through the broker, so the real secret has been in use while the box ran.
    await h.run(["exec", "s", "--", "sh", "-c", 'curl -s -m 5 -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models" || true']);
    expect((await h.run(["box", "sleep", "s"])).code).toBe(0);
    const state = readFileSync(join(h.home, "boxes", boxId, "sleep.state"));
    expect(state.includes(Buffer.from(marker))).toBe(true);
    expect(state.includes(Buffer.from(real))).toBe(false);
    expect((await h.run(["box", "wake", "s"])).code).toBe(0);
  }, 300_000);

  test("SIGKILL of the daemon mid-sleep and mid-wake (each shown to have landed mid-operation): the box ends asleep or running, its programs kept", async () => {
    const dir = join(h.home, "boxes", boxId);
    const tmp = join(dir, "sleep.state.tmp");
    const state = join(dir, "sleep.state");
    const settled = (want: string) =>
      waitFor(
        `the box to settle ${want} after the daemon came back`,
        async () => {
          const st = (await info("s")).state;
          if (st === "failed") throw new Error("the box failed");
          return st === want ? st : null;
        },
        120_000,
      );
    // Touched memory makes the save long enough (~1.5 s a GiB) to be caught in the middle.
    await sh("head -c 300M /dev/zero | tr '\\0' x > /dev/shm/fill");
    await sh(
      "rm -f /workspace/c2; (i=0; while :; do echo $i >> /workspace/c2; i=$((i+1)); sleep 0.2; done) > /dev/null 2>&1 & echo $! > /workspace/loop2.pid",
    );
    const loopPid = await sh("cat /workspace/loop2.pid");
    const stillCounting = async () => {
      expect(await sh(`kill -0 ${loopPid} && echo alive`)).toBe("alive");
      const all = (await sh("cat /workspace/c2")).split("\n").map(Number);
      expect(all).toEqual(all.map((_, i) => i));
    };

    let landedSleep = 0;
    let landedWake = 0;
    for (let attempt = 0; attempt < 5 && (landedSleep === 0 || landedWake === 0); attempt++) {
      if (landedSleep === 0) {
        const sleeping = h.spawn(["box", "sleep", "s"]);
        const pid = h.daemonPid()!;
        await waitFor("the save to be under way", () => existsSync(tmp) && statSync(tmp).size > 0, 60_000).catch(() => null);
        process.kill(pid, "SIGKILL");
        // Looked at before any next daemon: a save cut short has its temporary file and no state yet.
        if (existsSync(tmp) && !existsSync(state)) landedSleep++;
        await waitFor("the daemon to die", () => !pidAlive(pid));
        // The CLI retries its keyed request on a next daemon it starts, which finishes the job: asleep, no QEMU left.
        expect(await sleeping.exited).toBe(0);
        await settled("asleep");
        expect(qemuFor(boxId)).toEqual([]);
        expect(existsSync(state)).toBe(true);
      } else {
        expect((await h.run(["box", "sleep", "s"])).code).toBe(0);
      }
      const waking = h.spawn(["box", "wake", "s"]);
      const pid = h.daemonPid()!;
      await waitFor("the restore to be under way", () => qemuFor(boxId).length > 0, 60_000);
      process.kill(pid, "SIGKILL");
      // QEMU started and the state not yet let go of: the kill landed before the wake's end.
      if (qemuFor(boxId).length > 0 && existsSync(state)) landedWake++;
      await waitFor("the daemon to die", () => !pidAlive(pid));
      expect(await waking.exited).toBe(0);
      await settled("running");
      expect(qemuFor(boxId).length).toBe(1);
      await stillCounting();
    }
    expect(landedSleep, "no kill landed mid-sleep in 5 tries").toBeGreaterThan(0);
    expect(landedWake, "no kill landed mid-wake in 5 tries").toBeGreaterThan(0);
    expect(daemonLog()).not.toContain("box woke cold");
    await sh(`kill ${loopPid}; rm -f /dev/shm/fill`);
  }, 600_000);

  test("a torn sleeping state gives a cold boot with the disk intact, and an event saying so", async () => {
    await sh("echo kept > /workspace/on-disk; sync");
    expect((await h.run(["box", "sleep", "s"])).code).toBe(0);
    const file = join(h.home, "boxes", boxId, "sleep.state");
    truncateSync(file, Math.floor(statSync(file).size / 2));
    const w = await h.run(["box", "wake", "s"]);
    expect(w.code, w.stderr).toBe(0);
    expect((await info("s")).state).toBe("running");
    expect(await sh("cat /workspace/on-disk")).toBe("kept");
    expect(daemonLog()).toContain("box woke cold");
    const sessions = JSON.parse((await h.run(["session", "list", "--json"])).stdout) as { id: string }[];
    const events = await h.run(["session", "log", sessions[0]!.id, "--json"]);
    expect(events.stdout).toContain('"box.woke.cold"');
  }, 300_000);
});
