// Small sealed objects: snapshots, index files, prune marks, save registrations and locks. Each
// is named by the SHA-256 of its bytes and sealed under a key of its own:
//
//   object := "HOB1" salt:16 AES-256-GCM(HMAC(enc, "hutch-<kind>-v1" ‖ salt), nonce(0, 0), aad = kind, body)
//
// On read the name is checked against the bytes first (so damage is reported
// as damage, with the object's name), then the seal, then the body's schema.
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { check, firstError } from "@hutch/shared/store";
import type { Backend, ObjectKind } from "./backend.ts";
import { SALT_BYTES, contentHash, nonce, objectKey, open, salt, seal } from "./crypto.ts";
import { corrupt } from "./errors.ts";

const MAGIC = new TextEncoder().encode("HOB1");
const enc = new TextEncoder();
/** Bound on any small object: the largest is an index file (MAX_INDEX_ENTRIES × 46 B + per-pack rows). */
export const MAX_OBJECT_BYTES = 256 * 1024 * 1024;

export function sealObject(encKey: Uint8Array, kind: ObjectKind, body: Uint8Array): { name: string; bytes: Uint8Array } {
  const s = salt();
  const sealed = seal(objectKey(encKey, kind, s), nonce(0, 0), body, enc.encode(kind));
  const bytes = new Uint8Array(MAGIC.length + SALT_BYTES + sealed.length);
  bytes.set(MAGIC);
  bytes.set(s, MAGIC.length);
  bytes.set(sealed, MAGIC.length + SALT_BYTES);
  return { name: contentHash(bytes), bytes };
}

/** The body of a sealed object read under `name`; throws naming the object when anything is off. */
export function openObject(encKey: Uint8Array, kind: ObjectKind, name: string, bytes: Uint8Array, checkHash = true): Uint8Array {
  const object = `${kind}/${name}`;
  if (checkHash && contentHash(bytes) !== name) throw corrupt(object, "content does not match its name (damaged or altered)");
  if (bytes.length < MAGIC.length + SALT_BYTES || !MAGIC.every((b, i) => bytes[i] === b)) throw corrupt(object, "is not a hutch object");
  const s = bytes.subarray(MAGIC.length, MAGIC.length + SALT_BYTES);
  const body = open(objectKey(encKey, kind, s), nonce(0, 0), bytes.subarray(MAGIC.length + SALT_BYTES), enc.encode(kind));
  if (!body) throw corrupt(object, "fails authentication (damaged, altered, or sealed under another key)");
  return body;
}

export async function putJson(backend: Backend, encKey: Uint8Array, kind: ObjectKind, value: unknown): Promise<string> {
  const { name, bytes } = sealObject(encKey, kind, enc.encode(JSON.stringify(value)));
  await backend.put(kind, name, bytes);
  return name;
}

export async function getJson<T extends TSchema>(
  backend: Backend,
  encKey: Uint8Array,
  kind: ObjectKind,
  name: string,
  schema: T,
  size?: number,
  checkHash = true,
): Promise<Static<T>> {
  const object = `${kind}/${name}`;
  if (size !== undefined && size > MAX_OBJECT_BYTES) throw corrupt(object, `is ${size} bytes, more than any ${kind} object can be`);
  const body = openObject(encKey, kind, name, await backend.get(kind, name), checkHash);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    throw corrupt(object, "is not valid JSON");
  }
  if (!check(schema, value)) throw corrupt(object, `is malformed: ${firstError(schema, value)}`);
  return value;
}

const Hex64 = Type.String({ pattern: "^[0-9a-f]{64}$" });
const NonNegative = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });

export const SnapshotStats = Type.Object(
  {
    files: NonNegative,
    dirs: NonNegative,
    symlinks: NonNegative,
    bytes: NonNegative,
    /** Files read (the rest came unchanged from the parent). */
    filesRead: NonNegative,
    /** Files added or whose content changed since the parent (every file without one). */
    filesChanged: NonNegative,
    bytesRead: NonNegative,
    blobsNew: NonNegative,
    treesNew: NonNegative,
    /** Bytes this snapshot added to the store, as stored (compressed, encrypted, without pack padding). */
    bytesStored: NonNegative,
    skipped: NonNegative,
    ms: NonNegative,
  },
  { additionalProperties: false },
);
export type SnapshotStats = Static<typeof SnapshotStats>;

/** The counts a save starts from. */
export function emptyStats(): SnapshotStats {
  return {
    files: 0,
    dirs: 0,
    symlinks: 0,
    bytes: 0,
    filesRead: 0,
    filesChanged: 0,
    bytesRead: 0,
    blobsNew: 0,
    treesNew: 0,
    bytesStored: 0,
    skipped: 0,
    ms: 0,
  };
}

export const SnapshotBody = Type.Object(
  {
    v: Type.Literal(1),
    id: Type.String({ pattern: "^snap_[0-9a-z]{20}$" }),
    /** ms since the epoch, when the save began. */
    time: NonNegative,
    /** What was snapshotted, as the caller names it (a box, a path); a parent is looked for among snapshots of the same source. */
    source: Type.String({ maxLength: 4096 }),
    host: Type.String({ maxLength: 255 }),
    tree: Hex64,
    /** The root directory's own metadata (its entries are in `tree`). */
    root: Type.Object(
      {
        mode: Type.Integer({ minimum: 0, maximum: 0o7777 }),
        mtime: Type.String({ pattern: "^-?[0-9]{1,20}$" }),
        uid: Type.Integer({ minimum: 0, maximum: 0xffffffff }),
        gid: Type.Integer({ minimum: 0, maximum: 0xffffffff }),
        xattrs: Type.Optional(
          Type.Array(Type.Tuple([Type.String({ minLength: 1, maxLength: 255 }), Type.String({ maxLength: 90000 })]), { maxItems: 256 }),
        ),
      },
      { additionalProperties: false },
    ),
    parent: Type.Optional(Type.String({ pattern: "^snap_[0-9a-z]{20}$" })),
    label: Type.Optional(Type.String({ maxLength: 255 })),
    tags: Type.Array(Type.String({ maxLength: 255 }), { maxItems: 64 }),
    stats: SnapshotStats,
    /** Entries that could not be read, with why (at most 1,000; stats.skipped counts them all). */
    skipped: Type.Array(
      Type.Object({ path: Type.String({ maxLength: 8192 }), reason: Type.String({ maxLength: 1024 }) }, { additionalProperties: false }),
      { maxItems: 1000 },
    ),
  },
  { additionalProperties: false },
);
export type SnapshotBody = Static<typeof SnapshotBody>;

export const MarkBody = Type.Object(
  {
    v: Type.Literal(1),
    /** ms since the epoch, by the marking prune's clock. */
    time: NonNegative,
    packs: Type.Array(Hex64, { maxItems: 1_000_000 }),
    /**
     * The saves registered once this mark was visible (their `saves/` names). A mark without it is
     * pending: it hides its packs from saves but never lets them be deleted (prune.ts).
     */
    saves: Type.Optional(Type.Array(Hex64, { maxItems: 100_000 })),
  },
  { additionalProperties: false },
);
export type MarkBody = Static<typeof MarkBody>;

export const LockBody = Type.Object(
  {
    v: Type.Literal(1),
    host: Type.String({ maxLength: 255 }),
    pid: Type.Integer({ minimum: 1 }),
    time: NonNegative,
    nonce: Type.String({ maxLength: 64 }),
  },
  { additionalProperties: false },
);
export type LockBody = Static<typeof LockBody>;

/** A running save's registration (`saves/<name>`), from before it loads the marks until its snapshot is written or abandoned. */
export const SaveBody = LockBody;
export type SaveBody = LockBody;
