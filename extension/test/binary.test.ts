// Which hutch the extension runs, and the errors for a missing or old one.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BinaryError, bundledPath, locate, olderThan, resolveHutch } from "../src/binary.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-ext-bin-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const script = (name: string, body: string) => {
  const p = join(dir, name);
  writeFileSync(p, `#!/bin/sh\n${body}\n`);
  chmodSync(p, 0o755);
  return p;
};

describe("olderThan", () => {
  const cases: [string, string, boolean][] = [
    ["0.0.9", "0.1.0", true],
    ["0.1.0", "0.1.0", false],
    ["0.2.0", "0.1.9", false],
    ["1.0.0", "0.9.9", false],
    ["0.1.0-dev", "0.1.1", true],
  ];
  for (const [a, b, older] of cases) test(`${a} < ${b}: ${older}`, () => expect(olderThan(a, b)).toBe(older));
});

describe("resolveHutch", () => {
  test("a missing hutch.path is named with the fix", async () => {
    const err = await resolveHutch(join(dir, "nope"), dir, "0.1.0").catch((e: BinaryError) => e);
    expect(err).toBeInstanceOf(BinaryError);
    expect((err as BinaryError).message).toContain(`${join(dir, "nope")} (from the hutch.path setting) is missing`);
    expect((err as BinaryError).fix).toContain("hutch.path");
  });
  test("a too old hutch is named with its version and the fix", async () => {
    const old = script("old", "echo 0.0.1");
    const err = (await resolveHutch(old, dir, "0.1.0").catch((e: BinaryError) => e)) as BinaryError;
    expect(err.message).toBe(
      `hutch 0.0.1 at ${old} (from the hutch.path setting) is too old for this extension, which needs 0.1.0 or newer`,
    );
    expect(err.fix).toContain("update hutch");
  });
  test("something that is not hutch is refused", async () => {
    const other = script("other", "echo hello");
    const err = (await resolveHutch(other, dir, "0.1.0").catch((e: BinaryError) => e)) as BinaryError;
    expect(err.message).toContain('is not hutch: --version printed "hello"');
  });
  test("a good one resolves with its version", async () => {
    const good = script("good", "echo 0.3.1");
    expect(await resolveHutch(good, dir, "0.1.0")).toEqual({ path: good, source: "the hutch.path setting", version: "0.3.1" });
  });
  test("without a setting: PATH first, then the bundled copy", () => {
    const pathDir = join(dir, "path");
    mkdirSync(pathDir, { recursive: true });
    const ext = join(dir, "ext");
    const bundled = bundledPath(ext);
    mkdirSync(join(bundled, ".."), { recursive: true });
    writeFileSync(bundled, "#!/bin/sh\necho 0.1.0\n");
    chmodSync(bundled, 0o755);
    expect(locate("", ext, pathDir)).toEqual({ path: bundled, source: "the copy bundled with the extension" });
    script("path/hutch", "echo 0.1.0");
    expect(locate("", ext, pathDir)).toEqual({ path: join(pathDir, "hutch"), source: "PATH" });
    expect(() => locate("", join(dir, "empty"), join(dir, "none"))).toThrow("hutch binary not found: none on PATH and none bundled");
  });
});
