// Where a store's objects live. Every object is immutable: written once under
// its name, read, listed, deleted, never changed. That is all an S3-compatible
// bucket (conditional PUT with If-None-Match, ranged GET, LIST, DELETE) or a
// remote hutch daemon has to offer for a store to live there.
//
// Names are checked here, so no caller can make a backend touch a path of its
// choosing: content-addressed kinds take 64 lower-case hex digits, locks a
// short word.

import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { invalid } from "./errors.ts";

export type ObjectKind = "config" | "packs" | "index" | "snapshots" | "marks" | "saves" | "locks";

export interface ObjectInfo {
  name: string;
  size: number;
  /** When the backend stored it (its own clock). */
  mtimeMs: number;
}

export interface Range {
  offset: number;
  length: number;
}

export interface Backend {
  /** Where the store is, for messages ("/home/a/.local/share/hutch/snapshots"). */
  readonly location: string;
  /** Every object of a kind, in no particular order. Idempotent; a listing never includes a partly written object. */
  list(kind: ObjectKind): AsyncIterable<ObjectInfo>;
  /**
   * An object's bytes, or `range` of them. Rejects with a `not_found`
   * StoreError naming the object when it does not exist, and with a
   * `failed` one when it is shorter than the range asked for.
   */
  get(kind: ObjectKind, name: string, range?: Range): Promise<Uint8Array>;
  /**
   * Stores `data` under `name`, atomically and durably: when it resolves the
   * object survives a crash; a crash before leaves no trace. Never replaces:
   * resolves false, writing nothing, when the name is taken.
   */
  put(kind: ObjectKind, name: string, data: Uint8Array): Promise<boolean>;
  /** As put, for a complete file, which is consumed (moved, where the backend can) and made durable first. */
  putFile(kind: ObjectKind, name: string, path: string): Promise<boolean>;
  /** Removes an object, durably. Idempotent: a missing object is not an error. */
  delete(kind: ObjectKind, name: string): Promise<void>;
  /** A private local directory for files on their way to putFile (for a local backend, on the store's filesystem). */
  stagingDir(): string;
  /** Releases cached file handles. The backend stays usable. */
  close(): void;
}

const HEX64 = /^[0-9a-f]{64}$/;
const LOCK = /^[a-z][a-z0-9-]{0,31}$/;

/** Throws unless `name` may be an object of `kind`. */
export function checkName(kind: ObjectKind, name: string): void {
  const ok = kind === "config" ? name === "config" : kind === "locks" ? LOCK.test(name) : HEX64.test(name);
  if (!ok) throw invalid(`${JSON.stringify(name)} is not a valid name for a ${kind} object`, undefined, `${kind}/${name}`);
}

/**
 * A new path in a backend's staging directory. Names start with the pid, so
 * a local backend can sweep the files of processes that died mid-write.
 */
export function stagingFile(backend: Backend): string {
  return join(backend.stagingDir(), `${process.pid}-${randomUUID()}`);
}
