// Where a box goes in a fleet (fleet/place.ts) and what a quota refuses
// (auth/quota.ts): pure decisions on the fleet's state, checked here on
// hand-made nodes and boxes; tests/e2e/cluster.test.ts checks them through
// three servers.
import { describe, expect, test } from "bun:test";
import type { Box, FleetBox } from "@hutch/shared";
import { place } from "../src/fleet/place.ts";
import { fleetNode } from "./fleet-fixtures.ts";
import { checkQuota } from "../src/auth/quota.ts";

const node = fleetNode;
const box = (id: string, on: string, memoryMiB: number): FleetBox => ({
  node: on,
  owner: "alice",
  cpus: 1,
  memoryMiB,
  box: { id, name: id } as Box,
});

describe("placement", () => {
  test("the server with the most memory left once its boxes have theirs; then the fewest boxes; then by name", () => {
    const nodes = [node("a", 8192), node("b", 8192), node("c", 4096)];
    expect(place(nodes, [], { engine: "process", memoryMiB: 512 })).toBe("a");
    expect(place(nodes, [box("x", "a", 4096)], { engine: "process", memoryMiB: 512 })).toBe("b");
    expect(place(nodes, [box("x", "a", 1024), box("y", "b", 512), box("z", "b", 512)], { engine: "process", memoryMiB: 512 })).toBe("a");
  });

  test("--node and --on narrow the choice; the engine must be one the server runs", () => {
    const nodes = [node("a", 8192, { zone: "east" }), node("b", 1024, { zone: "west", gpu: "yes" }), node("c", 16384, {}, ["process"])];
    expect(place(nodes, [], { engine: "process", memoryMiB: 512, on: { gpu: "yes" } })).toBe("b");
    expect(place(nodes, [], { engine: "process", memoryMiB: 512, node: "a" })).toBe("a");
    expect(place(nodes, [], { engine: "qemu", memoryMiB: 512 })).toBe("a");
    expect(() => place(nodes, [], { engine: "process", memoryMiB: 512, on: { zone: "north" } })).toThrow(
      "no live server of the fleet takes this box (--on zone=north, engine process); live: a [zone=east], b [zone=west,gpu=yes], c",
    );
    expect(() => place([], [], { engine: "process", memoryMiB: 512 })).toThrow("live: none");
  });
});

describe("quotas", () => {
  const held = (n: number, cpus = 1, memoryMiB = 512) => Array.from({ length: n }, () => ({ cpus, memoryMiB }));
  const want = { cpus: 1, memoryMiB: 512 };

  test("no quota, or room left: nothing refused", () => {
    checkQuota("bob", null, held(50), want);
    checkQuota("bob", { boxes: 3 }, held(2), want);
    checkQuota("bob", { cpus: 4, memoryMiB: 2048 }, held(3), want);
  });

  test("each limit refuses naming the quota, what is held, and the command that raises it", () => {
    expect(() => checkQuota("bob", { boxes: 3 }, held(3), want)).toThrow("user bob's quota is 3 boxes, and they hold 3");
    expect(() => checkQuota("bob", { boxes: 1 }, held(1), want)).toThrow("user bob's quota is 1 box, and they hold 1");
    expect(() => checkQuota("bob", { cpus: 4 }, held(2, 2), want)).toThrow(
      "user bob's quota is 4 vCPUs: their boxes have 4, and this one asks 1",
    );
    expect(() => checkQuota("bob", { memoryMiB: 1024 }, held(1), { cpus: 1, memoryMiB: 1024 })).toThrow(
      "user bob's quota is 1024 MiB of memory: their boxes have 512 MiB, and this one asks 1024 MiB",
    );
    let refused: unknown;
    try {
      checkQuota("bob", { boxes: 0 }, [], want);
    } catch (err) {
      refused = err;
    }
    expect(refused).toMatchObject({ code: "denied", hint: expect.stringContaining("hutch user quota bob --boxes N") });
  });
});
