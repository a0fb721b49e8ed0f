import { describe, expect, test } from "bun:test";
import { bwrapArgs, guestSocket, inheritedFds, SHARED_ETC, type BwrapSpec } from "../src/engine/process/bwrap-args.ts";

const base: BwrapSpec = {
  bwrap: "bwrap",
  boxId: "box_0000000000aaaaaaaaaa",
  hostname: "web",
  roots: { workspace: "/h/boxes/b/disk/workspace", home: "/h/boxes/b/disk/home" },
  system: [{ path: "/usr" }, { path: "/bin", symlink: "usr/bin" }, { path: "/lib", symlink: "usr/lib" }],
  etc: ["ssl", "alternatives"],
  fds: { block: 3, info: 4, guest: 5, passwd: 6, group: 7, hosts: 8, channel: 9, seccomp: 10 },
  mapped: false,
  tmpBytes: 2 * 1024 ** 3,
  runBytes: 16 * 1024 ** 2,
};

/** The value following a flag, for every occurrence. */
function after(args: string[], flag: string, width = 1): string[][] {
  const out: string[][] = [];
  args.forEach((a, i) => {
    if (a === flag) out.push(args.slice(i + 1, i + 1 + width));
  });
  return out;
}

/** The command bwrap runs: everything after "--". */
const command = (args: string[]) => args.slice(args.indexOf("--") + 1);

describe("bwrapArgs", () => {
  const args = bwrapArgs(base);

  test("every namespace is unshared, including the network, and nothing is shared back", () => {
    for (const ns of ["--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]) expect(args).toContain(ns);
    expect(args).not.toContain("--share-net");
    expect(args).not.toContain("--die-with-parent");
    expect(args).toContain("--new-session");
  });

  test.each([
    ["merged /usr symlinks are recreated as symlinks", "--symlink", 2, ["usr/bin", "/bin"]],
    ["system dirs are read-only", "--ro-bind", 2, ["/usr", "/usr"]],
    ["only the listed /etc entries are shared", "--ro-bind", 2, ["/etc/ssl", "/etc/ssl"]],
    ["the workspace is the box's own, writable", "--bind", 2, [base.roots.workspace, "/workspace"]],
    ["the home is the box's own, writable", "--bind", 2, [base.roots.home, "/home/hutch"]],
    ["passwd comes from a descriptor, not a host path", "--ro-bind-data", 2, ["6", "/etc/passwd"]],
    ["hosts comes from a descriptor, not a host path", "--ro-bind-data", 2, ["8", "/etc/hosts"]],
  ] as const)("%s", (_what, flag, width, pair) => {
    expect(after(args, flag, width)).toContainEqual([...pair]);
  });

  test("the guest runs from the descriptor the daemon opened, as the sandbox's pid 1, under the seccomp filter", () => {
    expect(command(args)).toEqual(["/.hutch/hutch-guest"]);
    expect(after(args, "--symlink", 2)).toContainEqual(["/proc/self/fd/5", "/.hutch/hutch-guest"]);
    expect(args).toContain("--as-pid-1");
    expect(after(args, "--seccomp")).toEqual([["10"]]);
    expect(args.indexOf("--seccomp")).toBeLessThan(args.indexOf("--"));
  });

  test("/tmp, /dev/shm and /run are size-capped tmpfs mounts; /tmp and /dev/shm are world-writable and sticky", () => {
    const at = (dest: string) => args.slice(args.indexOf(dest) - 5, args.indexOf(dest));
    expect(at("/tmp")).toEqual(["--perms", "1777", "--size", String(base.tmpBytes), "--tmpfs"]);
    expect(at("/dev/shm")).toEqual(["--perms", "1777", "--size", String(base.tmpBytes), "--tmpfs"]);
    expect(at("/run")).toEqual(["--perms", "0755", "--size", String(base.runBytes), "--tmpfs"]);
  });

  test("the /etc files the box user must read are 0644 (namespace root makes them in mapped mode)", () => {
    for (const f of ["/etc/passwd", "/etc/group", "/etc/hosts"])
      expect(args.slice(args.indexOf(f) - 4, args.indexOf(f) - 2)).toEqual(["--perms", "0644"]);
  });

  test("same-user mode: bwrap maps the box user itself and closes nested user namespaces", () => {
    expect(after(args, "--uid")).toEqual([["1000"]]);
    expect(args).toContain("--disable-userns");
    expect(after(args, "--block-fd")).toEqual([["3"]]);
    expect(args).not.toContain("--userns-block-fd");
    expect(args).not.toContain("--cap-add");
  });

  test("mapped mode: bwrap waits for the daemon's id map, and setpriv drops to the box user before the guest runs", () => {
    const m = bwrapArgs({ ...base, mapped: true });
    expect(after(m, "--userns-block-fd")).toEqual([["3"]]);
    expect(m).not.toContain("--uid");
    expect(m).not.toContain("--disable-userns");
    expect(after(m, "--cap-add")).toEqual([["CAP_SETUID"], ["CAP_SETGID"]]);
    const cmd = command(m);
    expect(cmd[0]).toBe("/usr/bin/setpriv");
    expect(cmd).toContain("--reuid=1000");
    expect(cmd).toContain("--regid=1000");
    expect(cmd).toContain("--clear-groups");
    expect(cmd).toContain("--inh-caps=-all");
    expect(cmd.at(-1)).toBe("/.hutch/hutch-guest");
  });

  test("the agent CLI cache is shared read-only, never writable, and only when given", () => {
    const withAgents = bwrapArgs({ ...base, agents: "/var/tmp/hutch-agents" });
    expect(after(withAgents, "--ro-bind", 2)).toContainEqual(["/var/tmp/hutch-agents", "/.hutch/agents"]);
    expect(after(withAgents, "--bind", 2).map(([src]) => src)).not.toContain("/var/tmp/hutch-agents");
    expect(args.join(" ")).not.toContain("/.hutch/agents");
  });

  test("the host's /etc as a whole, /root and /home are never bound", () => {
    const sources = [...after(args, "--bind", 2), ...after(args, "--ro-bind", 2)].map(([src]) => src);
    expect(sources).not.toContain("/etc");
    expect(sources).not.toContain("/root");
    expect(sources).not.toContain("/home");
    expect(sources).not.toContain("/etc/shadow");
    expect(SHARED_ETC).not.toContain("shadow");
    expect(SHARED_ETC).not.toContain("ssh");
  });

  test("the environment is cleared, then set: the box id is carried for process accounting, the inherited fds are named", () => {
    const clear = args.indexOf("--clearenv");
    expect(clear).toBeGreaterThan(0);
    const envs = after(args, "--setenv", 2);
    expect(envs).toContainEqual(["HUTCH_BOX_ID", base.boxId]);
    expect(envs).toContainEqual(["HOME", "/home/hutch"]);
    expect(envs).toContainEqual(["HUTCH_GUEST_INIT", "sandbox"]);
    expect(envs).toContainEqual(["HUTCH_GUEST_INHERITED_FDS", inheritedFds(base.fds).join(",")]);
    expect(inheritedFds(base.fds).sort((a, b) => a - b)).toEqual([3, 4, 5, 6, 7, 8, 9, 10]);
    expect(args.indexOf("--setenv")).toBeGreaterThan(clear);
  });

  test("the guest's channel socket is reached through a descriptor: no directory of the box's view holds it", () => {
    const envs = after(args, "--setenv", 2);
    expect(envs).toContainEqual(["HUTCH_GUEST_SOCKET", "/proc/self/fd/9/agent.sock"]);
    expect(guestSocket(base.fds)).toBe("/proc/self/fd/9/agent.sock");
    // A box process could rename a socket in any directory it can see and listen in its place.
    const dests = [...after(args, "--bind", 2), ...after(args, "--ro-bind", 2)].map(([, dest]) => dest);
    expect(dests.filter((d) => d?.startsWith("/run"))).toEqual([]);
    expect(args.join(" ")).not.toContain("/run/hutch");
  });

  test("a host without merged /usr binds the real directories", () => {
    const split = bwrapArgs({ ...base, system: [{ path: "/usr" }, { path: "/bin" }] });
    expect(after(split, "--ro-bind", 2)).toContainEqual(["/bin", "/bin"]);
    expect(after(split, "--symlink", 2).filter(([, dest]) => dest !== "/.hutch/hutch-guest")).toEqual([]);
  });
});
