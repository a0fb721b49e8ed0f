// The bubblewrap command line for a process-engine box, built as data by a
// pure function so it can be table-tested without starting anything.
//
// Two ways to give the box its user (uid 1000 inside):
//   mapped (the daemon is root): box uid 1000 is the box's own unprivileged
//     host uid (host/src/engine/idmap.ts), never host root. bwrap waits on
//     --userns-block-fd while the daemon writes the namespace's id maps, then
//     sets the box up as namespace root (host root owns what it binds, so it
//     may read it) and execs setpriv, which drops to uid 1000 with no
//     capabilities before the guest runs. Nested user namespaces are refused
//     by the seccomp filter (bwrap's --disable-userns cannot be combined with
//     an id map written from outside).
//   same-user (the daemon is not root): box uid 1000 is the daemon's own uid,
//     as with any rootless sandbox; --disable-userns closes nested namespaces.
// Either way the guest binary is executed from a file descriptor the daemon
// opened and the small /etc files are copied in from descriptors, so no path
// of the host's appears in the box's mount table for them; the writable roots
// come from the box's own disk when it has one (./disk.ts). The guest's
// channel socket lives in a host directory the box's mount table does not
// have: the guest binds it through a descriptor of that directory, so no box
// process can rename or replace it (README.md beside this file).

/**
 * The guest's JavaScript engine makes no threads after it starts: no
 * concurrent JIT, no concurrent or parallel GC marking. pids.max counts
 * threads, and Bun aborts when it cannot create one, so a box whose programs
 * take every pid of its limit (a fork bomb) took its guest down with it;
 * with these the guest serves on, and a spawn at the limit fails with
 * EAGAIN. The guest removes them from the environment its programs get.
 */
export const GUEST_RUNTIME_ENV: [string, string][] = [
  ["BUN_JSC_useConcurrentJIT", "0"],
  ["BUN_JSC_useConcurrentGC", "0"],
  ["BUN_JSC_numberOfGCMarkers", "1"],
];

/** How a top-level host directory appears: a symlink (merged /usr) or a real directory. */
export type HostEntry = { path: string; symlink?: string };

/** Descriptors the daemon hands bwrap, by number in the child. */
export interface BwrapFds {
  /** bwrap waits to read a byte here: the id maps are written and the box joined its cgroups. */
  block: number;
  /** bwrap writes {"child-pid": N} here once the box's first process exists. */
  info: number;
  /** The compiled seccomp filter (./seccomp.ts). */
  seccomp?: number;
  /** The guest binary, opened read-only; executed as /proc/self/fd/N. */
  guest: number;
  /** The host directory of the guest's channel socket; the guest binds /proc/self/fd/N/agent.sock. */
  channel: number;
  passwd: number;
  group: number;
  hosts: number;
}

export interface BwrapSpec {
  bwrap: string;
  boxId: string;
  hostname: string;
  /** Host directories for the box's writable roots. */
  roots: { workspace: string; home: string };
  /** Top-level system paths to expose read-only (merged-/usr symlinks are recreated as symlinks). */
  system: HostEntry[];
  /** /etc entries that exist on the host and are safe to share read-only. */
  etc: string[];
  /** The host's agent CLI cache, shared read-only at GUEST_AGENTS (host/src/harness/install.ts). */
  agents?: string;
  fds: BwrapFds;
  /** The daemon maps the box user onto the box's own host uid (root daemons); see the header. */
  mapped: boolean;
  /** Size caps for the box's memory-backed filesystems. */
  tmpBytes?: number;
  runBytes?: number;
  /** setpriv (util-linux), which drops to the box user in mapped mode. */
  setpriv?: string;
}

export const GUEST_UID = 1000;
export const GUEST_HOME = "/home/hutch";
export const GUEST_WORKSPACE = "/workspace";
export const GUEST_AGENTS = "/.hutch/agents";
/** A symlink to the descriptor of the guest binary: exec resolves it in the exec'ing process, and ps shows this name. */
export const GUEST_BIN = "/.hutch/hutch-guest";

/**
 * Host /etc entries a box may see. The rest of /etc (shadow, ssh keys, the
 * host's own config) stays out: inside the user namespace root-owned files
 * would appear owned by the box user.
 */
export const SHARED_ETC = [
  "alternatives",
  "bash.bashrc",
  "ca-certificates",
  "debian_version",
  "fonts",
  "gitconfig",
  "inputrc",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "localtime",
  "mime.types",
  "nsswitch.conf",
  "os-release",
  "profile",
  "profile.d",
  "protocols",
  "services",
  "ssl",
  "terminfo",
];

export function bwrapArgs(s: BwrapSpec): string[] {
  const args = [
    s.bwrap,
    "--unshare-user",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(s.mapped
      ? ["--userns-block-fd", String(s.fds.block), "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
      : ["--uid", String(GUEST_UID), "--gid", String(GUEST_UID), "--disable-userns", "--block-fd", String(s.fds.block)]),
    "--info-fd",
    String(s.fds.info),
    // The guest is the pid namespace's init: no bwrap process (which would be host root in mapped mode) stays in the box.
    "--as-pid-1",
    "--hostname",
    s.hostname,
    // A new session keeps a box process from pushing input into the host's terminal (TIOCSTI).
    "--new-session",
  ];
  for (const e of s.system) {
    if (e.symlink) args.push("--symlink", e.symlink, e.path);
    else args.push("--ro-bind", e.path, e.path);
  }
  // Directories bwrap would otherwise make 0700 as namespace root, which the box user could not enter in mapped mode.
  for (const dir of ["/etc", "/home", "/.hutch"]) args.push("--perms", "0755", "--dir", dir);
  for (const name of s.etc) args.push("--ro-bind", `/etc/${name}`, `/etc/${name}`);
  args.push(
    // Namespace root makes these in mapped mode: --perms gives the box user what it had as their owner before.
    "--perms",
    "0644",
    "--ro-bind-data",
    String(s.fds.passwd),
    "/etc/passwd",
    "--perms",
    "0644",
    "--ro-bind-data",
    String(s.fds.group),
    "/etc/group",
    "--perms",
    "0644",
    "--ro-bind-data",
    String(s.fds.hosts),
    "/etc/hosts",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    ...tmpfs("/dev/shm", "1777", s.tmpBytes),
    ...tmpfs("/tmp", "1777", s.tmpBytes),
    ...tmpfs("/run", "0755", s.runBytes),
    "--bind",
    s.roots.workspace,
    GUEST_WORKSPACE,
    "--bind",
    s.roots.home,
    GUEST_HOME,
    ...(s.agents ? ["--ro-bind", s.agents, GUEST_AGENTS] : []),
    "--symlink",
    `/proc/self/fd/${s.fds.guest}`,
    GUEST_BIN,
    "--chdir",
    GUEST_WORKSPACE,
    "--clearenv",
    "--setenv",
    "HOME",
    GUEST_HOME,
    "--setenv",
    "USER",
    "hutch",
    "--setenv",
    "LOGNAME",
    "hutch",
    "--setenv",
    "SHELL",
    "/bin/bash",
    "--setenv",
    "PATH",
    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
    "--setenv",
    "LANG",
    "C.UTF-8",
    "--setenv",
    "TERM",
    "xterm-256color",
    ...GUEST_RUNTIME_ENV.flatMap(([k, v]) => ["--setenv", k, v]),
    "--setenv",
    "HUTCH_BOX_ID",
    s.boxId,
    "--setenv",
    "HUTCH_GUEST_INIT",
    "sandbox",
    "--setenv",
    "HUTCH_GUEST_SOCKET",
    guestSocket(s.fds),
    "--setenv",
    "HUTCH_GUEST_ROOTS",
    `${GUEST_WORKSPACE}:${GUEST_HOME}`,
    "--setenv",
    "HUTCH_GUEST_INHERITED_FDS",
    inheritedFds(s.fds).join(","),
    ...(s.fds.seccomp !== undefined ? ["--seccomp", String(s.fds.seccomp)] : []),
    "--",
    ...(s.mapped
      ? [
          s.setpriv ?? "/usr/bin/setpriv",
          `--reuid=${GUEST_UID}`,
          `--regid=${GUEST_UID}`,
          "--clear-groups",
          "--inh-caps=-all",
          "--bounding-set=-all",
          "--no-new-privs",
          "--",
        ]
      : []),
    GUEST_BIN,
  );
  return args;
}

function tmpfs(dest: string, perms: string, bytes: number | undefined): string[] {
  return ["--perms", perms, ...(bytes ? ["--size", String(bytes)] : []), "--tmpfs", dest];
}

/** The descriptors that reach the guest only because bwrap inherited them: it marks them close-on-exec at start. */
export function inheritedFds(fds: BwrapFds): number[] {
  return [fds.block, fds.info, fds.seccomp, fds.guest, fds.channel, fds.passwd, fds.group, fds.hosts].filter(
    (n): n is number => n !== undefined,
  );
}

/** Where the guest listens: in the channel directory, reached through its descriptor (no path of the box's names it). */
export function guestSocket(fds: BwrapFds): string {
  return `/proc/self/fd/${fds.channel}/agent.sock`;
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
