import { t } from "elysia";
import { Approval, ApprovalDecideBody, ApprovalId, ApprovalListQuery } from "@hutch/shared";

export const ApprovalModel = {
  approval: Approval,
  approvals: t.Array(Approval),
  id: t.Object({ id: ApprovalId }),
  decide: ApprovalDecideBody,
  list: ApprovalListQuery,
};
