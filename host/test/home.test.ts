// The home check and the modes of the daemon's own files, on real directories.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { HutchError } from "@hutch/shared";
import { checkHome } from "../src/home.ts";
import { tightenHome } from "../src/daemon/home-modes.ts";
import { openDb } from "../src/store/db.ts";

const root = mkdtempSync(join(tmpdir(), "hutch-homecheck-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = (mode: number) => {
  const dir = join(root, `h${n++}`);
  mkdirSync(dir);
  chmodSync(dir, mode);
  return dir;
};
const mode = (p: string) => lstatSync(p).mode & 0o777;

function refusal(home: string): HutchError {
  try {
    checkHome(home);
  } catch (err) {
    return err as HutchError;
  }
  throw new Error(`${home} was not refused`);
}

describe("checkHome", () => {
  test("0700, or a home that does not exist yet, passes", () => {
    expect(() => checkHome(fresh(0o700))).not.toThrow();
    expect(() => checkHome(join(root, "not-yet"))).not.toThrow();
  });

  test.each(["755", "750", "740", "705", "770", "711", "777"])("mode %s is refused as config, with the chmod", (m) => {
    const home = fresh(parseInt(m, 8));
    const e = refusal(home);
    expect(e.code).toBe("config");
    expect(e.exitCode).toBe(3);
    expect(e.message).toContain(`(mode ${m})`);
    expect(e.hint).toBe(`restrict it: chmod 700 ${home}`);
  });

  test("a path with spaces is quoted in the command", () => {
    const home = join(root, "it's a home");
    mkdirSync(home, { mode: 0o755 });
    chmodSync(home, 0o755);
    expect(refusal(home).hint).toBe(`restrict it: chmod 700 '${root}/it'\\''s a home'`);
  });

  test("a file where the home should be is refused", () => {
    const file = join(root, "a-file");
    writeFileSync(file, "");
    expect(refusal(file).message).toContain("is not a directory");
  });
});

describe("files the daemon keeps", () => {
  test("the database and its -wal/-shm are 0600 under a 022 umask, and 0644 ones are tightened", () => {
    const old = process.umask(0o022);
    try {
      const dir = fresh(0o700);
      const db = openDb(join(dir, "hutch.db"));
      db.exec("CREATE TABLE t (x)");
      for (const f of ["hutch.db", "hutch.db-wal", "hutch.db-shm"]) expect([f, mode(join(dir, f))]).toEqual([f, 0o600]);
      for (const f of ["hutch.db", "hutch.db-wal", "hutch.db-shm"]) chmodSync(join(dir, f), 0o644);
      const again = openDb(join(dir, "hutch.db"));
      for (const f of ["hutch.db", "hutch.db-wal", "hutch.db-shm"]) expect([f, mode(join(dir, f))]).toEqual([f, 0o600]);
      again.close();
      db.close();
    } finally {
      process.umask(old);
    }
  });

  test("tightenHome restricts the daemon's own files and the box and image directories, never through a symlink", () => {
    const home = fresh(0o700);
    writeFileSync(join(home, "daemon.log"), "");
    chmodSync(join(home, "daemon.log"), 0o644);
    mkdirSync(join(home, "boxes/box_1/workspace"), { recursive: true, mode: 0o755 });
    for (const d of ["boxes", "boxes/box_1", "boxes/box_1/workspace"]) chmodSync(join(home, d), 0o755);
    mkdirSync(join(home, "images"), { mode: 0o755 });
    chmodSync(join(home, "images"), 0o755);
    const outside = join(root, "outside");
    mkdirSync(outside, { mode: 0o755 });
    chmodSync(outside, 0o755);
    symlinkSync(outside, join(home, "images", "linked"));
    expect(tightenHome(home)).toEqual([]);
    expect(mode(join(home, "daemon.log"))).toBe(0o600);
    expect(mode(join(home, "boxes"))).toBe(0o700);
    expect(mode(join(home, "boxes/box_1"))).toBe(0o700);
    expect(mode(join(home, "images"))).toBe(0o700);
    // A box's own tree keeps what the box gave it; a link's target is not ours to change.
    expect(mode(join(home, "boxes/box_1/workspace"))).toBe(0o755);
    expect(statSync(outside).mode & 0o777).toBe(0o755);
  });
});
