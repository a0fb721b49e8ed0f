// A real NATS JetStream cluster for tests: `nats-server` processes on
// loopback, on free ports, each with its own store in one temp dir. Ports
// are chosen once, so a node SIGKILLed and restarted comes back at the same
// address with the same store, as a crashed server restarted by its
// supervisor would. Ready means every node answers its health check and the
// JetStream meta group has a leader (a stream can be created).
//
// Also a loopback TCP proxy a test can cut and restore: a client dialled
// through it loses its link to the cluster while the cluster stays up (on a
// cluster started with advertise: false, or the client dials the nodes it
// learnt of).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

export interface NatsNode {
  name: string;
  /** nats://127.0.0.1:PORT */
  url: string;
  port: number;
  /** Whether its process runs (killed nodes are not). */
  running: boolean;
}

export interface NatsCluster {
  /** The cluster's name, as it names itself to clients. */
  readonly name: string;
  /** The temp dir holding every node's config, store and log. */
  readonly dir: string;
  readonly nodes: NatsNode[];
  /** Every node's client URL. */
  readonly urls: string[];
  /** SIGKILLs node i and waits until its process is gone. */
  kill(i: number): Promise<void>;
  /** Starts node i again (same ports, same store) and waits until it is healthy. */
  restart(i: number): Promise<void>;
  /** Waits until every running node is healthy and JetStream answers. */
  ready(timeoutMs?: number): Promise<void>;
  /** The index of the node leading `stream` now (asked again while the cluster elects one, up to 30 s). */
  leaderOf(stream: string): Promise<number>;
  /** Stops every node (SIGTERM, then SIGKILL after 3 s) and removes the temp dir. Idempotent. */
  stop(): Promise<void>;
}

const taken = new Set<number>();

/** A loopback port nothing listens on right now, and not handed out before by this process. */
function freePort(): number {
  for (;;) {
    const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = s.port;
    s.stop(true);
    if (taken.has(port)) continue;
    taken.add(port);
    return port;
  }
}

interface Ports {
  client: number;
  cluster: number;
  http: number;
}

function config(name: string, dir: string, clusterName: string, ports: Ports, all: Ports[], advertise: boolean): string {
  const routes = all.filter((p) => p !== ports).map((p) => `nats-route://127.0.0.1:${p.cluster}`);
  const cluster =
    all.length > 1
      ? `cluster {\n  name: ${clusterName}\n  listen: 127.0.0.1:${ports.cluster}\n  routes: [${routes.join(", ")}]\n  no_advertise: ${!advertise}\n}\n`
      : "";
  return [
    `server_name: ${name}`,
    `listen: 127.0.0.1:${ports.client}`,
    `http: 127.0.0.1:${ports.http}`,
    `jetstream {\n  store_dir: "${join(dir, name)}"\n  max_memory_store: 64MB\n  max_file_store: 1GB\n}`,
    cluster,
  ].join("\n");
}

async function healthy(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * Starts `size` nodes (3 for a cluster, 1 for a single JetStream server) and
 * waits until they are ready. Nodes tell their clients every node's URL, as
 * a cluster does by default; with `advertise: false` they do not, so a client
 * knows only the URLs it dialled (a client behind a cutProxy stays cut off
 * instead of dialling the nodes it learnt of).
 */
export async function startNatsCluster(size = 3, options: { advertise?: boolean } = {}): Promise<NatsCluster> {
  const dir = mkdtempSync(join(tmpdir(), "hutch-nats-"));
  const clusterName = `hutch-test-${size}`;
  const ports: Ports[] = Array.from({ length: size }, () => ({ client: freePort(), cluster: freePort(), http: freePort() }));
  const procs: (Bun.Subprocess | null)[] = ports.map(() => null);
  const nodes: NatsNode[] = ports.map((p, i) => ({
    name: `n${i + 1}`,
    url: `nats://127.0.0.1:${p.client}`,
    port: p.client,
    running: false,
  }));
  ports.forEach((p, i) => {
    mkdirSync(join(dir, nodes[i]!.name), { recursive: true });
    writeFileSync(join(dir, `${nodes[i]!.name}.conf`), config(nodes[i]!.name, dir, clusterName, p, ports, options.advertise ?? true));
  });

  const spawn = (i: number) => {
    const node = nodes[i]!;
    // setpriv (util-linux) execs nats-server with a parent-death signal: a test process killed mid-run leaves no server behind.
    procs[i] = Bun.spawn(["setpriv", "--pdeathsig", "KILL", "nats-server", "-c", join(dir, `${node.name}.conf`)], {
      stdout: Bun.file(join(dir, `${node.name}.log`)),
      stderr: Bun.file(join(dir, `${node.name}.err.log`)),
    });
    node.running = true;
  };

  const waitHealthy = async (indexes: number[], deadline: number) => {
    for (const i of indexes) {
      while (!(await healthy(ports[i]!.http))) {
        if (procs[i]?.exitCode !== null && procs[i]?.exitCode !== undefined) {
          const log = readFileSync(join(dir, `${nodes[i]!.name}.err.log`), "utf8").slice(-2000);
          throw new Error(`nats-server ${nodes[i]!.name} exited with ${procs[i]!.exitCode}:\n${log}`);
        }
        if (Date.now() > deadline) throw new Error(`nats-server ${nodes[i]!.name} not healthy in time; its log is in ${dir}`);
        await Bun.sleep(100);
      }
    }
  };

  /** JetStream answers through some running node: the meta group has a leader. */
  const waitJetStream = async (deadline: number) => {
    const servers = nodes.filter((n) => n.running).map((n) => n.url);
    const nc = await connect({ servers, timeout: 2000 });
    try {
      const jsm = await jetstreamManager(nc, { timeout: 2000 });
      for (;;) {
        try {
          await jsm.getAccountInfo();
          return;
        } catch (err) {
          if (Date.now() > deadline) throw new Error(`JetStream not ready in time (${String(err)}); logs in ${dir}`);
          await Bun.sleep(200);
        }
      }
    } finally {
      await nc.close();
    }
  };

  const ready = async (timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    await waitHealthy(
      nodes.flatMap((n, i) => (n.running ? [i] : [])),
      deadline,
    );
    await waitJetStream(deadline);
  };

  const leaderOf = async (stream: string) => {
    const nc = await connect({ servers: nodes.filter((n) => n.running).map((n) => n.url), timeout: 2000 });
    try {
      const jsm = await jetstreamManager(nc, { timeout: 2000 });
      const deadline = Date.now() + 30_000;
      for (;;) {
        const info = await jsm.streams.info(stream).catch((err) => {
          if (Date.now() > deadline) throw err;
        });
        const at = nodes.findIndex((n) => n.name === info?.cluster?.leader);
        if (at >= 0) return at;
        if (Date.now() > deadline) throw new Error(`stream ${stream} has no leader in time; logs in ${dir}`);
        await Bun.sleep(100);
      }
    } finally {
      await nc.close();
    }
  };

  const halt = async (i: number, signal: NodeJS.Signals) => {
    const p = procs[i];
    if (!p) return;
    p.kill(signal);
    const forced = signal === "SIGKILL" ? null : setTimeout(() => p.kill("SIGKILL"), 3000);
    await p.exited;
    if (forced) clearTimeout(forced);
    procs[i] = null;
    nodes[i]!.running = false;
  };

  let stopped = false;
  const cluster: NatsCluster = {
    name: clusterName,
    dir,
    nodes,
    urls: nodes.map((n) => n.url),
    kill: (i) => halt(i, "SIGKILL"),
    restart: async (i) => {
      if (procs[i]) throw new Error(`node ${nodes[i]!.name} is running; kill it first`);
      spawn(i);
      await waitHealthy([i], Date.now() + 30_000);
    },
    ready,
    leaderOf,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await Promise.all(procs.map((_, i) => halt(i, "SIGTERM")));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    for (let i = 0; i < size; i++) spawn(i);
    await ready();
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

export interface CutProxy {
  /** nats://127.0.0.1:PORT: dial this instead of the target. */
  url: string;
  /** Drops every open connection and refuses new ones until restore(). */
  cut(): void;
  restore(): void;
  stop(): void;
}

/** A loopback TCP proxy to `target` (host:port), for cutting one client off while the cluster stays up. */
export function cutProxy(targetPort: number): CutProxy {
  let open = true;
  const pairs = new Set<{ client: Bun.Socket<Peer>; upstream: Promise<Bun.Socket<unknown>> }>();
  interface Peer {
    upstream?: Promise<Bun.Socket<unknown>>;
  }
  const server = Bun.listen<Peer>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        if (!open) {
          client.end();
          return;
        }
        client.data = {};
        const upstream = Bun.connect({
          hostname: "127.0.0.1",
          port: targetPort,
          socket: {
            data(_s, chunk) {
              client.write(chunk);
            },
            close() {
              client.end();
            },
            error() {
              client.end();
            },
          },
        });
        client.data.upstream = upstream;
        const pair = { client, upstream };
        pairs.add(pair);
        upstream.catch(() => client.end());
      },
      // Chained on one promise, so chunks go upstream in the order they came.
      data(client, chunk) {
        const copy = new Uint8Array(chunk);
        client.data.upstream?.then((u) => u.write(copy));
      },
      close(client) {
        client.data?.upstream?.then(
          (u) => u.end(),
          () => {},
        );
        for (const p of pairs) if (p.client === client) pairs.delete(p);
      },
    },
  });
  return {
    url: `nats://127.0.0.1:${server.port}`,
    cut() {
      open = false;
      for (const p of pairs) {
        p.client.terminate();
        p.upstream.then(
          (u) => u.terminate(),
          () => {},
        );
      }
      pairs.clear();
    },
    restore() {
      open = true;
    },
    stop() {
      this.cut();
      server.stop(true);
    },
  };
}
