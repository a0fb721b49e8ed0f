// The registry on JetStream KV, so every hutch server of a fleet sees one set
// of boxes, ops, users, tokens, shares, secrets, policies and schedules. Two
// buckets: `<name>` holds every row as one key (layout in store/README.md),
// `<name>-egress` the bounded egress log. Both are replicated 3 times on a
// cluster and once on a single server (ClusterOptions, as the session log).
// Writes are compare-and-set on a key's revision (kv.ts); what must commit
// together across keys is made all-or-none in boxes.ts.
import type { NatsConnection } from "@nats-io/transport-node";
import type { RegistryAsync } from "../types.ts";
import { KvAuthTables, ownerKey, sharesOf } from "./auth.ts";
import { type BoxRows, KvBoxRegistry } from "./boxes.ts";
import { egressOf, KvBrokerTables, normalPolicy, policyKey } from "./broker.ts";
import { type ClusterOptions, defaultReplicas } from "./cluster.ts";
import { Bucket } from "./kv.ts";
import { KvScheduleTable } from "./schedules.ts";

export interface RegistryOptions extends ClusterOptions {
  /** The registry's bucket (`<bucket>-egress` beside it); default "hutch-registry". */
  bucket?: string;
  /**
   * How long a write's claims (a box's name, an idempotency key) hold while
   * the write is unfinished before another server may take them over
   * (default 4 × writeTimeoutMs): a writer that crashed mid-write leaves
   * them, and no writer takes this long unless it is cut off.
   */
  abandonAfterMs?: number;
}

export async function openJetStreamRegistry(nc: NatsConnection, options: RegistryOptions = {}): Promise<RegistryAsync> {
  const name = options.bucket ?? "hutch-registry";
  const replicas = options.replicas ?? defaultReplicas(nc);
  const writeTimeoutMs = options.writeTimeoutMs ?? 30_000;
  const [kv, egressLog] = await Promise.all([
    Bucket.open(nc, name, replicas, writeTimeoutMs),
    Bucket.open(nc, `${name}-egress`, replicas, writeTimeoutMs),
  ]);
  const auth = new KvAuthTables(kv);
  const broker = new KvBrokerTables(kv, egressLog);
  const schedules = new KvScheduleTable(kv);
  /** The rows besides its own keys that name a box: deleteBox removes them, countRows counts them. */
  const ofBox = async (boxId: string) => {
    const [policy, owner, shares, scheduled, logged] = await Promise.all([
      kv.get(policyKey(boxId)),
      kv.get(ownerKey(boxId)),
      kv.keys(sharesOf(boxId)),
      schedules.schedules({ boxId }),
      egressLog.count(egressOf(boxId)),
    ]);
    return {
      keys: [...(policy ? [policyKey(boxId)] : []), ...(owner ? [ownerKey(boxId)] : []), ...shares],
      schedules: scheduled.map((r) => r.id),
      egress: logged,
    };
  };
  const rows: BoxRows = {
    add: async (boxId, policy, owner) => {
      await kv.put(
        policyKey(boxId),
        normalPolicy({
          allow: policy.allow,
          bindings: policy.bindings,
          stubs: {},
          ...(policy.unlisted ? { unlisted: policy.unlisted } : {}),
          ...(policy.approvalTimeoutMs ? { approvalMs: policy.approvalTimeoutMs } : {}),
        }),
      );
      if (owner) await kv.put(ownerKey(boxId), { owner });
    },
    remove: async (boxId) => {
      const found = await ofBox(boxId);
      for (const k of found.keys) await kv.delete(k);
      for (const id of found.schedules) await schedules.removeSchedule(id);
      if (found.egress > 0) await egressLog.trim(egressOf(boxId), 0);
    },
    count: async (boxId) => {
      const found = await ofBox(boxId);
      return found.keys.length + found.schedules.length + found.egress;
    },
  };
  const boxes = new KvBoxRegistry(kv, rows, options.abandonAfterMs ?? 4 * writeTimeoutMs);
  return { boxes, auth, broker, schedules };
}
