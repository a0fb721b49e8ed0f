// The bridge's line to the daemon: the change feed (GET /v1/changes), held
// open and reopened whenever it drops. Its state is the sidebar's "is the
// daemon there" (the welcome view shows while it is down).
import { check, FeedLine, firstError, ndjson, type FeedChange } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "ide" });

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
      for await (const msg of ndjson(res.body)) {
        // A line of another shape (a newer daemon's) is passed over: the rest of the feed still holds.
        if (!check(FeedLine, msg)) logger.warn("skipped a change line that does not fit", { problem: firstError(FeedLine, msg) });
        else if (msg.type === "hello") {
          this.connected = true;
          await this.h.up();
        } else if (msg.type !== "ping") this.h.change(msg);
      }
    } catch {
      // the daemon went away mid-stream
    }
    return "the daemon stopped";
  }
}
