// The image verbs against a served daemon (--remote, here HUTCH_REMOTE): an
// admin imports an archive from the client's own machine (its bytes are
// uploaded; the server's image store gets it), any user lists and verifies
// it, and a user without the admin scope may not import. The archive is a
// small crafted image (a qcow2 made by qemu-img, kernel and initramfs as
// text): no VM boots.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MANIFEST_FORMAT, type ImageImportResult, type ImageList, type ImageManifest } from "../../shared/src/index.ts";
import { opOutput, type Home } from "../helpers.ts";
import { joinClient, startServer, type Server } from "../remote.ts";

let srv: Server;
let admin: Home & { join: string };
let alice: Home & { join: string };
let tar: string;

const sha = (b: Uint8Array | string) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/** An image directory packed as the README says (tar -C images -chf NAME.tar NAME), in the client's home. */
function craftArchive(dir: string): string {
  const img = join(dir, "src", "crafted");
  mkdirSync(img, { recursive: true });
  const q = Bun.spawnSync(["qemu-img", "create", "-q", "-f", "qcow2", join(img, "root.qcow2"), "4M"]);
  expect(q.exitCode, q.stderr.toString()).toBe(0);
  writeFileSync(join(img, "vmlinuz"), "kernel bytes");
  writeFileSync(join(img, "initramfs.img"), "initramfs bytes");
  const info = (f: string) => {
    const b = readFileSync(join(img, f));
    return { bytes: b.byteLength, sha256: sha(b) };
  };
  const m: ImageManifest = {
    format: MANIFEST_FORMAT,
    name: "crafted",
    hutchVersion: "0.1.0",
    builtAt: "2026-12-01T00:00:00.000Z",
    buildSeconds: 1,
    recipeHash: "c".repeat(64),
    kernel: { package: "linux-image-6.1.0-57-amd64", version: "6.1.192-3", release: "6.1.0-57-amd64" },
    busybox: "busybox-static=1:1.35.0-4+deb12u1+b1",
    modules: [],
    suite: "bookworm",
    mirror: "http://deb.debian.org/debian",
    packages: ["git=1:2.39.5-0+deb12u3"],
    root: { contentBytes: 1, virtualBytes: 4 * 1024 * 1024 },
    files: { vmlinuz: info("vmlinuz"), "initramfs.img": info("initramfs.img"), "root.qcow2": info("root.qcow2") },
  };
  writeFileSync(join(img, "manifest.json"), JSON.stringify(m));
  const file = join(dir, "crafted.tar");
  expect(Bun.spawnSync(["tar", "-C", join(dir, "src"), "-chf", file, "crafted"]).exitCode).toBe(0);
  return file;
}

beforeAll(async () => {
  srv = await startServer("hutch-srv-img-");
  admin = await joinClient(srv, "ops", { join: await srv.join("ops", ["--scope", "read", "--scope", "write", "--scope", "admin"]) });
  alice = await joinClient(srv, "alice");
  tar = craftArchive(admin.home);
}, 120_000);

afterAll(async () => {
  await admin?.cleanup();
  await alice?.cleanup();
  await srv?.stop();
});

describe("image verbs with --remote", () => {
  test("an admin imports a file from the client's machine: its bytes go to the server's image store, none to the client's", async () => {
    const r = await admin.run(["image", "import", tar, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const { lines, result } = opOutput<ImageImportResult>(r.stdout);
    expect(result.manifest.name).toBe("crafted");
    expect(lines.some((l) => l.type === "counts" && l.phase === "upload")).toBe(true);
    expect(lines.some((l) => l.type === "counts" && l.phase === "verify")).toBe(true);
    expect(existsSync(join(srv.home.home, "images", "crafted", "manifest.json"))).toBe(true);
    expect(existsSync(join(admin.home, "images"))).toBe(false);
    expect(readdirSync(join(srv.home.home, "images")).filter((n) => n.startsWith(".tmp-"))).toEqual([]);
  });

  test("hutch image list --remote shows the server's images to any user, as a table and as JSON", async () => {
    const table = await alice.run(["image", "list", "--remote", "srv"]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^NAME\s+KERNEL\s+PACKAGES\s+SECURITY\s+SIZE\s+BUILT\n/);
    expect(table.stdout).toMatch(/\ncrafted\s+6\.1\.0-57-amd64\s+1\s+-\s/);
    const json = await alice.run(["image", "list", "--remote", "srv", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const list = JSON.parse(json.stdout) as ImageList;
    expect(list.map((i) => i.name)).toEqual(["crafted"]);
    expect(list[0]!.manifest?.files["root.qcow2"].sha256).toBe(sha(readFileSync(join(srv.home.home, "images", "crafted", "root.qcow2"))));
  });

  test("any user verifies a server's image; importing is the admin's", async () => {
    const v = await alice.run(["image", "verify", "crafted"]);
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout).toBe("image crafted: every file matches its manifest\n");
    const refused = await alice.run(["image", "import", tar, "--name", "mine"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("/v1/images/imports is the server admin's");
    expect(existsSync(join(srv.home.home, "images", "mine"))).toBe(false);
  });
});
