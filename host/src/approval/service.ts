// Approvals: the one way a source (the broker's credentialed requests, egress
// to an unlisted host) asks a person and waits. The session log is the record:
// a request is one approval.requested in one open session of the box, its
// answer one approval.decided after it (a person's, or the daemon's at
// expiry), so a daemon restart finds every pending one again by reading the
// logs (recover). What is kept here is only what a log cannot hold: the
// waiting promises and the expiry timers.
//
// A grant is bound to the digest it was asked with and used once: `take`
// hands it to the first request with that digest and never again.
import {
  APPROVAL_REASON_MAX,
  APPROVAL_SUMMARY_MAX,
  emit,
  Events,
  HutchError,
  newId,
  read,
  type Actor,
  type Approval,
  type ApprovalChoice,
  type ApprovalKind,
  type ApprovalOutcome,
} from "@hutch/shared";
import type { NewEvent, SessionLog, SessionRow } from "../store/types.ts";
import type { SessionAccess } from "../actors.ts";
import { SYSTEM } from "../actors.ts";
import { hintOf, verdictOf, type ApprovalAnswer, type Verdict } from "./verdict.ts";

export type { ApprovalAnswer, Verdict } from "./verdict.ts";
import { Listeners } from "../listeners.ts";
import { log } from "../log.ts";

export { digestOf } from "./digest.ts";

const logger = log.create({ service: "approvals" });

/** How long a request waits for a person when its box names no time of its own. */
export const APPROVAL_TTL_MS = 10 * 60_000;
/**
 * Approvals one box may have waiting at once. A box asks by sending (a
 * request, a connection), and one that gives up and sends again with another
 * body each time would otherwise fill the person's list and the log.
 */
export const MAX_PENDING_PER_BOX = 32;
/** Decided approvals kept in memory for `take` and for listing (the log keeps them all). */
const DECIDED_KEPT = 1000;

/** What a source asks. */
export interface ApprovalAsk {
  kind: ApprovalKind;
  boxId: string;
  /** What a person judges; cut to APPROVAL_SUMMARY_MAX. */
  summary: string;
  /** digestOf(...) of exactly what would be done. */
  digest: string;
  /** What it is about, for the source to act on later (egress: host:port). */
  target?: string;
}

/** Where a decision came from: a client of the daemon's API, or the box itself (its broker listener, its guest channel). */
export type DecisionOrigin = { via: "api" } | { via: "box"; boxId: string };

interface Entry {
  approval: Approval;
  waiters: ((a: ApprovalAnswer) => void)[];
  timer?: ReturnType<typeof setTimeout>;
  /** A grant handed to a request already (allow_once is good for one). */
  used: boolean;
}

const granted = (s: Approval["state"]) => s === "allow_once" || s === "allow_always";

/**
 * What approvals need of the session layer (the SessionService): to log into
 * a session, and who may drive it. Named here, not imported, so the session
 * layer (which runs agents, which reach the broker, which asks approvals)
 * and this stay out of a circle.
 */
export interface ApprovalSessions {
  /** Logs events into a session without waiting (SessionService.log): in call order, a failure logged. */
  log(sessionId: string, events: NewEvent[]): void;
  accessOf(row: SessionRow, actor: Actor): SessionAccess | null;
}

export class ApprovalService {
  private readonly entries = new Map<string, Entry>();
  /** Every decision taken (allow_always is acted on by its source: egress adds the host to the policy). */
  readonly decided = new Listeners<[approval: Approval]>("approval decided");
  /** A box's own wait (its policy's approval timeout), when it names one. */
  ttlOf: (boxId: string) => number | undefined = () => undefined;

  constructor(
    private readonly sessions: ApprovalSessions,
    private readonly store: SessionLog,
    private readonly boxName: (boxId: string) => string = (id) => id,
  ) {}

  /**
   * Logs the request and returns its id with a promise of its answer: a
   * person's, or "expired" when nobody answered in time. Throws a named
   * error when nobody can be asked (the box has no open session).
   */
  ask(req: ApprovalAsk, now = Date.now()): { id: string; answer: Promise<ApprovalAnswer> } {
    const session = this.store.list({ boxId: req.boxId, state: "open" }).at(-1);
    if (!session)
      throw new HutchError(
        "conflict",
        `this needs a person's approval and box ${this.boxName(req.boxId)} has no open session to ask in`,
        `open one (hutch run --box ${this.boxName(req.boxId)}) and retry; its approvals then show in hutch approvals`,
      );
    let waiting = 0;
    for (const e of this.entries.values()) if (e.approval.box === req.boxId && e.approval.state === "pending") waiting++;
    if (waiting >= MAX_PENDING_PER_BOX)
      throw new HutchError(
        "limited",
        `box ${this.boxName(req.boxId)} already has ${waiting} approvals waiting for a person, its most`,
        "answer or let them expire (hutch approvals), then retry",
      );
    const id = newId("apr", now);
    const ttl = this.ttlOf(req.boxId) ?? APPROVAL_TTL_MS;
    const approval: Approval = {
      id,
      kind: req.kind,
      box: req.boxId,
      boxName: this.boxName(req.boxId),
      session: session.id,
      summary: req.summary.slice(0, APPROVAL_SUMMARY_MAX),
      digest: req.digest,
      ...(req.target ? { target: req.target.slice(0, 300) } : {}),
      requestedAt: new Date(now).toISOString(),
      expiresAt: new Date(now + ttl).toISOString(),
      state: "pending",
    };
    const entry: Entry = { approval, waiters: [], used: false };
    this.sessions.log(session.id, [
      {
        ...emit(Events.approvalRequested, {
          id,
          kind: approval.kind,
          box: approval.box,
          session: session.id,
          summary: approval.summary,
          digest: approval.digest,
          ...(approval.target ? { target: approval.target } : {}),
          expiresAt: approval.expiresAt,
        }),
        actor: SYSTEM,
      },
    ]);
    this.entries.set(id, entry);
    this.arm(entry, now);
    logger.info("approval requested", { id, kind: req.kind, box: req.boxId, session: session.id });
    return { id, answer: this.wait(id) };
  }

  /** The answer to an approval, now if it has one. */
  wait(id: string): Promise<ApprovalAnswer> {
    const e = this.entries.get(id);
    if (!e) return Promise.resolve({ id, decision: "expired", by: SYSTEM, reason: "no such approval" });
    if (e.approval.state !== "pending") return Promise.resolve(answerOf(e.approval));
    return new Promise((resolve) => e.waiters.push(resolve));
  }

  /** Pending approvals the actor may see, oldest first. */
  list(actor: Actor, filter: { box?: string; session?: string } = {}): Approval[] {
    return [...this.entries.values()]
      .map((e) => e.approval)
      .filter((a) => a.state === "pending")
      .filter((a) => (!filter.box || a.box === filter.box || a.boxName === filter.box) && (!filter.session || a.session === filter.session))
      .filter((a) => {
        const row = this.store.get(a.session);
        return row !== null && this.sessions.accessOf(row, actor) !== null;
      })
      .sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  /** One approval the actor may see (pending or decided since the daemon started), or not_found. */
  get(id: string, actor: Actor): Approval {
    const e = this.entries.get(id);
    const row = e ? this.store.get(e.approval.session) : null;
    if (!e || !row || this.sessions.accessOf(row, actor) === null)
      throw new HutchError("not_found", `no approval ${id}`, "list pending ones: hutch approvals");
    return e.approval;
  }

  /**
   * A person's answer. Only an actor that may drive the session decides, and
   * never through the box's own connection: that attempt is refused and
   * logged (approval.refused), so an agent approving itself is on the record.
   */
  decide(id: string, choice: ApprovalChoice, actor: Actor, origin: DecisionOrigin, reason?: string): Approval {
    const approval = this.get(id, actor);
    if (origin.via === "box") {
      const why =
        origin.boxId === approval.box
          ? "a box cannot decide its own approvals"
          : `box ${this.boxName(origin.boxId)} cannot decide another box's approvals`;
      this.sessions.log(approval.session, [{ ...emit(Events.approvalRefused, { id, reason: why }), actor }]);
      logger.warn("refused a decision from inside a box", { id, box: origin.boxId });
      throw new HutchError("denied", `${why} (${id})`, `a person decides it outside the box: hutch approve ${id} or hutch deny ${id}`);
    }
    const row = this.store.get(approval.session)!;
    const access = this.sessions.accessOf(row, actor);
    if (access !== "own" && access !== "drive")
      throw new HutchError(
        "denied",
        `approval ${id} is for box ${approval.boxName}, which is shared with you read-only`,
        "only those who may drive its session decide; ask its owner",
      );
    if (approval.state !== "pending")
      throw new HutchError("conflict", `approval ${id} was already ${approval.state}`, "list pending ones: hutch approvals");
    this.settle(this.entries.get(id)!, choice, actor, reason);
    return approval;
  }

  /**
   * A grant for exactly this digest, used once: the first request of the box
   * with the digest of an allowed approval takes it (allow_always keeps
   * answering; reject_always refuses it without asking). `named`: the approval the request names; one whose digest
   * differs is refused, never sent.
   */
  take(boxId: string, digest: string, named?: string): { id: string; allow: boolean } | null {
    if (named) {
      const e = this.entries.get(named);
      if (!e || e.approval.box !== boxId)
        throw new HutchError("denied", `no approval ${named} for this box`, "send the request without naming one to ask again");
      if (e.approval.digest !== digest)
        throw new HutchError(
          "denied",
          `this request differs from what approval ${named} was asked for (digest ${digest.slice(0, 19)}…, approved ${e.approval.digest.slice(0, 19)}…); nothing was sent`,
          "send exactly the approved request, or send this one without the approval header to ask again",
        );
      if (!granted(e.approval.state) || (e.used && e.approval.state === "allow_once"))
        throw new HutchError(
          "denied",
          `approval ${named} is ${e.used ? "used already" : e.approval.state}`,
          "send the request without the approval header to ask again",
        );
      if (e.approval.state === "allow_once") e.used = true;
      return { id: named, allow: true };
    }
    for (const e of this.entries.values()) {
      if (e.approval.box !== boxId || e.approval.digest !== digest) continue;
      if (e.approval.state === "reject_always") return { id: e.approval.id, allow: false };
      if (!granted(e.approval.state)) continue;
      if (e.approval.state === "allow_once") {
        if (e.used) continue;
        e.used = true;
      }
      return { id: e.approval.id, allow: true };
    }
    return null;
  }

  /** Marks a grant a source acted on at once (the request that waited for it), so it is not used twice. */
  use(id: string): void {
    const e = this.entries.get(id);
    if (e) e.used = true;
  }

  /**
   * A source's whole round: a standing grant or refusal for the digest if
   * there is one, else a person's answer, waited for (a grant is then used).
   * Null when `gone` settles first (the request that waited went away).
   */
  async round(req: ApprovalAsk, named?: string, gone?: Promise<unknown>): Promise<Verdict | null> {
    let asked: { id: string; answer: Promise<ApprovalAnswer> };
    try {
      const taken = this.take(req.boxId, req.digest, named);
      if (taken)
        return taken.allow
          ? { allow: true, id: taken.id }
          : { allow: false, status: 403, message: `refused without asking: approval ${taken.id} rejects this always` };
      asked = this.ask(req);
    } catch (err) {
      const status = err instanceof HutchError && err.code === "limited" ? 429 : 403;
      return { allow: false, status, message: `${(err as Error).message}${hintOf(err)}` };
    }
    const answer = await (gone ? Promise.race([asked.answer, gone.then(() => null)]) : asked.answer);
    if (!answer) return null;
    if (answer.decision === "allow_once" || answer.decision === "allow_always") this.use(answer.id);
    return verdictOf(answer);
  }

  /**
   * After a daemon start: every approval requested in an open session and
   * not decided is pending again, with what is left of its time (or expired
   * now, logged once). The requests that waited for them are gone with the
   * old daemon; a grant can still be taken by the box's retry of the same request.
   */
  recover(now = Date.now()): number {
    let n = 0;
    for (const row of this.store.list({ state: "open" })) {
      const events = this.store.summaries.eventsOf(row.id, [Events.approvalRequested.kind, Events.approvalDecided.kind]);
      const decided = new Map<string, { decision: ApprovalOutcome; actor: Actor; reason?: string }>();
      for (const e of events) {
        const d = read(e, Events.approvalDecided);
        if (d) decided.set(d.id, { decision: d.decision, actor: e.actor, ...(d.reason ? { reason: d.reason } : {}) });
      }
      for (const e of events) {
        const r = read(e, Events.approvalRequested);
        if (!r || this.entries.has(r.id)) continue;
        const d = decided.get(r.id);
        const approval: Approval = {
          id: r.id,
          kind: r.kind,
          box: r.box,
          boxName: this.boxName(r.box),
          session: row.id,
          summary: r.summary,
          digest: r.digest,
          ...(r.target ? { target: r.target } : {}),
          requestedAt: e.at,
          expiresAt: r.expiresAt,
          state: d ? d.decision : "pending",
          ...(d ? { decidedBy: d.actor } : {}),
          ...(d?.reason ? { reason: d.reason } : {}),
        };
        const entry: Entry = { approval, waiters: [], used: false };
        this.entries.set(r.id, entry);
        if (!d) this.arm(entry, now);
        if (entry.approval.state === "pending") n++;
      }
    }
    this.trim();
    if (n) logger.info("pending approvals recovered from the session logs", { pending: n });
    return n;
  }

  stop(): void {
    for (const e of this.entries.values()) clearTimeout(e.timer);
  }

  private arm(entry: Entry, now: number): void {
    const left = Date.parse(entry.approval.expiresAt) - now;
    const expire = () => entry.approval.state === "pending" && this.settle(entry, "expired", SYSTEM, "nobody answered before it expired");
    if (left <= 0) return void expire();
    entry.timer = setTimeout(expire, left);
    entry.timer.unref?.();
  }

  private settle(entry: Entry, decision: ApprovalOutcome, actor: Actor, reason?: string): void {
    const a = entry.approval;
    clearTimeout(entry.timer);
    const why = reason?.slice(0, APPROVAL_REASON_MAX);
    this.sessions.log(a.session, [
      { ...emit(Events.approvalDecided, { id: a.id, decision, digest: a.digest, ...(why ? { reason: why } : {}) }), actor },
    ]);
    a.state = decision;
    a.decidedBy = actor;
    if (why) a.reason = why;
    logger.info("approval decided", { id: a.id, decision, by: actor.id });
    const answer = answerOf(a);
    for (const w of entry.waiters.splice(0)) w(answer);
    this.decided.emit(a);
    this.trim();
  }

  /** Decided approvals beyond DECIDED_KEPT leave memory, oldest first (their log stays). */
  private trim(): void {
    const done = [...this.entries.values()].filter((e) => e.approval.state !== "pending");
    for (const e of done.slice(0, Math.max(0, done.length - DECIDED_KEPT))) this.entries.delete(e.approval.id);
  }
}

function answerOf(a: Approval): ApprovalAnswer {
  return { id: a.id, decision: a.state as ApprovalOutcome, by: a.decidedBy ?? SYSTEM, ...(a.reason ? { reason: a.reason } : {}) };
}
