// hutch-guest's start-up is paid again under tcg at ~100x the host's cost for
// every module it evaluates, so it imports only the channel's half of the
// contracts (@hutch/shared/wire) and the tar code that needs node:fs
// (@hutch/shared/node), never the API, event or broker schemas.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

const root = join(import.meta.dir, "../..");
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|import\("([^"]+)"\)/g;

function specifiers(file: string): string[] {
  return [...readFileSync(file, "utf8").matchAll(IMPORT)].map((m) => m[1] ?? m[2]!).filter(Boolean);
}

function sources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts"))
    .map((f) => join(dir, f));
}

/** Every shared/ file a module reaches through relative imports, itself included. */
function reach(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  for (const s of specifiers(file)) if (s.startsWith(".")) reach(resolve(dirname(file), s), seen);
  return seen;
}

const GUEST_ENTRIES = new Set(["@hutch/shared/wire", "@hutch/shared/node"]);

test("the guest imports the shared contracts only through @hutch/shared/wire (and the tar code through /node)", () => {
  const barrel = sources(join(root, "guest/src")).filter((f) =>
    specifiers(f).some((s) => s === "@hutch/shared" || (s.startsWith("@hutch/shared/") && !GUEST_ENTRIES.has(s))),
  );
  expect(barrel.map((f) => f.slice(root.length + 1))).toEqual([]);
});

test.each([
  ["@hutch/shared/wire", "shared/src/wire.ts", "shared/src/protocol/tools.ts"],
  ["@hutch/shared/node", "shared/node/index.ts", "shared/src/tar/parse.ts"],
])("%s reaches none of the API, event, broker or IDE schemas", (_, entry, expected) => {
  const reached = [...reach(join(root, entry))].map((f) => f.slice(root.length + 1));
  expect(reached).toContain(expected);
  for (const heavy of ["index.ts", "api.ts", "events.ts", "broker.ts", "ide.ts", "validate.ts"])
    expect(reached).not.toContain(`shared/src/${heavy}`);
});
