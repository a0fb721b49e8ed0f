// Directories named after the process that owns them (procs.ts), as the
// sleeping state's receiver makes them (engine/qemu/sleep.ts): named with the
// daemon's pid, gone when the receiver ends, and one a killed daemon left
// swept by the next.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { RECEIVER_PREFIX, receiveState } from "../src/engine/qemu/sleep.ts";
import { pidDir, sweepPidDirs } from "../src/procs.ts";
import { scratchDir } from "../../tests/helpers.ts";

/** A pid no process has: one that ran and was reaped. */
function deadPid(): number {
  const p = Bun.spawnSync(["true"]);
  return p.pid;
}

describe("the sleeping state's receiver", () => {
  test("a directory a gone daemon left is swept; a live daemon's, and other names, stay", () => {
    const parent = scratchDir("hutch-sleep-sweep-");
    const gone = `hutch-sleep-${deadPid()}-AbC123`;
    const live = `hutch-sleep-${process.ppid}-XyZ789`;
    const mine = `hutch-sleep-${process.pid}-Mine00`;
    for (const n of [gone, live, mine, "hutch-sleep-notapid", "other-123-abc"]) mkdirSync(join(parent, n));
    writeFileSync(join(parent, gone, "state.sock"), "");
    expect(sweepPidDirs(parent, RECEIVER_PREFIX)).toEqual([gone]);
    expect(readdirSync(parent).sort()).toEqual([live, mine, "hutch-sleep-notapid", "other-123-abc"].sort());
  });

  test("a new one is made after the gone ones' are swept", () => {
    const parent = scratchDir("hutch-piddir-");
    const gone = `carry-in-${deadPid()}-q1w2e3`;
    mkdirSync(join(parent, gone));
    const made = pidDir(parent, "carry-in-");
    expect(basename(made)).toStartWith(`carry-in-${process.pid}-`);
    expect(readdirSync(parent)).toEqual([basename(made)]);
  });

  test("its directory carries the daemon's pid and goes when the receiver ends", async () => {
    const dir = scratchDir("hutch-sleep-rx-");
    const rx = await receiveState(join(dir, "state.tmp"), deadPid());
    const sockDir = dirname(rx.sock);
    expect(dirname(sockDir)).toBe(tmpdir());
    expect(basename(sockDir)).toStartWith(`hutch-sleep-${process.pid}-`);
    expect(existsSync(rx.sock)).toBe(true);
    rx.close();
    await expect(rx.done).rejects.toThrow("the state receiver was closed");
    expect(existsSync(sockDir)).toBe(false);
  });
});
