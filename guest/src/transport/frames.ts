// Follows the frame boundaries of what the host sends on the vport, to spot a
// host that disconnected and connected again so fast that the guest never
// read the end-of-file between the two: the new connection's hello (type 1,
// seq 0) then arrives where the old connection's next frame would. A hello
// can only ever be a connection's first frame, so one later on a boundary
// starts a new connection.
const HELLO = 1;
/** length, seq, type: what is read of each header. */
const PEEK = 9;

export interface Split {
  /** The old connection's last bytes. */
  old: Uint8Array;
  /** From the new hello's first byte on (including header bytes held back from earlier chunks). */
  fresh: Uint8Array;
}

export class FrameBoundaries {
  private readonly head = new Uint8Array(PEEK);
  private have = 0;
  private skip = 0;
  private frames = 0;
  /** Framing broke (a length no frame can have): boundaries are unknown until reset. */
  private lostTrack = false;

  /** Part way through a frame (a header or a payload not all read). */
  get midFrame(): boolean {
    return this.have > 0 || this.skip > 0;
  }

  /** Framing broke: no boundary can be trusted until reset. */
  get lost(): boolean {
    return this.lostTrack;
  }

  reset(): void {
    this.have = 0;
    this.skip = 0;
    this.frames = 0;
    this.lostTrack = false;
  }

  /** Call with every chunk, in order; returns where a new connection starts, if it does in this chunk. */
  scan(chunk: Uint8Array): Split | undefined {
    let pos = 0;
    while (pos < chunk.length && !this.lostTrack) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - pos);
        this.skip -= n;
        pos += n;
        continue;
      }
      const n = Math.min(PEEK - this.have, chunk.length - pos);
      const startInChunk = pos - this.have;
      this.head.set(chunk.subarray(pos, pos + n), this.have);
      this.have += n;
      pos += n;
      if (this.have < PEEK) break;
      const view = new DataView(this.head.buffer);
      const length = view.getUint32(0);
      const seq = view.getUint32(4);
      const type = this.head[8];
      this.have = 0;
      if (length < 10) {
        this.lostTrack = true;
        break;
      }
      if (type === HELLO && seq === 0 && this.frames > 0) {
        const held = startInChunk < 0 ? this.head.slice(0, -startInChunk) : new Uint8Array(0);
        const from = Math.max(startInChunk, 0);
        const fresh = new Uint8Array(held.length + chunk.length - from);
        fresh.set(held);
        fresh.set(chunk.subarray(from), held.length);
        return { old: chunk.subarray(0, from), fresh };
      }
      this.frames++;
      this.skip = 4 + length - PEEK;
    }
    return undefined;
  }
}

/** Whether bytes start with a hello header (length, seq 0, type hello): a new connection's first frame. */
export function startsWithHello(bytes: Uint8Array): boolean {
  if (bytes.length < PEEK) return false;
  const view = new DataView(bytes.buffer, bytes.byteOffset, PEEK);
  return view.getUint32(0) >= 10 && view.getUint32(4) === 0 && bytes[8] === HELLO;
}
