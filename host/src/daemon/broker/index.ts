// HTTP for the broker: secrets (names only ever come back), a box's egress
// policy, and its recent decisions. No logic here.
import { Elysia } from "elysia";
import type { BrokerService } from "../../broker/service.ts";
import type { BoxService } from "../../box/service.ts";
import { BrokerModel } from "./model.ts";

export function brokerController(broker: BrokerService, boxes: BoxService) {
  return new Elysia({ prefix: "/v1", tags: ["broker"], normalize: false })
    .get("/secrets", () => broker.listSecrets(), {
      response: BrokerModel.secrets,
      detail: { summary: "Secret names and the bindings that use them (never values)" },
    })
    .put("/secrets/:name", ({ params, body }) => broker.setSecret(params.name, body.value), {
      params: BrokerModel.secretName,
      body: BrokerModel.secretValue,
      response: BrokerModel.secret,
      detail: { summary: "Seal and store a secret" },
    })
    .delete("/secrets/:name", ({ params }) => broker.removeSecret(params.name), {
      params: BrokerModel.secretName,
      response: BrokerModel.removed,
      detail: { summary: "Remove a secret" },
    })
    .get("/boxes/:ref/policy", ({ params }) => broker.policy(boxes.get(params.ref).id), {
      params: BrokerModel.ref,
      response: BrokerModel.policy,
      detail: { summary: "A box's egress policy" },
    })
    .patch("/boxes/:ref/policy", ({ params, body }) => broker.changePolicy(boxes.get(params.ref).id, body), {
      params: BrokerModel.ref,
      body: BrokerModel.policyChange,
      response: BrokerModel.policy,
      detail: { summary: "Change a box's egress policy; applies to the next connection, also while it runs" },
    })
    .get("/boxes/:ref/egress", ({ params, query }) => broker.egress(boxes.get(params.ref).id, query.decision, query.limit ?? 50), {
      params: BrokerModel.ref,
      query: BrokerModel.egressQuery,
      response: BrokerModel.egress,
      detail: { summary: "A box's recent egress decisions, oldest first" },
    });
}
