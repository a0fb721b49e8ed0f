// The pure parts of grading a dispatch's worker: which files are protected,
// what a score line is, what a worker's diff says, and how a winner is picked.
import { describe, expect, test } from "bun:test";
import type { DispatchWorker, SnapshotChange } from "@hutch/shared";
import { checkFiles, diffOf, parseScore, protectedChanges, protectGlobs, underWorkdir, workTree } from "../src/dispatch/grade.ts";
import { pick } from "../src/dispatch/service.ts";

describe("checkFiles: the scripts a check runs, not the data it reads", () => {
  test.each([
    ["sh tests/check.sh", ["tests/check.sh"]],
    ["./grade && bun test a.test.ts", ["grade", "a.test.ts"]],
    ['grep -qx good answer.txt && echo "score: $(cat score)"', []],
    ["python3 /abs/grade.py; sh ../up.sh", []],
  ])("%s", (check, files) => expect(checkFiles(check)).toEqual(files));
});

test("parseScore takes the last `score: N` line, and only a whole line", () => {
  expect(parseScore("ok\nscore: 3\nmore\nscore: 7.5\n")).toBe(7.5);
  expect(parseScore("the score: 3 was printed inline")).toBeNull();
  expect(parseScore("score: -2")).toBe(-2);
  expect(parseScore("score: lots")).toBeNull();
});

test("underWorkdir maps snapshot paths into the work dir, and nothing outside it", () => {
  expect(underWorkdir("workspace/calc/a.txt", "/workspace/calc")).toBe("a.txt");
  expect(underWorkdir("workspace/other/a.txt", "/workspace/calc")).toBeNull();
  expect(underWorkdir("home/.claude/x", "/workspace")).toBeNull();
  expect(underWorkdir("home/src/x", "/home/hutch/src")).toBe("x");
});

describe("workTree: the one part of a worker's box its grading box gets, never the whole home", () => {
  test.each([
    ["/workspace", "workspace"],
    ["/workspace/calc/", "workspace/calc"],
    ["/workspace/./calc", "workspace/calc"],
    ["/home/hutch/src/calc", "home/src/calc"],
  ])("%s is %s", (workdir, path) => expect(workTree(workdir)).toBe(path));
  test.each([
    ["/home/hutch", "not under /workspace or /home/hutch/"],
    ["/home/hutch/", "not under /workspace or /home/hutch/"],
    ["/", "not under"],
    ["/tmp/calc", "not under"],
    ["/workspace/../home/hutch", '".."'],
  ])("%s is refused, with the next step", (workdir, message) => {
    expect(() => workTree(workdir)).toThrow(message);
    try {
      workTree(workdir);
    } catch (err) {
      expect((err as { code: string; hint: string }).code).toBe("invalid");
      expect((err as { hint: string }).hint).toContain("/workspace");
    }
  });
});

const change = (path: string, c: SnapshotChange["change"], patch?: string): SnapshotChange => ({
  path,
  change: c,
  type: "file",
  ...(patch ? { patch } : {}),
});

test("protected changes: an edited test is restored, an added one removed, metadata and unprotected files left alone", () => {
  const changes = [
    change("workspace/tests/check.sh", "modified"),
    change("workspace/tests/extra.sh", "added"),
    change("workspace/src.test.ts", "metadata"),
    change("workspace/answer.txt", "modified"),
    change("home/tests/x", "modified"),
  ];
  expect(protectedChanges(changes, "/workspace", protectGlobs("sh tests/check.sh"))).toEqual({
    restore: ["workspace/tests/check.sh"],
    remove: ["/workspace/tests/extra.sh"],
  });
  expect(protectedChanges(changes, "/workspace", protectGlobs("true", ["answer.txt"])).restore).toEqual([
    "workspace/tests/check.sh",
    "workspace/answer.txt",
  ]);
});

test("diffOf: patches of the work dir's files, counted; dirs, metadata and .git left out", () => {
  const d = diffOf(
    [
      change("workspace/a.txt", "modified", "--- a/workspace/a.txt\n+++ b/workspace/a.txt\n@@ -1 +1 @@\n-bad\n+good\n+more"),
      { path: "workspace/dir", change: "added", type: "dir" },
      change("workspace/.git/index", "modified"),
      change("workspace/b.txt", "metadata"),
    ],
    "/workspace",
  );
  expect(d.stat).toEqual({ files: 1, added: 2, removed: 1 });
  expect(d.text).toContain("+good");
  expect(d.text).not.toContain(".git");
});

const worker = (n: number, status: DispatchWorker["status"], score: number | null, finishedAt: string): DispatchWorker => ({
  n,
  agent: "claude",
  box: `w${n}`,
  boxDeleted: false,
  session: null,
  status,
  verdict: { verdict: status, exit: 0, score, tail: "", ms: 0 },
  score,
  diffstat: null,
  snapshot: null,
  diff: null,
  usage: { input: 0, output: 0 },
  finishedAt,
});

test("pick: first is the earliest pass; best the highest score among passes, the earlier on a tie", () => {
  const ws = [
    worker(1, "failed", 99, "2026-01-01T00:00:01Z"),
    worker(2, "passed", 3, "2026-01-01T00:00:03Z"),
    worker(3, "passed", 7, "2026-01-01T00:00:05Z"),
    worker(4, "passed", 7, "2026-01-01T00:00:04Z"),
    worker(5, "timeout", null, "2026-01-01T00:00:00Z"),
  ];
  expect(pick(ws, "first")?.n).toBe(2);
  expect(pick(ws, "best")?.n).toBe(4);
  expect(pick(ws.slice(0, 1), "best")).toBeNull();
});
