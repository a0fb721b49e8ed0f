// The bubblewrap command line for a process-engine box, built as data by a
// pure function so it can be table-tested without starting anything.

/** How a top-level host directory appears: a symlink (merged /usr) or a real directory. */
export type HostEntry = { path: string; symlink?: string };

export interface BwrapSpec {
  bwrap: string;
  boxId: string;
  hostname: string;
  boxDir: string;
  guestBinary: string;
  /** Top-level system paths to expose read-only (merged-/usr symlinks are recreated as symlinks). */
  system: HostEntry[];
  /** /etc entries that exist on the host and are safe to share read-only. */
  etc: string[];
  /** The host's agent CLI cache, shared read-only at GUEST_AGENTS (host/src/harness/install.ts). */
  agents?: string;
}

export const GUEST_UID = 1000;
export const GUEST_HOME = "/home/hutch";
export const GUEST_WORKSPACE = "/workspace";
export const GUEST_RUN = "/run/hutch";
export const GUEST_BIN = "/.hutch/hutch-guest";
export const GUEST_AGENTS = "/.hutch/agents";

/**
 * Host /etc entries a box may see. The rest of /etc (shadow, ssh keys, the
 * host's own config) stays out: inside the user namespace root-owned files
 * would appear owned by the box user.
 */
export const SHARED_ETC = [
  "alternatives", "bash.bashrc", "ca-certificates", "debian_version", "gitconfig", "inputrc",
  "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf",
  "os-release", "profile", "profile.d", "protocols", "services", "ssl", "terminfo",
];

export function bwrapArgs(s: BwrapSpec): string[] {
  const args = [
    s.bwrap,
    "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    "--uid", String(GUEST_UID), "--gid", String(GUEST_UID),
    "--hostname", s.hostname,
    // A new session keeps a box process from pushing input into the host's terminal (TIOCSTI).
    "--new-session",
  ];
  for (const e of s.system) {
    if (e.symlink) args.push("--symlink", e.symlink, e.path);
    else args.push("--ro-bind", e.path, e.path);
  }
  for (const name of s.etc) args.push("--ro-bind", `/etc/${name}`, `/etc/${name}`);
  args.push(
    "--ro-bind", `${s.boxDir}/etc/passwd`, "/etc/passwd",
    "--ro-bind", `${s.boxDir}/etc/group`, "/etc/group",
    "--ro-bind", `${s.boxDir}/etc/hosts`, "/etc/hosts",
    "--proc", "/proc",
    "--dev", "/dev",
    "--tmpfs", "/tmp",
    "--tmpfs", "/run",
    "--bind", `${s.boxDir}/run`, GUEST_RUN,
    "--bind", `${s.boxDir}/workspace`, GUEST_WORKSPACE,
    "--bind", `${s.boxDir}/home`, GUEST_HOME,
    "--ro-bind", s.guestBinary, GUEST_BIN,
    ...(s.agents ? ["--ro-bind", s.agents, GUEST_AGENTS] : []),
    "--chdir", GUEST_WORKSPACE,
    "--clearenv",
    "--setenv", "HOME", GUEST_HOME,
    "--setenv", "USER", "hutch",
    "--setenv", "LOGNAME", "hutch",
    "--setenv", "SHELL", "/bin/bash",
    "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
    "--setenv", "LANG", "C.UTF-8",
    "--setenv", "TERM", "xterm-256color",
    "--setenv", "HUTCH_BOX_ID", s.boxId,
    "--setenv", "HUTCH_GUEST_SOCKET", `${GUEST_RUN}/agent.sock`,
    "--setenv", "HUTCH_GUEST_ROOTS", `${GUEST_WORKSPACE}:${GUEST_HOME}`,
    GUEST_BIN,
  );
  return args;
}

export function passwdFile(): string {
  return `root:x:0:0:root:/root:/bin/sh\nhutch:x:${GUEST_UID}:${GUEST_UID}:hutch:${GUEST_HOME}:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`;
}

export function groupFile(): string {
  return `root:x:0:\nhutch:x:${GUEST_UID}:\nnogroup:x:65534:\n`;
}

export function hostsFile(hostname: string): string {
  return `127.0.0.1\tlocalhost\n127.0.1.1\t${hostname}\n::1\tlocalhost ip6-localhost ip6-loopback\n`;
}
