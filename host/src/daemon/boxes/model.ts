// Request and response schemas of the boxes controller (TypeBox, from shared).
import { t } from "elysia";
import { Box, BoxCreateBody, BoxSetBody, IdempotencyHeaders } from "@hutch/shared";

export const BoxModel = {
  box: Box,
  boxes: t.Array(Box),
  create: BoxCreateBody,
  set: BoxSetBody,
  idem: IdempotencyHeaders,
  ref: t.Object({ ref: t.String({ minLength: 1, maxLength: 128 }) }),
  deleted: t.Object({ id: t.String(), name: t.String(), deleted: t.Literal(true) }),
};
