// Request and response schemas of the pools controller (TypeBox, from shared).
import { t } from "elysia";
import { EngineName, PoolCleared, PoolImage, PoolSetBody, PoolStatus } from "@hutch/shared";

export const PoolModel = {
  set: PoolSetBody,
  statuses: t.Array(PoolStatus),
  cleared: PoolCleared,
  key: t.Object({ engine: EngineName, image: PoolImage }),
};
