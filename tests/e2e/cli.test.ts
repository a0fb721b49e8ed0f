import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeHome, opOutput, type Home } from "../helpers.ts";

type Doctor = { ok: boolean; checks: { name: string; ok: boolean; detail: string; fix?: string }[] };

let h: Home;
beforeAll(() => {
  h = makeHome();
});
afterAll(() => h.cleanup());

describe("cli conventions", () => {
  test("--version prints the version", async () => {
    const r = await h.run(["--version"]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  test("completion prints a bash completion script", async () => {
    const r = await h.run(["completion"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("complete -o");
    expect(r.stdout).toContain("hutch");
  });

  test("doctor boots a throwaway box to prove the process engine, and cleans up", async () => {
    const r = await h.run(["doctor", "--json"]);
    expect(r.code).toBe(0);
    const { lines, result: doc } = opOutput<Doctor>(r.stdout);
    expect(doc.ok).toBe(true);
    const proc = doc.checks.find((c) => c.name === "process engine")!;
    expect(proc.ok).toBe(true);
    expect(proc.detail).toContain("started a box");
    // Whatever this host lacks (here, at least a VM image in a fresh home), each gap is named with its fix.
    const qemu = doc.checks.find((c) => c.name === "qemu engine");
    expect(qemu).toBeDefined();
    const gaps = doc.checks.filter((c) => !c.ok);
    for (const g of gaps) expect(g.fix, g.name).toBeTruthy();
    // Streamed: each check came as its own line, after the step that found it, before the report.
    const checks = lines.filter((l) => l.type === "check").map((l) => (l.check as { name: string }).name);
    expect(checks).toEqual(doc.checks.map((c) => c.name));
    expect(lines.findIndex((l) => l.type === "step" && String(l.title).includes("starting a throwaway process box"))).toBeLessThan(
      lines.findIndex((l) => l.type === "check" && (l.check as { name: string }).name === "process engine"),
    );
    const list = await h.run(["box", "list", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([]);
  });

  test("doctor names a missing bubblewrap and the command that fixes it: the daemon's", async () => {
    // The daemon probes with its own environment: a fresh home's daemon, started by this CLI, inherits the bad HUTCH_BWRAP.
    const bad = makeHome();
    try {
      const r = await bad.run(["doctor"], { env: { HUTCH_BWRAP: "/nonexistent/bwrap" } });
      expect(r.code).toBe(1);
      expect(r.stdout).toContain("bubblewrap (bwrap) is not installed");
      expect(r.stdout).toContain("apt-get install -y bubblewrap");
      // A daemon started with a working bwrap ignores the CLI's: it is the daemon's host that is checked.
      const good = await h.run(["doctor"], { env: { HUTCH_BWRAP: "/nonexistent/bwrap" } });
      expect(good.code).toBe(0);
      expect(good.stdout).toContain("ok   process engine: started a box");
    } finally {
      await bad.cleanup();
    }
  });

  test("doctor's probes run in the daemon: every bwrap it starts is the daemon's child, none the CLI's", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-bwrap-shim-"));
    const log = join(dir, "parents");
    const shim = join(dir, "bwrap");
    const real = Bun.which("bwrap")!;
    writeFileSync(shim, `#!/bin/sh\necho "$PPID" >> ${log}\nexec ${real} "$@"\n`);
    chmodSync(shim, 0o755);
    const s = makeHome();
    try {
      Object.assign(s.env, { HUTCH_BWRAP: shim });
      // Start the daemon first, so it is not a child of the doctor CLI below.
      expect((await s.run(["box", "list"])).code).toBe(0);
      const daemon = s.daemonPid()!;
      const cli = s.spawn(["doctor", "--json"]);
      const [out, code] = await Promise.all([new Response(cli.stdout as ReadableStream).text(), cli.exited]);
      expect(code).toBe(0);
      expect(opOutput<Doctor>(out).result.checks.find((c) => c.name === "process engine")).toMatchObject({ ok: true });
      const parents = readFileSync(log, "utf8").trim().split("\n").map(Number);
      // The probe and the throwaway box: at least two bwraps, all started by the daemon.
      expect(parents.length).toBeGreaterThanOrEqual(2);
      expect(new Set(parents)).toEqual(new Set([daemon]));
      expect(parents).not.toContain(cli.pid);
    } finally {
      await s.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("doctor with no daemon to ask: the report says so, in its own shape", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-nod-"));
    try {
      // A home others can write is refused before any daemon is started or asked.
      chmodSync(dir, 0o777);
      const r = await h.run(["doctor", "--json"], { env: { HUTCH_HOME: dir } });
      expect(r.code).toBe(1);
      const { result } = opOutput<Doctor>(r.stdout);
      expect(result.ok).toBe(false);
      expect(result.checks).toHaveLength(1);
      expect(result.checks[0]).toMatchObject({ name: "daemon", ok: false });
      expect(result.checks[0]!.fix).toContain("chmod 700");
      expect(existsSync(join(dir, "hutch.sock"))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("agent list and install ask the daemon: its agents cache, whatever the CLI's environment says", async () => {
    const agents = process.env.HUTCH_AGENTS_DIR ?? "/var/tmp/hutch-agents";
    const a = makeHome();
    try {
      a.env.HUTCH_AGENTS_DIR = agents;
      expect((await a.run(["box", "list"])).code).toBe(0);
      // This CLI names another cache; the daemon's is the one its boxes read, and the one that counts.
      const elsewhere = { HUTCH_AGENTS_DIR: "/nonexistent/agents" };
      const list = await a.run(["agent", "list", "--json"], { env: elsewhere });
      expect(list.code).toBe(0);
      const claude = (JSON.parse(list.stdout) as { agent: string; pinned: string; installed: string | null; path: string }[]).find(
        (r) => r.agent === "claude",
      )!;
      expect(claude.path.startsWith(`${agents}/`)).toBe(true);
      expect(claude.installed).toBe(claude.pinned);
      const install = await a.run(["agent", "install", "claude", "--json"], { env: elsewhere });
      expect(install.code, install.stderr).toBe(0);
      const { lines, result } = opOutput<{ agent: string; package: string; version: string; fresh: boolean; path: string }[]>(
        install.stdout,
      );
      expect(lines[0]).toMatchObject({ type: "step", n: 1, total: 1 });
      expect(String(lines[0]!.title)).toStartWith("claude: ");
      expect(result).toEqual([{ agent: "claude", package: expect.any(String), version: claude.pinned, fresh: false, path: claude.path }]);
      // An unknown agent is refused before anything is installed, with the list to pick from.
      const bad = await a.run(["agent", "install", "claude", "nope"]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('unknown agent "nope"');
      expect(bad.stderr).toContain("pick one of: claude");
    } finally {
      await a.cleanup();
    }
  }, 120_000);

  test("with --json, an error is one JSON document on stdout", async () => {
    const r = await h.run(["box", "start", "missing", "--json"]);
    expect(r.code).toBe(4);
    expect(r.stderr).toBe("");
    const doc = JSON.parse(r.stdout);
    expect(doc.error).toMatchObject({ code: "not_found", message: 'no box named "missing"', hint: "list boxes: hutch box list" });
  });

  test("a bad box name is refused with its rule in words, never a regular expression (exit 2)", async () => {
    const r = await h.run(["box", "create", "Bad Name"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`box name "Bad Name": use lowercase letters, digits and '-', starting with a letter or digit`);
    expect(r.stderr).not.toMatch(/[\^$]|\[a-z0-9/);
  });

  test("an agent run with no secret for its model API is refused before anything is made (exit 3), naming the command", async () => {
    const before = JSON.parse((await h.run(["box", "list", "--json"])).stdout).length;
    const sessions = JSON.parse((await h.run(["session", "list", "--json"])).stdout).length;
    for (const [agent, secret] of [
      ["claude", "anthropic"],
      ["codex", "openai"],
      ["opencode", "anthropic"],
      ["pi", "openai"],
    ] as const) {
      const r = await h.run(["run", "--agent", agent, "--prompt", "hi"]);
      expect({ agent, code: r.code }).toEqual({ agent, code: 3 });
      expect(r.stderr).toContain(`printf %s "$KEY" | hutch secret set ${secret}`);
    }
    // The same for a box that exists: its owner's secrets are the ones it would use.
    expect((await h.run(["box", "create", "nokey"])).code).toBe(0);
    expect((await h.run(["run", "nokey", "--agent", "claude", "--prompt", "hi"])).code).toBe(3);
    expect(JSON.parse((await h.run(["box", "list", "--json"])).stdout).length).toBe(before + 1);
    expect(JSON.parse((await h.run(["session", "list", "--json"])).stdout).length).toBe(sessions);
    expect((await h.run(["box", "delete", "nokey"])).code).toBe(0);
  });

  test("a verb over many boxes keeps going and reports every failure", async () => {
    expect((await h.run(["box", "create", "m1"])).code).toBe(0);
    const r = await h.run(["box", "start", "m1", "ghost1", "ghost2"]);
    expect(r.code).toBe(4);
    expect(r.stdout).toContain("started m1");
    expect(r.stderr).toContain('ghost1: no box named "ghost1"');
    expect(r.stderr).toContain('ghost2: no box named "ghost2"');
    const i = await h.run(["box", "info", "m1", "--json"]);
    expect(JSON.parse(i.stdout).state).toBe("running");
  });
});
