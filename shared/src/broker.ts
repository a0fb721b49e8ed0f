// The broker's contracts: bindings (a secret tied to one upstream), a box's
// egress policy, and the API bodies for secrets and policy. Values of secrets
// never appear in any of these.
import { Type, type Static } from "@sinclair/typebox";

export const SecretName = Type.String({
  pattern: "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
  title: "secret name",
  description: "letters, digits, _ . -",
  rule: "use letters, digits, '_', '.' and '-', starting with a letter or digit (at most 64)",
});
export const BindingName = Type.String({
  pattern: "^[a-z0-9][a-z0-9-]{0,31}$",
  title: "binding name",
  description: "lowercase letters, digits and dashes",
  rule: "use lowercase letters, digits and '-', starting with a letter or digit (at most 32)",
});

/** A hostname (or IP literal) with an optional :port, as given to --allow. */
export const HostPattern = Type.String({
  pattern: "^(\\*\\.)?[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?$|^\\[[0-9A-Fa-f:.]+\\](:[0-9]{1,5})?$",
  maxLength: 262,
  title: "host",
  rule: "a host name, *.domain or [IPv6 address], with an optional :port",
});

export const Binding = Type.Object(
  {
    /** The upstream host the broker opens TLS to, and verifies the certificate of. */
    host: Type.String({ pattern: "^[A-Za-z0-9.-]{1,253}$", rule: "a host name: letters, digits, '.' and '-'" }),
    port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
    /** Dial this address instead of resolving host (the certificate is still checked against host). */
    address: Type.Optional(Type.String({ minLength: 2, maxLength: 64 })),
    /** PEM file of the only CA trusted for this upstream (tests, private upstreams); default: the system's roots. */
    ca: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    /** The header carrying the credential, and its value with {secret} (or {basic:USER} for HTTP Basic with the secret as password). */
    header: Type.String({ pattern: "^[A-Za-z0-9-]{1,64}$", rule: "a header name: letters, digits and '-'" }),
    format: Type.String({
      pattern: "^[ -~]*(\\{secret\\}|\\{basic:[A-Za-z0-9._-]{1,64}\\})[ -~]*$",
      maxLength: 256,
      rule: 'printable ASCII holding {secret} or {basic:USER}, e.g. "Bearer {secret}"',
    }),
    /** The secret (hutch secret set NAME) injected for this binding. */
    secret: SecretName,
    methods: Type.Array(Type.String({ pattern: "^[A-Z]{1,16}$", rule: "an HTTP method in capitals, e.g. GET" }), {
      minItems: 1,
      maxItems: 16,
    }),
    /** Request paths must start with one of these (after /<binding>). */
    paths: Type.Array(Type.String({ pattern: "^/[ -~]{0,255}$", rule: "a path starting with /, printable ASCII" }), {
      minItems: 1,
      maxItems: 64,
    }),
    /**
     * Requests that wait for a person's approval before they are sent
     * (host/src/approval): "METHOD /path", `*` for any method, and `*` in
     * the path for any characters, e.g. "POST /repos/*\/issues", "DELETE *".
     */
    approve: Type.Optional(
      Type.Array(
        Type.String({
          pattern: "^([A-Z]{1,16}|\\*) (\\*|/[!-~]{0,255})$",
          rule: 'an HTTP method in capitals (or *), a space, and a path starting with / (or *), e.g. "POST /repos/*/issues"',
        }),
        { maxItems: 64 },
      ),
    ),
    /** Environment a box process gets for this binding: {url} is the endpoint, {stub} the box's stub credential. */
    env: Type.Optional(
      Type.Record(
        Type.String({ pattern: "^[A-Za-z_][A-Za-z0-9_]{0,127}$", rule: "an environment variable name: letters, digits and '_'" }),
        Type.String({ maxLength: 1024 }),
      ),
    ),
  },
  { additionalProperties: false },
);
export type Binding = Static<typeof Binding>;

/** What snapshots of boxes take: which roots, and what they leave out (shared/src/ignore.ts rules, relative to the snapshot's top). */
export const SnapshotConfig = Type.Object(
  {
    /** Default both: the workspace and the agent's home. */
    roots: Type.Optional(
      Type.Array(Type.Union([Type.Literal("workspace"), Type.Literal("home")]), { minItems: 1, maxItems: 2, uniqueItems: true }),
    ),
    /** e.g. "workspace/node_modules/", "*.log", "home/.cache/". */
    exclude: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 256 })),
    /** Rule files honoured in the tree, default ".hutchignore"; false for none. */
    ignoreFile: Type.Optional(
      Type.Union([
        Type.String({ minLength: 1, maxLength: 255, pattern: "^[^/\\0]+$", rule: "a file name, without '/'" }),
        Type.Literal(false),
      ]),
    ),
  },
  { additionalProperties: false },
);
export type SnapshotConfig = Static<typeof SnapshotConfig>;

/** $HUTCH_HOME/config.json: the user's layer over the built-in defaults. */
export const HutchConfig = Type.Object(
  {
    bindings: Type.Optional(Type.Record(BindingName, Binding)),
    snapshots: Type.Optional(SnapshotConfig),
    /** `hutch acp`: the agent an editor's new session runs when --agent is not given. */
    acp: Type.Optional(
      Type.Object(
        { agent: Type.Optional(Type.Union([Type.Literal("claude"), Type.Literal("codex"), Type.Literal("opencode"), Type.Literal("pi")])) },
        { additionalProperties: false },
      ),
    ),
    broker: Type.Optional(
      Type.Object(
        {
          /** Addresses CONNECT may dial although they are private (tests, a local registry): host -> address. */
          pins: Type.Optional(
            Type.Record(
              Type.String({ pattern: "^[A-Za-z0-9.-]{1,253}$", rule: "a host name: letters, digits, '.' and '-'" }),
              Type.String({ minLength: 2, maxLength: 64 }),
            ),
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type HutchConfig = Static<typeof HutchConfig>;

export const UnlistedRule = Type.Union([Type.Literal("deny"), Type.Literal("ask")], {
  title: "unlisted",
  rule: "deny or ask",
});
export const ApprovalTimeoutMs = Type.Integer({
  minimum: 1000,
  maximum: 7 * 24 * 3_600_000,
  title: "approval timeout",
  rule: "between 1 second and 7 days, in ms",
});

export const BoxPolicy = Type.Object({
  /** Hosts CONNECT may reach (host, host:port, *.domain); port 443 when none is given. */
  allow: Type.Array(HostPattern, { maxItems: 256 }),
  /** Bindings whose credential the broker injects for this box. */
  bindings: Type.Array(BindingName, { maxItems: 32 }),
  /** A host not on the allowlist: refused (deny, the default) or held until a person decides (ask). */
  unlisted: Type.Optional(UnlistedRule),
  /** How long an approval of this box waits for a person, in ms (default 10 minutes). */
  approvalTimeoutMs: Type.Optional(ApprovalTimeoutMs),
});
export type BoxPolicy = Static<typeof BoxPolicy>;

export const PolicyChangeBody = Type.Object(
  {
    allow: Type.Optional(Type.Array(HostPattern, { maxItems: 256 })),
    deny: Type.Optional(Type.Array(HostPattern, { maxItems: 256 })),
    bindings: Type.Optional(Type.Array(BindingName, { maxItems: 32 })),
    unbind: Type.Optional(Type.Array(BindingName, { maxItems: 32 })),
    unlisted: Type.Optional(UnlistedRule),
    approvalTimeoutMs: Type.Optional(ApprovalTimeoutMs),
  },
  { additionalProperties: false },
);
export type PolicyChangeBody = Static<typeof PolicyChangeBody>;

/** One text sent to POST /v1/secrets/find: longer ones are sent in overlapping pieces. */
export const SECRET_FIND_TEXT_MAX = 1024 * 1024;
/** Stored values shorter than this are not looked for (they would match ordinary words). */
export const SECRET_FIND_MIN = 8;

/** PUT /v1/secrets/:name. The value travels in the body of a request on the 0600 socket, never in argv or a URL. */
export const SecretValueBody = Type.Object({ value: Type.String({ minLength: 1, maxLength: 16384 }) }, { additionalProperties: false });
export type SecretValueBody = Static<typeof SecretValueBody>;

/**
 * POST /v1/secrets/find: where the caller's own stored secret values (raw or
 * base64) occur in these texts. Only positions and secret names come back,
 * never a value, so text bound for somewhere else (a transcript written home)
 * can be redacted without the values leaving the daemon.
 */
export const SecretFindBody = Type.Object(
  { texts: Type.Array(Type.String({ maxLength: SECRET_FIND_TEXT_MAX }), { maxItems: 100_000 }) },
  { additionalProperties: false },
);
export type SecretFindBody = Static<typeof SecretFindBody>;

export const SecretFound = Type.Object({
  /** The index of the text it is in, where it starts (UTF-16 units) and how long it is there. */
  text: Type.Integer({ minimum: 0 }),
  at: Type.Integer({ minimum: 0 }),
  length: Type.Integer({ minimum: 1 }),
  /** The secret's name. */
  secret: Type.String(),
});
export type SecretFound = Static<typeof SecretFound>;
export const SecretFindResult = Type.Object({ found: Type.Array(SecretFound) });
export type SecretFindResult = Static<typeof SecretFindResult>;

export const SecretInfo = Type.Object({
  name: Type.String(),
  /** Bindings that inject it. */
  bindings: Type.Array(Type.String()),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});
export type SecretInfo = Static<typeof SecretInfo>;

export const EgressDecision = Type.Union([Type.Literal("allowed"), Type.Literal("denied"), Type.Literal("injected")]);
export type EgressDecision = Static<typeof EgressDecision>;

/** One broker decision as `hutch box egress` shows it (the same fields as the egress.* events). */
export const EgressRecord = Type.Object({
  at: Type.String(),
  decision: EgressDecision,
  host: Type.String(),
  port: Type.Integer(),
  method: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  binding: Type.Optional(Type.String()),
  status: Type.Optional(Type.Integer()),
  reason: Type.Optional(Type.String()),
  bytesUp: Type.Integer(),
  bytesDown: Type.Integer(),
  ms: Type.Integer(),
});
export type EgressRecord = Static<typeof EgressRecord>;
