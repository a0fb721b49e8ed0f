// The conversation's pure parts: JSONL checked, strings rewritten and
// redacted, the local stores searched, the hand-over file read and the turn
// it shapes. The real CLIs against the fake model are in
// tests/e2e/offload-conversation.test.ts.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HutchError, type Handover } from "@hutch/shared";
import { parseHandover, shapeTurn } from "../src/harness/handover.ts";
import { boxCwd, findLocal, relativeCwd, rolloutDate, rolloutName } from "../src/workspace/conversation/stores.ts";
import { parseJsonl, REDACTED, rewrite, secretValues } from "../src/workspace/conversation/transcript.ts";

const tmp = mkdtempSync(join(tmpdir(), "hutch-conv-unit-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("parseJsonl", () => {
  test.each([
    ["two records", '{"a":1}\n{"b":2}\n', null, 2],
    ["a blank line, no final newline", '{"a":1}\n\n{"b":2}', null, 2],
    ["a line that is not JSON", '{"a":1}\nnope\n{"b":2}\n', "line 2 is not JSON", 0],
    ["an array", '{"a":1}\n[1,2]\n', "line 2 is not a JSON object", 0],
    ["70 levels deep", `{"a":${"[".repeat(70)}${"]".repeat(70)}}\n`, "line 1 nests deeper than 64", 0],
  ])("%s", (_name, text, problem, n) => {
    const r = parseJsonl(text);
    if (problem) expect(r).toEqual({ problem });
    else expect("records" in r && r.records.length).toBe(n);
  });

  test("a last line cut mid-write is dropped only when asked (a local CLI still writing)", () => {
    expect(parseJsonl('{"a":1}\n{"b":', true)).toEqual({ records: [{ a: 1 }] });
    expect(parseJsonl('{"a":1}\n{"b":')).toEqual({ problem: "line 2 is not JSON" });
    expect(parseJsonl('{"b":\n{"a":1}\n', true)).toEqual({ problem: "line 1 is not JSON" });
  });
});

describe("rewrite", () => {
  test("a path is replaced where it ends a component, in every string at any depth, never in keys", () => {
    const { records } = rewrite(
      [{ cwd: "/home/u/app", "/home/u/app": "key", msg: { content: [{ text: "cd /home/u/app/src; ls /home/u/app2 /home/u/app.old" }] } }],
      { paths: [{ from: "/home/u/app", to: "/workspace/app" }] },
    );
    expect(records[0]).toEqual({
      cwd: "/workspace/app",
      "/home/u/app": "key",
      msg: { content: [{ text: "cd /workspace/app/src; ls /home/u/app2 /home/u/app.old" }] },
    });
  });

  test("the longer prefix wins (a store inside the repository, a project directory inside the store)", () => {
    const { records } = rewrite([{ p: "/r/.claude/projects/-r/x.jsonl", q: "/r/file" }], {
      paths: [
        { from: "/r", to: "/workspace/r" },
        { from: "/r/.claude/projects/-r", to: "/home/hutch/.claude/projects/-workspace-r" },
      ],
    });
    expect(records[0]).toEqual({ p: "/home/hutch/.claude/projects/-workspace-r/x.jsonl", q: "/workspace/r/file" });
  });

  test("secrets and token shapes are redacted and counted; ids replaced", () => {
    const key = `sk-ant-api03-${"x".repeat(30)}`;
    const pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----";
    const { records, redacted } = rewrite(
      [
        {
          sessionId: "11111111-1111-4111-8111-111111111111",
          text: `token sekrit-value-123 twice sekrit-value-123, ${key}, ${pem}, ghp_${"a".repeat(36)}`,
        },
      ],
      {
        paths: [],
        secrets: ["sekrit-value-123", "short"],
        tokens: true,
        ids: [["11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"]],
      },
    );
    expect(records[0]).toEqual({
      sessionId: "22222222-2222-4222-8222-222222222222",
      text: `token ${REDACTED} twice ${REDACTED}, ${REDACTED}, ${REDACTED}, ${REDACTED}`,
    });
    expect(redacted).toBe(5);
  });

  test("a held-back file's values: KEY=value values and longer lines, not comments or short ones", () => {
    expect(
      secretValues('# comment line here\nAPI_TOKEN="abcdefgh123"\nexport DB_PASSWORD=hunter2hunter2\nX=1\nsome-long-key-material\n'),
    ).toEqual(['API_TOKEN="abcdefgh123"', "abcdefgh123", "export DB_PASSWORD=hunter2hunter2", "hunter2hunter2", "some-long-key-material"]);
  });
});

describe("stores", () => {
  const line = (o: unknown) => `${JSON.stringify(o)}\n`;
  const at = (path: string, text: string, secondsAgo: number) => {
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, text);
    const t = Date.now() / 1000 - secondsAgo;
    utimesSync(path, t, t);
  };

  test("the newest conversation of each CLI whose cwd is the repository or below it; a sibling repository's is not taken", async () => {
    const root = join(tmp, "repo");
    mkdirSync(join(root, "sub"), { recursive: true });
    const claude = join(tmp, "claude");
    const codex = join(tmp, "codex");
    const proj = (cwd: string) => join(claude, "projects", cwd.replace(/[^A-Za-z0-9]/g, "-"));
    const uuid = (c: string) => `${c.repeat(8)}-${c.repeat(4)}-4${c.repeat(3)}-8${c.repeat(3)}-${c.repeat(12)}`;
    const [old, sub, sibling] = [uuid("a"), uuid("b"), uuid("c")];
    at(join(proj(root), `${old}.jsonl`), line({ type: "user", cwd: root }), 300);
    at(join(proj(`${root}/sub`), `${sub}.jsonl`), line({ type: "mode" }) + line({ type: "user", cwd: `${root}/sub` }), 100);
    at(join(proj(`${root}2`), `${sibling}.jsonl`), line({ type: "user", cwd: `${root}2` }), 10);
    at(join(proj(root), "not-a-uuid.jsonl"), line({ cwd: root }), 1);
    const rollout = (id: string, cwd: string, ago: number) =>
      at(
        join(codex, "sessions", "2026", "12", "01", `rollout-2026-12-01T10-00-0${ago % 10}-${id}.jsonl`),
        line({ type: "session_meta", payload: { id, cwd } }),
        ago,
      );
    rollout(old, root, 200);
    rollout(sibling, `${root}2`, 5);
    const pi = join(tmp, "pi");
    at(
      join(pi, "sessions", `--${root.slice(1).replaceAll("/", "-")}--`, `2026-12-01T10-00-00-000Z_${sibling}.jsonl`),
      line({ type: "session", id: old, cwd: root }),
      1,
    );
    at(
      join(pi, "sessions", `--${root.slice(1).replaceAll("/", "-")}--`, `2026-12-01T09-00-00-000Z_${old}.jsonl`),
      line({ type: "session", id: old, cwd: root }),
      400,
    );
    const found = await findLocal(root, { claude, codex, pi });
    // The newest pi file names another id than its header: not taken.
    expect(found.map((f) => [f.agent, f.id, f.cwd])).toEqual([
      ["claude", sub, `${root}/sub`],
      ["pi", old, root],
      ["codex", old, root],
    ]);
    expect(relativeCwd(`${root}/sub`, [root])).toBe("sub");
    expect(relativeCwd(`${root}2`, [root])).toBeNull();
  });

  test.each([
    ["/workspace/app", { rel: "" }],
    ["/workspace/app/src", { rel: "src" }],
    ["/workspace/app/src/../lib/./x/", { rel: "lib/x" }],
    ["/workspace/other/../app/src", { rel: "src" }],
    ["/workspace/app/..", { leaves: "/workspace" }],
    ["/workspace/app/../../etc", { leaves: "/etc" }],
    ["/workspace/app/src/../../app2", { leaves: "/workspace/app2" }],
    ["/workspace/app2", null],
    ["/etc", null],
    ["workspace/app", null],
  ])("a box's cwd %p is normalised: %p", (cwd, want) => expect(boxCwd(cwd, "/workspace/app")).toEqual(want));

  test("a rollout's name round-trips its start time", () => {
    const at = new Date(2026, 11, 1, 13, 27, 4);
    const n = rolloutName(at, "01a231c9-961f-75b0-9a99-8096d3eb76b8");
    expect(n).toEqual({ dir: ["2026", "12", "01"], name: "rollout-2026-12-01T13-27-04-01a231c9-961f-75b0-9a99-8096d3eb76b8.jsonl" });
    expect(rolloutDate(n.name)?.getTime()).toBe(at.getTime());
    expect(rolloutDate("rollout-x.jsonl")).toBeNull();
  });
});

describe("the hand-over file", () => {
  const good: Handover = {
    version: 1,
    offload: "off_abc123",
    workdir: "/workspace/app",
    note: "[hutch] hand-over",
    conversations: { claude: { id: "11111111-1111-4111-8111-111111111111", cwd: "/workspace/app/sub" } },
  };

  test.each([
    ["none", "", null],
    ["blank", "  \n", null],
    ["a good one", JSON.stringify(good), good],
  ])("%s reads", (_name, text, want) => {
    expect(parseHandover(text, "b")).toEqual(want);
  });

  test.each([
    ["not JSON", "not json", "is not JSON"],
    ["a workdir outside /workspace", JSON.stringify({ ...good, workdir: "/etc" }), "workdir"],
    ["a workdir with ..", JSON.stringify({ ...good, workdir: "/workspace/../etc" }), "workdir"],
    [
      "an id that is a flag",
      JSON.stringify({ ...good, conversations: { claude: { id: "--resume", cwd: "/workspace/app" } } }),
      "conversations.claude.id",
    ],
    ["an unknown field", JSON.stringify({ ...good, extra: 1 }), "is not valid"],
    ["over 64 KiB", JSON.stringify({ ...good, note: "x".repeat(70_000) }), "over 65536 bytes"],
  ])("%s is refused", (_name, text, says) => {
    let err: unknown;
    try {
      parseHandover(text, "b");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HutchError);
    expect((err as HutchError).message).toContain(says);
    expect((err as HutchError).hint).toContain("hutch exec b");
  });

  test("the turn it shapes: resume the carried conversation in its cwd, or the note first; follow-ups continue", () => {
    const t = { workdir: "/workspace", prompt: "go", resume: false };
    expect(shapeTurn(null, "claude", t)).toEqual(t);
    expect(shapeTurn(good, "claude", t)).toEqual({ workdir: "/workspace/app/sub", prompt: "go", resume: good.conversations.claude!.id });
    expect(shapeTurn(good, "codex", t)).toEqual({ workdir: "/workspace/app", prompt: "[hutch] hand-over\n\ngo", resume: false });
    expect(shapeTurn(good, "claude", { ...t, resume: true })).toEqual({ workdir: "/workspace/app/sub", prompt: "go", resume: true });
    expect(shapeTurn(good, "codex", { ...t, resume: true })).toEqual({ workdir: "/workspace/app", prompt: "go", resume: true });
  });
});
