// A store: its backend, its config, its keys (derived once, at open), its
// chunker and its local index cache. Every operation (save, restore, prune,
// check) takes a Store; none of them derives a key or reads the config again.
import { hostname } from "node:os";
import { join } from "node:path";
import { type Static, Type } from "@sinclair/typebox";
import {
  Chunker,
  type ChunkParams,
  ChunkParamsError,
  checkChunkParams,
  check as checkSchema,
  deriveGear,
  firstError,
} from "@hutch/shared/store";
import type { Backend } from "./backend.ts";
import { decodeIndex } from "./blob-index.ts";
import { type StoreKeys, deriveKeys, fromHex, hex, keyedId, mac } from "./crypto.ts";
import { decompress } from "./compress.ts";
import { StoreError, corrupt } from "./errors.ts";
import { IndexCache, type Located } from "./index-cache.ts";
import { type MasterKeys, SnapshotKeys } from "./keys.ts";
import { LocalBackend } from "./local.ts";
import { MemoryGuard } from "./memory.ts";
import { MarkBody, SnapshotBody, getJson, openObject } from "./objects.ts";
import { type BlobType, TRAILER_BYTES, describeBlob, openBlob, packKey, parseTrailer } from "./pack.ts";
import { TREE_LIMITS, type TreeEntry, decodeTree } from "./tree.ts";

/** Chunk sizes (README, "chunk sizes"): files under 512 KiB are one chunk; cuts aim at 1 MiB. */
export const DEFAULT_CHUNKS: ChunkParams = { minSize: 512 * 1024, avgSize: 1024 * 1024, maxSize: 4 * 1024 * 1024 };
/** Pack size target: restic's default, the low end of kopia's 20–40 MB. */
export const DEFAULT_PACK_BYTES = 16 * 1024 * 1024;
/** How long a prune mark waits before its packs may go, and the longest a save may run (rustic keeps 23 h). */
export const DEFAULT_GRACE_MS = 24 * 3600 * 1000;
const MAX_CONFIG_BYTES = 64 * 1024;
/**
 * What reading one tree leaves behind besides its bytes: the cipher context,
 * the hasher, the decoder, the JSON text (two bytes a character) and the
 * parsed entries. Counted against TREE_GC_EVERY, so a walk of thousands of
 * trees (a save's parent, a restore's two passes) collects its garbage as it
 * goes: 4,000 tree reads left RSS 18 MiB above the open store, 7-9 MiB with a
 * collection every 100-200 reads (memory.ts says why the collector lags).
 * The bench's no-change save (4,000 trees read) peaked at 78 MiB with none,
 * 75 every 4 MiB, 74 every 2 MiB, 71 every 1 MiB, for ~0.1 s of user time
 * per halving; a full collection costs more in a process with a big heap.
 */
const TREE_READ_GARBAGE = 16 * 1024;
const TREE_GC_EVERY = 2 * 1024 * 1024;
const PACK_KEYS_KEPT = 1024;

const ConfigBody = Type.Object(
  {
    v: Type.Literal(1),
    id: Type.String({ pattern: "^[0-9a-f]{32}$" }),
    created: Type.Integer({ minimum: 0 }),
    chunker: Type.Object({ minSize: Type.Integer(), avgSize: Type.Integer(), maxSize: Type.Integer() }, { additionalProperties: false }),
    packBytes: Type.Integer({ minimum: 64 * 1024, maximum: 1024 * 1024 * 1024 }),
    graceMs: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);
type ConfigBody = Static<typeof ConfigBody>;
const ConfigFile = Type.Object({ body: ConfigBody, mac: Type.String({ pattern: "^[0-9a-f]{64}$" }) }, { additionalProperties: false });

export interface StoreLocation {
  /** The store directory (a local backend there), unless `backend` is given. */
  dir?: string;
  backend?: Backend;
  /** Where key files live: $HUTCH_HOME/keys. */
  keysDir: string;
  /** Where the master key comes from instead of keysDir's files (a fleet's shared key file). */
  keys?: MasterKeys;
  /** The local cache root ($HUTCH_HOME/cache/snapshots); each store gets a subdirectory by id. */
  cacheDir: string;
  /** ms since the epoch; a test seam for grace periods. */
  clock?: () => number;
}

export interface CreateOptions extends StoreLocation {
  chunker?: ChunkParams;
  packBytes?: number;
  graceMs?: number;
}

export interface StoreInfo {
  id: string;
  location: string;
  created: number;
  chunker: ChunkParams;
  packBytes: number;
  graceMs: number;
}

export class Store {
  private cacheHandle?: IndexCache;
  private readonly packKeys = new Map<string, Uint8Array>();
  private readonly treeGarbage = new MemoryGuard(TREE_GC_EVERY);
  readonly host = hostname();

  private constructor(
    readonly backend: Backend,
    private readonly config: ConfigBody,
    readonly keys: StoreKeys,
    readonly chunker: Chunker,
    private readonly cacheRoot: string,
    readonly clock: () => number,
  ) {}

  get info(): StoreInfo {
    const c = this.config;
    return {
      id: c.id,
      location: this.backend.location,
      created: c.created,
      chunker: { ...c.chunker },
      packBytes: c.packBytes,
      graceMs: c.graceMs,
    };
  }

  /** Makes a new, empty store; its master key goes to keysDir. */
  static async create(opts: CreateOptions): Promise<Store> {
    const backend = backendOf(opts);
    for await (const _ of backend.list("config")) {
      throw new StoreError(
        "conflict",
        `a snapshot store already exists at ${backend.location}`,
        "open it instead, or choose another directory",
      );
    }
    const chunker = opts.chunker ?? DEFAULT_CHUNKS;
    try {
      checkChunkParams(chunker);
    } catch (err) {
      throw new StoreError("invalid", (err as Error).message);
    }
    const id = hex(crypto.getRandomValues(new Uint8Array(16)));
    const clock = opts.clock ?? Date.now;
    const body: ConfigBody = {
      v: 1,
      id,
      created: clock(),
      chunker,
      packBytes: opts.packBytes ?? DEFAULT_PACK_BYTES,
      graceMs: opts.graceMs ?? DEFAULT_GRACE_MS,
    };
    if (!checkSchema(ConfigBody, body)) throw new StoreError("invalid", `bad store settings: ${firstError(ConfigBody, body)}`);
    const master = keysOf(opts).createMaster(id);
    const keys = deriveKeys(master, id);
    const file = { body, mac: hex(mac(keys.check, JSON.stringify(body))) };
    if (!(await backend.put("config", "config", new TextEncoder().encode(JSON.stringify(file))))) {
      throw new StoreError("conflict", `a snapshot store was created at ${backend.location} at the same time`, "open it instead");
    }
    return new Store(backend, body, keys, new Chunker(chunker, await deriveGear(keys.chunk)), opts.cacheDir, clock);
  }

  /** Opens an existing store: reads its config, unseals its key once, derives the subkeys. */
  static async open(opts: StoreLocation): Promise<Store> {
    const backend = backendOf(opts);
    let raw: Uint8Array;
    try {
      raw = await backend.get("config", "config");
    } catch (err) {
      if (err instanceof StoreError && err.code === "not_found") {
        throw new StoreError("not_found", `no snapshot store at ${backend.location}`, "create one first", "config");
      }
      throw err;
    }
    if (raw.length > MAX_CONFIG_BYTES) throw corrupt("config", "is too large to be a store config");
    let file: unknown;
    try {
      file = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
    } catch {
      throw corrupt("config", "is not valid JSON");
    }
    if (!checkSchema(ConfigFile, file)) throw corrupt("config", `is malformed: ${firstError(ConfigFile, file)}`);
    const body = file.body;
    const keys = deriveKeys(keysOf(opts).master(body.id), body.id);
    if (hex(mac(keys.check, JSON.stringify(body))) !== file.mac) {
      throw new StoreError(
        "config",
        `the config of store ${body.id} does not match its key (altered, or the key file is another store's)`,
        "restore the key file and the config from the same backup",
        "config",
      );
    }
    let chunker: Chunker;
    try {
      chunker = new Chunker(body.chunker, await deriveGear(keys.chunk));
    } catch (err) {
      if (err instanceof ChunkParamsError) throw corrupt("config", err.message);
      throw err;
    }
    return new Store(backend, body, keys, chunker, opts.cacheDir, opts.clock ?? Date.now);
  }

  /** The index cache, opened on first use (listing snapshots never needs it). */
  get cache(): IndexCache {
    this.cacheHandle ??= new IndexCache(join(this.cacheRoot, this.config.id));
    return this.cacheHandle;
  }

  /**
   * Brings the index cache up to the store's index files: reads the new ones
   * (checked), forgets the vanished ones. Cheap when nothing changed: one listing.
   */
  async syncIndex(): Promise<void> {
    // A prune folding index files together writes the new one, then deletes the old: a file that
    // vanishes between the listing and the read means the listing is stale, so list again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.syncOnce();
      } catch (err) {
        if (!(err instanceof StoreError && err.code === "not_found") || attempt >= 5) throw err;
      }
    }
  }

  private async syncOnce(): Promise<void> {
    const cache = this.cache;
    const known = cache.files();
    const listed = new Set<string>();
    for await (const info of this.backend.list("index")) {
      listed.add(info.name);
      if (known.has(info.name)) continue;
      const object = `index/${info.name}`;
      const body = openObject(this.keys.enc, "index", info.name, await this.backend.get("index", info.name));
      cache.addFile(info.name, [...decodeIndex(object, body)]);
    }
    cache.removeFiles([...known].filter((n) => !listed.has(n)));
  }

  /** Every prune mark in the store; the cache stops offering their packs for reuse. */
  async loadMarks(): Promise<{ name: string; body: MarkBody }[]> {
    const out: { name: string; body: MarkBody }[] = [];
    for await (const info of this.backend.list("marks")) {
      const body = await gone(getJson(this.backend, this.keys.enc, "marks", info.name, MarkBody, info.size));
      if (body) out.push({ name: info.name, body });
    }
    this.cache.setMarked(out.flatMap((m) => m.body.packs));
    return out;
  }

  /** A pack's key, from its trailer (read once per pack and kept). */
  async packKeyOf(pack: string, packSize: number): Promise<Uint8Array> {
    const cached = this.packKeys.get(pack);
    if (cached) return cached;
    const object = `packs/${pack}`;
    if (packSize < TRAILER_BYTES) throw corrupt(object, "is too short to be a pack");
    const trailer = await this.backend.get("packs", pack, { offset: packSize - TRAILER_BYTES, length: TRAILER_BYTES });
    const key = packKey(this.keys.enc, parseTrailer(object, trailer, packSize).salt);
    if (this.packKeys.size >= PACK_KEYS_KEPT) this.packKeys.clear();
    this.packKeys.set(pack, key);
    return key;
  }

  /**
   * Opens and decompresses one blob whose stored bytes have been read. The
   * seal binds the bytes to the blob's type and id; `verifyId` also
   * recomputes the keyed id of the plaintext (check and tree reads do; a
   * restore of data does not, as restic does not, to save an HMAC over every
   * restored byte).
   */
  async openStored(loc: Located, stored: Uint8Array, verifyId = true): Promise<Uint8Array> {
    const object = `packs/${loc.pack}`;
    const key = await this.packKeyOf(loc.pack, loc.packSize);
    const opened = openBlob(key, loc, stored);
    if (!opened) throw corrupt(object, `${describeBlob(loc.type, loc.id)} fails authentication`);
    let plain = opened;
    if (loc.flags & 1) {
      try {
        plain = await decompress(opened, loc.rawLength);
      } catch (err) {
        throw corrupt(object, `${describeBlob(loc.type, loc.id)}: ${(err as Error).message}`);
      }
    } else if (plain.length !== loc.rawLength)
      throw corrupt(object, `${describeBlob(loc.type, loc.id)} has ${plain.length} bytes, the index says ${loc.rawLength}`);
    if (verifyId && hex(keyedId(this.keys.id, plain)) !== hex(loc.id))
      throw corrupt(object, `${describeBlob(loc.type, loc.id)} does not match its id`);
    return plain;
  }

  /** Where a blob is stored (any copy, marked or not); throws naming it when the index has none. */
  locate(type: BlobType, id: Uint8Array, needed: string): Located {
    const loc = this.cache.find(type, id, false);
    if (!loc) throw corrupt(needed, `needs ${describeBlob(type, id)}, which no index file lists`);
    return loc;
  }

  /** locate for many blobs at once, in one read of the index cache. */
  locateAll(type: BlobType, ids: Uint8Array[], needed: (i: number) => string): Located[] {
    return this.cache.reading(() => ids.map((id, i) => this.locate(type, id, needed(i))));
  }

  async readBlob(type: BlobType, id: Uint8Array, needed: string): Promise<Uint8Array> {
    const loc = this.locate(type, id, needed);
    if (type === "tree" && loc.rawLength > TREE_LIMITS.bytes)
      throw corrupt(`packs/${loc.pack}`, `${describeBlob(type, id)} is larger than any tree can be`);
    const stored = await this.backend.get("packs", loc.pack, { offset: loc.offset, length: loc.length });
    return this.openStored(loc, stored);
  }

  /**
   * A directory's entries, checked; `needed` names what asked (for errors).
   * `collect: false` leaves the garbage to the caller's own collections (a
   * restore's, every 8 MiB of plaintext: counting its 8,000 tree reads here
   * too cost it 0.5-0.8 s of user time for no lower peak).
   */
  async readTree(treeId: string, needed: string, collect = true): Promise<TreeEntry[]> {
    const bytes = await this.readBlob("tree", fromHex(treeId), needed);
    const entries = decodeTree(`tree ${treeId.slice(0, 16)} (${needed})`, bytes);
    if (collect) this.treeGarbage.drop(TREE_READ_GARBAGE + 8 * bytes.length);
    return entries;
  }

  /** Every snapshot, oldest first. Needs neither the index nor any pack. */
  async listSnapshots(): Promise<SnapshotRecord[]> {
    const out: SnapshotRecord[] = [];
    for await (const info of this.backend.list("snapshots")) {
      // Gone between the listing and the read: forgotten by a prune just now.
      const body = await gone(getJson(this.backend, this.keys.enc, "snapshots", info.name, SnapshotBody, info.size));
      if (body) out.push({ name: info.name, ...body });
    }
    return out.sort((a, b) => a.time - b.time || (a.id < b.id ? -1 : 1));
  }

  /** One snapshot by its snap_ id (or a unique prefix of its object name). */
  async getSnapshot(ref: string): Promise<SnapshotRecord> {
    const all = await this.listSnapshots();
    const hits = all.filter((s) => s.id === ref || (ref.length >= 8 && s.name.startsWith(ref)));
    if (hits.length === 1) return hits[0]!;
    if (hits.length > 1) throw new StoreError("invalid", `${ref} names ${hits.length} snapshots`, "give the full snap_ id");
    throw new StoreError("not_found", `no snapshot ${ref} in the store at ${this.backend.location}`, "list them: hutch snapshot list");
  }

  close(): void {
    this.cacheHandle?.close();
    this.cacheHandle = undefined;
    this.backend.close();
  }
}

export type SnapshotRecord = SnapshotBody & { name: string };

/** The value, or undefined when the object was deleted after it was listed. */
async function gone<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (err) {
    if (err instanceof StoreError && err.code === "not_found") return undefined;
    throw err;
  }
}

function keysOf(opts: StoreLocation): MasterKeys {
  return opts.keys ?? SnapshotKeys.load(opts.keysDir);
}

function backendOf(opts: StoreLocation): Backend {
  if (opts.backend) return opts.backend;
  if (!opts.dir) throw new StoreError("invalid", "a store needs a directory or a backend");
  return new LocalBackend(opts.dir);
}
