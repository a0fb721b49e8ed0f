import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { joinBytes } from "../src/bytes.ts";
import {
  chmod,
  link,
  lstat,
  lutimes,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  rm,
  symlink,
  truncate,
  utimes,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TarError } from "../src/tar/index.ts";
import { createUnpacker, packTar, type UnpackOptions } from "../node/index.ts";

const temps: string[] = [];
afterAll(async () => {
  for (const t of temps) await rm(t, { recursive: true, force: true });
});
async function tmp(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "hutch-tar-"));
  temps.push(dir);
  return dir;
}

const enc = new TextEncoder();
const LONG = `${"n".repeat(146)}.txt`; // 150 characters

async function packBytes(path: string, opts?: { maxBytes?: number }): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const c of packTar(path, opts)) chunks.push(c);
  return joinBytes(chunks);
}

async function unpack(bytes: Uint8Array, dest: string, opts?: UnpackOptions, split = 65536): Promise<{ entries: number; bytes: number }> {
  const u = createUnpacker(dest, opts);
  for (let off = 0; off < bytes.length; off += split) await u.write(bytes.subarray(off, off + split));
  return u.end();
}

/** Sets every mtime in the tree, children before parents so parents keep theirs. */
async function stamp(path: string, seconds: number): Promise<void> {
  const st = await lstat(path);
  if (st.isDirectory()) for (const c of await readdir(path)) await stamp(join(path, c), seconds + 1);
  await lutimes(path, seconds, seconds);
}

/**
 * A full description of a tree: type, permission bits, mtime, content hash, link
 * target. `withRoot: false` leaves out the root itself, whose mtime a refused
 * extraction still bumps by creating and removing its staging directory.
 */
async function snapshot(root: string, withRoot = true): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (abs: string, rel: string): Promise<void> => {
    const st = await lstat(abs);
    const mtime = Math.floor(st.mtimeMs / 1000);
    if (st.isSymbolicLink()) {
      out[rel] = `link ${await readlink(abs)} ${mtime}`;
    } else if (st.isDirectory()) {
      out[rel] = `dir ${(st.mode & 0o7777).toString(8)} ${mtime}`;
      for (const c of await readdir(abs)) await walk(join(abs, c), `${rel}/${c}`);
    } else {
      const sha = createHash("sha256")
        .update(await readFile(abs))
        .digest("hex");
      out[rel] = `file ${(st.mode & 0o7777).toString(8)} ${mtime} ${st.size} ${sha}`;
    }
  };
  await walk(root, ".");
  if (!withRoot) delete out["."];
  return out;
}

/** The round-trip fixture; `big` adds a 3 MiB random file. */
async function makeTree(parent: string, big = true): Promise<string> {
  const root = join(parent, "tree");
  await mkdir(join(root, "a/b/c"), { recursive: true });
  await writeFile(join(root, "a/b/c/deep.txt"), "deep\n");
  await mkdir(join(root, "empty"));
  await symlink("a/b/c/deep.txt", join(root, "rel-link"));
  await symlink("/etc/hostname", join(root, "abs-link"));
  await writeFile(join(root, LONG), "long name\n");
  await writeFile(join(root, "zero"), "");
  await writeFile(join(root, "run.sh"), "#!/bin/sh\necho hi\n", { mode: 0o755 });
  await chmod(join(root, "run.sh"), 0o755);
  await writeFile(join(root, "ro.txt"), "read only\n");
  await chmod(join(root, "ro.txt"), 0o444);
  await mkdir(join(root, "private"));
  await writeFile(join(root, "private/odd.bin"), randomBytes(1000));
  await chmod(join(root, "private"), 0o750);
  if (big) await writeFile(join(root, "big.bin"), randomBytes(3 * 1024 * 1024));
  await stamp(root, 1_600_000_000);
  return root;
}

function run(cmd: string, args: string[]): { stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

// Hand-built ustar headers, independent of the module's own encoder.
function header(name: string, o: { type?: string; size?: number; link?: string; mode?: number } = {}): Uint8Array {
  const b = new Uint8Array(512);
  const put = (off: number, s: string): void => b.set(enc.encode(s), off);
  put(0, name);
  put(100, (o.mode ?? 0o644).toString(8).padStart(7, "0"));
  put(108, "0000000");
  put(116, "0000000");
  put(124, (o.size ?? 0).toString(8).padStart(11, "0"));
  put(136, "13000000000");
  put(156, o.type ?? "0");
  put(157, o.link ?? "");
  put(257, "ustar\u000000");
  put(148, "        ");
  const sum = b.reduce((s, x) => s + x, 0);
  put(148, `${sum.toString(8).padStart(6, "0")}\u0000 `);
  return b;
}
function body(content: string | Uint8Array): Uint8Array {
  const bytes = typeof content === "string" ? enc.encode(content) : content;
  const out = new Uint8Array(Math.ceil(bytes.length / 512) * 512);
  out.set(bytes);
  return out;
}
function file(name: string, content: string, mode?: number): Uint8Array[] {
  return [header(name, { size: enc.encode(content).length, mode }), body(content)];
}
function paxHeader(records: Record<string, string>): Uint8Array[] {
  const text = Object.entries(records)
    .map(([k, v]) => {
      const rest = ` ${k}=${v}\n`;
      let len = rest.length + 2;
      while (String(len).length + rest.length !== len) len = String(len).length + rest.length;
      return `${len}${rest}`;
    })
    .join("");
  return [header("PaxHeader", { type: "x", size: enc.encode(text).length }), body(text)];
}
function tarOf(...entries: Uint8Array[][]): Uint8Array {
  return joinBytes([...entries.flat(), new Uint8Array(1024)]);
}

/** Runs a refused extraction and checks destDir is exactly as before. */
async function expectRefused(bytes: Uint8Array, message: RegExp, opts?: UnpackOptions): Promise<string> {
  const dest = await tmp();
  await writeFile(join(dest, "keep.txt"), "keep");
  const before = await snapshot(dest, false);
  const err = await unpack(bytes, dest, opts, 100).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TarError);
  expect((err as Error).message).toMatch(message);
  expect(await readdir(dest)).toEqual(["keep.txt"]);
  expect(await snapshot(dest, false)).toEqual(before);
  return dest;
}

describe("round trip", () => {
  test("pack then unpack reproduces the tree exactly", async () => {
    const src = await makeTree(await tmp());
    const dest = await tmp();
    const result = await unpack(await packBytes(src), dest);
    const want = await snapshot(src);
    expect(Object.keys(want)).toHaveLength(15);
    expect(await snapshot(join(dest, "tree"))).toEqual(want);
    expect(result.entries).toBe(15);
    expect(result.bytes).toBe(3 * 1024 * 1024 + 5 + 10 + 18 + 10 + 1000);
    expect(await readdir(dest)).toEqual(["tree"]);
  });

  test("bytes fed one at a time give the same tree", async () => {
    const src = await makeTree(await tmp(), false);
    const dest = await tmp();
    await unpack(await packBytes(src), dest, undefined, 1);
    expect(await snapshot(join(dest, "tree"))).toEqual(await snapshot(src));
  });

  test("a single file and a lone symlink pack as the top entry", async () => {
    const dir = await tmp();
    await writeFile(join(dir, "f.txt"), "x");
    await symlink("../somewhere", join(dir, "l"));
    const dest = await tmp();
    await unpack(await packBytes(join(dir, "f.txt")), dest);
    await unpack(await packBytes(join(dir, "l")), dest);
    expect(await readFile(join(dest, "f.txt"), "utf8")).toBe("x");
    expect(await readlink(join(dest, "l"))).toBe("../somewhere");
  });

  test("output is deterministic and chunks stay within 256 KiB", async () => {
    const src = await makeTree(await tmp());
    const sizes: number[] = [];
    for await (const c of packTar(src)) sizes.push(c.length);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(256 * 1024);
    expect(await packBytes(src)).toEqual(await packBytes(src));
  });

  test("a 1 GiB file streams in bounded chunks", async () => {
    const dir = await tmp();
    const big = join(dir, "huge");
    await writeFile(big, "");
    await truncate(big, 1024 ** 3);
    let total = 0;
    let max = 0;
    for await (const c of packTar(big)) {
      total += c.length;
      max = Math.max(max, c.length);
    }
    expect(total).toBe(1024 ** 3 + 512 + 1024);
    expect(max).toBeLessThanOrEqual(256 * 1024);
  });

  test("sockets, FIFOs and devices are skipped", async () => {
    const src = join(await tmp(), "tree");
    await mkdir(src);
    await writeFile(join(src, "real"), "r");
    run("mkfifo", [join(src, "pipe")]);
    const dest = await tmp();
    const result = await unpack(await packBytes(src), dest);
    expect(result.entries).toBe(2);
    expect(await readdir(join(dest, "tree"))).toEqual(["real"]);
  });

  test("packTar enforces maxBytes", async () => {
    const src = await makeTree(await tmp());
    await expect(packBytes(src, { maxBytes: 1024 * 1024 })).rejects.toThrow(/"tree\/big.bin": archive exceeds maxBytes/);
  });
});

describe("interop with GNU tar", () => {
  async function longTree(parent: string, withLongLink: boolean): Promise<string> {
    const root = join(parent, "tree");
    const deep = join(root, "d".repeat(60), "e".repeat(60));
    await mkdir(deep, { recursive: true });
    await writeFile(join(deep, "f".repeat(30)), "nested\n");
    await writeFile(join(root, LONG), "long\n");
    if (withLongLink) await symlink(`../${"t".repeat(120)}/target`, join(root, "long-link"));
    await symlink("d".repeat(60), join(root, "short-link"));
    await stamp(root, 1_650_000_000);
    return root;
  }

  for (const format of ["gnu", "pax", "ustar"]) {
    test(`tar --format=${format} output unpacks exactly`, async () => {
      const dir = await tmp();
      // ustar cannot carry the long link or the 150-char single component.
      const src = await longTree(dir, format !== "ustar");
      if (format === "ustar") await rm(join(src, LONG));
      run("tar", [`--format=${format}`, "-cf", join(dir, "t.tar"), "-C", dir, "tree"]);
      const dest = await tmp();
      await unpack(new Uint8Array(await readFile(join(dir, "t.tar"))), dest);
      const want = await snapshot(src);
      expect(Object.keys(want).length).toBeGreaterThanOrEqual(5);
      expect(await snapshot(join(dest, "tree"))).toEqual(want);
    });
  }

  test("our archive extracts and lists cleanly with tar", async () => {
    const dir = await tmp();
    const src = await makeTree(dir);
    await symlink(`../${"t".repeat(120)}/target`, join(src, "long-link"));
    await lutimes(src, 1_600_000_000, 1_600_000_000);
    await writeFile(join(dir, "ours.tar"), await packBytes(src));
    const dest = await tmp();
    const x = run("tar", ["-xpf", join(dir, "ours.tar"), "-C", dest]);
    expect(x.stderr).toBe("");
    expect(await snapshot(join(dest, "tree"))).toEqual(await snapshot(src));
    const list = run("tar", ["-tvf", join(dir, "ours.tar")]);
    expect(list.stderr).toBe("");
    expect(list.stdout).toContain(`tree/${LONG}`);
    expect(list.stdout).toContain("tree/rel-link -> a/b/c/deep.txt");
    expect(list.stdout).toContain(`tree/long-link -> ../${"t".repeat(120)}/target`);
    expect(list.stdout).toMatch(/-rwxr-xr-x .* tree\/run\.sh/);
    expect(list.stdout).toMatch(/drwxr-x--- .* tree\/private\//);
  });
});

const hasNode = spawnSync("node", ["--version"]).status === 0;

describe("runtime neutrality", () => {
  test.skipIf(!hasNode)("the module round-trips a tree under Node", async () => {
    const dir = await tmp();
    const src = await makeTree(dir);
    const bundle = join(dir, "tar.mjs");
    run(process.execPath, ["build", join(import.meta.dir, "../node/index.ts"), "--target=node", `--outfile=${bundle}`]);
    const dest = await tmp();
    const script = `
      const { packTar, createUnpacker } = await import(${JSON.stringify(bundle)});
      const u = createUnpacker(${JSON.stringify(dest)});
      for await (const chunk of packTar(${JSON.stringify(src)})) await u.write(chunk);
      console.log(JSON.stringify(await u.end()));`;
    const out = run("node", ["--input-type=module", "-e", script]);
    expect(JSON.parse(out.stdout)).toEqual({ entries: 15, bytes: 3 * 1024 * 1024 + 1043 });
    expect(await snapshot(join(dest, "tree"))).toEqual(await snapshot(src));
  });
});

describe("hostile archives are refused and leave nothing behind", () => {
  test("absolute name", async () => {
    await expectRefused(tarOf(file("/tmp/evil", "x")), /absolute/);
  });

  test("'..' components", async () => {
    await expectRefused(tarOf(file("../evil", "x")), /"\.\."/);
    await expectRefused(tarOf([header("top/", { type: "5" })], file("top/a/../../../evil", "x")), /"\.\."/);
  });

  test("'..' smuggled in a pax path or a GNU long name", async () => {
    await expectRefused(tarOf(paxHeader({ path: "../evil" }), file("harmless", "x")), /"\.\."/);
    const long = "/abs/evil\0";
    await expectRefused(tarOf([header("././@LongLink", { type: "L", size: long.length }), body(long)], file("harmless", "x")), /absolute/);
  });

  test("NUL inside a pax path, and an empty name", async () => {
    await expectRefused(tarOf(paxHeader({ path: "a\0b" }), file("harmless", "x")), /NUL/);
    await expectRefused(tarOf(file("./", "x")), /empty name/);
  });

  test("writing through a symlink does not escape", async () => {
    const outside = join(await tmp(), "outside");
    await mkdir(outside);
    await expectRefused(
      tarOf([header("link", { type: "2", link: outside })], file("link/pwned", "owned")),
      /parent "link" is a symlink.*write through/,
    );
    await expectRefused(
      tarOf([header("top/", { type: "5" })], [header("top/link", { type: "2", link: outside })], file("top/link/pwned", "owned")),
      /parent "top\/link" is a symlink/,
    );
    expect(await readdir(outside)).toEqual([]);
  });

  test("a file entry over an existing symlink", async () => {
    const outside = await tmp();
    await writeFile(join(outside, "target"), "original");
    await expectRefused(
      tarOf([header("top/", { type: "5" })], [header("top/l", { type: "2", link: join(outside, "target") })], file("top/l", "owned")),
      /would replace an existing symlink/,
    );
    expect(await readFile(join(outside, "target"), "utf8")).toBe("original");
  });

  test("hardlinks, devices, FIFOs and unknown types", async () => {
    await expectRefused(tarOf([header("h", { type: "1", link: "/etc/passwd" })]), /"h": hardlinks/);
    await expectRefused(tarOf([header("dev", { type: "3" })]), /character devices/);
    await expectRefused(tarOf([header("fifo", { type: "6" })]), /FIFOs/);
    await expectRefused(tarOf([header("vol", { type: "V" })]), /unsupported entry type 'V'/);
  });

  test("with links: a hard link only to a file the same archive wrote", async () => {
    const links: UnpackOptions = { links: true };
    await expectRefused(tarOf([header("keep.txt", { type: "1", link: "keep.txt" })]), /did not write/, links);
    await expectRefused(tarOf([header("h", { type: "1", link: "../etc/passwd" })]), /\.\./, links);
    await expectRefused(tarOf([header("d/", { type: "5" })], [header("h", { type: "1", link: "d" })]), /did not write/, links);
  });

  test("with links: snapshot metadata round-trips hard links and sub-second mtimes", async () => {
    const src = join(await tmp(), "t");
    await mkdir(join(src, "sub"), { recursive: true });
    await writeFile(join(src, "a"), "one inode");
    await link(join(src, "a"), join(src, "sub", "b"));
    await utimes(join(src, "a"), 1_700_000_000.25, 1_700_000_000.25);
    const chunks: Uint8Array[] = [];
    for await (const c of packTar(src, { meta: true })) chunks.push(c);
    const dest = await tmp();
    await unpack(joinBytes(chunks), dest, { links: true });
    const a = await lstat(join(dest, "t", "a"));
    const b = await lstat(join(dest, "t", "sub", "b"));
    expect(b.ino).toBe(a.ino);
    expect(a.nlink).toBe(2);
    // node's utimes takes float seconds: the fraction survives to about a microsecond (whole seconds without links).
    expect(Math.abs(a.mtimeMs - (await lstat(join(src, "a"))).mtimeMs)).toBeLessThan(0.001);
    expect(Math.round(a.mtimeMs) % 1000).toBe(250);
    // Without links the same archive is refused: tar.in for a copy never makes links.
    await expectRefused(joinBytes(chunks), /hardlinks/);
  });

  test("bad header checksum in a real tar archive", async () => {
    const dir = await tmp();
    await writeFile(join(dir, "f"), "data");
    run("tar", ["-cf", join(dir, "t.tar"), "-C", dir, "f"]);
    const bytes = new Uint8Array(await readFile(join(dir, "t.tar")));
    bytes[0] = "g".charCodeAt(0);
    await expectRefused(bytes, /checksum mismatch/);
  });

  test("truncated archives", async () => {
    const full = await packBytes(await makeTree(await tmp()));
    await expectRefused(full.subarray(0, full.length - 100_000), /archive truncated inside entry/);
    // Cut exactly at an entry boundary: only the missing end marker shows it.
    await expectRefused(full.subarray(0, full.length - 1024), /end-of-archive marker missing/);
    await expectRefused(full.subarray(0, 700), /archive truncated/);
  });

  test("maxBytes and maxEntries", async () => {
    const full = await packBytes(await makeTree(await tmp()));
    await expectRefused(full, /maxBytes \(1048576 bytes\)/, { maxBytes: 1024 * 1024 });
    await expectRefused(full, /maxEntries \(5\)/, { maxEntries: 5 });
    // A size claimed in the header is refused before any data arrives.
    await expectRefused(tarOf([header("huge", { size: 0o77777777777 })]), /maxBytes/, { maxBytes: 1000 });
  });

  test("GNU sparse files from real tar", async () => {
    const dir = await tmp();
    await writeFile(join(dir, "sparse"), "head");
    await truncate(join(dir, "sparse"), 4 * 1024 * 1024);
    run("tar", ["--format=pax", "-S", "-cf", join(dir, "s.tar"), "-C", dir, "sparse"]);
    await expectRefused(new Uint8Array(await readFile(join(dir, "s.tar"))), /sparse files are not supported/);
  });

  test("oversized pax header", async () => {
    await expectRefused(tarOf([header("PaxHeader", { type: "x", size: 2 * 1024 * 1024 })]), /extended header/);
  });

  test("topName with two top components", async () => {
    await expectRefused(tarOf(file("a/x", "1"), file("b/y", "2")), /topName needs a single top entry/, {
      topName: "renamed",
    });
  });

  test("abort removes the staging directory", async () => {
    const dest = await tmp();
    const bytes = await packBytes(await makeTree(await tmp()));
    const u = createUnpacker(dest);
    await u.write(bytes.subarray(0, bytes.length / 2));
    expect((await readdir(dest)).some((n) => n.startsWith(".hutch-unpack-"))).toBe(true);
    await u.abort();
    expect(await readdir(dest)).toEqual([]);
    await expect(u.write(bytes.subarray(0, 1))).rejects.toThrow(/aborted/);
  });
});

describe("extraction semantics", () => {
  test("topName renames the top entry", async () => {
    const src = await makeTree(await tmp(), false);
    const dest = await tmp();
    await unpack(await packBytes(src), dest, { topName: "copy" });
    expect(await readdir(dest)).toEqual(["copy"]);
    expect(await snapshot(join(dest, "copy"))).toEqual(await snapshot(src));
  });

  test("setuid and sticky bits are dropped, permission bits kept", async () => {
    const dest = await tmp();
    await unpack(tarOf([header("d/", { type: "5", mode: 0o1775 })], file("d/suid", "x", 0o4755)), dest);
    expect((await lstat(join(dest, "d/suid"))).mode & 0o7777).toBe(0o755);
    expect((await lstat(join(dest, "d"))).mode & 0o7777).toBe(0o775);
  });

  test("a umask clears its bits from every file and directory, as tar --no-same-permissions does", async () => {
    const dest = await tmp();
    const archive = tarOf(
      [header("d/", { type: "5", mode: 0o777 })],
      [header("d/sticky/", { type: "5", mode: 0o1777 })],
      file("d/suid", "x", 0o4777),
      file("d/shared", "y", 0o666),
      // A parent the archive never names is made by mkdir, under the process's own umask.
      file("d/implied/f", "z", 0o777),
    );
    await unpack(archive, dest, { umask: 0o022 });
    const modes = Object.fromEntries(
      await Promise.all(
        ["d", "d/sticky", "d/suid", "d/shared", "d/implied/f"].map(async (p) => [
          p,
          ((await lstat(join(dest, p))).mode & 0o7777).toString(8),
        ]),
      ),
    );
    expect(modes).toEqual({ d: "755", "d/sticky": "755", "d/suid": "755", "d/shared": "644", "d/implied/f": "755" });
    const strict = await tmp();
    await unpack(archive, strict, { umask: 0o077 });
    expect((await lstat(join(strict, "d"))).mode & 0o7777).toBe(0o700);
    expect((await lstat(join(strict, "d/suid"))).mode & 0o7777).toBe(0o700);
  });

  test("a directory merges into an existing one and a file replaces a file", async () => {
    const src = await makeTree(await tmp(), false);
    const dest = await tmp();
    await mkdir(join(dest, "tree/a"), { recursive: true });
    await writeFile(join(dest, "tree/mine.txt"), "mine");
    await writeFile(join(dest, "tree/zero"), "old content");
    await chmod(join(dest, "tree"), 0o700);
    await unpack(await packBytes(src), dest);
    expect(await readFile(join(dest, "tree/mine.txt"), "utf8")).toBe("mine");
    expect(await readFile(join(dest, "tree/zero"), "utf8")).toBe("");
    expect(await readFile(join(dest, "tree/a/b/c/deep.txt"), "utf8")).toBe("deep\n");
    // The user's existing directory keeps its own mode.
    expect((await lstat(join(dest, "tree"))).mode & 0o777).toBe(0o700);
    expect((await readdir(dest)).sort()).toEqual(["tree"]);
  });

  test("a type mismatch at the destination refuses before moving anything", async () => {
    const bytes = await packBytes(await makeTree(await tmp(), false));
    const dest = await tmp();
    await mkdir(join(dest, "tree"));
    await mkdir(join(dest, "tree/zero"));
    const before = await snapshot(dest, false);
    await expect(unpack(bytes, dest)).rejects.toThrow(/"tree\/zero": cannot replace existing dir/);
    expect(await snapshot(dest, false)).toEqual(before);
  });

  test("an existing symlink at the destination is not merged through", async () => {
    const outside = await tmp();
    const bytes = await packBytes(await makeTree(await tmp(), false));
    const dest = await tmp();
    await symlink(outside, join(dest, "tree"));
    const err = await unpack(bytes, dest).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TarError);
    expect((err as Error).message).toMatch(/cannot replace existing symlink/);
    expect(await readdir(outside)).toEqual([]);
    expect(await readdir(dest)).toEqual(["tree"]);
  });

  test("a V7-style directory (regular type, trailing slash) becomes a directory", async () => {
    const dest = await tmp();
    await unpack(tarOf([header("old/", { type: "0", mode: 0o755 })], file("old/f", "x")), dest);
    expect((await lstat(join(dest, "old"))).isDirectory()).toBe(true);
    expect(await readFile(join(dest, "old/f"), "utf8")).toBe("x");
  });

  test("GNU tar record padding after the end marker is ignored", async () => {
    const dest = await tmp();
    const bytes = joinBytes([tarOf(file("f", "x")), new Uint8Array(8192)]);
    expect(await unpack(bytes, dest)).toEqual({ entries: 1, bytes: 1 });
    expect(existsSync(join(dest, "f"))).toBe(true);
  });
});
