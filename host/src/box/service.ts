// Boxes: desired state is stored, a level-triggered reconciler drives each box
// toward it, and every lifecycle request is an op in the journal. A daemon
// that dies mid-operation finds the op pending on restart and finishes it.
import { join } from "node:path";
import {
  emit,
  Events,
  HutchError,
  type Actor,
  type Box,
  type BoxCreateBody,
  type BoxPolicy,
  type BoxSetBody,
  type BoxSpec,
  type BoxState,
  type DesiredState,
  type EngineName,
  type TypedEvent,
} from "@hutch/shared";
import type { BoxRegistry, BoxRow, OpKind } from "../store/types.ts";
import type { BoxHandle, Engine, EngineCapabilities, SleepState } from "../engine/types.ts";
import { openChannel, type Channel } from "../engine/channel.ts";
import { env } from "../env.ts";
import { log } from "../log.ts";
import { Listeners } from "../listeners.ts";
import { type AutoSleep, parseAutoSleep } from "./idle.ts";
import { restartConfig, restartInfo } from "./restart.ts";

const logger = log.create({ service: "boxes" });

/** A VM box sleeps after this long idle unless created with another --sleep-after (or off). */
export const DEFAULT_VM_SLEEP_AFTER_MS = 30 * 60_000;

const defined = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

/** Which settings each engine takes: limits on both (but processes only outside a VM), image and kernel args only for VMs. */
function checkSettings(engine: string, name: string, config: Record<string, unknown>): void {
  const vmOnly = ["image", "kernelArgs"].filter((k) => k in config);
  if (engine !== "qemu" && vmOnly.length > 0) {
    throw new HutchError(
      "invalid",
      `${vmOnly.join(" and ")} apply to VM boxes, not to the ${engine} engine`,
      `create a VM: hutch box create ${name} --engine qemu`,
    );
  }
  if (engine === "qemu" && "pids" in config) {
    throw new HutchError(
      "invalid",
      "--pids applies to process boxes: a VM's processes are bounded by its own kernel, and cannot fork-bomb the host",
      "leave --pids out for a VM box",
    );
  }
  if (engine === "qemu" && typeof config.memoryMiB === "number" && config.memoryMiB < 256) {
    throw new HutchError("invalid", `a VM needs at least 256 MiB of memory, not ${config.memoryMiB}`, "e.g. --memory 1G");
  }
}

/** What a box is given, as quotas and placement count it: its CPU and memory limits (none: 1 vCPU, 512 MiB). */
export interface BoxGiven {
  cpus: number;
  memoryMiB: number;
}

export function givenOf(config: Record<string, unknown>): BoxGiven {
  return {
    cpus: typeof config.cpus === "number" ? config.cpus : 1,
    memoryMiB: typeof config.memoryMiB === "number" ? config.memoryMiB : 512,
  };
}

/** Where a create may get a warm box instead of making one (box/pool.ts). */
export interface WarmSource {
  /** A ready (asleep) pool box that fits the create, taken so no other create gets it; null when none does. */
  take(engine: string, config: Record<string, unknown>, body: BoxCreateBody): BoxRow | null;
  /** What became of a taken box: it is the new box now, it is back in its pool, or it is broken (the pool throws it away). */
  done(id: string, outcome: "claimed" | "returned" | "broken"): void;
  /** A pool's box: not listed, nobody's. */
  pooled(row: BoxRow): boolean;
  /** A box booted where a booted state of its shape is wanted (engine/qemu/booted.ts): one is made, for the boxes after it. */
  wantBooted?(row: BoxRow): void;
}

export class BoxService {
  private readonly channels = new Map<string, Channel>();
  /** One reconcile at a time per box; requests queue behind it. */
  private readonly locks = new Map<string, Promise<void>>();
  private closing = false;
  /** Every state change (sessions log them as box.state.changed). */
  readonly stateChanged = new Listeners<[boxId: string, state: BoxState, reason: string | null]>("box state");
  /** A box's channel opened (the broker opens its gate); awaited before the box counts as running. */
  readonly channelOpened = new Listeners<[boxId: string, dir: string, channel: Channel]>("box channel");
  /** A box's channel closed (the broker closes its gate). */
  readonly channelClosed = new Listeners<[boxId: string]>("box channel");
  /** Vetoes on the egress policy a create asks for (bindings must exist): a listener throws to refuse. */
  readonly policyChecks = new Listeners<[policy: BoxPolicy]>("box policy");
  /** Daemon events about a box (it slept, it woke, a wake booted it afresh), for the sessions bound to it. */
  readonly events = new Listeners<[boxId: string, event: TypedEvent]>("box event");
  /** One wake in flight per box: every caller that needs the box awake waits on the same one. */
  private readonly waking = new Map<string, Promise<Box>>();
  /** Who asked for the sleep or wake a box's reconcile is carrying out, for its event. */
  private readonly askedBy = new Map<string, Actor>();
  /** A box appeared, changed (state, limits) or went (the change feed). */
  readonly changes = new Listeners<[boxId: string]>("box change");
  /** A box's rows are about to go (its owner and shares with them): who could see it is still known. */
  readonly removing = new Listeners<[boxId: string]>("box removal");
  /**
   * Vetoes on making a box at all, after it was found valid (server mode's
   * per-token creation limit, a user's quota): a listener throws to refuse.
   */
  readonly creating = new Listeners<[name: string, owner: string | undefined, given: BoxGiven]>("box create");

  /** Warm pools' boxes, which a create claims when one fits (wired in daemon/services.ts). */
  warm?: WarmSource;

  /** Fills a new box from a snapshot (`create` with `from`); wired to the snapshot service in daemon/services.ts. */
  seeder?: {
    /** Throws unless a box can be forked from the snapshot; the id of the box it was taken of. */
    check(snapshot: string): Promise<{ box: string }>;
    seed(boxId: string, snapshot: string): Promise<void>;
  };

  constructor(
    private readonly store: BoxRegistry,
    private readonly engines: Record<string, Engine>,
    private readonly home: string,
    /** How a box's channel is opened (the reconciler's table test scripts the guest side). */
    private readonly open: typeof openChannel = openChannel,
  ) {}

  list(): Box[] {
    return this.store
      .list()
      .filter((r) => !this.warm?.pooled(r))
      .map((r) => this.toBox(r));
  }

  get(ref: string): Box {
    return this.toBox(this.row(ref));
  }

  /** Whether a box is this server's own, not a user's: a warm pool's, or one booted for a booted state (box/pool.ts). */
  hidden(id: string): boolean {
    const row = this.store.byId(id);
    return row !== null && row !== undefined && this.warm?.pooled(row) === true;
  }

  byId(id: string): BoxRow | null {
    return this.store.byId(id);
  }

  /** A box's row by name or id, or null. */
  find(ref: string): BoxRow | null {
    return this.store.find(ref);
  }

  /** The box, started first if it is not running (woken, if it is asleep). */
  async ensureRunning(ref: string, actor?: Actor): Promise<Box> {
    const row = this.row(ref);
    if (row.state === "running" && this.channels.get(row.id)?.mux.alive) return this.toBox(row);
    if (isSleepState(row)) return this.wake(row.id, actor);
    return this.start(row.id, null);
  }

  /**
   * Puts a running box to sleep: its state on disk, no process of it left
   * (what the state keeps is the engine's `capabilities.sleep`). Idempotent:
   * an asleep box is returned as it is.
   */
  async sleep(ref: string, actor?: Actor): Promise<Box> {
    const row = this.row(ref);
    const engine = this.engine(row.engine);
    if (!engine.capabilities.sleep || !engine.sleep)
      throw new HutchError("invalid", `the ${row.engine} engine cannot put boxes to sleep`, `stop it instead: hutch box stop ${row.name}`);
    if (row.state === "asleep" && row.desired === "asleep") return this.toBox(row);
    if (row.state !== "running" && row.state !== "sleeping" && row.state !== "waking")
      throw new HutchError("not_ready", `box "${row.name}" is ${row.state}; only a running box sleeps`, `see: hutch box info ${row.name}`);
    if (actor) this.askedBy.set(row.id, actor);
    return this.request(row.id, "sleep", "asleep", null);
  }

  /**
   * Wakes an asleep box and returns it running. Idempotent (a running box is
   * returned as it is), and concurrent callers share one wake.
   */
  wake(ref: string, actor?: Actor): Promise<Box> {
    const row = this.row(ref);
    const inflight = this.waking.get(row.id);
    if (inflight) return inflight;
    if (row.state === "running" && row.desired === "running") return Promise.resolve(this.toBox(row));
    if (!isSleepState(row))
      throw new HutchError("not_ready", `box "${row.name}" is ${row.state}, not asleep`, `start it: hutch box start ${row.name}`);
    if (actor) this.askedBy.set(row.id, actor);
    const woken = this.request(row.id, "wake", "running", null).finally(() => this.waking.delete(row.id));
    this.waking.set(row.id, woken);
    return woken;
  }

  /**
   * The live channel of a box, woken first if it is asleep: the one place a
   * verb that needs a running box gets it (exec, cp, attach, ports, agents).
   */
  async awake(ref: string, actor?: Actor): Promise<{ box: BoxRow; channel: Channel }> {
    const row = this.row(ref);
    if (isSleepState(row)) await this.wake(row.id, actor);
    return this.channel(row.id);
  }

  private setState(boxId: string, state: BoxState, reason: string | null = null): void {
    const before = this.store.byId(boxId)?.state;
    this.store.setState(boxId, state, reason);
    if (before !== state) this.stateChanged.emit(boxId, state, reason);
    this.changes.emit(boxId);
  }

  /** Creates a box; owner is the user it belongs to (none: the daemon's local user). */
  async create(body: BoxCreateBody, idemKey: string | null, owner?: string): Promise<Box> {
    const replay = idemKey ? this.store.opByKey(idemKey) : null;
    if (replay) return this.finish(replay.boxId, replay.id);
    const engine = body.engine ?? "process";
    this.engine(engine);
    if (this.store.byName(body.name)) {
      throw new HutchError("conflict", `box "${body.name}" already exists`, `use it, or delete it first: hutch box delete ${body.name}`);
    }
    const config = defined({
      cpus: body.cpus,
      memoryMiB: body.memoryMiB,
      pids: body.pids,
      disk: body.disk,
      image: body.image,
      kernelArgs: body.kernelArgs,
    });
    checkSettings(engine, body.name, config);
    Object.assign(config, this.autoSleepConfig(engine, body.name, body, true), restartConfig(body));
    const policy: BoxPolicy = { allow: [...new Set(body.allow ?? [])], bindings: [...new Set(body.secrets ?? [])] };
    this.policyChecks.check(policy);
    const seeder = body.from === undefined ? undefined : this.seeder;
    if (body.from !== undefined) {
      if (!seeder) throw new HutchError("invalid", "this daemon cannot create a box from a snapshot", "create it without --from");
      await seeder.check(body.from);
    }
    // A fork is filled through its guest, so it starts; it stops again unless asked to run.
    const desired = body.start || seeder ? "running" : "stopped";
    this.creating.check(body.name, owner, givenOf(config));
    // A warm pool's asleep box that fits is claimed (and woken) instead of one being made.
    const warm = seeder ? null : (this.warm?.take(engine, config, body) ?? null);
    let made: { box: BoxRow; op: { id: string } };
    try {
      made = this.store.insertBox(body.name, engine, desired, idemKey, config, policy, owner);
    } catch (err) {
      if (warm) this.warm?.done(warm.id, "returned");
      throw err;
    }
    const { box, op } = made;
    logger.info("box created", { box: box.name, id: box.id, engine, ...(body.from ? { from: body.from } : {}) });
    if (warm) await this.claim(warm, box);
    this.changes.emit(box.id);
    const done = await this.finish(box.id, op.id);
    if (!seeder || body.from === undefined) return done;
    try {
      await seeder.seed(box.id, body.from);
    } catch (err) {
      // No half-filled fork is left behind.
      await this.delete(box.id, null).catch((e) => logger.warn("could not delete a fork that failed", { box: box.name, err: String(e) }));
      throw err;
    }
    return body.start ? this.get(box.id) : this.stop(box.id, null);
  }

  /**
   * Makes here, under its own id and name, a box another server of the fleet
   * ran (a move or a failover: fleet/reconcile.ts), with the settings and
   * policy it had, and starts it. Its files come after, from a checkpoint.
   * The quota was counted when the box was first made; it is the same box.
   */
  async adopt(a: { id: string; name: string; owner: string | undefined; spec: BoxSpec; epoch: number }): Promise<Box> {
    const have = this.store.byId(a.id);
    if (have && this.epoch(a.id) >= a.epoch) return this.toBox(have);
    // An older copy of the box left here (it went away and came back): it is not the box any more.
    if (have) await this.discard(a.id);
    this.engine(a.spec.engine);
    if (this.store.byName(a.name))
      throw new HutchError(
        "conflict",
        `box "${a.name}" cannot come here: this server has another box of that name`,
        `rename or delete this server's box "${a.name}", and the fleet moves it on its next round`,
      );
    const config: Record<string, unknown> = { ...a.spec.config, fleetEpoch: a.epoch };
    checkSettings(a.spec.engine, a.name, config);
    const { engine: _, config: __, ...policy } = a.spec;
    this.policyChecks.check(policy);
    const { box, op } = this.store.insertBox(a.name, a.spec.engine as EngineName, "running", null, config, policy, a.owner, a.id);
    logger.info("box made here from another server of the fleet", { box: box.name, id: box.id, engine: a.spec.engine });
    this.changes.emit(box.id);
    return this.finish(box.id, op.id);
  }

  /** Which placement of a box in its fleet this server's copy is (fleet/boxes.ts): 1 unless it came from another server. */
  epoch(boxId: string): number {
    const row = this.store.byId(boxId);
    const e = row ? (JSON.parse(row.config) as { fleetEpoch?: unknown }).fleetEpoch : undefined;
    return typeof e === "number" ? e : 1;
  }

  /** Sets some of a box's config keys, keeping the others. */
  private patchConfig(row: BoxRow, patch: Record<string, unknown>): void {
    this.store.setConfig(row.id, { ...(JSON.parse(row.config) as Record<string, unknown>), ...patch });
  }

  /** Records a new placement of this server's copy (a move that did not happen takes the box back under a later epoch). */
  setEpoch(boxId: string, epoch: number): void {
    const row = this.store.byId(boxId);
    if (row) this.patchConfig(row, { fleetEpoch: epoch });
  }

  /** A box's settings and policy as another server would make it again (BoxSpec). */
  spec(boxId: string, policy: BoxPolicy): BoxSpec | null {
    const row = this.store.byId(boxId);
    if (!row) return null;
    const config = Object.fromEntries(
      Object.entries(JSON.parse(row.config) as Record<string, unknown>).filter(
        ([k, v]) => k !== "fleetEpoch" && (v === null || ["string", "number", "boolean"].includes(typeof v)),
      ),
    ) as BoxSpec["config"];
    return { engine: row.engine, config, ...policy };
  }

  /** Records the latest checkpoint of a box (box/checkpoint.ts): its snapshot and when. */
  checkpointed(boxId: string, snapshot: string, at: string): void {
    const row = this.store.byId(boxId);
    if (!row) return;
    this.patchConfig(row, { checkpointSnapshot: snapshot, checkpointAt: at });
    this.changes.emit(boxId);
  }

  /**
   * Removes this server's copy of a box without a word to its sessions: the
   * fleet runs the box elsewhere now (a newer placement superseded this one),
   * so nothing here may speak for it. Its processes are killed, its files and
   * rows go; no state change is told.
   */
  async discard(boxId: string): Promise<void> {
    const row = this.store.byId(boxId);
    if (!row) return;
    const prev = this.locks.get(boxId) ?? Promise.resolve();
    const next = prev.then(async () => {
      const now = this.store.byId(boxId);
      if (!now) return;
      const engine = this.engines[now.engine];
      const box = this.handle(now);
      this.dropChannel(boxId);
      if (engine) {
        await engine.kill(box, { own: true }).catch(() => undefined);
        await engine.forgetSleep?.(box).catch(() => undefined);
        await engine
          .destroy(box, { own: true })
          .catch((err) => logger.warn("a superseded box's files were not all removed", { box: now.name, err: String(err) }));
      }
      this.removing.emit(boxId);
      this.store.deleteBox(boxId);
      this.changes.emit(boxId);
      logger.info("removed this server's superseded copy of a box", { box: now.name, id: boxId });
    });
    this.locks.set(
      boxId,
      next.catch(() => undefined),
    );
    await next;
  }

  /**
   * A warm pool's asleep box becomes the new box `to`: its files move under
   * to's id (the engine's rehome), its own rows go, and `to` is asleep, so the
   * create's reconcile wakes it. The guest takes to's name and id on the
   * wake's new connection (box/identity.ts), the broker gives it to's
   * policy and stubs. A move that fails leaves `to` to be made as usual.
   */
  private async claim(from: BoxRow, to: BoxRow): Promise<void> {
    const engine = this.engine(from.engine);
    try {
      if (!engine.rehome) throw new Error(`the ${from.engine} engine cannot move a box`);
      // The connection held across the pool box's sleep was the pool box's: the woken box opens its own.
      this.dropChannel(from.id);
      await engine.rehome(this.handle(from), this.handle(to));
    } catch (err) {
      logger.warn("could not claim a warm box; making one instead", { box: to.name, pooled: from.name, err: String(err) });
      this.warm?.done(from.id, "broken");
      return;
    }
    this.store.deleteBox(from.id);
    // Claimed, it is woken whether or not the create asked to start it: it is booted already.
    this.store.request(to.id, "wake", "running", null);
    this.setState(to.id, "asleep");
    this.warm?.done(from.id, "claimed");
    logger.info("box claimed from a warm pool", { box: to.name, id: to.id, pooled: from.id });
  }

  /**
   * An asleep box's state and disk kept by its engine as the booted state
   * of its shape (box/pool.ts makes such boxes); the box is then deleted.
   */
  async keepBooted(id: string): Promise<boolean> {
    const row = this.store.byId(id);
    if (!row) return false;
    const engine = this.engine(row.engine);
    if (!engine.keepBooted) return false;
    this.dropChannel(id);
    return engine.keepBooted(this.handle(row));
  }

  /** New limits for a stopped box, applied at its next start; the sleep settings, in any state, from now. */
  set(ref: string, body: BoxSetBody): Box {
    const row = this.row(ref);
    const { sleepAfter, maxAwake, ...limits } = body;
    if (sleepAfter !== undefined || maxAwake !== undefined) {
      const sleep = this.autoSleepConfig(row.engine, row.name, { sleepAfter, maxAwake }, false);
      this.patchConfig(row, sleep);
      logger.info("box sleep settings changed", {
        box: row.name,
        ...Object.fromEntries(Object.entries(sleep).map(([k, v]) => [k, String(v)])),
      });
      if (Object.keys(limits).length === 0) {
        this.changes.emit(row.id);
        return this.toBox(this.row(row.id));
      }
      return this.set(row.id, limits);
    }
    if (row.state !== "stopped" && row.state !== "failed" && row.state !== "creating") {
      throw new HutchError(
        "conflict",
        `box "${row.name}" is ${row.state}; limits change only while it is stopped`,
        `stop it first: hutch box stop ${row.name}`,
      );
    }
    const change = defined({ cpus: body.cpus, memoryMiB: body.memoryMiB, pids: body.pids, disk: body.disk });
    checkSettings(row.engine, row.name, change);
    this.patchConfig(row, change);
    logger.info("box limits changed", { box: row.name, ...Object.fromEntries(Object.entries(change).map(([k, v]) => [k, String(v)])) });
    this.changes.emit(row.id);
    return this.toBox(this.row(row.id));
  }

  async start(ref: string, idemKey: string | null): Promise<Box> {
    return this.request(ref, "start", "running", idemKey);
  }

  async stop(ref: string, idemKey: string | null): Promise<Box> {
    return this.request(ref, "stop", "stopped", idemKey);
  }

  async pause(ref: string, idemKey: string | null): Promise<Box> {
    const row = this.row(ref);
    const engine = this.engine(row.engine);
    if (!engine.capabilities.pause)
      throw new HutchError("invalid", `the ${row.engine} engine cannot pause boxes`, "pause needs a VM box (--engine qemu)");
    if (row.state !== "running" && row.state !== "paused")
      throw new HutchError("not_ready", `box "${row.name}" is ${row.state}`, `start it first: hutch box start ${row.name}`);
    return this.request(ref, "pause", "paused", idemKey);
  }

  async resume(ref: string, idemKey: string | null): Promise<Box> {
    return this.request(ref, "resume", "running", idemKey);
  }

  async delete(ref: string, idemKey: string | null): Promise<{ id: string; name: string; deleted: true }> {
    const replay = idemKey ? this.store.opByKey(idemKey) : null;
    const row = replay ? this.store.byId(replay.boxId) : this.row(ref);
    if (!row) return { id: replay!.boxId, name: ref, deleted: true };
    const op = replay ?? this.store.request(row.id, "delete", "deleted", idemKey);
    await this.reconcile(row.id);
    const after = this.store.op(op.id);
    if (after?.status === "failed")
      throw new HutchError("failed", `deleting box "${row.name}" failed: ${after.error}`, `retry: hutch box delete ${row.name}`);
    return { id: row.id, name: row.name, deleted: true };
  }

  /** The live channel of a running box, or a not_ready error saying what to do. */
  channel(ref: string): { box: BoxRow; channel: Channel } {
    const row = this.row(ref);
    const ch = this.channels.get(row.id);
    if (row.state === "running" && ch && ch.mux.alive) return { box: row, channel: ch };
    if (row.state === "paused") throw new HutchError("not_ready", `box "${row.name}" is paused`, `resume it: hutch box resume ${row.name}`);
    if (isSleepState(row)) throw new HutchError("not_ready", `box "${row.name}" is ${row.state}`, `wake it: hutch box wake ${row.name}`);
    if (row.state === "failed") {
      throw new HutchError(
        "not_ready",
        `box "${row.name}" failed: ${row.reason ?? "unknown reason"}`,
        `start it again: hutch box start ${row.name}`,
      );
    }
    throw new HutchError("not_ready", `box "${row.name}" is ${row.state}`, `start it: hutch box start ${row.name}`);
  }

  /**
   * Runs `fn` on a stopped box's handle and engine, with its lifecycle queue
   * held: a start asked for meanwhile waits until fn is done. not_ready when
   * the box is not stopped.
   */
  async whileStopped<T>(ref: string, fn: (box: BoxHandle, engine: Engine) => Promise<T>): Promise<T> {
    const id = this.row(ref).id;
    const prev = this.locks.get(id) ?? Promise.resolve();
    let out!: Promise<T>;
    const next = prev.then(() => {
      const row = this.store.byId(id);
      if (!row) throw new HutchError("not_found", `box ${ref} no longer exists`, "list boxes: hutch box list");
      if (row.state !== "stopped")
        throw new HutchError("not_ready", `box "${row.name}" is ${row.state}, not stopped`, `see: hutch box info ${row.name}`);
      out = fn(this.handle(row), this.engine(row.engine));
      return out;
    });
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.locks.set(id, settled);
    void settled.finally(() => {
      if (this.locks.get(id) === settled) this.locks.delete(id);
    });
    return next;
  }

  /** On daemon start: finish pending ops and re-find running boxes. */
  async recover(): Promise<void> {
    await Promise.all(this.store.list().map((r) => this.reconcile(r.id)));
  }

  /** Daemon shutdown: drop channels, leave boxes running (they outlive the daemon). */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.locks.values()]);
    for (const ch of this.channels.values()) ch.close();
    this.channels.clear();
  }

  private async request(ref: string, kind: OpKind, desired: DesiredState, idemKey: string | null): Promise<Box> {
    const replay = idemKey ? this.store.opByKey(idemKey) : null;
    if (replay) return this.finish(replay.boxId, replay.id);
    const row = this.row(ref);
    const op = this.store.request(row.id, kind, desired, idemKey);
    return this.finish(row.id, op.id);
  }

  private async finish(boxId: string, opId: string): Promise<Box> {
    await this.reconcile(boxId);
    const op = this.store.op(opId);
    const row = this.store.byId(boxId);
    if (!row) throw new HutchError("not_found", `box ${boxId} no longer exists`, "list boxes: hutch box list");
    if (op?.status === "failed") {
      throw new HutchError("failed", `box "${row.name}": ${op.error}`, `see: hutch box info ${row.name}`, { box: this.toBox(row) });
    }
    return this.toBox(row);
  }

  private row(ref: string): BoxRow {
    const row = this.store.find(ref);
    if (!row) throw new HutchError("not_found", `no box named "${ref}"`, "list boxes: hutch box list");
    return row;
  }

  /** What the box's engine can do, or null for a box not known or an engine not available here. */
  capabilities(boxId: string): EngineCapabilities | null {
    const row = this.store.byId(boxId);
    return (row && this.engines[row.engine]?.capabilities) ?? null;
  }

  private engine(name: EngineName | string): Engine {
    const e = this.engines[name];
    if (!e) throw new HutchError("invalid", `engine "${name}" is not available on this host`, "see what this host can run: hutch doctor");
    return e;
  }

  private handle(row: BoxRow): BoxHandle {
    return { id: row.id, name: row.name, dir: join(this.home, "boxes", row.id), config: JSON.parse(row.config) as Record<string, unknown> };
  }

  /** What a box is given, as quotas and placement count it. */
  given(id: string): BoxGiven {
    const row = this.store.byId(id);
    return givenOf(row ? (JSON.parse(row.config) as Record<string, unknown>) : {});
  }

  toBox(row: BoxRow): Box {
    const engine = this.engines[row.engine];
    const ch = this.channels.get(row.id);
    return {
      id: row.id,
      name: row.name,
      engine: row.engine,
      isolation: engine?.capabilities.isolation ?? "namespace",
      state: row.state,
      desired: row.desired,
      ...(row.reason ? { reason: row.reason } : {}),
      ...(ch ? { guest: { version: ch.hello.version, capabilities: ch.hello.capabilities } } : {}),
      ...(engine?.describe ? { engineInfo: engine.describe(this.handle(row)) } : {}),
      ...this.sleepInfo(row, engine),
      ...this.autoSleepInfo(row.id),
      ...restartInfo(JSON.parse(row.config) as Record<string, unknown>),
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }

  private autoSleepInfo(boxId: string): Pick<Box, "autoSleep"> {
    const a = this.autoSleep(boxId);
    const s = (ms: number | null) => (ms === null ? null : Math.round(ms / 1000));
    return a ? { autoSleep: { sleepAfterS: s(a.sleepAfterMs), maxAwakeS: s(a.maxAwakeMs) } } : {};
  }

  /** When the box sleeps by itself (box/idle.ts), or null when it never does. */
  autoSleep(boxId: string): AutoSleep | null {
    const row = this.store.byId(boxId);
    if (!row) return null;
    const c = JSON.parse(row.config) as { sleepAfterMs?: number | null; maxAwakeMs?: number | null };
    const a = { sleepAfterMs: c.sleepAfterMs ?? null, maxAwakeMs: c.maxAwakeMs ?? null };
    return a.sleepAfterMs === null && a.maxAwakeMs === null ? null : a;
  }

  /**
   * The sleep settings a create or set asks for, as config keys. A VM box
   * sleeps after DEFAULT_VM_SLEEP_AFTER_MS idle unless told otherwise; an
   * engine that cannot sleep a box refuses them.
   */
  private autoSleepConfig(
    engine: string,
    name: string,
    body: { sleepAfter?: string | undefined; maxAwake?: string | undefined },
    creating: boolean,
  ): { sleepAfterMs?: number | null; maxAwakeMs?: number | null } {
    const can = this.engine(engine).capabilities.sleep !== null;
    const out: { sleepAfterMs?: number | null; maxAwakeMs?: number | null } = {};
    if (body.sleepAfter !== undefined) out.sleepAfterMs = parseAutoSleep("--sleep-after", body.sleepAfter);
    if (body.maxAwake !== undefined) out.maxAwakeMs = parseAutoSleep("--max-awake", body.maxAwake);
    if (creating && out.sleepAfterMs === undefined && engine === "qemu" && can) out.sleepAfterMs = DEFAULT_VM_SLEEP_AFTER_MS;
    if (!can && (out.sleepAfterMs != null || out.maxAwakeMs != null))
      throw new HutchError(
        "invalid",
        `the ${engine} engine cannot put boxes to sleep on this host, so --sleep-after and --max-awake do not apply to box "${name}"`,
        "leave them out, or use a VM box (--engine qemu)",
      );
    return out;
  }

  private sleepInfo(row: BoxRow, engine: Engine | undefined): Pick<Box, "sleep"> {
    if (row.state !== "asleep") return {};
    const st = engine?.sleeping?.(this.handle(row));
    return st ? { sleep: { keeps: st.keeps, bytes: st.bytes } } : {};
  }

  /** Serialises reconciles of one box. */
  reconcile(boxId: string): Promise<void> {
    const prev = this.locks.get(boxId) ?? Promise.resolve();
    const next = prev.then(() => this.reconcileNow(boxId)).catch((err) => logger.error("reconcile crashed", { box: boxId, err }));
    this.locks.set(boxId, next);
    void next.finally(() => {
      if (this.locks.get(boxId) === next) this.locks.delete(boxId);
    });
    return next;
  }

  private async reconcileNow(boxId: string): Promise<void> {
    const row = this.store.byId(boxId);
    if (!row || this.closing) return;
    const pending = this.store.pendingOps(boxId);
    // A failed box stays failed until someone asks for something.
    if (row.state === "failed" && pending.length === 0) return;
    const engine = this.engine(row.engine);
    const box = this.handle(row);
    try {
      switch (row.desired) {
        case "deleted":
          await this.driveDeleted(row, engine, box);
          return;
        case "running":
          await this.driveRunning(row, engine, box);
          break;
        case "paused":
          await this.drivePaused(row, engine, box);
          break;
        case "asleep":
          await this.driveAsleep(row, engine, box);
          break;
        case "stopped":
          await this.driveStopped(row, engine, box);
          break;
      }
      this.store.settleOps(boxId, null);
    } catch (err) {
      // Keep the next step with the reason: the op's error is all the caller gets back.
      const message =
        err instanceof HutchError && err.hint ? `${err.message}; ${err.hint}` : err instanceof Error ? err.message : String(err);
      if (!(err instanceof KeptRunning)) await this.failBox(row, message);
      this.store.settleOps(boxId, message);
    }
  }

  private async driveRunning(row: BoxRow, engine: Engine, box: BoxHandle): Promise<void> {
    if (row.state === "creating") await engine.create(box);
    if (engine.wake && (isSleepState(row) || engine.sleeping?.(box))) return this.wakeNow(row, engine, box);
    const observed = await engine.inspect(box);
    if (!observed.running) {
      this.dropChannel(row.id);
      this.setState(row.id, "starting");
      const started = await engine.start(box);
      if (started?.booted === "wanted" && this.warm && !this.warm.pooled(row)) this.warm.wantBooted?.(row);
    } else if (observed.paused) {
      await engine.resume!(box);
    }
    if (!this.channels.get(row.id)?.mux.alive) await this.connect(row, engine, box);
    this.setState(row.id, "running");
  }

  /**
   * From asleep (or a sleep or wake a crash cut short) to running. The engine
   * restores the state or, when it is torn or missing, boots afresh from the
   * disk and says so; the sessions hear which.
   */
  private async wakeNow(row: BoxRow, engine: Engine, box: BoxHandle): Promise<void> {
    const t0 = Date.now();
    const by = this.askedBy.get(row.id);
    this.askedBy.delete(row.id);
    const keeps = engine.sleeping?.(box)?.keeps ?? engine.capabilities.sleep;
    // The connection held across the sleep (driveAsleep), if there is one.
    const held = this.channels.get(row.id);
    if (!held?.reattach) this.dropChannel(row.id);
    this.setState(row.id, "waking");
    const { cold } = await engine.wake!(box);
    if (cold) {
      logger.warn("box woke cold: booted afresh from its disk", { box: row.name, reason: cold });
      this.events.emit(row.id, emit(Events.boxWokeCold, { box: row.id, reason: cold.slice(0, 1024) }));
    }
    const carriedOn =
      !cold && keeps === "memory" && held?.reattach ? await held.reattach(engine.channel(box), await engine.helloTimeoutMs(box)) : false;
    if (!carriedOn) {
      if (held?.reattach) logger.info("the held connection did not carry on after the wake; opening a new one", { box: row.name });
      this.dropChannel(row.id);
      await this.connect(row, engine, box);
    }
    this.setState(row.id, "running");
    const ms = Date.now() - t0;
    logger.info("box woke", { box: row.name, ms, cold: cold !== null, streamsKept: carriedOn });
    this.events.emit(row.id, emit(Events.boxWoke, { box: row.id, ms, programsKept: !cold && keeps === "memory", ...(by ? { by } : {}) }));
  }

  /**
   * Asleep: the engine saves the box's state and ends its processes. A box
   * found not running with its state on disk is asleep already (a daemon
   * restarted after the sleep); one found not running without it (QEMU
   * killed mid-sleep) is asleep too, and its wake will boot it afresh.
   */
  private async driveAsleep(row: BoxRow, engine: Engine, box: BoxHandle): Promise<void> {
    if (!engine.sleep) throw new Error(`the ${row.engine} engine cannot put boxes to sleep`);
    const observed = await engine.inspect(box);
    if (!observed.running && (row.state === "asleep" || row.state === "sleeping" || engine.sleeping?.(box))) {
      this.dropChannel(row.id);
      this.setState(row.id, "asleep");
      return;
    }
    if (!observed.running) throw new Error(`box "${row.name}" is not running, so it cannot sleep; start it: hutch box start ${row.name}`);
    const t0 = Date.now();
    const by = this.askedBy.get(row.id);
    this.askedBy.delete(row.id);
    // Not "running" any more, so the channel closing as the box's processes end is not taken for a fault.
    this.setState(row.id, "sleeping");
    // A VM keeps its memory, so its guest keeps our connection: held across the sleep, it carries on after the
    // wake with its streams (exec, terminals, the broker's listener). Held only once the guest has read all we sent.
    const ch = this.channels.get(row.id);
    const held =
      engine.capabilities.sleep === "memory" && ch?.hold
        ? await ch.hold(HOLD_TIMEOUT_MS).then(
            () => true,
            (err: Error) => {
              logger.warn("the channel could not be held for the sleep; its streams will end", { box: row.name, error: err.message });
              return false;
            },
          )
        : false;
    let st: SleepState;
    // Its processes died during the save (QEMU killed): nothing of it runs and its disk is intact, so it is asleep,
    // with its programs lost, and its wake boots afresh and says so (box.woke.cold).
    let lost = false;
    try {
      st = await engine.sleep(box);
    } catch (err) {
      if (held) ch?.release?.();
      if ((await engine.inspect(box)).running) {
        // A sleep that could not save the state leaves the box running, as it was: not failed.
        this.store.request(row.id, "wake", "running", null);
        this.setState(row.id, "running");
        throw new KeptRunning(`could not sleep, so it runs on: ${(err as Error).message}`);
      }
      logger.warn("the box died while it was put to sleep: asleep with its disk, and its next wake boots afresh", {
        box: row.name,
        error: (err as Error).message,
      });
      st = { keeps: engine.capabilities.sleep ?? "disk", bytes: 0 };
      lost = true;
    }
    if (!held || lost) this.dropChannel(row.id);
    this.setState(row.id, "asleep");
    const ms = Date.now() - t0;
    logger.info("box asleep", { box: row.name, keeps: st.keeps, bytes: st.bytes, ms });
    this.events.emit(
      row.id,
      emit(Events.boxSlept, {
        box: row.id,
        keeps: st.keeps,
        programsStopped: lost || st.keeps !== "memory",
        bytes: st.bytes,
        ms,
        ...(by ? { by } : {}),
      }),
    );
  }

  /** Paused: running but frozen. A frozen guest cannot answer a hello, so the channel waits for resume. */
  private async drivePaused(row: BoxRow, engine: Engine, box: BoxHandle): Promise<void> {
    const observed = await engine.inspect(box);
    if (!observed.running)
      throw new Error(`box "${row.name}" is not running, so it cannot be paused; start it: hutch box start ${row.name}`);
    if (!observed.paused) await engine.pause!(box);
    this.setState(row.id, "paused");
  }

  private async driveStopped(row: BoxRow, engine: Engine, box: BoxHandle): Promise<void> {
    if (row.state === "creating") await engine.create(box);
    // A stop throws a sleeping state away: the next start boots afresh.
    if (engine.sleeping?.(box)) await engine.forgetSleep?.(box);
    if ((await engine.inspect(box)).running) {
      this.setState(row.id, "stopping");
      const ch = this.channels.get(row.id);
      const timeout = env.stopTimeoutMs();
      const { forced } = await engine.stop(box, timeout, () => ch?.mux.control({ type: "shutdown", graceMs: Math.floor(timeout / 2) }));
      if (forced) logger.warn("box did not stop in time and was killed", { box: row.name, timeoutMs: timeout });
    }
    this.dropChannel(row.id);
    this.setState(row.id, "stopped");
  }

  private async driveDeleted(row: BoxRow, engine: Engine, box: BoxHandle): Promise<void> {
    if ((await engine.inspect(box)).running) {
      // Not "running" any more, so the guest's channel closing as it stops is not taken for a fault.
      this.setState(row.id, "stopping");
      const ch = this.channels.get(row.id);
      await engine.stop(box, 3000, () => ch?.mux.control({ type: "shutdown", graceMs: 1000 }));
    }
    this.dropChannel(row.id);
    await engine.kill(box);
    await engine.destroy(box);
    const left = await engine.leftovers(box);
    if (left.length > 0) throw new Error(`delete left things behind: ${left.join(", ")}`);
    this.removing.emit(row.id);
    this.store.deleteBox(row.id);
    this.changes.emit(row.id);
    if (this.store.countRows(row.id) !== 0) throw new Error("delete left database rows behind");
    logger.info("box deleted", { box: row.name, id: row.id });
  }

  private async connect(row: BoxRow, engine: Engine, box: BoxHandle): Promise<void> {
    try {
      const ch = await this.open(
        engine.channel(box),
        await engine.helloTimeoutMs(box),
        {
          onProtocolError: (err) => void this.fault(row.id, `the guest broke the protocol: ${err.message}`),
          onLost: () => void this.fault(row.id, "the guest channel closed unexpectedly"),
        },
        async () => (await engine.inspect(box)).running,
      );
      this.channels.set(row.id, ch);
      logger.info("guest channel open", { box: row.name, guest: ch.hello.version });
      await this.channelOpened.settle(row.id, box.dir, ch);
    } catch (err) {
      const tail = await engine.consoleTail(box, 10);
      throw new Error(`${(err as Error).message}; console log (${join(box.dir, "console.log")}):\n${tail}`);
    }
  }

  /** A running box's channel failed: mark it failed and stop it; other boxes are untouched. */
  private async fault(boxId: string, reason: string): Promise<void> {
    const row = this.store.byId(boxId);
    if (!row || this.closing || row.state !== "running") return;
    await this.failBox(row, reason);
  }

  /** Marks a box failed: its channel dropped, its processes killed, the reason kept for `box info`. */
  private async failBox(row: BoxRow, reason: string): Promise<void> {
    logger.error("box failed", { box: row.name, reason });
    this.dropChannel(row.id);
    await this.engine(row.engine)
      .kill(this.handle(row))
      .catch(() => undefined);
    this.setState(row.id, "failed", reason);
  }

  private dropChannel(boxId: string): void {
    const ch = this.channels.get(boxId);
    if (!ch) return;
    this.channels.delete(boxId);
    this.channelClosed.emit(boxId);
    ch.close();
  }
}

/** How long a guest has to answer the ping that proves it read everything before a sleep. */
const HOLD_TIMEOUT_MS = 10_000;

/** An operation failed and left the box as it was, running: it is not failed. */
class KeptRunning extends Error {
  override name = "KeptRunning";
}

/** Asleep, or on the way in or out of it: a verb that needs the box wakes it. */
function isSleepState(row: BoxRow): boolean {
  return row.state === "asleep" || row.state === "sleeping" || row.state === "waking" || row.desired === "asleep";
}
