// HTTP for the broker: secrets (names only ever come back), a box's egress
// policy, and its recent decisions. No logic here.
import { Elysia } from "elysia";
import type { BrokerService } from "../../broker/service.ts";
import type { BoxService } from "../../box/service.ts";
import { BrokerModel } from "./model.ts";

/** Whose secrets a request names: a remote user's own, or null for the local user's (the server's). */
export type SecretOwner = (req: Request) => string | null;

export function brokerController(broker: BrokerService, boxes: BoxService, owner: SecretOwner = () => null) {
  return new Elysia({ prefix: "/v1", tags: ["broker"], normalize: false })
    .get("/secrets", ({ request }) => broker.listSecrets(owner(request)), {
      response: BrokerModel.secrets,
      detail: { summary: "Secret names and the bindings that use them (never values)" },
    })
    .put("/secrets/:name", ({ params, body, request }) => broker.setSecret(params.name, body.value, owner(request)), {
      params: BrokerModel.secretName,
      body: BrokerModel.secretValue,
      response: BrokerModel.secret,
      detail: { summary: "Seal and store a secret" },
    })
    .post("/secrets/find", ({ body, request }) => broker.findSecrets(body.texts, owner(request)), {
      body: BrokerModel.find,
      response: BrokerModel.found,
      detail: { summary: "Where the caller's stored secret values occur in texts (positions and names, never values)" },
    })
    .delete("/secrets/:name", ({ params, request }) => broker.removeSecret(params.name, owner(request)), {
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
