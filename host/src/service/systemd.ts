// `hutch service`: a systemd unit that runs `hutch serve` at boot, restarts it
// when it fails, and has it prove the host (doctor) before it serves. The unit
// is built as data by a pure function (tested as text); install writes it and
// an env file (the settings an admin edits, as Coder's coder.env), then asks
// systemd to reload and start it when systemd runs here.
//
// KillMode=process: stopping the service stops the daemon, not the boxes it
// started (they outlive the daemon, as with `hutch daemon`; the next start
// finds them again). Delegate=yes lets the daemon make each box's cgroup under
// its own.
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { HutchError } from "@hutch/shared/base";
import { env } from "../env.ts";

export type UnitScope = "system" | "user";

export interface UnitPaths {
  unit: string;
  env: string;
}

export const UNIT_NAME = "hutch.service";

/** Where the unit and its env file go: /etc for the system's, the user's config dir for a --user-unit. */
export function unitPaths(scope: UnitScope, configHome = env.xdgConfigHome()): UnitPaths {
  return scope === "system"
    ? { unit: `/etc/systemd/system/${UNIT_NAME}`, env: "/etc/hutch/hutch.env" }
    : { unit: join(configHome, "systemd/user", UNIT_NAME), env: join(configHome, "hutch/hutch.env") };
}

export interface UnitSpec {
  scope: UnitScope;
  /** The hutch binary the unit runs (absolute). */
  bin: string;
  /**
   * The daemon's home: the installing user's own, so the same user's CLI on
   * the server reaches it over the unix socket with no flag (hutch user add).
   */
  home: string;
  paths: UnitPaths;
}

export function unitText(s: UnitSpec): string {
  return `# Written by hutch service install; remove with: hutch service uninstall${s.scope === "user" ? " --user-unit" : ""}
# Settings live in ${s.paths.env}.
[Unit]
Description=hutch server: boxes for coding agents, served over TLS (hutch serve)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
EnvironmentFile=${s.paths.env}
# --doctor: boot a throwaway box per engine first, and refuse to serve (exit 3) when none works.
ExecStart=${s.bin} serve --doctor $HUTCH_SERVE_ARGS
Restart=on-failure
RestartSec=5s
# Boxes outlive the daemon: stopping the service stops hutch, not the boxes; the next start finds them.
KillMode=process
TimeoutStopSec=30s
${s.scope === "system" ? "Delegate=yes\nLimitNOFILE=65536\n" : ""}
[Install]
WantedBy=${s.scope === "system" ? "multi-user.target" : "default.target"}
`;
}

export function envText(s: UnitSpec): string {
  return `# hutch serve's settings, read by ${UNIT_NAME}; restart it after a change: systemctl ${s.scope === "user" ? "--user " : ""}restart hutch
# The daemon's state; the CLI of the user who installed the unit uses the same one by default.
HUTCH_HOME=${s.home}
# Every interface; clients pin the certificate's fingerprint (printed in the log and in every join string).
HUTCH_SERVE_ARGS=--listen 0.0.0.0:8443
# Your own certificate instead of the generated self-signed one:
# HUTCH_SERVE_ARGS=--listen 0.0.0.0:8443 --cert /etc/hutch/cert.pem --key /etc/hutch/key.pem
HUTCH_LOG_FORMAT=json
`;
}

/** systemctl, when systemd runs this machine; null otherwise (the files are written, the admin starts the unit). */
function systemctl(scope: UnitScope, ...args: string[]): { ok: boolean; out: string } | null {
  if (!existsSync("/run/systemd/system")) return null;
  const p = Bun.spawnSync(["systemctl", ...(scope === "user" ? ["--user"] : []), ...args], { stdout: "pipe", stderr: "pipe" });
  return { ok: p.exitCode === 0, out: `${p.stdout.toString()}${p.stderr.toString()}`.trim() };
}

export interface InstallResult {
  unit: string;
  env: string;
  /** Whether systemd was told (reload, enable --now); false: no systemd runs here. */
  started: boolean;
  next: string[];
}

/** Writes the unit and (when missing) its env file, then enables and starts it where systemd runs. */
export function install(s: UnitSpec): InstallResult {
  if (s.scope === "system" && process.getuid?.() !== 0)
    throw new HutchError(
      "denied",
      "a system unit is written to /etc and needs root",
      "run it with sudo, or install one for yourself: hutch service install --user-unit",
    );
  mkdirSync(dirname(s.paths.unit), { recursive: true });
  mkdirSync(dirname(s.paths.env), { recursive: true, mode: 0o700 });
  writeFileSync(s.paths.unit, unitText(s), { mode: 0o644 });
  // The env file is the admin's once written: a reinstall keeps their settings.
  if (!existsSync(s.paths.env)) writeFileSync(s.paths.env, envText(s), { mode: 0o600 });
  const ctl = (...a: string[]) => systemctl(s.scope, ...a);
  const u = s.scope === "user" ? "--user " : "";
  const reload = ctl("daemon-reload");
  if (!reload)
    return {
      unit: s.paths.unit,
      env: s.paths.env,
      started: false,
      next: [`systemctl ${u}daemon-reload`, `systemctl ${u}enable --now hutch`],
    };
  const enable = ctl("enable", "--now", UNIT_NAME);
  if (!enable?.ok) throw new HutchError("failed", `systemctl ${u}enable --now hutch: ${enable?.out}`, `see: journalctl ${u}-u hutch`);
  return {
    unit: s.paths.unit,
    env: s.paths.env,
    started: true,
    next: [
      `journalctl ${u}-u hutch -f`,
      ...(s.scope === "user" ? ["loginctl enable-linger  (so it starts at boot, not at your login)"] : []),
    ],
  };
}

/** Stops and disables the unit, and removes it and its env file. Idempotent. */
export function uninstall(scope: UnitScope, paths: UnitPaths): { removed: string[] } {
  systemctl(scope, "disable", "--now", UNIT_NAME);
  const removed = [paths.unit, paths.env].filter((p) => existsSync(p));
  for (const p of removed) rmSync(p, { force: true });
  systemctl(scope, "daemon-reload");
  return { removed };
}
