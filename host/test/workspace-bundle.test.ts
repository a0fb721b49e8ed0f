// The one file bring-back takes from a box's output directory: opened without
// following a symlink, a regular file, within the size bound.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUNDLE_MAX, takeBundle } from "../src/workspace/bring-back.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-take-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the bundle a box sent", () => {
  test("a plain file within the bound is taken", () => {
    writeFileSync(join(dir, "ok"), "# v2 git bundle\n");
    expect(takeBundle(join(dir, "ok"), "b")).toBe(join(dir, "ok"));
  });

  test("a symlink is refused, not followed (even to a real file)", () => {
    writeFileSync(join(dir, "target"), "x");
    symlinkSync(join(dir, "target"), join(dir, "link"));
    expect(() => takeBundle(join(dir, "link"), "b")).toThrow("box b sent its bundle as a symlink; only a plain file is taken");
  });

  test("a directory is refused", () => {
    mkdirSync(join(dir, "adir"));
    expect(() => takeBundle(join(dir, "adir"), "b")).toThrow("box b sent its bundle as something other than a plain file");
  });

  test("over the bound: refused naming the size, the bound and what to do", () => {
    writeFileSync(join(dir, "big"), new Uint8Array(4097));
    let err: unknown;
    try {
      takeBundle(join(dir, "big"), "b", 4096);
    } catch (e) {
      err = e;
    }
    expect((err as Error).message).toContain("box b's work is a bundle of 4097 bytes, over the bound of 4096 bytes");
    expect((err as { hint?: string }).hint).toContain("hutch bring-back b");
    expect(BUNDLE_MAX).toBe(2 * 1024 ** 3);
  });

  test("nothing there is refused", () => {
    expect(() => takeBundle(join(dir, "none"), "b")).toThrow("box b sent no bundle (ENOENT)");
  });
});
