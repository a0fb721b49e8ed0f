// A VM's sleep: QEMU's migration stream, written to a file in the box's
// directory. The one hard problem is a crash (of the daemon, of QEMU) part-way:
// the state a wake reads must be whole or absent, never half. So the stream
// lands in a temporary file, is fsynced, and only then renamed into place
// (and the directory fsynced); QEMU quits after that. A torn file left by
// anything else (a full disk, a hand) is found by QEMU refusing to load it,
// and the wake boots afresh from the disk instead.
import { chownSync, closeSync, fsyncSync, openSync, readSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { HutchError } from "@hutch/shared";
import { pidDir } from "../../procs.ts";
import { peerCred } from "../peercred.ts";
import { qmp } from "./qmp.ts";

/** QEMU's migration stream begins with "QEVM" and a version: a file without it is surely not a state. */
const QEMU_VM_FILE_MAGIC = 0x5145564d;

/** The receivers' directories: `hutch-sleep-<daemon pid>-<random>` in the temporary directory. */
export const RECEIVER_PREFIX = "hutch-sleep-";

export interface Receiver {
  /** Bytes written, once QEMU closed the stream and the file is fsynced. */
  done: Promise<number>;
  close(): void;
}

/**
 * Listens on a socket of its own (`sock`) for one connection from the process `peerPid` (the box's
 * QEMU) and writes what it sends to `file`, fsynced when it ends. Any other
 * peer is refused: the state is what a wake trusts as the box's memory.
 */
export async function receiveState(
  file: string,
  peerPid: number,
  owner?: { uid: number; gid: number },
): Promise<Receiver & { sock: string }> {
  // Not in the box's directory: a root daemon's QEMU runs as the box's own uid,
  // which cannot pass the daemon's home (0700). A directory of its own, that
  // uid's alone, in the temporary directory every uid can pass.
  // Named with this daemon's pid: one killed mid-sleep leaves it, and the next receiver sweeps it.
  const dir = pidDir(tmpdir(), RECEIVER_PREFIX);
  const sock = join(dir, "state.sock");
  const fd = openSync(file, "w", 0o600);
  let bytes = 0;
  let taken = false;
  let settle!: { ok: (n: number) => void; fail: (e: Error) => void };
  const done = new Promise<number>((ok, fail) => {
    settle = { ok, fail };
  });
  let closed = false;
  const finish = (err: Error | null) => {
    if (closed) return;
    closed = true;
    listener.stop(true);
    rmSync(dir, { recursive: true, force: true });
    try {
      if (!err) fsyncSync(fd);
    } catch (e) {
      err = e as Error;
    }
    closeSync(fd);
    if (err) settle.fail(err);
    else settle.ok(bytes);
  };
  const listener = Bun.listen({
    unix: sock,
    socket: {
      open(s) {
        const cred = peerCred((s as unknown as { fd?: number }).fd ?? -1);
        if (taken || !cred || cred.pid !== peerPid) {
          s.terminate();
          return;
        }
        taken = true;
      },
      data(_s, data) {
        try {
          let off = 0;
          while (off < data.length) off += writeSync(fd, data, off);
          bytes += data.length;
        } catch (err) {
          finish(err as Error);
        }
      },
      close() {
        if (taken) finish(null);
      },
      error(_s, err) {
        finish(err);
      },
    },
  });
  // A root daemon's QEMU has dropped to the box's own uid: only it may connect.
  if (owner) {
    chownSync(dir, owner.uid, owner.gid);
    chownSync(sock, owner.uid, owner.gid);
  }
  return { sock, done, close: () => finish(new Error("the state receiver was closed")) };
}

/** Renames the finished state into place and makes the rename durable. */
export function commitState(tmp: string, file: string): void {
  renameSync(tmp, file);
  syncDir(dirname(file));
}

export function syncDir(dir: string): void {
  const d = openSync(dir, "r");
  try {
    fsyncSync(d);
  } finally {
    closeSync(d);
  }
}

/** Null when the file looks like a state QEMU could load; else why not (a wake then boots afresh). */
export function stateProblem(file: string): string | null {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    return "the sleeping state is missing";
  }
  if (size < 8) return `the sleeping state is torn (${size} bytes)`;
  const head = Buffer.alloc(4);
  const fd = openSync(file, "r");
  try {
    readSync(fd, head, 0, 4, 0);
  } finally {
    closeSync(fd);
  }
  return head.readUInt32BE(0) === QEMU_VM_FILE_MAGIC ? null : "the sleeping state is not a QEMU state";
}

interface MigrateInfo {
  status?: string;
  "error-desc"?: string;
  ram?: { transferred?: number };
}

/**
 * Streams the stopped VM's state to `uri` and waits for it to complete.
 * QEMU's defaults throttle migration (for live migration over a network);
 * a file on the host wants it as fast as the disk goes.
 */
export async function migrateOut(qmpSock: string, uri: string, timeoutMs: number): Promise<void> {
  await qmp(qmpSock, "migrate-set-parameters", { "max-bandwidth": 64 * 1024 ** 3 });
  await qmp(qmpSock, "migrate", { uri });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await qmp<MigrateInfo>(qmpSock, "query-migrate");
    if (m.status === "completed") return;
    if (m.status === "failed" || m.status === "cancelled")
      throw new HutchError("failed", `QEMU could not save the VM's state: ${m["error-desc"] ?? m.status}`, "see the box's qemu.log");
    if (Date.now() > deadline) {
      await qmp(qmpSock, "migrate_cancel").catch(() => undefined);
      throw new HutchError("failed", `saving the VM's state took over ${timeoutMs} ms`, "see the box's qemu.log");
    }
    await Bun.sleep(20);
  }
}
