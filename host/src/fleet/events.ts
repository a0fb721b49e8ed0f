// The fleet's events (`hutch fleet events`): each server publishes its own
// transitions (a box made, changing state or deleted; itself joining or
// leaving) to the JetStream stream HUTCH_FLEET, kept a week. A reader replays
// from a sequence (`--from`), then follows; the sequence is the cursor.
import { check, FleetEvent } from "@hutch/shared";
import { DeliverPolicy, DiscardPolicy, jetstream, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { type NatsConnection, nanos } from "@nats-io/transport-node";
import { log } from "../log.ts";
import { clusterName, defaultReplicas, ensureStream, manager, retrying } from "../store/jetstream/cluster.ts";

const logger = log.create({ service: "fleet" });
export const EVENTS_STREAM = "HUTCH_FLEET";
const SUBJECT = "hutch.fleet.events";
const KEEP_MS = 7 * 24 * 3600 * 1000;
const TIMEOUT_MS = 30_000;

type NewEvent = Omit<FleetEvent, "seq">;

export class FleetEvents {
  private constructor(private readonly nc: NatsConnection) {}

  static async open(nc: NatsConnection): Promise<FleetEvents> {
    const jsm = await manager(nc);
    await ensureStream(
      nc,
      jsm,
      {
        name: EVENTS_STREAM,
        subjects: [SUBJECT],
        num_replicas: defaultReplicas(nc),
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        max_age: nanos(KEEP_MS),
      },
      "the fleet's event stream",
      TIMEOUT_MS,
    );
    return new FleetEvents(nc);
  }

  /** Publishes one event; a failure is logged (the transition happened either way). */
  publish(e: NewEvent): Promise<void> {
    return retrying(
      () => clusterName(this.nc),
      `a fleet event (${e.kind})`,
      TIMEOUT_MS,
      () => jetstream(this.nc).publish(SUBJECT, JSON.stringify(e)),
    ).then(
      () => {},
      (err) => logger.warn("a fleet event was not stored", { kind: e.kind, err: String(err) }),
    );
  }

  /**
   * Every event from seq `from` (0: from the first kept), then each new one
   * while `follow`, until `signal` aborts; an event that does not check is skipped.
   */
  async *read(from: number, follow: boolean, signal: AbortSignal): AsyncIterable<FleetEvent> {
    const jsm = await manager(this.nc);
    const last = (await jsm.streams.info(EVENTS_STREAM)).state.last_seq;
    if (!follow && last < Math.max(from, 1)) return;
    const consumer = await jetstream(this.nc).consumers.get(
      EVENTS_STREAM,
      from > 0 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from } : { deliver_policy: DeliverPolicy.All },
    );
    const messages = await consumer.consume({ expires: 2000, idle_heartbeat: 1000 });
    const stop = () => void messages.stop();
    signal.addEventListener("abort", stop);
    try {
      for await (const m of messages) {
        let e: unknown;
        try {
          e = { ...(m.json() as object), seq: m.seq };
        } catch {
          e = null;
        }
        if (check(FleetEvent, e)) yield e;
        if (!follow && m.seq >= last) return;
        if (signal.aborted) return;
      }
    } finally {
      signal.removeEventListener("abort", stop);
      await messages.stop();
    }
  }
}
