// snapshotStreams: a snapshot from tar archives (what a running box's guest
// sends), read as untrusted input: real archives from packTar round-trip; a
// crafted archive that breaks a rule is refused naming the entry, and leaves
// no snapshot.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { packTar } from "@hutch/shared/node";
import { BLOCK, encodeHeader, utf8 } from "../../shared/src/tar/header.ts";
import { listSnapshots, restoreTree } from "../src/snapshot/index.ts";
import { snapshotStreams } from "../src/snapshot/stream-save.ts";
import { bytes, cleanupTemps, newStore, tempDir, text } from "./snapshot-helpers.ts";

afterAll(cleanupTemps);

/** A tar of [name, type, body] entries, ending with the two zero blocks. */
function craft(entries: [string, "0" | "1" | "2" | "5", string | Uint8Array, string?][]): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const [name, typeflag, body, link] of entries) {
    const data = typeof body === "string" ? utf8(body) : body;
    out.push(
      encodeHeader({
        name: utf8(name),
        mode: typeflag === "5" ? 0o755 : 0o644,
        size: typeflag === "0" ? data.length : 0,
        mtime: 1_700_000_000,
        typeflag,
        ...(link ? { linkname: utf8(link) } : {}),
      }),
    );
    if (typeflag === "0" && data.length > 0) {
      out.push(data);
      const pad = (BLOCK - (data.length % BLOCK)) % BLOCK;
      if (pad) out.push(new Uint8Array(pad));
    }
  }
  out.push(new Uint8Array(2 * BLOCK));
  return out;
}

describe("snapshotStreams", () => {
  test("archives from packTar round-trip, and a second save stores only what changed", async () => {
    const ws = join(tempDir(), "workspace");
    mkdirSync(join(ws, "src"), { recursive: true });
    mkdirSync(join(ws, "empty"));
    writeFileSync(join(ws, "src", "a.ts"), text(3000, 1));
    writeFileSync(join(ws, "big.bin"), bytes(5 * 1024 * 1024, 9));
    symlinkSync("src/a.ts", join(ws, "link"));
    const home = join(tempDir(), "hutch");
    mkdirSync(home);
    writeFileSync(join(home, ".note"), "home\n");
    const { store } = await newStore();
    const save = () =>
      snapshotStreams(
        store,
        [
          { name: "workspace", tar: packTar(ws) },
          { name: "home", tar: packTar(home) },
        ],
        { source: "box:test" },
      );

    const one = await save();
    expect(one.stats).toMatchObject({ files: 3, symlinks: 1, filesChanged: 3 });
    writeFileSync(join(ws, "src", "a.ts"), text(3001, 1));
    const two = await save();
    expect(two.stats).toMatchObject({ files: 3, filesChanged: 1 });
    // The 5 MB file arrived again in full but added nothing.
    expect(two.stats.bytesStored).toBeLessThan(64 * 1024);
    expect((await listSnapshots(store)).map((s) => s.parent)).toEqual([undefined, one.id]);

    const dest = join(tempDir(), "out");
    await restoreTree(store, two.id, dest);
    expect(readFileSync(join(dest, "workspace", "src", "a.ts"), "utf8")).toBe(text(3001, 1));
    expect(readFileSync(join(dest, "workspace", "big.bin")).equals(Buffer.from(bytes(5 * 1024 * 1024, 9)))).toBe(true);
    expect(readlinkSync(join(dest, "workspace", "link"))).toBe("src/a.ts");
    expect(readFileSync(join(dest, "home", ".note"), "utf8")).toBe("home\n");
    store.close();
  });

  const bad: [string, [string, "0" | "1" | "2" | "5", string, string?][], RegExp][] = [
    [
      "an entry before its directory",
      [
        ["w/", "5", ""],
        ["w/sub/x", "0", "x"],
      ],
      /does not lie in a directory sent before it/,
    ],
    [
      "a name sent twice",
      [
        ["w/", "5", ""],
        ["w/x", "0", "1"],
        ["w/x", "0", "2"],
      ],
      /sent twice/,
    ],
    ["a top entry that is a file", [["w", "0", "x"]], /does not lie in a directory/],
    [
      "a hard link to a path not sent before it",
      [
        ["w/", "5", ""],
        ["w/b", "1", "", "w/a"],
        ["w/a", "0", "x"],
      ],
      /not a file sent before it/,
    ],
    [
      "a hard link to a directory",
      [
        ["w/", "5", ""],
        ["w/d/", "5", ""],
        ["w/b", "1", "", "w/d"],
      ],
      /not a file sent before it/,
    ],
    [
      "a hard link leaving the archive",
      [
        ["w/", "5", ""],
        ["w/b", "1", "", "../etc/passwd"],
      ],
      /refused|\.\./,
    ],
    [
      "a .. component",
      [
        ["w/", "5", ""],
        ["w/../etc/passwd", "0", "x"],
      ],
      /refused|\.\./,
    ],
  ];
  for (const [what, entries, message] of bad) {
    test(`refuses ${what}, and writes no snapshot`, async () => {
      const { store } = await newStore();
      await expect(snapshotStreams(store, [{ name: "workspace", tar: craft(entries) }], { source: "box:bad" })).rejects.toThrow(message);
      expect(await listSnapshots(store)).toEqual([]);
      store.close();
    });
  }

  test("a symlink pointing out of the tree is stored as it is, and a restore refuses it, writing nothing", async () => {
    const { store } = await newStore();
    const r = await snapshotStreams(
      store,
      [
        {
          name: "workspace",
          tar: craft([
            ["w/", "5", ""],
            ["w/ok", "0", "fine"],
            ["w/out", "2", "", "/etc/shadow"],
          ]),
        },
      ],
      { source: "box:links" },
    );
    expect(r.stats.symlinks).toBe(1);
    const dest = join(tempDir(), "out");
    await expect(restoreTree(store, r.id, dest)).rejects.toThrow(/points outside the restored tree/);
    expect(existsSync(dest)).toBe(false);
    store.close();
  });

  test("refuses a truncated archive", async () => {
    const { store } = await newStore();
    const whole = craft([
      ["w/", "5", ""],
      ["w/x", "0", "hello"],
    ]);
    await expect(snapshotStreams(store, [{ name: "workspace", tar: whole.slice(0, 2) }], { source: "box:bad" })).rejects.toThrow(
      /truncated/,
    );
    expect(await listSnapshots(store)).toEqual([]);
    store.close();
  });

  test("refuses archives beyond the entry limit", async () => {
    const { store } = await newStore();
    const many: [string, "0", string][] = Array.from({ length: 20 }, (_, i) => [`w/f${i}`, "0", "x"]);
    await expect(
      snapshotStreams(store, [{ name: "workspace", tar: craft([["w/", "5", ""], ...many]) }], {
        source: "box:bad",
        limits: { maxEntries: 10, maxBytes: 1e9 },
      }),
    ).rejects.toThrow(/more than 10 entries|maxEntries/);
    store.close();
  });
});
