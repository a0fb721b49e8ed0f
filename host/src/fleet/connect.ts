// A server's link to its fleet's NATS cluster. The first connection must
// succeed (a server that starts without its cluster would serve snapshots
// from nowhere); after that the client reconnects forever, and a write that
// finds no quorum fails with the cluster's own error (store/jetstream/cluster.ts).
import { HutchError } from "@hutch/shared";
import { connect, type NatsConnection } from "@nats-io/transport-node";

/** Connects to the cluster, or fails naming its URLs and what to do. */
export async function connectCluster(urls: string[], name: string): Promise<NatsConnection> {
  try {
    return await connect({ servers: urls, name, timeout: 5000, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
  } catch (err) {
    throw new HutchError(
      "unavailable",
      `cannot reach the NATS cluster at ${urls.join(",")}: ${err instanceof Error ? err.message : String(err)}`,
      "start its nats-server nodes (with jetstream and a cluster block, see the README's fleet section) and check this server reaches them, then start again",
      { cluster: urls.join(",") },
    );
  }
}
