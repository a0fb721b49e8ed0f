// The pure parts of PID 1's init: kernel command line, mount table, the box
// environment, the channel spec, and the reaper's decisions (with a scripted
// waitid standing in for the kernel, which a test cannot make PID 1's parent).
import { describe, expect, test } from "bun:test";
import { parseChannel } from "../src/config.ts";
import { parseCmdline, splitCmdline } from "../src/init/cmdline.ts";
import { boxEnv } from "../src/init/index.ts";
import { mountPoints, unmountOrder } from "../src/init/mounts.ts";
import { Reaper, type WaitApi } from "../src/init/reaper.ts";

describe("kernel command line", () => {
  const cases: Array<[string, { box?: string; boxId?: string; refused: number }]> = [
    [
      "console=ttyS0 panic=-1 quiet rdinit=/init hutch.box=web-1 hutch.id=box_0123456789abcdefghij\n",
      { box: "web-1", boxId: "box_0123456789abcdefghij", refused: 0 },
    ],
    ["hutch.box=Web hutch.id=box_short", { refused: 2 }],
    ["hutch.box=-web hutch.box=web- hutch.box=we_b hutch.box=", { refused: 4 }],
    [`hutch.box=${"a".repeat(63)}`, { box: "a".repeat(63), refused: 0 }],
    [`hutch.box=${"a".repeat(64)}`, { refused: 1 }],
    ["hutch.id=box_0123456789ABCDEFGHIJ", { refused: 1 }],
    ["quiet", { refused: 0 }],
    ['x="a b" hutch.box="t1"', { box: "t1", refused: 0 }],
  ];
  for (const [text, want] of cases) {
    test(JSON.stringify(text.slice(0, 60)), () => {
      const p = parseCmdline(text);
      expect(p.box).toBe(want.box);
      expect(p.boxId).toBe(want.boxId);
      expect(p.refused.length).toBe(want.refused);
    });
  }
  test("quotes group words", () => {
    expect(splitCmdline('a "b c"=d e="f g" h')).toEqual(["a", "b c=d", "e=f g", "h"]);
  });
});

describe("mount table", () => {
  const table = [
    "/dev/vda / ext4 rw,relatime 0 0",
    "proc /proc proc rw 0 0",
    "sysfs /sys sysfs rw 0 0",
    "devtmpfs /dev devtmpfs rw 0 0",
    "/dev/vdb /.hutch ext4 ro 0 0",
    "devpts /dev/pts devpts rw 0 0",
    "tmpfs /tmp/with\\040space tmpfs rw 0 0",
    "",
  ].join("\n");
  test("mount points decode octal escapes", () => {
    expect(mountPoints(table)).toEqual(["/", "/proc", "/sys", "/dev", "/.hutch", "/dev/pts", "/tmp/with space"]);
  });
  test("unmount order: latest first, never / or the kernel's own", () => {
    expect(unmountOrder(mountPoints(table))).toEqual(["/tmp/with space", "/dev/pts", "/.hutch"]);
  });
});

describe("box environment", () => {
  test("built from scratch, keeping only HUTCH_GUEST_* from the kernel", () => {
    const env = boxEnv({ HOME: "/", TERM: "linux", PWD: "/", SHLVL: "1", HUTCH_GUEST_DEBUG: "1" }, "box_0123456789abcdefghij", "/bin/bash");
    expect(env).toEqual({
      HOME: "/home/hutch",
      USER: "hutch",
      LOGNAME: "hutch",
      SHELL: "/bin/bash",
      PATH: "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
      LANG: "C.UTF-8",
      TERM: "xterm-256color",
      HUTCH_GUEST_CHANNEL: "vport:hutch.agent",
      HUTCH_BOX_ID: "box_0123456789abcdefghij",
      HUTCH_GUEST_DEBUG: "1",
    });
  });
  test("no box id, no HUTCH_BOX_ID; the kernel command line may choose the channel", () => {
    const env = boxEnv({ HUTCH_GUEST_CHANNEL: "unix:/run/a.sock" }, undefined, "/bin/sh");
    expect(env.HUTCH_BOX_ID).toBeUndefined();
    expect(env.HUTCH_GUEST_CHANNEL).toBe("unix:/run/a.sock");
  });
});

describe("channel spec", () => {
  test("unix and vport", () => {
    expect(parseChannel("unix:/run/hutch/agent.sock")).toEqual({ kind: "unix", path: "/run/hutch/agent.sock" });
    expect(parseChannel("vport:hutch.agent")).toEqual({ kind: "vport", name: "hutch.agent" });
  });
  for (const bad of ["", "unix:", "vport:", "tcp:1.2.3.4:5", "/run/x.sock"]) {
    test(`refuses ${JSON.stringify(bad)}`, () => expect(() => parseChannel(bad)).toThrow(/HUTCH_GUEST_CHANNEL/));
  }
});

/** A scripted process tree: children with an exited flag, reaped in waitid's order (oldest first). */
function fakeKernel(children: Array<{ pid: number; exited: boolean }>) {
  const reaped: number[] = [];
  let peeks = 0;
  const api: WaitApi = {
    peek() {
      peeks++;
      if (children.length === 0) return null;
      return children.find((c) => c.exited)?.pid ?? 0;
    },
    reap(pid) {
      const i = children.findIndex((c) => c.pid === pid && c.exited);
      if (i < 0) return false;
      children.splice(i, 1);
      reaped.push(pid);
      return true;
    },
    children: () => children.map((c) => c.pid),
  };
  return { api, reaped, peeks: () => peeks, children };
}

describe("reaper", () => {
  test("reaps exited orphans, leaves running ones", () => {
    const k = fakeKernel([
      { pid: 10, exited: true },
      { pid: 11, exited: false },
      { pid: 12, exited: true },
    ]);
    expect(new Reaper(k.api, () => false).sweep()).toBe(2);
    expect(k.reaped).toEqual([10, 12]);
    expect(k.children.map((c) => c.pid)).toEqual([11]);
  });

  test("never reaps a pid the guest spawned, and finds the orphans behind it", () => {
    const k = fakeKernel([
      { pid: 20, exited: true }, // Bun's own, not yet collected by Bun
      { pid: 21, exited: true },
      { pid: 22, exited: false },
      { pid: 23, exited: true },
    ]);
    const owned = new Set([20, 22]);
    expect(new Reaper(k.api, (p) => owned.has(p)).sweep()).toBe(2);
    expect(k.reaped).toEqual([21, 23]);
    expect(k.children.map((c) => c.pid)).toEqual([20, 22]);
  });

  test("no children: one peek, nothing else", () => {
    const k = fakeKernel([]);
    expect(new Reaper(k.api, () => false).sweep()).toBe(0);
    expect(k.peeks()).toBe(1);
  });

  test("children but none exited: one peek", () => {
    const k = fakeKernel([{ pid: 30, exited: false }]);
    expect(new Reaper(k.api, () => false).sweep()).toBe(0);
    expect(k.peeks()).toBe(1);
  });

  test("a storm of orphans is bounded per sweep", () => {
    const k = fakeKernel(Array.from({ length: 1000 }, (_, i) => ({ pid: 1000 + i, exited: true })));
    const r = new Reaper(k.api, () => false);
    // The peek loop stops after its cap; the pid scan behind it only runs when a peek was refused.
    expect(r.sweep()).toBe(256);
    while (r.sweep() > 0);
    expect(k.children.length).toBe(0);
    expect(r.reaped).toBe(1000);
  });
});
