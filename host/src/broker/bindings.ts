// Bindings: built-in presets for the vendors agents talk to, overlaid by the
// user's $HUTCH_HOME/config.json. A binding names the upstream the broker
// opens TLS to and how the credential travels; never the credential itself.
import type { Binding, HutchConfig } from "@hutch/shared";

export const PRESETS: Record<string, Binding> = {
  anthropic: {
    host: "api.anthropic.com",
    header: "x-api-key",
    format: "{secret}",
    secret: "anthropic",
    methods: ["GET", "POST", "HEAD"],
    paths: ["/v1/", "/api/"],
    env: { ANTHROPIC_BASE_URL: "{url}", ANTHROPIC_API_KEY: "{stub}" },
  },
  openai: {
    host: "api.openai.com",
    header: "Authorization",
    format: "Bearer {secret}",
    secret: "openai",
    methods: ["GET", "POST", "DELETE"],
    paths: ["/v1/"],
    env: { OPENAI_BASE_URL: "{url}/v1", OPENAI_API_KEY: "{stub}" },
  },
  github: {
    host: "github.com",
    header: "Authorization",
    format: "Basic {basic:x-access-token}",
    secret: "github",
    methods: ["GET", "POST"],
    paths: ["/"],
    // git rewrites https://github.com/ to the broker and sends the stub as its auth header.
    env: {
      GIT_CONFIG_COUNT: "2",
      GIT_CONFIG_KEY_0: "url.{url}/.insteadOf",
      GIT_CONFIG_VALUE_0: "https://github.com/",
      GIT_CONFIG_KEY_1: "http.{url}/.extraHeader",
      GIT_CONFIG_VALUE_1: "{header-name}: {header}",
    },
  },
};

/** The header value carrying `value` in this binding's format. */
export function renderCredential(format: string, value: string): string {
  return format.replace(/\{secret\}|\{basic:([A-Za-z0-9._-]+)\}/, (_m, user: string | undefined) =>
    user === undefined ? value : Buffer.from(`${user}:${value}`).toString("base64"),
  );
}

/** The environment a box process gets for one binding. */
export function bindingEnv(name: string, b: Binding, brokerUrl: string, stub: string): Record<string, string> {
  const url = `${brokerUrl}/${name}`;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(b.env ?? {})) {
    out[k] = v
      .replaceAll("{url}", url)
      .replaceAll("{stub}", stub)
      .replaceAll("{header-name}", b.header)
      .replaceAll("{header}", renderCredential(b.format, stub));
  }
  return out;
}

/** The presets overlaid by config.json's bindings (loadConfig in ../config.ts reads it). */
export function allBindings(config: HutchConfig): Record<string, Binding> {
  return { ...PRESETS, ...config.bindings };
}
