import { t } from "elysia";
import { Anchor, DriverBody, EventAppendBody, EventsPageQuery, IdempotencyHeaders, OutputChunkParams, Session, SessionCreateBody } from "@hutch/shared";

export const SessionModel = {
  session: Session,
  sessions: t.Array(Session),
  create: SessionCreateBody,
  id: t.Object({ id: t.String({ pattern: "^ses_[0-9a-z]{20}$" }) }),
  list: t.Object({ box: t.Optional(t.String({ minLength: 1, maxLength: 128 })), state: t.Optional(t.Union([t.Literal("open"), t.Literal("closed")])) }),
  page: EventsPageQuery,
  append: EventAppendBody,
  input: t.Object({ text: t.String({ minLength: 1, maxLength: 65536 }) }, { additionalProperties: false }),
  annotate: t.Object({ text: t.String({ minLength: 1, maxLength: 65536 }), anchor: t.Optional(Anchor) }, { additionalProperties: false }),
  idem: IdempotencyHeaders,
  driver: DriverBody,
  close: t.Object({ reason: t.Optional(t.String({ maxLength: 1024 })) }, { additionalProperties: false }),
  chunk: OutputChunkParams,
};
