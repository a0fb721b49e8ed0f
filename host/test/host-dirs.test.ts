import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { extraHostDirs, SYSTEM_DIRS } from "../src/engine/process/host-dirs.ts";

const home = "/var/lib/hutch";
// Not under /tmp, which the sandbox makes itself (and so refuses).
const scratch = () => mkdtempSync("/var/tmp/hutch-hostdir-");

describe("the host directories a process box sees", () => {
  test("/opt is not among the defaults", () => {
    expect(SYSTEM_DIRS).not.toContain("/opt");
    expect(SYSTEM_DIRS).toContain("/usr");
  });

  test("none unless named", () => {
    expect(extraHostDirs([], home)).toEqual([]);
  });

  test("a named directory is added once; system directories are already there", () => {
    const dir = scratch();
    expect(extraHostDirs([dir, dir, "/usr/lib"], home)).toEqual([dir]);
    rmSync(dir, { recursive: true });
  });

  test.each([
    ["opt", "not an absolute, normal path"],
    ["/opt/", "not an absolute, normal path"],
    ["/opt/../etc", "not an absolute, normal path"],
    ["/", "the host's whole filesystem"],
    ["/etc", "overlaps /etc"],
    ["/etc/ssh", "overlaps /etc"],
    ["/root", "overlaps /root"],
    ["/home/alice", "overlaps /home"],
    ["/run", "overlaps /run"],
    ["/proc/1", "overlaps /proc"],
    ["/var/lib/hutch", "overlaps the daemon's home"],
    ["/var/lib", "overlaps the daemon's home"],
    ["/var/lib/hutch/boxes", "overlaps the daemon's home"],
    ["/no/such/dir/for/hutch", "does not exist"],
    ["/etc/hostname/x", "overlaps /etc"],
  ])("%s is refused: %s", (dir, why) => {
    expect(() => extraHostDirs([dir], home)).toThrow(why);
    expect(() => extraHostDirs([dir], home)).toThrow("HUTCH_BOX_HOST_DIRS");
  });

  test("a symlink is refused with its target named", () => {
    const dir = scratch();
    symlinkSync("/usr/share", join(dir, "link"));
    expect(() => extraHostDirs([join(dir, "link")], home)).toThrow("is a symlink (to /usr/share)");
    rmSync(dir, { recursive: true });
  });
});
