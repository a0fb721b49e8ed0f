// Talking to the daemon: find it, start it when none answers, send requests.
import { join } from "node:path";
import { ErrorCodes, HutchError, IDEMPOTENCY_HEADER } from "@hutch/shared/base";
import type { Health } from "@hutch/shared";
import { HOME_FILES } from "../paths.ts";
import { env } from "../env.ts";
import { checkHome } from "../home.ts";
import { nodeFs } from "../libc.ts";
import { selfArgv } from "../self.ts";
import { homeDaemonOnly } from "./remote-choice.ts";
import { localTarget, localTransport } from "./local-transport.ts";
import type { Transport } from "./transport-types.ts";

export interface DaemonClient {
  home: string;
  /** How requests, streams and subscriptions reach the daemon. */
  transport: Transport;
  /** Headers naming this client to the daemon (it stamps the actor from them). */
  headers: Record<string, string>;
  /**
   * Sends a request. Reads, and writes that carry an idempotency key, are
   * retried across a lost or restarting daemon (starting one if none runs):
   * the key makes the retry return the first answer, so a write that
   * reports success happened exactly once.
   */
  request<T>(method: string, path: string, body?: unknown, opts?: { idempotencyKey?: string; answerWithinMs?: number }): Promise<T>;
  /** GET that returns raw bytes (terminal output chunks), with request's error mapping. */
  bytes(path: string): Promise<Uint8Array>;
}

/** How long a request keeps retrying while the daemon is away. */
const RETRY_FOR_MS = 30_000;

/** How long a remote's server may take to answer a verb's first request before the next server is asked. */
const REMOTE_ANSWER_MS = 10_000;

export async function health(t: Transport): Promise<Health | null> {
  try {
    const res = await t.fetch("/v1/health", { signal: AbortSignal.timeout(2000) });
    return res.ok ? ((await res.json()) as Health) : null;
  } catch {
    return null;
  }
}

/**
 * Whether a daemon serves this home's socket: a connect, nothing sent. The
 * daemon binds its socket once it is ready, so this answers what /v1/health
 * did for the request verbs' first step, ~1 ms sooner (an HTTP request
 * before the verb's own; scripts/bench/README.md, cli.ts). Waiting for a
 * daemon just started still asks /v1/health.
 */
async function serving(socket: string): Promise<boolean> {
  try {
    const s = await Bun.connect({ unix: socket, socket: { data() {} } });
    s.end();
    return true;
  } catch {
    return false;
  }
}

function logTail(path: string, lines = 15): string {
  try {
    return nodeFs().readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** The transport of the selected remote (--remote, HUTCH_REMOTE, the default), or null for this home's daemon. */
async function remoteTransport(): Promise<Transport | null> {
  if (homeDaemonOnly()) return null;
  const { selectedTransport } = await import("./remotes.ts");
  return selectedTransport();
}

/** A client of a remote daemon: never started from here; a request that fails says so. */
async function connectRemote(home: string, t: Transport, opts: { start?: boolean; kind?: string; name?: string }): Promise<DaemonClient> {
  // The client's name goes to a remote too (`hutch mcp` and `hutch acp` name their client: the actor's `:name`).
  const client = makeClient(home, t, async () => {}, opts.kind, opts.name);
  if (opts.start === false) return client;
  // One round trip proves the address, the pin and the token before the verb starts its work. A remote's
  // server that takes the connection but does not answer it gives way to the next (client/failover.ts).
  await client.request("GET", "/v1/whoami", undefined, { answerWithinMs: REMOTE_ANSWER_MS });
  return client;
}

/** Returns a client for the daemon of this home (or the selected remote's), starting a local one if none answers. */
export async function connectDaemon(
  home: string,
  opts: { start?: boolean; timeoutMs?: number; kind?: string; name?: string; local?: boolean } = {},
): Promise<DaemonClient> {
  // local: this home's own daemon even with a remote selected (a verb that talks to both).
  const remote = opts.local ? null : await remoteTransport();
  if (remote) return connectRemote(home, remote, opts);
  // Before the socket is used or a daemon started: in a home others can write, the socket could be theirs.
  checkHome(home);
  const t = localTransport(localTarget(home));
  // start: false (the IDE bridge) waits for a daemon to come back instead of starting one.
  const client = makeClient(
    home,
    t,
    opts.start === false ? async () => {} : () => startDaemon(home, t, opts.timeoutMs),
    opts.kind,
    opts.name,
  );
  if (await serving(join(home, HOME_FILES.socket))) return client;
  if (opts.start === false) {
    throw new HutchError("unavailable", `no daemon answers at ${t.where}`, "start one: hutch daemon");
  }
  await startDaemon(home, t, opts.timeoutMs);
  return client;
}

/** A client that never starts a daemon and does not need one now: it waits for one (the IDE bridge). */
export function waitingClient(home: string, kind?: string, remote?: Transport): DaemonClient {
  if (remote) return makeClient(home, remote, async () => {}, kind);
  checkHome(home);
  return makeClient(home, localTransport(localTarget(home)), async () => {}, kind);
}

async function startDaemon(home: string, t: Transport, timeoutMs?: number): Promise<void> {
  if (await health(t)) return;
  const { closeSync, mkdirSync, openSync } = nodeFs();
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const logPath = join(home, HOME_FILES.log);
  const spawnDaemon = () => {
    const fd = openSync(logPath, "a", 0o600);
    const child = Bun.spawn(selfArgv("daemon"), { stdin: "ignore", stdout: fd, stderr: fd, detached: true, env: env.all() });
    closeSync(fd);
    child.unref();
    const state = { exited: null as number | null, killed: false, at: Date.now() };
    void child.exited.then((code) => {
      state.exited = code;
      state.killed = child.signalCode !== null;
    });
    return state;
  };
  let child = spawnDaemon();
  const deadline = Date.now() + (timeoutMs ?? 15_000);
  while (Date.now() < deadline) {
    if (await health(t)) return;
    if (child.exited !== null && child.exited !== 0 && !child.killed) {
      // Exit 3 is the daemon refusing its configuration (its home, its key): say so, with its own words.
      const code = child.exited === ErrorCodes.config.exit ? "config" : "unavailable";
      throw new HutchError(code, `the daemon exited with ${child.exited} while starting:\n${logTail(logPath)}`, `see the log: ${logPath}`);
    }
    // Exit 0 means another daemon held the lock; if that one was shutting down, nobody serves now. A daemon
    // killed by a signal was stopped, not broken. Either way: start again.
    if (child.exited !== null && Date.now() - child.at > 250) child = spawnDaemon();
    await Bun.sleep(15);
  }
  throw new HutchError("unavailable", `the daemon did not become ready in time:\n${logTail(logPath)}`, `see the log: ${logPath}`);
}

function clientHeaders(kind?: string, named?: string): Record<string, string> {
  const name = named ?? env.clientName();
  return { "x-hutch-client": kind ?? env.clientKind(), ...(name ? { "x-hutch-client-name": name } : {}) };
}

function makeClient(home: string, t: Transport, restart: () => Promise<void>, kind?: string, name?: string): DaemonClient {
  const base = clientHeaders(kind, name);
  const self: DaemonClient = {
    home,
    transport: t,
    headers: base,
    async bytes(path: string): Promise<Uint8Array> {
      const res = await t.fetch(path, { headers: base });
      if (!res.ok) throw HutchError.fromBody(await res.json().catch(() => undefined), res.status);
      return res.bytes();
    },
    async request<T>(
      method: string,
      path: string,
      body?: unknown,
      opts: { idempotencyKey?: string; answerWithinMs?: number } = {},
    ): Promise<T> {
      const headers: Record<string, string> = { ...base };
      if (body !== undefined) headers["content-type"] = "application/json";
      if (opts.idempotencyKey) headers[IDEMPOTENCY_HEADER] = opts.idempotencyKey;
      const retryable = method === "GET" || opts.idempotencyKey !== undefined;
      const deadline = Date.now() + RETRY_FOR_MS;
      let res: Response;
      for (;;) {
        try {
          res = await t.fetch(
            path,
            { method, headers, body: body === undefined ? undefined : JSON.stringify(body) },
            opts.answerWithinMs ? { answerWithinMs: opts.answerWithinMs } : {},
          );
          break;
        } catch (err) {
          // Already said as what to do (a remote's changed certificate): retrying cannot help.
          if (err instanceof HutchError) throw err;
          if (!retryable || Date.now() > deadline) {
            throw new HutchError("unavailable", `lost the daemon: ${(err as Error).message}`, "retry; if it persists see: hutch doctor");
          }
          await Bun.sleep(50);
          await restart().catch(() => undefined);
        }
      }
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      if (!res.ok) throw HutchError.fromBody(parsed, res.status);
      return parsed as T;
    },
  };
  return self;
}
