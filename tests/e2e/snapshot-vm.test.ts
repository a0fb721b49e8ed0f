// Snapshots of a VM box (QEMU under tcg, as tests/e2e/vm.test.ts): through
// its guest while it runs, and while it is stopped (its qcow2 is not
// readable from the host, so the daemon starts it, reads it through the
// guest and stops it again); both keep ns mtimes, modes and hard links, and
// a restore into the VM gives the same bytes, modes, hard links and (to the
// microsecond) mtimes back. The guest walks and chunks: a snapshot after a
// one-file change sends that file's chunk only. And the acceptance tree
// (20k files, a 500 MB binary, links, odd names, xattrs), made and listed in
// the box by tests/fixtures/snap-tree.py, comes back identical to the ns.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { installTestImage, makeHome, opOutput, type Home } from "../helpers.ts";
import { openStore, storeLocation } from "../../host/src/snapshot/index.ts";

let h: Home;

async function ok(args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}
const sh = (box: string, script: string) => ok(["exec", box, "--", "sh", "-c", script]);
const TREE_PY = readFileSync(join(import.meta.dir, "../fixtures/snap-tree.py"), "utf8");
const treePy = (box: string, ...args: string[]) => ok(["exec", box, "--", "python3", "-c", TREE_PY, ...args]);
/**
 * The tree's size. Under tcg a box moves a few MB/s each way and pays for
 * every file (measured on the 2-core dev machine, loaded: 500 MiB took 9 min
 * to snapshot and over 6 to restore; 20k files with 32 MiB, 12 min in all),
 * so the suite's run uses 2,000 files and an 8 MiB binary, every kind of
 * entry still in it; HUTCH_TEST_SNAPSHOT_FILES=20000
 * HUTCH_TEST_SNAPSHOT_MB=500 is the full acceptance size.
 */
const FILES = Number(process.env.HUTCH_TEST_SNAPSHOT_FILES ?? 2000);
const BIG_MB = Number(process.env.HUTCH_TEST_SNAPSHOT_MB ?? 8);
interface Transfer {
  bytes: number;
  chunksSent: number;
  chunksNamed: number;
  bytesNamed: number;
}
type Created = { snapshot: { id: string; via: string; filesChanged: number; parent?: string }; transfer?: Transfer };
/** Path, type, mode, size, link count, mtime to the microsecond (tar.in's float seconds) and content digest of every entry under dir. */
const LISTING = (dir: string) =>
  `cd ${dir} && find . -mindepth 1 -printf '%p %y %m %s %n %TY%Tm%Td%TH%TM%TS\\n' | sed 's/\\([0-9]*\\.[0-9]\\{6\\}\\)[0-9]*$/\\1/' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum`;

beforeAll(async () => {
  h = makeHome("hutch-snapvm-");
  Object.assign(h.env, { HUTCH_QEMU_ACCEL: "tcg" });
  await installTestImage(h);
  await ok(["box", "create", "v", "--engine", "qemu", "--memory", "768M", "--start"]);
  await sh(
    "v",
    "mkdir -p '/workspace/with space/ünï' /workspace/empty/deeper && printf 'a\\n' > '/workspace/with space/ünï/f' && printf 'nl' > '/workspace/new\nline'" +
      " && head -c 3000000 /dev/urandom > /workspace/big.bin && ln /workspace/big.bin /workspace/big-link && ln -s big.bin /workspace/sym" +
      // Every time half-way through a microsecond: tar.in's float seconds land within ~240 ns, never across one.
      " && chmod 0750 /workspace/empty && find /workspace -depth -exec touch -h -d '2001-02-03 04:05:06.123456500' {} +",
  );
}, 900_000);
afterAll(() => h.cleanup(), 120_000);

describe("snapshots of a VM box", () => {
  let running = "";
  test("through the guest while it runs: ns mtimes and a hard link group kept", async () => {
    const out = opOutput<Created>(await ok(["snapshot", "create", "v", "--json"])).result;
    const s = out.snapshot;
    expect(s.via).toBe("guest");
    // The guest chunked: the 3 MB file crossed once, its hard link as a name.
    expect(out.transfer!.chunksSent).toBeGreaterThan(0);
    expect(out.transfer!.bytes).toBeGreaterThan(3_000_000);
    running = s.id;
    const store = await openStore(storeLocation(h.home));
    try {
      const top = await store.readTree((await store.getSnapshot(s.id)).tree, "/");
      const ws = await store.readTree(top.find((e) => e.name === "workspace")!.tree!, "workspace");
      const big = ws.find((e) => e.name === "big.bin")!;
      const link = ws.find((e) => e.name === "big-link")!;
      expect(big.mtime).toBe("981173106123456500");
      expect(link.nlink).toBe(2);
      expect(link.content).toEqual(big.content);
      expect(ws.find((e) => e.name === "empty")!.mode).toBe(0o750);
    } finally {
      store.close();
    }
  }, 600_000);

  test("while it is stopped: started, read through the guest, stopped again; and restored into the VM", async () => {
    const before = await sh("v", LISTING("/workspace"));
    await ok(["box", "stop", "v"]);
    const out = opOutput<Created>(await ok(["snapshot", "create", "v", "--json"])).result;
    const s = out.snapshot;
    expect(s.via).toBe("guest");
    expect(s.parent).toBe(running);
    expect(s.filesChanged).toBe(0);
    // Nothing changed: every chunk is named from the box's own have-map, none sent.
    expect(out.transfer).toMatchObject({ chunksSent: 0 });
    expect(out.transfer!.bytesNamed).toBeGreaterThan(3_000_000);
    expect((JSON.parse(await ok(["box", "info", "v", "--json"])) as { state: string }).state).toBe("stopped");
    const r = opOutput<{ into: string[] }>(await ok(["snapshot", "restore", "v", s.id, "--json"])).result;
    expect(await sh("v", LISTING(`${r.into[0]}/workspace`))).toBe(before);
  }, 600_000);

  test("after a one-file change the guest sends that file's chunk and names the rest", async () => {
    // The restore above is not part of the change.
    await sh("v", "rm -rf /home/hutch/Restored && printf 'changed\\n' > '/workspace/with space/ünï/f'");
    const out = opOutput<Created>(await ok(["snapshot", "create", "v", "--json"])).result;
    expect(out.snapshot.filesChanged).toBe(1);
    expect(out.transfer!.chunksSent).toBe(1);
    expect(out.transfer!.bytesNamed).toBeGreaterThan(3_000_000);
    // Entries and digests, not the 3 MB file.
    expect(out.transfer!.bytes).toBeLessThan(64 * 1024);
  }, 600_000);

  test(`the acceptance tree (${FILES} files, a ${BIG_MB} MiB binary) round-trips through the running VM identical: bytes, modes, ns mtimes, links, xattrs`, async () => {
    await treePy("v", "gen", "/workspace/tree", String(FILES), String(BIG_MB));
    const before = await treePy("v", "manifest", "/workspace/tree");
    expect(before.split("\n").length).toBeGreaterThan(FILES);
    const out = opOutput<Created>(await ok(["snapshot", "create", "v", "--json"])).result;
    const big = BIG_MB * 1024 * 1024;
    expect(out.transfer!.bytes).toBeGreaterThan(big);
    // big-too is a hard link: its chunks are not sent twice.
    expect(out.transfer!.bytes).toBeLessThan(big + 20 * 1024 * 1024);
    await sh("v", "rm -rf /workspace/tree");
    await ok(["snapshot", "restore", "v", out.snapshot.id, "--in-place", "--path", "workspace/tree", "--json"]);
    expect(await treePy("v", "manifest", "/workspace/tree")).toBe(before);
  }, 1_800_000);
});
