// Daemon API bodies. The daemon validates requests against these (Elysia's t
// is TypeBox), the CLI and the extension read responses through the same types.
import { Type, type Static } from "@sinclair/typebox";
import { BindingName, HostPattern } from "./broker.ts";

/** Bounds on what a client may send, so every bad input is a 400 naming the field. */
export const API_LIMITS = {
  /** A request body: a JSON object of at most this many bytes (the server refuses longer ones before reading them)... */
  bodyBytes: 16 * 1024 * 1024,
  /** ...nested at most this deep (every object or array is a level; the deepest body the API defines has 6). */
  depth: 32,
} as const;

export const BoxName = Type.String({ pattern: "^[a-z0-9][a-z0-9-]{0,62}$", description: "lower-case letters, digits and dashes" });
export const EngineName = Type.Union([Type.Literal("process"), Type.Literal("qemu")]);
export type EngineName = Static<typeof EngineName>;

export const BoxState = Type.Union([
  Type.Literal("creating"),
  Type.Literal("stopped"),
  Type.Literal("starting"),
  Type.Literal("running"),
  Type.Literal("paused"),
  Type.Literal("stopping"),
  Type.Literal("failed"),
  Type.Literal("deleted"),
]);
export type BoxState = Static<typeof BoxState>;
export const DesiredState = Type.Union([Type.Literal("stopped"), Type.Literal("running"), Type.Literal("paused"), Type.Literal("deleted")]);
export type DesiredState = Static<typeof DesiredState>;

export const Box = Type.Object({
  id: Type.String(),
  name: Type.String(),
  engine: EngineName,
  isolation: Type.Union([Type.Literal("namespace"), Type.Literal("vm")]),
  state: BoxState,
  desired: DesiredState,
  reason: Type.Optional(Type.String()),
  pid: Type.Optional(Type.Integer()),
  guest: Type.Optional(Type.Object({ version: Type.String(), capabilities: Type.Array(Type.String()) })),
  /** What the engine says about this box (a VM's accelerator and why, its sizes). */
  engineInfo: Type.Optional(Type.Record(Type.String(), Type.String())),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});
export type Box = Static<typeof Box>;

export const BoxCreateBody = Type.Object(
  {
    name: BoxName,
    engine: Type.Optional(EngineName),
    start: Type.Optional(Type.Boolean()),
    /** VM settings (qemu engine). */
    cpus: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
    memoryMiB: Type.Optional(Type.Integer({ minimum: 256, maximum: 262144 })),
    disk: Type.Optional(Type.String({ pattern: "^[1-9][0-9]*[MGT]$", description: "overlay size, e.g. 20G" })),
    image: Type.Optional(Type.String({ pattern: "^[a-z0-9][a-z0-9._-]{0,63}$" })),
    /** Extra kernel command line for the VM (debugging a boot). */
    kernelArgs: Type.Optional(Type.String({ maxLength: 1024, pattern: "^[ -~]*$" })),
    /** Egress: hosts CONNECT may reach, and bindings whose credential the broker injects. */
    allow: Type.Optional(Type.Array(HostPattern, { maxItems: 256 })),
    secrets: Type.Optional(Type.Array(BindingName, { maxItems: 32 })),
  },
  { additionalProperties: false },
);
export type BoxCreateBody = Static<typeof BoxCreateBody>;

export const Op = Type.Object({
  id: Type.String(),
  boxId: Type.String(),
  kind: Type.String(),
  status: Type.Union([Type.Literal("pending"), Type.Literal("done"), Type.Literal("failed")]),
  error: Type.Optional(Type.String()),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});
export type Op = Static<typeof Op>;

export const Health = Type.Object({ ok: Type.Boolean(), version: Type.String(), pid: Type.Integer(), home: Type.String() });
export type Health = Static<typeof Health>;

export const SessionState = Type.Union([Type.Literal("open"), Type.Literal("closed")]);
export const ClientKind = Type.Union([Type.Literal("cli"), Type.Literal("ide"), Type.Literal("agent"), Type.Literal("orchestrator")]);
export type ClientKind = Static<typeof ClientKind>;

export const Session = Type.Object({
  id: Type.String(),
  box: Type.String(),
  boxName: Type.String(),
  agent: Type.String(),
  label: Type.Optional(Type.String()),
  state: SessionState,
  owner: Type.String(),
  pty: Type.Optional(Type.String()),
  /** The agent runs headless, one process per prompt, with no terminal. */
  headless: Type.Optional(Type.Boolean()),
  driver: Type.Optional(
    Type.Object({
      actor: Type.Object({ kind: Type.String(), id: Type.String() }),
      leaseMs: Type.Optional(Type.Integer()),
      expiresAt: Type.Optional(Type.String()),
    }),
  ),
  lastSeq: Type.Integer({ minimum: 0 }),
  createdAt: Type.String(),
  closedAt: Type.Optional(Type.String()),
});
export type Session = Static<typeof Session>;

/** The coding agents hutch can run (host/src/harness); `shell` is a plain login shell. */
export const AgentName = Type.Union([Type.Literal("claude"), Type.Literal("codex"), Type.Literal("opencode"), Type.Literal("pi"), Type.Literal("shell")]);
export type AgentName = Static<typeof AgentName>;

export const SessionCreateBody = Type.Object(
  {
    box: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    agent: Type.Optional(AgentName),
    label: Type.Optional(Type.String({ maxLength: 256 })),
    /** Run the agent headless with this prompt (its structured stream becomes events) instead of in a terminal. */
    prompt: Type.Optional(Type.String({ minLength: 1, maxLength: 65536 })),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 256, pattern: "^[A-Za-z0-9._:/@-]+$" })),
    argv: Type.Optional(Type.Array(Type.String(), { minItems: 1, maxItems: 256 })),
    cols: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    rows: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  },
  { additionalProperties: false },
);
export type SessionCreateBody = Static<typeof SessionCreateBody>;
