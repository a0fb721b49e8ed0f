// The offload record and the verbs' --json output as the VS Code extension
// reads them (shared/src/workspace.ts): the host's own types must fit the
// shared schemas (checked by the compiler here), and a record written by
// hutch must pass the extension's check.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { check, BringBackOutput, type OffloadOutput, OffloadRecordFile } from "@hutch/shared";
import type { bringBack } from "../src/workspace/bring-back.ts";
import type { OffloadResult } from "../src/workspace/offload.ts";
import { type OffloadRecord, recordPath, writeRecord } from "../src/workspace/record.ts";

// Compile-time: what the host writes fits what the extension reads.
const fits = {
  record: (r: OffloadRecord): OffloadRecordFile => r,
  offload: (r: OffloadResult): OffloadOutput => r,
  bringBack: (r: Awaited<ReturnType<typeof bringBack>>): BringBackOutput => r,
};

const dir = mkdtempSync(join(tmpdir(), "hutch-shapes-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a record hutch writes is one the extension accepts", async () => {
  const r: OffloadRecord = {
    version: 1,
    id: "01abc",
    box: "app",
    guestDir: "/workspace/app",
    branch: "main",
    base: "a".repeat(40),
    indexTree: "b".repeat(40),
    workTree: "c".repeat(40),
    heldBack: [".env"],
    include: [],
    state: "sending",
    at: new Date().toISOString(),
  };
  await writeRecord(dir, r);
  const read: unknown = JSON.parse(readFileSync(recordPath(dir, "app"), "utf8"));
  expect(check(OffloadRecordFile, read)).toBe(true);
  expect(check(OffloadRecordFile, { ...r, state: "lost" })).toBe(false);
  expect(Object.keys(fits)).toHaveLength(3);
});

test("bring-back's --json carries its notes, and the extension's check requires them", () => {
  const r: BringBackOutput = {
    case: "nothing",
    box: "app",
    root: "/home/me/app",
    branch: "main",
    dryRun: false,
    files: [],
    commits: [],
    quarantine: "refs/hutch/app/",
    conversations: [],
    notes: ["the box's claude conversation c1 is too big (9 bytes): left in the box"],
  };
  expect(check(BringBackOutput, JSON.parse(JSON.stringify(r)))).toBe(true);
  const { notes: _notes, ...withoutNotes } = r;
  expect(check(BringBackOutput, withoutNotes)).toBe(false);
});
