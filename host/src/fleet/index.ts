// A server joining its fleet (`hutch serve --cluster URLS --node NAME`):
// connect to the NATS cluster, open the fleet's snapshot store with the fleet
// key, and once it serves, register the node. Each step fails the start with
// an error naming the cluster and the fix.
// Snapshots and session logs live in the fleet; boxes, users and tokens stay
// in the server's own home so far.
import { hostname } from "node:os";
import type { FleetNode } from "@hutch/shared";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Database } from "bun:sqlite";
import { openSessionReplica } from "../store/jetstream/replica.ts";
import type { SessionStore } from "../store/sessions.ts";
import type { PublishFn, SessionWriter } from "../store/types.ts";
import { clusterName } from "../store/jetstream/cluster.ts";
import type { Store } from "../snapshot/index.ts";
import { log } from "../log.ts";
import { connectCluster } from "./connect.ts";
import { listNodes, type Registration, registerNode } from "./nodes.ts";
import { initFleetStore, openFleetStore } from "./store.ts";

const logger = log.create({ service: "fleet" });

export interface FleetOptions {
  /** The cluster's client URLs. */
  urls: string[];
  /** This server's name in the fleet. */
  node: string;
  /** The fleet key file. */
  keyFile: string;
  /** How long a write keeps retrying while the cluster does not answer before it fails naming the cluster (default 30 s). */
  writeTimeoutMs?: number;
}

export interface Fleet {
  /** The fleet's snapshot store, open; the daemon's snapshot service owns it from here (and closes it). */
  store: Store;
  /**
   * The fleet's session log with `store` (this server's file) as its replica,
   * caught up: the session service's writer, made with its bus (store/jetstream/replica.ts).
   */
  sessions(store: SessionStore, db: Database): Promise<(publish: PublishFn) => SessionWriter>;
  /** Lists this server as live, serving `listen`; once it serves. */
  register(listen: string): Promise<void>;
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
  let node: Registration | null = null;
  let replica: { close(): Promise<void> } | null = null;
  return {
    store,
    async sessions(sessionStore, db) {
      const opened = await openSessionReplica(nc, sessionStore, db, opts.writeTimeoutMs);
      replica = opened;
      logger.info("the session log is the fleet's: this server's file is its replica, caught up", { cluster: clusterName(nc) });
      return opened.writer;
    },
    async register(listen) {
      node = await registerNode(nc, { name: opts.node, listen, server: serverId(home) });
      logger.info("joined the fleet", { node: opts.node, cluster: opts.urls.join(",") });
    },
    async close() {
      await node?.stop();
      await replica?.close();
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
