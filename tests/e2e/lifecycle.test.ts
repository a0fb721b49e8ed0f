import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, boxPids, makeHome, pidAlive, waitFor, type Home } from "../helpers.ts";

let h: Home;
beforeAll(() => {
  h = makeHome();
});
afterAll(() => h.cleanup());

async function box(name: string): Promise<{ id: string; state: string; desired: string; reason?: string }> {
  const r = await h.run(["box", "info", name, "--json"]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout);
}

function rowsFor(boxId: string): number {
  const db = new Database(join(h.home, "hutch.db"), { readonly: true });
  try {
    const a = db.query("SELECT count(*) AS n FROM boxes WHERE id = ?").get(boxId) as { n: number };
    const b = db.query("SELECT count(*) AS n FROM ops WHERE box_id = ?").get(boxId) as { n: number };
    return a.n + b.n;
  } finally {
    db.close();
  }
}

describe("box lifecycle", () => {
  test("create, list, info, stop, start; /workspace survives a restart", async () => {
    const c = await h.run(["box", "create", "life", "--json"]);
    expect(c.code).toBe(0);
    expect(JSON.parse(c.stdout)).toMatchObject({ name: "life", state: "stopped", engine: "process", isolation: "namespace" });
    const s = await h.run(["box", "start", "life"]);
    expect(s.code).toBe(0);
    expect((await box("life")).state).toBe("running");
    expect((await h.run(["exec", "life", "--", "sh", "-c", "echo kept > /workspace/note"])).code).toBe(0);
    expect((await h.run(["box", "stop", "life"])).code).toBe(0);
    const stopped = await box("life");
    expect(stopped.state).toBe("stopped");
    expect(boxPids(stopped.id)).toEqual([]);
    const e = await h.run(["exec", "life", "--", "true"]);
    expect(e.code).toBe(4);
    expect(e.stderr).toContain("hutch box start life");
    expect((await h.run(["box", "start", "life"])).code).toBe(0);
    expect((await h.run(["exec", "life", "--", "cat", "/workspace/note"])).stdout).toBe("kept\n");
  });

  test("the API socket is private to its user (0600)", () => {
    expect(statSync(join(h.home, "hutch.sock")).mode & 0o777).toBe(0o600);
  });

  test("SIGKILL of the daemon: the running box is found again, exec works, no duplicate", async () => {
    const before = await box("life");
    const pidsBefore = boxPids(before.id).sort();
    expect(pidsBefore.length).toBeGreaterThan(0);
    const daemon = h.daemonPid()!;
    process.kill(daemon, "SIGKILL");
    await waitFor("the daemon to die", () => !pidAlive(daemon));
    // Any verb starts a new daemon, which re-finds the box.
    const after = await box("life");
    expect(h.daemonPid()).not.toBe(daemon);
    expect(after.state).toBe("running");
    expect(after.id).toBe(before.id);
    const r = await h.run(["exec", "life", "--", "cat", "/workspace/note"]);
    expect(r.stdout).toBe("kept\n");
    // The same sandbox, not a second one.
    const bwrapsBefore = pidsBefore.filter((p) => existsSync(`/proc/${p}`));
    expect(bwrapsBefore).toEqual(pidsBefore);
  });

  test("an op interrupted by SIGKILL resumes when the daemon comes back", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-slow-"));
    const bin = join(dir, "guest");
    const build = Bun.spawnSync(["bun", "build", "--compile", join(ROOT, "tests/fixtures/faulty-guest.ts"), "--outfile", bin], {
      stderr: "pipe",
    });
    expect(build.exitCode).toBe(0);
    const slow = makeHome();
    Object.assign(slow.env, { HUTCH_GUEST_BIN: bin });
    try {
      // bad-slowhello answers its hello after 3 s: kill the daemon while the start op waits on it.
      const create = slow.spawn(["box", "create", "bad-slowhello", "--start"]);
      await waitFor("the daemon", () => slow.daemonPid());
      await waitFor("the box to be starting", async () => {
        const r = await slow.run(["box", "info", "bad-slowhello", "--json"]);
        return r.code === 0 && JSON.parse(r.stdout).state === "starting";
      });
      // Kill the client too, so nothing but the journal remembers the request.
      create.kill("SIGKILL");
      await create.exited;
      process.kill(slow.daemonPid()!, "SIGKILL");
      const db = new Database(join(slow.home, "hutch.db"), { readonly: true });
      const pending = db.query("SELECT kind, status FROM ops WHERE status = 'pending'").all();
      db.close();
      expect(pending).toEqual([{ kind: "create", status: "pending" }]);
      // The next daemon finishes the op: the box ends up running.
      // Given time: a CI run beside VM files under tcg took over the default 15 s (2026-12-04).
      const state = await waitFor(
        "the resumed op",
        async () => {
          const r = await slow.run(["box", "info", "bad-slowhello", "--json"]);
          const b = JSON.parse(r.stdout);
          return b.state === "running" ? b : null;
        },
        60_000,
      );
      expect(state.desired).toBe("running");
      const db2 = new Database(join(slow.home, "hutch.db"), { readonly: true });
      expect(db2.query("SELECT count(*) AS n FROM ops WHERE status = 'pending'").get()).toEqual({ n: 0 });
      db2.close();
    } finally {
      await slow.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  test("delete removes files, processes and rows, and verifies it", async () => {
    const b = await box("life");
    await h.run(["exec", "life", "--", "sh", "-c", "sleep 300 >/dev/null 2>&1 & sleep 300 >/dev/null 2>&1 & echo started"]);
    expect(boxPids(b.id).length).toBeGreaterThan(2);
    const d = await h.run(["box", "delete", "life", "--json"]);
    expect(d.code, d.stdout + d.stderr).toBe(0);
    expect(JSON.parse(d.stdout)).toEqual({ id: b.id, name: "life", deleted: true });
    expect(boxPids(b.id)).toEqual([]);
    expect(existsSync(join(h.home, "boxes", b.id))).toBe(false);
    expect(rowsFor(b.id)).toBe(0);
    const gone = await h.run(["box", "info", "life"]);
    expect(gone.code).toBe(4);
  });

  test("SIGTERM stops the daemon cleanly and leaves boxes running", async () => {
    expect((await h.run(["box", "create", "keep", "--start"])).code).toBe(0);
    const b = await box("keep");
    const daemon = h.daemonPid()!;
    process.kill(daemon, "SIGTERM");
    await waitFor("the daemon to exit", () => !pidAlive(daemon));
    expect(existsSync(join(h.home, "hutch.sock"))).toBe(false);
    expect(existsSync(join(h.home, "daemon.lock"))).toBe(false);
    expect(boxPids(b.id).length).toBeGreaterThan(0);
    expect((await h.run(["exec", "keep", "--", "echo", "back"])).stdout).toBe("back\n");
  });
});

describe("bad input", () => {
  test("an unknown box: exit 4 and the next command", async () => {
    const r = await h.run(["exec", "nope", "--", "true"]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('no box named "nope"');
    expect(r.stderr).toContain("next: list boxes: hutch box list");
    const j = await h.run(["box", "info", "nope", "--json"]);
    expect(j.code).toBe(4);
    expect(JSON.parse(j.stdout).error.code).toBe("not_found");
  });

  test("an invalid name is refused before anything is created", async () => {
    const r = await h.run(["box", "create", "Bad_Name"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("name");
    const list = await h.run(["box", "list", "--json"]);
    expect(JSON.parse(list.stdout).map((b: { name: string }) => b.name)).not.toContain("Bad_Name");
  });

  test("a name already taken: conflict with a hint", async () => {
    const r = await h.run(["box", "create", "keep"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('box "keep" already exists');
    expect(r.stderr).toContain("hutch box delete keep");
  });

  test("usage errors exit 2", async () => {
    const r = await h.run(["box", "frobnicate"]);
    expect(r.code).toBe(2);
    const n = await h.run(["exec", "keep"]);
    expect(n.code).toBe(2);
    expect(n.stderr).toContain("no command given");
  });

  test("malformed API bodies: 400 naming the field, nothing stored", async () => {
    const post = (body: string) =>
      fetch("http://hutch/v1/boxes", {
        method: "POST",
        unix: join(h.home, "hutch.sock"),
        headers: { "content-type": "application/json" },
        body,
      });
    const cases: [string, string][] = [
      [JSON.stringify({ name: 5 }), "box name"],
      [JSON.stringify({ name: "ok", engine: "vmware" }), "engine"],
      [JSON.stringify({ name: "ok", start: "yes" }), "start"],
      [JSON.stringify({}), "box name"],
    ];
    for (const [body, field] of cases) {
      const res = await post(body);
      expect(res.status).toBe(400);
      const j = (await res.json()) as { error: { code: string; message: string } };
      expect(j.error.code).toBe("invalid");
      expect(j.error.message.startsWith(field)).toBe(true);
    }
    const bad = await post("{not json");
    expect(bad.status).toBe(400);
    const list = await h.run(["box", "list", "--json"]);
    expect(JSON.parse(list.stdout).map((b: { name: string }) => b.name)).toEqual(["keep"]);
  });

  test("the API describes itself (OpenAPI)", async () => {
    const res = await fetch("http://hutch/openapi/json", { unix: join(h.home, "hutch.sock") });
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toContain("/v1/boxes/");
  });
});
