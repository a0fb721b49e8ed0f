// The root filesystem tree: Debian minbase from debootstrap plus what a box
// expects (user hutch, /workspace, the /.hutch mountpoint), without apt caches.
import { chownSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { listDates, type SuiteSource } from "./apt.ts";
import { TOOLS, run } from "./tools.ts";

export const SUITE = "bookworm";

/** What agents reach for first; all in bookworm main. */
export const PACKAGES = ["git", "ca-certificates", "curl", "nodejs", "python3", "procps", "iproute2", "less", "bash-completion"] as const;

/** Image profiles: what each adds to PACKAGES. `desktop` is what the browser and desktop tools run (guest/PROTOCOL.md). */
export const PROFILES = {
  base: [],
  desktop: ["chromium", "xvfb", "xdotool", "x11-apps", "xterm", "fonts-dejavu-core"],
} as const satisfies Record<string, readonly string[]>;
export type Profile = keyof typeof PROFILES;

export function profilePackages(profile: Profile): string[] {
  return [...PACKAGES, ...PROFILES[profile]];
}

export const GUEST_USER = { name: "hutch", uid: 1000, home: "/home/hutch" } as const;

/** Runs debootstrap; onLine gets its "I: Retrieving …" lines for the progress display. */
export async function debootstrap(dir: string, mirror: string, onLine: (line: string) => void): Promise<void> {
  await run([TOOLS.debootstrap.bin, "--variant=minbase", `--include=${PACKAGES.join(",")}`, SUITE, dir, mirror], {
    onLine: (l) => l.startsWith("I: ") && onLine(l.slice(3)),
  });
}

/** What an upgrade against the suite's updates did: each suite with the date its lists were published (null: unreachable), and the packages it changed. */
export interface Upgrade {
  sources: (SuiteSource & { date: string | null })[];
  upgraded: string[];
}

/**
 * Brings the tree's packages up to date with the suite's stable and security
 * updates (debootstrap installs the release as first published, plus point
 * releases): sources.list names all three suites, then apt-get update and
 * upgrade in the chroot. A suite whose mirror cannot be reached is reported
 * (date null) and the build goes on with what the others have; the release
 * itself must be there, since debootstrap just used it.
 */
export async function upgrade(dir: string, sources: SuiteSource[], onLine: (line: string) => void): Promise<Upgrade> {
  writeFileSync(join(dir, "etc/apt/sources.list"), sources.map((s) => `deb ${s.uri} ${s.suite} main\n`).join(""));
  // No service starts inside the build's chroot (a package's postinst would otherwise try).
  const policy = join(dir, "usr/sbin/policy-rc.d");
  writeFileSync(policy, "#!/bin/sh\nexit 101\n", { mode: 0o755 });
  const env = { DEBIAN_FRONTEND: "noninteractive", LC_ALL: "C" };
  try {
    // apt-get update exits 100 when any suite failed to download; which ones did is read from the lists below.
    await run([TOOLS.chroot.bin, dir, "apt-get", "-o", "Acquire::Retries=1", "-o", "Acquire::http::Timeout=30", "update"], {
      env,
      onLine: (l) => /^(Err|W|E):/.test(l) && onLine(l),
    }).catch((e: unknown) => onLine(`apt-get update: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`));
    const dated = listDates(sources, join(dir, "var/lib/apt/lists"));
    const before = new Set(await installedPackages(dir));
    await run([TOOLS.chroot.bin, dir, "apt-get", "-y", "-o", "Dpkg::Options::=--force-confold", "--no-install-recommends", "upgrade"], {
      env,
      onLine: (l) => l.startsWith("Unpacking ") && onLine(l),
    });
    const upgraded = (await installedPackages(dir)).filter((p) => !before.has(p));
    return { sources: dated, upgraded };
  } finally {
    rmSync(policy, { force: true });
  }
}

/**
 * Installs a profile's packages into the tree, without recommends, after the
 * upgrade: in debootstrap's own --include, Chromium's dependencies (dconf,
 * dbus) fail to configure in its second stage.
 */
export async function addPackages(dir: string, packages: readonly string[], onLine: (line: string) => void): Promise<void> {
  if (packages.length === 0) return;
  const policy = join(dir, "usr/sbin/policy-rc.d");
  writeFileSync(policy, "#!/bin/sh\nexit 101\n", { mode: 0o755 });
  try {
    await run(
      [TOOLS.chroot.bin, dir, "apt-get", "-y", "-o", "Dpkg::Options::=--force-confold", "--no-install-recommends", "install", ...packages],
      {
        env: { DEBIAN_FRONTEND: "noninteractive", LC_ALL: "C" },
        onLine: (l) => l.startsWith("Unpacking ") && onLine(l),
      },
    );
  } finally {
    rmSync(policy, { force: true });
  }
}

function emptyDir(path: string): void {
  for (const name of readdirSync(path)) rmSync(join(path, name), { recursive: true, force: true });
}

/** Adds the box user and mountpoints; drops what debootstrap copied from this host and the apt caches. */
export async function customize(dir: string): Promise<void> {
  await run([
    TOOLS.chroot.bin,
    dir,
    "useradd",
    "--create-home",
    "--home-dir",
    GUEST_USER.home,
    "--uid",
    String(GUEST_USER.uid),
    "--user-group",
    "--shell",
    "/bin/bash",
    GUEST_USER.name,
  ]);
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
  for (const log of [
    "var/log/bootstrap.log",
    "var/log/dpkg.log",
    "var/log/alternatives.log",
    "var/log/apt/history.log",
    "var/log/apt/term.log",
  ]) {
    rmSync(join(dir, log), { force: true });
  }
}

/** "name=version" for every installed package, sorted, read from the tree's dpkg database. */
export async function installedPackages(dir: string): Promise<string[]> {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format fields, not a template
  const out = await run([TOOLS.dpkgQuery.bin, `--admindir=${join(dir, "var/lib/dpkg")}`, "-W", "-f", "${Package}=${Version}\n"]);
  return out.split("\n").filter(Boolean).sort();
}
