// Environment every agent in a box shares: the broker as its proxy for the
// allowlisted hosts it reaches directly, loopback excluded.
import type { AgentContext } from "./types.ts";

export function proxyEnv(ctx: AgentContext): Record<string, string> {
  if (!ctx.brokerUrl) return {};
  const loopback = "127.0.0.1,localhost";
  return { HTTP_PROXY: ctx.brokerUrl, HTTPS_PROXY: ctx.brokerUrl, http_proxy: ctx.brokerUrl, https_proxy: ctx.brokerUrl, NO_PROXY: loopback, no_proxy: loopback };
}
