// The offload and bring-back pieces the editor shows, as data: the dry-run
// list, a record's state, the bring-back message; and the runner that reads
// a verb's progress from stderr and its one document from stdout.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BringBackOutput, OffloadOutput, type OffloadRecordFile } from "@hutch/shared";
import { CliError, failure, lineSplitter, parseResult, progressOf, runJson } from "../src/cli.ts";
import { caseMessage, planRows, recordState } from "../src/workspace-view.ts";

const plan: OffloadOutput = {
  root: "/home/me/app",
  branch: "main",
  base: "0123456789abcdef0123456789abcdef01234567",
  box: "app",
  guestDir: "/workspace/app",
  files: [
    { path: "src/a.ts", bytes: 2048 },
    { path: "new.txt", bytes: 3 },
  ],
  bytes: 2051,
  heldBack: [{ path: ".env", rule: "default deny list (.env)" }],
  ignored: [],
  includeIgnored: [],
  notes: ["submodule lib: its commit is recorded"],
  dryRun: true,
  resumed: false,
  updated: false,
  upToDate: false,
  sent: { objects: 0, blobs: 0, bytes: 0 },
};

const record: OffloadRecordFile = {
  version: 1,
  id: "x",
  box: "app",
  guestDir: "/workspace/app",
  branch: "main",
  base: plan.base,
  indexTree: "t1",
  workTree: "t2",
  heldBack: [],
  include: [],
  state: "done",
  at: "2026-12-01T00:00:00Z",
};

const back = (c: BringBackOutput["case"], more: Partial<BringBackOutput> = {}): BringBackOutput => ({
  case: c,
  box: "app",
  root: "/home/me/app",
  branch: "main",
  dryRun: false,
  files: ["src/a.ts"],
  commits: [],
  conversations: [],
  notes: [],
  quarantine: "refs/hutch/app/",
  ...more,
});

describe("planRows", () => {
  test("the confirm row first, then what goes, what is held back with how to carry it, and the notes", () => {
    const rows = planRows(plan, "local");
    expect(rows[0]).toEqual({
      kind: "go",
      label: "Offload 2 files (2.0 KiB) to box app",
      description: "main at 0123456789ab → local:/workspace/app",
    });
    expect(rows.map((r) => `${r.kind}:${r.label}`)).toEqual([
      "go:Offload 2 files (2.0 KiB) to box app",
      "separator:goes (2)",
      "file:src/a.ts",
      "file:new.txt",
      "separator:held back (1)",
      "held:.env",
      "separator:notes",
      "note:submodule lib: its commit is recorded",
    ]);
    expect(rows.find((r) => r.kind === "held")).toMatchObject({
      description: "default deny list (.env); to carry it: !.env in .hutchignore",
    });
  });

  test("nothing held back and no notes: no empty sections", () => {
    const rows = planRows({ ...plan, heldBack: [], notes: [] }, "far");
    expect(rows.map((r) => r.kind)).toEqual(["go", "separator", "file", "file"]);
    expect(rows[0]).toMatchObject({ description: "main at 0123456789ab → far:/workspace/app" });
  });
});

describe("recordState", () => {
  test("sending until done, offloaded after, brought back once the box's head came home", () => {
    expect(recordState({ ...record, state: "sending" })).toBe("sending");
    expect(recordState(record)).toBe("offloaded");
    expect(recordState({ ...record, boxHead: plan.base })).toBe("brought back");
  });
  test("a branch bring-back leaves the record as it was; the last result says it came back", () => {
    expect(recordState(record, back("branch"))).toBe("brought back");
    expect(recordState(record, back("branch", { dryRun: true }))).toBe("offloaded");
    expect(recordState(record, back("branch", { box: "other" }))).toBe("offloaded");
    expect(recordState(record, back("nothing"))).toBe("offloaded");
  });
});

describe("caseMessage", () => {
  test("each case is named", () => {
    expect(caseMessage(back("fast-forward"))).toContain("fast-forward");
    expect(caseMessage(back("merge"))).toContain("merged, uncommitted");
    expect(caseMessage(back("nothing", { files: [] }))).toContain("nothing to bring back");
  });
  test("the branch case names the branch and the commands to merge it", () => {
    const m = caseMessage(
      back("branch", { reason: "no longer on main", created: "hutch/app", commands: ["git diff main hutch/app", "git merge hutch/app"] }),
    );
    expect(m).toContain("(no longer on main)");
    expect(m).toContain("Branch hutch/app");
    expect(m).toContain("git diff main hutch/app; git merge hutch/app");
  });
});

describe("the CLI runner", () => {
  test("lines are split across chunks; blank lines are dropped", () => {
    const got: string[] = [];
    const feed = lineSplitter((l) => got.push(l));
    feed('{"type":"st');
    feed('ep"}\n\nplain\n');
    feed("tail");
    expect(got).toEqual(['{"type":"step"}', "plain"]);
  });

  test("progress lines are checked; anything else on stderr is not progress", () => {
    expect(progressOf('{"type":"step","n":1,"title":"bundling"}')).toEqual({ type: "step", n: 1, title: "bundling" });
    expect(progressOf('{"type":"step","title":"no n"}')).toBeNull();
    expect(progressOf("hutch: a warning")).toBeNull();
    expect(progressOf("{not json")).toBeNull();
  });

  test("an error document is the error, with its next step; otherwise stderr is quoted", () => {
    const e = failure('{"error":{"code":"invalid","message":"no commit yet","hint":"commit something first"}}', "", 1, "hutch offload");
    expect(e).toBeInstanceOf(CliError);
    expect([e.code, e.message, e.hint]).toEqual(["invalid", "no commit yet", "commit something first"]);
    const raw = failure("", '{"type":"step","n":1,"title":"x"}\nboom\n', 3, "hutch offload");
    expect(raw.message).toBe("hutch offload exited 3: boom");
  });

  test("a result that does not fit the schema is refused, naming the field", () => {
    expect(() => parseResult(BringBackOutput, '{"case":"sideways"}', "hutch bring-back")).toThrow(/unexpected shape/);
    expect(() => parseResult(BringBackOutput, "nope", "hutch bring-back")).toThrow(/not JSON/);
  });

  const dir = mkdtempSync(join(tmpdir(), "hutch-ext-cli-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const script = (body: string) => {
    const p = join(dir, `s${Math.random().toString(36).slice(2)}`);
    writeFileSync(p, `#!/bin/sh\n${body}\n`);
    chmodSync(p, 0o755);
    return p;
  };

  test("runJson reports each step as it comes and resolves with the checked document", async () => {
    const bin = script(`echo '{"type":"step","n":1,"title":"bundling"}' >&2
echo 'log line' >&2
echo '{"type":"step","n":2,"title":"sending to box app"}' >&2
echo '${JSON.stringify(plan)}'`);
    const steps: string[] = [];
    const r = await runJson({ bin, args: ["offload"], env: {} }, OffloadOutput, { onStep: (s) => steps.push(s) });
    expect(steps).toEqual(["bundling", "sending to box app"]);
    expect(r.box).toBe("app");
  });

  test("runJson rejects with the verb's error and passes --json", async () => {
    const bin = script(`[ "$2" = --json ] || { echo "no --json: $*" >&2; exit 9; }
echo '{"error":{"code":"not_found","message":"no offload to box x","hint":"hutch offload --box x"}}'; exit 4`);
    const err = (await runJson({ bin, args: ["bring-back"], env: {} }, BringBackOutput).catch((e) => e)) as CliError;
    expect([err.code, err.message, err.hint]).toEqual(["not_found", "no offload to box x", "hutch offload --box x"]);
  });
});
