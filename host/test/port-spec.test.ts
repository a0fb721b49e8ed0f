import { describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import { parseForwardSpec } from "../src/cli/port.ts";
import { heldHere } from "../src/client/ports.ts";

describe("parseForwardSpec", () => {
  const ok: [string, { local: number; remote: number }][] = [
    ["8000", { local: 8000, remote: 8000 }],
    ["9000:8000", { local: 9000, remote: 8000 }],
    ["0:3000", { local: 0, remote: 3000 }],
  ];
  for (const [spec, want] of ok) test(spec, () => expect(parseForwardSpec(spec)).toEqual(want));
  for (const bad of ["", "0", "70000", "a:80", "1:2:3", "-1"])
    test(`refuses ${JSON.stringify(bad)}`, () => expect(() => parseForwardSpec(bad)).toThrow("[LOCAL:]REMOTE"));
});

// What a forward to a named port here must refuse: anything answering on
// either loopback, a [::1]-only service included (a 127.0.0.1 bind beside it
// succeeds on Linux and would shadow it for `localhost`).
describe("heldHere", () => {
  async function hold(host: string): Promise<{ port: number; close(): void }> {
    const server = createServer((s) => s.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, host, () => resolve());
    });
    const addr = server.address();
    return { port: typeof addr === "object" && addr ? addr.port : 0, close: () => server.close() };
  }

  test("a port nothing listens on is free", async () => {
    const h = await hold("127.0.0.1");
    h.close();
    expect(await heldHere(h.port)).toBeUndefined();
  });
  for (const [host, shown] of [
    ["127.0.0.1", "127.0.0.1"],
    ["::1", "[::1]"],
  ] as const)
    test(`a port held on ${host} is named as held there`, async () => {
      const h = await hold(host);
      try {
        expect(await heldHere(h.port)).toBe(`something on this machine already listens on ${shown}:${h.port}`);
      } finally {
        h.close();
      }
    });
});
