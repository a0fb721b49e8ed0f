// Server mode end to end: a daemon serving TLS on loopback in its own home,
// and clients in homes of their own that joined it with a token.
import { mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "bun:test";
import type { SessionEvent } from "../shared/src/index.ts";
import { HUTCH, makeHome, waitFor, type Home } from "./helpers.ts";

export interface Server {
  home: Home;
  url: string;
  port: number;
  proc: ReturnType<typeof Bun.spawn>;
  /** Everything the serving daemon logged. */
  log(): string;
  /** The join string for a new token of user (added when missing). */
  join(user: string, args?: string[]): Promise<string>;
  stop(): Promise<void>;
}

/** How long a server may take to stop once sent SIGTERM (its own steps are bounded by a few seconds each). */
const SERVER_STOP_MS = 30_000;

/** A free loopback TCP port (taken and given back; the kernel does not hand it out again at once). */
export function freePort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
}

/**
 * Starts `hutch serve` in a new home; config is its config.json (read at start), env added to its environment,
 * before run in the home first (a fleet key put in place).
 */
export async function startServer(
  prefix = "hutch-srv-",
  opts: { config?: unknown; env?: Record<string, string>; args?: string[]; before?: (home: Home) => Promise<void> | void } = {},
): Promise<Server> {
  const home = makeHome(prefix);
  Object.assign(home.env, opts.env);
  if (opts.config) writeFileSync(join(home.home, "config.json"), JSON.stringify(opts.config));
  await opts.before?.(home);
  const port = freePort();
  const logPath = join(home.home, "serve.log");
  const fd = openSync(logPath, "a", 0o600);
  const proc = Bun.spawn([HUTCH, "serve", "--listen", `127.0.0.1:${port}`, ...(opts.args ?? [])], {
    env: home.env,
    stdin: "ignore",
    stdout: fd,
    stderr: fd,
  });
  await waitFor("the server's TLS listener", () => readFileSync(logPath, "utf8").includes("daemon ready"), 60_000);
  const users = new Set<string>();
  return {
    home,
    url: `https://127.0.0.1:${port}`,
    port,
    proc,
    log: () => readFileSync(logPath, "utf8"),
    async join(user, args = []) {
      if (!users.has(user)) {
        const r = await home.run(["user", "add", user]);
        expect(r.code, r.stderr).toBe(0);
        users.add(user);
      }
      const t = await home.run(["token", "create", "--user", user, ...args]);
      expect(t.code, t.stderr).toBe(0);
      return t.stdout.trim();
    },
    async stop() {
      await home.deleteBoxes();
      // The log is kept until the server stopped: a hang is shown with it.
      const hung = await stopServe(proc, logPath);
      await home.cleanup({ boxes: false });
      if (hung) throw hung;
    },
  };
}

/**
 * Sends `hutch serve` SIGTERM and waits for it to stop; one that has not
 * stopped within SERVER_STOP_MS is killed, and the error naming the hang
 * (with the end of its log) is returned for the caller to throw once it has
 * cleaned up.
 */
export async function stopServe(proc: ReturnType<typeof Bun.spawn>, logPath: string): Promise<Error | undefined> {
  proc.kill("SIGTERM");
  if (await Promise.race([proc.exited.then(() => true), Bun.sleep(SERVER_STOP_MS).then(() => false)])) return undefined;
  const tail = readFileSync(logPath, "utf8").split("\n").slice(-40).join("\n");
  proc.kill("SIGKILL");
  await proc.exited;
  return new Error(
    `hutch serve (pid ${proc.pid}) did not stop within ${SERVER_STOP_MS / 1000} s of SIGTERM; the end of ${logPath}:\n${tail}`,
  );
}

/**
 * Stops servers side by side, each after deleting the boxes it lists (in a
 * fleet, every server lists the fleet's: one server after another, that took
 * over a minute on a loaded machine). The first failure is thrown once all
 * have stopped.
 */
export async function stopServers(servers: Server[]): Promise<void> {
  const failed = (await Promise.allSettled(servers.map((s) => s.stop()))).find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
}

/** How long a fleet file's afterAll may take: its servers' boxes deleted and their daemons stopped. */
export const FLEET_TEARDOWN_MS = 180_000;

/** A client home that joined the server as `user` under the remote name `srv` and talks to it by default (HUTCH_REMOTE). */
export async function joinClient(
  server: Server,
  user: string,
  opts: { join?: string; prefix?: string } = {},
): Promise<Home & { join: string }> {
  const c = makeHome(opts.prefix ?? "hutch-cli-");
  const config = join(c.home, "config");
  mkdirSync(config, { mode: 0o700 });
  c.env.XDG_CONFIG_HOME = config;
  const joinString = opts.join ?? (await server.join(user));
  // The join string goes in on stdin: it holds the token, which must never sit in argv.
  const r = await c.run(["remote", "add", "srv", "-"], { stdin: joinString });
  expect(r.code, r.stderr).toBe(0);
  c.env.HUTCH_REMOTE = "srv";
  return Object.assign(c, { join: joinString });
}

/** The token inside a join string (to look for it where it must not be). */
export function tokenOf(join: string): string {
  return (JSON.parse(atob(join.replaceAll("-", "+").replaceAll("_", "/"))) as { token: string }).token;
}

/** A `hutch session subscribe` running against a home: the events it printed so far, what went wrong, and a stop. */
export interface Watcher {
  lines(): SessionEvent[];
  /** What it said on stderr, and its exit code once it exited. */
  trouble(): string;
  stop(): void;
}

/** `hutch session subscribe ID` through a home (and the remote named, when one is). */
export function watchSession(h: Home, id: string, remote?: string): Watcher {
  const proc = h.spawn(["session", "subscribe", id], remote ? { env: { HUTCH_REMOTE: remote } } : {});
  let text = "";
  let err = "";
  const dec = new TextDecoder();
  void (async () => {
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) text += dec.decode(chunk, { stream: true });
  })();
  void (async () => {
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) err += new TextDecoder().decode(chunk);
  })();
  return {
    trouble: () => `exit ${proc.exitCode ?? "none yet"}; stderr: ${err}`,
    lines: () =>
      text
        .slice(0, text.lastIndexOf("\n") + 1)
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as SessionEvent),
    stop: () => proc.kill(),
  };
}
