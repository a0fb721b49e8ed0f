// Which servers of a fleet are alive: each puts its entry (FleetNode) in the
// KV bucket hutch-nodes and puts it again every BEAT_MS; the bucket keeps an
// entry TTL_MS (its max age), so a server that died drops out of the list
// within TTL_MS and one that stops deletes its entry at once. Entries are
// read as the bucket holds them: the list is live nodes, not a membership.
import { check, FleetNode, HutchError, HUTCH_VERSION } from "@hutch/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { log } from "../log.ts";
import { clusterName, defaultReplicas, leaderEntries, opening, retrying } from "../store/jetstream/cluster.ts";

const logger = log.create({ service: "fleet" });

const NODES_BUCKET = "hutch-nodes";
/** How long an entry lives without a refresh. */
const TTL_MS = 15_000;
const BEAT_MS = 5_000;
/** How long opening the bucket may wait for the cluster. */
const OPEN_TIMEOUT_MS = 30_000;

function bucket(nc: NatsConnection): Promise<KV> {
  return opening(
    () => clusterName(nc),
    `the opening of KV bucket ${NODES_BUCKET}`,
    OPEN_TIMEOUT_MS,
    () => new Kvm(nc).create(NODES_BUCKET, { replicas: defaultReplicas(nc), history: 1, ttl: TTL_MS }),
  );
}

export interface Registration {
  /** Stops the heartbeat and removes the entry (best effort: the TTL removes it anyway). */
  stop(): Promise<void>;
}

/**
 * Registers this server as `name` and keeps its entry fresh. Refuses a name
 * another live server holds; the same server (`server`: its host and home)
 * restarted takes its entry back.
 */
export async function registerNode(
  nc: NatsConnection,
  opts: {
    name: string;
    listen: string;
    server: string;
    cert?: string;
    cpus?: number;
    memoryMiB?: number;
    engines?: string[];
    labels?: Record<string, string>;
  },
): Promise<Registration> {
  const { name } = opts;
  const kv = await bucket(nc);
  const now = Date.now();
  const me: FleetNode = {
    name,
    version: HUTCH_VERSION,
    listen: opts.listen,
    ...(opts.cert ? { cert: opts.cert } : {}),
    ...(opts.cpus !== undefined ? { cpus: opts.cpus } : {}),
    ...(opts.memoryMiB !== undefined ? { memoryMiB: opts.memoryMiB } : {}),
    ...(opts.engines ? { engines: opts.engines } : {}),
    ...(opts.labels ? { labels: opts.labels } : {}),
    instance: opts.server,
    started: now,
    seen: now,
  };
  const held = (await readNodes(nc)).find((n) => n.name === name);
  if (held && held.instance !== opts.server)
    throw new HutchError(
      "conflict",
      `node "${name}" is already live in the NATS cluster "${clusterName(nc)}" (serving ${held.listen}, seen ${Math.round((now - held.seen) / 1000)} s ago)`,
      `give this server another name (--node), or stop that one; an entry not refreshed for ${Math.round(TTL_MS / 1000)} s goes away by itself`,
    );
  const put = () => kv.put(name, JSON.stringify({ ...me, seen: Date.now() }));
  await retrying(() => clusterName(nc), `the registration of node ${name}`, OPEN_TIMEOUT_MS, put);
  let failing = false;
  const timer = setInterval(() => {
    put().then(
      () => {
        if (failing) logger.info("heartbeat stored again", { node: name });
        failing = false;
      },
      (err) => {
        if (!failing) logger.warn("heartbeat not stored; other servers will drop this node until it is", { node: name, err: String(err) });
        failing = true;
      },
    );
  }, BEAT_MS);
  return {
    async stop() {
      clearInterval(timer);
      await kv.delete(name).catch((err) => logger.warn("could not remove this node's entry; it expires by itself", { err: String(err) }));
    },
  };
}

/** The live nodes, by name. */
export async function listNodes(nc: NatsConnection): Promise<FleetNode[]> {
  await bucket(nc);
  return readNodes(nc);
}

/** From the bucket's leader (leaderEntries): a server registered a moment ago through any node is in the list. */
async function readNodes(nc: NatsConnection): Promise<FleetNode[]> {
  const out: FleetNode[] = [];
  for (const m of (await leaderEntries(await jetstreamManager(nc, { checkAPI: false }), NODES_BUCKET, ">")).values()) {
    let n: unknown;
    try {
      n = m.json();
    } catch {
      continue;
    }
    // Something else written into the bucket is skipped, not fatal to the listing.
    if (check(FleetNode, n)) out.push(n);
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : 1));
}
