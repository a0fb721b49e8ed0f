// Request and response schemas of the broker controller (TypeBox, from shared).
import { t } from "elysia";
import {
  BoxPolicy,
  EgressQuery,
  EgressRecord,
  PolicyChangeBody,
  SecretFindBody,
  SecretFindResult,
  SecretInfo,
  SecretName,
  SecretValueBody,
} from "@hutch/shared";

export const BrokerModel = {
  secretName: t.Object({ name: SecretName }),
  secretValue: SecretValueBody,
  secret: SecretInfo,
  secrets: t.Array(SecretInfo),
  find: SecretFindBody,
  found: SecretFindResult,
  removed: t.Object({ name: t.String(), removed: t.Literal(true) }),
  ref: t.Object({ ref: t.String({ minLength: 1, maxLength: 128 }) }),
  policy: BoxPolicy,
  policyChange: PolicyChangeBody,
  egressQuery: EgressQuery,
  egress: t.Array(EgressRecord),
};
