import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeHome, sha256, type Home } from "../helpers.ts";

let h: Home;
let work: string;
beforeAll(async () => {
  h = makeHome();
  work = mkdtempSync(join(tmpdir(), "hutch-cp-"));
  expect((await h.run(["box", "create", "c", "--start"])).code).toBe(0);
});
afterAll(async () => {
  await h.cleanup();
  rmSync(work, { recursive: true, force: true });
});

/** Every entry under root: type, permission bits, symlink target or content hash. */
function snapshot(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const abs = join(root, rel);
    const st = lstatSync(abs);
    const mode = (st.mode & 0o777).toString(8);
    if (st.isSymbolicLink()) out[rel] = `link -> ${readlinkSync(abs)}`;
    else if (st.isDirectory()) {
      out[rel] = `dir ${mode}`;
      for (const e of readdirSync(abs).sort()) walk(rel ? `${rel}/${e}` : e);
    } else out[rel] = `file ${mode} ${sha256(readFileSync(abs))}`;
  };
  walk("");
  return out;
}

describe("hutch cp", () => {
  test("a tree with a symlink and an empty dir round-trips exactly", async () => {
    const src = join(work, "tree");
    mkdirSync(join(src, "sub/deeper"), { recursive: true });
    mkdirSync(join(src, "empty"));
    writeFileSync(join(src, "a.txt"), "hello\n");
    writeFileSync(join(src, "sub/blob.bin"), randomBytes(3 * 1024 * 1024));
    writeFileSync(join(src, "sub/deeper/run.sh"), "#!/bin/sh\necho hi\n");
    chmodSync(join(src, "sub/deeper/run.sh"), 0o755);
    writeFileSync(join(src, "zero"), "");
    symlinkSync("sub/blob.bin", join(src, "link"));
    symlinkSync("/etc/hostname", join(src, "abs-link"));

    const up = await h.run(["cp", src, "c:/workspace/tree"]);
    expect(up.stderr).toContain("copied");
    expect(up.code).toBe(0);
    const inBox = await h.run([
      "exec",
      "c",
      "--",
      "sh",
      "-c",
      "cd /workspace/tree && find . | sort && readlink link && sh sub/deeper/run.sh",
    ]);
    expect(inBox.stdout).toBe(
      `${". ./a.txt ./abs-link ./empty ./link ./sub ./sub/blob.bin ./sub/deeper ./sub/deeper/run.sh ./zero sub/blob.bin hi"
        .split(" ")
        .join("\n")}\n`,
    );

    const back = join(work, "back");
    const down = await h.run(["cp", "c:/workspace/tree", back]);
    expect(down.code).toBe(0);
    const a = snapshot(src);
    const b = snapshot(back);
    delete a[""];
    delete b[""];
    expect(b).toEqual(a);
  });

  test("copying to a new name renames the top entry, in both directions", async () => {
    const src = join(work, "orig");
    mkdirSync(join(src, "inner"), { recursive: true });
    writeFileSync(join(src, "inner/f"), "x\n");
    expect((await h.run(["cp", src, "c:/workspace/renamed"])).code).toBe(0);
    expect((await h.run(["exec", "c", "--", "cat", "/workspace/renamed/inner/f"])).stdout).toBe("x\n");
    expect((await h.run(["exec", "c", "--", "test", "-e", "/workspace/orig"])).code).toBe(1);
    const local = join(work, "renamed-back");
    expect((await h.run(["cp", "c:/workspace/renamed", local])).code).toBe(0);
    expect(readFileSync(join(local, "inner/f"), "utf8")).toBe("x\n");
  });

  test("copying into an existing directory keeps the source's name; a single file works", async () => {
    const f = join(work, "single.txt");
    writeFileSync(f, "one file\n");
    expect((await h.run(["cp", f, "c:/workspace"])).code).toBe(0);
    expect((await h.run(["exec", "c", "--", "cat", "/workspace/single.txt"])).stdout).toBe("one file\n");
    const into = join(work, "into");
    mkdirSync(into);
    expect((await h.run(["cp", "c:/workspace/single.txt", into])).code).toBe(0);
    expect(readFileSync(join(into, "single.txt"), "utf8")).toBe("one file\n");
  });

  test("paths escaping the allowed roots are refused and nothing is written", async () => {
    const out = join(work, "escape");
    const r1 = await h.run(["cp", "c:../../etc/passwd", out]);
    expect(r1.code).not.toBe(0);
    expect(r1.stderr).toMatch(/outside|allowed|denied/i);
    expect(existsSync(out)).toBe(false);

    expect((await h.run(["exec", "c", "--", "ln", "-s", "/etc", "/workspace/etc-link"])).code).toBe(0);
    const r2 = await h.run(["cp", "c:/workspace/etc-link/passwd", out]);
    expect(r2.code).not.toBe(0);
    expect(r2.stderr).toMatch(/outside|allowed|denied/i);
    expect(existsSync(out)).toBe(false);

    const f = join(work, "x.txt");
    writeFileSync(f, "x");
    const r3 = await h.run(["cp", f, "c:/workspace/etc-link/x.txt"]);
    expect(r3.code).not.toBe(0);
    const r4 = await h.run(["cp", f, "c:/workspace/../../tmp/x.txt"]);
    expect(r4.code).not.toBe(0);
    expect(r4.stderr).toMatch(/outside|allowed|denied/i);
  });

  test("a missing source is not found (exit 4)", async () => {
    const r = await h.run(["cp", "c:/workspace/does-not-exist", join(work, "nothing")]);
    expect(r.code).toBe(4);
    const l = await h.run(["cp", join(work, "does-not-exist"), "c:/workspace"]);
    expect(l.code).toBe(4);
  });
});
