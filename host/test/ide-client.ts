// A JSON-RPC client for `hutch ide --stdio` over LSP framing, as the
// extension's language client speaks it (vscode-jsonrpc, the same library).
import { spawn, type ChildProcess } from "node:child_process";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from "vscode-jsonrpc/node";

export interface Bridge {
  conn: MessageConnection;
  proc: ChildProcess;
  stderr: () => string;
  /** Notifications received so far, by method. */
  seen: Map<string, unknown[]>;
  /** Calls fn with every later notification of `method` (the connection allows one handler per method, so listeners hang off ours). */
  on<T>(method: string, fn: (p: T) => void): void;
  /** Resolves with the first notification of `method` (already seen or future) that matches. */
  waitFor<T>(method: string, match: (p: T) => boolean, timeoutMs?: number): Promise<T>;
  stop(): Promise<void>;
}

export function startBridge(hutch: string, env: Record<string, string>): Bridge {
  const proc = spawn(hutch, ["ide", "--stdio"], { env, stdio: ["pipe", "pipe", "pipe"] });
  let err = "";
  proc.stderr!.on("data", (d) => (err += String(d)));
  const conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
  const seen = new Map<string, unknown[]>();
  const listeners: { method: string; fn: (p: unknown) => void }[] = [];
  const waiters: { method: string; match: (p: unknown) => boolean; resolve: (p: unknown) => void }[] = [];
  conn.onNotification((method: string, params: unknown) => {
    const list = seen.get(method) ?? [];
    list.push(params);
    seen.set(method, list);
    for (const l of listeners) if (l.method === method) l.fn(params);
    for (const w of [...waiters]) {
      if (w.method === method && w.match(params)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(params);
      }
    }
  });
  conn.listen();
  return {
    conn,
    proc,
    seen,
    stderr: () => err,
    on<T>(method: string, fn: (p: T) => void) {
      listeners.push({ method, fn: fn as (p: unknown) => void });
    },
    waitFor<T>(method: string, match: (p: T) => boolean, timeoutMs = 15_000): Promise<T> {
      const hit = (seen.get(method) ?? []).find((p) => match(p as T));
      if (hit !== undefined) return Promise.resolve(hit as T);
      return new Promise<T>((resolve, reject) => {
        const w = { method, match: match as (p: unknown) => boolean, resolve: resolve as (p: unknown) => void };
        waiters.push(w);
        setTimeout(() => {
          const i = waiters.indexOf(w);
          if (i >= 0) {
            waiters.splice(i, 1);
            reject(new Error(`no ${method} notification matched within ${timeoutMs} ms; stderr:\n${err.slice(-2000)}`));
          }
        }, timeoutMs);
      });
    },
    async stop() {
      try {
        await conn.sendRequest("shutdown");
        await conn.sendNotification("exit");
      } catch {
        // already gone
      }
      const exited = new Promise((r) => proc.once("exit", r));
      await Promise.race([exited, Bun.sleep(3000)]);
      if (proc.exitCode === null) proc.kill("SIGKILL");
      conn.dispose();
    },
  };
}
