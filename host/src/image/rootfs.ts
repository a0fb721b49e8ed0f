// The root filesystem tree: Debian minbase from debootstrap plus what a box
// expects (user hutch, /workspace, the /.hutch mountpoint), without apt caches.
import { chownSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TOOLS, run } from "./tools.ts";

export const SUITE = "bookworm";

/** What agents reach for first; all in bookworm main. */
export const PACKAGES = ["git", "ca-certificates", "curl", "nodejs", "python3", "procps", "iproute2", "less", "bash-completion"] as const;

export const GUEST_USER = { name: "hutch", uid: 1000, home: "/home/hutch" } as const;

/** Runs debootstrap; onLine gets its "I: Retrieving …" lines for the progress display. */
export async function debootstrap(dir: string, mirror: string, onLine: (line: string) => void): Promise<void> {
  await run([TOOLS.debootstrap.bin, "--variant=minbase", `--include=${PACKAGES.join(",")}`, SUITE, dir, mirror], {
    onLine: (l) => l.startsWith("I: ") && onLine(l.slice(3)),
  });
}

function emptyDir(path: string): void {
  for (const name of readdirSync(path)) rmSync(join(path, name), { recursive: true, force: true });
}

/** Adds the box user and mountpoints; drops what debootstrap copied from this host and the apt caches. */
export async function customize(dir: string): Promise<void> {
  await run([TOOLS.chroot.bin, dir, "useradd", "--create-home", "--home-dir", GUEST_USER.home, "--uid", String(GUEST_USER.uid), "--user-group", "--shell", "/bin/bash", GUEST_USER.name]);
  mkdirSync(join(dir, "workspace"), { mode: 0o755 });
  chownSync(join(dir, "workspace"), GUEST_USER.uid, GUEST_USER.uid);
  mkdirSync(join(dir, ".hutch"), { mode: 0o755 });
  // hutch-guest sets the real hostname from hutch.box= at boot.
  writeFileSync(join(dir, "etc/hostname"), "hutch\n");
  writeFileSync(join(dir, "etc/hosts"), "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
  // debootstrap copies the build host's resolver; the network (and its DNS) comes with the broker.
  rmSync(join(dir, "etc/resolv.conf"), { force: true });
  await run([TOOLS.chroot.bin, dir, "apt-get", "clean"]);
  emptyDir(join(dir, "var/lib/apt/lists"));
  mkdirSync(join(dir, "var/lib/apt/lists/partial"), { recursive: true });
  for (const log of ["var/log/bootstrap.log", "var/log/dpkg.log", "var/log/alternatives.log", "var/log/apt/history.log", "var/log/apt/term.log"]) {
    rmSync(join(dir, log), { force: true });
  }
}

/** "name=version" for every installed package, sorted, read from the tree's dpkg database. */
export async function installedPackages(dir: string): Promise<string[]> {
  const out = await run([TOOLS.dpkgQuery.bin, `--admindir=${join(dir, "var/lib/dpkg")}`, "-W", "-f", "${Package}=${Version}\n"]);
  return out.split("\n").filter(Boolean).sort();
}
