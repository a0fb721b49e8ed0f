// A server joining its fleet (`hutch serve --cluster URLS --node NAME`):
// connect to the NATS cluster, open the fleet's snapshot store with the fleet
// key, and once it serves, register the node. Each step fails the start with
// an error naming the cluster and the fix.
// Snapshots and session logs live in the fleet; boxes, users and tokens stay
// in the server's own home so far.
import { cpus, hostname, totalmem } from "node:os";
import type { FleetNode } from "@hutch/shared";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Database } from "bun:sqlite";
import { openSessionReplica } from "../store/jetstream/replica.ts";
import { openAuthReplica } from "../store/jetstream/auth-replica.ts";
import type { AuthStore } from "../store/auth.ts";
import type { SessionStore } from "../store/sessions.ts";
import type { FleetAuth, PublishFn, SessionWriter } from "../store/types.ts";
import { clusterName, manager } from "../store/jetstream/cluster.ts";
import type { Store } from "../snapshot/index.ts";
import { log } from "../log.ts";
import { connectCluster } from "./connect.ts";
import { listNodes, type Registration, registerNode } from "./nodes.ts";
import { initFleetStore, openFleetStore } from "./store.ts";
import { BoxDirectory } from "./boxes.ts";
import { FleetEvents } from "./events.ts";
import { Forwarder, forwardKey } from "./forward.ts";
import { FleetKey } from "./key.ts";
import { Cordons, fleetBucket, Lease } from "./lease.ts";
import { FleetPools } from "../store/jetstream/pools.ts";

const logger = log.create({ service: "fleet" });

export interface FleetOptions {
  /** The cluster's client URLs. */
  urls: string[];
  /** This server's name in the fleet. */
  node: string;
  /** The fleet key file. */
  keyFile: string;
  /** Where the fleet's other servers reach this one (`--advertise`); the listener's URL when absent. */
  advertise?: string;
  /** This server's labels (`--label KEY=VALUE`), which `box create --on` asks for. */
  labels?: Record<string, string>;
  /** How long a write keeps retrying while the cluster does not answer before it fails naming the cluster (default 30 s). */
  writeTimeoutMs?: number;
}

export interface Fleet {
  /** This server's node name. */
  node: string;
  /** The fleet's box directory (./boxes.ts), caught up; this server puts its own boxes in once it serves (directory.serve). */
  directory: BoxDirectory;
  /** The fleet's snapshot store, open; the daemon's snapshot service owns it from here (and closes it). */
  store: Store;
  /**
   * The fleet's session log with `store` (this server's file) as its replica,
   * caught up: the session service's writer, made with its bus (store/jetstream/replica.ts).
   */
  sessions(store: SessionStore, db: Database): Promise<(publish: PublishFn) => SessionWriter>;
  /** The fleet's users, tokens and shares with `store` (this server's file) as their replica, caught up (store/jetstream/auth-replica.ts). */
  auth(store: AuthStore, db: Database): Promise<FleetAuth>;
  /** Lists this server as live, serving `listen`; once it serves. */
  register(listen: string, cert: string, engines: string[]): Promise<void>;
  /** The live servers (./nodes.ts). */
  nodes(): Promise<FleetNode[]>;
  /** The fleet's events (./events.ts): what servers and boxes did. */
  events: FleetEvents;
  /** Forwards requests for boxes other servers run (./forward.ts). */
  forwarder: Forwarder;
  /** The reconcile loop's lease (./lease.ts): tried once this server is registered. */
  lease: Lease;
  /** Which nodes take no new boxes (./lease.ts). */
  cordons: Cordons;
  /** The fleet's warm pools (store/jetstream/pools.ts): the sizes every server keeps, and each server's report. */
  pools: FleetPools;
  /** Deregisters the node and closes the connection; after the store is closed. */
  close(): Promise<void>;
}

export async function joinFleet(home: string, opts: FleetOptions): Promise<Fleet> {
  const nc: NatsConnection = await connectCluster(opts.urls, `hutch ${opts.node}`);
  let store: Store;
  try {
    store = await openFleetStore(nc, home, opts.keyFile, opts.writeTimeoutMs);
  } catch (err) {
    await nc.close();
    throw err;
  }
  logger.info("opened the fleet's snapshot store", { cluster: opts.urls.join(","), store: store.info.id });
  let directory: BoxDirectory;
  let forwarder: Forwarder;
  let events: FleetEvents;
  let lease: Lease;
  let cordons: Cordons;
  let pools: FleetPools;
  try {
    directory = await BoxDirectory.open(nc, opts.node);
    const kv = await fleetBucket(nc);
    lease = new Lease(kv, opts.node);
    cordons = new Cordons(kv, await manager(nc));
    events = await FleetEvents.open(nc);
    pools = await FleetPools.open(nc, opts.node, async () => new Set((await listNodes(nc)).map((n) => n.name)));
    forwarder = new Forwarder(forwardKey(new FleetKey(opts.keyFile, clusterName(nc)).master(store.info.id)), opts.node, () =>
      listNodes(nc),
    );
  } catch (err) {
    await store.close();
    await nc.close();
    throw err;
  }
  let node: Registration | null = null;
  const replicas: { close(): Promise<void> }[] = [];
  return {
    node: opts.node,
    directory,
    store,
    async sessions(sessionStore, db) {
      const opened = await openSessionReplica(nc, sessionStore, db, opts.writeTimeoutMs);
      replicas.push(opened);
      logger.info("the session log is the fleet's: this server's file is its replica, caught up", { cluster: clusterName(nc) });
      return opened.writer;
    },
    forwarder,
    lease,
    cordons,
    pools,
    nodes: () => listNodes(nc),
    events,
    async register(listen, cert, engines) {
      node = await registerNode(nc, {
        name: opts.node,
        listen: opts.advertise ?? listen,
        server: serverId(home),
        cert,
        cpus: cpus().length,
        memoryMiB: Math.floor(totalmem() / 1024 / 1024),
        engines,
        labels: opts.labels ?? {},
      });
      await events.publish({ at: new Date().toISOString(), kind: "node.joined", node: opts.node });
      lease.onChange = (epoch) => {
        if (epoch !== null)
          void events.publish({ at: new Date().toISOString(), kind: "lease.taken", node: opts.node, detail: `epoch ${epoch}` });
      };
      lease.start();
      logger.info("joined the fleet", { node: opts.node, cluster: opts.urls.join(",") });
    },
    async auth(authStore, db) {
      const opened = await openAuthReplica(nc, authStore, db, opts.writeTimeoutMs);
      replicas.push(opened);
      logger.info("users, tokens and shares are the fleet's: this server's file is their replica, caught up", { cluster: clusterName(nc) });
      return {
        writer: opened.writer,
        onRevoked: (fn) => {
          opened.replica.revoked = fn;
        },
      };
    },
    async close() {
      await lease.stop();
      if (node) await events.publish({ at: new Date().toISOString(), kind: "node.left", node: opts.node });
      await node?.stop();
      await pools.close();
      directory.close();
      for (const r of replicas) await r.close();
      await nc.close();
    },
  };
}

/** This server: its host and home, so a restart is told from another server under the same name. */
function serverId(home: string): string {
  return new Bun.CryptoHasher("sha256").update(`${hostname()}\0${home}`).digest("hex").slice(0, 32);
}

/** `hutch cluster init`: makes the fleet's snapshot store and writes its key to keyFile. */
export async function initFleet(home: string, urls: string[], keyFile: string): Promise<{ store: string; cluster: string }> {
  const nc = await connectCluster(urls, "hutch cluster init");
  try {
    return { store: await initFleetStore(nc, home, keyFile), cluster: clusterName(nc) };
  } finally {
    await nc.close();
  }
}

/** `hutch cluster nodes`: the fleet's live servers. */
export async function fleetNodes(urls: string[]): Promise<FleetNode[]> {
  const nc = await connectCluster(urls, "hutch cluster nodes");
  try {
    return await listNodes(nc);
  } finally {
    await nc.close();
  }
}
