// Talking to the daemon: find it, start it when none answers, send requests.
import { mkdirSync, openSync, closeSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HutchError, type Health } from "@hutch/shared";
import { HOME_FILES } from "../paths.ts";

export interface DaemonClient {
  home: string;
  socket: string;
  request<T>(method: string, path: string, body?: unknown, opts?: { idempotencyKey?: string }): Promise<T>;
}

/** argv that runs this same program as `hutch daemon` (compiled binary or from source). */
export function selfArgv(...args: string[]): string[] {
  const compiled = Bun.main.startsWith("/$bunfs/") || Bun.main.startsWith("B:/~BUN/");
  return compiled ? [process.execPath, ...args] : [process.execPath, Bun.main, ...args];
}

async function health(socket: string): Promise<Health | null> {
  try {
    const res = await fetch("http://hutch/v1/health", { unix: socket, signal: AbortSignal.timeout(2000) });
    return res.ok ? ((await res.json()) as Health) : null;
  } catch {
    return null;
  }
}

function logTail(path: string, lines = 15): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** Returns a client for the daemon of this home, starting one if none answers. */
export async function connectDaemon(home: string, opts: { start?: boolean; timeoutMs?: number } = {}): Promise<DaemonClient> {
  const socket = join(home, HOME_FILES.socket);
  const client = makeClient(home, socket);
  if (await health(socket)) return client;
  if (opts.start === false) {
    throw new HutchError("unavailable", `no daemon answers at ${socket}`, "start one: hutch daemon");
  }
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const logPath = join(home, HOME_FILES.log);
  const fd = openSync(logPath, "a", 0o600);
  const child = Bun.spawn(selfArgv("daemon"), { stdin: "ignore", stdout: fd, stderr: fd, detached: true, env: process.env });
  closeSync(fd);
  child.unref();
  let exited: number | null = null;
  void child.exited.then((code) => (exited = code));
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  while (Date.now() < deadline) {
    if (await health(socket)) return client;
    if (exited !== null && exited !== 0) {
      throw new HutchError("unavailable", `the daemon exited with ${exited} while starting:\n${logTail(logPath)}`, `see the log: ${logPath}`);
    }
    await Bun.sleep(15);
  }
  throw new HutchError("unavailable", `the daemon did not become ready in time:\n${logTail(logPath)}`, `see the log: ${logPath}`);
}

function makeClient(home: string, socket: string): DaemonClient {
  return {
    home,
    socket,
    async request<T>(method: string, path: string, body?: unknown, opts: { idempotencyKey?: string } = {}): Promise<T> {
      const headers: Record<string, string> = {};
      if (body !== undefined) headers["content-type"] = "application/json";
      if (opts.idempotencyKey) headers["idempotency-key"] = opts.idempotencyKey;
      let res: Response;
      try {
        res = await fetch(`http://hutch${path}`, { method, unix: socket, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      } catch (err) {
        throw new HutchError("unavailable", `lost the daemon: ${(err as Error).message}`, "retry; if it persists see: hutch doctor");
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
}
