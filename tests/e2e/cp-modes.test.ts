// What `hutch cp BOX:/path ./dst` unpacks on the host never keeps group/other
// write or setuid/setgid/sticky from the box: the user's umask applies, as
// with cp and tar --no-same-permissions.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { lstatSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeHome, type Home } from "../helpers.ts";

let h: Home;
let work: string;
beforeAll(async () => {
  h = makeHome();
  work = mkdtempSync(join(tmpdir(), "hutch-cpmodes-"));
  expect((await h.run(["box", "create", "m", "--start"])).code).toBe(0);
  const made = await h.run([
    "exec",
    "m",
    "--",
    "sh",
    "-c",
    "mkdir -p /workspace/out/open /workspace/out/sticky && echo x > /workspace/out/open/suid && echo y > /workspace/out/shared && " +
      "chmod 0777 /workspace/out /workspace/out/open && chmod 1777 /workspace/out/sticky && chmod 4777 /workspace/out/open/suid && chmod 0666 /workspace/out/shared && " +
      "stat -c '%a %n' /workspace/out /workspace/out/open /workspace/out/open/suid",
  ]);
  expect(made.code).toBe(0);
  // The box really holds the modes the copy must not carry over.
  expect(made.stdout).toBe("777 /workspace/out\n777 /workspace/out/open\n4777 /workspace/out/open/suid\n");
});
afterAll(async () => {
  await h.cleanup();
  rmSync(work, { recursive: true, force: true });
});

const modes = (root: string) =>
  Object.fromEntries(
    ["", "/open", "/open/suid", "/sticky", "/shared"].map((p) => [p || ".", (lstatSync(root + p).mode & 0o7777).toString(8)]),
  );

/** Runs `hutch cp` with this umask, as the user's shell would have it. */
async function cpOut(dst: string, umask: number) {
  const old = process.umask(umask);
  try {
    return await h.run(["cp", "m:/workspace/out", dst]);
  } finally {
    process.umask(old);
  }
}

describe("hutch cp out of a box", () => {
  test("under umask 022, 0777 and 4777 land as 0755, 1777 as 0755, 0666 as 0644", async () => {
    const dst = join(work, "under-022");
    const r = await cpOut(dst, 0o022);
    expect(r.code).toBe(0);
    expect(modes(dst)).toEqual({ ".": "755", "/open": "755", "/open/suid": "755", "/sticky": "755", "/shared": "644" });
  });

  test("under umask 077 everything is the user's alone", async () => {
    const dst = join(work, "under-077");
    const r = await cpOut(dst, 0o077);
    expect(r.code).toBe(0);
    expect(modes(dst)).toEqual({ ".": "700", "/open": "700", "/open/suid": "700", "/sticky": "700", "/shared": "600" });
  });

  test("under umask 002 group write is still stripped", async () => {
    const dst = join(work, "under-002");
    const r = await cpOut(dst, 0o002);
    expect(r.code).toBe(0);
    expect(modes(dst)).toEqual({ ".": "755", "/open": "755", "/open/suid": "755", "/sticky": "755", "/shared": "644" });
  });
});
