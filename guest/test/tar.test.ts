import { describe, expect, test } from "bun:test";
import { mkdir, readFile, readdir, readlink, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { call, collect, result, type Guest, type Host, useGuest } from "./harness.ts";
import { TarInResult, TarOutResult } from "@hutch/shared";

let g: Guest;
let h: Host;
useGuest(async (guest, host) => {
  g = guest;
  h = host;
});

/** Sends bytes on chan 0 of a new stream, then eof, and waits for the close. */
async function send(payload: unknown, bytes: Uint8Array) {
  const s = h.mux.open(payload);
  const c = collect(s);
  await s.write(0, bytes);
  s.eof(0);
  return { c, error: await c.closed };
}

describe("tar", () => {
  test("tar.out then tar.in reproduces the tree", async () => {
    const proj = join(g.workspace, "proj");
    await mkdir(join(proj, "sub"), { recursive: true });
    await writeFile(join(proj, "a.txt"), "alpha\n");
    const big = crypto.getRandomValues(new Uint8Array(65536));
    await writeFile(join(proj, "sub", "big.bin"), Buffer.concat(Array.from({ length: 48 }, () => big))); // 3 MiB
    await symlink("a.txt", join(proj, "link"));

    const out = await call(h, { tool: "tar.out", path: "proj" });
    expect(out.error).toBeUndefined();
    const archive = Buffer.concat(out.c.out);
    expect(result(out.c, TarOutResult)).toEqual({ size: archive.length });
    expect(archive.length).toBeGreaterThan(3 * 1024 * 1024);

    const back = await send({ tool: "tar.in", path: "restored" }, archive);
    expect(back.error).toBeUndefined();
    expect(result(back.c, TarInResult)).toMatchObject({ entries: 5 });
    const dest = join(g.workspace, "restored", "proj");
    expect((await readdir(dest)).sort()).toEqual(["a.txt", "link", "sub"]);
    expect(await readFile(join(dest, "a.txt"), "utf8")).toBe("alpha\n");
    expect((await readFile(join(dest, "sub", "big.bin"))).equals(await readFile(join(proj, "sub", "big.bin")))).toBe(true);
    expect(await readlink(join(dest, "link"))).toBe("a.txt");
  });

  test("an archive with a .. entry is refused and leaves nothing", async () => {
    const src = join(g.dir, "hostile");
    await mkdir(src);
    await writeFile(join(src, "evil.txt"), "pwned");
    // GNU tar writes the name as given with --transform; -P keeps the "..".
    const made = Bun.spawnSync(["tar", "-C", src, "-P", "--transform", "s,^,../,", "-cf", "-", "evil.txt"]);
    expect(made.exitCode).toBe(0);
    const { error } = await send({ tool: "tar.in", path: "landing" }, made.stdout);
    expect(error?.code).toBe("invalid");
    expect(error?.message).toContain("../evil.txt");
    expect(await Bun.file(join(g.workspace, "evil.txt")).exists()).toBe(false);
    expect(await readdir(join(g.workspace, "landing"))).toEqual([]);
  });

  test("tar.in and tar.out outside the roots are denied", async () => {
    expect((await call(h, { tool: "tar.out", path: "/etc" })).error?.code).toBe("denied");
    expect((await send({ tool: "tar.in", path: "../../tmp/x" }, new Uint8Array(1024))).error?.code).toBe("denied");
  });
});
