// The sidebar's top level: in a fleet (boxes naming their server) one group
// per server, by name, its boxes in the order given; outside a fleet no group
// at all, every box where it was.
import { describe, expect, test } from "bun:test";
import { groupByServer, keepServer } from "../src/server-group.ts";

const box = (id: string, server?: string) => ({ id, ...(server === undefined ? {} : { server }) });

describe("grouping boxes by server", () => {
  test("a single daemon's boxes (no server named) stay ungrouped, in order", () => {
    const boxes = [box("b1"), box("b2"), box("b3")];
    expect(groupByServer(boxes)).toEqual({ servers: [], rest: boxes });
  });

  test("a fleet's boxes go under their servers, servers by name, boxes in the order given", () => {
    const boxes = [box("w1", "west"), box("e1", "east"), box("w2", "west"), box("c1", "central")];
    const g = groupByServer(boxes);
    expect(g.servers.map((s) => [s.name, s.boxes.map((b) => b.id)])).toEqual([
      ["central", ["c1"]],
      ["east", ["e1"]],
      ["west", ["w1", "w2"]],
    ]);
    expect(g.rest).toEqual([]);
  });

  test("a box naming no server beside a fleet's stays at the top level", () => {
    const g = groupByServer([box("a1", "a"), box("local1"), box("x", "")]);
    expect(g.servers.map((s) => s.name)).toEqual(["a"]);
    expect(g.rest.map((b) => b.id)).toEqual(["local1", "x"]);
  });

  test("an update that does not name the server keeps the one the box was listed with; one that names it wins", () => {
    expect(keepServer(box("w1", "west"), box("w1"))).toEqual(box("w1", "west"));
    expect(keepServer(box("w1", "west"), box("w1", "east"))).toEqual(box("w1", "east"));
    expect(keepServer(undefined, box("w1"))).toEqual(box("w1"));
    expect(keepServer(box("w1"), box("w1"))).toEqual(box("w1"));
  });
});
