// The E2B API's wire shapes, as the `e2b` SDK speaks them: the control API
// (JSON over HTTPS, E2B's openapi.yml) and the in-box API, envd, whose
// process and filesystem services are Connect RPC in its JSON form (the
// canonical protobuf JSON of E2B's process.proto and filesystem.proto:
// camelCase names, bytes as base64, enums by name, 64-bit integers as
// strings or numbers). Requests are checked against these before use;
// answers are built to them. Fields the SDK may send that hutch does not act
// on (network rules, volume mounts, MCP) are let through and ignored.
import { Type, type Static } from "@sinclair/typebox";

/** The envd version hutch answers as: stdin close (0.5.2) and octet-stream upload (0.5.7), not file metadata (0.6.2). */
export const E2B_ENVD_VERSION = "0.6.1";
/** The port envd listens on inside an E2B sandbox: requests to it are the in-box API, others go to the box's own ports. */
export const E2B_ENVD_PORT = 49983;
/** E2B's default sandbox lifetime when create names none, and the longest one it grants (seconds). */
export const E2B_DEFAULT_TIMEOUT_S = 300;
export const E2B_MAX_TIMEOUT_S = 24 * 3600;

/** A sandbox id: the box's name without `e2b-`, random lowercase letters and digits (it is also a host-name label). */
export const SandboxId = Type.String({ pattern: "^[a-z0-9]{20}$", rule: "a sandbox id: 20 lowercase letters and digits" });

const StringMap = Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 4096 }));
const EnvMap = Type.Record(
  Type.String({ pattern: "^[^=\\0]{1,256}$", rule: "a variable name of 1 to 256 characters, without '=' or NUL" }),
  Type.String({ maxLength: 65536 }),
);
const Timeout = Type.Integer({ minimum: 0, maximum: E2B_MAX_TIMEOUT_S });

// Control API requests.
export const NewSandbox = Type.Object(
  {
    templateID: Type.String({ minLength: 1, maxLength: 128 }),
    timeout: Type.Optional(Timeout),
    metadata: Type.Optional(StringMap),
    envVars: Type.Optional(EnvMap),
    autoPause: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true },
);
export type NewSandbox = Static<typeof NewSandbox>;
export const TimeoutBody = Type.Object({ timeout: Timeout }, { additionalProperties: true });
export const ConnectBody = Type.Object({ timeout: Type.Optional(Timeout) }, { additionalProperties: true });

// Control API answers.
export const SandboxState = Type.Union([Type.Literal("running"), Type.Literal("paused")]);
export type SandboxState = Static<typeof SandboxState>;
/** What create, connect and resume answer. */
export const CreatedSandbox = Type.Object({
  templateID: Type.String(),
  sandboxID: Type.String(),
  clientID: Type.String(),
  envdVersion: Type.String(),
  envdAccessToken: Type.String(),
  domain: Type.Union([Type.String(), Type.Null()]),
});
export type CreatedSandbox = Static<typeof CreatedSandbox>;
/** What list and get answer for each sandbox. */
export const ListedSandbox = Type.Object({
  templateID: Type.String(),
  sandboxID: Type.String(),
  alias: Type.Optional(Type.String()),
  clientID: Type.String(),
  startedAt: Type.String(),
  endAt: Type.String(),
  cpuCount: Type.Integer(),
  memoryMB: Type.Integer(),
  diskSizeMB: Type.Integer(),
  metadata: StringMap,
  state: SandboxState,
  envdVersion: Type.String(),
  /** get only: the in-box API's token and domain, as E2B's SandboxDetail carries them. */
  envdAccessToken: Type.Optional(Type.String()),
  domain: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
export type ListedSandbox = Static<typeof ListedSandbox>;
/** The control API's error body: the SDK reads `message`, and the HTTP status. */
export const E2bError = Type.Object({ code: Type.Integer(), message: Type.String() });
export type E2bError = Static<typeof E2bError>;

// envd, process service (Connect JSON).
const Uint = Type.Integer({ minimum: 0, maximum: 0xffffffff });
export const PtySize = Type.Object({ size: Type.Object({ cols: Uint, rows: Uint }) });
export const ProcessConfig = Type.Object({
  cmd: Type.String({ minLength: 1, maxLength: 4096 }),
  args: Type.Optional(Type.Array(Type.String(), { maxItems: 4096 })),
  envs: Type.Optional(EnvMap),
  cwd: Type.Optional(Type.String({ maxLength: 4096 })),
});
export type ProcessConfig = Static<typeof ProcessConfig>;
export const ProcessSelector = Type.Union([Type.Object({ pid: Uint }), Type.Object({ tag: Type.String({ maxLength: 256 }) })]);
export type ProcessSelector = Static<typeof ProcessSelector>;
export const StartRequest = Type.Object({
  process: ProcessConfig,
  pty: Type.Optional(PtySize),
  tag: Type.Optional(Type.String({ maxLength: 256 })),
  stdin: Type.Optional(Type.Boolean()),
});
export type StartRequest = Static<typeof StartRequest>;
export const ConnectRequest = Type.Object({ process: ProcessSelector });
export const ListRequest = Type.Object({});
/** bytes fields arrive as base64. */
const Base64 = Type.String({
  pattern: "^[A-Za-z0-9+/_-]*={0,2}$",
  maxLength: 64 * 1024 * 1024,
  rule: "base64 (standard or URL-safe alphabet)",
});
export const ProcessInput = Type.Union([Type.Object({ stdin: Base64 }), Type.Object({ pty: Base64 })]);
export const SendInputRequest = Type.Object({ process: ProcessSelector, input: ProcessInput });
export const SendSignalSchema = Type.Union([
  Type.Literal("SIGNAL_UNSPECIFIED"),
  Type.Literal("SIGNAL_SIGTERM"),
  Type.Literal("SIGNAL_SIGKILL"),
  Type.Literal(0),
  Type.Literal(15),
  Type.Literal(9),
]);
export const SendSignalRequest = Type.Object({ process: ProcessSelector, signal: SendSignalSchema });
export const CloseStdinRequest = Type.Object({ process: ProcessSelector });
export const UpdateRequest = Type.Object({ process: ProcessSelector, pty: Type.Optional(PtySize) });

/** One ProcessEvent, in the oneof's JSON form. */
export type ProcessEvent =
  | { start: { pid: number } }
  | { data: { stdout: string } | { stderr: string } | { pty: string } }
  | { end: { exitCode: number; exited: boolean; status: string; error?: string } }
  | { keepalive: Record<string, never> };
export interface ProcessInfo {
  config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string };
  pid: number;
  tag?: string;
}

// envd, filesystem service (Connect JSON).
const Path = Type.String({ minLength: 1, maxLength: 4096 });
export const PathRequest = Type.Object({ path: Path });
export const ListDirRequest = Type.Object({ path: Path, depth: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })) });
export const MoveRequest = Type.Object({ source: Path, destination: Path });
export const WatchDirRequest = Type.Object({
  path: Path,
  recursive: Type.Optional(Type.Boolean()),
  includeEntry: Type.Optional(Type.Boolean()),
  allowNetworkMounts: Type.Optional(Type.Boolean()),
});
export type FileType = "FILE_TYPE_UNSPECIFIED" | "FILE_TYPE_FILE" | "FILE_TYPE_DIRECTORY" | "FILE_TYPE_SYMLINK";
export interface EntryInfo {
  name: string;
  type: FileType;
  path: string;
  /** int64: a string in protobuf JSON. */
  size: string;
  mode: number;
  permissions: string;
  owner: string;
  group: string;
  modifiedTime: string;
  symlinkTarget?: string;
}
export type FsEventType = "EVENT_TYPE_CREATE" | "EVENT_TYPE_WRITE" | "EVENT_TYPE_REMOVE" | "EVENT_TYPE_RENAME" | "EVENT_TYPE_CHMOD";
export type WatchEvent =
  | { start: Record<string, never> }
  | { filesystem: { name: string; type: FsEventType } }
  | { keepalive: Record<string, never> };
/** What envd's POST /files answers for each file written. */
export interface WrittenFile {
  name: string;
  type: "file";
  path: string;
}

/** Connect's error codes, and the HTTP status a unary call answers each with (connectrpc.com/docs/protocol). */
export const CONNECT_STATUS = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
} as const;
export type ConnectCode = keyof typeof CONNECT_STATUS;
