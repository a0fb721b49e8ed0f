import { describe, expect, test } from "bun:test";
import { mkdir, readdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DEFAULT_WINDOW } from "@hutch/shared";
import { call, collect, result, type Guest, type Host, useGuest } from "./harness.ts";
import { FileStat, FsListResult, FsSizeResult } from "@hutch/shared";

/** Until the guest's temporary file for a write shows in dir: the bytes sent so far were handled. */
/** Polls `dir` until its names satisfy `ok` (5 s at most: a write's file appears, or is cleaned up, within a few ms). */
async function waitForNames(dir: string, ok: (names: string[]) => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (ok(await readdir(dir))) return;
    await Bun.sleep(10);
  }
  throw new Error(`${what} in ${dir}: ${JSON.stringify(await readdir(dir))}`);
}
const waitForTmp = (dir: string) => waitForNames(dir, (n) => n.some((x) => x.endsWith(".tmp")), "no temporary file appeared");

let g: Guest;
let h: Host;
useGuest(async (guest, host) => {
  g = guest;
  h = host;
  await mkdir(join(g.workspace, "src"));
  await writeFile(join(g.workspace, "src", "a.txt"), "hello\n");
  await symlink("/etc", join(g.workspace, "etc-link"));
  await symlink("/etc/hostname-that-does-not-exist", join(g.workspace, "dangling-out"));
  await symlink("src/a.txt", join(g.workspace, "inside-link"));
});

describe("confinement", () => {
  for (const [name, path] of [
    ["a relative path climbing out", "../../etc/passwd"],
    ["an absolute path outside", "/etc/passwd"],
    ["a symlink pointing at /etc", "etc-link/passwd"],
    ["the symlink itself", "etc-link"],
    ["a dangling symlink pointing out", "dangling-out"],
  ] as const) {
    test(`${name} is denied for read, stat, list and write`, async () => {
      for (const tool of ["fs.read", "fs.stat", "fs.list", "fs.write"]) {
        const { error } = await call(h, { tool, path });
        expect(error?.code).toBe("denied");
        expect(error?.message).toContain(JSON.stringify(path));
        expect(error?.message).toContain(g.workspace);
      }
    });
  }

  test("a symlink that stays inside the roots is followed", async () => {
    const { c, error } = await call(h, { tool: "fs.read", path: "inside-link" });
    expect(error).toBeUndefined();
    expect(c.text()).toBe("hello\n");
  });

  test("the home root is allowed too", async () => {
    await writeFile(join(g.home, ".profile"), "x");
    expect(result((await call(h, { tool: "fs.stat", path: join(g.home, ".profile") })).c, FileStat)).toMatchObject({
      type: "file",
      size: 1,
    });
  });
});

describe("fs tools", () => {
  test("stat and list describe files, dirs and symlinks", async () => {
    expect(result((await call(h, { tool: "fs.stat", path: "src/a.txt" })).c, FileStat)).toMatchObject({
      path: join(g.workspace, "src/a.txt"),
      type: "file",
      size: 6,
    });
    const list = result((await call(h, { tool: "fs.list", path: "." })).c, FsListResult);
    expect(list.map((e) => [e.name, e.type, e.target])).toEqual([
      ["dangling-out", "symlink", "/etc/hostname-that-does-not-exist"],
      ["etc-link", "symlink", "/etc"],
      ["inside-link", "symlink", "src/a.txt"],
      ["src", "dir", undefined],
    ]);
  });

  test("read of a missing file is not_found", async () => {
    expect((await call(h, { tool: "fs.read", path: "nope.txt" })).error?.code).toBe("not_found");
  });

  test("read streams the file, eof, then result {size}", async () => {
    const big = crypto.getRandomValues(new Uint8Array(60000));
    const data = Buffer.concat(Array.from({ length: Math.ceil((DEFAULT_WINDOW * 1.5) / big.length) }, () => big));
    await writeFile(join(g.workspace, "big.bin"), data);
    const { c, error } = await call(h, { tool: "fs.read", path: "big.bin" });
    expect(error).toBeUndefined();
    expect(Buffer.concat(c.out).equals(data)).toBe(true);
    expect(c.eofs).toEqual([1]);
    expect(result(c, FsSizeResult)).toEqual({ size: data.length });
  });

  test("write replaces the target only at eof, atomically", async () => {
    const target = join(g.workspace, "src", "a.txt");
    const s = h.mux.open({ tool: "fs.write", path: "src/a.txt", mode: 0o640 });
    const c = collect(s);
    await s.write(0, new TextEncoder().encode("new content, part one; "));
    await waitForTmp(join(g.workspace, "src"));
    // Before eof the old content is still there and a temporary file sits beside it.
    expect(await Bun.file(target).text()).toBe("hello\n");
    expect((await readdir(join(g.workspace, "src"))).some((n) => n.endsWith(".tmp"))).toBe(true);
    await s.write(0, new TextEncoder().encode("part two"));
    s.eof(0);
    expect(await c.closed).toBeUndefined();
    expect(result(c, FsSizeResult)).toEqual({ size: 31 });
    expect(await Bun.file(target).text()).toBe("new content, part one; part two");
    const st = result((await call(h, { tool: "fs.stat", path: "src/a.txt" })).c, FileStat);
    expect(st.mode).toBe(0o640);
    expect(await readdir(join(g.workspace, "src"))).toEqual(["a.txt"]);
  });

  test("a write whose stream is closed before eof leaves no file and no temp file", async () => {
    const s = h.mux.open({ tool: "fs.write", path: "half.txt" });
    await s.write(0, new TextEncoder().encode("half"));
    await waitForTmp(g.workspace);
    s.close();
    // The guest removes the temporary file once it has read the close, after its pending writes: no answer tells when.
    await waitForNames(g.workspace, (n) => !n.some((x) => x.includes("half")), "the temporary file stayed");
    expect((await readdir(g.workspace)).filter((n) => n.includes("half"))).toEqual([]);
  });

  test("a write into a missing directory is not_found", async () => {
    const s = h.mux.open({ tool: "fs.write", path: "no/such/dir/x.txt" });
    const c = collect(s);
    expect((await c.closed)?.code).toBe("not_found");
  });
});
