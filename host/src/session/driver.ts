// The driver slot of a session: the one actor whose input goes to it, held
// until handed back, stolen, or (when taken with a lease) not renewed in
// time. Each change is logged as its event in the same write as the row's
// new holder, so the log and the slot never disagree, and that write expects
// the session's last seq as read: a slot decided on a row another server has
// since changed is refused (the service reads again and decides again). Who
// may touch a session at all is the service's to check before it calls in
// here.
import { emit, Events, HutchError, type Actor } from "@hutch/shared";
import type { AppendOptions, NewEvent, SessionFields, SessionRow } from "../store/types.ts";
import { SYSTEM } from "../actors.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "sessions" });

export const sameActor = (a: Actor, b: Actor) => a.kind === b.kind && a.id === b.id;
export const describeActor = (a: Actor) => `${a.id} (${a.kind})`;

/** Whether a write was refused because the last seq it expected was stale (another server wrote first): read again and decide again. */
export function isStale(err: unknown): boolean {
  return err instanceof HutchError && err.code === "conflict" && typeof err.data?.expected === "number";
}

/** Appends events to a session's log with a row change, all or none (SessionService.append). */
export type AppendFn = (sessionId: string, events: NewEvent[], options: AppendOptions) => Promise<unknown>;
/** Changes a session's row alone (SessionWriter.update). */
export type UpdateFn = (sessionId: string, fields: SessionFields) => Promise<void>;

const FREE = { driver: null, driver_lease_ms: null, driver_expires_at: null } as const;

export class DriverSlot {
  constructor(
    private readonly append: AppendFn,
    private readonly update: UpdateFn,
  ) {}

  /** The driver, unless its lease ran out (then the slot is free, even before the lapse is logged). */
  of(row: SessionRow): Actor | null {
    if (!row.driver) return null;
    if (row.driver_expires_at && row.driver_expires_at < Date.now()) return null;
    return JSON.parse(row.driver) as Actor;
  }

  /** Takes a free slot (or the caller's own again); refused while another drives. */
  acquire(row: SessionRow, actor: Actor, leaseMs?: number): Promise<void> {
    const current = this.of(row);
    if (current && !sameActor(current, actor)) {
      throw new HutchError(
        "conflict",
        `session ${row.id} is driven by ${describeActor(current)}`,
        `take it over: hutch session driver steal ${row.id}`,
        { driver: current },
      );
    }
    return this.set(row, actor, leaseMs, { ...emit(Events.driverAcquired, { driver: actor, ...(leaseMs ? { leaseMs } : {}) }), actor });
  }

  /** Hands the slot back; nothing when it is free, refused when another holds it. */
  async release(row: SessionRow, actor: Actor): Promise<void> {
    const current = this.of(row);
    if (!current) return;
    if (!sameActor(current, actor)) {
      throw new HutchError(
        "conflict",
        `you do not drive session ${row.id}; ${describeActor(current)} does`,
        `take it over: hutch session driver steal ${row.id}`,
      );
    }
    await this.free(row, { ...emit(Events.driverReleased, { driver: actor }), actor });
  }

  /** Takes the slot whoever holds it (logged as a steal when someone else did). */
  async steal(row: SessionRow, actor: Actor, leaseMs?: number): Promise<void> {
    const current = this.of(row);
    if (!current || sameActor(current, actor)) return this.acquire(row, actor, leaseMs);
    await this.set(row, actor, leaseMs, { ...emit(Events.driverStolen, { from: current, to: actor }), actor });
    logger.info("driver stolen", { session: row.id, from: current.id, to: actor.id });
  }

  /** The driver's lease runs its length again from now. */
  async heartbeat(row: SessionRow, actor: Actor): Promise<void> {
    this.require(row, actor);
    if (row.driver_lease_ms) await this.update(row.id, { driver_expires_at: Date.now() + row.driver_lease_ms });
  }

  /** Refuses anyone but the driver, saying how to get the slot. */
  require(row: SessionRow, actor: Actor): void {
    const current = this.of(row);
    if (current && sameActor(current, actor)) return;
    if (!current)
      throw new HutchError(
        "conflict",
        `nobody drives session ${row.id}; only the driver sends input`,
        `take the slot first: hutch session driver acquire ${row.id}`,
      );
    throw new HutchError(
      "conflict",
      `session ${row.id} is driven by ${describeActor(current)}; only the driver sends input`,
      `take it over: hutch session driver steal ${row.id}`,
      { driver: current },
    );
  }

  /** The daemon hands a driver's slot back for it (its access to the box narrowed). */
  revoke(row: SessionRow, driver: Actor): Promise<void> {
    return this.free(row, { ...emit(Events.driverReleased, { driver }), actor: SYSTEM });
  }

  /**
   * Frees the slots of `expired` (sessions whose lease ran out), logging each
   * lapse. A slot renewed or taken since the row was read is left alone.
   */
  async lapse(expired: SessionRow[]): Promise<void> {
    for (const row of expired) {
      if (!row.driver) continue;
      const driver = JSON.parse(row.driver) as Actor;
      await this.free(row, { ...emit(Events.driverLapsed, { driver }), actor: SYSTEM }).catch((err) => {
        if (!isStale(err)) throw err;
      });
    }
  }

  private async set(row: SessionRow, actor: Actor, leaseMs: number | undefined, event: NewEvent): Promise<void> {
    const fields = {
      driver: JSON.stringify(actor),
      driver_lease_ms: leaseMs ?? null,
      driver_expires_at: leaseMs ? Date.now() + leaseMs : null,
    };
    await this.append(row.id, [event], { fields, ifLast: row.last_seq });
  }

  private async free(row: SessionRow, event: NewEvent): Promise<void> {
    await this.append(row.id, [event], { fields: FREE, ifLast: row.last_seq });
  }
}
