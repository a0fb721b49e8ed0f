// Warm pools: each server keeps the wanted number of boxes of each pool
// (engine and image) booted and asleep, so a `box create` that fits claims
// one (BoxService.create → take, then the engine's rehome) and wakes it
// instead of booting a box. The one hard problem is that a pool box is handed
// to exactly one create: `take` is synchronous, marks the box taken before it
// returns, and the refill never touches a taken box or one being booted.
//
// Pool boxes are the server's: made straight in the registry (no owner, no
// quota, no creation limit), hidden from `box list` and the fleet's
// directory, never put to sleep by idleness (they are asleep already). What a
// claim honours: the name, the egress policy and the sleep settings (all of
// the new box's own); the engine, image and limits must be the pool's, and a
// create with kernel args or from a snapshot is made as usual.
import {
  type BoxCreateBody,
  type EngineName,
  HutchError,
  type PoolCleared,
  type PoolSetBody,
  type PoolSpec,
  type PoolStatus,
} from "@hutch/shared";
import { randomBytes } from "node:crypto";
import type { BoxRegistry, BoxRow, PoolSizes } from "../store/types.ts";
import { log } from "../log.ts";
import type { BoxService, WarmSource } from "./service.ts";

const logger = log.create({ service: "pools" });

/** After a pool box fails to boot, its pool waits this long before it tries again. */
export const RETRY_MS = 30_000;

/** The config key that marks a pool's box, with its pool's key. */
const POOL_KEY = "pool";
/** The config key that holds the image build a pool box was booted on. */
const POOL_BUILD = "poolBuild";
/** The pool key of a box booted to keep its state as its shape's booted state (wantBooted). */
const BOOTED_POOL = "booted";
/** The config keys that make a box's shape: what a box booted for its booted state copies. */
const SHAPE_KEYS = ["image", "cpus", "memoryMiB", "disk", "kernelArgs"];

export const poolKey = (engine: string, image: string) => `${engine}/${image}`;

/** Limits a pool's boxes are made with, as box config keys. */
function limitsOf(spec: { cpus?: number | undefined; memoryMiB?: number | undefined; disk?: string | undefined }): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries({ cpus: spec.cpus, memoryMiB: spec.memoryMiB, disk: spec.disk }).filter(([, v]) => v !== undefined),
  );
}

/** The limit keys of a box config that a claim must match: what the engine boots the box with. */
const BOOT_KEYS = ["cpus", "memoryMiB", "disk", "pids", "kernelArgs"] as const;

/** Whether a box made with `config` would boot as the pool's boxes did. Pure, for the table test. */
export function fits(spec: PoolSpec, engine: string, config: Record<string, unknown>): boolean {
  if (engine !== spec.engine) return false;
  const image = engine === "qemu" ? ((config.image as string | undefined) ?? "default") : "default";
  if (image !== spec.image) return false;
  const want = limitsOf(spec);
  return BOOT_KEYS.every((k) => config[k] === want[k]);
}

/** A `pool set` body as the pool it asks for, checked: a process box has no image but its host's, named `default`. */
export function specOf(body: PoolSetBody): PoolSpec {
  const engine = body.engine ?? "qemu";
  if (engine === "process" && body.image !== "default")
    throw new HutchError(
      "invalid",
      `process boxes run on the host's own system, not on an image, so their pool is "default", not "${body.image}"`,
      `hutch pool set default --engine process --warm ${body.warm}`,
    );
  if (engine === "qemu" && body.memoryMiB !== undefined && body.memoryMiB < 256)
    throw new HutchError("invalid", `a VM needs at least 256 MiB of memory, not ${body.memoryMiB}`, "e.g. --memory 1G");
  return { image: body.image, engine, warm: body.warm, ...limitsOf(body) } as PoolSpec;
}

export interface PoolDeps {
  boxes: BoxService;
  /** The registry's rows, pool boxes included (BoxService hides them). */
  store: BoxRegistry;
  sizes: PoolSizes;
  /** This server's name in `pool list` (a fleet's node name, or "local"). */
  server: string;
  /** Engines this server runs: a pool of another engine is left to the servers that run it. */
  engines: string[];
  /**
   * The build an image's name points at now (a VM's root disk), or null (a
   * process box has none): a pool box booted on another build is thrown
   * away, so a create after `image build` never gets the old one.
   */
  build?: (engine: string, image: string) => string | null;
  now?: () => number;
}

export class WarmPools implements WarmSource {
  /** Taken by a create, not yet claimed or given back. */
  private readonly taken = new Set<string>();
  /** Being booted for a pool. */
  private readonly making = new Set<string>();
  /** Failed to move in a claim: thrown away by the next fill. */
  private readonly broken = new Set<string>();
  private readonly failures = new Map<string, { count: number; at: number; error: string }>();
  /** Shapes whose booted state is wanted (engine/qemu/booted.ts), by engine and config: made one at a time, like pool boxes. */
  private readonly bootedWanted = new Map<string, { engine: EngineName; config: Record<string, unknown> }>();
  private filling: Promise<void> | null = null;
  private again = false;
  private closed = false;
  /** A boot was put off while a user's box was being started or woken. */
  private deferred = false;
  private timer: ReturnType<typeof setInterval> | null = null;
  private readonly now: () => number;

  constructor(private readonly deps: PoolDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** Refills now, whenever a pool changes, and every RETRY_MS (a boot that failed is tried again). */
  start(): void {
    this.deps.sizes.onChange(() => this.kick());
    // A boot put off for a user's box resumes once that box has settled.
    this.deps.boxes.stateChanged.add((_id, state) => {
      if (this.deferred && (state === "running" || state === "failed" || state === "stopped" || state === "asleep")) {
        this.deferred = false;
        this.kick();
      }
    });
    this.timer = setInterval(() => this.kick(), RETRY_MS);
    this.timer.unref();
    this.kick();
  }

  /** Stops refilling and waits for a boot under way; the pool's boxes stay for the next start. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.filling;
  }

  pooled(row: BoxRow): boolean {
    return poolOf(row) !== null;
  }

  take(engine: string, config: Record<string, unknown>, _body: BoxCreateBody): BoxRow | null {
    const spec = this.deps.sizes.list().find((s) => fits(s, engine, config));
    if (!spec) return null;
    const row = this.ready(poolKey(spec.engine, spec.image)).find((r) => this.current(r, spec));
    if (!row) return null;
    this.taken.add(row.id);
    return row;
  }

  wantBooted(row: BoxRow): void {
    const cfg = configOf(row);
    const config = Object.fromEntries(SHAPE_KEYS.filter((k) => cfg[k] !== undefined).map((k) => [k, cfg[k]]));
    const key = JSON.stringify([row.engine, config]);
    if (this.bootedWanted.has(key)) return;
    this.bootedWanted.set(key, { engine: row.engine, config });
    this.kick();
  }

  done(id: string, outcome: "claimed" | "returned" | "broken"): void {
    this.taken.delete(id);
    if (outcome === "broken") this.broken.add(id);
    if (outcome !== "returned") this.kick();
    void this.report();
  }

  /** Each pool this server keeps, as `pool list` shows it. */
  status(): PoolStatus[] {
    const rows = this.rows();
    return this.deps.sizes
      .list()
      .filter((s) => this.deps.engines.includes(s.engine))
      .map((s) => {
        const key = poolKey(s.engine, s.image);
        const mine = rows.filter((r) => poolOf(r) === key);
        const failed = this.failures.get(key);
        return {
          image: s.image,
          engine: s.engine,
          server: this.deps.server,
          wanted: s.warm,
          ready: this.ready(key).length,
          filling: mine.filter((r) => this.making.has(r.id)).length,
          failed: failed?.count ?? 0,
          ...(failed ? { lastError: failed.error.slice(0, 2048) } : {}),
          ...limitsOf(s),
        };
      });
  }

  /** Every server's pools: this one's, and in a fleet the others' as they reported them. */
  async list(): Promise<PoolStatus[]> {
    return [...this.status(), ...((await this.deps.sizes.elsewhere?.()) ?? [])];
  }

  /** Removes a pool (fleet-wide in a fleet); its boxes are thrown away by each server's next fill. */
  async clear(engine: string, image: string): Promise<PoolCleared> {
    const cleared = await this.deps.sizes.clear(engine, image);
    return { image, engine: engine as PoolCleared["engine"], cleared };
  }

  /** Sets a pool, fleet-wide in a fleet; warm 0 clears it. */
  async set(body: PoolSetBody): Promise<PoolStatus[]> {
    const spec = specOf(body);
    if (body.warm === 0) await this.deps.sizes.clear(spec.engine, spec.image);
    else await this.deps.sizes.set(spec);
    return this.status();
  }

  /** A pool's ready boxes, oldest first: asleep, wanting to be, and neither taken nor broken. */
  private ready(key: string): BoxRow[] {
    return this.rows().filter(
      (r) =>
        poolOf(r) === key &&
        r.state === "asleep" &&
        r.desired === "asleep" &&
        !this.taken.has(r.id) &&
        !this.making.has(r.id) &&
        !this.broken.has(r.id),
    );
  }

  private rows(): BoxRow[] {
    return this.deps.store.list().filter((r) => poolOf(r) !== null);
  }

  /** Runs a fill, or one more after the one under way. */
  kick(): void {
    if (this.closed) return;
    if (this.filling) {
      this.again = true;
      return;
    }
    this.filling = this.fill()
      .catch((err) => logger.error("refilling the warm pools failed", { err: String(err) }))
      .finally(() => {
        this.filling = null;
        void this.report();
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /**
   * Throws away what no pool wants (a cleared pool's boxes, boxes with other
   * limits than their pool's now, failed or broken ones, more than wanted),
   * then boots what is missing, one box at a time.
   */
  private async fill(): Promise<void> {
    for (;;) {
      if (this.closed) return;
      const specs = new Map(
        this.deps.sizes
          .list()
          .filter((s) => this.deps.engines.includes(s.engine))
          .map((s) => [poolKey(s.engine, s.image), s] as const),
      );
      const kept = new Map<string, number>();
      for (const row of this.rows()) {
        if (this.taken.has(row.id) || this.making.has(row.id)) continue;
        const key = poolOf(row)!;
        const spec = specs.get(key);
        const count = kept.get(key) ?? 0;
        const alive = row.state !== "failed" && row.desired !== "deleted" && !this.broken.has(row.id);
        if (spec && alive && count < spec.warm && fits(spec, row.engine, configOf(row)) && this.current(row, spec)) {
          kept.set(key, count + 1);
          // Booted by a daemon that stopped before it could put the box to sleep: it sleeps now.
          if (row.desired === "running") await this.settle(row);
          continue;
        }
        await this.throwAway(row);
      }
      const short = [...specs].find(([key, s]) => (kept.get(key) ?? 0) + this.makingFor(key) < s.warm && !this.waiting(key));
      const booted = short ? undefined : this.bootedWanted.entries().next().value;
      if (!short && !booted) return;
      if (this.userBoxStarting()) {
        this.deferred = true;
        return;
      }
      if (short) await this.makeOne(short[1]);
      else if (booted) {
        this.bootedWanted.delete(booted[0]);
        await this.makeBooted(booted[1]);
      }
    }
  }

  /**
   * A user's box on its way to running (a claim being woken, a cold start):
   * a pool's boot waits for it, as both want the same CPUs and the user is
   * waiting on the one, not on the other.
   */
  private userBoxStarting(): boolean {
    return this.deps.store
      .list()
      .some((r) => poolOf(r) === null && r.desired === "running" && r.state !== "running" && r.state !== "failed");
  }

  private makingFor(key: string): number {
    return this.rows().filter((r) => poolOf(r) === key && this.making.has(r.id)).length;
  }

  /** A pool whose last boot failed waits RETRY_MS before the next. */
  private waiting(key: string): boolean {
    const f = this.failures.get(key);
    return f !== undefined && this.now() - f.at < RETRY_MS;
  }

  /** Whether the box was booted on the build its pool's image points at now. */
  private current(row: BoxRow, spec: PoolSpec): boolean {
    let now: string | null;
    try {
      now = this.deps.build?.(spec.engine, spec.image) ?? null;
    } catch {
      now = null;
    }
    return (configOf(row)[POOL_BUILD] ?? null) === now;
  }

  /** A pool box found awake (or on its way) after a restart: asleep, or thrown away when it cannot be. */
  private async settle(row: BoxRow): Promise<void> {
    try {
      await this.deps.boxes.ensureRunning(row.id);
      await this.deps.boxes.sleep(row.id);
    } catch (err) {
      logger.warn("a pool box found awake could not be put to sleep", { box: row.name, err: String(err) });
      await this.throwAway(this.deps.store.byId(row.id) ?? row);
    }
  }

  private async throwAway(row: BoxRow): Promise<void> {
    logger.info("throwing a pool box away", { box: row.name, pool: poolOf(row) ?? "", state: row.state });
    try {
      await this.deps.boxes.delete(row.id, null);
      this.broken.delete(row.id);
    } catch (err) {
      logger.warn("could not delete a pool box", { box: row.name, err: String(err) });
    }
  }

  /** Boots one box for the pool and puts it to sleep: then it is ready. */
  private async makeOne(spec: PoolSpec): Promise<void> {
    const key = poolKey(spec.engine, spec.image);
    let build: string | null = null;
    try {
      build = this.deps.build?.(spec.engine, spec.image) ?? null;
    } catch {
      // No such image: the boot fails and says so.
    }
    const config = {
      ...limitsOf(spec),
      ...(spec.engine === "qemu" ? { image: spec.image } : {}),
      [POOL_KEY]: key,
      ...(build ? { [POOL_BUILD]: build } : {}),
      sleepAfterMs: null,
      maxAwakeMs: null,
    };
    const t0 = this.now();
    const { box, error } = await this.bootAsleep("pool", spec.engine, config);
    if (error !== null) {
      const was = this.failures.get(key);
      this.failures.set(key, { count: (was?.count ?? 0) + 1, at: this.now(), error });
      logger.warn("a pool box did not boot; the pool tries again later", { box: box.name, pool: key, error, retryMs: RETRY_MS });
      await this.throwAway(this.deps.store.byId(box.id) ?? box);
      return;
    }
    this.failures.delete(key);
    logger.info("pool box ready", { box: box.name, pool: key, ms: this.now() - t0 });
    void this.report();
  }

  /**
   * A hidden box (`<prefix>-<random>`) made with `config`, booted and put to
   * sleep; never another fill's to throw away meanwhile. `error` says why
   * it is not asleep, and the caller throws it away then.
   */
  private async bootAsleep(
    prefix: string,
    engine: EngineName,
    config: Record<string, unknown>,
  ): Promise<{ box: BoxRow; error: string | null }> {
    const { box } = this.deps.store.insertBox(`${prefix}-${randomBytes(8).toString("hex")}`, engine, "running", null, config);
    this.making.add(box.id);
    try {
      await this.deps.boxes.reconcile(box.id);
      const row = this.deps.store.byId(box.id);
      if (row?.state !== "running") throw new Error(row?.reason ?? `it is ${row?.state ?? "gone"}`);
      await this.deps.boxes.sleep(box.id);
      return { box, error: null };
    } catch (err) {
      return { box, error: (err as Error).message };
    } finally {
      this.making.delete(box.id);
    }
  }

  /**
   * Boots a box of a wanted shape and puts it to sleep, and its engine keeps
   * that state for the boxes of the shape after it; the box itself goes.
   * Best effort: a failure is logged, and the next box of the shape to boot
   * asks again.
   */
  private async makeBooted(want: { engine: EngineName; config: Record<string, unknown> }): Promise<void> {
    const t0 = this.now();
    const { box, error } = await this.bootAsleep("booted", want.engine, {
      ...want.config,
      [POOL_KEY]: BOOTED_POOL,
      sleepAfterMs: null,
      maxAwakeMs: null,
    });
    try {
      if (error !== null) throw new Error(error);
      if (await this.deps.boxes.keepBooted(box.id))
        logger.info("booted state made", { box: box.name, ms: this.now() - t0, ...want.config });
    } catch (err) {
      logger.warn("a booted state could not be made; the next box of its shape boots and asks again", {
        box: box.name,
        error: (err as Error).message,
      });
    }
    await this.throwAway(this.deps.store.byId(box.id) ?? box);
  }

  /** In a fleet: this server's pools, for the others' `pool list`. */
  async report(): Promise<void> {
    await this.deps.sizes.report?.(this.status()).catch((err) => logger.warn("could not report the pools", { err: String(err) }));
  }
}

function configOf(row: BoxRow): Record<string, unknown> {
  return JSON.parse(row.config) as Record<string, unknown>;
}

/** The pool a box belongs to, or null for a user's box. */
export function poolOf(row: BoxRow): string | null {
  const key = configOf(row)[POOL_KEY];
  return typeof key === "string" ? key : null;
}
