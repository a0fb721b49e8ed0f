// Checkpoints: a box made with `--checkpoint-every PERIOD` gets a snapshot of
// its files (snapshot/service.ts, the home's store or, in a fleet, the
// fleet's) once PERIOD has passed since its last one (or since it was made),
// while it runs. The latest is kept in its config (box/restart.ts), so the
// fleet knows what to make it again from when its server dies.
// One checkpoint at a time on a server: each reads the whole box.
import { log } from "../log.ts";
import type { BoxService } from "./service.ts";

const logger = log.create({ service: "checkpoint" });

/** How often the boxes are looked at. */
const TICK_MS = 2_000;

export interface CheckpointDeps {
  boxes: Pick<BoxService, "list" | "byId" | "checkpointed">;
  /** Takes a snapshot of the box; its id. */
  snapshot(boxId: string, signal: AbortSignal): Promise<string>;
  now?: () => number;
}

export class Checkpointer {
  private timer: ReturnType<typeof setInterval> | undefined;
  private running: Promise<void> | null = null;
  private readonly abort = new AbortController();
  /** When a box's last try failed: it is tried again a period later, not every tick. */
  private readonly failedAt = new Map<string, number>();

  constructor(private readonly deps: CheckpointDeps) {}

  start(): void {
    this.timer = setInterval(() => {
      if (!this.running) this.running = this.round().finally(() => (this.running = null));
    }, TICK_MS);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.abort.abort();
    await this.running?.catch(() => undefined);
  }

  /** The boxes due, oldest checkpoint first, one after another. */
  async round(): Promise<void> {
    const now = (this.deps.now ?? Date.now)();
    const due = this.deps.boxes
      .list()
      .filter((b) => b.state === "running" && b.checkpoint)
      .map((b) => {
        const last = Math.max(Date.parse(b.checkpoint!.last?.at ?? b.createdAt), this.failedAt.get(b.id) ?? 0);
        return { box: b, at: last + b.checkpoint!.everyS * 1000 };
      })
      .filter((d) => d.at <= now)
      .sort((x, y) => x.at - y.at);
    for (const { box } of due) {
      if (this.abort.signal.aborted) return;
      if (this.deps.boxes.byId(box.id)?.state !== "running") continue;
      const t0 = Date.now();
      try {
        const snapshot = await this.deps.snapshot(box.id, this.abort.signal);
        this.failedAt.delete(box.id);
        this.deps.boxes.checkpointed(box.id, snapshot, new Date().toISOString());
        logger.info("checkpoint taken", { box: box.name, snapshot, ms: Date.now() - t0 });
      } catch (err) {
        this.failedAt.set(box.id, Date.now());
        if (!this.abort.signal.aborted)
          logger.warn("checkpoint failed; tried again a period from now", { box: box.name, err: String(err) });
      }
    }
  }
}
