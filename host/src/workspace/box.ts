// The box side of moving work: a box found or made, a script run in it with
// its output collected, a file carried in or out. Everything goes through
// the daemon API (so it works the same against a remote daemon), and what
// the box prints or sends is bounded and checked by the caller.
import { type Box, follow, HutchError } from "@hutch/shared";
import { type CopyLimits, copy } from "../client/copy.ts";
import type { DaemonClient } from "../client/daemon.ts";
import { openToolStream, streamError } from "../client/stream.ts";

/** Output past this is the box misbehaving: the scripts here print a few lines. */
const MAX_OUTPUT = 1024 * 1024;

export async function findBox(d: DaemonClient, name: string): Promise<Box | null> {
  try {
    return await d.request<Box>("GET", `/v1/boxes/${encodeURIComponent(name)}`);
  } catch (err) {
    if (err instanceof HutchError && err.code === "not_found") return null;
    throw err;
  }
}

/** The named box, running: created (process engine) when it does not exist, started when stopped. */
export async function runningBox(d: DaemonClient, name: string): Promise<Box> {
  const box = await findBox(d, name);
  if (!box) return d.request<Box>("POST", "/v1/boxes", { name, start: true }, { idempotencyKey: crypto.randomUUID() });
  if (box.state === "running") return box;
  await d.request("POST", `/v1/boxes/${encodeURIComponent(name)}/start`, undefined, { idempotencyKey: crypto.randomUUID() });
  return (await findBox(d, name)) ?? box;
}

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `sh -c script` with args as $1..; fails loudly (with the box's stderr) on a non-zero exit. */
export async function sh(d: DaemonClient, box: string, script: string, args: string[], what: string): Promise<Ran> {
  const { stream, close } = await openToolStream(d, box, { tool: "exec", argv: ["sh", "-c", script, "hutch", ...args] });
  const dec = [new TextDecoder(), new TextDecoder()];
  const text = ["", ""];
  try {
    const end = await follow(stream, {
      onData: (chan, bytes) => {
        const i = chan === 1 ? 0 : 1;
        if (text[i]!.length < MAX_OUTPUT) text[i] += dec[i]!.decode(bytes, { stream: true });
      },
    });
    if (end.error) throw streamError(end.error);
    const r = { code: end.exit?.code ?? null, stdout: text[0]!, stderr: text[1]! };
    if (r.code !== 0)
      throw new HutchError(
        "failed",
        `${what} failed in box ${box} (exit ${r.code}): ${r.stderr.trim().split("\n").slice(-3).join("; ")}`,
        `look inside: hutch exec ${box} -- sh`,
      );
    return r;
  } finally {
    close();
  }
}

/** Puts local directory dir into the box as guestDir (which must not exist). */
export async function sendDir(d: DaemonClient, box: string, dir: string, guestDir: string): Promise<void> {
  await copy(d, { path: dir }, { box, path: guestDir });
}

/** Brings the box's guestDir out as local dir (created), through the safe unpacker, within limits. */
export async function fetchDir(d: DaemonClient, box: string, guestDir: string, dir: string, limits?: CopyLimits): Promise<void> {
  await copy(d, { box, path: guestDir }, { path: dir }, limits);
}
