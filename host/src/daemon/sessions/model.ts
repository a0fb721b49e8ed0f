import { t } from "elysia";
import {
  idPattern,
  AnnotateBody,
  DriverBody,
  EventAppendBody,
  EventsPage,
  EventsPageQuery,
  OutputChunkParams,
  Session,
  SessionCloseBody,
  SessionCreateBody,
  SessionForkBody,
  SessionForkResult,
  SessionInputBody,
  SessionInterruptResult,
  IdempotencyHeaders,
} from "@hutch/shared";

export const SessionModel = {
  session: Session,
  sessions: t.Array(Session),
  create: SessionCreateBody,
  id: t.Object({
    id: t.String({ pattern: idPattern("ses"), title: "session", rule: "a session id: ses_ and 20 lowercase letters or digits" }),
  }),
  list: t.Object({
    box: t.Optional(t.String({ minLength: 1, maxLength: 128 })),
    state: t.Optional(t.Union([t.Literal("open"), t.Literal("closed")])),
  }),
  page: EventsPageQuery,
  eventsPage: EventsPage,
  append: EventAppendBody,
  input: SessionInputBody,
  interrupted: SessionInterruptResult,
  annotate: AnnotateBody,
  idem: IdempotencyHeaders,
  driver: DriverBody,
  close: SessionCloseBody,
  fork: SessionForkBody,
  forked: SessionForkResult,
  chunk: OutputChunkParams,
};
