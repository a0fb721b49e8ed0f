// Where box cgroups go on each kind of host (v1, v2 in the root group, v2
// delegated, v2 shared), the subordinate id blocks, and the console log as the
// host prints it. Pure: a fake host view stands in for /proc and /sys.
import { describe, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseMountinfo, parseSelfCgroup, planCgroups, describePlan, type HostView } from "../src/engine/cgroup.ts";
import { BLOCK, BOX_USER, DEFAULT_RANGE, boxIdentity, parseSubid, pickSlot } from "../src/engine/idmap.ts";
import { CONSOLE_TAIL_BYTES, consoleTailOf, stripControls, trimConsole } from "../src/engine/console.ts";
import { formatSize, parseSize } from "../src/engine/limits.ts";

const V1_MOUNTS = `
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`;
const V1_SELF = "8:pids:/\n4:memory:/svc/a\n1:cpu,cpuacct:/\n0::/\n";

const V2_MOUNTS = "25 21 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot";

function view(over: Partial<Omit<HostView, "writable">> & { files?: Record<string, string>; writable?: string[] }): HostView {
  const files = over.files ?? {};
  return {
    mountinfo: over.mountinfo ?? V1_MOUNTS,
    selfCgroup: over.selfCgroup ?? V1_SELF,
    pid: over.pid ?? 4242,
    uid: 0,
    read: (p) => files[p] ?? null,
    writable: (d) => (over.writable ?? []).includes(d),
  };
}

describe("cgroups: where box groups go", () => {
  test("mountinfo and /proc/self/cgroup parse, including escaped paths", () => {
    const m = parseMountinfo("40 31 0:37 /a\\040b /sys/fs/cgroup/x rw - cgroup cgroup rw,pids");
    expect(m[0]).toMatchObject({ root: "/a b", point: "/sys/fs/cgroup/x", fstype: "cgroup", options: ["rw", "pids"] });
    const s = parseSelfCgroup(V1_SELF);
    expect(s.v1.get("memory")).toBe("/svc/a");
    expect(s.v1.get("cpuacct")).toBe("/");
    expect(s.v2).toBe("/");
  });

  test("v1: each controller's groups under the daemon's own group in that hierarchy", () => {
    const plan = planCgroups(view({ writable: ["/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory/svc/a", "/sys/fs/cgroup/cpu,cpuacct"] }));
    expect(plan.pids).toEqual({ ok: true, version: 1, parent: "/sys/fs/cgroup/pids/hutch" });
    expect(plan.memory).toEqual({ ok: true, version: 1, parent: "/sys/fs/cgroup/memory/svc/a/hutch" });
    expect(plan.cpu).toEqual({ ok: true, version: 1, parent: "/sys/fs/cgroup/cpu,cpuacct/hutch" });
  });

  test("v1 without write access: not enforced, and doctor is told why", () => {
    const plan = planCgroups(view({ writable: [] }));
    expect(plan.memory.ok).toBe(false);
    const d = describePlan(plan);
    expect(d.memory.enforced).toBe(false);
    expect(d.memory.detail).toContain("not writable");
  });

  test("v2 with the daemon in the root group: one tree at <mount>/hutch", () => {
    const plan = planCgroups(
      view({
        mountinfo: V2_MOUNTS,
        selfCgroup: "0::/\n",
        writable: ["/sys/fs/cgroup"],
        files: { "/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids" },
      }),
    );
    for (const c of ["pids", "memory", "cpu"] as const) expect(plan[c]).toEqual({ ok: true, version: 2, parent: "/sys/fs/cgroup/hutch" });
  });

  test("v2 delegated to the daemon alone (a service with Delegate=yes): the daemon moves to a leaf, boxes beside it", () => {
    const own = "/sys/fs/cgroup/system.slice/hutch.service";
    const plan = planCgroups(
      view({
        mountinfo: V2_MOUNTS,
        selfCgroup: "0::/system.slice/hutch.service\n",
        writable: [own],
        files: {
          "/sys/fs/cgroup/cgroup.controllers": "cpu memory pids",
          [`${own}/cgroup.controllers`]: "cpu memory pids",
          [`${own}/cgroup.procs`]: "4242\n",
        },
      }),
    );
    expect(plan.memory).toEqual({ ok: true, version: 2, parent: `${own}/boxes`, leaf: `${own}/daemon` });
  });

  test("v2 shared with other processes (a login session's scope): not enforced, with the reason", () => {
    const own = "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope";
    const plan = planCgroups(
      view({
        mountinfo: V2_MOUNTS,
        selfCgroup: "0::/user.slice/user-1000.slice/session-2.scope\n",
        writable: [own],
        files: {
          "/sys/fs/cgroup/cgroup.controllers": "cpu memory pids",
          [`${own}/cgroup.controllers`]: "memory pids",
          [`${own}/cgroup.procs`]: "4242\n1234\n",
        },
      }),
    );
    expect(plan.pids.ok).toBe(false);
    expect((plan.pids as { why: string }).why).toContain("shares its group");
    expect((plan.cpu as { why: string }).why).toContain("does not pass the cpu controller down");
  });

  test("v2 not delegated: not enforced, naming the fix", () => {
    const plan = planCgroups(
      view({
        mountinfo: V2_MOUNTS,
        selfCgroup: "0::/user.slice\n",
        writable: [],
        files: { "/sys/fs/cgroup/cgroup.controllers": "memory pids cpu" },
      }),
    );
    expect((plan.memory as { why: string }).why).toContain("Delegate=yes");
  });

  test("a controller on neither hierarchy is reported missing", () => {
    const plan = planCgroups(
      view({
        mountinfo: "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw",
        selfCgroup: "0::/\n",
        writable: ["/sys/fs/cgroup"],
        files: { "/sys/fs/cgroup/cgroup.controllers": "memory" },
      }),
    );
    expect(plan.memory.ok).toBe(true);
    expect((plan.pids as { why: string }).why).toContain("does not offer the pids controller");
  });
});

describe("subordinate ids", () => {
  test("/etc/subuid's hutch entry is used; malformed or too small entries are not", () => {
    expect(parseSubid("root:100000:65536\nhutch:200000000:1000000000\n")).toEqual({ base: 200000000, count: 1000000000 });
    expect(parseSubid("hutch:1:100\n")).toBeNull();
    expect(parseSubid("hutch:x:y\n")).toBeNull();
    expect(parseSubid("")).toBeNull();
  });

  test("a slot is found from the box id's hash, skipping taken ones, and is the same for the same id", () => {
    const a = pickSlot("box_a", 1000, new Set());
    expect(pickSlot("box_a", 1000, new Set())).toBe(a);
    expect(pickSlot("box_a", 1000, new Set([a]))).toBe((a + 1) % 1000);
    expect(() => pickSlot("box_a", 2, new Set([0, 1]))).toThrow("all 2 id blocks are in use");
  });

  test("boxes of one home never share a block, and keep theirs for life", () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-idmap-"));
    try {
      const ranges = {
        uid: { base: 5_000_000, count: 3 * BLOCK, source: "test" },
        gid: { base: 7_000_000, count: 3 * BLOCK, source: "test" },
      };
      const ids = ["box_1", "box_2", "box_3"].map((id) => {
        require("node:fs").mkdirSync(join(dir, id));
        return boxIdentity(dir, id, ranges);
      });
      expect(new Set(ids.map((i) => i.block)).size).toBe(3);
      for (const i of ids) {
        expect(i.uid).toBe(5_000_000 + i.block * BLOCK + BOX_USER);
        expect(i.gid).toBe(7_000_000 + i.block * BLOCK + BOX_USER);
      }
      expect(boxIdentity(dir, "box_2", ranges)).toEqual(ids[1]!);
      expect(JSON.parse(readFileSync(join(dir, "box_2", "identity.json"), "utf8"))).toEqual(ids[1]!);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the default range stays below 2^31, which tools treat as signed", () => {
    expect(DEFAULT_RANGE.base + DEFAULT_RANGE.count).toBeLessThan(2 ** 31);
  });
});

describe("console logs as the host prints them", () => {
  test.each([
    ["colours and cursor moves", "a\x1b[31mred\x1b[0m\x1b[2J\x1b[Hb", "aredb"],
    ["a window title (OSC) ended by BEL or ST", "x\x1b]0;owned\x07y\x1b]2;t\x1b\\z", "xyz"],
    ["bare control bytes, keeping tab and newline", "a\x00b\x07c\td\ne\x7f", "abc\td\ne"],
    ["C1 controls", "a\u009bb\u0085c", "abc"],
  ])("%s are removed", (_what, input, out) => {
    expect(stripControls(input)).toBe(out);
  });

  test("only the end of a huge log is read, cut at a line start", () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-console-"));
    try {
      const path = join(dir, "console.log");
      writeFileSync(path, `${"x".repeat(200_000)}\nsecond to last\nlast \x1b[31mline\x1b[0m\n`);
      expect(consoleTailOf(path, 2)).toBe("second to last\nlast line");
      expect(consoleTailOf(path, 100)).not.toContain("xxxx\nsecond");
      expect(consoleTailOf(join(dir, "missing"))).toBe("(no console log)");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a log over its budget keeps its tail beside it and starts again, where an appending writer goes on", () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-console-"));
    try {
      const path = join(dir, "console.log");
      // The writer holds the log open with O_APPEND, as QEMU does with append=on.
      const fd = openSync(path, "a");
      writeSync(fd, `${"flood\n".repeat(50_000)}the last line before the trim\n`);
      expect(trimConsole(path, 1_000_000)).toBe(false);
      expect(trimConsole(path, 100_000)).toBe(true);
      expect(statSync(path).size).toBe(0);
      expect(statSync(`${path}.1`).size).toBeLessThan(CONSOLE_TAIL_BYTES + 200);
      expect(readFileSync(`${path}.1`, "utf8")).toStartWith("[hutch: 300030 bytes of console output before this were dropped");
      writeSync(fd, "written after the trim\n");
      closeSync(fd);
      expect(statSync(path).size).toBe("written after the trim\n".length);
      expect(consoleTailOf(path, 2)).toBe("the last line before the trim\nwritten after the trim");
      expect(trimConsole(join(dir, "missing"), 10)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test("sizes read and print as binary units", () => {
  expect(parseSize("16G")).toBe(16 * 1024 ** 3);
  expect(parseSize("512m")).toBe(512 * 1024 ** 2);
  expect(() => parseSize("1.5G")).toThrow("expected a number and a unit");
  expect(formatSize(64 * 1024 ** 2)).toBe("64MiB");
  expect(formatSize(4 * 1024 ** 3)).toBe("4GiB");
});
