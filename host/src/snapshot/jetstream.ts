// The snapshot store's backend on JetStream, so a snapshot taken through one
// server restores through any other. An object's bytes are one entry in an
// object store bucket under a fresh id; its name points at that id from a KV
// bucket. The name is what makes an object immutable: it is claimed with
// compare-and-set on the key's revision (publishing with the revision the
// writer read as expected-last-subject-sequence, and a Nats-Msg-Id naming the
// slot, because 2.9's clustered streams let two in-flight writers pass that
// expectation; see store/README.md). So of two puts of one name exactly one
// wins; the loser's bytes are removed. An object is visible only once its
// name points at bytes already stored, so a listing never shows a partial one.
// Names are read from the KV stream's leader (no direct get; a listing from
// the stream's state), so a read sees every put acknowledged before it.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { jetstream } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { type ObjectStore, Objm } from "@nats-io/obj";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import {
  claimSlot,
  type ClusterOptions,
  clusterName,
  defaultReplicas,
  LOST,
  leaderKeys,
  manager,
  opening,
  retrying,
} from "../store/jetstream/cluster.ts";
import { type Backend, checkName, type ObjectInfo, type ObjectKind, type Range, sweepStaging } from "./backend.ts";
import { corrupt, StoreError } from "./errors.ts";

/** A name's entry: the id its bytes are stored under, and their size. */
interface Pointer {
  id: string;
  size: number;
}

/** Whole objects kept per handle for ranged reads (a restore reads one pack's blobs in turn). */
const CACHED = 4;

export class JetStreamBackend implements Backend {
  readonly location: string;
  /** Where putFile's files are written first: the server's own (swept of dead processes' files at open), or a directory of this handle's. */
  private readonly staging: string;
  private readonly ownStaging: boolean;
  /** Recently read objects by id: immutable under their id, so never stale. */
  private readonly cache = new Map<string, Uint8Array>();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: KV,
    private readonly bytes: ObjectStore,
    private readonly bucket: string,
    private readonly writeTimeoutMs: number,
    staging: string | undefined,
  ) {
    this.location = `nats bucket ${bucket} on cluster "${clusterName(nc)}"`;
    this.ownStaging = staging === undefined;
    if (staging === undefined) this.staging = mkdtempSync(join(tmpdir(), "hutch-snapshot-staging-"));
    else {
      mkdirSync(staging, { recursive: true, mode: 0o700 });
      sweepStaging(staging);
      this.staging = staging;
    }
  }

  /**
   * The store `bucket` (two buckets: `<bucket>-names` in KV, `<bucket>` objects), made when missing.
   * `staging` is a directory of the server's own for files on their way in (a home's tmp), swept at open.
   */
  static async open(nc: NatsConnection, bucket: string, options: ClusterOptions & { staging?: string } = {}): Promise<JetStreamBackend> {
    const replicas = options.replicas ?? defaultReplicas(nc);
    const writeTimeoutMs = options.writeTimeoutMs ?? 30_000;
    const [names, bytes] = await opening(
      () => clusterName(nc),
      `the opening of snapshot bucket ${bucket}`,
      writeTimeoutMs,
      () =>
        Promise.all([
          new Kvm(nc).create(`${bucket}-names`, { replicas, history: 1, allow_direct: false }),
          new Objm(nc).create(bucket, { replicas }),
        ]),
    );
    return new JetStreamBackend(nc, jetstream(nc), await manager(nc), names, bytes, bucket, writeTimeoutMs, options.staging);
  }

  stagingDir(): string {
    mkdirSync(this.staging, { recursive: true, mode: 0o700 });
    return this.staging;
  }

  async *list(kind: ObjectKind): AsyncIterable<ObjectInfo> {
    // From the names stream's leader, not kv.keys's consumer, which missed a snapshot just taken through another
    // server (leaderKeys). A deleted name is listed too, as its marker; entry() skips it.
    const keys = Object.keys(
      await this.retry(`a listing of ${kind}`, () => leaderKeys(this.jsm, `${this.bucket}-names`, `${kind}.>`)),
    ).sort();
    for (const key of keys) {
      const e = await this.entry(key);
      if (e) yield { name: key.slice(kind.length + 1), size: e.pointer.size, mtimeMs: e.created.getTime() };
    }
  }

  async get(kind: ObjectKind, name: string, range?: Range): Promise<Uint8Array> {
    checkName(kind, name);
    const object = `${kind}/${name}`;
    const e = await this.entry(key(kind, name));
    const missing = () =>
      new StoreError(
        "not_found",
        `${object} is missing from the store at ${this.location}`,
        "run check to see what else is missing",
        object,
      );
    if (!e) throw missing();
    let data = this.cache.get(e.pointer.id);
    if (!data) {
      // The object store reads from any replica: one behind may not have bytes the name already points at.
      const got = await retrying(
        () => clusterName(this.nc),
        `a read of ${object}`,
        2000,
        async () => (await this.bytes.getBlob(e.pointer.id)) ?? Promise.reject(new Error(`${object}: its bytes are not there`)),
      ).catch(() => null);
      if (!got) throw missing();
      data = got;
      this.cache.set(e.pointer.id, data);
      if (this.cache.size > CACHED) this.cache.delete(this.cache.keys().next().value!);
    }
    if (!range) return data.slice();
    if (range.offset + range.length > data.length)
      throw corrupt(object, `is truncated (wanted bytes ${range.offset}..${range.offset + range.length}, it ends at ${data.length})`);
    return data.slice(range.offset, range.offset + range.length);
  }

  async put(kind: ObjectKind, name: string, data: Uint8Array): Promise<boolean> {
    checkName(kind, name);
    const object = `${kind}/${name}`;
    const k = key(kind, name);
    if (await this.entry(k)) return false;
    const id = crypto.randomUUID();
    await this.retry(`the upload of ${object}`, () => this.bytes.putBlob({ name: id }, data));
    const won = await this.claim(object, k, { id, size: data.length });
    if (!won) await this.retry(`the removal of a losing copy of ${object}`, () => this.bytes.delete(id));
    return won;
  }

  async putFile(kind: ObjectKind, name: string, path: string): Promise<boolean> {
    checkName(kind, name);
    const won = await this.put(kind, name, readFileSync(path));
    unlinkSync(path);
    return won;
  }

  async delete(kind: ObjectKind, name: string): Promise<void> {
    checkName(kind, name);
    const object = `${kind}/${name}`;
    const e = await this.entry(key(kind, name));
    if (!e) return;
    await this.retry(`the removal of ${object}`, () => this.names.delete(key(kind, name)));
    await this.retry(`the removal of ${object}`, () => this.bytes.delete(e.pointer.id));
  }

  close(): void {
    this.cache.clear();
    // Staging files are for putFile, which consumes them; an empty directory of this handle's goes with it.
    if (this.ownStaging && existsSync(this.staging) && readdirSync(this.staging).length === 0)
      rmSync(this.staging, { recursive: true, force: true });
  }

  private retry<T>(what: string, attempt: () => Promise<T>): Promise<T> {
    return retrying(() => clusterName(this.nc), what, this.writeTimeoutMs, attempt);
  }

  /** A name's current pointer, or null when it has none (never stored, or deleted). */
  private async entry(k: string): Promise<{ pointer: Pointer; created: Date; revision: number } | null> {
    const e = await this.retry(`a read of ${k}`, () => this.names.get(k));
    if (e?.operation !== "PUT") return null;
    return { pointer: e.json<Pointer>(), created: e.created, revision: e.revision };
  }

  /** Points the name at `pointer` unless another put did first: compare-and-set on the key's revision. */
  private async claim(object: string, k: string, pointer: Pointer): Promise<boolean> {
    const subject = `$KV.${this.bucket}-names.${k}`;
    const mine = crypto.randomUUID();
    for (;;) {
      const raw = await this.retry(`a read of ${object}`, () => this.names.get(k));
      if (raw && raw.operation === "PUT") return raw.json<Pointer>().id === pointer.id;
      const after = raw?.revision ?? 0;
      const h = headers();
      h.set("Hutch-Append", mine);
      const won = await claimSlot({
        js: this.js,
        subject,
        payload: JSON.stringify(pointer),
        headers: h,
        idHeader: "Hutch-Append",
        after,
        timeoutMs: this.writeTimeoutMs,
        retry: (attempt) => this.retry(`the naming of ${object}`, attempt),
      });
      if (won !== LOST) return true;
      // Someone else wrote the key since (or a retry of ours was stored): read it again.
    }
  }
}

function key(kind: ObjectKind, name: string): string {
  return `${kind}.${name}`;
}
