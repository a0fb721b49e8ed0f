// The QEMU command line as data, against reviewed golden files: one per
// OS/arch/accelerator. A change shows up as a diff of argv, one arg a line.
// After an intended change: UPDATE_GOLDEN=1 bun test host/test/qemu-args.test.ts, then review the diff.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { qemuArgs, type QemuSpec } from "../src/engine/qemu/args.ts";

const base = {
  boxId: "box_0000000000aaaaaaaaaa",
  name: "web",
  cpus: 2,
  memoryMiB: 1024,
  kernel: "/h/images/default/vmlinuz",
  initrd: "/h/images/default/initramfs.img",
  cmdline: "",
  rootDisk: "/h/boxes/box_0000000000aaaaaaaaaa/disk.qcow2",
  guestDisk: "/h/guest/abc/guest.img",
  guestDiskBytes: 130 * 1024 * 1024,
  imageHasPmem: true,
  agent: "/h/boxes/box_0000000000aaaaaaaaaa/agent.sock",
  qmp: "/h/boxes/box_0000000000aaaaaaaaaa/qmp.sock",
  consoleLog: "/h/boxes/box_0000000000aaaaaaaaaa/console.log",
  pidfile: "/h/boxes/box_0000000000aaaaaaaaaa/qemu.pid",
};

const cases: [string, QemuSpec][] = [
  ["linux-x86_64-kvm", { ...base, platform: "linux", arch: "x86_64", accel: "kvm" }],
  ["linux-x86_64-tcg", { ...base, platform: "linux", arch: "x86_64", accel: "tcg" }],
  ["darwin-aarch64-hvf", { ...base, platform: "darwin", arch: "aarch64", accel: "hvf" }],
  [
    "windows-x86_64-whpx",
    {
      ...base,
      platform: "windows",
      arch: "x86_64",
      accel: "whpx",
      agent: "\\\\.\\pipe\\hutch-box_0000000000aaaaaaaaaa-agent",
      qmp: "\\\\.\\pipe\\hutch-box_0000000000aaaaaaaaaa-qmp",
    },
  ],
];

describe("qemuArgs golden", () => {
  test.each(cases)("%s", (name, spec) => {
    const file = join(import.meta.dir, "golden", `qemu-${name}.txt`);
    const got = `${qemuArgs(spec).join("\n")}\n`;
    if (process.env.UPDATE_GOLDEN === "1" || !existsSync(file)) writeFileSync(file, got);
    expect(got).toBe(readFileSync(file, "utf8"));
  });

  test("an image built before virtio-pmem gets its guest disk as vdb", () => {
    const a = qemuArgs({ ...base, platform: "linux", arch: "x86_64", accel: "tcg", imageHasPmem: false });
    expect(a.join(" ")).toContain("hutch.guest=vdb");
    expect(a).toContain("if=none,id=guest,file=/h/guest/abc/guest.img,format=raw,readonly=on");
    expect(a.join(" ")).not.toContain("pmem");
    expect(a[a.indexOf("-m") + 1]).toBe("1024M");
  });

  test("a root daemon's VM drops to the box's own host uid once its files are open (set*id allowed for that drop only)", () => {
    const a = qemuArgs({ ...base, platform: "linux", arch: "x86_64", accel: "tcg", runAs: { uid: 1000001000, gid: 1000001000 } });
    expect(a[a.indexOf("-runas") + 1]).toBe("1000001000:1000001000");
    expect(a[a.indexOf("-sandbox") + 1]).toContain("elevateprivileges=allow");
    const root = qemuArgs({ ...base, platform: "linux", arch: "x86_64", accel: "tcg" });
    expect(root).not.toContain("-runas");
    expect(root.join(" ")).not.toContain("fdset");
    expect(root[root.indexOf("-sandbox") + 1]).toContain("elevateprivileges=deny");
  });

  test("a root disk handed over open is the fd set of its two fds, so a QEMU that dropped its uid can reopen it read-only to sleep", () => {
    const a = qemuArgs({ ...base, platform: "linux", arch: "x86_64", accel: "tcg", runAs: { uid: 7, gid: 7 }, rootDiskFds: [3, 4] });
    expect(a.slice(a.indexOf("-add-fd"), a.indexOf("-add-fd") + 4)).toEqual([
      "-add-fd",
      "fd=3,set=1,opaque=rw",
      "-add-fd",
      "fd=4,set=1,opaque=ro",
    ]);
    expect(a).toContain("if=none,id=root,file=/dev/fdset/1,format=qcow2,cache=writeback,discard=unmap");
  });

  test("agent CLI disks ride with the guest disk: pmem devices (one slot each) on q35, serial-named virtio-blk elsewhere, named on the command line in order", () => {
    const agentDisks = [
      { name: "claude-2.1.332", path: "/c/claude-2.1.332.v2.img", bytes: 480 * 1024 * 1024 },
      { name: "pi-0.73.1", path: "/c/pi-0.73.1.v2.img", bytes: 256 * 1024 * 1024 },
    ];
    const tcg = qemuArgs({ ...base, platform: "linux", arch: "x86_64", accel: "tcg", agentDisks });
    expect(tcg[tcg.indexOf("-m") + 1]).toBe(`1024M,slots=3,maxmem=${1024 + 130 + 480 + 256}M`);
    expect(tcg).toContain("memory-backend-file,id=agent0,mem-path=/c/claude-2.1.332.v2.img,size=503316480,share=off,readonly=on");
    expect(tcg).toContain("virtio-pmem-pci,memdev=agent1,id=agent1disk");
    expect(tcg.join(" ")).toContain("hutch.agents=claude-2.1.332,pi-0.73.1 hutch.agentdev=pmem");
    const kvm = qemuArgs({ ...base, platform: "linux", arch: "x86_64", accel: "kvm", agentDisks });
    expect(kvm).toContain("if=none,id=agent1,file=/c/pi-0.73.1.v2.img,format=raw,readonly=on");
    expect(kvm).toContain("virtio-blk-device,drive=agent1,serial=agent1");
    expect(kvm.join(" ")).toContain("hutch.agentdev=blk");
    expect(qemuArgs({ ...base, platform: "linux", arch: "x86_64", accel: "tcg" }).join(" ")).not.toContain("hutch.agents");
  });

  test("the hardening every box gets", () => {
    for (const [, spec] of cases) {
      const a = qemuArgs(spec);
      expect(a).toContain("-nodefaults");
      expect(a).toContain("-no-user-config");
      expect(a).toContain("-no-reboot");
      expect(a.join(" ")).toContain("name=hutch.agent");
      expect(a.join(" ")).toContain("readonly=on");
      if (spec.platform === "linux") expect(a[a.indexOf("-sandbox") + 1]).toContain("spawn=deny");
      expect(a).not.toContain("-daemonize");
    }
  });
});
