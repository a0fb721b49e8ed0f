// Snapshots of boxes: the daemon's one store (opened once, so its key is
// derived once per daemon), and the two ways a box's roots reach it. A
// stopped box on an engine that can open its roots on the host (process) is
// read from its disk, with its lifecycle held so it cannot start meanwhile; a
// running box (any engine) is read through its guest, one tar.out per root,
// parsed as untrusted input (./stream-save.ts). Restores go the other way,
// always through the guest: the snapshot is restored into a private staging
// directory on the host first (every check passes or nothing moves), then
// sent with tar.in, so nothing on the host ever writes into a box's tree.
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import {
  Chan,
  follow,
  HutchError,
  resultOf,
  rulesForRoot,
  type StreamError,
  TarInResult,
  type OpReport,
  type SnapshotBrowse,
  type SnapshotChange,
  type SnapshotCheckResult,
  type SnapshotCreateResult,
  type SnapshotDiff,
  type SnapshotInfo,
  type SnapshotPruneBody,
  type SnapshotPruneResult,
  type SnapshotRestoreBody,
  type SnapshotRestoreResult,
} from "@hutch/shared";
import { packTar } from "@hutch/shared/node";
import type { BoxService } from "../box/service.ts";
import type { Channel } from "../engine/channel.ts";
import { Listeners } from "../listeners.ts";
import { loadConfig } from "../config.ts";
import { agentConfigFiles } from "../harness/index.ts";
import { HOME_FILES } from "../paths.ts";
import { log } from "../log.ts";
import {
  browse,
  check as checkStore,
  diffSnapshots,
  openStore,
  prune,
  restoreTree,
  snapshotTree,
  storeLocation,
  type Progress,
  type SnapshotRecord,
  type SnapshotResult,
  type Store,
} from "./index.ts";
import { readXattrs } from "./fsx.ts";
import { resolvePath, snapshotPath } from "./paths.ts";
import { guestRoots } from "./guest-roots.ts";
import { snapshotStreams, type Transfer } from "./stream-save.ts";
import { unifiedDiff } from "./textdiff.ts";
import { count } from "@hutch/shared/text";

/** The source of a snapshot that carries a VM box between servers (fleet/carry.ts): not one a user lists. */
export const CARRY_SOURCE = "carry:";
const logger = log.create({ service: "snapshots" });

/** Snapshot paths that carry a box's identity: every agent config file hutch writes into the home (they hold the box's stubs). */
export function identityFiles(): string[] {
  return agentConfigFiles().map((rel) => `home/${rel}`);
}

/** Rule files honoured in a box's tree unless config.json says otherwise. */
export const IGNORE_FILE = ".hutchignore";
/** Where a snapshot's top directories live in a box. */
export const BOX_ROOTS = { workspace: "/workspace", home: "/home/hutch" } as const;
const RESTORED_DIR = `${BOX_ROOTS.home}/Restored`;
const SOURCE_PREFIX = "box:";
/** A diff shows hunks for at most this many files, each at most PATCH_BYTES on either side. */
const MAX_PATCHES = 200;
const PATCH_BYTES = 256 * 1024;
const MAX_CHANGES = 10_000;

/** A store's progress as an operation's counts line. */
function counts(report: OpReport): (p: Progress) => void {
  return (p) =>
    report({
      type: "counts",
      phase: p.phase,
      files: p.files,
      ...(p.filesTotal !== undefined ? { filesTotal: p.filesTotal } : {}),
      bytes: p.bytes,
      ...(p.bytesTotal !== undefined ? { bytesTotal: p.bytesTotal } : {}),
      ...(p.bytesNew !== undefined ? { bytesNew: p.bytesNew } : {}),
      rate: p.rate,
      ...(p.etaMs !== undefined ? { etaMs: p.etaMs } : {}),
      elapsedMs: p.elapsedMs,
    });
}

/** A staged path's user.* attributes, for the tar sent into a box. */
function userXattrs(path: string): [string, Uint8Array][] {
  return readXattrs(path).filter(([n]) => n.startsWith("user."));
}

/** Sends a packed host directory into the box with tar.in; resolves with what the guest unpacked. */
async function sendTar(
  channel: Channel,
  local: string,
  dir: string,
  name: string,
  signal?: AbortSignal,
  sent?: (bytes: number) => void,
): Promise<TarInResult> {
  const stream = channel.mux.open({ tool: "tar.in", path: dir, name, links: true });
  const ended = follow(stream, { stdin: "open" });
  try {
    // With snapshot metadata: hard links and exact mtimes reach the box (the guest keeps permission bits only, and its own owner).
    for await (const chunk of packTar(local, { meta: true, xattrs: userXattrs })) {
      signal?.throwIfAborted();
      if (!(await stream.write(Chan.stdin, chunk))) break;
      sent?.(chunk.length);
    }
    stream.eof(Chan.stdin);
    const refused = (e: StreamError) =>
      new HutchError(
        e.code === "invalid" ? "invalid" : "failed",
        `the box refused the restore into ${dir}/${name}: ${e.message}`,
        `see what is in the way: hutch exec BOX -- ls -la ${dir}`,
      );
    return resultOf(await ended, "tar.in", TarInResult, refused, "the guest may be broken: hutch box info");
  } catch (err) {
    stream.close();
    throw err;
  }
}

export class SnapshotService {
  private storePromise?: Promise<Store>;
  /** A snapshot of a box was taken (sessions log it as checkpoint.created). */
  readonly created = new Listeners<[boxId: string, snapshot: SnapshotInfo]>("snapshot created");

  /** `store`: one opened already (a fleet's, on its cluster); without it the home's own, opened on first use. */
  constructor(
    private readonly home: string,
    private readonly boxes: BoxService,
    store?: Store,
  ) {
    if (store) this.storePromise = Promise.resolve(store);
  }

  /** The store, opened (and created) on first use. */
  store(): Promise<Store> {
    this.storePromise ??= openStore(storeLocation(this.home), { create: true }).catch((err) => {
      this.storePromise = undefined;
      throw err;
    });
    return this.storePromise;
  }

  /** A box's have-map, beside the store's index cache (./have.ts). */
  private haveFile(store: Store, boxId: string): string {
    return join(storeLocation(this.home).cacheDir, store.info.id, "have", boxId);
  }

  private info(s: SnapshotRecord): SnapshotInfo {
    const box = s.source.startsWith(SOURCE_PREFIX) ? s.source.slice(SOURCE_PREFIX.length) : s.source;
    const name = this.boxes.byId(box)?.name;
    return {
      id: s.id,
      time: s.time,
      box,
      ...(name ? { boxName: name } : {}),
      ...(s.label ? { label: s.label } : {}),
      ...(s.parent ? { parent: s.parent } : {}),
      files: s.stats.files,
      bytes: s.stats.bytes,
      bytesAdded: s.stats.bytesStored,
      filesChanged: s.stats.filesChanged,
      via: s.tags.includes("via:guest") ? "guest" : "disk",
      skipped: s.stats.skipped,
      ms: s.stats.ms,
    };
  }

  async create(boxRef: string, label: string | undefined, report: OpReport, signal: AbortSignal): Promise<SnapshotCreateResult> {
    const box = this.boxes.get(boxRef);
    const store = await this.store();
    const source = `${SOURCE_PREFIX}${box.id}`;
    const progress = counts(report);
    const what = this.what();
    const common = { source, ...(label !== undefined ? { label } : {}), progress, signal, exclude: what.exclude, never: what.never };
    const viaGuest = async (): Promise<SnapshotResult & { transfer: Transfer }> => {
      const { channel } = this.boxes.channel(box.id);
      const g = await guestRoots({
        mux: channel.mux,
        capabilities: channel.hello.capabilities,
        store,
        boxId: box.id,
        haveFile: this.haveFile(store, box.id),
        roots: what.roots.map((name) => ({
          name,
          path: BOX_ROOTS[name],
          exclude: rulesForRoot([...what.exclude, ...what.never], name),
          ...(what.ignoreFile ? { ignoreFile: what.ignoreFile } : {}),
        })),
      });
      if (g.warning) logger.warn("chunk map not used", { box: box.name, reason: g.warning });
      try {
        return await snapshotStreams(store, g.roots, { ...common, tags: ["via:guest"], ...(g.have ? { have: g.have } : {}) });
      } finally {
        g.close();
      }
    };
    let result: (SnapshotResult & { transfer?: Transfer }) | undefined;
    if (box.state === "asleep") {
      // Its files are read through its guest, as a running box's: it wakes, and sleeps again when idle.
      report({ type: "step", n: 1, total: 2, title: `waking ${box.name}` });
      await this.boxes.wake(box.id);
      report({ type: "step", n: 2, total: 2, title: `reading ${box.name} through its guest` });
      result = await viaGuest();
    } else if (box.state === "running") {
      report({ type: "step", n: 1, total: 1, title: `reading ${box.name} through its guest` });
      result = await viaGuest();
    } else if (box.state === "stopped") {
      result = await this.boxes.whileStopped(box.id, async (handle, engine) => {
        if (!engine.openRoots) return undefined;
        report({ type: "step", n: 1, total: 1, title: `reading ${box.name} from its disk` });
        const opened = await engine.openRoots(handle);
        try {
          const roots = opened.roots.filter((r) => what.roots.includes(r.name));
          return await snapshotTree(store, roots, {
            ...common,
            tags: ["via:disk"],
            ...(what.ignoreFile ? { ignoreFile: what.ignoreFile } : {}),
          });
        } finally {
          await opened.release();
        }
      });
      if (!result) {
        // A disk the host cannot read (a VM's qcow2): the box is started, read through its guest, and stopped again.
        report({ type: "step", n: 1, total: 2, title: `starting ${box.name} to read it through its guest` });
        await this.boxes.ensureRunning(box.id);
        try {
          report({ type: "step", n: 2, total: 2, title: `reading ${box.name} through its guest` });
          result = await viaGuest();
        } finally {
          await this.boxes.stop(box.id, null);
        }
      }
    } else {
      throw new HutchError(
        "not_ready",
        `box "${box.name}" is ${box.state}`,
        `wait until it is running or stopped: hutch box info ${box.name}`,
      );
    }
    const rec = await store.getSnapshot(result.id);
    const info = this.info(rec);
    logger.info("snapshot taken", { box: box.name, snapshot: info.id, files: info.files, added: info.bytesAdded, via: info.via });
    const t = result.transfer;
    if (t)
      report({
        type: "detail",
        text: `the box sent ${count(t.bytes, "byte")}: ${count(t.chunksSent, "chunk")}, and named ${t.chunksNamed} it had sent before`,
      });
    report({ type: "done", summary: `snapshot ${info.id} of ${box.name}: ${count(info.files, "file")}, ${info.filesChanged} changed` });
    this.created.emit(box.id, info);
    return { snapshot: info, warnings: result.warnings, ...(t ? { transfer: t } : {}) };
  }

  /**
   * What a snapshot of a box takes, from config.json (read at each snapshot,
   * so an edit applies to the next one): its roots, its rules, and always the
   * files that hold the box's stubs, which no rule can bring back in.
   */
  private what(): { roots: (keyof typeof BOX_ROOTS)[]; exclude: string[]; never: string[]; ignoreFile?: string } {
    const c = loadConfig(join(this.home, HOME_FILES.config)).snapshots ?? {};
    const never = identityFiles().map((p) => `/${p}`);
    const ignoreFile = c.ignoreFile === false ? undefined : (c.ignoreFile ?? IGNORE_FILE);
    return { roots: c.roots ?? ["workspace", "home"], exclude: c.exclude ?? [], never, ...(ignoreFile ? { ignoreFile } : {}) };
  }

  async list(boxRef?: string): Promise<SnapshotInfo[]> {
    const store = await this.store();
    const all = await store.listSnapshots();
    const want = boxRef === undefined ? undefined : `${SOURCE_PREFIX}${this.boxId(boxRef)}`;
    // A carried box's files (fleet/carry.ts) are a move in flight, not a snapshot of anyone's: its disk and memory.
    return all.filter((s) => !s.source.startsWith(CARRY_SOURCE) && (want === undefined || s.source === want)).map((s) => this.info(s));
  }

  /** A box's id from its name or id; a deleted box's snapshots are still found by its id. */
  private boxId(ref: string): string {
    try {
      return this.boxes.get(ref).id;
    } catch (err) {
      if (/^box_[0-9a-z]+$/.test(ref)) return ref;
      throw err;
    }
  }

  /** The snap_ id a ref (an id, or a unique prefix of its object name) names; a not_found error when none. */
  async idOf(ref: string): Promise<string> {
    return (await (await this.store()).getSnapshot(ref)).id;
  }

  async browse(snap: string, path: string): Promise<SnapshotBrowse> {
    return browse(await this.store(), snap, path);
  }

  async diff(from: string, to: string): Promise<SnapshotDiff> {
    const store = await this.store();
    const [a, b] = [await store.getSnapshot(from), await store.getSnapshot(to)];
    const changes: SnapshotChange[] = [];
    let truncated = false;
    let patches = 0;
    for await (const c of diffSnapshots(store, a.id, b.id)) {
      if (changes.length >= MAX_CHANGES) {
        truncated = true;
        break;
      }
      const out: SnapshotChange = { path: c.path, change: c.change, type: c.type };
      if (c.type === "file" && (c.change === "modified" || c.change === "added" || c.change === "removed") && patches < MAX_PATCHES) {
        patches++;
        const before = c.change === "added" ? null : await this.fileText(store, a, c.path);
        const after = c.change === "removed" ? null : await this.fileText(store, b, c.path);
        const patch =
          before?.text !== undefined || after?.text !== undefined ? unifiedDiff(c.path, before?.text ?? null, after?.text ?? null) : null;
        const binary = (before && before.text === undefined) || (after && after.text === undefined);
        if (patch !== null && !binary) out.patch = patch;
        else out.binary = { before: before?.size ?? 0, after: after?.size ?? 0 };
      }
      changes.push(out);
    }
    return { from: a.id, to: b.id, changes, truncated };
  }

  /** A file's size, and its text when it is small UTF-8 without NUL. */
  private async fileText(store: Store, snap: SnapshotRecord, path: string): Promise<{ size: number; text?: string }> {
    const { entry } = await resolvePath(store, snap, snapshotPath(path));
    const size = entry?.size ?? 0;
    if (entry?.type !== "file" || size > PATCH_BYTES) return { size };
    const parts: Uint8Array[] = [];
    for (const id of entry.content!) parts.push(await store.readBlob("data", Buffer.from(id, "hex"), `${snap.id}:${path}`));
    const bytes = Buffer.concat(parts);
    if (bytes.includes(0)) return { size };
    try {
      return { size, text: new TextDecoder("utf-8", { fatal: true }).decode(bytes) };
    } catch {
      return { size };
    }
  }

  /** Refuses (before a box is made) a snapshot a box cannot be forked from; the snapshot and the id of its box. */
  async forkable(ref: string): Promise<SnapshotRecord & { box: string }> {
    const snap = await (await this.store()).getSnapshot(ref);
    if (!snap.source.startsWith(SOURCE_PREFIX))
      throw new HutchError(
        "invalid",
        `snapshot ${snap.id} is not of a box (its source is ${snap.source})`,
        "fork from a box's snapshot: hutch snapshot list",
      );
    return { ...snap, box: snap.source.slice(SOURCE_PREFIX.length) };
  }

  /**
   * Fills a new box with a snapshot's roots, in place, through its guest.
   * What carries the old box's identity is left out: the agents' config
   * files hold its broker stubs, and the new box's are written when an agent
   * first runs in it. Its id, stubs and policy are its own already.
   */
  async seed(boxId: string, ref: string): Promise<SnapshotRestoreResult> {
    const snap = await this.forkable(ref);
    return this.restore({ box: boxId, snapshot: snap.id, inPlace: true }, () => undefined, new AbortController().signal, identityFiles());
  }

  async restore(body: SnapshotRestoreBody, report: OpReport, signal: AbortSignal, drop: string[] = []): Promise<SnapshotRestoreResult> {
    const store = await this.store();
    const snap = await store.getSnapshot(body.snapshot);
    for (const p of body.paths ?? []) snapshotPath(p);
    const tmpRoot = join(this.home, "tmp");
    mkdirSync(tmpRoot, { recursive: true, mode: 0o700 });
    const staging = mkdtempSync(join(tmpRoot, "restore-"));
    try {
      report({ type: "step", n: 1, total: 2, title: `restoring ${snap.id} on the host` });
      const local = join(staging, "tree");
      // What comes out of a box is untrusted: links leaving the tree are refused, setuid bits dropped.
      const r = await restoreTree(store, snap.id, local, {
        ...(body.paths ? { paths: body.paths } : {}),
        modeMask: 0o777,
        // Only user.* goes back into a box (its guest sets no other namespace either).
        xattrs: (name) => name.startsWith("user."),
        progress: counts(report),
        signal,
      });
      for (const p of drop) rmSync(join(local, p), { recursive: true, force: true });
      report({ type: "step", n: 2, total: 2, title: `sending it into ${body.box}` });
      const { box, channel } = await this.boxes.awake((await this.boxes.ensureRunning(body.box)).id);
      // A box takes a large restore slowly (a VM under tcg at a few MB/s): say how far it got, at most once a second.
      const t0 = performance.now();
      let bytesSent = 0;
      let last = 0;
      const sent = (n: number) => {
        bytesSent += n;
        const now = performance.now();
        if (now - last < 1000) return;
        last = now;
        const elapsedMs = Math.round(now - t0);
        report({
          type: "counts",
          phase: "send",
          files: 0,
          bytes: bytesSent,
          rate: elapsedMs > 0 ? Math.round((bytesSent * 1000) / elapsedMs) : 0,
          elapsedMs,
        });
      };
      const into: string[] = [];
      if (body.inPlace) {
        for (const top of readdirSync(local)) {
          const guestRoot = BOX_ROOTS[top as keyof typeof BOX_ROOTS];
          if (!guestRoot)
            throw new HutchError(
              "invalid",
              `snapshot ${snap.id} holds ${top}, which is not a root of a box`,
              "restore it without --in-place",
            );
          for (const child of readdirSync(join(local, top)))
            await sendTar(channel, join(local, top, child), guestRoot, child, signal, sent);
          into.push(guestRoot);
        }
      } else {
        const name = new Date(snap.time)
          .toISOString()
          .replace(/\.\d+Z$/, "Z")
          .replaceAll(":", "-");
        await sendTar(channel, local, RESTORED_DIR, name, signal, sent);
        into.push(`${RESTORED_DIR}/${name}`);
      }
      report({ type: "done", summary: `restored ${count(r.files, "file")} of ${snap.id} into ${box.name}:${into.join(", ")}` });
      return { snapshot: snap.id, box: box.name, into, files: r.files, dirs: r.dirs, symlinks: r.symlinks, bytes: r.bytes, ms: r.ms };
    } finally {
      // On the thread pool: a restore's staging copy can be thousands of files (rmSync held the daemon ~0.1 s per 10k).
      await rm(staging, { recursive: true, force: true });
    }
  }

  async prune(body: SnapshotPruneBody, report: OpReport, signal: AbortSignal): Promise<SnapshotPruneResult> {
    const { dryRun, ...policy } = body;
    const r = await prune(await this.store(), { policy, ...(dryRun ? { dryRun } : {}), progress: counts(report), signal });
    report({
      type: "done",
      summary: `forgot ${count(r.forgotten.length, "snapshot")}; marked ${count(r.marked.packs, "pack")}, deleted ${r.deleted.packs}`,
    });
    return { forgotten: r.forgotten, marked: r.marked, deleted: r.deleted, revived: r.revived, repacked: r.repacked, ms: r.ms };
  }

  async check(readData: boolean, report: OpReport, signal: AbortSignal): Promise<SnapshotCheckResult> {
    const r = await checkStore(await this.store(), { readData, progress: counts(report), signal });
    report({
      type: "done",
      summary: r.ok
        ? `the store is whole (${count(r.snapshots, "snapshot")}, ${count(r.packs, "pack")})`
        : `${count(r.errors.length, "problem")} found`,
    });
    return r;
  }

  async close(): Promise<void> {
    const s = await this.storePromise?.catch(() => undefined);
    s?.close();
    this.storePromise = undefined;
  }
}
