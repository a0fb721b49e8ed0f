// Where a snapshot store's objects live (the snapshot store's backend; the
// store itself is in host/src/snapshot/). Every object is immutable: written
// once under its name, read, listed, deleted, never changed. That is all an
// S3-compatible bucket (conditional PUT with If-None-Match, ranged GET, LIST,
// DELETE), a remote hutch daemon or a JetStream object store has to offer for
// a store to live there. Here with the other storage interfaces; the names a
// backend accepts are checked by snapshot/backend.ts checkName.

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
