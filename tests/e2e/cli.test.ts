import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeHome, type Home } from "../helpers.ts";

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
    const doc = JSON.parse(r.stdout) as { ok: boolean; checks: { name: string; ok: boolean; detail: string; fix?: string }[] };
    expect(doc.ok).toBe(true);
    const proc = doc.checks.find((c) => c.name === "process engine")!;
    expect(proc.ok).toBe(true);
    expect(proc.detail).toContain("booted a box");
    // Whatever this host lacks (here, at least a VM image in a fresh home), each gap is named with its fix.
    const qemu = doc.checks.find((c) => c.name === "qemu engine");
    expect(qemu).toBeDefined();
    const gaps = doc.checks.filter((c) => !c.ok);
    for (const g of gaps) expect(g.fix, g.name).toBeTruthy();
    const list = await h.run(["box", "list", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([]);
  });

  test("doctor names a missing bubblewrap and the command that fixes it", async () => {
    const r = await h.run(["doctor"], { env: { HUTCH_BWRAP: "/nonexistent/bwrap" } });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("bubblewrap (bwrap) is not installed");
    expect(r.stdout).toContain("apt-get install -y bubblewrap");
  });

  test("with --json, an error is one JSON document on stdout", async () => {
    const r = await h.run(["box", "start", "missing", "--json"]);
    expect(r.code).toBe(4);
    expect(r.stderr).toBe("");
    const doc = JSON.parse(r.stdout);
    expect(doc.error).toMatchObject({ code: "not_found", message: 'no box named "missing"', hint: "list boxes: hutch box list" });
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
