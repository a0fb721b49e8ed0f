// Images in use are safe: a VM box built on an image keeps booting from that
// very build whatever happens to the name (a forced rebuild while it runs,
// an rm), an rm of a name boxes use is refused with their names, and a build
// killed with SIGKILL leaves nothing behind once the next build ran. The image
// carries the suite's security updates, and its manifest says which.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { installTestImage, installTestTree, makeHome, waitFor, type Home } from "../helpers.ts";

let h: Home;
/** Whether the home holds the upgraded tree the test images' build kept: the rebuild below then copies it. */
let tree = false;
const images = () => join(h.home, "images");
const staging = () => readdirSync(images()).filter((n) => n.startsWith(".tmp-"));
const mountsUnderImages = () =>
  readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "")
    .filter((p) => p.startsWith(images()));

function backingOf(boxId: string): string {
  const info = JSON.parse(
    Bun.spawnSync(["qemu-img", "info", "-U", "--output=json", join(h.home, "boxes", boxId, "disk.qcow2")]).stdout.toString(),
  ) as { "backing-filename": string };
  return info["backing-filename"];
}

beforeAll(async () => {
  h = makeHome("hutch-img-");
  Object.assign(h.env, { HUTCH_QEMU_ACCEL: "tcg" });
  await installTestImage(h);
  tree = installTestTree(h);
  const c = await h.run(["box", "create", "base", "--engine", "qemu", "--start"]);
  expect(c.code, c.stderr).toBe(0);
}, 900_000);
afterAll(() => h.cleanup(), 120_000);

describe("images in use", () => {
  test("rm of an image a box is built on is refused, naming the box and how to free it", async () => {
    const r = await h.run(["image", "rm", "default"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("is used by box base");
    expect(r.stderr).toContain("hutch box delete base");
    expect(existsSync(join(images(), "default", "manifest.json"))).toBe(true);
  });

  test("the image is current: its manifest names the release and its security updates, and the box has what it says", async () => {
    const m = JSON.parse(readFileSync(join(images(), "default", "manifest.json"), "utf8")) as {
      sources: { suite: string; date: string | null }[];
      upgraded: string[];
      packages: string[];
    };
    expect(m.sources.map((s) => s.suite)).toEqual(["bookworm", "bookworm-updates", "bookworm-security"]);
    // This machine reaches Debian's mirrors (the security archive included), so every suite was read.
    for (const s of m.sources) expect(s.date, s.suite).toMatch(/\d{4} \d\d:\d\d:\d\d/);
    for (const p of m.upgraded) expect(m.packages).toContain(p);
    const list = await h.run(["exec", "base", "--", "cat", "/etc/apt/sources.list"]);
    expect(list.stdout).toContain(" bookworm-security main");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format fields, not a template
    const dpkg = await h.run(["exec", "base", "--", "dpkg-query", "-W", "-f", "${Package}=${Version}\\n"]);
    expect(dpkg.code, dpkg.stderr).toBe(0);
    expect(dpkg.stdout.split("\n").filter(Boolean).sort()).toEqual(m.packages);
  });

  test("a SIGKILLed build leaves its staging behind; the next build removes it and completes; the box built before keeps its base after a restart", async () => {
    const id = (JSON.parse((await h.run(["box", "info", "base", "--json"])).stdout) as { id: string }).id;
    const before = backingOf(id);
    const killed = h.spawn(["image", "build", "--force"]);
    // The worker names its staging directory with its pid: kill it once it is at work (debootstrap mounts /proc inside).
    const dir = await waitFor("the build's staging directory", () => staging().find((n) => n.startsWith(".tmp-build-default-")), 120_000);
    const worker = Number(/-(\d+)-[^-]*$/.exec(dir)![1]);
    await waitFor("the build to be underway", () => existsSync(join(images(), dir, "work")), 60_000);
    process.kill(worker, "SIGKILL");
    expect(await killed.exited).not.toBe(0);
    expect(staging()).toContain(dir);

    const again = await h.run(["image", "build", "--force"]);
    expect(again.code, again.stderr + again.stdout).toBe(0);
    // --force rebuilds the image from the kept tree (--no-cache would make the tree again).
    if (tree) expect(again.stderr).toContain("copied the upgraded tree an earlier build kept");
    expect(staging()).toEqual([]);
    expect(mountsUnderImages()).toEqual([]);

    // The name points at the new build; the running box was built on the old one, which moved into the store.
    expect(backingOf(id)).toBe(before);
    for (const verb of ["stop", "start"]) {
      const r = await h.run(["box", verb, "base"]);
      expect(r.code, r.stderr).toBe(0);
    }
    const after = backingOf(id);
    expect(after).toContain(`${join(images(), ".store")}/moved-default-`);
    expect(readFileSync(join(after, "..", "moved-from"), "utf8").trim()).toBe(join(images(), "default"));
    expect((await h.run(["exec", "base", "--", "echo", "booted"])).stdout).toBe("booted\n");
    const list = await h.run(["image", "list", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ name: "default" })]);
  }, 900_000);

  test("once no box uses them, rm takes the name and every build", async () => {
    expect((await h.run(["box", "delete", "base"])).code).toBe(0);
    const r = await h.run(["image", "rm", "default"]);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(images()).filter((n) => !n.startsWith("."))).toEqual([]);
    expect(readdirSync(join(images(), ".store"))).toEqual([]);
  }, 120_000);
});
