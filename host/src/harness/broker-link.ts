// How a box reaches the broker, from an agent's point of view: one call gives
// the broker's URL inside the box and the box's stub credential per binding.
// The guest relays 127.0.0.1:3128 in every box to that box's broker
// (host/src/broker); agents get base URLs `<brokerUrl>/<binding>`.
import { HutchError } from "@hutch/shared";
import { BROKER_URL, type BrokerService } from "../broker/service.ts";
import type { AgentContext, Binding } from "./types.ts";

export interface BrokerLink {
  forBox(boxId: string, bindings: Binding[]): Promise<{ brokerUrl: string; stub(binding: Binding): string }>;
}

/** The daemon's broker: the relay address, and the box's own stub per binding, if the box's policy enables it. */
export function brokerLink(broker: BrokerService, boxName: (boxId: string) => string): BrokerLink {
  return {
    forBox: async (boxId, bindings) => {
      const enabled = broker.policy(boxId).bindings;
      const missing = bindings.filter((b) => !enabled.includes(b));
      if (missing.length > 0) {
        const name = boxName(boxId);
        throw new HutchError(
          "denied",
          `box ${name} has no ${missing.join(", ")} binding, so the agent could not reach its model`,
          `enable it: hutch box policy ${name} ${missing.map((b) => `--secret ${b}`).join(" ")} (and store the key: hutch secret set ${missing[0]})`,
        );
      }
      return { brokerUrl: BROKER_URL, stub: (binding) => broker.stub(boxId, binding) };
    },
  };
}

export function agentContext(
  link: { brokerUrl: string; stub(binding: Binding): string },
  home: string,
  workdir: string,
  model?: string,
  mcp?: AgentContext["mcp"],
): AgentContext {
  return {
    endpoint: (binding) => `${link.brokerUrl}/${binding}`,
    stub: link.stub,
    home,
    workdir,
    ...(model ? { model } : {}),
    ...(mcp ? { mcp } : {}),
  };
}
