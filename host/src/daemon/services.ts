// The daemon's services and how they are wired to each other, in one place
// for the daemon and for in-process tests.
import type { Database } from "bun:sqlite";
import { join } from "node:path";
import { emit, Events, HutchError } from "@hutch/shared";
import { BoxStore } from "../store/boxes.ts";
import { SessionStore } from "../store/sessions.ts";
import { AuthStore } from "../store/auth.ts";
import type { FleetAuth, PublishFn, SessionLog, SessionWriter } from "../store/types.ts";
import { LocalWriter } from "../store/session-log-async.ts";
import { BrokerStore } from "../store/broker.ts";
import { BoxService } from "../box/service.ts";
import { SessionService } from "../session/service.ts";
import { BrokerService } from "../broker/service.ts";
import { Sealer } from "../broker/seal.ts";
import type { Engine } from "../engine/types.ts";
import { HOME_FILES } from "../paths.ts";
import { AgentTerminals } from "../session/agent-terminals.ts";
import { AgentRunner } from "../harness/run.ts";
import { env } from "../env.ts";
import { brokerLink } from "../harness/broker-link.ts";
import { SnapshotService } from "../snapshot/service.ts";
import type { Store } from "../snapshot/index.ts";
import { AuthService } from "../auth/service.ts";
import { checkQuota } from "../auth/quota.ts";
import type { CarriedBox, FleetBox, OpReport } from "@hutch/shared";
import { daemonUser } from "./actor.ts";
import { DispatchService } from "../dispatch/service.ts";
import { log } from "../log.ts";
import { ApprovalService } from "../approval/service.ts";
import { askTool } from "../approval/tool.ts";
import { ScheduleStore } from "../store/schedules.ts";
import { ScheduleService } from "../schedule/service.ts";
import { IdleTracker } from "../box/idle.ts";
import { WarmPools } from "../box/pool.ts";
import { tellIdentity } from "../box/identity.ts";
import { PoolTable } from "../store/pools.ts";
import { imagePaths } from "../image/index.ts";
import type { PoolSizes } from "../store/types.ts";

const logger = log.create({ service: "daemon" });

/** Who puts an idle box to sleep, in its box.slept event. */
const IDLE_ACTOR = { kind: "system", id: "hutchd/idle" } as const;

/** The event each broker decision is logged as. */
const EGRESS_EVENTS = { allowed: Events.egressAllowed, denied: Events.egressDenied, injected: Events.egressInjected } as const;

export interface Services {
  boxes: BoxService;
  sessions: SessionService;
  sessionStore: SessionLog;
  broker: BrokerService;
  /** The engines boxes run on, by name (doctor checks them in this order). */
  engines: Record<string, Engine>;
  snapshots: SnapshotService;
  auth: AuthService;
  dispatches: DispatchService;
  approvals: ApprovalService;
  schedules: ScheduleService;
  /** What keeps each box awake, and the sleep of those idle past their --sleep-after. */
  idle: IdleTracker;
  /** The warm pools this server keeps (started by the daemon once boxes are recovered). */
  pools: WarmPools;
}

/**
 * `snapshotStore`: the store snapshots go to when it is not the home's own;
 * `sessionWriter`: how sessions are written when the log is not the home's
 * own file alone; `authWriter`: users, tokens and shares, likewise. Each a
 * fleet's, opened by `hutch serve --cluster`.
 */
export async function createServices(
  home: string,
  db: Database,
  engines: Record<string, Engine>,
  opts: {
    snapshotStore?: Store;
    sessionWriter?: (store: SessionStore) => Promise<(publish: PublishFn) => SessionWriter>;
    authWriter?: (store: AuthStore) => Promise<FleetAuth>;
    /** The boxes other servers of the fleet run (fleet/boxes.ts): a user's quota counts them too. */
    boxesElsewhere?: () => FleetBox[];
    /** The warm pools wanted, when not the home's own table (a fleet's bucket), and this server's name among its servers. */
    pools?: { sizes: PoolSizes; server: string };
  } = {},
): Promise<Services> {
  const boxStore = new BoxStore(db);
  const boxes = new BoxService(boxStore, engines, home);
  const pools = new WarmPools({
    boxes,
    store: boxStore,
    sizes: opts.pools?.sizes ?? new PoolTable(db),
    server: opts.pools?.server ?? "local",
    engines: Object.keys(engines),
    build: (engine, image) => (engine === "qemu" ? imagePaths(home, image).root : null),
  });
  boxes.warm = pools;
  const broker = new BrokerService(new BrokerStore(db), Sealer.load(join(home, HOME_FILES.secretsKey)), join(home, HOME_FILES.config));
  const sessionStore = new SessionStore(db);
  const runner = new AgentRunner(
    boxes,
    brokerLink(broker, (id) => boxes.byId(id)?.name ?? id),
  );
  const terminals = new AgentTerminals(runner, env.agentsDir(home), env.agentInstall());
  const writer = (await opts.sessionWriter?.(sessionStore)) ?? ((publish: PublishFn) => new LocalWriter(sessionStore, publish));
  const sessions = new SessionService(sessionStore, boxes, terminals, writer);
  sessions.recorder.started.add((row, pid) => terminals.started(row, pid, sessions));
  boxes.policyChecks.add((p) => broker.checkPolicy(p));
  broker.policyChanged.add((id) => boxes.changes.emit(id));
  // First on a new connection, before the broker's listener: the guest is this box from here on.
  tellIdentity(boxes);
  boxes.channelOpened.add((boxId, dir, channel) => broker.attach(boxId, dir, channel));
  boxes.channelClosed.add((boxId) => broker.detach(boxId));
  boxes.stateChanged.add((boxId, state, reason) => sessions.boxChanged(boxId, state, reason));
  boxes.events.add((boxId, event) => sessions.boxEvent(boxId, event));
  broker.decisions.add((boxId, decision, facts) => sessions.boxEvent(boxId, emit(EGRESS_EVENTS[decision], { box: boxId, ...facts })));
  const snapshots = new SnapshotService(home, boxes, opts.snapshotStore);
  snapshots.created.add((boxId, s) =>
    sessions.boxEvent(boxId, emit(Events.checkpointCreated, { name: (s.label ?? s.id).slice(0, 256), ref: s.id, snapshot: s.id })),
  );
  const fleetAuth = await opts.authWriter?.(new AuthStore(db));
  const auth = new AuthService(db, daemonUser, Date.now, fleetAuth ? () => fleetAuth.writer : undefined);
  fleetAuth?.onRevoked((id) => auth.tokenRevoked(id));
  // A user's quota, counted over what they hold here and (in a fleet) on every other server.
  boxes.creating.add((_name, owner, given) => {
    const user = owner ?? auth.localUser;
    const quota = auth.store.quota(user);
    if (!quota) return;
    const here = boxes
      .list()
      .filter((b) => auth.owner(b.id) === user)
      .map((b) => boxes.given(b.id));
    const elsewhere = (opts.boxesElsewhere?.() ?? []).filter((e) => e.owner === user);
    checkQuota(user, quota, [...here, ...elsewhere], given);
  });
  sessions.boxAccess = (boxId, user) => auth.userAccess(user, boxId);
  sessions.boxOwner = (boxId) => auth.owner(boxId);
  auth.onNarrowed((boxId, user, now) => {
    sessions
      .accessNarrowed(boxId, user, now)
      .catch((err) => logger.warn("ending a withdrawn share's sessions failed", { box: boxId, user, err: String(err) }));
  });
  // A snapshot is its box's owner's, kept past the box: the row is written as the snapshot is announced.
  snapshots.created.add((boxId, s) => auth.writer.setSnapshotOwner(s.id, auth.owner(boxId)));
  broker.secretOwner = (boxId) => {
    const owner = auth.owner(boxId);
    return owner === daemonUser ? null : owner;
  };
  sessions.agentReady = (agent, bindings, user, box) => {
    const boxId = box ? boxes.find(box)?.id : undefined;
    // A box that does not exist is named as missing by the create itself.
    if (box && !boxId) return;
    broker.requireSecrets(agent, bindings, boxId ? broker.secretOwner(boxId) : user === daemonUser ? null : user);
  };
  boxes.seeder = {
    check: async (ref) => ({ box: (await snapshots.forkable(ref)).box }),
    seed: async (boxId, ref) => {
      await snapshots.seed(boxId, ref);
    },
  };
  const dispatches = new DispatchService({ home, boxes, sessions, store: sessionStore, snapshots });
  const approvals = new ApprovalService(sessions, sessionStore, (id) => boxes.byId(id)?.name ?? id);
  approvals.ttlOf = (boxId) => broker.policy(boxId).approvalTimeoutMs;
  runner.toolApprovals = (boxId, tool, input) => askTool(approvals, boxId, tool, input);
  broker.approvals = approvals;
  broker.boxActor = (boxId) => ({ kind: "agent", id: `${auth.owner(boxId)}/box:${boxes.byId(boxId)?.name ?? boxId}`.slice(0, 128) });
  // allow_always on a host the policy did not list adds it, so it holds for every later connection (and after a restart).
  approvals.decided.add((a) => {
    if (a.kind === "egress" && a.state === "allow_always" && a.target) broker.changePolicy(a.box, { allow: [a.target] });
  });
  const idle = new IdleTracker({
    now: () => Date.now(),
    settings: (id) => boxes.autoSleep(id),
    sleep: (id) => boxes.sleep(id, IDLE_ACTOR),
  });
  boxes.stateChanged.add((boxId, state) => (state === "running" ? idle.awake(boxId) : idle.gone(boxId)));
  sessions.holdBox = (boxId) => idle.hold(boxId, "turn");
  const schedules = new ScheduleService({
    store: new ScheduleStore(db),
    boxes,
    sessions,
    sessionStore,
    idle: (boxId) => idle.quiet(boxId),
  });
  return { boxes, sessions, sessionStore, broker, engines, snapshots, auth, dispatches, approvals, schedules, idle, pools };
}

/** How a VM box's sleeping state goes to another server of the fleet and comes from one (fleet/carry.ts). */
export async function vmCarry(home: string, db: Database, store: Store, boxes: BoxService, auth: AuthService) {
  const { carryIn, carryOut, dropCarried, registerCarried } = await import("../fleet/carry.ts");
  const rows = new BoxStore(db);
  const policies = new BrokerStore(db);
  return {
    async out(id: string, _report: OpReport, signal: AbortSignal): Promise<CarriedBox> {
      await boxes.sleep(id);
      const row = rows.byId(id);
      if (!row) throw new HutchError("not_found", `box ${id} went while it was put to sleep`);
      return carryOut({ home, store: store, row, policy: policies.policy(id), owner: auth.owner(id), signal });
    },
    async in(ref: CarriedBox, epoch: number): Promise<void> {
      const arrived = await carryIn({ home, store: store, ref });
      const row = registerCarried(rows, arrived);
      boxes.setEpoch(row.id, epoch);
      boxes.changes.emit(row.id);
      await boxes.wake(row.id);
    },
    drop: (ref: CarriedBox) => dropCarried(store, ref),
  };
}
