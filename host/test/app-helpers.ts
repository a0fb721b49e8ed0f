// The daemon in-process for tests (app.handle, no socket) over a real sqlite
// file in a temp home, and the one way its tests send a request and read the
// answer.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDb } from "../src/store/db.ts";
import { ProcessEngine } from "../src/engine/process/index.ts";
import { buildApp, type AppDeps } from "../src/daemon/app.ts";
import { createServices } from "../src/daemon/services.ts";
import { setPrincipal } from "../src/daemon/actor.ts";
import type { Principal } from "../src/auth/service.ts";
import type { SessionLog } from "../src/store/types.ts";

export interface AppOptions extends Partial<Omit<AppDeps, "home">> {
  /** Server mode: every service goes to the app (users, tokens, dispatches); otherwise the local daemon's few, and every caller is the local user. */
  server?: boolean;
}

/** A fresh home with its database and services, and the app over them; `close` closes the database and removes the home. */
export async function testApp(prefix: string, { server = false, ...deps }: AppOptions = {}) {
  const home = mkdtempSync(join(tmpdir(), prefix));
  const db = openDb(join(home, "hutch.db"));
  const services = await createServices(home, db, { process: new ProcessEngine(home) });
  const { boxes, sessions, sessionStore, broker, approvals } = services;
  const app = buildApp({ ...(server ? services : { boxes, sessions, sessionStore, broker, approvals }), home, ...deps });
  const close = () => {
    db.close();
    rmSync(home, { recursive: true, force: true });
  };
  return { home, db, services, app, close };
}

export interface RequestOptions {
  /** Sent as it is when a string, as JSON otherwise; a body comes with content-type application/json unless `headers` says another. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Stamped as the TCP listener stamps a token's principal; none: the local socket. */
  who?: Principal;
}

/** A request to the app, as a client would send it. */
export function req(method: string, path: string, { body, headers = {}, who }: RequestOptions = {}): Request {
  const r = new Request(`http://hutch${path}`, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  if (who) setPrincipal(r, who);
  return r;
}

/** The app's answer to a request: its status, its text, and the text parsed when it is JSON. */
export async function ask(app: { handle(r: Request): Promise<Response> }, method: string, path: string, opts: RequestOptions = {}) {
  const res = await app.handle(req(method, path, opts));
  const text = await res.text();
  // biome-ignore lint/suspicious/noExplicitAny: a test reads whatever JSON the route answered, field by field
  return { status: res.status, text, body: (text.startsWith("{") || text.startsWith("[") ? JSON.parse(text) : null) as any };
}

/** A session row without a terminal (no box needs to run for the log, driver and access rules); returns its id. */
export function seedSession(store: SessionLog, { owner = "alice", agent = "shell", box = "box_none" } = {}): string {
  const id = `ses_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
  store.insert({
    id,
    box_id: box,
    agent,
    label: null,
    state: "open",
    owner,
    argv: "[]",
    pty: null,
    created_at: new Date().toISOString(),
  });
  return id;
}
