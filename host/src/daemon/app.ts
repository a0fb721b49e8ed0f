// The daemon's HTTP + WebSocket API, assembled. Built as a plain Elysia app so
// tests can drive it with app.handle(new Request(...)), no socket needed.
import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import { HUTCH_VERSION, HutchError } from "@hutch/shared";
import type { BoxService } from "./boxes/service.ts";
import { boxesController } from "./boxes/index.ts";
import { streamDoc } from "./stream/index.ts";
import { sessionsController } from "./sessions/index.ts";
import { changesController } from "./changes/index.ts";
import { ChangeService } from "./changes/service.ts";
import { localUser, type Identify } from "./actor.ts";
import type { SessionService } from "../session/service.ts";
import type { SessionStore } from "../store/sessions.ts";
import type { BrokerService } from "../broker/service.ts";
import { brokerController } from "./broker/index.ts";

export interface AppDeps {
  boxes: BoxService;
  sessions: SessionService;
  sessionStore: SessionStore;
  broker: BrokerService;
  home: string;
  /** The change feed; the server passes its own so shutdown can end open feeds. */
  changes?: ChangeService;
  /** Who the connection belongs to; the local socket's is the daemon's OS user. */
  identify?: Identify;
}

export function buildApp(deps: AppDeps) {
  // normalize: false makes unknown body keys an error instead of silently dropping them.
  return new Elysia({ normalize: false })
    .use(openapi({ path: "/openapi", documentation: { info: { title: "hutch daemon API", version: HUTCH_VERSION } } }))
    .onError(({ error, code, set }) => {
      if (error instanceof HutchError) {
        set.status = error.status;
        return error.toBody();
      }
      if (code === "VALIDATION") {
        set.status = 400;
        const first = error.all[0];
        const path = first && "path" in first ? first.path : "";
        const field = path ? path.replace(/^\//, "").replaceAll("/", ".") : "body";
        const detail = first && "summary" in first && first.summary ? first.summary : (first?.message ?? "is invalid");
        return new HutchError("invalid", `${field}: ${detail}`, "fix the request and retry").toBody();
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
    .get("/v1/health", () => ({ ok: true, version: HUTCH_VERSION, pid: process.pid, home: deps.home }), { detail: { summary: "Liveness and version" } })
    .use(boxesController(deps.boxes))
    .use(brokerController(deps.broker, deps.boxes))
    .use(streamDoc())
    .use(sessionsController(deps.sessions, deps.sessionStore, deps.identify ?? localUser))
    .use(changesController(deps.changes ?? new ChangeService(deps.boxes, deps.sessions), deps.identify ?? localUser));
}

export type App = ReturnType<typeof buildApp>;
