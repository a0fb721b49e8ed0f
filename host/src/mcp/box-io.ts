// exec and files for MCP clients: the CLI's versions write to this process's
// stdout, which here is the MCP channel, so these collect instead, each
// bounded: what a box sends beyond the cap is dropped and said to be.
import { Chan, FsListResult, FsSizeResult, follow, HutchError, resultOf, type ExitMsg } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { openToolStream, streamError } from "../client/stream.ts";
import { callTool } from "../client/tool.ts";

export const OUTPUT_MAX = 64 * 1024;
export const READ_MAX = 1024 * 1024;
const WRITE_CHUNK = 64 * 1024;

export interface ExecOutcome {
  exit: { code: number | null; signal: string | null } | null;
  stdout: string;
  stderr: string;
  cut: boolean;
  timedOut: boolean;
}

export async function execCollect(
  d: DaemonClient,
  box: string,
  call: { argv: string[]; cwd?: string },
  timeoutMs: number,
): Promise<ExecOutcome> {
  const { stream, close } = await openToolStream(d, box, { tool: "exec", argv: call.argv, ...(call.cwd ? { cwd: call.cwd } : {}) });
  const out: Uint8Array[] = [];
  const err: Uint8Array[] = [];
  const size = { 1: 0, 2: 0 } as Record<number, number>;
  let cut = false;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    stream.msg({ type: "signal", signal: "KILL" });
  }, timeoutMs);
  try {
    const end = await follow(stream, {
      onData(chan, bytes) {
        if (chan !== Chan.stdout && chan !== Chan.stderr) return;
        const room = OUTPUT_MAX - (size[chan] ?? 0);
        if (room <= 0) {
          cut = true;
          return;
        }
        const keep = bytes.length > room ? bytes.subarray(0, room) : bytes;
        if (keep !== bytes) cut = true;
        size[chan] = (size[chan] ?? 0) + keep.length;
        (chan === Chan.stdout ? out : err).push(keep.slice());
      },
    });
    if (end.error && !end.exit) throw streamError(end.error);
    const text = (parts: Uint8Array[]) => new TextDecoder().decode(Buffer.concat(parts));
    return { exit: end.exit as Pick<ExitMsg, "code" | "signal"> | null, stdout: text(out), stderr: text(err), cut, timedOut };
  } finally {
    clearTimeout(timer);
    close();
  }
}

export async function readText(d: DaemonClient, box: string, path: string): Promise<string> {
  const { stream, close } = await openToolStream(d, box, { tool: "fs.read", path });
  const parts: Uint8Array[] = [];
  let size = 0;
  let over = false;
  try {
    const end = await follow(stream, {
      onData(chan, bytes) {
        if (chan !== Chan.stdout || over) return;
        size += bytes.length;
        if (size > READ_MAX) {
          over = true;
          close();
        } else parts.push(bytes.slice());
      },
    });
    if (over) throw new HutchError("invalid", `${path} is larger than ${READ_MAX} bytes`, "read a part of it with exec (head, sed -n)");
    if (end.error) throw streamError(end.error);
    const bytes = Buffer.concat(parts);
    if (bytes.includes(0)) throw new HutchError("invalid", `${path} is not a text file`, "copy it out: hutch cp BOX:PATH .");
    return new TextDecoder().decode(bytes);
  } finally {
    close();
  }
}

export async function writeText(d: DaemonClient, box: string, path: string, content: string): Promise<number> {
  const { stream, close } = await openToolStream(d, box, { tool: "fs.write", path });
  try {
    const ended = follow(stream);
    const bytes = new TextEncoder().encode(content);
    for (let at = 0; at < bytes.length; at += WRITE_CHUNK) {
      if (!(await stream.write(Chan.stdin, bytes.subarray(at, at + WRITE_CHUNK)))) break;
    }
    stream.eof(Chan.stdin);
    return resultOf(await ended, `fs.write of ${path}`, FsSizeResult, streamError, `the guest may be broken: hutch box info ${box}`).size;
  } finally {
    close();
  }
}

export async function listDir(d: DaemonClient, box: string, path: string): Promise<string> {
  const entries = await callTool(d, box, { tool: "fs.list", path }, FsListResult);
  return entries
    .map(
      (e) =>
        `${e.type === "dir" ? "d" : e.type === "symlink" ? "l" : "-"} ${String(e.size).padStart(10)} ${e.name}${e.target ? ` -> ${e.target}` : ""}`,
    )
    .join("\n");
}
