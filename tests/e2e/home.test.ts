// $HUTCH_HOME is one user's alone: an open or foreign home is refused with the
// fix, and after real use (a box started and exec'd, a session, a secret) every
// directory in a fresh home is 0700 and every file 0600.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { HUTCH, makeHome, pidAlive, waitFor, type Home } from "../helpers.ts";

const homes: Home[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const h of homes) await h.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A home of this test's own making, with the mode it is given. */
function rawHome(mode: number): string {
  const home = mkdtempSync(join(tmpdir(), "hutch-home-"));
  dirs.push(home);
  chmodSync(home, mode);
  return home;
}

async function hutch(home: string, args: string[]) {
  const proc = Bun.spawn([HUTCH, ...args], { env: { ...process.env, HUTCH_HOME: home }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/**
 * What in the home is looser than owner-only, walked without following links or
 * crossing mounts. Exceptions the sandbox work owns: the guest binary (boxes run
 * it; it must only not be writable by others) and the agents cache.
 */
function looseEntries(home: string): string[] {
  const loose: string[] = [];
  const dev = lstatSync(home).dev;
  const walk = (path: string) => {
    const rel = relative(home, path);
    if (rel === "agents" || rel.startsWith("agents/")) return;
    const st = lstatSync(path);
    if (st.dev !== dev) return;
    const mode = st.mode & 0o7777;
    const show = `${rel || "."} ${mode.toString(8)}`;
    if (st.isDirectory()) {
      if (mode !== 0o700) loose.push(`dir ${show}`);
      for (const e of readdirSync(path)) walk(join(path, e));
    } else if (/^guest\/[^/]+\/hutch-guest$/.test(rel)) {
      if (mode & 0o022) loose.push(`guest binary writable by others: ${show}`);
    } else if (st.isFile()) {
      if (mode !== 0o600) loose.push(`file ${show}`);
    } else if (st.isSocket()) {
      // The daemon's sockets are 0600; a box's channel socket is made by its guest (or QEMU) under the mask: owner-only.
      if (mode & 0o077 || ((rel === "hutch.sock" || rel.endsWith("/broker.sock")) && mode !== 0o600)) loose.push(`socket ${show}`);
    }
  };
  walk(home);
  return loose;
}

describe("$HUTCH_HOME", () => {
  test("a home open to others is refused with the chmod that fixes it, and nothing is written into it", async () => {
    const home = rawHome(0o755);
    const r = await hutch(home, ["box", "list"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`is open to other users (mode 755)`);
    expect(r.stderr).toContain(`next: restrict it: chmod 700 ${home}\n`);
    expect(readdirSync(home)).toEqual([]);

    const j = await hutch(home, ["box", "list", "--json"]);
    expect(j.code).toBe(3);
    expect(JSON.parse(j.stdout).error).toMatchObject({ code: "config", hint: `restrict it: chmod 700 ${home}` });

    // Group read alone is enough to refuse; the daemon itself refuses too, before it writes anything.
    chmodSync(home, 0o740);
    const d = await hutch(home, ["daemon"]);
    expect(d.code).toBe(3);
    expect(d.stderr).toContain(`chmod 700 ${home}`);
    expect(readdirSync(home)).toEqual([]);

    chmodSync(home, 0o700);
    const ok = await hutch(home, ["box", "list"]);
    expect(ok.code).toBe(0);
    const pid = Number((await Bun.file(join(home, "daemon.lock")).text()).split(" ")[0]);
    process.kill(pid, "SIGTERM");
    await waitFor("the daemon to stop", () => !pidAlive(pid));
  });

  test.skipIf(process.getuid?.() !== 0)("a home another user owns is refused (run as root: chown the home away)", async () => {
    const home = rawHome(0o700);
    chownSync(home, 65534, 65534);
    const r = await hutch(home, ["box", "list"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("belongs to uid 65534, not to you (uid 0)");
    expect(r.stderr).toContain(`sudo chown -R "$(id -un)" ${home}`);
    expect(readdirSync(home)).toEqual([]);
  });

  test("after a box, an exec, a session and a secret, every directory is 0700 and every file 0600", async () => {
    const h = makeHome("hutch-perm-");
    homes.push(h);
    // As a user with the common umask runs it: the daemon must not depend on the caller's mask.
    const umask = process.umask(0o022);
    try {
      expect((await h.run(["box", "create", "p", "--start"])).code).toBe(0);
      expect((await h.run(["exec", "p", "--", "sh", "-c", "echo made in the box > /workspace/made && mkdir /workspace/d"])).code).toBe(0);
      const s = await h.run(["run", "p", "--detach", "--label", "perm"]);
      expect(s.code).toBe(0);
      expect((await h.run(["secret", "set", "perm-secret"], { stdin: "value\n" })).code).toBe(0);
      const sid = s.stdout.trim();
      await waitFor("the session's terminal output in the log", async () =>
        (await h.run(["session", "log", sid, "--json"])).stdout.includes("output.appended"),
      );
    } finally {
      process.umask(umask);
    }
    expect(readdirSync(h.home)).toEqual(
      expect.arrayContaining(["hutch.db", "hutch.db-wal", "hutch.db-shm", "hutch.sock", "daemon.log", "keys", "boxes", "guest"]),
    );
    expect(looseEntries(h.home)).toEqual([]);
  });

  test("a home from an older hutch gets the daemon's own files and directories tightened at start", async () => {
    const h = makeHome("hutch-old-");
    homes.push(h);
    expect((await h.run(["box", "create", "old"])).code).toBe(0);
    const pid = h.daemonPid()!;
    process.kill(pid, "SIGTERM");
    await waitFor("the daemon to stop", () => !pidAlive(pid));
    // What earlier versions left: a 0644 database and log, 0755 box and image directories.
    const [boxDir] = readdirSync(join(h.home, "boxes"));
    for (const f of readdirSync(h.home).filter((n) => n.startsWith("hutch.db") || n === "daemon.log")) chmodSync(join(h.home, f), 0o644);
    mkdirSync(join(h.home, "images", "base"), { recursive: true });
    for (const d of ["boxes", `boxes/${boxDir}`, "images", "images/base"]) chmodSync(join(h.home, d), 0o755);
    expect(looseEntries(h.home).length).toBeGreaterThanOrEqual(6);
    expect((await h.run(["box", "list"])).code).toBe(0);
    expect(looseEntries(h.home)).toEqual([]);
  });

  test("a daemon that refuses its configuration while the CLI starts it is reported as config (exit 3), in its own words", async () => {
    const h = makeHome("hutch-key-");
    homes.push(h);
    expect((await h.run(["box", "list"])).code).toBe(0);
    const pid = h.daemonPid()!;
    process.kill(pid, "SIGTERM");
    await waitFor("the daemon to stop", () => !pidAlive(pid));
    chmodSync(join(h.home, "keys", "secrets.key"), 0o644);
    const r = await h.run(["box", "list"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`restrict it: chmod 600 ${join(h.home, "keys", "secrets.key")}`);
    chmodSync(join(h.home, "keys", "secrets.key"), 0o600);
  });
});
