// The guest attaches to tabs with the protocol description chrome-remote-
// interface ships (`local: true` in tools/browser/tab.ts), not Chromium's
// own: a method missing from the shipped one would not exist on the client.
// Every DevTools method and event the browser tool calls must be in it.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = join(import.meta.dir, "../src/tools/browser");
const protocol = JSON.parse(readFileSync(join(import.meta.dir, "../node_modules/chrome-remote-interface/lib/protocol.json"), "utf8")) as {
  domains: { domain: string; commands?: { name: string }[]; events?: { name: string }[] }[];
};

test("every domain method and event the browser tool calls is in the protocol description it attaches with", () => {
  const known = new Map(protocol.domains.map((d) => [d.domain, new Set([...(d.commands ?? []), ...(d.events ?? [])].map((x) => x.name))]));
  const used = new Set<string>();
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".ts"))) {
    for (const m of readFileSync(join(dir, f), "utf8").matchAll(/\.([A-Z][A-Za-z]+)\.([a-z][A-Za-z]+)\(/g))
      if (known.has(m[1]!)) used.add(`${m[1]}.${m[2]}`);
  }
  // The scan finds the calls (a rename of the client variable must not make this pass with nothing checked).
  expect(used.size).toBeGreaterThan(20);
  expect([...used].filter((u) => !known.get(u.split(".")[0]!)!.has(u.split(".")[1]!))).toEqual([]);
});
