// The daemon's HTTP + WebSocket API, assembled. Built as a plain Elysia app so
// tests can drive it with app.handle(new Request(...)), no socket needed.
import { join } from "node:path";
import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import { type Box, describeError, type FleetBox, type FleetEvent, Health, HUTCH_VERSION, HutchError, type TSchema } from "@hutch/shared";
import type { BoxService } from "../box/service.ts";
import { boxesController } from "./boxes/index.ts";
import { streamDoc } from "./stream/index.ts";
import { sessionsController } from "./sessions/index.ts";
import { fleetEventsController } from "./fleet-events.ts";
import { changesController } from "./changes/index.ts";
import { ChangeService } from "./changes/service.ts";
import { localUser, principalOf, type Identify } from "./actor.ts";
import type { AuthService, Principal } from "../auth/service.ts";
import { authController, type ServeInfo } from "./auth/index.ts";
import { checkAccess, checkBoxRef } from "./access.ts";
import type { SessionService } from "../session/service.ts";
import type { SessionLog } from "../store/types.ts";
import type { BrokerService } from "../broker/service.ts";
import { brokerController } from "./broker/index.ts";
import { readJsonBody } from "./body.ts";
import { doctorController } from "./doctor/index.ts";
import { imageChunksController, imagesController } from "./images/index.ts";
import { agentsController } from "./agents/index.ts";
import { env } from "../env.ts";
import { ImageBuilds } from "../image/worker.ts";
import { ImageImports } from "../image/uploads.ts";
import { RunningOps } from "./ops.ts";
import type { Engine } from "../engine/types.ts";
import { HOME_FILES } from "../paths.ts";
import { SnapshotService } from "../snapshot/service.ts";
import { snapshotsController, type SnapshotAccess } from "./snapshots/index.ts";
import type { DispatchService } from "../dispatch/service.ts";
import { dispatchController } from "./dispatch/index.ts";
import { dispatchAccess } from "./dispatch/access.ts";
import { CreationGate } from "./creations.ts";
import type { ApprovalService } from "../approval/service.ts";
import { approvalsController } from "./approvals/index.ts";
import type { ScheduleService } from "../schedule/service.ts";
import { schedulesController } from "./schedules/index.ts";
import type { WarmPools } from "../box/pool.ts";
import { poolsController } from "./pools/index.ts";

export interface AppDeps {
  boxes: BoxService;
  sessions: SessionService;
  sessionStore: SessionLog;
  broker: BrokerService;
  home: string;
  /** The change feed; the server passes its own so shutdown can end open feeds. */
  changes?: ChangeService;
  /** Who the connection belongs to; the local socket's is the daemon's OS user. */
  identify?: Identify;
  /** The engines doctor checks, in order; none when absent. */
  engines?: Record<string, Engine>;
  /** Operations in flight; the server passes its own so shutdown can abort them. */
  ops?: RunningOps;
  /** The snapshot store's service; one of its own over $HUTCH_HOME when absent. */
  snapshots?: SnapshotService;
  /** Users, tokens and shares (server mode); without it every caller is the local user and sees everything. */
  auth?: AuthService;
  /** The serving daemon's address and certificate fingerprint, for join strings. */
  serve?: ServeInfo;
  /** Dispatches (host/src/dispatch); no routes when absent. */
  dispatches?: DispatchService;
  /** Schedules (host/src/schedule); no routes when absent. */
  schedules?: ScheduleService;
  /** Who pays for the boxes a request makes (server mode's per-token limit); one of its own when absent. */
  creations?: CreationGate;
  /** Warm pools (box/pool.ts); no routes when absent. */
  pools?: WarmPools;
  /** Approvals (host/src/approval); no routes when absent. */
  approvals?: ApprovalService;
  /** In a fleet: the boxes other servers run (fleet/boxes.ts), listed beside this server's own. */
  fleetBoxes?: { node: string; fresh(): Promise<void>; others(): FleetBox[] };
  /** In a fleet: its events (fleet/events.ts), served at GET /v1/fleet/events. */
  fleetEvents?: { read(from: number, follow: boolean, signal: AbortSignal): AsyncIterable<FleetEvent> };
  /** In a fleet: box moves and the node verbs (daemon/fleet-plane.ts). */
  fleetPlane?: { controller(ops: RunningOps, identify: Identify): Elysia };
}

export function buildApp(deps: AppDeps) {
  const ops = deps.ops ?? new RunningOps();
  const snapshots = deps.snapshots ?? new SnapshotService(deps.home, deps.boxes);
  const auth = deps.auth;
  const access = auth ? snapshotAccess(auth, snapshots, deps) : undefined;
  const who = (req: Request): Principal =>
    principalOf(req) ?? auth?.local() ?? { user: (deps.identify ?? localUser)(req), scopes: ["read", "write", "admin"], remote: false };
  const owns = auth ? (req: Request, boxId: string) => auth.access(who(req), boxId) !== null : () => true;
  const creations = deps.creations ?? new CreationGate();
  const imports = new ImageImports(deps.home);
  creations.attach(deps.boxes);
  // normalize: false makes unknown body keys an error instead of silently dropping them. Every request,
  // whichever way it came in, runs with its payer: the boxes it makes are charged to its token (creations.ts).
  return creations.wrap(
    new Elysia({ normalize: false })
      .use(openapi({ path: "/openapi", documentation: { info: { title: "hutch daemon API", version: HUTCH_VERSION } } }))
      .onError(({ error, code, set }) => {
        // A parse hook's throw arrives wrapped in Elysia's ParseError.
        const named = error instanceof HutchError ? error : code === "PARSE" && error.cause instanceof HutchError ? error.cause : undefined;
        if (named) {
          set.status = named.status;
          return named.toBody();
        }
        if (code === "VALIDATION") {
          set.status = 400;
          return validationError(error.all[0]).toBody();
        }
        if (code === "NOT_FOUND") {
          set.status = 404;
          return new HutchError("not_found", "no such endpoint", "see the API: GET /openapi/json").toBody();
        }
        if (code === "PARSE") {
          set.status = 400;
          return new HutchError("invalid", "body: not valid JSON", "send a JSON body").toBody();
        }
        set.status = 500;
        return new HutchError("failed", error instanceof Error ? error.message : String(error)).toBody();
      })
      // The one body that is not JSON: an image import's chunks, raw bytes read as a stream and bounded by the
      // upload (image/uploads.ts). Mounted before the JSON parser below, which applies to routes after it.
      .use(imageChunksController(imports))
      // Every body is JSON, bounded before it is parsed (body.ts). The named "json" after it is never reached
      // (readJsonBody returns or throws); it is how the OpenAPI document learns that bodies are JSON.
      .guard({ parse: [({ request }, contentType) => readJsonBody(request, contentType), "json"] })
      // Before routing: a remote principal's request for what it may not reach never meets a handler.
      .onRequest(({ request }) => {
        if (auth)
          checkAccess(
            { auth, boxes: deps.boxes, sessionStore: deps.sessionStore },
            principalOf(request),
            request.method,
            new URL(request.url),
          );
      })
      // A remote caller learns nothing of the server's paths or processes; the local socket's clients read both.
      .get(
        "/v1/health",
        ({ request }) =>
          principalOf(request)?.remote
            ? { ok: true, version: HUTCH_VERSION }
            : { ok: true, version: HUTCH_VERSION, pid: process.pid, home: deps.home },
        { response: Health, detail: { summary: "Liveness and version (and, on the local socket, the daemon's pid and home)" } },
      )
      .use(
        boxesController(
          deps.boxes,
          {
            visible: owns,
            owner: (req) => who(req).user,
            ...(access ? { snapshot: access.snapshot } : {}),
            ...(deps.fleetBoxes
              ? { fleet: { node: deps.fleetBoxes.node, elsewhere: (req: Request) => elsewhere(deps.fleetBoxes!, who(req), auth) } }
              : {}),
          },
          deps.identify ?? localUser,
        ),
      )
      .use(auth ? authController(auth, deps.boxes, who, deps.serve ?? (() => ({ url: null, fingerprint: null }))) : new Elysia())
      .use(brokerController(deps.broker, deps.boxes, (req) => (principalOf(req)?.remote ? principalOf(req)!.user : null)))
      .use(streamDoc())
      .use(
        sessionsController(deps.sessions, deps.sessionStore, deps.identify ?? localUser, (req, ref) => {
          if (auth) checkBoxRef({ auth, boxes: deps.boxes, sessionStore: deps.sessionStore }, principalOf(req), ref);
        }),
      )
      .use(deps.approvals ? approvalsController(deps.approvals, deps.identify ?? localUser) : new Elysia())
      .use(deps.pools ? poolsController(deps.pools) : new Elysia())
      .use(deps.fleetEvents ? fleetEventsController(deps.fleetEvents) : new Elysia())
      .use(deps.fleetPlane ? deps.fleetPlane.controller(ops, deps.identify ?? localUser) : new Elysia())
      .use(changesController(deps.changes ?? new ChangeService(deps.boxes, deps.sessions), deps.identify ?? localUser))
      .use(
        doctorController({ boxes: deps.boxes, engines: deps.engines ?? {}, where: join(deps.home, HOME_FILES.socket) }, ops, (n, fn) =>
          creations.prepaid(n, fn),
        ),
      )
      .use(imagesController(deps.home, new ImageBuilds(deps.home), imports, ops, deps.boxes))
      .use(agentsController(env.agentsDir(deps.home), ops))
      .use(snapshotsController(snapshots, ops, access))
      .use(
        deps.dispatches
          ? dispatchController(
              deps.dispatches,
              deps.identify ?? localUser,
              auth && access ? dispatchAccess({ auth, boxes: deps.boxes, sessionStore: deps.sessionStore }, access) : undefined,
              (n, fn) => creations.prepaid(n, fn),
            )
          : new Elysia(),
      )
      .use(
        deps.schedules
          ? schedulesController(deps.schedules, deps.identify ?? localUser, (req, ref) => {
              if (auth) checkBoxRef({ auth, boxes: deps.boxes, sessionStore: deps.sessionStore }, principalOf(req), ref);
            })
          : new Elysia(),
      ),
  );
}

/** Server mode's rules for snapshots: a remote user's own, taken from and restored into boxes it may drive. */
/** The boxes other servers of the fleet run that p may see (its own, or shared with it), each with its server; all of them on the local socket. */
async function elsewhere(dir: NonNullable<AppDeps["fleetBoxes"]>, p: Principal, auth: AuthService | undefined): Promise<Box[]> {
  await dir.fresh();
  return dir
    .others()
    .filter((e) => !p.remote || e.owner === p.user || auth?.store.shareMode(e.box.id, p.user))
    .map((e) => e.box);
}

function snapshotAccess(auth: AuthService, snapshots: SnapshotService, deps: AppDeps): SnapshotAccess {
  const gate = { auth, boxes: deps.boxes, sessionStore: deps.sessionStore };
  return {
    visible: (req, id) => auth.seesSnapshot(principalOf(req) ?? auth.local(), id),
    box: (req, ref) => checkBoxRef(gate, principalOf(req), ref),
    async snapshot(req, ref) {
      const p = principalOf(req);
      if (!p?.remote) return;
      // One answer for a snapshot that is missing and one that is another user's, so ids do not leak.
      const missing = new HutchError("not_found", `no snapshot ${ref}`, "list them: hutch snapshot list");
      const id = await snapshots.idOf(ref).catch((err) => {
        throw err instanceof HutchError && err.code === "not_found" ? missing : err;
      });
      if (!auth.seesSnapshot(p, id)) throw missing;
    },
  };
}

/** The first failing field in words (shared's describeError: the schema's title and rule, never its pattern). */
function validationError(
  first: { path?: string; summary?: string; message?: string; schema?: TSchema; value?: unknown } | undefined,
): HutchError {
  if (first?.schema && first.path !== undefined)
    return new HutchError(
      "invalid",
      describeError({
        path: first.path,
        schema: first.schema,
        value: first.value,
        message: first.summary || first.message || "is invalid",
      }),
      "fix the request and retry",
    );
  const field = first?.path ? first.path.replace(/^\//, "").replaceAll("/", ".") : "body";
  return new HutchError("invalid", `${field}: ${first?.summary || first?.message || "is invalid"}`, "fix the request and retry");
}

export type App = ReturnType<typeof buildApp>;
