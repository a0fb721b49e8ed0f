// HTTP for warm pools: parse, validate, call the pools. No logic here.
import { Elysia } from "elysia";
import type { WarmPools } from "../../box/pool.ts";
import { PoolModel } from "./model.ts";

export function poolsController(pools: WarmPools) {
  return new Elysia({ prefix: "/v1/pools", tags: ["pools"], normalize: false })
    .get("/", () => pools.list(), {
      response: PoolModel.statuses,
      detail: { summary: "Every server's warm pools: wanted, ready, filling" },
    })
    .put("/", ({ body }) => pools.set(body), {
      body: PoolModel.set,
      response: PoolModel.statuses,
      detail: { summary: "Set a warm pool's size (each server keeps that many; 0 removes it)" },
    })
    .delete("/:engine/:image", ({ params }) => pools.clear(params.engine, params.image), {
      params: PoolModel.key,
      response: PoolModel.cleared,
      detail: { summary: "Remove a warm pool and its boxes" },
    });
}
