// Approvals end to end, through dist/hutch and a process box: a binding whose
// rule needs approval for POST /repos/*/issues, a recording TLS upstream on
// loopback standing in for the service (a fake: the real one is not reachable
// from here), curl in the box holding only the stub. The broker holds the
// request until `hutch approve` / `hutch deny`, sends exactly the approved
// bytes once with the real credential, refuses a request that differs from
// what was approved, and refuses the box deciding for itself. Then egress
// `ask`: a connection to an unlisted loopback host waits for a person.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeHome, waitFor, type Home } from "../helpers.ts";
import { makeTestCa, type TestCa } from "../fixtures/fake-model/ca.ts";
import { startRecordingUpstream, type RecordingUpstream } from "../fixtures/recording-upstream.ts";
import { ApprovalWatchLine, check, type Approval, type SessionEvent } from "../../shared/src/index.ts";

const SECRET = `ghp_real_${crypto.randomUUID()}`;
let h: Home;
let ca: TestCa;
let upstream: RecordingUpstream;
let session = "";
let tlsEcho: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  h = makeHome("hutch-apr-");
  ca = makeTestCa();
  upstream = startRecordingUpstream(ca);
  // An unlisted host for egress `ask`: plain TLS on loopback, reached by name through a pin.
  tlsEcho = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: ca.cert, key: ca.key },
    fetch: () => new Response("echo says hi\n"),
  });
  writeFileSync(
    join(h.home, "config.json"),
    JSON.stringify({
      bindings: {
        gh: {
          host: "localhost",
          port: upstream.port,
          address: "127.0.0.1",
          ca: ca.caFile,
          header: "Authorization",
          format: "Bearer {secret}",
          secret: "gh",
          methods: ["GET", "POST", "DELETE"],
          paths: ["/"],
          approve: ["POST /repos/*/issues", "DELETE *"],
          env: { GH_URL: "{url}", GH_TOKEN: "{stub}" },
        },
      },
      broker: { pins: { "echo.test": "127.0.0.1", "late.test": "127.0.0.1" } },
    }),
  );
  expect((await h.run(["secret", "set", "gh"], { stdin: SECRET })).code).toBe(0);
  const created = await h.run(["box", "create", "ap", "--start", "--secret", "gh"]);
  expect(created.code, created.stderr).toBe(0);
  const run = await h.run(["run", "ap", "--detach", "--json"]);
  expect(run.code, run.stderr).toBe(0);
  session = (JSON.parse(run.stdout) as { id: string }).id;
}, 120_000);

afterAll(async () => {
  await h.cleanup();
  upstream.stop();
  tlsEcho.stop(true);
  rmSync(ca.dir, { recursive: true, force: true });
});

/** curl in the box against the broker's gh endpoint with the box's stub; prints the body, then the status on its own line. */
function curl(method: string, path: string, body?: string, extra: string[] = []) {
  const script = `curl -sS -X ${method} -H "Authorization: Bearer $GH_TOKEN" ${extra.join(" ")} ${body !== undefined ? `--data-binary '${body}'` : ""} -w '\\n%{http_code}\\n' "$GH_URL${path}"`;
  return h.run(["exec", "ap", "--", "sh", "-c", script]);
}

async function pending(): Promise<Approval[]> {
  const r = await h.run(["approvals", "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Approval[];
}

/** The one pending approval that is not in `known`. */
const next = (known: Set<string> = new Set()) =>
  waitFor("an approval to be asked", async () => (await pending()).find((a) => !known.has(a.id)), 30_000);

async function log(): Promise<SessionEvent[]> {
  const r = await h.run(["session", "log", session, "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as SessionEvent);
}

describe("credentialed requests", () => {
  test("a request a rule names waits; hutch approve sends it once, with the real credential", async () => {
    const before = upstream.requests.length;
    const request = curl("POST", "/repos/o/r/issues", '{"title":"one"}', ["-H 'content-type: application/json'"]);
    const a = await next();
    expect(a).toMatchObject({ kind: "credential", boxName: "ap", session, state: "pending" });
    expect(a.summary).toContain("POST /repos/o/r/issues");
    // Nothing went out while it waited.
    expect(upstream.requests.length).toBe(before);
    const human = await h.run(["approvals"]);
    expect(human.stdout).toContain(a.id);
    expect(human.stdout).toContain("POST /repos/o/r/issues");
    const ok = await h.run(["approve", a.id, "--json"]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ id: a.id, state: "allow_once" });
    const r = await request;
    expect(r.stdout.trim().split("\n").at(-1)).toBe("200");
    expect(r.stdout).toContain("recorded /repos/o/r/issues");
    const sent = upstream.requests.slice(before);
    expect(sent.length).toBe(1);
    expect(sent[0]).toMatchObject({ method: "POST", target: "/repos/o/r/issues", body: '{"title":"one"}' });
    expect(sent[0]!.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(sent[0]!.headers["x-hutch-approval"]).toBeUndefined();
    // Used once: the same request again asks again.
    const again = curl("POST", "/repos/o/r/issues", '{"title":"one"}', ["-H 'content-type: application/json'"]);
    const b = await next(new Set([a.id]));
    expect(b.id).not.toBe(a.id);
    expect((await h.run(["deny", b.id])).code).toBe(0);
    expect((await again).stdout.trim().split("\n").at(-1)).toBe("403");
    expect(upstream.requests.length).toBe(before + 1);
  }, 90_000);

  test("hutch deny gives the box a 403 with the reason, and the upstream sees nothing", async () => {
    const before = upstream.requests.length;
    const request = curl("DELETE", "/repos/o/r");
    const a = await next();
    const no = await h.run(["deny", a.id, "--reason", "not this repo"]);
    expect(no.code, no.stderr).toBe(0);
    expect(no.stdout).toContain("reject once");
    const r = await request;
    expect(r.stdout.trim().split("\n").at(-1)).toBe("403");
    expect(r.stdout).toContain("not this repo");
    expect(r.stdout).toContain(a.id);
    expect(upstream.requests.length).toBe(before);
  }, 90_000);

  test("a request whose body differs from the approved digest is refused; the approved bytes go once", async () => {
    const before = upstream.requests.length;
    // The box's client gives up while it waits; the approval stays pending and is decided afterwards.
    const gaveUp = await curl("POST", "/repos/o/r/issues", '{"title":"two"}', ["--max-time 3"]);
    expect(gaveUp.code).not.toBe(0);
    const a = await next();
    expect((await h.run(["approve", a.id])).code).toBe(0);
    const differs = await curl("POST", "/repos/o/r/issues", '{"title":"TWO"}', [`-H 'x-hutch-approval: ${a.id}'`]);
    expect(differs.stdout.trim().split("\n").at(-1)).toBe("403");
    expect(differs.stdout).toContain("differs from what approval");
    expect(upstream.requests.length).toBe(before);
    const same = await curl("POST", "/repos/o/r/issues", '{"title":"two"}', [`-H 'x-hutch-approval: ${a.id}'`]);
    expect(same.stdout.trim().split("\n").at(-1)).toBe("200");
    expect(upstream.requests.slice(before).map((r) => r.body)).toEqual(['{"title":"two"}']);
    const twice = await curl("POST", "/repos/o/r/issues", '{"title":"two"}', [`-H 'x-hutch-approval: ${a.id}'`]);
    expect(twice.stdout.trim().split("\n").at(-1)).toBe("403");
    expect(twice.stdout).toContain("used already");
    expect(upstream.requests.length).toBe(before + 1);
  }, 90_000);

  test("an approval sent through the box's own connection is refused and logged; it stays pending", async () => {
    const request = curl("POST", "/repos/o/r/issues", '{"title":"self"}');
    const a = await next();
    const self = await h.run([
      "exec",
      "ap",
      "--",
      "sh",
      "-c",
      `curl -sS -X POST -w '\\n%{http_code}\\n' --data-binary '{"decision":"allow_always"}' http://127.0.0.1:3128/approvals/${a.id}`,
    ]);
    expect(self.stdout.trim().split("\n").at(-1)).toBe("403");
    expect(self.stdout).toContain("a box cannot decide its own approvals");
    expect((await pending()).map((p) => p.id)).toContain(a.id);
    expect((await h.run(["deny", a.id, "--reason", "no self-service"])).code).toBe(0);
    expect((await request).stdout).toContain("no self-service");
    const events = await log();
    const refused = events.filter((e) => e.kind === "approval.refused");
    expect(refused.map((e) => [(e.data as { id: string }).id, e.actor.kind])).toEqual([[a.id, "agent"]]);
  }, 90_000);

  test("approvals --watch --json prints a line as one is asked and one as it is decided (what the VS Code extension reads)", async () => {
    const watch = h.spawn(["approvals", "--watch", "--json"]);
    const lines: unknown[] = [];
    void (async () => {
      const decoder = new TextDecoder();
      let buf = "";
      for await (const chunk of watch.stdout as ReadableStream<Uint8Array>) {
        buf += decoder.decode(chunk);
        for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
          lines.push(JSON.parse(buf.slice(0, nl)));
          buf = buf.slice(nl + 1);
        }
      }
    })();
    try {
      const request = curl("POST", "/repos/o/r/issues", '{"title":"watched"}');
      const a = await next();
      await waitFor("the pending line", () => lines.length >= 1, 10_000);
      expect((await h.run(["deny", a.id, "--reason", "watched"])).code).toBe(0);
      await request;
      await waitFor("the done line", () => lines.length >= 2, 10_000);
      for (const l of lines) expect(check(ApprovalWatchLine, l)).toBe(true);
      expect(lines).toMatchObject([
        { type: "pending", approval: { id: a.id, state: "pending" } },
        { type: "done", id: a.id, approval: { state: "reject_once", reason: "watched" } },
      ]);
    } finally {
      watch.kill();
    }
  }, 90_000);

  test("the log holds each request and each decision exactly once, with who decided", async () => {
    const events = await log();
    const asked = events.filter((e) => e.kind === "approval.requested").map((e) => (e.data as { id: string }).id);
    const decided = events.filter((e) => e.kind === "approval.decided");
    // Two in the first test, then one for each of the other four.
    expect(asked.length).toBe(6);
    expect(new Set(asked).size).toBe(asked.length);
    expect(decided.map((e) => (e.data as { id: string }).id).sort()).toEqual([...asked].sort());
    for (const d of decided) expect(d.actor).toMatchObject({ kind: "user" });
    expect(JSON.stringify(events)).not.toContain(SECRET);
  });
});

describe("egress ask", () => {
  /** curl in the box through the broker's CONNECT to a host on loopback (the certificate is the test CA's: -k, the tunnel is what is tested). */
  const fetchIn = (host: string) =>
    h.run(["exec", "ap", "--", "sh", "-c", `curl -sS -k --max-time 60 https://${host}:${tlsEcho.port}/ 2>&1; echo "exit=$?"`]);

  test("a connection to an unlisted host waits; allow_once lets that one through and the next asks again", async () => {
    const set = await h.run(["box", "policy", "ap", "--unlisted", "ask", "--json"]);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ unlisted: "ask" });
    const first = fetchIn("echo.test");
    const a = await next();
    expect(a).toMatchObject({ kind: "egress", target: `echo.test:${tlsEcho.port}` });
    expect(a.summary).toContain(`echo.test:${tlsEcho.port}`);
    expect((await h.run(["approve", a.id])).code).toBe(0);
    const r = await first;
    expect(r.stdout).toContain("echo says hi");
    expect(r.stdout).toContain("exit=0");
    const second = fetchIn("echo.test");
    const b = await next(new Set([a.id]));
    expect((await h.run(["deny", b.id, "--reason", "enough"])).code).toBe(0);
    const refused = await second;
    expect(refused.stdout).not.toContain("echo says hi");
    expect(refused.stdout).toContain("403");
    const policy = JSON.parse((await h.run(["box", "policy", "ap", "--json"])).stdout) as { allow: string[] };
    expect(policy.allow).not.toContain(`echo.test:${tlsEcho.port}`);
  }, 90_000);

  test("allow_always adds the host to box policy, and the next connection goes without asking", async () => {
    const first = fetchIn("echo.test");
    const a = await next();
    expect((await h.run(["approve", a.id, "--always"])).code).toBe(0);
    expect((await first).stdout).toContain("echo says hi");
    const policy = JSON.parse((await h.run(["box", "policy", "ap", "--json"])).stdout) as { allow: string[] };
    expect(policy.allow).toContain(`echo.test:${tlsEcho.port}`);
    const again = await fetchIn("echo.test");
    expect(again.stdout).toContain("echo says hi");
    expect(await pending()).toEqual([]);
  }, 90_000);

  test("an approval nobody answers expires (the box's own wait), and the connection is refused with a clear message", async () => {
    expect((await h.run(["box", "policy", "ap", "--approval-timeout", "2s"])).code).toBe(0);
    const r = await fetchIn("late.test");
    expect(r.stdout).toContain("403");
    expect(r.stdout).not.toContain("exit=0");
    const denied = JSON.parse((await h.run(["box", "egress", "ap", "--json"])).stdout) as { host: string; reason?: string }[];
    const last = denied.filter((d) => d.host === "late.test").at(-1);
    expect(last?.reason).toMatch(/approval apr_[0-9a-z]{20} expired: nobody answered in time; ask the user to watch hutch approvals/);
    const expired = (await log()).filter((e) => e.kind === "approval.decided" && (e.data as { decision: string }).decision === "expired");
    expect(expired.map((e) => e.actor.kind)).toEqual(["system"]);
  }, 90_000);
});

describe("a daemon SIGKILL between request and decision", () => {
  test("the pending approval survives the restart and can still be decided; the box's retry sends it once; each is logged once", async () => {
    // Back to a wait longer than the restart (the expiry test above made it 2 s).
    expect((await h.run(["box", "policy", "ap", "--approval-timeout", "10m"])).code).toBe(0);
    const before = upstream.requests.length;
    const held = curl("POST", "/repos/o/r/issues", '{"title":"kill"}');
    const a = await next();
    const pid = h.daemonPid();
    if (!pid) throw new Error("no daemon");
    process.kill(pid, "SIGKILL");
    await waitFor("the daemon to die", () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    });
    // The held request went with the daemon's connections; nothing was sent.
    await held;
    expect(upstream.requests.length).toBe(before);
    // The next command starts a daemon, which finds the approval in the session log.
    const after = await pending();
    expect(after.map((p) => p.id)).toEqual([a.id]);
    expect((await h.run(["approve", a.id])).code).toBe(0);
    const retry = await waitFor(
      "the box's broker to be back",
      async () => {
        const r = await curl("POST", "/repos/o/r/issues", '{"title":"kill"}');
        return r.stdout.trim().split("\n").at(-1) === "200" ? r : null;
      },
      60_000,
    );
    expect(retry.stdout).toContain("recorded /repos/o/r/issues");
    expect(upstream.requests.slice(before).map((r) => [r.body, r.headers.authorization])).toEqual([
      ['{"title":"kill"}', `Bearer ${SECRET}`],
    ]);
    const events = await log();
    const mine = events.filter((e) => e.kind.startsWith("approval.") && (e.data as { id: string }).id === a.id);
    expect(mine.map((e) => [e.kind, e.actor.kind])).toEqual([
      ["approval.requested", "system"],
      ["approval.decided", "user"],
    ]);
  }, 120_000);
});
