// The driver slot of a session: the one actor whose input goes to it, held
// until handed back, stolen, or (when taken with a lease) not renewed in
// time. Each change is logged as its event in the same write as the row's
// new holder, so the log and the slot never disagree. Who may touch a
// session at all is the service's to check before it calls in here.
import { emit, Events, HutchError, type Actor } from "@hutch/shared";
import type { NewEvent, SessionLog, SessionRow } from "../store/types.ts";
import { SYSTEM } from "./actors.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "sessions" });

export const sameActor = (a: Actor, b: Actor) => a.kind === b.kind && a.id === b.id;
export const describeActor = (a: Actor) => `${a.id} (${a.kind})`;

/** Appends events to a session's log and runs `also` in the same transaction (SessionService.append). */
export type AppendFn = (sessionId: string, events: NewEvent[], also?: () => void) => unknown;

const FREE = { driver: null, driver_lease_ms: null, driver_expires_at: null } as const;

export class DriverSlot {
  constructor(
    private readonly store: SessionLog,
    private readonly append: AppendFn,
  ) {}

  /** The driver, unless its lease ran out (then the slot is free, even before the lapse is logged). */
  of(row: SessionRow): Actor | null {
    if (!row.driver) return null;
    if (row.driver_expires_at && row.driver_expires_at < Date.now()) return null;
    return JSON.parse(row.driver) as Actor;
  }

  /** Takes a free slot (or the caller's own again); refused while another drives. */
  acquire(row: SessionRow, actor: Actor, leaseMs?: number): void {
    const current = this.of(row);
    if (current && !sameActor(current, actor)) {
      throw new HutchError(
        "conflict",
        `session ${row.id} is driven by ${describeActor(current)}`,
        `take it over: hutch session driver steal ${row.id}`,
        { driver: current },
      );
    }
    this.set(row.id, actor, leaseMs, { ...emit(Events.driverAcquired, { driver: actor, ...(leaseMs ? { leaseMs } : {}) }), actor });
  }

  /** Hands the slot back; nothing when it is free, refused when another holds it. */
  release(row: SessionRow, actor: Actor): void {
    const current = this.of(row);
    if (!current) return;
    if (!sameActor(current, actor)) {
      throw new HutchError(
        "conflict",
        `you do not drive session ${row.id}; ${describeActor(current)} does`,
        `take it over: hutch session driver steal ${row.id}`,
      );
    }
    this.free(row.id, { ...emit(Events.driverReleased, { driver: actor }), actor });
  }

  /** Takes the slot whoever holds it (logged as a steal when someone else did). */
  steal(row: SessionRow, actor: Actor, leaseMs?: number): void {
    const current = this.of(row);
    if (!current || sameActor(current, actor)) return this.acquire(row, actor, leaseMs);
    this.set(row.id, actor, leaseMs, { ...emit(Events.driverStolen, { from: current, to: actor }), actor });
    logger.info("driver stolen", { session: row.id, from: current.id, to: actor.id });
  }

  /** The driver's lease runs its length again from now. */
  heartbeat(row: SessionRow, actor: Actor): void {
    this.require(row, actor);
    if (row.driver_lease_ms) this.store.update(row.id, { driver_expires_at: Date.now() + row.driver_lease_ms });
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
  revoke(row: SessionRow, driver: Actor): void {
    this.free(row.id, { ...emit(Events.driverReleased, { driver }), actor: SYSTEM });
  }

  /** Frees every slot whose lease ran out, logging the lapse. */
  lapse(): void {
    for (const row of this.store.expiredLeases(Date.now())) {
      if (!row.driver) continue;
      const driver = JSON.parse(row.driver) as Actor;
      this.free(row.id, { ...emit(Events.driverLapsed, { driver }), actor: SYSTEM });
    }
  }

  private set(id: string, actor: Actor, leaseMs: number | undefined, event: NewEvent): void {
    this.append(id, [event], () =>
      this.store.update(id, {
        driver: JSON.stringify(actor),
        driver_lease_ms: leaseMs ?? null,
        driver_expires_at: leaseMs ? Date.now() + leaseMs : null,
      }),
    );
  }

  private free(id: string, event: NewEvent): void {
    this.append(id, [event], () => this.store.update(id, FREE));
  }
}
