import { t } from "elysia";
import { Anchor, EventInput, Session, SessionCreateBody } from "@hutch/shared";

const Key = t.Optional(t.String({ minLength: 1, maxLength: 128 }));

export const SessionModel = {
  session: Session,
  sessions: t.Array(Session),
  create: SessionCreateBody,
  id: t.Object({ id: t.String({ pattern: "^ses_[0-9a-z]{20}$" }) }),
  list: t.Object({ box: t.Optional(t.String()), state: t.Optional(t.Union([t.Literal("open"), t.Literal("closed")])) }),
  page: t.Object({ from: t.Optional(t.Numeric({ minimum: 1 })), limit: t.Optional(t.Numeric({ minimum: 1, maximum: 10000 })) }),
  append: t.Object({ events: t.Array(EventInput, { minItems: 1, maxItems: 10000 }) }, { additionalProperties: false }),
  seqs: t.Object({ seqs: t.Array(t.Integer()) }),
  input: t.Object({ text: t.String({ minLength: 1, maxLength: 65536 }), idempotencyKey: Key }, { additionalProperties: false }),
  annotate: t.Object({ text: t.String({ minLength: 1, maxLength: 65536 }), anchor: t.Optional(Anchor), idempotencyKey: Key }, { additionalProperties: false }),
  seq: t.Object({ seq: t.Integer() }),
  driver: t.Object({ leaseMs: t.Optional(t.Integer({ minimum: 100, maximum: 86_400_000 })) }, { additionalProperties: false }),
  close: t.Object({ reason: t.Optional(t.String({ maxLength: 1024 })) }, { additionalProperties: false }),
  chunk: t.Object({ id: t.String({ pattern: "^ses_[0-9a-z]{20}$" }), chunk: t.Numeric({ minimum: 0 }) }),
};
