// A process box that sleeps by itself: with --sleep-after 5s it sleeps once
// nothing holds it, never while a terminal is attached, and an exec on the
// sleeping box wakes it and gets the right bytes and exit code back.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Box } from "../../shared/src/index.ts";
import { makeHome, onTerminal, waitFor, type Home } from "../helpers.ts";

let h: Home;

beforeAll(async () => {
  h = makeHome("hutch-idle-");
  const r = await h.run(["box", "create", "zz", "--start", "--sleep-after", "5s", "--json"]);
  expect(r.code, r.stderr).toBe(0);
  expect((JSON.parse(r.stdout) as Box).autoSleep).toEqual({ sleepAfterS: 5, maxAwakeS: null });
}, 60_000);

afterAll(async () => {
  await h.cleanup();
});

const state = async () => (JSON.parse((await h.run(["box", "info", "zz", "--json"])).stdout) as Box).state;

test("not while a terminal is attached; once it is detached and five seconds pass, it sleeps", async () => {
  const term = onTerminal(h, ["exec", "-t", "zz", "--", "bash", "--norc"]);
  await term.until("$");
  await Bun.sleep(9000);
  expect(await state()).toBe("running");
  term.type("exit\r");
  expect(await term.proc.exited).toBe(0);
  await waitFor("the box to fall asleep", async () => (await state()) === "asleep", 30_000);
  const info = await h.run(["box", "info", "zz"]);
  expect(info.stdout).toContain("after 5s idle");
}, 90_000);

test("an exec on the sleeping box wakes it and returns its bytes and exit code", async () => {
  expect(await state()).toBe("asleep");
  const r = await h.run(["exec", "zz", "--", "sh", "-c", "printf 'a\\0b'; printf err >&2; exit 7"]);
  expect(r.code).toBe(7);
  expect([...r.out]).toEqual([97, 0, 98]);
  expect(r.stderr).toContain("err");
  expect(await state()).toBe("running");
  // And it sleeps again once quiet.
  await waitFor("the box to fall asleep again", async () => (await state()) === "asleep", 30_000);
}, 90_000);
