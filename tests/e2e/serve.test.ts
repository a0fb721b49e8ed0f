// Server mode: one daemon serves TLS on loopback from its own home; clients in
// other homes join it with tokens and drive it with --remote (HUTCH_REMOTE)
// exactly as they drive a local daemon. Users are kept apart; a token is
// checked on every request and upgrade, and never shows up in logs or argv.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { connect } from "node:tls";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { WS_CLOSE_DENIED, WS_CLOSE_UNAUTHORIZED } from "../../shared/src/index.ts";
import { HUTCH, onTerminal, opOutput, waitFor, type Home } from "../helpers.ts";
import { joinClient, startServer, tokenOf, type Server } from "../remote.ts";
import { expectHeadlessTurn, fakeBindings, newSecrets } from "../agent-turns.ts";
import { startFakeModel, type FakeModel } from "../fixtures/fake-model/index.ts";

let srv: Server;
let alice: Home & { join: string };
let bob: Home & { join: string };
let cert: string;
let fake: FakeModel;
const SECRETS = newSecrets();

beforeAll(async () => {
  fake = await startFakeModel();
  srv = await startServer("hutch-srv-", {
    config: fakeBindings(fake),
    env: { HUTCH_AGENTS_DIR: process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents" },
    // What the service unit runs: the host proven by booting a box before anything is served.
    args: ["--doctor"],
  });
  cert = readFileSync(join(srv.home.home, "keys", "serve.crt"), "utf8");
  alice = await joinClient(srv, "alice");
  bob = await joinClient(srv, "bob");
  const r = await alice.run(["box", "create", "web", "--start"]);
  expect(r.code, r.stderr).toBe(0);
}, 120_000);

afterAll(async () => {
  await alice?.cleanup();
  await bob?.cleanup();
  await srv?.stop();
  await fake?.stop();
});

/** A request to the server with the pinned certificate and, when given, a token. */
function raw(path: string, token?: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (token) headers.set("authorization", `Bearer ${token}`);
  return fetch(`${srv.url}${path}`, { ...init, headers, tls: { ca: cert, checkServerIdentity: () => undefined } } as RequestInit);
}

/** A tool stream WebSocket opened with a token: whether the upgrade was taken, and its close code. */
function streamSocket(path: string, token: string): { opened: Promise<boolean>; closed: Promise<number>; ws: WebSocket } {
  const ws = new WebSocket(`${srv.url.replace("https:", "wss:")}${path}`, {
    headers: { authorization: `Bearer ${token}` },
    tls: { ca: cert, checkServerIdentity: () => undefined },
  } as unknown as string[]);
  return {
    ws,
    opened: new Promise((res) => {
      ws.onopen = () => res(true);
      ws.addEventListener("close", () => res(false));
    }),
    closed: new Promise((res) => ws.addEventListener("close", (e) => res(e.code))),
  };
}

/** A subscription WebSocket opened with a token: its close code and reason. */
function subscribeSocket(
  session: string,
  token: string,
): { open: Promise<void>; closed: Promise<number>; reason: Promise<string>; ws: WebSocket } {
  const ws = new WebSocket(`${srv.url.replace("https:", "wss:")}/v1/sessions/${session}/subscribe?from=1`, {
    headers: { authorization: `Bearer ${token}` },
    tls: { ca: cert, checkServerIdentity: () => undefined },
  } as unknown as string[]);
  return {
    ws,
    open: new Promise((res, rej) => {
      ws.onopen = () => res();
      ws.onerror = () => rej(new Error("socket error"));
    }),
    closed: new Promise((res) => ws.addEventListener("close", (e) => res(e.code))),
    reason: new Promise((res) => ws.addEventListener("close", (e) => res(e.reason))),
  };
}

describe("through --remote, as locally", () => {
  test("exec: exit codes, stdin, stdout and stderr apart; 64 MiB byte-exact both ways", async () => {
    const r = await alice.run(["exec", "web", "--", "sh", "-c", "cat; echo to-err >&2; exit 7"], { stdin: "from-stdin\n" });
    expect(r.code).toBe(7);
    expect(r.stdout).toBe("from-stdin\n");
    expect(r.stderr).toBe("to-err\n");
    const big = randomBytes(64 * 1024 * 1024);
    const echo = await alice.run(["exec", "web", "--", "cat"], { stdin: new Blob([big]) });
    expect(echo.code).toBe(0);
    expect(echo.out.length).toBe(big.length);
    expect(Buffer.compare(Buffer.from(echo.out), big)).toBe(0);
  }, 120_000);

  test("cp in and out", async () => {
    const src = join(alice.home, "in.txt");
    writeFileSync(src, "carried\n");
    expect((await alice.run(["cp", src, "web:/workspace/in.txt"])).code).toBe(0);
    expect((await alice.run(["exec", "web", "--", "cat", "/workspace/in.txt"])).stdout).toBe("carried\n");
    const back = join(alice.home, "back.txt");
    expect((await alice.run(["cp", "web:/workspace/in.txt", back])).code).toBe(0);
    expect(readFileSync(back, "utf8")).toBe("carried\n");
  });

  test("a PTY: resize, type, drop the client, reattach: the screen is back", async () => {
    const a = onTerminal(alice, ["exec", "--tty", "web", "--", "sh"]);
    await a.until("$ ");
    a.proc.terminal!.resize(100, 30);
    // The new size travels by SIGWINCH to the client, beside the keys: ask again until the box's terminal has it.
    await waitFor("the box's terminal to take the new size", () => {
      a.type("stty size\n");
      return a.text().includes("30 100");
    });
    a.type("echo mark-$((6*7))\n");
    await a.until("mark-42");
    a.proc.kill("SIGKILL");
    await a.proc.exited;
    const ptys = JSON.parse((await alice.run(["pty", "list", "web", "--json"])).stdout) as { id: string }[];
    expect(ptys.length).toBe(1);
    const b = onTerminal(alice, ["pty", "attach", "web", ptys[0]!.id], 100, 30);
    await b.until("mark-42");
    b.type("exit 3\n");
    expect(await b.proc.exited).toBe(3);
  }, 60_000);

  test("sleep, by itself and asked, and wake on demand: --sleep-after, listed asleep; an exec wakes it with a progress line, its own code and bytes", async () => {
    expect((await alice.run(["box", "create", "nap", "--start", "--sleep-after", "3s"])).code).toBe(0);
    expect((await alice.run(["exec", "nap", "--", "sh", "-c", "echo kept > /workspace/f"])).code).toBe(0);
    const state = async () => (JSON.parse((await alice.run(["box", "info", "nap", "--json"])).stdout) as { state: string }).state;
    await waitFor("the idle box to sleep by itself", async () => (await state()) === "asleep", 30_000);
    const r = await alice.run(["exec", "nap", "--", "sh", "-c", "cat /workspace/f; exit 3"]);
    expect([r.code, r.stdout]).toEqual([3, "kept\n"]);
    expect(r.stderr).toContain("waking nap");
    const s = await alice.run(["box", "sleep", "nap", "--json"]);
    expect(s.code, s.stderr).toBe(0);
    expect((JSON.parse(s.stdout) as { state: string }).state).toBe("asleep");
    const listed = JSON.parse((await alice.run(["box", "list", "--json"])).stdout) as { name: string; state: string }[];
    expect(listed.find((b) => b.name === "nap")?.state).toBe("asleep");
    expect((await alice.run(["box", "wake", "nap"])).code).toBe(0);
    expect(await state()).toBe("running");
    expect((await alice.run(["box", "delete", "nap"])).code).toBe(0);
  }, 60_000);

  test("session watch and annotate; the actor is stamped from the token", async () => {
    const run = await alice.run(["run", "web", "--detach", "--label", "remote"]);
    expect(run.code, run.stderr).toBe(0);
    const sid = run.stdout.trim();
    const watch = alice.spawn(["session", "watch", sid]);
    const ann = await alice.run(["session", "annotate", sid, "looks right", "--json"]);
    expect(ann.code, ann.stderr).toBe(0);
    let out = "";
    const reader = (watch.stdout as ReadableStream<Uint8Array>).getReader();
    await waitFor("the annotation on the watch", async () => {
      const { value } = await reader.read();
      out += new TextDecoder().decode(value);
      return out.includes("looks right");
    });
    watch.kill();
    // The driver slot and input, as locally: acquire, send, release.
    expect((await alice.run(["session", "driver", "acquire", sid])).code).toBe(0);
    expect((await alice.run(["session", "send", sid, "echo sent-$((3*3))"])).code).toBe(0);
    expect((await alice.run(["session", "driver", "release", sid])).code).toBe(0);
    await waitFor("the sent command's output in the log", async () => (await alice.run(["session", "log", sid])).stdout.includes("sent-9"));
    const log = await alice.run(["session", "log", sid, "--json"]);
    const line = log.stdout.split("\n").find((l) => l.includes("looks right"))!;
    expect(JSON.parse(line).actor).toEqual({ kind: "user", id: "alice" });
  });
});

describe("a coding agent through --remote", () => {
  test("run --agent claude --prompt: the turn runs in the server's box against the fake model API, with the user's own secrets", async () => {
    // The agent CLIs are the server's (its admin installs them); the keys are alice's, sent from her laptop on stdin.
    expect((await srv.home.run(["agent", "install"])).code).toBe(0);
    for (const [name, value] of Object.entries(SECRETS)) expect((await alice.run(["secret", "set", name], { stdin: value })).code).toBe(0);
    // The server's own secrets of the same names are not hers: her box must never send them.
    for (const name of Object.keys(SECRETS)) expect((await srv.home.run(["secret", "set", name], { stdin: `decoy-${name}` })).code).toBe(0);
    expect(JSON.parse((await bob.run(["secret", "list", "--json"])).stdout)).toEqual([]);
    const box = await alice.run(["box", "create", "ag", "--start", "--secret", "anthropic", "--secret", "openai"]);
    expect(box.code, box.stderr).toBe(0);
    await expectHeadlessTurn(alice, "ag", "claude", fake, SECRETS);
    expect(JSON.stringify(fake.modelCalls())).not.toContain("decoy-");
    expect((await alice.run(["box", "delete", "ag"])).code).toBe(0);
  }, 300_000);
});

describe("auth", () => {
  test("no token: 401 on a request and on a WebSocket upgrade, and both are logged without any token", async () => {
    expect((await raw("/v1/boxes")).status).toBe(401);
    const up = await raw("/v1/boxes/web/stream", undefined, {
      headers: {
        upgrade: "websocket",
        connection: "Upgrade",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
      },
    });
    expect(up.status).toBe(401);
    expect(((await up.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    expect(srv.log()).toContain("path=/v1/boxes/web/stream reason=");
  });

  test("over TLS: health names no pid or home; sessions that make boxes count against the token's creation limit", async () => {
    const token = tokenOf(await srv.join("dave"));
    const health = (await (await raw("/v1/health", token)).json()) as Record<string, unknown>;
    expect(Object.keys(health).sort()).toEqual(["ok", "version"]);
    // 20 boxes at once and one back every 3 s: ten made directly (left stopped, cheap), then sessions that make their own box.
    const t0 = Date.now();
    const json = { "content-type": "application/json" };
    const box = (name: string) => raw("/v1/boxes", token, { method: "POST", headers: json, body: JSON.stringify({ name }) });
    for (let i = 0; i < 10; i++) expect((await box(`dave-${i}`)).status).toBe(201);
    const session = () => raw("/v1/sessions", token, { method: "POST", headers: json, body: JSON.stringify({ argv: ["true"] }) });
    let made = 0;
    let refused = await session();
    while (refused.status === 201 && made < 30) {
      made++;
      refused = await session();
    }
    expect(refused.status).toBe(429);
    expect(made).toBeGreaterThanOrEqual(10);
    expect(10 + made).toBeLessThanOrEqual(20 + Math.ceil((Date.now() - t0) / 3000));
    expect(((await refused.json()) as { error: { code: string; hint: string } }).error).toMatchObject({
      code: "limited",
      hint: expect.stringMatching(/^retry in \d+ s$/),
    });
  }, 120_000);

  test("user B cannot see user A's box: 404 for info, exec and its stream, and it is not listed", async () => {
    const info = await bob.run(["box", "info", "web"]);
    expect(info.code).toBe(4);
    expect(info.stderr).toContain('no box named "web"');
    const exec = await bob.run(["exec", "web", "--", "true"]);
    expect(exec.code).toBe(4);
    expect(JSON.parse((await bob.run(["box", "list", "--json"])).stdout)).toEqual([]);
    expect((await raw("/v1/boxes/web", tokenOf(bob.join))).status).toBe(404);
  });

  test("a box shared read-only: watch works, send and attach are refused", async () => {
    const sid = (await alice.run(["run", "web", "--detach", "--label", "shared"])).stdout.trim();
    expect((await bob.run(["session", "info", sid])).code).toBe(4);
    expect((await alice.run(["box", "share", "web", "--with", "bob", "--read"])).code).toBe(0);
    const log = await bob.run(["session", "log", sid, "--json"]);
    expect(log.code, log.stderr).toBe(0);
    expect((await bob.run(["session", "annotate", sid, "bob was here"])).code).toBe(0);
    const send = await bob.run(["session", "send", sid, "echo nope"]);
    expect(send.code).toBe(1);
    expect(send.stderr).toContain("shared with you read-only");
    const attach = await bob.run(["session", "attach", sid]);
    expect(attach.code).not.toBe(0);
    expect(attach.stderr).toContain("read-only");
    expect((await bob.run(["exec", "web", "--", "true"])).code).toBe(1);
    expect((await alice.run(["box", "share", "web", "--with", "bob", "--revoke"])).code).toBe(0);
    expect((await bob.run(["session", "info", sid])).code).toBe(4);
  });

  test("a read-only share cannot attach to a session through any box path: a missing box, his own box, or hers", async () => {
    const sid = (await alice.run(["run", "web", "--detach", "--label", "ro-attach"])).stdout.trim();
    expect((await bob.run(["box", "create", "bobs", "--start"])).code).toBe(0);
    expect((await alice.run(["box", "share", "web", "--with", "bob", "--read"])).code).toBe(0);
    const bobToken = tokenOf(bob.join);
    // The positive control: alice's own token upgrades through her box's path.
    const own = streamSocket(`/v1/boxes/web/stream?session=${sid}&steal=1`, tokenOf(alice.join));
    expect(await own.opened).toBe(true);
    own.ws.close();
    for (const path of [
      `/v1/boxes/no-such-box/stream?session=${sid}&steal=1`,
      `/v1/boxes/bobs/stream?session=${sid}&steal=1`,
      `/v1/boxes/web/stream?session=${sid}&steal=1`,
      `/v1/boxes/web/stream?session=${sid}`,
    ]) {
      const s = streamSocket(path, bobToken);
      expect({ path, opened: await s.opened }).toEqual({ path, opened: false });
    }
    // Nor through the routes: input, the driver slot, events other than annotations, close.
    for (const [path, body] of [
      [`/v1/sessions/${sid}/input`, { text: "echo owned\n" }],
      [`/v1/sessions/${sid}/driver/acquire`, {}],
      [`/v1/sessions/${sid}/driver/steal`, {}],
      [`/v1/sessions/${sid}/events`, { events: [{ kind: "attention.required", data: { reason: "hi" } }] }],
      [`/v1/sessions/${sid}/close`, {}],
    ] as const) {
      const r = await raw(path, bobToken, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      expect({ path, status: r.status }).toEqual({ path, status: 403 });
    }
    const info = JSON.parse((await alice.run(["session", "info", sid, "--json"])).stdout);
    expect(info.driver).toBeFalsy();
    expect(info.state).toBe("open");
    expect((await alice.run(["box", "share", "web", "--with", "bob", "--revoke"])).code).toBe(0);
    expect((await bob.run(["box", "delete", "bobs"])).code).toBe(0);
  });

  test("a revoked drive share ends at once: no input, attach or fork; his sessions on the box are closed and his sockets cut", async () => {
    expect((await alice.run(["box", "share", "web", "--with", "bob", "--drive"])).code).toBe(0);
    const bobToken = tokenOf(bob.join);
    // bob's own session on alice's box, which he drives.
    const mine = (await bob.run(["run", "web", "--detach", "--label", "bobs-own"])).stdout.trim();
    expect(mine).toMatch(/^ses_/);
    expect((await bob.run(["session", "driver", "acquire", mine])).code).toBe(0);
    expect((await bob.run(["session", "send", mine, "echo before"])).code).toBe(0);
    // alice's session, which bob drives too.
    const hers = (await alice.run(["run", "web", "--detach", "--label", "hers"])).stdout.trim();
    expect((await bob.run(["session", "driver", "acquire", hers])).code).toBe(0);
    const attached = streamSocket(`/v1/boxes/web/stream?session=${mine}&steal=1`, bobToken);
    expect(await attached.opened).toBe(true);
    const feed = subscribeSocket(mine, bobToken);
    await feed.open;

    expect((await alice.run(["box", "share", "web", "--with", "bob", "--revoke"])).code).toBe(0);
    expect(await attached.closed).toBe(WS_CLOSE_DENIED);
    expect(await feed.closed).toBe(WS_CLOSE_DENIED);
    for (const args of [
      ["session", "send", mine, "echo after"],
      ["session", "driver", "acquire", mine],
      ["session", "driver", "steal", hers],
      ["session", "send", hers, "echo after"],
      ["session", "attach", mine],
    ]) {
      const r = await bob.run(args);
      expect({ args, code: r.code }).toEqual({ args, code: 4 });
    }
    const again = streamSocket(`/v1/boxes/web/stream?session=${mine}&steal=1`, bobToken);
    expect(await again.opened).toBe(false);
    // A snapshot alice takes later is no fork source for bob through his old session.
    const snap = await alice.run(["snapshot", "create", "web", "--json"]);
    expect(snap.code, snap.stderr).toBe(0);
    const fork = await bob.run(["session", "fork", mine, "--at", "100000", "--name", "bobs-fork"]);
    expect(fork.code).toBe(4);
    expect(JSON.parse((await alice.run(["box", "list", "--json"])).stdout).map((b: { name: string }) => b.name)).not.toContain("bobs-fork");
    // His session on her box is closed; hers is hers again, with no driver; the log says who let go.
    await waitFor(
      "bob's session closed",
      async () => JSON.parse((await alice.run(["session", "info", mine, "--json"])).stdout).state === "closed",
      10_000,
    );
    const hersNow = JSON.parse((await alice.run(["session", "info", hers, "--json"])).stdout);
    expect(hersNow.state).toBe("open");
    expect(hersNow.driver).toBeFalsy();
    const log = (await alice.run(["session", "log", hers, "--json"])).stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { kind: string; actor: { kind: string } });
    expect(log.some((e) => e.kind === "session.driver.released" && e.actor.kind === "system")).toBe(true);
  }, 60_000);

  test("snapshots are each user's: alice's is hers to list and browse; for bob it does not exist", async () => {
    const made = await alice.run(["snapshot", "create", "web", "--json"]);
    expect(made.code, made.stderr).toBe(0);
    const id = opOutput<{ snapshot: { id: string } }>(made.stdout).result.snapshot.id;
    expect(JSON.parse((await alice.run(["snapshot", "list", "--json"])).stdout).map((s: { id: string }) => s.id)).toContain(id);
    expect((await alice.run(["snapshot", "browse", id])).code).toBe(0);
    expect(JSON.parse((await bob.run(["snapshot", "list", "--json"])).stdout)).toEqual([]);
    const theirs = await bob.run(["snapshot", "browse", id]);
    const none = await bob.run(["snapshot", "browse", "snap_00000000000000000000"]);
    expect(theirs.code).toBe(4);
    expect(theirs.stderr).toBe(none.stderr.replace("snap_00000000000000000000", id));
    expect((await bob.run(["snapshot", "create", "web"])).code).toBe(4);
    expect((await bob.run(["snapshot", "prune", "--keep-last", "1"])).code).toBe(1);
    // A fork copies a snapshot's files: bob cannot fork alice's, and is told what he would be told of none.
    const fork = await bob.run(["box", "create", "bobs-copy", "--from", id]);
    const forkNone = await bob.run(["box", "create", "bobs-copy", "--from", "snap_00000000000000000000"]);
    expect(fork.code).toBe(4);
    expect(fork.stderr).toBe(forkNone.stderr.replace("snap_00000000000000000000", id));
    expect(JSON.parse((await alice.run(["box", "list", "--json"])).stdout).map((b: { name: string }) => b.name)).not.toContain("bobs-copy");
    // alice's own fork is hers.
    const mine = await alice.run(["box", "create", "alices-copy", "--from", id]);
    expect(mine.code, mine.stderr).toBe(0);
    expect(JSON.parse((await alice.run(["box", "list", "--json"])).stdout).map((b: { name: string }) => b.name)).toContain("alices-copy");
    expect(JSON.parse((await bob.run(["box", "list", "--json"])).stdout).map((b: { name: string }) => b.name)).not.toContain("alices-copy");
    expect((await alice.run(["box", "delete", "alices-copy"])).code).toBe(0);
  }, 120_000);

  test("a revoked token stops working on its open WebSocket and its change feed at once", async () => {
    const join2 = await srv.join("alice");
    const token = tokenOf(join2);
    const sid = (await alice.run(["run", "web", "--detach", "--label", "revoke"])).stdout.trim();
    const sock = subscribeSocket(sid, token);
    await sock.open;
    // A long HTTP response the token holds open: the change feed.
    const feed = await raw("/v1/changes", token);
    const lines = feed.body!.getReader();
    expect(new TextDecoder().decode((await lines.read()).value)).toContain('"hello"');
    const feedEnded = (async () => {
      for (;;) if ((await lines.read()).done) return true;
    })();
    const id = /hutch_(tok_[0-9a-z]{12})_/.exec(token)![1]!;
    expect((await srv.home.run(["token", "revoke", id])).code).toBe(0);
    // Closed by the revoke itself, not by the listener's later sweep of its tokens (which says "expired"):
    // the same call ends the token's change feeds.
    expect(await sock.closed).toBe(WS_CLOSE_UNAUTHORIZED);
    expect(JSON.parse(await sock.reason)).toEqual({ code: "unauthorized", message: `token ${id} was revoked` });
    expect(await feedEnded).toBe(true);
    expect((await raw("/v1/boxes", token)).status).toBe(401);
  });

  test("a certificate other than the pinned one is refused before anything is sent, with the command to re-pin", async () => {
    const other = await startServer("hutch-srv2-");
    try {
      const path = join(alice.env.XDG_CONFIG_HOME!, "hutch", "remotes.json");
      const f = JSON.parse(readFileSync(path, "utf8"));
      f.remotes.evil = { ...f.remotes.srv, servers: [{ ...f.remotes.srv.servers[0], url: other.url }] };
      writeFileSync(path, JSON.stringify(f));
      const r = await alice.run(["box", "list"], { env: { HUTCH_REMOTE: "evil" } });
      expect(r.code).toBe(3);
      expect(r.stderr).toContain("presented a certificate with sha256");
      expect(r.stderr).toContain("next: if the server's admin confirms");
      expect(r.stderr).toContain("hutch remote pin evil");
      // No request reached the other server: it logged no authentication at all.
      expect(other.log()).not.toContain("authentication failed");
      expect(other.log()).not.toContain(tokenOf(alice.join));
    } finally {
      await other.stop();
    }
  }, 60_000);

  test("no token in the server's or the client's logs, files or process arguments", async () => {
    const tokens = [alice.join, bob.join].map(tokenOf);
    const secretPart = tokens.map((t) => t.slice(-43));
    // An argument no other process has: its sleep running in the box says the exec and its client are up.
    const running = alice.spawn(["exec", "web", "--", "sleep", "2.0417"]);
    const isTheSleep = (pid: string) => {
      const argv = read(`/proc/${pid}/cmdline`).split("\0");
      return argv[0]!.endsWith("sleep") && argv[1] === "2.0417";
    };
    await waitFor("the exec's process in the box", () => readdirSync("/proc").some(isTheSleep));
    for (const pid of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
      let argv = "";
      try {
        argv = readFileSync(`/proc/${pid}/cmdline`, "latin1");
      } catch {
        continue;
      }
      for (const s of secretPart) expect(argv.includes(s)).toBe(false);
    }
    await running.exited;
    const logs = [srv.log(), ...[alice, bob, srv.home].map((h) => read(join(h.home, "daemon.log")))].join("\n");
    for (const s of secretPart) expect(logs.includes(s)).toBe(false);
    // The database keeps only a hash.
    const db = readFileSync(join(srv.home.home, "hutch.db"), "latin1") + read(join(srv.home.home, "hutch.db-wal"));
    for (const s of secretPart) expect(db.includes(s)).toBe(false);
  });
});

/** A loopback TCP relay to the server whose connections the test can cut, as a network drop would. */
function relay(port: number) {
  type Side = { peer?: import("bun").Socket<Side>; pending: Uint8Array[] };
  const conns = new Set<import("bun").Socket<Side>>();
  let opened = 0;
  const server = Bun.listen<Side>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      async open(client) {
        client.data = { pending: [] };
        conns.add(client);
        opened++;
        const upstream = await Bun.connect<Side>({
          hostname: "127.0.0.1",
          port,
          socket: {
            data: (_s, d) => void client.write(d),
            close: () => void client.end(),
            error: () => void client.end(),
          },
          data: { peer: client, pending: [] },
        });
        client.data.peer = upstream;
        for (const d of client.data.pending) upstream.write(d);
      },
      data(client, d) {
        if (client.data.peer) client.data.peer.write(d);
        else client.data.pending.push(new Uint8Array(d));
      },
      close(client) {
        conns.delete(client);
        client.data.peer?.end();
      },
    },
  });
  return {
    port: server.port,
    opened: () => opened,
    live: () => conns.size,
    /** Cuts every open connection at once, both ways. */
    drop() {
      for (const c of conns) {
        c.data.peer?.terminate();
        c.terminate();
      }
      conns.clear();
    },
    stop: () => server.stop(true),
  };
}

describe("dropped connections", () => {
  test("cutting the TCP connection mid-subscription: the client reconnects and gets every event exactly once", async () => {
    const proxy = relay(srv.port);
    try {
      const path = join(alice.env.XDG_CONFIG_HOME!, "hutch", "remotes.json");
      const f = JSON.parse(readFileSync(path, "utf8"));
      f.remotes.flaky = { ...f.remotes.srv, servers: [{ ...f.remotes.srv.servers[0], url: `https://127.0.0.1:${proxy.port}` }] };
      writeFileSync(path, JSON.stringify(f));
      const sid = (await alice.run(["run", "web", "--detach", "--label", "drop"])).stdout.trim();
      const sub = alice.spawn(["session", "subscribe", sid, "--json"], { env: { HUTCH_REMOTE: "flaky" } });
      const lines: { seq: number; kind: string; data: { text?: string } }[] = [];
      void (async () => {
        let buf = "";
        for await (const chunk of sub.stdout as ReadableStream<Uint8Array>) {
          buf += new TextDecoder().decode(chunk);
          const parts = buf.split("\n");
          buf = parts.pop()!;
          for (const l of parts) if (l) lines.push(JSON.parse(l));
        }
      })();
      const token = tokenOf(alice.join);
      const annotate = async (text: string) =>
        expect(
          (
            await raw(`/v1/sessions/${sid}/annotations`, token, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ text }),
            })
          ).status,
        ).toBe(200);
      for (let i = 0; i < 50; i++) await annotate(`before-${i}`);
      await waitFor("the first events through the relay", () => lines.some((l) => l.data.text === "before-49"));
      expect(proxy.live()).toBeGreaterThan(0);
      const first = proxy.opened();
      proxy.drop();
      for (let i = 0; i < 50; i++) await annotate(`after-${i}`);
      proxy.drop();
      for (let i = 0; i < 20; i++) await annotate(`last-${i}`);
      await waitFor("every event after the drops", () => lines.some((l) => l.data.text === "last-19"), 20_000);
      sub.kill();
      // The subscriber really lost its connection twice and came back each time.
      expect(proxy.opened()).toBeGreaterThanOrEqual(first + 2);
      const seqs = lines.map((l) => l.seq);
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
      const texts = lines.filter((l) => l.kind === "annotation.added").map((l) => l.data.text);
      expect(texts).toEqual([
        ...Array.from({ length: 50 }, (_, i) => `before-${i}`),
        ...Array.from({ length: 50 }, (_, i) => `after-${i}`),
        ...Array.from({ length: 20 }, (_, i) => `last-${i}`),
      ]);
    } finally {
      proxy.stop();
    }
  }, 60_000);
});

describe("dropped connections, terminals", () => {
  test("cutting an attached terminal's connection: the client attaches again by itself, keys and screen carry on", async () => {
    const proxy = relay(srv.port);
    try {
      const path = join(alice.env.XDG_CONFIG_HOME!, "hutch", "remotes.json");
      const f = JSON.parse(readFileSync(path, "utf8"));
      f.remotes.flaky = { ...f.remotes.srv, servers: [{ ...f.remotes.srv.servers[0], url: `https://127.0.0.1:${proxy.port}` }] };
      writeFileSync(path, JSON.stringify(f));
      const t = onTerminal({ ...alice, env: { ...alice.env, HUTCH_REMOTE: "flaky" } }, ["exec", "--tty", "web", "--", "sh"]);
      await t.until("$ ");
      t.type("echo one-$((1+1))\n");
      await t.until("one-2");
      const before = proxy.opened();
      proxy.drop();
      // Keys typed while it reattaches wait for the new stream (client/exec.ts), so type at once.
      await waitFor("the terminal's new connection", () => proxy.opened() > before, 10_000);
      t.type("echo two-$((2+2))\n");
      await t.until("two-4");
      expect(t.proc.exitCode).toBeNull();
      t.type("exit 6\n");
      expect(await t.proc.exited).toBe(6);
      expect(t.text()).not.toContain("lost the connection");
    } finally {
      proxy.stop();
    }
  }, 60_000);
});

describe("load", () => {
  test("50 clients at once: each makes a session, appends 200 annotations, subscribes and reads them back exactly once", async () => {
    const token = tokenOf(alice.join);
    const json = { "content-type": "application/json" };
    const client = async (n: number) => {
      const created = await raw("/v1/sessions", token, {
        method: "POST",
        headers: json,
        body: JSON.stringify({ box: "web", argv: ["sleep", "600"], label: `load-${n}` }),
      });
      expect(created.status).toBe(201);
      const sid = ((await created.json()) as { id: string }).id;
      for (let i = 0; i < 200; i++) {
        const r = await raw(`/v1/sessions/${sid}/annotations`, token, {
          method: "POST",
          headers: json,
          body: JSON.stringify({ text: `c${n}-${i}` }),
        });
        expect(r.status).toBe(200);
      }
      const texts: string[] = [];
      const seqs: number[] = [];
      await new Promise<void>((resolve, reject) => {
        const sock = subscribeSocket(sid, token);
        sock.ws.onmessage = (e) => {
          for (const line of String(e.data).split("\n")) {
            if (!line) continue;
            const ev = JSON.parse(line) as { seq?: number; kind?: string; type?: string; data?: { text?: string } };
            if (ev.type === "caught-up" || ev.type) {
              if (ev.type === "caught-up") {
                sock.ws.close();
                resolve();
              }
              continue;
            }
            seqs.push(ev.seq!);
            if (ev.kind === "annotation.added") texts.push(ev.data!.text!);
          }
        };
        sock.closed.then((code) => (code === 1000 || code === 1005 ? resolve() : reject(new Error(`closed ${code}`))));
      });
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
      expect(texts).toEqual(Array.from({ length: 200 }, (_, i) => `c${n}-${i}`));
      await raw(`/v1/sessions/${sid}/close`, token, { method: "POST", headers: json, body: "{}" });
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: 50 }, (_, n) => client(n)));
    const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${srv.proc.pid}/status`, "utf8"))![1];
    console.log(
      `load: 50 clients, 10,000 annotations, read back in ${Math.round(performance.now() - t0)} ms; server RSS ${Math.round(Number(rss) / 1024)} MiB`,
    );
    expect(srv.log()).not.toContain("ERROR");
  }, 300_000);
});

describe("running it as a service", () => {
  test("serve --doctor proved the host before it listened", () => {
    const log = srv.log();
    expect(log).toMatch(/doctor .*check="process engine" ok=true/);
    expect(log.indexOf('check="process engine"')).toBeLessThan(log.indexOf("serving on TLS"));
  });

  test("service install --user-unit writes the unit and its env file (systemd does not run here), uninstall removes them", async () => {
    const config = join(alice.home, "svc-config");
    const env = { XDG_CONFIG_HOME: config };
    const r = await alice.run(["service", "install", "--user-unit", "--json"], { env });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { unit: string; env: string; started: boolean; next: string[] };
    expect(out.unit).toBe(join(config, "systemd/user/hutch.service"));
    const unit = readFileSync(out.unit, "utf8");
    expect(unit).toContain(`ExecStart=${HUTCH} serve --doctor $HUTCH_SERVE_ARGS`);
    expect(readFileSync(out.env, "utf8")).toContain("HUTCH_SERVE_ARGS=--listen 0.0.0.0:8443");
    // The daemon's home is the installing user's, so their CLI on the server reaches it without a flag.
    expect(readFileSync(out.env, "utf8")).toContain(`HUTCH_HOME=${alice.home}`);
    if (!out.started) expect(out.next).toContain("systemctl --user enable --now hutch");
    const u = await alice.run(["service", "uninstall", "--user-unit", "--json"], { env });
    expect(JSON.parse(u.stdout).removed).toEqual([out.unit, out.env]);
  });
});

describe("bad input", () => {
  test("a malformed join string: exit 2 and what to do", async () => {
    const r = await alice.run(["remote", "add", "bad", "-"], { stdin: "not-a-join-string!" });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("not a hutch join string");
    const half = await alice.run(["remote", "add", "bad", "-"], { stdin: btoa(JSON.stringify({ v: 1, url: srv.url })) });
    expect(half.code).toBe(2);
    expect(half.stderr).toContain("join string:");
  });

  test("an expired token: 401 naming the expiry", async () => {
    const c = await joinClient(srv, "carol", { join: await srv.join("carol", ["--expires", "2s"]) });
    try {
      expect((await c.run(["box", "list"])).code).toBe(0);
      // Real time on a real server (no clock a process's environment could move): ask until it refuses, within a bound.
      const r = await waitFor("the server to refuse the expired token", async () => {
        const tried = await c.run(["box", "list"]);
        return tried.code === 0 ? null : tried;
      });
      expect(r.code, r.stderr).toBe(3);
      expect(r.stderr).toContain("expired");
    } finally {
      await c.cleanup();
    }
  });

  test("a client that offers only TLS 1.2 is refused in the handshake; TLS 1.3 is served", async () => {
    const hello = (maxVersion: "TLSv1.2" | "TLSv1.3") =>
      new Promise<string>((resolve) => {
        const s = connect({ host: "127.0.0.1", port: srv.port, rejectUnauthorized: false, maxVersion });
        s.once("secureConnect", () => {
          resolve(s.getProtocol() ?? "none");
          s.destroy();
        });
        s.once("error", (e) => resolve(`error: ${e.message}`));
      });
    expect(await hello("TLSv1.3")).toBe("TLSv1.3");
    expect(await hello("TLSv1.2")).toMatch(/^error: .*(protocol version|PROTOCOL_VERSION|alert)/i);
  });

  test("a TLS client that sends garbage, and a raw TCP client: the server keeps serving others", async () => {
    // Garbage inside a finished handshake (not HTTP), left open: it holds only its own connection.
    const s = connect({ host: "127.0.0.1", port: srv.port, rejectUnauthorized: false });
    s.on("error", () => {});
    await new Promise((r) => s.once("secureConnect", r));
    s.write(randomBytes(4096));
    // Garbage where the handshake should be.
    let closed = false;
    const tcp = await Bun.connect({
      hostname: "127.0.0.1",
      port: srv.port,
      socket: {
        data() {},
        close() {
          closed = true;
        },
      },
    });
    tcp.write(randomBytes(2048));
    await waitFor("the server to drop the non-TLS client", () => closed, 5000);
    const r = await alice.run(["box", "list", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).map((b: { name: string }) => b.name)).toContain("web");
    s.destroy();
  });
});

function read(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
