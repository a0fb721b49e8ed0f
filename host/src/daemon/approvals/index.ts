// HTTP for approvals: list the pending ones the caller may see, decide one.
// The actor is stamped from the connection; the service decides who may.
import { Elysia } from "elysia";
import type { ApprovalService } from "../../approval/service.ts";
import { actorFrom, type Identify } from "../actor.ts";
import { ApprovalModel } from "./model.ts";

export function approvalsController(approvals: ApprovalService, identify: Identify) {
  return new Elysia({ prefix: "/v1", tags: ["approvals"], normalize: false })
    .derive(({ request }) => ({ actor: actorFrom(request, identify) }))
    .get("/approvals", ({ query, actor }) => approvals.list(actor, query), {
      query: ApprovalModel.list,
      response: ApprovalModel.approvals,
      detail: { summary: "Pending approvals of the sessions the caller may see, oldest first" },
    })
    .get("/approvals/:id", ({ params, actor }) => approvals.get(params.id, actor), {
      params: ApprovalModel.id,
      response: ApprovalModel.approval,
      detail: { summary: "One approval, pending or decided" },
    })
    .post("/approvals/:id", ({ params, body, actor }) => approvals.decide(params.id, body.decision, actor, { via: "api" }, body.reason), {
      params: ApprovalModel.id,
      body: ApprovalModel.decide,
      response: ApprovalModel.approval,
      detail: { summary: "Decide a pending approval (only those who may drive its session)" },
    });
}
