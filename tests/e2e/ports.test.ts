// Ports of a process box reached from the host: a dev server started in the
// box (python3 -m http.server), forwarded by a spec and by --auto. A box
// chooses its port numbers, so --auto must not take the same numbers here
// (5432 stays the host's), must stop at its cap, and no forward may take a
// port something on this machine holds.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { makeHome, waitFor, type Home } from "../helpers.ts";

let h: Home;
/** Every `port forward` started here, ended in afterAll too so a failed test leaves no listener on this machine. */
const running: ReturnType<Home["spawn"]>[] = [];
function forwarding(args: string[]): ReturnType<Home["spawn"]> {
  const proc = h.spawn(["port", "forward", "p", ...args]);
  running.push(proc);
  return proc;
}
beforeAll(async () => {
  h = makeHome("hutch-pt-");
  expect((await h.run(["box", "create", "p", "--start"])).code).toBe(0);
  await h.run(["exec", "p", "--", "sh", "-c", "echo hello-from-box > /workspace/index.txt"]);
});
afterAll(async () => {
  for (const proc of running) proc.kill("SIGTERM");
  await Promise.all(running.map((proc) => proc.exited));
  await h.cleanup();
});

async function serve(port: number): Promise<void> {
  const cmd = `cd /workspace && (setsid python3 -m http.server ${port} --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > /tmp/http-${port}.pid)`;
  expect((await h.run(["exec", "p", "--", "sh", "-c", cmd])).code).toBe(0);
  await waitFor(`port ${port} listening`, async () =>
    JSON.parse((await h.run(["port", "list", "p", "--json"])).stdout).some((p: { port: number }) => p.port === port),
  );
}

async function fetchText(url: string): Promise<string | undefined> {
  return fetch(url)
    .then((r) => r.text())
    .catch(() => undefined);
}

/** Bare listeners in the box, one python process holding them all (0: any free port); returns their ports and a stop. */
async function listeners(ports: number[]): Promise<{ ports: number[]; stop(): Promise<void> }> {
  const tag = `l${Date.now()}`;
  const py = [
    "import socket, sys, time",
    "held = []",
    "for p in sys.argv[1:]:",
    "    s = socket.socket()",
    "    s.bind(('127.0.0.1', int(p)))",
    "    s.listen()",
    "    held.append(s)",
    "print(' '.join(str(s.getsockname()[1]) for s in held), flush=True)",
    "time.sleep(86400)",
  ].join("\n");
  const cmd = `cd /tmp && printf '%s' "$1" > ${tag}.py && shift && (setsid python3 ${tag}.py "$@" > ${tag}.out 2>&1 & echo $! > ${tag}.pid)`;
  expect((await h.run(["exec", "p", "--", "sh", "-c", cmd, "sh", py, ...ports.map(String)])).code).toBe(0);
  const got = await waitFor("the listeners", async () => {
    const out = (await h.run(["exec", "p", "--", "cat", `/tmp/${tag}.out`])).stdout.trim();
    return out ? out.split(" ").map(Number) : undefined;
  });
  await waitFor("them listed", async () => {
    const listed = JSON.parse((await h.run(["port", "list", "p", "--json"])).stdout).map((p: { port: number }) => p.port);
    return got.every((p) => listed.includes(p));
  });
  return {
    ports: got,
    stop: async () => {
      expect((await h.run(["exec", "p", "--", "sh", "-c", `kill $(cat /tmp/${tag}.pid)`])).code).toBe(0);
    },
  };
}

/** A listener on this machine's loopback (host "127.0.0.1" or "::1"), as a host service holding a port. */
async function holdHere(host: string, port = 0): Promise<{ port: number; server: Server; connections: () => number }> {
  let n = 0;
  const server = createServer((s) => {
    n++;
    s.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  return { port: typeof addr === "object" && addr ? addr.port : port, server, connections: () => n };
}

/** A port nothing on this machine's loopback holds, on IPv4 and IPv6 (so the box may take the same number). */
async function freeHere(): Promise<number> {
  for (;;) {
    const a = await holdHere("127.0.0.1");
    const b = await holdHere("::1", a.port).catch(() => undefined);
    a.server.close();
    b?.server.close();
    if (b) return a.port;
  }
}

/** The ports the OS hands out when asked for any (Linux: net.ipv4.ip_local_port_range). */
function ephemeralRange(): [number, number] {
  const [lo, hi] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
  return [lo ?? 32768, hi ?? 60999];
}

/** Reads NDJSON lines from a running `hutch port forward --json`. */
function lines(proc: ReturnType<Home["spawn"]>): {
  seen: Record<string, unknown>[];
  next(pred: (l: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
} {
  const seen: Record<string, unknown>[] = [];
  let buf = "";
  void (async () => {
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
      buf += new TextDecoder().decode(chunk);
      let nl = buf.indexOf("\n");
      while (nl >= 0) {
        seen.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
        nl = buf.indexOf("\n");
      }
    }
  })();
  return { seen, next: (pred) => waitFor("a forward line", () => seen.find(pred), 15000) };
}

/** Collects a running command's stderr as text. */
function stderrOf(proc: ReturnType<Home["spawn"]>): { text(): string } {
  let text = "";
  void (async () => {
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) text += new TextDecoder().decode(chunk);
  })();
  return { text: () => text };
}

describe("hutch port", () => {
  test("list shows the dev server, forward LOCAL:REMOTE reaches it from the host", async () => {
    await serve(8000);
    const list = JSON.parse((await h.run(["port", "list", "p", "--json"])).stdout);
    expect(list).toContainEqual({
      port: 8000,
      address: "127.0.0.1",
      family: "ipv4",
      process: { pid: expect.any(Number), name: "python3" },
    });
    const fwd = forwarding(["0:8000", "--json"]);
    const out = lines(fwd);
    const added = await out.next((l) => l.type === "forwarded");
    expect(added.remote).toBe(8000);
    expect(await fetchText(`http://127.0.0.1:${added.local}/index.txt`)).toBe("hello-from-box\n");
    fwd.kill("SIGTERM");
    await fwd.exited;
    expect(await fetchText(`http://127.0.0.1:${added.local}/index.txt`)).toBeUndefined();
  });

  test("--auto forwards a new listener and drops it when the server stops", async () => {
    const fwd = forwarding(["--auto", "--json"]);
    const out = lines(fwd);
    await serve(8123);
    const added = await out.next((l) => l.type === "forwarded" && l.remote === 8123);
    expect(await fetchText(`http://127.0.0.1:${added.local}/index.txt`)).toBe("hello-from-box\n");
    expect((await h.run(["exec", "p", "--", "sh", "-c", "kill $(cat /tmp/http-8123.pid)"])).code).toBe(0);
    await out.next((l) => l.type === "removed" && l.remote === 8123);
    expect(await fetchText(`http://127.0.0.1:${added.local}/index.txt`)).toBeUndefined();
    fwd.kill("SIGTERM");
    await fwd.exited;
  });

  test("--auto forwards 5432, 6379 and 3306 from free high ports here, not their own numbers", async () => {
    await serve(5432);
    const more = await listeners([6379, 3306]);
    // 5432 is free here, so the old rule (the same number when free) would have taken it.
    const here = await holdHere("127.0.0.1", 5432).catch(() => undefined);
    expect(here).toBeDefined();
    here?.server.close();
    const fwd = forwarding(["--auto", "--json"]);
    const out = lines(fwd);
    const [lo, hi] = ephemeralRange();
    for (const remote of [5432, 6379, 3306]) {
      const added = await out.next((l) => l.type === "forwarded" && l.remote === remote);
      expect(added.local).not.toBe(remote);
      expect(added.local).toBeGreaterThanOrEqual(lo);
      expect(added.local).toBeLessThanOrEqual(hi);
      expect(added.url).toBe(`http://127.0.0.1:${added.local}/`);
    }
    const pg = await out.next((l) => l.type === "forwarded" && l.remote === 5432);
    expect(await fetchText(`http://127.0.0.1:${pg.local}/index.txt`)).toBe("hello-from-box\n");
    expect(await fetchText("http://127.0.0.1:5432/index.txt")).toBeUndefined();
    fwd.kill("SIGTERM");
    await fwd.exited;
    // The human lines show the same mapping: the box's port, then the one here.
    const human = forwarding(["--auto"]);
    const err = stderrOf(human);
    const line = await waitFor("a human forward line", () => /forwarding p:5432 -> 127\.0\.0\.1:(\d+)\n/.exec(err.text()), 15000);
    expect(Number(line[1])).not.toBe(5432);
    human.kill("SIGTERM");
    await human.exited;
    await more.stop();
    expect((await h.run(["exec", "p", "--", "sh", "-c", "kill $(cat /tmp/http-5432.pid)"])).code).toBe(0);
  });

  test("--auto --same-port takes the box's number here only when nothing here holds it", async () => {
    const held4 = await holdHere("127.0.0.1");
    // A service on [::1] only: binding 127.0.0.1 beside it succeeds, and would shadow it for `localhost`.
    const held6 = await holdHere("::1");
    const free = await freeHere();
    const box = await listeners([held4.port, held6.port, free]);
    const fwd = forwarding(["--auto", "--same-port", "--json"]);
    const out = lines(fwd);
    const err = stderrOf(fwd);
    const same = await out.next((l) => l.type === "forwarded" && l.remote === free);
    expect(same.local).toBe(free);
    for (const held of [held4, held6]) {
      const f = await out.next((l) => l.type === "forwarded" && l.remote === held.port);
      expect(f.local).not.toBe(held.port);
      await waitFor("the refusal", () => err.text().includes(`127.0.0.1:${held.port} is taken`));
    }
    expect(err.text()).toContain(`[::1]:${held6.port}`);
    // The host's services are untouched: still theirs, and only our probes reached them.
    await new Promise<void>((resolve, reject) =>
      createServer()
        .once("error", (e: NodeJS.ErrnoException) => (e.code === "EADDRINUSE" ? resolve() : reject(e)))
        .listen(held4.port, "127.0.0.1", () => reject(new Error(`127.0.0.1:${held4.port} was free`))),
    );
    fwd.kill("SIGTERM");
    await fwd.exited;
    await box.stop();
    held4.server.close();
    held6.server.close();
  });

  test("--auto stops at its cap of 32 and says so once, naming the cap and the flag", async () => {
    const box = await listeners(Array.from({ length: 40 }, () => 0));
    const fwd = forwarding(["--auto", "--json"]);
    const out = lines(fwd);
    const err = stderrOf(fwd);
    await waitFor("the cap notice", () => err.text().includes("--max-forwards"), 30000);
    // A few more polls: nothing past the cap arrives, and the notice is not repeated.
    await Bun.sleep(3000);
    const added = out.seen.filter((l) => l.type === "forwarded");
    expect(added.length).toBe(32);
    expect(new Set(added.map((l) => l.remote)).size).toBe(32);
    expect(err.text()).toContain("32");
    expect(err.text().split("--max-forwards").length - 1).toBe(1);
    fwd.kill("SIGTERM");
    await fwd.exited;

    const few = forwarding(["--auto", "--max-forwards", "5", "--json"]);
    const fewOut = lines(few);
    const fewErr = stderrOf(few);
    await waitFor("the cap notice", () => fewErr.text().includes("--max-forwards"), 30000);
    await Bun.sleep(2000);
    expect(fewOut.seen.filter((l) => l.type === "forwarded").length).toBe(5);
    expect(fewErr.text()).toContain("cap of 5");
    few.kill("SIGTERM");
    await few.exited;
    await box.stop();
  });

  test("forward of a named port something here holds fails clearly, on 127.0.0.1 or [::1]", async () => {
    for (const host of ["127.0.0.1", "::1"]) {
      const held = await holdHere(host);
      const r = await h.run(["port", "forward", "p", String(held.port)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`127.0.0.1:${held.port} is taken`);
      expect(r.stderr).toContain(`hutch port forward p 0:${held.port}`);
      held.server.close();
    }
  });

  test("a bad spec is a usage error", async () => {
    const r = await h.run(["port", "forward", "p", "99999"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("[LOCAL:]REMOTE");
    const same = await h.run(["port", "forward", "p", "8000", "--same-port"]);
    expect(same.code).toBe(2);
    expect(same.stderr).toContain("--same-port is for --auto");
    const cap = await h.run(["port", "forward", "p", "--auto", "--max-forwards", "0"]);
    expect(cap.code).toBe(2);
    expect(cap.stderr).toContain("--max-forwards 0");
  });
});
