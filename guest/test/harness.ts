import { afterAll, beforeAll } from "bun:test";
// Test harness: the real guest as a subprocess on a socket in a temp dir,
// and a real host-role Mux connected to it. Nothing is faked.
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { check, firstError, Mux, type MuxStream, type Static, type StreamError, type TSchema } from "@hutch/shared";
import { SocketWriter } from "../src/socket-writer.ts";

const MAIN = join(import.meta.dir, "../src/main.ts");

export interface Guest {
  dir: string;
  socket: string;
  workspace: string;
  home: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  stderr(): Promise<string>;
  stop(): Promise<void>;
}

/** How long a stopping guest gets to stop its children before it is killed. */
const STOP_GRACE_MS = 5000;

/** Starts a guest; `command` runs something else (the compiled binary) with the same env. */
export async function startGuest(command: string[] = [process.execPath, MAIN], extraEnv: Record<string, string> = {}): Promise<Guest> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), "hutch-guest-test-")));
  const workspace = join(dir, "workspace");
  const home = join(dir, "home");
  await mkdir(workspace);
  await mkdir(home);
  const socket = join(dir, "run", "agent.sock");
  const proc = Bun.spawn(command, {
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: home,
      HUTCH_GUEST_SOCKET: socket,
      HUTCH_GUEST_ROOTS: `${workspace}:${home}`,
      HUTCH_GUEST_CWD: workspace,
      HUTCH_GUEST_DEBUG: "1",
      ...extraEnv,
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const stderrText = new Response(proc.stderr).text();
  const deadline = Date.now() + 10_000;
  // Ready once a connection is taken: the socket file exists from bind(), but connections are refused until listen().
  for (;;) {
    const ok = await Bun.connect({ unix: socket, socket: { data() {} } }).then(
      (s) => {
        s.end();
        return true;
      },
      () => false,
    );
    if (ok) break;
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`guest did not start listening: ${await stderrText}`);
    }
    await Bun.sleep(20);
  }
  return {
    dir,
    socket,
    workspace,
    home,
    proc,
    stderr: () => stderrText,
    async stop() {
      // SIGTERM first, as a box's stop does: the guest stops what it started (Xvfb, Chromium, execs),
      // which SIGKILL would leave running for the rest of the suite and after it.
      if (proc.exitCode === null) proc.kill("SIGTERM");
      if ((await Promise.race([proc.exited.then(() => true), Bun.sleep(STOP_GRACE_MS).then(() => false)])) === false) proc.kill("SIGKILL");
      await proc.exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface Host {
  mux: Mux;
  hello: Promise<unknown>;
  /** Resolves when the guest closed the connection. */
  closed: Promise<void>;
  socket: Bun.Socket<undefined>;
  close(): void;
}

export async function connect(socketPath: string, hello: unknown = { protocol: 1, client: "hutch", version: "0.1.0" }): Promise<Host> {
  let mux!: Mux;
  let writer!: SocketWriter;
  let onHello!: (h: unknown) => void;
  let onClosed!: () => void;
  const helloP = new Promise<unknown>((r) => (onHello = r));
  const closed = new Promise<void>((r) => (onClosed = r));
  const socket = await connectRetrying({
    unix: socketPath,
    socket: {
      data: (_s, chunk) => mux.feed(chunk),
      drain: () => writer.drain(),
      close: () => {
        mux.lost("closed");
        onClosed();
      },
      error: () => {
        mux.lost("error");
        onClosed();
      },
    },
  });
  writer = new SocketWriter(socket);
  mux = new Mux({ write: (b) => writer.write(b), close: () => writer.end() }, { role: "host", onHello });
  mux.sendHello(hello);
  return { mux, hello: helloP, closed, socket, close: () => socket.end() };
}

// bind() creates the socket file before listen() runs, so a connect right
// after the file appears can be refused.
async function connectRetrying(opts: Bun.UnixSocketOptions<undefined>): Promise<Bun.Socket<undefined>> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await Bun.connect(opts);
    } catch (err) {
      if (attempt >= 50) throw err;
      await Bun.sleep(20);
    }
  }
}

/** Everything a stream received, and its end. */
export interface Collected {
  out: Uint8Array[];
  err: Uint8Array[];
  msgs: Record<string, unknown>[];
  eofs: number[];
  closed: Promise<StreamError | undefined>;
  text(chan?: 1 | 2): string;
  /** Resolves once the collected stdout matches. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  waitMsg(type: string, timeoutMs?: number): Promise<Record<string, unknown>>;
}

export function collect(stream: MuxStream): Collected {
  let onClose!: (e: StreamError | undefined) => void;
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  // stdout decoded as it arrives: joining and decoding megabytes again on
  // every poll made the test, not the guest, the bottleneck (its reads fell
  // seconds behind on a loaded machine, and a PTY took it for a stuck host).
  const decoder = new TextDecoder();
  let stdout = "";
  const c: Collected = {
    out: [],
    err: [],
    msgs: [],
    eofs: [],
    closed: new Promise((r) => (onClose = r)),
    text: (chan = 1) => (chan === 1 ? stdout : Buffer.concat(c.err).toString("utf8")),
    async waitFor(pattern, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      let seen = -1;
      for (;;) {
        const text = stdout;
        // Only when something arrived: matching megabytes costs too.
        if (text.length !== seen && pattern.test(text)) return text;
        seen = text.length;
        if (Date.now() > until) throw new Error(`timed out waiting for ${pattern}; output ends ${JSON.stringify(text.slice(-300))}`);
        await Bun.sleep(25);
      }
    },
    async waitMsg(type, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const m = c.msgs.find((x) => x.type === type);
        if (m) return m;
        if (Date.now() > until) throw new Error(`timed out waiting for msg ${type}; got ${JSON.stringify(c.msgs)}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 50);
        });
      }
    },
  };
  stream.handlers = {
    data: (chan, bytes) => {
      (chan === 2 ? c.err : c.out).push(bytes);
      if (chan !== 2) stdout += decoder.decode(bytes, { stream: true });
      wake();
    },
    msg: (m) => {
      c.msgs.push(m as Record<string, unknown>);
      wake();
    },
    eof: (chan) => c.eofs.push(chan),
    close: (e) => {
      onClose(e);
      wake();
    },
  };
  return c;
}

/** Opens a tool and collects until close. */
export async function call(host: Host, payload: unknown): Promise<{ c: Collected; error: StreamError | undefined }> {
  const c = collect(host.mux.open(payload));
  const error = await c.closed;
  return { c, error };
}

/** The stream's result, checked against the tool's result schema in shared (what the host checks it against). */
export function result<S extends TSchema>(c: Collected, schema: S): Static<S> {
  const value = c.msgs.find((m) => m.type === "result")?.value;
  if (!check(schema, value)) throw new Error(`result does not fit its schema: ${firstError(schema, value)}: ${JSON.stringify(value)}`);
  return value;
}

/** Whether a process exists (signal 0 checks without sending anything). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * One guest and one hello'd connection for a whole test file, stopped after
 * it. The callback receives them (and may prepare the guest's files).
 */
export function useGuest(ready: (g: Guest, h: Host) => void | Promise<void>): void {
  let g: Guest | undefined;
  let h: Host | undefined;
  beforeAll(async () => {
    g = await startGuest();
    h = await connect(g.socket);
    await h.hello;
    await ready(g, h);
  });
  afterAll(async () => {
    h?.close();
    await g?.stop();
  });
}
