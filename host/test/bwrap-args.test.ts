import { describe, expect, test } from "bun:test";
import { bwrapArgs, SHARED_ETC, type BwrapSpec } from "../src/engine/process/bwrap-args.ts";

const base: BwrapSpec = {
  bwrap: "bwrap",
  boxId: "box_0000000000aaaaaaaaaa",
  hostname: "web",
  boxDir: "/h/boxes/box_0000000000aaaaaaaaaa",
  guestBinary: "/h/guest/abc/hutch-guest",
  system: [{ path: "/usr" }, { path: "/bin", symlink: "usr/bin" }, { path: "/lib", symlink: "usr/lib" }],
  etc: ["ssl", "alternatives"],
};

/** The value following a flag, for every occurrence. */
function after(args: string[], flag: string, width = 1): string[][] {
  const out: string[][] = [];
  args.forEach((a, i) => a === flag && out.push(args.slice(i + 1, i + 1 + width)));
  return out;
}

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
    ["the workspace is the box's own, writable", "--bind", 2, [`${base.boxDir}/workspace`, "/workspace"]],
    ["the home is the box's own, writable", "--bind", 2, [`${base.boxDir}/home`, "/home/hutch"]],
    ["the guest binary is read-only", "--ro-bind", 2, [base.guestBinary, "/.hutch/hutch-guest"]],
  ] as const)("%s", (_what, flag, width, pair) => {
    expect(after(args, flag, width)).toContainEqual([...pair]);
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

  test("the environment is cleared, then set: the box id is carried for process accounting", () => {
    const clear = args.indexOf("--clearenv");
    expect(clear).toBeGreaterThan(0);
    const envs = after(args, "--setenv", 2);
    expect(envs).toContainEqual(["HUTCH_BOX_ID", base.boxId]);
    expect(envs).toContainEqual(["HOME", "/home/hutch"]);
    expect(args.indexOf("--setenv")).toBeGreaterThan(clear);
    expect(args.at(-1)).toBe("/.hutch/hutch-guest");
  });

  test("a host without merged /usr binds the real directories", () => {
    const split = bwrapArgs({ ...base, system: [{ path: "/usr" }, { path: "/bin" }] });
    expect(after(split, "--ro-bind", 2)).toContainEqual(["/bin", "/bin"]);
    expect(after(split, "--symlink", 2)).toEqual([]);
  });
});
