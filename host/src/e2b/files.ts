// envd's filesystem, through the tools `hutch cp` and `hutch exec` use: read,
// write, stat and list are the guest's fs.* tools (so their path rules hold:
// /workspace and the home directory); make dir, remove and move are one exec
// of mkdir, rm and mv each, as the box's user. Nothing runs in the box but
// hutch's own guest. A directory watch lists the directory (and, recursive,
// its subdirectories) every WATCH_POLL_MS and reports what changed: the guest
// has no inotify tool, and a poll reports the same create, write and remove
// events, a poll late.
import { posix } from "node:path";
import {
  Chan,
  FileStat,
  FsListResult,
  FsSizeResult,
  HutchError,
  resultOf,
  type EntryInfo,
  type ErrorCode,
  type FsEventType,
  type StreamError,
} from "@hutch/shared";
import { execCollect, execIn } from "../box/exec.ts";
import type { Channel } from "../engine/channel.ts";

export const WATCH_POLL_MS = 100;
/** The most entries a recursive list or watch walks: E2B's envd has no cap, a box's home can be large. */
const WALK_MAX = 20_000;

const refused = (e: StreamError) => {
  const code: ErrorCode = e.code === "not_found" || e.code === "denied" || e.code === "invalid" ? e.code : "failed";
  return new HutchError(code, e.message, e.hint);
};
const HINT = "the box's guest answered out of protocol; restart the box";

function permissions(type: FileStat["type"], mode: number): string {
  const bits = "rwxrwxrwx";
  let s = type === "dir" ? "d" : type === "symlink" ? "L" : "-";
  for (let i = 0; i < 9; i++) s += mode & (1 << (8 - i)) ? bits[i] : "-";
  return s;
}

/** A guest FileStat as envd's EntryInfo. */
export function entryOf(path: string, st: FileStat): EntryInfo {
  const type =
    st.type === "file"
      ? "FILE_TYPE_FILE"
      : st.type === "dir"
        ? "FILE_TYPE_DIRECTORY"
        : st.type === "symlink"
          ? "FILE_TYPE_SYMLINK"
          : "FILE_TYPE_UNSPECIFIED";
  // Go's os.FileMode, which envd sends: the directory bit is the top one.
  const mode = (st.mode & 0o777) | (st.type === "dir" ? 0x80000000 : 0) | (st.type === "symlink" ? 0x8000000 : 0);
  return {
    name: posix.basename(path) || "/",
    type,
    path,
    size: String(st.size),
    mode: mode >>> 0,
    permissions: permissions(st.type, st.mode),
    owner: "",
    group: "",
    modifiedTime: new Date(st.mtimeMs).toISOString(),
    ...(st.target !== undefined ? { symlinkTarget: st.target } : {}),
  };
}

async function call<T>(channel: Channel, open: Parameters<typeof execIn>[1], schema: Parameters<typeof resultOf>[2]): Promise<T> {
  const end = await execIn(channel, open).done;
  return resultOf(end, open.tool, schema, refused, HINT) as T;
}

export function stat(channel: Channel, path: string): Promise<FileStat> {
  return call(channel, { tool: "fs.stat", path }, FileStat);
}

export async function entry(channel: Channel, path: string): Promise<EntryInfo> {
  return entryOf(path, await stat(channel, path));
}

async function exists(channel: Channel, path: string): Promise<boolean> {
  try {
    await stat(channel, path);
    return true;
  } catch (err) {
    if (err instanceof HutchError && err.code === "not_found") return false;
    throw err;
  }
}

/** A directory's entries down to `depth` levels (1: its own), as envd's ListDir. */
export async function list(channel: Channel, path: string, depth = 1): Promise<EntryInfo[]> {
  const top = await stat(channel, path);
  if (top.type !== "dir") throw new HutchError("invalid", `${path} is not a directory`, "list a directory, or stat a file");
  const out: EntryInfo[] = [];
  const walk = async (dir: string, level: number): Promise<void> => {
    const items = await call<FsListResult>(channel, { tool: "fs.list", path: dir }, FsListResult);
    for (const it of items) {
      if (out.length >= WALK_MAX)
        throw new HutchError("limited", `${path} has more than ${WALK_MAX} entries`, "list a smaller directory or less deep");
      const p = posix.join(dir, it.name);
      out.push(entryOf(p, it));
      if (it.type === "dir" && level < depth) await walk(p, level + 1);
    }
  };
  await walk(path, 1);
  return out;
}

/** Runs one command of the box's own (mkdir, rm, mv), failing with its stderr. */
async function run(channel: Channel, argv: string[]): Promise<void> {
  const r = await execCollect(channel, argv);
  if (r.code !== 0) {
    const msg = (r.error ?? r.stderr).trim() || `${argv[0]} exited with ${r.code}`;
    throw new HutchError(/No such file/.test(msg) ? "not_found" : /Permission denied/.test(msg) ? "denied" : "failed", msg);
  }
}

/** Makes a directory and its parents; false when it was already there (envd's already_exists). */
export async function makeDir(channel: Channel, path: string): Promise<EntryInfo | null> {
  if (await exists(channel, path)) return null;
  await run(channel, ["mkdir", "-p", "--", path]);
  return entry(channel, path);
}

export async function remove(channel: Channel, path: string): Promise<void> {
  if (!(await exists(channel, path))) throw new HutchError("not_found", `${path} does not exist`, "list the directory: files.list()");
  await run(channel, ["rm", "-rf", "--", path]);
}

export async function move(channel: Channel, from: string, to: string): Promise<EntryInfo> {
  if (!(await exists(channel, from))) throw new HutchError("not_found", `${from} does not exist`, "list the directory: files.list()");
  await run(channel, ["mkdir", "-p", "--", posix.dirname(to)]);
  await run(channel, ["mv", "-f", "--", from, to]);
  return entry(channel, to);
}

/**
 * A file's bytes as a stream, with the guest's credit as the only buffer:
 * bytes are credited back as the reader pulls them. Rejects (not_found,
 * denied, invalid) before any byte when the file cannot be read.
 */
export function read(channel: Channel, path: string): Promise<ReadableStream<Uint8Array>> {
  const stream = channel.mux.open({ tool: "fs.read", path });
  stream.autoCredit = false;
  return new Promise((resolve, reject) => {
    let ctl!: ReadableStreamDefaultController<Uint8Array>;
    let owed = 0;
    let settled = false;
    const body = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          ctl = c;
        },
        pull: () => {
          const n = owed;
          owed = 0;
          stream.consumed(n);
        },
        cancel: () => stream.close(),
      },
      { highWaterMark: 4 * 1024 * 1024, size: (chunk) => chunk?.byteLength ?? 0 },
    );
    const settle = () => {
      if (!settled) {
        settled = true;
        resolve(body);
      }
    };
    stream.handlers = {
      data(chan, bytes) {
        if (chan !== Chan.stdout) return;
        settle();
        try {
          ctl.enqueue(bytes.slice());
        } catch {
          // The reader went away: a throw here would reach the box's channel.
          return stream.close();
        }
        if ((ctl.desiredSize ?? 0) > 0) stream.consumed(bytes.length);
        else owed += bytes.length;
      },
      eof() {
        settle();
      },
      close(error) {
        if (error && !settled) {
          settled = true;
          return reject(refused(error));
        }
        settle();
        try {
          if (error) ctl.error(refused(error));
          else ctl.close();
        } catch {
          // already cancelled by the reader
        }
      },
    };
  });
}

/**
 * Writes a file (its parents made first, as envd does), from bytes or a
 * stream; the guest lands it atomically. Answers the bytes written.
 */
export async function write(channel: Channel, path: string, data: Uint8Array | ReadableStream<Uint8Array>): Promise<number> {
  const parent = posix.dirname(path);
  if (!(await exists(channel, parent))) await run(channel, ["mkdir", "-p", "--", parent]);
  const { stream, done } = execIn(channel, { tool: "fs.write", path, mode: 0o644 });
  if (data instanceof Uint8Array) await stream.write(Chan.stdin, data);
  else for await (const chunk of data) if (!(await stream.write(Chan.stdin, chunk))) break;
  stream.eof(Chan.stdin);
  return resultOf(await done, "fs.write", FsSizeResult, refused, HINT).size;
}

/** One poll's view of a directory: each path's type, size and mtime. */
async function snapshot(channel: Channel, path: string, recursive: boolean): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (dir: string): Promise<void> => {
    const items = await call<FsListResult>(channel, { tool: "fs.list", path: dir }, FsListResult);
    for (const it of items) {
      if (out.size >= WALK_MAX) return;
      const rel = posix.relative(path, posix.join(dir, it.name));
      out.set(rel, `${it.type}:${it.size}:${it.mtimeMs}`);
      if (recursive && it.type === "dir") await walk(posix.join(dir, it.name));
    }
  };
  await walk(path);
  return out;
}

/**
 * Watches a directory until `signal` aborts: onEvent gets each change's name
 * (relative to the directory) and kind. Resolves once the first view is taken
 * (envd's start event comes then); a directory that is missing rejects.
 */
export async function watch(
  channel: Channel,
  path: string,
  recursive: boolean,
  signal: AbortSignal,
  onEvent: (name: string, type: FsEventType) => void,
  onError: (err: HutchError) => void,
): Promise<void> {
  const top = await stat(channel, path);
  if (top.type !== "dir") throw new HutchError("invalid", `${path} is not a directory`, "watch a directory");
  let before = await snapshot(channel, path, recursive);
  void (async () => {
    while (!signal.aborted) {
      await Bun.sleep(WATCH_POLL_MS);
      if (signal.aborted) return;
      let now: Map<string, string>;
      try {
        now = await snapshot(channel, path, recursive);
      } catch (err) {
        return onError(err instanceof HutchError ? err : new HutchError("failed", String(err)));
      }
      for (const [name, sig] of now) {
        const was = before.get(name);
        if (was === undefined) onEvent(name, "EVENT_TYPE_CREATE");
        else if (was !== sig) onEvent(name, "EVENT_TYPE_WRITE");
      }
      for (const name of before.keys()) if (!now.has(name)) onEvent(name, "EVENT_TYPE_REMOVE");
      before = now;
    }
  })();
}
