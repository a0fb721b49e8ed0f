// How a box reaches the broker, from an agent's point of view: one call gives
// the broker's URL inside the box and the box's stub credential per binding.
// The guest relays 127.0.0.1:3128 in every box to that box's broker
// (host/src/broker); agents get base URLs `<brokerUrl>/<binding>`.
import type { AgentContext, Binding } from "./types.ts";

/** The guest relay's address inside every box. */
export const BOX_BROKER_URL = "http://127.0.0.1:3128";

export interface BrokerLink {
  forBox(boxId: string, bindings: Binding[]): Promise<{ brokerUrl: string; stub(binding: Binding): string }>;
}

/**
 * Until the broker mints per-box stubs, boxes get the relay address and a
 * stub that names the box: the broker (or, in tests before it, the fake model
 * API behind the relay address) decides what it is worth.
 */
export const relayOnlyLink: BrokerLink = {
  forBox: async (boxId) => ({ brokerUrl: BOX_BROKER_URL, stub: (binding) => `hutch-stub-${binding}-${boxId}` }),
};

export function agentContext(link: { brokerUrl: string; stub(binding: Binding): string }, home: string, workdir: string, model?: string): AgentContext {
  return {
    brokerUrl: link.brokerUrl,
    endpoint: (binding) => `${link.brokerUrl}/${binding}`,
    stub: link.stub,
    home,
    workdir,
    ...(model ? { model } : {}),
  };
}
