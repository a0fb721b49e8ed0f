// The broker end to end: a real Claude Code CLI, installed from npm
// inside a box through the broker's CONNECT gate, completes a turn against the
// fake Anthropic API (TLS on loopback, its CA trusted by the broker alone)
// holding only a stub; the fake sees the real secret; then the secret is
// searched for everywhere it must not be, with positive controls.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeHome, type Home } from "../helpers.ts";
import { startFakeModel, type FakeModel } from "../fixtures/fake-model/index.ts";
import { fakeBindings } from "../agent-turns.ts";

/** The version the field notes measured; pinned so the test does not drift with npm's latest. */
const CLAUDE = "@anthropic-ai/claude-code@2.1.332";
const SECRET = `sk-ant-api03-${crypto.randomUUID()}-${crypto.randomUUID()}`;
let h: Home;
let fake: FakeModel;
let session = "";

beforeAll(async () => {
  h = makeHome("hutch-brk-");
  fake = await startFakeModel();
  // The user's layer: the anthropic binding pointed at the fake (pinned to loopback, its CA the only one trusted).
  writeFileSync(
    join(h.home, "config.json"),
    JSON.stringify({
      bindings: { anthropic: fakeBindings(fake).bindings.anthropic },
    }),
  );
  const set = await h.run(["secret", "set", "anthropic"], { stdin: SECRET });
  expect(set.stderr).toBe("");
  expect(set.code).toBe(0);
  const created = await h.run(["box", "create", "cc", "--start", "--allow", "registry.npmjs.org", "--secret", "anthropic"]);
  expect(created.stderr).toBe("");
  const run = await h.run(["run", "cc", "--detach", "--json"]);
  expect(run.code).toBe(0);
  session = (JSON.parse(run.stdout) as { id: string }).id;
}, 120_000);

afterAll(async () => {
  await h.cleanup();
  await fake.stop();
});

test("secret list shows names and bindings, never the value", async () => {
  const r = await h.run(["secret", "list", "--json"]);
  expect(JSON.parse(r.stdout)).toMatchObject([{ name: "anthropic", bindings: ["anthropic"] }]);
  expect(r.stdout).not.toContain(SECRET);
});

test("the box has no credential: only the stub and the broker's endpoint", async () => {
  const r = await h.run(["exec", "cc", "--", "sh", "-c", "echo $ANTHROPIC_BASE_URL; echo $ANTHROPIC_API_KEY; echo $HTTPS_PROXY"]);
  const [url, key, proxy] = r.stdout.trim().split("\n");
  expect(url).toBe("http://127.0.0.1:3128/anthropic");
  expect(key).toStartWith("hutch-stub-anthropic-");
  expect(proxy).toBe("http://127.0.0.1:3128");
});

test("Claude Code, installed through the gate, completes a turn holding only the stub; the fake sees the real secret", async () => {
  const install = await h.run(["exec", "cc", "--", "npm", "install", "--no-audit", "--no-fund", "--prefix", "/home/hutch/.cc", CLAUDE]);
  expect(install.code, install.stderr).toBe(0);
  fake.reset();
  const r = await h.run([
    "exec",
    "cc",
    "--env",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
    "--env",
    "CLAUDE_CODE_MAX_RETRIES=0",
    "--",
    "/home/hutch/.cc/node_modules/.bin/claude",
    "-p",
    "create hello.txt containing hi",
    "--output-format",
    "stream-json",
    "--verbose",
    "--dangerously-skip-permissions",
  ]);
  expect(r.code, r.stderr + r.stdout.slice(-2000)).toBe(0);
  const records = r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { type: string; subtype?: string });
  expect(records.at(-1)).toMatchObject({ type: "result", subtype: "success" });
  const file = await h.run(["exec", "cc", "--", "cat", "/workspace/hello.txt"]);
  expect(file.stdout.trim()).toBe("hi");

  const calls = fake.modelCalls("anthropic");
  expect(calls.length).toBeGreaterThanOrEqual(2);
  for (const c of calls) expect(c.headers["x-api-key"]).toBe(SECRET);
  expect(JSON.stringify(fake.requests)).not.toContain("hutch-stub-");
}, 240_000);

test("the secret is nowhere: guest files, every guest process's environ, the session log, the daemon log, the database (positive controls found)", async () => {
  // The value reaches the box only on stdin, as the control a planted file and a planted environment carry.
  const search = [
    "read -r P",
    "printf '%s' \"$P\" > /workspace/.planted-control",
    'env CONTROL="$P" sleep 30 & CTRL=$!',
    "sleep 0.2",
    'grep -rlaF -e "$P" /workspace /home/hutch /tmp /run 2>/dev/null',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell script; sh expands it
    'for e in /proc/[0-9]*/environ; do grep -qaF -e "$P" "$e" 2>/dev/null && echo "environ:$(cat ${e%/environ}/comm 2>/dev/null || echo ?)"; done',
    "kill $CTRL; rm /workspace/.planted-control; true",
  ].join("\n");
  const r = await h.run(["exec", "cc", "--", "sh", "-c", search], { stdin: `${SECRET}\n` });
  const hits = r.stdout.trim().split("\n").filter(Boolean);
  // Exactly the controls: the planted file and the planted process; nothing Claude, npm or the guest wrote.
  expect(hits.sort()).toEqual(["/workspace/.planted-control", "environ:sleep"]);

  const log = await h.run(["session", "log", session, "--json"]);
  expect(log.code).toBe(0);
  expect(log.stdout).toContain("egress.injected");
  expect(log.stdout).toContain("egress.allowed");
  expect(log.stdout).not.toContain(SECRET);

  const daemonLog = readFileSync(join(h.home, "daemon.log"), "utf8");
  expect(daemonLog).toContain("secret set");
  expect(daemonLog).not.toContain(SECRET);

  // The database files as bytes (WAL included): the sealed column is ciphertext, so no plaintext anywhere.
  for (const f of readdirSync(h.home).filter((n) => n.startsWith("hutch.db"))) {
    expect(readFileSync(join(h.home, f)).includes(Buffer.from(SECRET))).toBe(false);
  }
  const planted = Buffer.from(`x${SECRET}x`);
  expect(planted.includes(Buffer.from(SECRET))).toBe(true);
}, 60_000);

test("box egress shows what was denied, so the user can allow it", async () => {
  await h.run(["exec", "cc", "--", "curl", "-sS", "https://example.org/"]);
  const r = await h.run(["box", "egress", "cc", "--json"]);
  const denied = JSON.parse(r.stdout) as { host: string; reason: string }[];
  expect(denied.some((d) => d.host === "example.org" && d.reason.includes("hutch box policy BOX --allow example.org"))).toBe(true);
  const human = await h.run(["box", "egress", "cc"]);
  expect(human.stdout).toContain("example.org");
});
