// `hutch session move SESSION --remote R`: a local session and its box's work
// continue on a remote daemon. The box's /workspace comes out through the safe
// unpacker and goes into a new box of the same name there; a new session on
// it (same agent and label) gets the local log's events first, each imported
// with its actor and time (`session.event.imported`), then `session.arrived`;
// the local log ends with `session.moved` naming where it went, and the local
// box is stopped, not deleted. Through the two daemons' APIs only.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { type Box, Events, emit, type Session } from "@hutch/shared";
import { HutchError } from "@hutch/shared/base";
import type { DaemonClient } from "../client/daemon.ts";
import { fetchDir, findBox, runningBox, sendDir } from "./box.ts";
import { appendLog } from "./session-log.ts";

export interface MoveResult {
  from: { session: string; box: string };
  to: { remote: string; session: string; box: string };
  /** Entries of /workspace carried, and the local log's events now at the head of the remote one. */
  entries: string[];
  events: number;
}

export async function moveSession(
  local: DaemonClient,
  remote: DaemonClient,
  opts: { session: string; remoteName: string; box?: string },
  progress: (s: string) => void = () => {},
): Promise<MoveResult> {
  const s = await local.request<Session>("GET", `/v1/sessions/${encodeURIComponent(opts.session)}`);
  if (s.state !== "open")
    throw new HutchError("conflict", `session ${s.id} is closed`, `a closed session's log stays here: hutch session log ${s.id}`);
  const boxName = opts.box ?? s.boxName;
  if (await findBox(remote, boxName))
    throw new HutchError(
      "conflict",
      `remote ${opts.remoteName} already has a box named ${boxName}`,
      `move into another name: hutch session move ${s.id} --remote ${opts.remoteName} --box NAME`,
    );
  await runningBox(local, s.boxName);
  const tmp = mkdtempSync(join(tmpdir(), "hutch-move-"));
  try {
    progress(`copying ${s.boxName}:/workspace out`);
    await fetchDir(local, s.boxName, "/workspace", join(tmp, "workspace"));
    const entries = readdirSync(join(tmp, "workspace")).sort();
    progress(`creating box ${boxName} on ${opts.remoteName}`);
    const created = await remote.request<Box>("POST", "/v1/boxes", { name: boxName, start: true }, { idempotencyKey: crypto.randomUUID() });
    for (const e of entries) {
      progress(`sending /workspace/${e} to ${boxName} on ${opts.remoteName}`);
      await sendDir(remote, created.name, join(tmp, "workspace", e), `/workspace/${e}`);
    }
    const there = await remote.request<Session>(
      "POST",
      "/v1/sessions",
      { box: created.name, agent: s.agent, ...(s.label ? { label: s.label } : {}) },
      { idempotencyKey: crypto.randomUUID() },
    );
    progress(`continuing the log of ${s.id} in ${there.id} on ${opts.remoteName}`);
    const here = `local@${hostname()}`;
    const events = await appendLog(local, remote, s.id, here, there.id);
    await remote.request("POST", `/v1/sessions/${encodeURIComponent(there.id)}/events`, {
      events: [emit(Events.sessionArrived, { from: { remote: here, session: s.id, box: s.boxName }, events })],
    });
    const to = { remote: opts.remoteName, session: there.id, box: created.name };
    await local.request("POST", `/v1/sessions/${encodeURIComponent(s.id)}/events`, { events: [emit(Events.sessionMoved, { to })] });
    progress(`stopping box ${s.boxName} here (kept: hutch box start ${s.boxName})`);
    await local.request("POST", `/v1/boxes/${encodeURIComponent(s.boxName)}/stop`, undefined, { idempotencyKey: crypto.randomUUID() });
    return { from: { session: s.id, box: s.boxName }, to, entries, events };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
