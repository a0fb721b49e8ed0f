// Bring-back against a box that tries to weaponise what it sends home, with
// real process boxes and real git: a stray file beside the bundle in its
// output directory, a conversation whose cwd leaves the repository through
// `..`, and the daemon's own stored secret in the box's conversation. The
// chained symlinks are in offload.test.ts; the bundle's own checks
// (symlink, size) in host/test/workspace-bundle.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { git as g, type Home, makeHome, newRepo } from "../helpers.ts";

let h: Home;
let work: string;
/** 17 characters and no known token shape: only the stored value can find it. */
const CANARY = `cn${crypto.randomUUID().replaceAll("-", "").slice(0, 15)}`;
beforeAll(async () => {
  h = makeHome("hutch-hostile-");
  work = mkdtempSync(join(tmpdir(), "hutch-hostile-work-"));
  expect((await h.run(["secret", "set", "canary"], { stdin: CANARY })).code).toBe(0);
});
afterAll(async () => {
  await h.cleanup();
  rmSync(work, { recursive: true, force: true });
});

let n = 0;
async function offloaded(box: string) {
  const dir = newRepo(join(work, `r${++n}`), { "a.txt": "a\n", "b.txt": "b\n" });
  const stores = mkdtempSync(join(tmpdir(), "hutch-hostile-stores-"));
  const env = {
    CLAUDE_CONFIG_DIR: join(stores, ".claude"),
    CODEX_HOME: join(stores, ".codex"),
    PI_CODING_AGENT_DIR: join(stores, ".pi", "agent"),
  };
  const r = await h.run(["offload", "--box", box, "--json"], { cwd: dir, env });
  expect(r.code, r.stderr).toBe(0);
  const { guestDir } = JSON.parse(r.stdout) as { guestDir: string };
  return { dir, stores, env, guestDir };
}

async function inBox(box: string, script: string) {
  const r = await h.run(["exec", box, "--", "sh", "-c", script]);
  expect(r.code, r.stderr).toBe(0);
}

/** Writes a Claude Code transcript into the box's store for the repository, its first record's cwd as given. */
const plantClaude = (guestDir: string, id: string, cwd: string, text: string) => {
  const rec = JSON.stringify({ type: "user", cwd, sessionId: id, message: { role: "user", content: text } });
  return `set -e; p=$HOME/.claude/projects/${guestDir.replace(/[^A-Za-z0-9]/g, "-")}; mkdir -p $p; printf '%s\\n' '${rec}' > $p/${id}.jsonl`;
};

const listFiles = (dir: string) => Bun.spawnSync(["find", dir, "-type", "f"]).stdout.toString().trim().split("\n").filter(Boolean);

describe("a hostile box's output", () => {
  test("a stray, unreadable file beside the bundle is never taken: only the bundle comes out", async () => {
    const { dir, env, guestDir, stores } = await offloaded("stray");
    // The box's own clean filter runs during its export and plants the stray in the output directory.
    await inBox(
      "stray",
      `set -e; cd ${guestDir}; git config filter.plant.clean 'sh -c "for o in /workspace/.hutch-out-*; do echo s > \\$o/stray; chmod 000 \\$o/stray; done; cat"'
       echo '* filter=plant' > .gitattributes; echo box >> b.txt`,
    );
    const r = await h.run(["bring-back", "stray", "--json"], { cwd: dir, env });
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { case: string }).case).toBe("fast-forward");
    expect(readFileSync(join(dir, "b.txt"), "utf8")).toBe("b\nbox\n");
    rmSync(stores, { recursive: true, force: true });
  }, 120_000);

  test("a conversation whose cwd leaves the repository through ..: refused, naming it, nothing written", async () => {
    const { dir, env, guestDir, stores } = await offloaded("dotdot");
    const [good, bad] = [crypto.randomUUID(), crypto.randomUUID()];
    await inBox(
      "dotdot",
      `${plantClaude(guestDir, good, guestDir, "fine")}\n${plantClaude(guestDir, bad, `${guestDir}/../../etc`, "hi")}\ncd ${guestDir} && echo box >> b.txt`,
    );
    const before = {
      head: g(dir, "rev-parse", "HEAD"),
      status: g(dir, "status", "--porcelain"),
      b: readFileSync(join(dir, "b.txt"), "utf8"),
    };
    const r = await h.run(["bring-back", "dotdot"], { cwd: dir, env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`the box's claude conversation ${bad} says it ran in /etc, outside the repository ${guestDir}`);
    expect(r.stderr).toContain("hutch bring-back dotdot");
    expect({
      head: g(dir, "rev-parse", "HEAD"),
      status: g(dir, "status", "--porcelain"),
      b: readFileSync(join(dir, "b.txt"), "utf8"),
    }).toEqual(before);
    // Not even the good one: the check comes before any write.
    expect(listFiles(stores)).toEqual([]);
    rmSync(stores, { recursive: true, force: true });
  }, 120_000);

  test("the daemon's stored 17-character secret in the box's conversation comes home as [secret:canary], raw and base64", async () => {
    const { dir, env, guestDir, stores } = await offloaded("canary");
    const id = crypto.randomUUID();
    const b64 = Buffer.from(CANARY).toString("base64");
    await inBox("canary", plantClaude(guestDir, id, guestDir, `the key is ${CANARY} (or ${b64})`));
    const r = await h.run(["bring-back", "canary", "--json"], { cwd: dir, env });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { conversations: { path: string }[]; notes: string[] };
    expect(out.conversations).toHaveLength(1);
    const text = readFileSync(out.conversations[0]!.path, "utf8");
    expect(text).toContain("the key is [secret:canary] (or [secret:canary])");
    expect(text).not.toContain(CANARY);
    expect(text).not.toContain(b64);
    expect(out.notes.join("\n")).toContain("2 occurrences of the daemon's stored secret canary redacted");
    expect(r.stdout + r.stderr).not.toContain(CANARY);
    // Nor does the daemon's log hold it.
    for (const f of listFiles(h.home).filter((p) => /\.log$/.test(p))) expect(readFileSync(f, "utf8")).not.toContain(CANARY);
    rmSync(stores, { recursive: true, force: true });
  }, 120_000);
});
