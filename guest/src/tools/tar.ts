// tar.out and tar.in: the archive format and its safety rules live in
// shared/src/tar (the format) and shared/node/tar (writer, unpacker); this file only moves its bytes over a stream.
import { chown, mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { Chan, type MuxStream, type TarInResult, type TarOutResult } from "@hutch/shared/wire";
import { IgnoreRules, Ignorer } from "@hutch/shared/wire";
import { createUnpacker, packTar } from "@hutch/shared/node";
import { PathError } from "../paths.ts";
import type { Req } from "./base.ts";
import type { ToolContext } from "./context.ts";
import { readUserXattrs, setTimes, writeUserXattr } from "./fsx.ts";
import { takeFrames } from "./inbox.ts";

/** Sends a pax tar of the path on chan 1, eof, then result {size} (bytes sent) and close. */
export async function tarOut(stream: MuxStream, req: Req<"tar.out">, ctx: ToolContext): Promise<void> {
  const path = await ctx.paths.resolve(req.path);
  if (!(await stat(path).catch(() => undefined))) throw new PathError("not_found", `${req.path}: no such file or directory`);
  let size = 0;
  const rules = req.exclude || req.ignoreFile ? new Ignorer([IgnoreRules.parse(req.exclude ?? [])]) : undefined;
  for await (const chunk of packTar(path, {
    ...(rules ? { ignore: rules } : {}),
    ...(req.ignoreFile ? { ignoreFile: req.ignoreFile } : {}),
    meta: req.meta === true,
    ...(req.meta ? { xattrs: readUserXattrs } : {}),
  })) {
    // Leaving the loop returns the iterator, which lets the packer close its files.
    if (!(await stream.write(Chan.stdout, chunk))) return;
    size += chunk.length;
  }
  stream.eof(Chan.stdout);
  stream.msg({ type: "result", value: { size } satisfies TarOutResult });
  stream.close();
}

/**
 * Unpacks a tar from chan 0 into the directory path, crediting each frame
 * once the unpacker took it. A stream that ends before eof aborts the
 * unpacker, which removes what it had not finished.
 */
export async function tarIn(stream: MuxStream, req: Req<"tar.in">, ctx: ToolContext): Promise<void> {
  const dest = await ctx.paths.resolve(req.path);
  const existing = await stat(dest).catch(() => undefined);
  if (existing && !existing.isDirectory()) throw new PathError("invalid", `${req.path} exists and is not a directory`);
  // A root guest (a VM's PID 1) unpacks for the box's user, who owns /workspace: the directories made on the way too.
  const owner = ctx.config.boxUser;
  const first = await mkdir(dest, { recursive: true });
  if (first && owner) for (let d = dest; d.startsWith(first); d = dirname(d)) await chown(d, owner.uid, owner.gid);
  if (stream.closed) return;

  const unpacker = createUnpacker(dest, {
    ...(req.name ? { topName: req.name } : {}),
    ...(owner ? { owner: { uid: owner.uid, gid: owner.gid } } : {}),
    links: req.links === true,
    // A snapshot restored: exact mtimes and user.* xattrs, through libc.
    ...(req.links ? { exact: { setTimes, setXattr: writeUserXattr } } : {}),
  });
  let chain: Promise<void> = Promise.resolve();
  // Set once the unpacker was ended or aborted; later frames are ignored.
  let settled = false;
  const fail = (err: unknown) => {
    if (settled) return;
    settled = true;
    void unpacker.abort().catch(() => {});
    // A refusal names the bad entry; an error with a cause is the filesystem failing under it.
    const cause = (err as Error).cause;
    stream.close({ code: cause === undefined ? "invalid" : "failed", message: (err as Error).message });
  };
  takeFrames(
    stream,
    {
      data: (chan, bytes) => {
        if (chan !== Chan.stdin) return;
        chain = chain.then(async () => {
          if (settled) return;
          try {
            await unpacker.write(bytes);
            stream.consumed(bytes.length);
          } catch (err) {
            fail(err);
          }
        });
      },
      eof: (chan) => {
        if (chan !== Chan.stdin) return;
        chain = chain.then(async () => {
          if (settled) return;
          try {
            const { entries, bytes } = await unpacker.end();
            settled = true;
            stream.msg({ type: "result", value: { entries, bytes } satisfies TarInResult });
            stream.close();
          } catch (err) {
            fail(err);
          }
        });
      },
      close: () => {
        if (settled) return;
        settled = true;
        chain = chain.then(() => unpacker.abort()).catch(() => {});
        ctx.log.debug("tar.in abandoned", { stream: stream.id });
      },
    },
    false,
  );
}
