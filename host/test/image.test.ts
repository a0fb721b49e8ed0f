import { describe, expect, test } from "bun:test";
import { cpSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import {
  WANTED_MODULES,
  moduleName,
  parseBuiltin,
  parseModulesDep,
  planLanes,
  resolveModules,
  stripSignature,
} from "../src/image/modules.ts";
import { recipeHash, type Recipe } from "../src/image/recipe.ts";
import { validateManifest } from "../src/image/manifest.ts";
import { manifestFor, qcow2Header, sha } from "./image-fixtures.ts";
import { writeCpio } from "../src/image/cpio.ts";
import { initramfsEntries } from "../src/image/initramfs.ts";
import { imageSources, listDates, listName, parseKernelDepends, parseVersions, pickMirror } from "../src/image/apt.ts";
import { mountsUnder, sweepStale } from "../src/image/staging.ts";
import { installImage } from "../src/image/store.ts";
import {
  beginImport,
  ensureGuestDisk,
  imagePaths,
  listImages,
  loadImage,
  movedBuild,
  qcow2Problem,
  removeImage,
} from "../src/image/index.ts";

// The lines of Debian 6.1's modules.dep that the wanted modules reach, plus unrelated ones.
const MODULES_DEP = `kernel/arch/x86/crypto/crc32c-intel.ko:
kernel/fs/mbcache.ko:
kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko
kernel/fs/jbd2/jbd2.ko:
kernel/fs/xfs/xfs.ko: kernel/lib/libcrc32c.ko
kernel/crypto/crc32c_generic.ko:
kernel/lib/crc16.ko:
kernel/lib/libcrc32c.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/char/hw_random/virtio-rng.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/char/virtio_console.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/nvdimm/libnvdimm.ko:
kernel/drivers/nvdimm/nd_btt.ko: kernel/drivers/nvdimm/libnvdimm.ko
kernel/drivers/nvdimm/nd_pmem.ko: kernel/drivers/nvdimm/nd_btt.ko kernel/drivers/nvdimm/libnvdimm.ko
kernel/drivers/nvdimm/nd_virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/nvdimm/virtio_pmem.ko: kernel/drivers/nvdimm/nd_virtio.ko kernel/drivers/nvdimm/libnvdimm.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
`;
const BUILTIN = "kernel/crypto/rng.ko\nkernel/lib/crc32.ko\nkernel/drivers/char/hw_random/rng-core.ko\n";

describe("kernel modules", () => {
  test("names drop the directory and any compression suffix, with - read as _", () => {
    expect(moduleName("kernel/drivers/char/hw_random/virtio-rng.ko")).toBe("virtio_rng");
    expect(moduleName("kernel/fs/ext4/ext4.ko.zst")).toBe("ext4");
    expect(moduleName("kernel/fs/jbd2/jbd2.ko.xz")).toBe("jbd2");
  });

  test("the wanted modules load dependencies first, each once", () => {
    const plan = resolveModules(parseModulesDep(MODULES_DEP), parseBuiltin(BUILTIN), WANTED_MODULES);
    expect(plan.order.map(moduleName)).toEqual([
      "virtio_pci_legacy_dev",
      "virtio_pci_modern_dev",
      "virtio_ring",
      "virtio",
      "virtio_pci",
      "virtio_blk",
      "nd_virtio",
      "libnvdimm",
      "virtio_pmem",
      "nd_btt",
      "nd_pmem",
      "virtio_console",
      "virtio_rng",
      "crc32c_generic",
      "crc16",
      "mbcache",
      "jbd2",
      "ext4",
    ]);
    expect(plan.builtin).toEqual([]);
  });

  test("two lanes for /init to load at once: the drivers, and the filesystem stack", () => {
    const dep = parseModulesDep(MODULES_DEP);
    const { lanes } = planLanes(dep, parseBuiltin(BUILTIN));
    expect(lanes[1].map(moduleName)).toEqual(["crc32c_generic", "crc16", "mbcache", "jbd2", "ext4"]);
    expect(lanes[0].map(moduleName)).toContain("virtio_pmem");
    expect(lanes[0].filter((m) => lanes[1].includes(m))).toEqual([]);
    // Lanes that would share a module (loaded twice at once, the second fails) become one.
    const sharing = parseModulesDep(
      MODULES_DEP.replace("kernel/fs/mbcache.ko:", "kernel/fs/mbcache.ko: kernel/drivers/virtio/virtio_ring.ko"),
    );
    const one = planLanes(sharing, new Set());
    expect(one.lanes[1]).toEqual([]);
    expect(one.lanes[0]).toEqual(resolveModules(sharing, new Set(), WANTED_MODULES).order);
  });

  test("every module comes after everything it depends on", () => {
    const dep = parseModulesDep(MODULES_DEP);
    const order = resolveModules(dep, new Set(), WANTED_MODULES).order;
    order.forEach((m, i) => {
      for (const d of dep.get(m)!) expect(order.indexOf(d)).toBeLessThan(i);
    });
  });

  test("a built-in module is skipped and reported", () => {
    const plan = resolveModules(parseModulesDep(MODULES_DEP), parseBuiltin("kernel/fs/ext4/ext4.ko\n"), ["ext4", "virtio_blk"]);
    expect(plan.builtin).toEqual(["ext4"]);
    expect(plan.order.map(moduleName)).toEqual(["virtio_ring", "virtio", "virtio_blk"]);
  });

  test("a module the kernel lacks, a dangling dependency and a cycle are errors", () => {
    const dep = parseModulesDep(MODULES_DEP);
    expect(() => resolveModules(dep, new Set(), ["nosuch"])).toThrow("the kernel has no module nosuch");
    expect(() => resolveModules(parseModulesDep("a.ko: b.ko\n"), new Set(), ["a"])).toThrow("no line for it");
    expect(() => resolveModules(parseModulesDep("a.ko: b.ko\nb.ko: a.ko\n"), new Set(), ["a"])).toThrow("cycle: a -> b -> a");
  });

  test("an appended signature is cut off; an unsigned module is left as it is", () => {
    const enc = new TextEncoder();
    const body = enc.encode("\x7fELF module body");
    const sig = new Uint8Array(40).fill(7);
    const info = new Uint8Array(12);
    new DataView(info.buffer).setUint32(8, sig.length);
    const signed = new Uint8Array([...body, ...sig, ...info, ...enc.encode("~Module signature appended~\n")]);
    expect(stripSignature(signed)).toEqual(body);
    expect(stripSignature(body)).toBe(body);
    new DataView(info.buffer).setUint32(8, 10_000);
    const lying = new Uint8Array([...body, ...sig, ...info, ...enc.encode("~Module signature appended~\n")]);
    expect(() => stripSignature(lying)).toThrow("longer than the module");
  });

  test("a modules.dep line without a colon is refused", () => {
    expect(() => parseModulesDep("kernel/x.ko kernel/y.ko\n")).toThrow('no ":"');
  });
});

const recipe: Recipe = {
  format: 1,
  suite: "bookworm",
  updates: [
    "bookworm Sat, 14 Nov 2026 10:00:00 UTC",
    "bookworm-updates Sun, 29 Nov 2026 08:00:00 UTC",
    "bookworm-security Sun, 29 Nov 2026 00:53:13 UTC",
  ],
  packages: ["git", "curl"],
  kernel: "linux-image-6.1.0-57-amd64=6.1.192-3",
  busybox: "busybox-static=1:1.35.0-4+deb12u1+b1",
  modules: ["virtio_pci", "ext4"],
  init: "#!/bin/sh\n",
};

describe("recipe hash", () => {
  test("is a stable sha256, blind to package order", () => {
    expect(recipeHash(recipe)).toMatch(/^[0-9a-f]{64}$/);
    expect(recipeHash({ ...recipe, packages: ["curl", "git"] })).toBe(recipeHash(recipe));
  });

  test.each([
    ["kernel", { kernel: "linux-image-6.1.0-58-amd64=6.1.200-1" }],
    ["init script", { init: "#!/bin/sh\necho\n" }],
    ["packages", { packages: ["git", "curl", "vim"] }],
    ["module order", { modules: ["ext4", "virtio_pci"] }],
    ["busybox", { busybox: "busybox-static=1:1.36.0-1" }],
    ["format", { format: 2 }],
    [
      "security updates",
      {
        updates: [
          "bookworm Sat, 14 Nov 2026 10:00:00 UTC",
          "bookworm-updates Sun, 29 Nov 2026 08:00:00 UTC",
          "bookworm-security Tue, 01 Dec 2026 06:10:00 UTC",
        ],
      },
    ],
  ] as const)("changes with the %s", (_, change) => {
    expect(recipeHash({ ...recipe, ...change })).not.toBe(recipeHash(recipe));
  });
});

const FILES = { vmlinuz: "kernel bytes", "initramfs.img": "initramfs bytes", "root.qcow2": "root disk bytes" };

describe("manifest", () => {
  test("a complete manifest passes", () => {
    const m = manifestFor("default", FILES);
    expect(validateManifest(JSON.parse(JSON.stringify(m)), "x")).toEqual(m);
  });

  test("a missing or malformed field is named", () => {
    const { kernel: _, ...noKernel } = manifestFor("default", FILES);
    expect(() => validateManifest(noKernel, 'image "d"')).toThrow(/image "d": not a hutch image manifest \(kernel/);
    const bad = manifestFor("default", FILES);
    bad.files.vmlinuz.sha256 = "xyz";
    expect(() => validateManifest(bad, "m")).toThrow("files.vmlinuz.sha256");
    expect(() => validateManifest({ ...manifestFor("default", FILES), format: 99 }, "m")).toThrow("format");
  });
});

/** A reader for the test only: the fields the kernel looks at, with newc's 4-byte alignment checked. */
function readCpio(buf: Uint8Array): { name: string; mode: number; rdev: [number, number]; data: string }[] {
  const dec = new TextDecoder();
  const out: { name: string; mode: number; rdev: [number, number]; data: string }[] = [];
  let off = 0;
  for (;;) {
    expect(off % 4).toBe(0);
    const head = dec.decode(buf.subarray(off, off + 110));
    expect(head.slice(0, 6)).toBe("070701");
    const field = (i: number) => parseInt(head.slice(6 + i * 8, 14 + i * 8), 16);
    const namesize = field(11);
    const filesize = field(6);
    const name = dec.decode(buf.subarray(off + 110, off + 110 + namesize - 1));
    off += 110 + namesize;
    off += (4 - (off % 4)) % 4;
    const data = dec.decode(buf.subarray(off, off + filesize));
    off += filesize;
    off += (4 - (off % 4)) % 4;
    if (name === "TRAILER!!!") return out;
    out.push({ name, mode: field(1), rdev: [field(9), field(10)], data });
  }
}

describe("initramfs", () => {
  const entries = initramfsEntries(
    new TextEncoder().encode("BUSYBOX"),
    [
      { file: "virtio_ring.ko", data: new TextEncoder().encode("ring"), lane: 0 },
      { file: "crc16.ko", data: new TextEncoder().encode("crc"), lane: 1 },
      { file: "virtio.ko", data: new TextEncoder().encode("virtio!"), lane: 0 },
    ],
    "#!/bin/sh\necho hi\n",
  );
  const archive = writeCpio(entries);

  test("the cpio holds every entry with its type, mode and content", () => {
    const read = readCpio(archive);
    const by = new Map(read.map((e) => [e.name, e]));
    expect(by.get("init")!.mode).toBe(0o100755);
    expect(by.get("init")!.data).toBe("#!/bin/sh\necho hi\n");
    expect(by.get("dev/console")!.mode).toBe(0o020600);
    expect(by.get("dev/console")!.rdev).toEqual([5, 1]);
    expect(by.get("bin/sh")!.mode).toBe(0o120777);
    expect(by.get("bin/sh")!.data).toBe("busybox");
    expect(by.get("bin/busybox")!.data).toBe("BUSYBOX");
    expect(by.get("lib/modules/virtio.ko")!.data).toBe("virtio!");
    expect(by.get("modules.order")!.data).toBe("virtio_ring.ko\nvirtio.ko\n");
    expect(by.get("modules.fs")!.data).toBe("crc16.ko\n");
    expect(archive.length % 4).toBe(0);
  });

  test("every parent directory comes before what it holds", () => {
    const names = readCpio(archive).map((e) => e.name);
    names.forEach((n, i) => {
      const parent = n.split("/").slice(0, -1).join("/");
      if (parent) expect(names.indexOf(parent)).toBeLessThan(i);
    });
  });

  test.skipIf(!Bun.which("cpio"))("GNU cpio reads the archive back", () => {
    const r = Bun.spawnSync(["cpio", "-t", "--quiet"], { stdin: archive });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.toString().split("\n")).toContain("lib/modules/virtio_ring.ko");
  });
});

describe("apt", () => {
  test("the kernel package behind the metapackage", () => {
    expect(parseKernelDepends("linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n")).toBe("linux-image-6.1.0-57-amd64");
    expect(parseKernelDepends("linux-image-amd64\n")).toBeUndefined();
  });

  test("versions from apt-cache show paragraphs", () => {
    const v = parseVersions(
      "Package: git\nVersion: 1:2.39.5-0+deb12u3\nSize: 1\n\nPackage: busybox-static\nVersion: 1:1.35.0-4+deb12u1+b1\n",
    );
    expect(Object.fromEntries(v)).toEqual({ git: "1:2.39.5-0+deb12u3", "busybox-static": "1:1.35.0-4+deb12u1+b1" });
  });

  test("the mirror is the first plain-suite deb source, one-line or deb822", () => {
    const deb822 =
      "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n\nTypes: deb deb-src\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n";
    expect(pickMirror([{ name: "debian.sources", text: deb822 }], "bookworm")).toBe("http://mirror.example/debian");
    const list =
      "# deb http://old.example/debian bookworm main\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64] http://one.example/debian bookworm main\n";
    expect(pickMirror([{ name: "sources.list", text: list }], "bookworm")).toBe("http://one.example/debian");
    expect(
      pickMirror([{ name: "x.sources", text: "Types: deb\nEnabled: no\nURIs: http://off.example\nSuites: bookworm\n" }], "bookworm"),
    ).toBeUndefined();
  });
});

describe("the suites of an image", () => {
  test("the release, its updates and its security updates, each from the host's mirror for it", () => {
    const deb822 =
      "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\n\nTypes: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\n";
    expect(imageSources("bookworm", [{ name: "debian.sources", text: deb822 }])).toEqual([
      { suite: "bookworm", uri: "http://mirror.example/debian" },
      { suite: "bookworm-updates", uri: "http://mirror.example/debian" },
      { suite: "bookworm-security", uri: "http://sec.example/debian-security" },
    ]);
  });

  test("a host naming no security source still gets Debian's security archive, and updates from its own mirror", () => {
    const list = "deb http://one.example/debian bookworm main\n";
    expect(imageSources("bookworm", [{ name: "sources.list", text: list }])).toEqual([
      { suite: "bookworm", uri: "http://one.example/debian" },
      { suite: "bookworm-updates", uri: "http://one.example/debian" },
      { suite: "bookworm-security", uri: "http://deb.debian.org/debian-security" },
    ]);
  });

  test("each suite's publication date is read from apt's lists; one the lists lack is null", () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-lists-"));
    try {
      const sec = { suite: "bookworm-security", uri: "http://deb.debian.org/debian-security" };
      expect(listName(sec)).toBe("deb.debian.org_debian-security_dists_bookworm-security_InRelease");
      writeFileSync(
        join(dir, listName(sec)),
        "-----BEGIN PGP SIGNED MESSAGE-----\nOrigin: Debian\nSuite: oldstable-security\nDate: Sun, 29 Nov 2026 00:53:13 UTC\n",
      );
      const main = { suite: "bookworm", uri: "http://deb.debian.org/debian/" };
      expect(listDates([main, sec], dir)).toEqual([
        { ...main, date: null },
        { ...sec, date: "Sun, 29 Nov 2026 00:53:13 UTC" },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test("mounts under a staging directory are found deepest first, escapes undone", () => {
  const info = [
    "22 1 8:1 / / rw - ext4 /dev/vda rw",
    "90 22 0:5 / /h/images/.tmp-build-x/work/rootfs/proc rw - proc proc rw",
    "91 90 0:6 / /h/images/.tmp-build-x/work/rootfs/proc/sys/fs/binfmt_misc rw - binfmt_misc x rw",
    "92 22 0:7 / /h/images/.tmp-build-xy/sys rw - sysfs sysfs rw",
    "93 22 0:8 / /h/images/.tmp-build-x/with\\040space rw - tmpfs t rw",
  ].join("\n");
  expect(mountsUnder(info, "/h/images/.tmp-build-x")).toEqual([
    "/h/images/.tmp-build-x/work/rootfs/proc/sys/fs/binfmt_misc",
    "/h/images/.tmp-build-x/work/rootfs/proc",
    "/h/images/.tmp-build-x/with space",
  ]);
});

/** The header of a qcow2 version 3 image that names no other file, as qemu-img writes it (112 bytes). */
/** What an import of `file` through the daemon does: the archive written in chunks, then finished. */
async function importFile(home: string, file: string, opts: { name?: string; force: boolean }) {
  const p = beginImport({ home, source: file, ...opts });
  for await (const chunk of Bun.file(file).stream()) await p.write(chunk);
  return p.finish();
}

describe("installed images", () => {
  const tar = Bun.which("tar");
  const IMAGE = { ...FILES, "root.qcow2": qcow2Header() };

  function fixtureImage(root: string, name: string, files: Record<string, string | Uint8Array> = IMAGE): string {
    const dir = join(root, "src", name);
    mkdirSync(dir, { recursive: true });
    for (const [f, body] of Object.entries(files)) writeFileSync(join(dir, f), body);
    writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifestFor(name, IMAGE)));
    return dir;
  }

  function packTar(root: string, name: string): string {
    const file = join(root, `${name}.tar`);
    expect(Bun.spawnSync(["tar", "-C", join(root, "src"), "-cf", file, name]).exitCode).toBe(0);
    return file;
  }

  test("a missing image is not_found and says how to build it", () => {
    const home = mkdtempSync(join(tmpdir(), "hutch-image-"));
    try {
      const err = (() => {
        try {
          loadImage(home, "default");
        } catch (e) {
          return e;
        }
      })() as HutchError;
      expect(err).toBeInstanceOf(HutchError);
      expect(err.code).toBe("not_found");
      expect(err.message).toBe('no image "default"');
      expect(err.hint).toBe("build it: hutch image build");
      expect(() => imagePaths(home, "../x")).toThrow("bad image name");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  test.skipIf(!tar)("import verifies every file, installs, lists and removes", async () => {
    const home = mkdtempSync(join(tmpdir(), "hutch-image-"));
    try {
      fixtureImage(home, "default");
      const m = await importFile(home, packTar(home, "default"), { force: false });
      expect(m.name).toBe("default");
      expect(loadImage(home, "default").files.vmlinuz.sha256).toBe(sha(FILES.vmlinuz));
      expect(sha(readFileSync(imagePaths(home, "default").root))).toBe(sha(IMAGE["root.qcow2"]));
      expect(listImages(home).map((i) => [i.name, i.problem])).toEqual([["default", undefined]]);
      await expect(importFile(home, packTar(home, "default"), { force: false })).rejects.toThrow('image "default" exists');
      const renamed = await importFile(home, packTar(home, "default"), { name: "other", force: false });
      expect(loadImage(home, "other").name).toBe(renamed.name);
      removeImage(home, "default", () => []);
      expect(existsSync(imagePaths(home, "default").dir)).toBe(false);
      expect(() => removeImage(home, "default", () => [])).toThrow('no image "default"');
      // Nothing half-made is left beside the images; the removed name's build went with it.
      expect(readdirSync(join(home, "images")).sort()).toEqual([".store", "other"]);
      expect(readdirSync(join(home, "images", ".store"))).toHaveLength(1);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  test("a name is a pointer into the store of builds: a rebuild keeps a build boxes use, drops one none does, and rm of a name in use is refused with the boxes", () => {
    const home = mkdtempSync(join(tmpdir(), "hutch-image-"));
    try {
      const inUse = new Set<string>();
      const users = (dir: string) => (inUse.has(dir) ? ["box_1"] : []);
      const install = () => {
        const ready = fixtureImage(home, "default");
        const scratch = join(home, "scratch");
        mkdirSync(scratch, { recursive: true });
        return installImage(home, "default", ready, scratch, users);
      };
      const first = install();
      expect(imagePaths(home, "default").dir).toBe(first);
      expect(first).toStartWith(`${join(home, "images", ".store")}/`);
      // A box is built on the first build; a rebuild points the name at a new one and keeps the first.
      inUse.add(first);
      const second = install();
      expect(second).not.toBe(first);
      expect(imagePaths(home, "default").dir).toBe(second);
      expect(existsSync(first)).toBe(true);
      inUse.delete(first);
      inUse.add(second);
      // Removing the name a box is built on is refused, naming the box and the way to free it.
      expect(() => removeImage(home, "default", users, () => "web")).toThrow('image "default" is used by box web');
      expect(() => removeImage(home, "default", users, () => "web")).toThrow(
        expect.objectContaining({ hint: expect.stringContaining("hutch box delete web") }),
      );
      // The server's own boxes (a warm pool's, a booted state's maker) do not hold the name: rm takes it,
      // and the build they back onto stays until they are gone.
      const own = (dir: string) => (inUse.has(dir) ? ["box_pool"] : []);
      removeImage(
        home,
        "default",
        own,
        () => "pool-1",
        (id) => id === "box_pool",
      );
      expect(readdirSync(join(home, "images")).filter((n) => !n.startsWith("."))).toEqual([]);
      expect(existsSync(second)).toBe(true);
      install();
      // Once nothing uses them, rm takes the name and every build no one needs.
      inUse.clear();
      removeImage(home, "default", users);
      expect(readdirSync(join(home, "images", ".store"))).toEqual([]);
      expect(readdirSync(join(home, "images")).filter((n) => !n.startsWith("."))).toEqual([]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  test("an image installed as a plain directory, replaced while a box is built on it, moves into the store and says where it was", () => {
    const home = mkdtempSync(join(tmpdir(), "hutch-image-"));
    try {
      const legacy = join(home, "images", "default");
      mkdirSync(join(home, "images"), { recursive: true });
      cpSync(fixtureImage(home, "default"), legacy, { recursive: true });
      const users = (dir: string) => (dir === legacy ? ["box_1"] : []);
      const scratch = join(home, "scratch");
      mkdirSync(scratch);
      installImage(home, "default", fixtureImage(home, "default"), scratch, users);
      const moved = movedBuild(home, legacy);
      expect(moved).not.toBeNull();
      expect(readFileSync(join(moved!, "manifest.json"), "utf8")).toContain('"default"');
      expect(lstatSync(legacy).isSymbolicLink()).toBe(true);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  test("what an interrupted (SIGKILLed) run left is swept; what a live one holds is kept", () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-sweep-"));
    try {
      const dead = Bun.spawnSync(["true"]).pid;
      for (const n of [
        `.tmp-build-default-${dead}-AbC123`,
        ".tmp-build-default-OldFmt",
        `.tmp-link-default-${dead}`,
        `.tmp-build-other-${process.ppid}-Xyz789`,
        "default",
      ])
        mkdirSync(join(dir, n));
      expect(sweepStale(dir).sort()).toEqual(
        [`.tmp-build-default-${dead}-AbC123`, ".tmp-build-default-OldFmt", `.tmp-link-default-${dead}`].sort(),
      );
      expect(readdirSync(dir).sort()).toEqual([`.tmp-build-other-${process.ppid}-Xyz789`, "default"].sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test.skipIf(!tar)("import refuses a tampered file and an archive without a manifest, leaving nothing", async () => {
    const home = mkdtempSync(join(tmpdir(), "hutch-image-"));
    try {
      fixtureImage(home, "default", { ...IMAGE, "root.qcow2": "root disk bytez" });
      await expect(importFile(home, packTar(home, "default"), { force: false })).rejects.toThrow(
        /root\.qcow2 has sha256 [0-9a-f]{64}, the manifest says/,
      );
      mkdirSync(join(home, "src", "junk"), { recursive: true });
      writeFileSync(join(home, "src", "junk", "notes.txt"), "hi");
      await expect(importFile(home, packTar(home, "junk"), { force: false })).rejects.toThrow(
        "not a hutch image archive: no manifest.json",
      );
      writeFileSync(join(home, "plain.tar"), "this is not a tar archive at all".repeat(40));
      await expect(importFile(home, join(home, "plain.tar"), { force: false })).rejects.toThrow("not a hutch image archive");
      expect(readdirSync(join(home, "images"))).toEqual([]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  const qemuImg = Bun.which("qemu-img");
  test.skipIf(!qemuImg)("an imported root disk must be a qcow2 that names no other file, read from qemu-img's own output", () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-qcow2-"));
    try {
      const make = (name: string, opts: string[], size: string[] = ["1M"]) => {
        const r = Bun.spawnSync(["qemu-img", "create", "-q", "-f", "qcow2", ...opts, join(dir, name), ...size]);
        expect(r.exitCode, r.stderr.toString()).toBe(0);
        return new Uint8Array(readFileSync(join(dir, name)));
      };
      expect(qcow2Problem(make("plain.qcow2", ["-o", "compat=1.1"]).subarray(0, 104))).toBeNull();
      expect(qcow2Problem(make("v2.qcow2", ["-o", "compat=0.10"]))).toBeNull();
      expect(qcow2Problem(make("over.qcow2", ["-b", join(dir, "plain.qcow2"), "-F", "qcow2"], []))).toBe(
        "root.qcow2 names a backing file; an image's root disk must stand alone",
      );
      expect(qcow2Problem(make("ext.qcow2", ["-o", `data_file=${join(dir, "ext.raw")}`]))).toBe(
        "root.qcow2 keeps its data in an external file; an image's root disk must stand alone",
      );
      expect(qcow2Problem(new TextEncoder().encode("root disk bytes".repeat(10)))).toBe("root.qcow2 is not a qcow2 image");
      expect(qcow2Problem(new Uint8Array(8))).toBe("root.qcow2 is too short to be a qcow2 image");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test.skipIf(!tar || !qemuImg)("import refuses a root disk backed by a file of the server's, leaving nothing", async () => {
    const home = mkdtempSync(join(tmpdir(), "hutch-image-"));
    try {
      const over = join(home, "over.qcow2");
      expect(Bun.spawnSync(["qemu-img", "create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", over]).exitCode).toBe(0);
      fixtureImage(home, "default", { ...IMAGE, "root.qcow2": new Uint8Array(readFileSync(over)) });
      // The manifest must vouch for the hostile disk, or the hashes would refuse it first.
      const m = manifestFor("default", { ...IMAGE, "root.qcow2": new Uint8Array(readFileSync(over)) });
      writeFileSync(join(home, "src", "default", "manifest.json"), JSON.stringify(m));
      await expect(importFile(home, packTar(home, "default"), { force: false })).rejects.toThrow(
        "not a hutch image archive: root.qcow2 names a backing file",
      );
      expect(readdirSync(join(home, "images"))).toEqual([]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

test.skipIf(!Bun.which("mke2fs") || !Bun.which("debugfs"))(
  "the guest disk holds an executable /hutch-guest and is written once",
  async () => {
    const home = mkdtempSync(join(tmpdir(), "hutch-guestdisk-"));
    try {
      const bin = join(home, "hutch-guest");
      writeFileSync(bin, "#!/bin/sh\necho guest\n".padEnd(300_000, "#"));
      const img = await ensureGuestDisk(home, bin, "abc123");
      expect(img).toBe(join(home, "guest", "abc123", "guest.v3.img"));
      // DAX (the pmem attachment) maps whole pages: 4 KiB blocks, and a size in 2 MiB units.
      expect(Bun.spawnSync(["dumpe2fs", "-h", img], { stderr: "ignore" }).stdout.toString()).toMatch(/Block size:\s+4096/);
      expect(statSync(img).size % (2 * 1024 * 1024)).toBe(0);
      const stat = Bun.spawnSync(["debugfs", "-R", "stat /hutch-guest", img]).stdout.toString();
      expect(stat).toMatch(/Mode:\s+0755/);
      expect(stat).toMatch(/Size: 300000/);
      // The agent CLI disks are mounted at /.hutch/agents, on the guest disk.
      expect(Bun.spawnSync(["debugfs", "-R", "stat /agents", img]).stdout.toString()).toMatch(/Type: directory/);
      const dumped = Bun.spawnSync(["debugfs", "-R", "cat /hutch-guest", img]).stdout.toString();
      expect(dumped).toBe(readFileSync(bin, "utf8"));
      const mtime = statSync(img).mtimeMs;
      expect(await ensureGuestDisk(home, bin, "abc123")).toBe(img);
      expect(statSync(img).mtimeMs).toBe(mtime);
      expect(readdirSync(join(home, "guest", "abc123"))).toEqual(["guest.v3.img"]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  },
);
