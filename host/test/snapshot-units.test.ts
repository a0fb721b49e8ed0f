// Table tests of the snapshot store's pure pieces: formats, bounds and rules
// that untrusted input must not get past.
import { describe, expect, test } from "bun:test";
import { decodeIndex, encodeIndex, type PackRecord } from "../src/snapshot/blob-index.ts";
import { decompress, frameProblem } from "../src/snapshot/compress.ts";
import { nonce, open, padme, seal } from "../src/snapshot/crypto.ts";
import { padTo } from "../src/snapshot/pack.ts";
import { snapshotPath } from "../src/snapshot/paths.ts";
import { keptByPolicy, type Dated } from "../src/snapshot/policy.ts";
import { linkInside } from "../src/snapshot/restore.ts";
import { decodeTree, encodeTree, type TreeEntry } from "../src/snapshot/tree.ts";
import { joinBytes } from "@hutch/shared/bytes";

const enc = new TextEncoder();

describe("padme", () => {
  test.each([
    [0, 0],
    [1, 1],
    [9, 10],
    [100, 104],
    [1000, 1024],
    [4096, 4096],
    [65537, 67584],
    [16 * 1024 * 1024 + 1, 16 * 1024 * 1024 + 512 * 1024],
  ])("%d → %d", (len, want) => {
    expect(padme(len)).toBe(want);
  });

  test("never shrinks, and costs at most 12% past 1 KiB", () => {
    for (let len = 1024; len < 1 << 26; len = Math.floor(len * 1.37) + 1) {
      expect(padme(len)).toBeGreaterThanOrEqual(len);
      expect(padme(len) / len).toBeLessThan(1.12);
    }
  });

  test.each([
    [100_000, 16 << 20, padme(100_000)],
    [(16 << 20) + 5, 16 << 20, (16 << 20) + 4096],
  ])("a pack of %d bytes against a target of %d is stored as %d", (len, target, want) => {
    expect(padTo(len, target)).toBe(want);
  });
});

describe("seal and open", () => {
  const key = new Uint8Array(32).fill(3);
  const aad = enc.encode("aad");
  const sealed = seal(key, nonce(0, 1), enc.encode("hello"), aad);

  test("round trip", () => {
    expect(new TextDecoder().decode(open(key, nonce(0, 1), sealed, aad)!)).toBe("hello");
  });

  test.each([
    ["another nonce", () => open(key, nonce(0, 2), sealed, aad)],
    ["another class of nonce", () => open(key, nonce(1, 1), sealed, aad)],
    ["other associated data", () => open(key, nonce(0, 1), sealed, enc.encode("aae"))],
    ["another key", () => open(new Uint8Array(32).fill(4), nonce(0, 1), sealed, aad)],
    [
      "a flipped byte",
      () =>
        open(
          key,
          nonce(0, 1),
          sealed.map((b, i) => (i === 2 ? b ^ 1 : b)),
          aad,
        ),
    ],
    ["a truncated seal", () => open(key, nonce(0, 1), sealed.subarray(0, sealed.length - 1), aad)],
    ["nothing", () => open(key, nonce(0, 1), new Uint8Array(0), aad)],
  ])("refuses %s", (_name, attempt) => {
    expect(attempt()).toBeNull();
  });

  test("nonces differ for every (class, counter)", () => {
    const seen = new Set<string>();
    for (const cls of [0, 1]) for (const c of [0, 1, 255, 256, 2 ** 32, 2 ** 32 + 1]) seen.add(nonce(cls, c).join(","));
    expect(seen.size).toBe(12);
  });
});

describe("frameProblem: what may be decompressed", () => {
  const plain = enc.encode("abc".repeat(100_000));
  const frame = Bun.zstdCompressSync(plain);
  const cat = (...parts: Uint8Array[]) => joinBytes(parts);

  test.each([
    ["the frame as made", frame, plain.length, null],
    ["a size the index does not say", frame, plain.length + 1, "declares"],
    ["a truncated frame", frame.subarray(0, frame.length - 3), plain.length, "truncated"],
    ["bytes after the frame", cat(frame, new Uint8Array(1)), plain.length, "after its frame"],
    [
      "a second frame after it (a decompression bomb)",
      cat(frame, Bun.zstdCompressSync(new Uint8Array(10 << 20))),
      plain.length,
      "after its frame",
    ],
    ["not zstd", plain.subarray(0, 100), 100, "not a zstd frame"],
    ["a dictionary flag", frame.map((b, i) => (i === 4 ? b | 1 : b)), plain.length, "dictionary"],
  ])("%s", (_name, bytes, raw, problem) => {
    const got = frameProblem(bytes, raw);
    if (problem === null) expect(got).toBeNull();
    else expect(got).toContain(problem);
  });

  test("a frame whose blocks could regenerate far more than it declares is refused", () => {
    // A hand-made frame: declares 10 bytes, then RLE blocks of 1 MiB each.
    const head = [0x28, 0xb5, 0x2f, 0xfd, 0x20, 10];
    const rle = (last: number) => {
      const h = (1 << 20) * 8 + (1 << 1) + last;
      return [h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff, 0x41];
    };
    const bytes = new Uint8Array([...head, ...rle(0), ...rle(0), ...rle(1)]);
    expect(frameProblem(bytes, 10)).toContain("regenerate more");
  });

  test("what zstd makes of a disk image and a binary passes: its pre-split blocks are small", async () => {
    // A qcow2's and a compiled binary's 1 MiB chunks compress to many blocks of 5-100 KiB, which counting
    // each compressed block at its 128 KiB maximum refused (half of a qcow2's chunks).
    const bin = new Uint8Array(
      await Bun.file(process.execPath)
        .slice(0, 8 << 20)
        .arrayBuffer(),
    );
    let checked = 0;
    for (let off = 0; off + (1 << 20) <= bin.length; off += 1 << 20) {
      const chunk = bin.subarray(off, off + (1 << 20));
      const z = Bun.zstdCompressSync(chunk, { level: 3 });
      expect(frameProblem(z, chunk.length)).toBeNull();
      expect(await decompress(z, chunk.length)).toEqual(chunk);
      checked++;
    }
    expect(checked).toBe(8);
  });

  test("a frame whose compressed blocks regenerate more than it declares does not decompress", async () => {
    // Repeated text, not zeros: compressed blocks, whose size no header gives (zeros make RLE blocks, refused above).
    const frame = Bun.zstdCompressSync(enc.encode("hutch carries boxes\n".repeat(3 << 20)), { level: 3 });
    // A 4-byte content size, after the window descriptor unless single-segment: declare 1 MiB instead of 64.
    expect(frame[4]! >> 6).toBe(2);
    const lying = frame.slice();
    lying.set([0, 0, 0x10, 0], (frame[4]! >> 5) & 1 ? 5 : 6);
    expect(frameProblem(lying, 1 << 20)).toBeNull();
    await expect(decompress(lying, 1 << 20)).rejects.toThrow();
  });
});

describe("keptByPolicy", () => {
  const day = 86_400_000;
  const t0 = Date.UTC(2026, 0, 5, 12); // a Monday
  const snaps: Dated[] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => ({
    id: `s${i}`,
    time: t0 + i * day,
    source: "a",
    tags: i === 2 ? ["keep"] : [],
  }));
  const twoPerDay: Dated[] = [0, 1, 2].flatMap((d) =>
    [1, 2].map((h) => ({ id: `d${d}h${h}`, time: t0 + d * day + h * 3_600_000, source: "a", tags: [] })),
  );

  test.each([
    ["an empty policy keeps everything", snaps, {}, snaps.map((s) => s.id)],
    ["keepLast 3", snaps, { keepLast: 3 }, ["s7", "s8", "s9"]],
    ["keepDaily 2 keeps the newest of each of the last two days", twoPerDay, { keepDaily: 2 }, ["d1h2", "d2h2"]],
    ["keepHourly 3", twoPerDay, { keepHourly: 3 }, ["d1h2", "d2h1", "d2h2"]],
    ["keepWeekly 2 (ISO weeks, Monday first)", snaps, { keepWeekly: 2 }, ["s6", "s9"]],
    ["keepMonthly 1", snaps, { keepMonthly: 1 }, ["s9"]],
    ["keepWithin 2 days of the newest", snaps, { keepWithinMs: 2 * day }, ["s7", "s8", "s9"]],
    ["keepTags", snaps, { keepLast: 1, keepTags: ["keep"] }, ["s2", "s9"]],
    ["rules add up", snaps, { keepLast: 1, keepWeekly: 2 }, ["s6", "s9"]],
  ])("%s", (_name, input, policy, want) => {
    expect([...keptByPolicy(input, policy)].sort()).toEqual([...want].sort());
  });

  test("each source is kept on its own", () => {
    const mixed: Dated[] = [...snaps, { id: "b0", time: t0, source: "b", tags: [] }];
    expect(keptByPolicy(mixed, { keepLast: 1 })).toEqual(new Set(["s9", "b0"]));
  });
});

describe("linkInside: where a symlink lands", () => {
  test.each([
    [[], "a", true],
    [["d"], "../a", true],
    [["d", "e"], "../../a", true],
    [["d"], "../../a", false],
    [[], "../a", false],
    [[], "/etc/passwd", false],
    [["d"], "./x/../../y", true],
    [["d"], "x/../../../y", false],
    [[], "a//b/./c", true],
  ])("from %o to %s: %p", (dir, target, inside) => {
    expect(linkInside(dir, target)).toBe(inside);
  });
});

describe("snapshotPath: paths a caller gives", () => {
  test.each([
    ["src/app.ts", ["src", "app.ts"]],
    ["./src//app.ts/", ["src", "app.ts"]],
    ["", []],
    [".", []],
    ["a b/ü\nx", ["a b", "ü\nx"]],
  ])("%p → %o", (path, want) => {
    expect(snapshotPath(path)).toEqual(want);
  });

  test.each([
    ["../x", '".."'],
    ["a/../../b", '".."'],
    ["a/..", '".."'],
    ["/etc", "absolute"],
    ["a\0b", "NUL"],
  ])("%p is refused", (path, why) => {
    expect(() => snapshotPath(path)).toThrow(why);
  });
});

describe("decodeTree: manifests are untrusted", () => {
  const file: TreeEntry = {
    name: "a",
    type: "file",
    mode: 0o644,
    mtime: "1700000000123456789",
    uid: 1000,
    gid: 1000,
    size: 0,
    content: [],
    ino: "5",
    ctime: "1",
  };
  const id = "ab".repeat(32);
  const doc = (entries: unknown[]) => enc.encode(JSON.stringify({ v: 1, entries }));

  test("what encodeTree writes, decodeTree reads back", () => {
    const entries: TreeEntry[] = [
      { ...file, name: " spaced name" },
      { name: "dir", type: "dir", mode: 0o755, mtime: "-5", uid: 0, gid: 0, tree: id },
      { ...file, name: "linked", size: 3, content: [id], nlink: 2, dev: "64768", xattrs: [["user.a", "AQI="]] },
      { name: "link", type: "symlink", mode: 0o777, mtime: "0", uid: 0, gid: 0, target: "../x" },
      { ...file, name: "ünï\ncode" },
    ].sort((a, b) => (a.name < b.name ? -1 : 1)) as TreeEntry[];
    expect(decodeTree("t", encodeTree(entries))).toEqual(entries);
  });

  test.each([
    ["a name of ..", [{ ...file, name: ".." }], '".."'],
    ["a name of .", [{ ...file, name: "." }], '"."'],
    ["an absolute name", [{ ...file, name: "/etc/passwd" }], 'with "/"'],
    ["a name with a slash", [{ ...file, name: "a/b" }], 'with "/"'],
    ["an empty name", [{ ...file, name: "" }], "empty name"],
    ["a NUL in a name", [{ ...file, name: "a\0" }], "NUL"],
    ["a name over 255 bytes", [{ ...file, name: "é".repeat(128) }], "at most 255 bytes"],
    [
      "names out of order",
      [
        { ...file, name: "b" },
        { ...file, name: "a" },
      ],
      "out of order",
    ],
    ["a repeated name", [file, file], "repeated"],
    ["an unknown type", [{ ...file, type: "device" }], "unknown type"],
    ["an unknown field", [{ ...file, extra: 1 }], "unknown field"],
    ["a field of another type", [{ ...file, target: "x" }], "unknown field"],
    ["a mode beyond 07777", [{ ...file, mode: 0o10000 }], "bad mode"],
    ["a fractional mtime", [{ ...file, mtime: "1.5" }], "bad mtime"],
    ["a bad chunk id", [{ ...file, size: 1, content: ["../../etc"] }], "chunk list"],
    ["chunks for an empty file", [{ ...file, content: [id] }], "does not fit its size"],
    ["a bad tree id", [{ name: "d", type: "dir", mode: 0, mtime: "0", uid: 0, gid: 0, tree: "x" }], "tree id"],
    ["an empty symlink target", [{ name: "l", type: "symlink", mode: 0, mtime: "0", uid: 0, gid: 0, target: "" }], "symlink target"],
    ["a link count of one", [{ ...file, nlink: 1, dev: "1" }], "link count"],
    [
      "unsorted xattrs",
      [
        {
          ...file,
          xattrs: [
            ["user.b", ""],
            ["user.a", ""],
          ],
        },
      ],
      "xattr name",
    ],
  ])("refuses %s", (_name, entries, why) => {
    expect(() => decodeTree("tree x", doc(entries))).toThrow(why);
  });

  test.each([
    ["not JSON", enc.encode("{"), "not valid JSON"],
    ["not UTF-8", new Uint8Array([0x7b, 0xff, 0x7d]), "not valid JSON"],
    ["another version", enc.encode(JSON.stringify({ v: 2, entries: [] })), "version 1"],
    ["extra top-level keys", enc.encode(JSON.stringify({ v: 1, entries: [], x: 1 })), "version 1"],
  ])("refuses a tree that is %s", (_name, bytes, why) => {
    expect(() => decodeTree("tree x", bytes)).toThrow(why);
  });
});

describe("decodeIndex: index files are untrusted", () => {
  const blob = (offset: number, length: number) => ({
    type: "data" as const,
    flags: 0,
    id: new Uint8Array(32).fill(offset % 251),
    offset,
    length,
    rawLength: 10,
  });
  const pack = (blobs: ReturnType<typeof blob>[], size = 10_000): PackRecord => ({ name: "cd".repeat(32), size, blobs });

  test("round trip", () => {
    const packs = [pack([blob(0, 100), blob(100, 50)]), { ...pack([blob(0, 16)]), name: "ef".repeat(32) }];
    expect([...decodeIndex("i", encodeIndex(packs))]).toEqual(packs);
  });

  test.each([
    ["overlapping blobs", [pack([blob(0, 100), blob(50, 100)])], "invalid entry"],
    ["a blob past the pack's end", [pack([blob(0, 100)], 110)], "invalid entry"],
    ["a blob shorter than its tag", [pack([blob(0, 3)])], "invalid entry"],
  ])("refuses %s", (_name, packs, why) => {
    expect(() => [...decodeIndex("index/x", encodeIndex(packs))]).toThrow(why);
  });

  test("refuses truncation and trailing bytes", () => {
    const body = encodeIndex([pack([blob(0, 100)])]);
    expect(() => [...decodeIndex("index/x", body.subarray(0, body.length - 1))]).toThrow("index holds");
    const longer = new Uint8Array(body.length + 1);
    longer.set(body);
    expect(() => [...decodeIndex("index/x", longer)]).toThrow("after its last pack");
    const lying = body.slice();
    new DataView(lying.buffer).setUint32(4, 2, true);
    expect(() => [...decodeIndex("index/x", lying)]).toThrow("truncated");
  });
});
