// The sidebar's dispatch groups, read from session rows alone.
import { expect, test } from "bun:test";
import type { SessionView } from "@hutch/shared";
import { dispatchDescription, dispatchOf, workerOf, workersOf } from "../src/dispatch-group.ts";

const D = "dsp_01m8rxd8qvvettap2rky";
const session = (id: string, agent: string, label: string | undefined, activity: SessionView["activity"] = "idle"): SessionView => ({
  id,
  box: "box_x",
  boxName: "x",
  agent,
  ...(label ? { label } : {}),
  state: "open",
  owner: "me",
  lastSeq: 1,
  createdAt: "2026-12-01T00:00:00Z",
  activity,
});

test("an orchestration session names its dispatch; a worker's names its dispatch and number; others neither", () => {
  expect(dispatchOf(session("o", "dispatch", `dispatch ${D}`))).toBe(D);
  expect(dispatchOf(session("w", "claude", `dispatch ${D} worker 2`))).toBeNull();
  expect(dispatchOf(session("x", "claude", `dispatch ${D}`))).toBeNull();
  expect(workerOf(session("w", "claude", `dispatch ${D} worker 12`))).toEqual({ dispatch: D, n: 12 });
  expect(workerOf(session("p", "claude", "my own label"))).toBeNull();
  expect(workerOf(session("p", "claude", undefined))).toBeNull();
});

test("workers of a dispatch, by number, and the group's description", () => {
  const all = [
    session("w10", "claude", `dispatch ${D} worker 10`, "busy"),
    session("w2", "codex", `dispatch ${D} worker 2`),
    session("other", "claude", "dispatch dsp_00000000000000000000 worker 1"),
    session("o", "dispatch", `dispatch ${D}`),
  ];
  const workers = workersOf(D, all);
  expect(workers.map((w) => w.id)).toEqual(["w2", "w10"]);
  expect(dispatchDescription(all[3]!, workers)).toBe("dispatch · 2 workers · 1 at work");
  expect(dispatchDescription({ ...all[3]!, state: "closed" }, workers)).toBe("dispatch · 2 workers · finished");
});
