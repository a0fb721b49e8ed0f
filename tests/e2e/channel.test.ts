// The guest channel of a process box cannot be taken over: a box process
// cannot reach where the socket lives, and a daemon that finds someone else
// listening there (after a restart) refuses to talk to it (SO_PEERCRED).
// And a box sees the host's /opt only when the daemon's operator asks.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeHome, pidAlive, waitFor, type Home } from "../helpers.ts";

let h: Home;
beforeAll(() => {
  h = makeHome();
  // A daemon that connected to an impostor would wait this long for its hello before failing the box.
  h.env.HUTCH_HELLO_TIMEOUT_MS = "4000";
});
afterAll(() => h.cleanup());

async function info(home: Home, name: string): Promise<{ id: string; state: string; reason?: string }> {
  const r = await home.run(["box", "info", name, "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

async function restartDaemon(home: Home): Promise<void> {
  const pid = home.daemonPid()!;
  process.kill(pid, "SIGKILL");
  await waitFor("the daemon to die", () => !pidAlive(pid));
}

// What the red team ran in the box: move the guest's socket aside and listen in its place.
const IMPOSTOR = `
import os, socket, sys
path = "/run/hutch/agent.sock"
log = open("/tmp/impostor.log", "a", buffering=1)
try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
except OSError as e:
    log.write("mkdir: %s\\n" % e.strerror)
try:
    os.rename(path, path + ".real")
    log.write("renamed\\n")
except OSError as e:
    log.write("rename: %s\\n" % e.strerror)
s = socket.socket(socket.AF_UNIX)
try:
    s.bind(path)
    s.listen(8)
except OSError as e:
    log.write("bind: %s\\n" % e.strerror)
    sys.exit(0)
log.write("listening\\n")
while True:
    c, _ = s.accept()
    log.write("connection\\n")
    log.write("got %d bytes\\n" % len(c.recv(65536)))
`;

describe("the guest channel of a process box", () => {
  test("a box process cannot rename or replace the channel socket: after a daemon restart the real guest answers", async () => {
    expect((await h.run(["box", "create", "chan", "--start"])).code).toBe(0);
    expect((await h.run(["exec", "chan", "--", "sh", "-c", "cat > /tmp/impostor.py"], { stdin: IMPOSTOR })).code).toBe(0);
    const started = await h.run(["exec", "chan", "--", "sh", "-c", "setsid python3 /tmp/impostor.py </dev/null >/dev/null 2>&1 &"]);
    expect(started.code, started.stderr).toBe(0);
    const tried = await waitFor("the impostor to try", async () => {
      const r = await h.run(["exec", "chan", "--", "cat", "/tmp/impostor.log"]);
      return /listening|bind:/.test(r.stdout) ? r.stdout : null;
    });
    // Nothing of the channel is in the box's view: no socket to move, no directory to listen in.
    expect(tried).toContain("rename: No such file or directory");
    expect(tried).not.toContain("renamed");
    // Nor through the guest's own descriptors (it is not dumpable).
    const fds = await h.run(["exec", "chan", "--", "ls", "/proc/1/fd/"]);
    expect(fds.code).not.toBe(0);

    await restartDaemon(h);
    const after = await info(h, "chan");
    expect(after.state, after.reason).toBe("running");
    expect((await h.run(["exec", "chan", "--", "echo", "still mine"])).stdout).toBe("still mine\n");
    const log = await h.run(["exec", "chan", "--", "cat", "/tmp/impostor.log"]);
    expect(log.stdout).not.toContain("connection");
  });

  test("a socket someone else put in the guest's place is refused after a daemon restart (SO_PEERCRED)", async () => {
    const box = await info(h, "chan");
    const run = join(h.home, "boxes", box.id, existsSync(join(h.home, "boxes", box.id, "disk.img")) ? "disk/run" : "run");
    const socket = join(run, "agent.sock");
    expect(existsSync(socket)).toBe(true);
    // The box's user cannot do this (above); a process on the host stands in for it, so the daemon's own check is what is tested.
    renameSync(socket, join(run, "real.sock"));
    const received: number[] = [];
    let connections = 0;
    const impostor = Bun.listen({
      unix: socket,
      socket: {
        open() {
          connections++;
        },
        data(_s, d) {
          received.push(d.length);
        },
      },
    });
    try {
      await restartDaemon(h);
      const failed = await waitFor("the box to be failed", async () => {
        const b = await info(h, "chan");
        return b.state === "failed" ? b : null;
      });
      expect(failed.reason).toContain(`is held by pid ${process.pid}`);
      expect(failed.reason).toContain("not by the box's guest");
      // Not one byte of the host's hello (or anything after it) reached the impostor.
      expect(connections).toBe(1);
      expect(received).toEqual([]);
      const daemonLog = readFileSync(join(h.home, "daemon.log"), "utf8");
      expect(daemonLog).toContain(`refusing a channel peer that is not the box's guest`);
      expect(daemonLog).toContain(`seen=${process.pid}`);
    } finally {
      impostor.stop(true);
    }
  });

  test("a box started before the pidfile named its guest is still checked, and found, after a restart", async () => {
    expect((await h.run(["box", "start", "chan"])).code).toBe(0);
    const box = await info(h, "chan");
    const pidfile = join(h.home, "boxes", box.id, "box.pid");
    const { pid, startTime, guest } = JSON.parse(readFileSync(pidfile, "utf8"));
    expect(typeof guest).toBe("number");
    writeFileSync(pidfile, JSON.stringify({ pid, startTime }));
    await restartDaemon(h);
    const after = await info(h, "chan");
    expect(after.state, after.reason).toBe("running");
    expect((await h.run(["exec", "chan", "--", "true"])).code).toBe(0);
  });
});

describe("the host's /opt", () => {
  const hostOpt = readdirSync("/opt");

  test("a default box does not see it", async () => {
    const r = await h.run(["exec", "chan", "--", "ls", "/opt"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("No such file or directory");
  });

  test("with HUTCH_BOX_HOST_DIRS=/opt a box sees it read-only", async () => {
    const opt = makeHome();
    opt.env.HUTCH_BOX_HOST_DIRS = "/opt";
    try {
      expect((await opt.run(["box", "create", "withopt", "--start"])).code).toBe(0);
      const ls = await opt.run(["exec", "withopt", "--", "ls", "-1", "/opt"]);
      expect(ls.code, ls.stderr).toBe(0);
      expect(ls.stdout.split("\n").filter(Boolean).sort()).toEqual([...hostOpt].sort());
      const write = await opt.run(["exec", "withopt", "--", "touch", "/opt/written-by-a-box"]);
      expect(write.code).not.toBe(0);
      expect(existsSync("/opt/written-by-a-box")).toBe(false);
    } finally {
      await opt.cleanup();
    }
  });
});
