// `hutch daemon`: one per $HUTCH_HOME. Owns the database, the boxes' channels
// and the API socket (0600, so only this user can talk to it).
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { openDb } from "../store/db.ts";
import { ProcessEngine } from "../engine/process/index.ts";
import { QemuEngine } from "../engine/qemu/index.ts";
import { buildApp } from "./app.ts";
import { createServices, vmCarry } from "./services.ts";
import { ChangeService } from "./changes/service.ts";
import { streamSocket, upgradeStream, type StreamSocketData } from "./stream/index.ts";
import { subscribeSocket, upgradeSubscribe, type SubscribeData } from "./sessions/subscribe.ts";
import { type Data, socketHandlers } from "./sockets.ts";
import { forwardElsewhere, routeOf } from "./fleet-route.ts";
import { RunningOps } from "./ops.ts";
import { localUser, principalOf } from "./actor.ts";
import type { Server } from "bun";
import { API_LIMITS } from "@hutch/shared";
import { log } from "../log.ts";
import { HOME_FILES } from "../paths.ts";
import { isAlive, procStartTime } from "../engine/pidfile.ts";
import { checkHome } from "../home.ts";
import { tightenHome } from "./home-modes.ts";
import { serveCert } from "../auth/cert.ts";
import { runDoctor } from "../doctor/index.ts";
import { listenRemote, type RemoteListener } from "./remote.ts";
import { listenE2b, type E2bListener } from "./e2b/listener.ts";
import { CreationGate } from "./creations.ts";
import { SandboxService } from "../e2b/sandboxes.ts";
import { e2bTemplates } from "../e2b/templates.ts";
import { HutchError } from "@hutch/shared";
import type { Fleet, FleetOptions } from "../fleet/index.ts";
import { Checkpointer } from "../box/checkpoint.ts";

const logger = log.create({ service: "daemon" });
/** How long `serve --doctor` may take to prove the host (a first tcg boot is the slow part). */
const DOCTOR_TIMEOUT_MS = 600_000;
/** How long a shutdown may take before the daemon exits anyway: inside systemd's 30 s stop timeout (service/systemd.ts). */
const SHUTDOWN_DEADLINE_MS = 20_000;

/**
 * One daemon per home: an O_EXCL lock file holding "pid starttime". A holder
 * that is gone, a zombie, or a recycled pid does not hold the lock.
 */
function takeLock(path: string): boolean {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, `${process.pid} ${procStartTime(process.pid)}`);
      closeSync(fd);
      return true;
    } catch {
      const [pid, startTime] = readFileSync(path, "utf8").trim().split(" ");
      if (pid && startTime && isAlive({ pid: Number(pid), startTime })) return false;
      rmSync(path, { force: true });
    }
  }
  return false;
}

/** `hutch serve`: listen on TLS TCP too, with this certificate (files) or the home's self-signed one. */
export interface ServeOptions {
  hostname: string;
  port: number;
  cert?: string;
  key?: string;
  /** `--e2b HOST:PORT`: serve the E2B API there too (TLS, the same certificate); domain: what sandboxes' hosts end in. */
  e2b?: { hostname: string; port: number; domain?: string };
  /** Run doctor before the TCP listener opens, and refuse to serve when no engine works (the service unit asks for it). */
  doctor?: boolean;
  /** `--cluster URLS --node NAME`: join this fleet (its snapshot store, its node list) before serving anything. */
  fleet?: FleetOptions;
}

export async function runDaemon(home: string, serve?: ServeOptions): Promise<number> {
  // Everything the daemon creates in the home is the user's alone: files 0600, directories 0700.
  // The processes of process boxes inherit the mask through bubblewrap.
  process.umask(0o077);
  checkHome(home);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  for (const failure of tightenHome(home)) logger.warn("could not restrict a file an older hutch left open to others", { failure });
  const lockPath = join(home, HOME_FILES.lock);
  if (!takeLock(lockPath)) {
    logger.info("another daemon already serves this home; exiting", { home });
    return 0;
  }
  // Loaded only for a fleet: a daemon on its own never loads the NATS client.
  let fleet: Fleet | null = null;
  if (serve?.fleet) {
    const { joinFleet } = await import("../fleet/index.ts");
    try {
      fleet = await joinFleet(home, serve.fleet);
    } catch (err) {
      rmSync(lockPath, { force: true });
      throw err;
    }
  }
  const socketPath = join(home, HOME_FILES.socket);
  const db = openDb(join(home, HOME_FILES.db));
  const { boxes, sessions, sessionStore, broker, engines, snapshots, auth, dispatches, approvals, schedules, idle, pools } =
    await createServices(
      home,
      db,
      {
        process: new ProcessEngine(home),
        qemu: new QemuEngine(home),
      },
      fleet
        ? {
            snapshotStore: fleet.store,
            sessionWriter: (store) => fleet.sessions(store, db),
            authWriter: (store) => fleet.auth(store, db),
            boxesElsewhere: () => fleet.directory.others(),
            pools: { sizes: fleet.pools, server: fleet.node },
          }
        : {},
    );
  /** What another server of the fleet needs to make a box again: its settings and egress policy as they are now. */
  const specOf = (id: string) => boxes.spec(id, broker.policy(id));
  // In a fleet: the reconcile loop and box moves. Before this server's boxes are looked at, the copies the
  // fleet placed elsewhere while it was away are removed, so nothing starts them or speaks for them.
  const plane = fleet
    ? (await import("./fleet-plane.ts")).fleetPlane({
        fleet,
        boxes,
        sessions,
        snapshots,
        spec: specOf,
        carry: await vmCarry(home, db, fleet.store, boxes, auth),
      })
    : null;
  if (plane) {
    const gone = await plane.reconciler.fence();
    if (gone > 0) logger.info("removed boxes the fleet runs elsewhere now", { boxes: gone });
  }
  // Before any box's broker can ask again: the approvals pending when the last daemon stopped.
  approvals.recover();
  await boxes.recover();
  await sessions.recorder.recover();
  sessions.recoverTurns();
  sessions.start();
  // Unfinished dispatches are torn down in the background: the API answers meanwhile, and says so.
  dispatches.recover();
  // After the lost turns are logged: a schedule's run that was going is ended in its session, then due runs are looked at.
  schedules.start();
  // A box found running after a restart counts as awake, and idle, from now.
  for (const b of boxes.list()) if (b.state === "running") idle.awake(b.id);
  idle.start();
  // Boxes made with --checkpoint-every: a snapshot of each, every so often, while it runs (box/checkpoint.ts).
  const checkpoints = new Checkpointer({
    boxes,
    snapshot: async (id, signal) => (await snapshots.create(id, "checkpoint", () => undefined, signal)).snapshot.id,
  });
  checkpoints.start();
  // Refilled in the background: the API answers meanwhile.
  pools.start();

  rmSync(socketPath, { force: true });
  const oldMask = process.umask(0o177);
  const changes = new ChangeService(boxes, sessions);
  const ops = new RunningOps();
  // Made before the app so the join strings it hands out name this listener.
  const cert = serve ? await serveCert(home, serve, [serve.hostname]) : null;
  let remote: RemoteListener | null = null;
  let e2b: E2bListener | null = null;
  const serveInfo = () => ({ url: remote?.url ?? null, fingerprint: cert?.fingerprint ?? null });
  // One payer gate for the app and the E2B listener: a token's creations are counted wherever it makes boxes.
  const creations = new CreationGate();
  const app = buildApp({
    creations,
    boxes,
    sessions,
    sessionStore,
    broker,
    home,
    identify: localUser,
    changes,
    engines,
    ops,
    snapshots,
    auth,
    serve: serveInfo,
    dispatches,
    approvals,
    schedules,
    pools,
    ...(fleet ? { fleetBoxes: fleet.directory, fleetEvents: fleet.events } : {}),
    ...(plane ? { fleetPlane: plane } : {}),
  });
  const streams = streamSocket(boxes, sessions, (boxId, kind) => idle.hold(boxId, kind));
  const subscribers = subscribeSocket(sessions, sessionStore, (boxId) => idle.hold(boxId, "client"));
  if (fleet)
    sessions.elsewhere = (ref) => {
      const e = fleet.directory.find(ref);
      return e ? { id: e.box.id, name: e.box.name } : undefined;
    };
  const routing = fleet
    ? {
        boxes,
        sessions: sessionStore,
        fleet: {
          directory: fleet.directory,
          forwarder: fleet.forwarder,
          nodes: () => fleet.nodes(),
          cordoned: () => fleet.cordons.list(),
          settled: (ref: string) => plane?.settled(ref),
        },
      }
    : null;
  const handle = async (req: Request, srv: Server<Data>) => {
    // In a fleet, what belongs on the server that runs its box goes there (fleet-route.ts).
    if (routing) {
      try {
        const forwarded = await forwardElsewhere(req, srv, principalOf(req) ?? auth.local(), routing);
        if (forwarded === "upgraded") return undefined;
        if (forwarded) return forwarded;
      } catch (err) {
        const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
        return Response.json(e.toBody(), { status: e.status });
      }
    }
    if (upgradeStream(req, srv as Server<StreamSocketData>, localUser)) return undefined;
    const sub = await upgradeSubscribe(req, srv as Server<SubscribeData>, sessions, localUser);
    if (sub === true) return undefined;
    if (sub) return sub;
    return app.handle(req);
  };
  const server = Bun.serve<Data>({
    unix: socketPath,
    // Bun closes a request that sends nothing for 10 s by default, and a
    // `box start` under tcg (boot plus a first accelerator probe) takes longer.
    // The socket is local: a client that dies has its connection closed by the
    // kernel. bun-types 1.4.5 declares idleTimeout for TCP servers only, but the
    // runtime applies it to unix sockets too; server.timeout(req, 0) does not
    // hold for the second request on a keep-alive connection (measured).
    ...({ idleTimeout: 0 } as object),
    // Refused by Bun before it is read (413); the app's own check (body.ts) names the limit for in-process callers.
    maxRequestBodySize: API_LIMITS.bodyBytes,
    fetch: handle,
    websocket: socketHandlers(streams, subscribers),
  });
  process.umask(oldMask);
  chmodSync(socketPath, 0o600);
  if (serve?.doctor) {
    const report = await runDoctor({ boxes, engines, where: socketPath }, () => {}, AbortSignal.timeout(DOCTOR_TIMEOUT_MS));
    for (const c of report.checks) {
      const fields = { check: c.name, ok: c.ok, detail: c.detail, ...(c.fix ? { fix: c.fix } : {}) };
      if (c.ok) logger.info("doctor", fields);
      else logger.warn("doctor", fields);
    }
    if (!report.ok) {
      await server.stop(true);
      rmSync(lockPath, { force: true });
      throw new HutchError(
        "config",
        "doctor: no engine can run boxes on this host; not serving",
        "fix what the doctor lines above name, then start again",
      );
    }
  }
  if (serve && cert) {
    try {
      remote = listenRemote(
        {
          auth,
          boxes,
          sessionStore,
          handle,
          websocket: (tracker) => socketHandlers(streams, subscribers, tracker),
          endStreams: (id) => changes.closeToken(id),
          ...(fleet && routing
            ? {
                fleet: {
                  verify: (method: string, path: string, headers: Headers) => fleet.forwarder.verify(method, path, headers),
                  routes: (url: URL) => !!routeOf(url, boxes, sessionStore, routing.fleet),
                },
              }
            : {}),
        },
        serve,
        cert,
      );
    } catch (err) {
      await server.stop(true);
      rmSync(lockPath, { force: true });
      throw new HutchError(
        "config",
        `cannot listen on ${serve.hostname}:${serve.port}: ${(err as Error).message}`,
        "pick a free address: hutch serve --listen 127.0.0.1:8443",
      );
    }
    logger.info("serving on TLS", { url: remote.url, fingerprint: cert.fingerprint, cert: cert.source });
    if (serve.e2b) {
      const sandboxes = new SandboxService(boxes, { home, templates: e2bTemplates(home), domain: serve.e2b.domain ?? null });
      sandboxes.adopt((boxId) => auth.owner(boxId));
      try {
        e2b = listenE2b({ auth, sandboxes, creations }, serve.e2b, cert);
      } catch (err) {
        await remote.stop();
        await server.stop(true);
        rmSync(lockPath, { force: true });
        throw new HutchError(
          "config",
          `cannot listen on ${serve.e2b.hostname}:${serve.e2b.port}: ${(err as Error).message}`,
          "pick a free address: hutch serve --e2b 127.0.0.1:8444",
        );
      }
      logger.info("serving the E2B API", { url: e2b.url, ...(serve.e2b.domain ? { domain: serve.e2b.domain } : {}) });
    }
  }
  // Listed as live only once it serves.
  if (fleet && remote) {
    try {
      await fleet.register(remote.url, cert!.cert, Object.keys(engines));
      await fleet.directory.serve(
        {
          list: () => boxes.list(),
          byId: (id) => {
            const row = boxes.byId(id);
            return row && !pools.pooled(row) ? boxes.get(id) : null;
          },
          owner: (id) => auth.owner(id),
          given: (id) => boxes.given(id),
          onChange: (fn) => boxes.changes.add(fn),
          epoch: (id) => boxes.epoch(id),
          spec: specOf,
          adopting: (id) => plane?.reconciler.adopting(id) !== undefined,
        },
        fleet.events,
      );
      plane?.reconciler.start();
    } catch (err) {
      await e2b?.stop();
      await remote.stop();
      await server.stop(true);
      await snapshots.close();
      await fleet.close();
      rmSync(lockPath, { force: true });
      throw err;
    }
  }
  logger.info("daemon ready", { home, socket: socketPath, pid: process.pid, ...(remote ? { url: remote.url } : {}) });

  return await new Promise<number>((resolve) => {
    let stopping = false;
    const removeFiles = () => {
      if (existsSync(socketPath)) rmSync(socketPath, { force: true });
      rmSync(lockPath, { force: true });
    };
    const shutdown = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info("shutting down; boxes keep running", { signal });
      // Each step is bounded on its own, but one waiting on something that never comes (a box operation in
      // flight, a round of the fleet's loop) must not keep the daemon from stopping: past the deadline it exits,
      // saying which step held it (systemd's stop timeout, service/systemd.ts, is 30 s). What was committed stays.
      let step = "closing the listeners";
      const deadline = setTimeout(() => {
        logger.warn("shutdown did not finish in time; exiting without the rest", { step, afterMs: SHUTDOWN_DEADLINE_MS });
        removeFiles();
        process.exit(1);
      }, SHUTDOWN_DEADLINE_MS);
      changes.close();
      ops.close();
      await e2b?.stop();
      await remote?.stop();
      // Subscribers' WebSockets never end by themselves: give in-flight requests a moment, then close what is left
      // (clients resume from their next seq; writes carry idempotency keys).
      await Promise.race([server.stop(), Bun.sleep(1000)]);
      await server.stop(true);
      schedules.stop();
      idle.stop();
      step = "the checkpoints in flight";
      await checkpoints.stop();
      step = "the fleet's reconcile round";
      await plane?.stop();
      step = "the warm pools";
      await pools.close();
      sessions.stop();
      approvals.stop();
      step = "the box operations in flight";
      await boxes.close();
      step = "the snapshot store";
      await snapshots.close();
      step = "leaving the fleet";
      await fleet?.close();
      broker.close();
      db.close();
      clearTimeout(deadline);
      removeFiles();
      resolve(0);
    };
    process.on("SIGTERM", () => void shutdown("SIGTERM"));
    process.on("SIGINT", () => void shutdown("SIGINT"));
  });
}
