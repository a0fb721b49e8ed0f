// `hutch cp`: directory trees in and out of a box as tar streams. What comes
// out of a box is untrusted: it is unpacked by the safe unpacker (no absolute
// names, no `..`, no writes through symlinks, bounded, no setuid and no
// group/other write), never by a shell tool.
import { existsSync, statSync } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { BOX_NAME, Chan, FileStat, follow, HutchError, ID_BODY, resultOf, TarInResult } from "@hutch/shared";
import { packTar, createUnpacker } from "@hutch/shared/node";
import type { DaemonClient } from "./daemon.ts";
import { openToolStream, streamError } from "./stream.ts";
import { callTool } from "./tool.ts";

export type CpEnd = { box: string; path: string } | { path: string };

const CP_BOX_ARG = new RegExp(`^(${BOX_NAME}|box_${ID_BODY}):(.*)$`);

/** `BOX:/path` names a path in a box; anything else is local. A leading ./ or / forces local. */
export function parseCpArg(arg: string): CpEnd {
  const m = CP_BOX_ARG.exec(arg);
  if (!m || arg.startsWith("./") || arg.startsWith("/")) return { path: arg };
  return { box: m[1]!, path: m[2] || "/workspace" };
}

async function guestStat(daemon: DaemonClient, box: string, path: string): Promise<FileStat | null> {
  try {
    return await callTool(daemon, box, { tool: "fs.stat", path }, FileStat);
  } catch (err) {
    if (err instanceof HutchError && err.code === "not_found") return null;
    throw err;
  }
}

/** Where an archive lands and under what top name, following `cp -r` / `docker cp`: into DST if it is a directory, else as DST. */
function placement(dstPath: string, dstIsDir: boolean, srcName: string): { dir: string; name: string } {
  return dstIsDir ? { dir: dstPath, name: srcName } : { dir: dirname(dstPath), name: basename(dstPath) };
}

/** Bounds on what comes out of a box (the unpacker's defaults otherwise: 8 GiB, a million entries). */
export interface CopyLimits {
  maxBytes?: number;
  maxEntries?: number;
}

export async function copy(
  daemon: DaemonClient,
  src: CpEnd,
  dst: CpEnd,
  limits: CopyLimits = {},
): Promise<{ entries: number; bytes: number }> {
  if ("box" in src && "box" in dst)
    throw new HutchError(
      "invalid",
      "copying between two boxes is not supported",
      "copy through the host: hutch cp A:/p ./tmp && hutch cp ./tmp B:/p",
    );
  if (!("box" in src) && !("box" in dst))
    throw new HutchError("invalid", "neither side names a box", "name one as BOX:/path, e.g. hutch cp ./src mybox:/workspace");
  if ("box" in dst) return copyIn(daemon, resolve(src.path), dst.box, dst.path);
  return copyOut(daemon, (src as { box: string; path: string }).box, src.path, resolve(dst.path), limits);
}

async function copyIn(daemon: DaemonClient, local: string, box: string, guestPath: string) {
  if (!existsSync(local)) throw new HutchError("not_found", `${local} does not exist`, "check the source path");
  const st = await guestStat(daemon, box, guestPath);
  const { dir, name } = placement(guestPath, st?.type === "dir", basename(local));
  const { stream, close } = await openToolStream(daemon, box, { tool: "tar.in", path: dir, name });
  try {
    const ended = follow(stream, { stdin: "open" });
    for await (const chunk of packTar(local)) {
      if (!(await stream.write(Chan.stdin, chunk))) break;
    }
    stream.eof(Chan.stdin);
    return resultOf(await ended, "tar.in", TarInResult, streamError, `the guest may be broken: hutch box info ${box}`);
  } finally {
    close();
  }
}

async function copyOut(daemon: DaemonClient, box: string, guestPath: string, local: string, limits: CopyLimits) {
  const isDir = existsSync(local) && statSync(local).isDirectory();
  const guestName = basename(guestPath.replace(/\/+$/, "")) || "workspace";
  const { dir, name } = placement(local, isDir, guestName);
  if (!existsSync(dir)) throw new HutchError("not_found", `${dir} does not exist`, `create it first: mkdir -p ${dir}`);
  // Modes from the box are its to choose, not the user's: no group or other write, and the user's umask, as
  // cp and tar --no-same-permissions do for a non-root user (0777 lands 0755 under umask 022, 0700 under 077).
  const unpacker = createUnpacker(dir, { topName: name, umask: process.umask() | 0o022, ...limits });
  const { stream, close } = await openToolStream(daemon, box, { tool: "tar.out", path: guestPath });
  stream.autoCredit = false;
  try {
    return await new Promise<{ entries: number; bytes: number }>((res, rej) => {
      let chain: Promise<void> = Promise.resolve();
      let failed = false;
      stream.handlers = {
        data: (_chan, bytes) => {
          chain = chain.then(async () => {
            if (failed) return;
            await unpacker.write(bytes);
            stream.consumed(bytes.length);
          });
          chain.catch((err) => {
            if (failed) return;
            failed = true;
            close();
            void unpacker
              .abort()
              .finally(() =>
                rej(
                  new HutchError(
                    "denied",
                    `refused what the box sent: ${(err as Error).message}`,
                    "nothing was written; inspect the box's files",
                  ),
                ),
              );
          });
        },
        close: (e) => {
          if (failed) return;
          if (e) {
            void unpacker.abort().finally(() => rej(streamError(e)));
            return;
          }
          chain
            .then(() => unpacker.end())
            .then(res, (err) => rej(new HutchError("denied", `refused what the box sent: ${(err as Error).message}`)));
        },
      };
    });
  } finally {
    close();
  }
}
