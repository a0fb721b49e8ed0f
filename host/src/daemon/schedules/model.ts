// Request and response schemas of the schedules controller (TypeBox, from shared).
import { t } from "elysia";
import { Schedule, ScheduleCreateBody, ScheduleId } from "@hutch/shared";

export const ScheduleModel = {
  create: ScheduleCreateBody,
  schedule: Schedule,
  schedules: t.Array(Schedule),
  id: t.Object({ id: ScheduleId }),
  query: t.Object({ box: t.Optional(t.String({ minLength: 1, maxLength: 128 })) }),
  removed: t.Object({ id: t.String(), removed: t.Literal(true) }),
};
