// The idle tracker on an injected clock: when a box with --sleep-after or
// --max-awake is put to sleep, and that an attached client means never.
import { expect, test } from "bun:test";
import { type AutoSleep, IdleTracker, parseAutoSleep } from "../src/box/idle.ts";

function rig(limits: AutoSleep | null, fail = false) {
  let now = 1_000_000;
  const slept: { box: string; why: string; at: number }[] = [];
  const tries: number[] = [];
  const t = new IdleTracker({
    now: () => now,
    settings: () => limits,
    sleep: async (box, why) => {
      tries.push(now);
      if (fail) throw new Error("cannot");
      slept.push({ box, why, at: now });
      t.gone(box);
    },
  });
  const at = async (s: number) => {
    now = 1_000_000 + s * 1000;
    await t.check();
  };
  return { t, slept, at, tries };
}

const S = (s: number) => s * 1000;

test("--sleep-after: an awake box with nothing holding it sleeps once it has been quiet that long, and says why", async () => {
  const { t, slept, at } = rig({ sleepAfterMs: S(5), maxAwakeMs: null });
  t.awake("b");
  await at(4);
  expect(slept).toEqual([]);
  await at(5);
  expect(slept).toEqual([{ box: "b", why: "idle for 5s (--sleep-after 5s)", at: 1_005_000 }]);
  await at(20);
  expect(slept).toHaveLength(1);
});

test("an exec, a turn or a forwarded connection keeps it awake; the quiet time counts from the last one's end", async () => {
  const { t, slept, at } = rig({ sleepAfterMs: S(5), maxAwakeMs: null });
  t.awake("b");
  const exec = t.hold("b", "exec");
  const turn = t.hold("b", "turn");
  await at(30);
  expect(slept).toEqual([]);
  exec();
  exec(); // a second release changes nothing
  await at(40);
  expect(t.holds("b")).toMatchObject({ exec: 0, turn: 1 });
  expect(slept).toEqual([]);
  turn();
  await at(44);
  expect(slept).toEqual([]);
  await at(45);
  expect(slept.map((s) => s.at)).toEqual([1_045_000]);
});

test("never while a client is attached: not for --sleep-after, not for --max-awake", async () => {
  const idle = rig({ sleepAfterMs: S(5), maxAwakeMs: null });
  idle.t.awake("b");
  const client = idle.t.hold("b", "client");
  await idle.at(3600);
  expect(idle.slept).toEqual([]);
  client();
  await idle.at(3604);
  expect(idle.slept).toEqual([]);
  await idle.at(3605);
  expect(idle.slept).toHaveLength(1);

  const capped = rig({ sleepAfterMs: null, maxAwakeMs: S(10) });
  capped.t.awake("b");
  const watcher = capped.t.hold("b", "client");
  await capped.at(3600);
  expect(capped.slept).toEqual([]);
  watcher();
  await capped.at(3601);
  expect(capped.slept[0]!.why).toBe("awake for 3601s (--max-awake 10s)");
});

test("--max-awake: a busy box sleeps once it has been awake that long", async () => {
  const { t, slept, at } = rig({ sleepAfterMs: null, maxAwakeMs: S(60) });
  t.awake("b");
  t.hold("b", "turn");
  await at(59);
  expect(slept).toEqual([]);
  await at(60);
  expect(slept[0]!.why).toBe("awake for 60s (--max-awake 60s)");
});

test("a box without limits never sleeps; one that cannot sleep now is tried again only after a fresh quiet spell", async () => {
  const none = rig(null);
  none.t.awake("b");
  await none.at(86_400);
  expect(none.slept).toEqual([]);

  const failing = rig({ sleepAfterMs: S(5), maxAwakeMs: null }, true);
  failing.t.awake("b");
  await failing.at(5);
  await failing.at(9);
  expect(failing.tries).toEqual([1_005_000]);
  await failing.at(10);
  expect(failing.tries).toEqual([1_005_000, 1_010_000]);
});

test("a hold taken while the box wakes is kept when it is awake; a stopped box is forgotten", async () => {
  const { t, slept, at } = rig({ sleepAfterMs: S(5), maxAwakeMs: null });
  const exec = t.hold("b", "exec");
  t.awake("b");
  await at(30);
  expect(slept).toEqual([]);
  exec();
  await at(35);
  expect(slept).toHaveLength(1);
  t.awake("c");
  t.gone("c");
  await at(100);
  expect(slept.map((s) => s.box)).toEqual(["b"]);
});

test("--sleep-after and --max-awake take a duration or off, and refuse anything else naming the flag", () => {
  expect(parseAutoSleep("--sleep-after", "5s")).toBe(5000);
  expect(parseAutoSleep("--sleep-after", "1h30m")).toBe(5_400_000);
  expect(parseAutoSleep("--max-awake", "off")).toBeNull();
  expect(parseAutoSleep("--max-awake", "0")).toBeNull();
  expect(() => parseAutoSleep("--sleep-after", "soon")).toThrow('--sleep-after "soon": expected a duration from 1s to 30d');
  expect(() => parseAutoSleep("--max-awake", "500ms")).toThrow("--max-awake");
});
