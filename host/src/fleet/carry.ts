// Carrying an asleep VM box from one home to another through the fleet's
// store (issue 30's `box move`): the source writes the box's files to the
// store as one snapshot and hands over a small reference (`CarriedBox`,
// shared/src/fleet.ts); the target restores them under the same box id, with
// a QEMU command line rebuilt for its own paths (engine/qemu/carry.ts), and
// registers the row; its ordinary wake then loads the state, and the box's
// processes carry on.
//
// The hard part is that neither end may be left half done: carryOut only
// reads the source box (hard links into a private directory of its own), so
// a failure leaves it asleep and intact; carryIn builds the whole directory
// in a private one and renames it into boxes/<id> as its very last step, so
// a failure (or an abort) leaves nothing there. What comes back from the
// store is untrusted: the snapshot's top is checked against a fixed set of
// names, types and bounds before a byte is restored, its manifest against
// its schema and the reference, and each file against the manifest.
import {
  chmodSync,
  constants,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { type Static, Type } from "@sinclair/typebox";
import { type CarriedBox, HutchError, check, firstError } from "@hutch/shared";
import type { BoxHandle } from "../engine/types.ts";
import { isAlive, readIdentity } from "../engine/pidfile.ts";
import { allocateIdentity, writeIdentityFile } from "../engine/idmap.ts";
import { CARRIED_FILES, hostProblem, qemuVersion, readVmLayout, vmArgv, type VmFiles, type VmLayout } from "../engine/qemu/carry.ts";
import { VM_FILES } from "../engine/qemu/index.ts";
import { stateProblem, syncDir } from "../engine/qemu/sleep.ts";
import { parseSize } from "../engine/limits.ts";
import { buildWithFiles, imageFiles, overlayBacking, validateManifest } from "../image/index.ts";
import { restoreTree, snapshotTree, type ProgressFn, type Store } from "../snapshot/index.ts";
import { CARRY_SOURCE } from "../snapshot/service.ts";
import type { BoxRow, PolicyRow } from "../store/types.ts";
import { log } from "../log.ts";
import { pidDir, sweepPidDirs } from "../procs.ts";

const logger = log.create({ service: "carry" });

/** A carried box's snapshot source: never a parent of a box's own snapshots (those are `box:<id>`). */

const MANIFEST = "carry.json";
const MiB = 1024 * 1024;
/** Bounds on what a carried snapshot may hold, whoever wrote it. */
const LIMITS = { manifestBytes: 256 * 1024, agentDisks: 16, readOnlyDiskBytes: 16 * 1024 ** 3 } as const;

const Sha256 = Type.String({ pattern: "^[0-9a-f]{64}$" });

/** carry.json, inside the sealed snapshot: what the target needs besides the files. */
const CarryManifest = Type.Object(
  {
    v: Type.Literal(1),
    box: Type.Object(
      {
        id: Type.String({ pattern: "^box_[0-9a-z]{20}$" }),
        name: Type.String({ pattern: "^[a-z0-9][a-z0-9-]{0,62}$" }),
        createdAt: Type.String({ maxLength: 64 }),
        config: Type.Record(Type.String({ maxLength: 64 }), Type.Unknown(), { maxProperties: 32 }),
      },
      { additionalProperties: false },
    ),
    owner: Type.Optional(Type.String({ maxLength: 128 })),
    policy: Type.Object(
      {
        allow: Type.Array(Type.String({ maxLength: 300 }), { maxItems: 1000 }),
        bindings: Type.Array(Type.String({ maxLength: 64 }), { maxItems: 100 }),
        stubs: Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 256 }), { maxProperties: 100 }),
        unlisted: Type.Optional(Type.Union([Type.Literal("deny"), Type.Literal("ask")])),
        approvalMs: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
      },
      { additionalProperties: false },
    ),
    image: Type.Object(
      {
        name: Type.String({ maxLength: 63 }),
        vmlinuz: Sha256,
        "initramfs.img": Sha256,
        "root.qcow2": Sha256,
        virtualBytes: Type.Integer(),
      },
      { additionalProperties: false },
    ),
    layout: Type.Object(
      {
        platform: Type.Union([Type.Literal("linux"), Type.Literal("darwin"), Type.Literal("windows")]),
        arch: Type.Union([Type.Literal("x86_64"), Type.Literal("aarch64")]),
        accel: Type.Union([Type.Literal("kvm"), Type.Literal("hvf"), Type.Literal("whpx"), Type.Literal("tcg")]),
        cpus: Type.Integer({ minimum: 1, maximum: 256 }),
        memoryMiB: Type.Integer({ minimum: 256, maximum: 1024 * 1024 }),
        cmdline: Type.String({ maxLength: 4096 }),
        imageHasPmem: Type.Boolean(),
        guestDiskBytes: Type.Integer({ minimum: 1, maximum: LIMITS.readOnlyDiskBytes }),
        agentDisks: Type.Array(
          Type.Object(
            {
              name: Type.String({ pattern: "^[a-z0-9]+-[0-9A-Za-z.+-]+$", maxLength: 128 }),
              bytes: Type.Integer({ minimum: 1, maximum: LIMITS.readOnlyDiskBytes }),
            },
            { additionalProperties: false },
          ),
          { maxItems: LIMITS.agentDisks },
        ),
      },
      { additionalProperties: false },
    ),
    qemuVersion: Type.String({ maxLength: 128 }),
    /** Every other file of the snapshot's top, with its size. */
    files: Type.Record(Type.String({ maxLength: 32 }), Type.Integer({ minimum: 0 }), { maxProperties: 3 + LIMITS.agentDisks }),
  },
  { additionalProperties: false },
);
type CarryManifest = Static<typeof CarryManifest>;

/** Names in the carried tree (beside carry.json). */
const TREE = { disk: "disk.qcow2", state: "sleep.state", guest: "guest.img", agent: (i: number) => `agent-${i}.img` } as const;

export interface CarryOutInput {
  home: string;
  store: Store;
  /** The box's row here: a qemu box, asleep. */
  row: BoxRow;
  /** Its broker policy, stubs included (BrokerTables.policy): its processes hold the stubs. */
  policy: PolicyRow;
  /** Its owner's name when it has one (AuthService.owner). */
  owner?: string;
  progress?: ProgressFn;
  signal?: AbortSignal;
}

function refused(what: string, next: string): HutchError {
  return new HutchError("invalid", what, next);
}

function handleOf(home: string, row: BoxRow): BoxHandle {
  return { id: row.id, name: row.name, dir: join(home, "boxes", row.id), config: JSON.parse(row.config) as Record<string, unknown> };
}

/**
 * A private directory under $HUTCH_HOME/tmp (same filesystem as boxes/, so
 * links and renames stay cheap and atomic), named with this process's pid;
 * those a killed process left are removed first.
 */
function privateDir(home: string, prefix: CarryPrefix): string {
  const tmp = join(home, "tmp");
  for (const other of CARRY_PREFIXES) if (other !== prefix) sweepPidDirs(tmp, other);
  return pidDir(tmp, prefix);
}

const CARRY_PREFIXES = ["carry-in-", "carry-out-"] as const;
type CarryPrefix = (typeof CARRY_PREFIXES)[number];

/** A link to `from` at `to`, or a copy (a reflink where the filesystem can) when they are on different filesystems. */
function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
    copyFileSync(from, to, constants.COPYFILE_FICLONE);
  }
}

/**
 * Writes an asleep VM box to the store: its disk overlay, its sleeping
 * state, the read-only disks its guest has mapped, and a manifest (its row,
 * broker policy, owner, image and VM layout) sealed with them. Returns the
 * reference the target's `carryIn` takes. Only reads the box: on any failure
 * it is asleep and intact, and a snapshot half written is never committed
 * (its packs go with the next prune). The caller holds the box's lifecycle
 * (nothing may wake it meanwhile) and, once the target has it, deletes it here.
 */
export async function carryOut(i: CarryOutInput): Promise<CarriedBox> {
  const { row } = i;
  if (row.engine !== "qemu")
    throw refused(
      `box "${row.name}" runs on the ${row.engine} engine; only a VM box keeps its programs through a move`,
      "stop it and move its files with a snapshot: hutch snapshot create",
    );
  if (row.state !== "asleep" || row.desired !== "asleep")
    throw new HutchError(
      "not_ready",
      `box "${row.name}" is ${row.state}, not asleep`,
      `put it to sleep first: hutch box sleep ${row.name}`,
    );
  const box = handleOf(i.home, row);
  const state = join(box.dir, VM_FILES.sleepState);
  const problem = stateProblem(state);
  if (problem)
    throw new HutchError(
      "not_ready",
      `box "${row.name}" has no state to carry: ${problem}`,
      `wake it and sleep it again: hutch box wake ${row.name}`,
    );
  const qemu = readIdentity(join(box.dir, VM_FILES.pid));
  if (qemu && isAlive(qemu))
    throw new HutchError("not_ready", `box "${row.name}" has a QEMU running (pid ${qemu.pid})`, `see: hutch box info ${row.name}`);
  const { layout, files } = readVmLayout(box);
  const version = qemuVersion(layout.arch);
  if (!version) throw new HutchError("config", `qemu-system-${layout.arch} is not installed`, "apt-get install -y qemu-system-x86");
  const image = carriedImage(box, files);
  const disk = join(box.dir, VM_FILES.disk);
  const sources: [string, string][] = [
    [TREE.disk, disk],
    [TREE.state, state],
    [TREE.guest, files.guestDisk],
    ...files.agentDisks.map((p, n): [string, string] => [TREE.agent(n), p]),
  ];
  const manifest: CarryManifest = {
    v: 1,
    box: { id: row.id, name: row.name, createdAt: row.created_at, config: box.config },
    ...(i.owner ? { owner: i.owner } : {}),
    policy: {
      allow: i.policy.allow,
      bindings: i.policy.bindings,
      stubs: i.policy.stubs,
      ...(i.policy.unlisted ? { unlisted: i.policy.unlisted } : {}),
      ...(i.policy.approvalMs !== undefined ? { approvalMs: i.policy.approvalMs } : {}),
    },
    image,
    layout,
    qemuVersion: version,
    files: Object.fromEntries(sources.map(([name, from]) => [name, statSync(from).size])),
  };
  if (!check(CarryManifest, manifest))
    throw refused(`box "${row.name}" cannot be carried: ${firstError(CarryManifest, manifest)}`, `see: hutch box info ${row.name}`);
  const staging = privateDir(i.home, "carry-out-");
  try {
    const tree = join(staging, "tree");
    mkdirSync(tree, { mode: 0o700 });
    for (const [name, from] of sources) linkOrCopy(from, join(tree, name));
    writeFileSync(join(tree, MANIFEST), JSON.stringify(manifest), { mode: 0o600 });
    const snap = await snapshotTree(i.store, tree, {
      source: `${CARRY_SOURCE}${row.id}`,
      parent: null,
      tags: ["carry"],
      label: `box "${row.name}" carried from ${i.store.host}`,
      xattrs: false,
      ...(i.progress ? { progress: i.progress } : {}),
      ...(i.signal ? { signal: i.signal } : {}),
    });
    const bytes = Object.values(manifest.files).reduce((a, b) => a + b, 0);
    logger.info("box carried out", { box: row.name, id: row.id, snapshot: snap.id, bytes, stored: snap.stats.bytesStored });
    return {
      v: 1,
      snapshot: snap.id,
      box: { id: row.id, name: row.name, engine: "qemu" },
      image: { name: image.name, digest: image["root.qcow2"] },
      qemu: { version, arch: layout.arch, accel: layout.accel },
      bytes,
      stored: snap.stats.bytesStored,
    };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** The image build the box's disk backs onto, by name and file digests; its kernel and initramfs are the ones the VM booted. */
function carriedImage(box: BoxHandle, files: VmFiles): CarryManifest["image"] {
  const backing = overlayBacking(join(box.dir, VM_FILES.disk));
  const build = backing ? dirname(backing) : null;
  const f = build ? imageFiles(build) : null;
  if (!f || !existsSync(f.manifest) || f.kernel !== files.kernel || f.initramfs !== files.initrd)
    throw refused(
      `box "${box.name}" cannot be carried: its disk's image build (${build ?? "none"}) is not the one its VM booted`,
      `wake it and sleep it again: hutch box wake ${box.name} && hutch box sleep ${box.name}`,
    );
  const m = validateManifest(JSON.parse(readFileSync(f.manifest, "utf8")), `the image under box "${box.name}"`);
  const name = typeof box.config.image === "string" ? box.config.image : "default";
  return {
    name,
    vmlinuz: m.files.vmlinuz.sha256,
    "initramfs.img": m.files["initramfs.img"].sha256,
    "root.qcow2": m.files["root.qcow2"].sha256,
    virtualBytes: m.root.virtualBytes,
  };
}

export interface CarryInInput {
  home: string;
  store: Store;
  ref: CarriedBox;
  progress?: ProgressFn;
  signal?: AbortSignal;
}

/** A box carried in: its directory is in place; what registering its row needs (`registerCarried`). */
export interface CarriedIn {
  box: { id: string; name: string; engine: "qemu"; config: Record<string, unknown>; createdAt: string };
  policy: PolicyRow;
  owner?: string;
  dir: string;
}

/**
 * Recreates a carried box's directory here, under its own id: its files
 * from the store, its disk pointed at this home's copy of the same image
 * build, its host identity allocated here, and its QEMU command line built
 * for this home's paths with the same devices. Once it returns, registering
 * the row (`registerCarried`) and the usual wake load the state. Refused
 * before anything is written when this home lacks the image build, runs
 * another QEMU, or has a box of that id; any later failure (or the signal)
 * removes all it wrote.
 */
export async function carryIn(i: CarryInInput): Promise<CarriedIn> {
  const { ref } = i;
  const dir = join(i.home, "boxes", ref.box.id);
  if (existsSync(dir))
    throw new HutchError(
      "conflict",
      `box ${ref.box.id} ("${ref.box.name}") has a directory here already (${dir})`,
      "delete the box here first, or carry it elsewhere",
    );
  const host = hostProblem(i.home, ref.qemu);
  if (host)
    throw new HutchError(
      "invalid",
      `box "${ref.box.name}" cannot wake on this server: ${host}`,
      "move it to a server with the same QEMU and accelerator",
    );
  const snap = await i.store.getSnapshot(ref.snapshot);
  if (snap.source !== `${CARRY_SOURCE}${ref.box.id}`)
    throw refused(
      `snapshot ${ref.snapshot} is not a carried copy of box ${ref.box.id} (its source is ${JSON.stringify(snap.source)})`,
      "carry the box out again",
    );
  await i.store.syncIndex();
  const top = await i.store.readTree(snap.tree, `snapshot ${snap.id}`);
  const entry = new Map(top.map((e) => [e.name, e]));
  const meta = entry.get(MANIFEST);
  if (meta?.type !== "file" || (meta.size ?? 0) > LIMITS.manifestBytes)
    throw refused(`snapshot ${snap.id} has no ${MANIFEST} of at most ${LIMITS.manifestBytes} bytes`, "carry the box out again");
  const staging = privateDir(i.home, "carry-in-");
  try {
    await restoreTree(i.store, snap.id, join(staging, "meta"), {
      paths: [MANIFEST],
      xattrs: false,
      modeMask: 0o600,
      ...(i.signal ? { signal: i.signal } : {}),
    });
    const manifest = readManifest(join(staging, "meta", MANIFEST), snap.id, ref);
    const wanted = Object.keys(manifest.files);
    const stray = top.filter((e) => e.name !== MANIFEST && !(e.name in manifest.files)).map((e) => e.name);
    const wrong = wanted.filter((n) => entry.get(n)?.type !== "file" || entry.get(n)?.size !== manifest.files[n]);
    if (stray.length > 0 || wrong.length > 0)
      throw refused(
        `snapshot ${snap.id} does not hold what its manifest lists (${[...stray, ...wrong].join(", ")})`,
        "carry the box out again",
      );
    const build = buildWithFiles(i.home, manifest.image.name, {
      vmlinuz: manifest.image.vmlinuz,
      "initramfs.img": manifest.image["initramfs.img"],
      "root.qcow2": manifest.image["root.qcow2"],
    });
    if (!build)
      throw new HutchError(
        "not_found",
        `box "${ref.box.name}" was made from image "${manifest.image.name}" (root.qcow2 sha256 ${manifest.image["root.qcow2"]}), and this server has no copy of that build`,
        `copy that build here: on the box's server, tar -C $HUTCH_HOME/images -chf ${manifest.image.name}.tar ${manifest.image.name}; here, hutch image import ${manifest.image.name}.tar (a rebuild makes another build, whose disk the box's overlay does not fit)`,
      );
    const box = join(staging, "box");
    await restoreTree(i.store, snap.id, box, {
      paths: wanted,
      xattrs: false,
      modeMask: 0o600,
      ...(i.progress ? { progress: i.progress } : {}),
      ...(i.signal ? { signal: i.signal } : {}),
    });
    // As the engine makes a box's directory (mkdir with the daemon's umask), not the private staging's 0700.
    chmodSync(box, 0o777 & ~process.umask());
    const layout = manifest.layout as VmLayout;
    const image = imageFiles(build);
    const files: VmFiles = {
      kernel: image.kernel,
      initrd: image.initramfs,
      guestDisk: join(dir, CARRIED_FILES.guestDisk),
      agentDisks: layout.agentDisks.map((_, n) => join(dir, CARRIED_FILES.agentDisk(n))),
    };
    await adoptDisk(join(box, TREE.disk), image.root, manifest);
    renameSync(join(box, TREE.disk), join(box, VM_FILES.disk));
    renameSync(join(box, TREE.state), join(box, VM_FILES.sleepState));
    renameSync(join(box, TREE.guest), join(box, CARRIED_FILES.guestDisk));
    for (let n = 0; n < layout.agentDisks.length; n++) renameSync(join(box, TREE.agent(n)), join(box, CARRIED_FILES.agentDisk(n)));
    const problem = stateProblem(join(box, VM_FILES.sleepState));
    if (problem) throw refused(`the carried state of box "${ref.box.name}" cannot be loaded: ${problem}`, "carry the box out again");
    // As the engine decides (engine/qemu/index.ts runAs): a root daemon's QEMU drops to the box's own uid.
    const root = layout.platform === "linux" && process.getuid?.() === 0;
    const identity = root ? allocateIdentity(join(i.home, "boxes"), ref.box.id) : null;
    if (identity) writeIdentityFile(box, identity);
    const argv = vmArgv(
      { id: ref.box.id, name: ref.box.name, dir },
      layout,
      files,
      identity ? { uid: identity.uid, gid: identity.gid } : null,
    );
    writeFileSync(join(box, VM_FILES.argv), JSON.stringify(argv));
    i.signal?.throwIfAborted();
    if (existsSync(dir))
      throw new HutchError("conflict", `box ${ref.box.id} got a directory here meanwhile (${dir})`, "delete the box here first");
    mkdirSync(join(i.home, "boxes"), { recursive: true });
    syncDir(box);
    renameSync(box, dir);
    syncDir(join(i.home, "boxes"));
    logger.info("box carried in", { box: ref.box.name, id: ref.box.id, snapshot: snap.id, image: build });
    return {
      box: { id: manifest.box.id, name: manifest.box.name, engine: "qemu", config: manifest.box.config, createdAt: manifest.box.createdAt },
      policy: manifest.policy as PolicyRow,
      ...(manifest.owner ? { owner: manifest.owner } : {}),
      dir,
    };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** carry.json, checked against its schema, the reference and the bounds the files must keep. */
function readManifest(path: string, snap: string, ref: CarriedBox): CarryManifest {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    throw refused(`snapshot ${snap}: ${MANIFEST} is not JSON`, "carry the box out again");
  }
  if (!check(CarryManifest, value))
    throw refused(`snapshot ${snap}: ${MANIFEST} ${firstError(CarryManifest, value)}`, "carry the box out again");
  const m = value;
  const l = m.layout;
  const agents = l.agentDisks.map((_, n) => TREE.agent(n));
  const names = [TREE.disk, TREE.state, TREE.guest, ...agents];
  const bad = (why: string) => refused(`snapshot ${snap} does not match the box it is said to carry: ${why}`, "carry the box out again");
  if (m.box.id !== ref.box.id || m.box.name !== ref.box.name) throw bad(`it holds box ${m.box.id} ("${m.box.name}")`);
  if (m.image["root.qcow2"] !== ref.image.digest || m.image.name !== ref.image.name) throw bad("its image differs");
  if (m.qemuVersion !== ref.qemu.version || l.arch !== ref.qemu.arch || l.accel !== ref.qemu.accel) throw bad("its QEMU differs");
  if (Object.keys(m.files).length !== names.length || !names.every((n) => n in m.files))
    throw bad(`its files are ${Object.keys(m.files).join(", ")}`);
  // The state holds the guest's RAM and every mapped disk's pages, a few bytes a page more, and the devices.
  const mapped = l.memoryMiB * MiB + l.guestDiskBytes + l.agentDisks.reduce((n, d) => n + d.bytes, 0);
  const diskMax = Math.max(m.image.virtualBytes, typeof m.box.config.disk === "string" ? parseSize(m.box.config.disk) : 0);
  const bounds: [string, number, number][] = [
    [TREE.state, 1, Math.ceil(mapped * 1.02) + 64 * MiB],
    [TREE.disk, 1, Math.ceil(diskMax * 1.1) + 64 * MiB],
    [TREE.guest, l.guestDiskBytes, l.guestDiskBytes],
    ...l.agentDisks.map((d, n): [string, number, number] => [TREE.agent(n), d.bytes, d.bytes]),
  ];
  for (const [name, min, max] of bounds) {
    const size = m.files[name]!;
    if (size < min || size > max) throw bad(`${name} is ${size} bytes, outside ${min}..${max}`);
  }
  return m;
}

const QCOW2_MAGIC = 0x514649fb;
const QCOW2_EXTERNAL_DATA = 1n << 2n;

/**
 * Points the carried overlay at this home's copy of its image's root disk.
 * The overlay is read from its header first: a qcow2 (version 2 or 3) whose
 * data is its own, no larger than its bound; only then does qemu-img touch it.
 */
async function adoptDisk(disk: string, root: string, m: CarryManifest): Promise<void> {
  const head = Buffer.alloc(104);
  const fd = Bun.file(disk);
  head.set(new Uint8Array(await fd.slice(0, 104).arrayBuffer()));
  const version = head.readUInt32BE(4);
  const problem =
    head.readUInt32BE(0) !== QCOW2_MAGIC
      ? "is not a qcow2 image"
      : version !== 2 && version !== 3
        ? `is qcow2 version ${version}`
        : version === 3 && (head.readBigUInt64BE(72) & QCOW2_EXTERNAL_DATA) !== 0n
          ? "keeps its data in an external file"
          : head.readBigUInt64BE(24) > BigInt(Math.max(m.image.virtualBytes, m.files[TREE.disk]!) * 4)
            ? "is larger than its image allows"
            : null;
  if (problem) throw refused(`the carried disk of box "${m.box.name}" ${problem}`, "carry the box out again");
  const r = Bun.spawnSync(["qemu-img", "rebase", "-u", "-f", "qcow2", "-F", "qcow2", "-b", root, disk], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0)
    throw new HutchError(
      "failed",
      `could not point the carried disk at this server's image: ${r.stderr.toString().trim()}`,
      `see: qemu-img info ${disk}`,
    );
}

/** What registering a carried box writes: the box's rows, as BoxStore.insertCarried stores them. */
export interface CarriedRows {
  insertCarried(box: CarriedIn["box"], policy: PolicyRow, owner?: string): BoxRow;
}

/**
 * Registers a box `carryIn` put in place: its row (asleep, under its own id),
 * its whole broker policy and its owner, in one transaction. Idempotent. The
 * caller then announces it (BoxService.changes) and wakes it (BoxService.wake).
 */
export function registerCarried(rows: CarriedRows, arrived: CarriedIn): BoxRow {
  return rows.insertCarried(arrived.box, arrived.policy, arrived.owner);
}

/**
 * Forgets a carried box's snapshot once the target has the box: its packs
 * go with the store's next prune. A state must never be loaded twice (the
 * disk moves on from it), so nothing should carry it in again.
 */
export async function dropCarried(store: Store, ref: CarriedBox): Promise<void> {
  const snap = await store.getSnapshot(ref.snapshot);
  if (snap.source !== `${CARRY_SOURCE}${ref.box.id}`)
    throw refused(`snapshot ${ref.snapshot} is not a carried copy of box ${ref.box.id}`, "name the reference carryOut returned");
  await store.backend.delete("snapshots", snap.name);
}
