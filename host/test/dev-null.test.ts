// `hutch exec` ends stdin without reading it when it is /dev/null (the read
// would load node:fs, ~4 ms of the call): the check must say yes for that
// device under any name and no for everything else a caller can give.
import { afterAll, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDevNull } from "../src/client/pipe.ts";

const dir = mkdtempSync(join(tmpdir(), "hutch-dev-null-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function withFd<T>(path: string, flags: string, f: (fd: number) => T): T {
  const fd = openSync(path, flags);
  try {
    return f(fd);
  } finally {
    closeSync(fd);
  }
}

test("/dev/null is recognised by the device it is, under its own name or another", () => {
  expect(withFd("/dev/null", "r", isDevNull)).toBe(true);
  symlinkSync("/dev/null", join(dir, "nothing"));
  expect(withFd(join(dir, "nothing"), "r", isDevNull)).toBe(true);
});

test("other devices, files, pipes and closed fds are read as usual", () => {
  expect(withFd("/dev/zero", "r", isDevNull)).toBe(false);
  writeFileSync(join(dir, "empty"), "");
  expect(withFd(join(dir, "empty"), "r", isDevNull)).toBe(false);
  expect(withFd(dir, "r", isDevNull)).toBe(false);
  // A FIFO opened read-write does not wait for a writer (Linux).
  expect(Bun.spawnSync(["mkfifo", join(dir, "fifo")]).exitCode).toBe(0);
  expect(withFd(join(dir, "fifo"), "r+", isDevNull)).toBe(false);
  expect(isDevNull(987_654)).toBe(false);
});
