// Which host connection the bytes on the virtio port belong to. The port has
// no connections of its own: the kernel reports the host's chardev opening
// and closing as control messages, and those travel apart from the data. So
// an end of file can arrive *after* the first bytes of the host that came
// next: QEMU sends "closed", "open", then the new host's hello, and under
// load the guest reads the hello before its control work has handled the
// "closed" (seen after a wake from sleep, when QEMU reports the old host
// gone as the guest resumes, and on every fast reconnect). Ending the
// connection at that end of file ended the new host's connection, and the
// host, which saw nothing close, waited for answers for ever.
//
// So an end of file only parks a live connection. What the host sends next
// decides: a hello (a new connection's first frame, on a frame boundary or
// where a frame was cut off) ends the parked one and starts the next; any
// other frame means the end of file was an earlier host's, and the parked
// connection carries on. A connection that already failed, or framing that
// broke, ends at the end of file as before. A host that never comes back
// leaves its connection parked until the next one says hello: its exec
// processes run until then.
import { FrameBoundaries, startsWithHello } from "./frames.ts";

export interface PortSession {
  /** The connection still takes input (no protocol error). */
  readonly alive: boolean;
  feed(bytes: Uint8Array): void;
  /** Its host may be gone: hold output until the host is back. */
  park(): void;
  /** The host is there again (same one, or one that will say hello): output may flow. */
  resume(): void;
  end(reason: string): void;
}

export interface PortSessionsLog {
  info(msg: string, fields?: Record<string, unknown>): void;
}

export class PortSessions {
  private readonly frames = new FrameBoundaries();
  private session: PortSession | undefined;
  private parked = false;
  private parkedMidFrame = false;

  constructor(
    private readonly open: () => PortSession,
    private readonly log: PortSessionsLog,
  ) {}

  /** Bytes the host sent, in order. */
  data(chunk: Uint8Array): void {
    let data = chunk;
    if (this.parked) {
      this.parked = false;
      // A host that left part way through a frame is followed by one whose first bytes are a hello;
      // on a boundary the frame tracking below finds that hello by itself.
      if (this.session && this.parkedMidFrame && startsWithHello(data)) this.next("host reconnected");
      else if (this.session && data.length >= 9 && !startsWithHello(data))
        this.log.info("the end of file was an earlier host's: the connection carries on");
    }
    this.session ??= this.open();
    for (let split = this.frames.scan(data); split; split = this.frames.scan(data)) {
      if (this.session.alive && split.old.length > 0) this.session.feed(split.old);
      this.next("host reconnected");
      this.session = this.open();
      data = split.fresh;
    }
    if (this.session.alive) this.session.feed(data);
  }

  /** The port read end of file: the host that sent the last bytes may be gone. */
  endOfFile(reason: string): void {
    if (!this.session) return;
    if (!this.session.alive || this.frames.lost) {
      this.next(reason);
      return;
    }
    this.parked = true;
    this.parkedMidFrame = this.frames.midFrame;
    this.session.park();
  }

  /** A host is connected again (the port stopped reporting a hang-up). */
  hostBack(): void {
    if (this.parked) this.session?.resume();
  }

  /** The port failed: the connection ends now. */
  fail(reason: string): void {
    this.next(reason);
  }

  private next(reason: string): void {
    this.session?.end(reason);
    this.session = undefined;
    this.parked = false;
    this.frames.reset();
  }
}
