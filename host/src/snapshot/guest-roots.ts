// A running box's roots as the streams snapshotStreams reads: snap.out
// (chunk records, with this box's have-map offered first) when the guest has
// the `chunks` capability, else tar.out. Streams are opened only when the
// save reaches their root, after it has loaded the index and the prune
// marks, so the offer names only chunks the store can still give.
import { Chan, HutchError, type Mux, type MuxStream, deriveGear } from "@hutch/shared";
import { boxDigestKey, HaveMap } from "./have.ts";
import type { StreamHave, StreamRoot } from "./stream-save.ts";
import type { Store } from "./store.ts";

export interface GuestRoot {
  /** Its name at the snapshot's top ("workspace"). */
  name: string;
  /** Where it is in the box ("/workspace"). */
  path: string;
  exclude: string[];
  ignoreFile?: string;
}

export interface GuestRoots {
  roots: StreamRoot[];
  /** Set when the guest walks and chunks: pass it to snapshotStreams. */
  have?: StreamHave;
  /** Closes every stream opened (the guest stops sending what nobody reads). */
  close(): void;
}

/** A gear table as snap.out carries it: 256 little-endian u32 words, base64. */
function gearBase64(gear: Uint32Array): string {
  const b = Buffer.alloc(gear.length * 4);
  for (let i = 0; i < gear.length; i++) b.writeUInt32LE(gear[i]!, i * 4);
  return b.toString("base64");
}

export async function guestRoots(opts: {
  mux: Mux;
  capabilities: readonly string[];
  store: Store;
  boxId: string;
  /** The box's have-map file (0600, in a 0700 directory under $HUTCH_HOME). */
  haveFile: string;
  roots: GuestRoot[];
}): Promise<GuestRoots & { warning?: string }> {
  const { mux, store } = opts;
  const opened: MuxStream[] = [];
  const close = () => {
    for (const s of opened) s.close();
  };
  if (!opts.capabilities.includes("chunks")) {
    const roots = opts.roots.map((r): StreamRoot => {
      const stream = mux.open({ tool: "tar.out", path: r.path, meta: true, exclude: r.exclude, ...ignoreOf(r) });
      opened.push(stream);
      return { name: r.name, tar: streamBytes(stream, Chan.stdout) };
    });
    return { roots, close };
  }
  const map = HaveMap.load(opts.haveFile);
  const have: StreamHave = { map, key: boxDigestKey(store.keys.id, opts.boxId) };
  const gear = gearBase64(await deriveGear(store.keys.chunk));
  let offer: { digests: Uint8Array; count: number } | undefined;
  async function* records(r: GuestRoot): AsyncGenerator<Uint8Array> {
    offer ??= map.offer((id) => store.cache.find("data", id, true) !== null);
    const stream = mux.open({
      tool: "snap.out",
      path: r.path,
      exclude: r.exclude,
      ...ignoreOf(r),
      chunk: store.info.chunker,
      gear,
      digestKey: Buffer.from(have.key).toString("base64"),
      offered: offer.count,
    });
    opened.push(stream);
    const bytes = streamBytes(stream, Chan.stdout);
    if (offer.digests.length > 0) await stream.write(Chan.stdin, offer.digests);
    stream.eof(Chan.stdin);
    yield* bytes;
  }
  return {
    roots: opts.roots.map((r) => ({ name: r.name, records: records(r) })),
    have,
    close,
    ...(map.warning ? { warning: map.warning } : {}),
  };
}

function ignoreOf(r: GuestRoot): { ignoreFile?: string } {
  return r.ignoreFile ? { ignoreFile: r.ignoreFile } : {};
}

/** A tool stream's bytes on one channel, credited only as they are taken (so a box cannot flood the host). */
export function streamBytes(stream: MuxStream, chan: number): AsyncIterable<Uint8Array> {
  stream.autoCredit = false;
  const queue: Uint8Array[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  let failure: string | undefined;
  stream.handlers = {
    data: (c, b) => {
      if (c !== chan) return stream.consumed(b.length);
      queue.push(b);
      wake?.();
    },
    msg: () => undefined,
    close: (e) => {
      closed = true;
      if (e) failure = e.message;
      wake?.();
    },
  };
  async function* bytes(): AsyncGenerator<Uint8Array> {
    for (;;) {
      const b = queue.shift();
      if (b) {
        yield b;
        stream.consumed(b.length);
        continue;
      }
      if (closed) {
        if (failure) throw new HutchError("failed", `the box's guest stopped sending: ${failure}`, "see the box's console: hutch box info");
        return;
      }
      await new Promise<void>((r) => (wake = r));
      wake = undefined;
    }
  }
  return bytes();
}
