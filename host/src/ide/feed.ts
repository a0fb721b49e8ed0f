// The bridge's line to the daemon: the change feed (GET /v1/changes), held
// open and reopened whenever it drops. Its state is the sidebar's "is the
// daemon there" (the welcome view shows while it is down).
import { ndjson } from "@hutch/shared";
import type { FeedChange } from "../daemon/changes/service.ts";
import type { DaemonClient } from "../client/daemon.ts";

export interface FeedHandlers {
  /** The feed is open (first time, or after the daemon came back). */
  up(): void | Promise<void>;
  down(reason: string): void;
  change(c: FeedChange): void;
}

const RETRY_MS = 300;

export class Feed {
  private stopped = false;
  private abort: AbortController | null = null;
  connected = false;

  constructor(
    private readonly daemon: DaemonClient,
    private readonly h: FeedHandlers,
  ) {}

  start(): void {
    void this.loop();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  private async loop(): Promise<void> {
    let lastReason = "";
    while (!this.stopped) {
      const reason = await this.once();
      if (this.connected || reason !== lastReason) {
        this.connected = false;
        lastReason = reason;
        if (!this.stopped) this.h.down(reason);
      }
      await Bun.sleep(RETRY_MS);
    }
  }

  /** Reads one feed until it ends; returns why it ended. */
  private async once(): Promise<string> {
    this.abort = new AbortController();
    const { transport } = this.daemon;
    let res: Response;
    try {
      res = await transport.fetch("/v1/changes", { headers: this.daemon.headers, signal: this.abort.signal });
    } catch {
      return `no daemon answers at ${transport.where}`;
    }
    if (!res.ok || !res.body) return `the daemon refused the change feed (${res.status})`;
    try {
      for await (const line of ndjson(res.body)) {
        const msg = line as FeedChange | { type: "hello" | "ping" };
        if (msg.type === "hello") {
          this.connected = true;
          await this.h.up();
        } else if (msg.type !== "ping") this.h.change(msg as FeedChange);
      }
    } catch {
      // the daemon went away mid-stream
    }
    return "the daemon stopped";
  }
}
