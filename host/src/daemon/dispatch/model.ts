// Request and response schemas of the dispatch controller (TypeBox, from shared).
import { t } from "elysia";
import { Dispatch, DispatchCreateBody } from "@hutch/shared";

export const DispatchModel = {
  create: DispatchCreateBody,
  dispatch: Dispatch,
  dispatches: t.Array(Dispatch),
  id: t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) }),
};
