// Operations: daemon work that takes a while and reports as it goes (doctor,
// image build, agent install). The op's route answers NDJSON: progress lines
// in the order the work makes them, then exactly one last line, the result or
// the error; nothing follows it. A request refused before the work starts
// (a bad body, a conflict) is an ordinary error answer, not a stream. The CLI
// draws the progress on a terminal and passes the lines through with --json.
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { AgentName } from "./api.ts";
import { ErrorCodes } from "./errors.ts";
import { IDEMPOTENCY_HEADER } from "./idempotency.ts";

/** The Idempotency-Key header's value (./idempotency.ts names the header). */
export const IdempotencyKey = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: "^[!-~]+$",
  title: "idempotency-key",
  description: "1-128 visible ASCII characters, e.g. a UUID",
  rule: "visible ASCII characters only (no spaces), e.g. a UUID",
});
/** The headers schema of a route that takes a key (other headers pass). */
export const IdempotencyHeaders = Type.Object({ [IDEMPOTENCY_HEADER]: Type.Optional(IdempotencyKey) });

const line = <T extends string, P extends Record<string, TSchema>>(type: T, props: P) =>
  Type.Object({ type: Type.Literal(type), ...props }, { additionalProperties: false });

/** A check doctor made, by trying it: what it found and, for a gap, the fix. */
export const DoctorCheck = Type.Object(
  { name: Type.String(), ok: Type.Boolean(), detail: Type.String(), fix: Type.Optional(Type.String()) },
  { additionalProperties: false },
);
export type DoctorCheck = Static<typeof DoctorCheck>;

/** A new step of the work began; `n` of `total` when the op knows how many there are. */
export const OpStep = line("step", {
  n: Type.Integer({ minimum: 1 }),
  total: Type.Optional(Type.Integer({ minimum: 1 })),
  title: Type.String(),
});
/** What the current step is doing now (a package being fetched); the latest replaces the last. */
export const OpDetail = line("detail", { text: Type.String() });
/** Something the person should read whatever the outcome (a slow fallback, a tool being installed). */
export const OpNote = line("note", { text: Type.String() });
/** The op's one-line summary, just before its result ("built image default in 312s"). */
export const OpDone = line("done", { summary: Type.String() });
/** One of doctor's checks, as soon as it is known. */
export const OpCheck = line("check", { check: DoctorCheck });
/** Files and bytes done so far, with totals, rate and ETA when known (snapshots, restores, prunes, checks). */
export const OpCounts = line("counts", {
  phase: Type.String(),
  files: Type.Integer({ minimum: 0 }),
  filesTotal: Type.Optional(Type.Integer({ minimum: 0 })),
  bytes: Type.Integer({ minimum: 0 }),
  bytesTotal: Type.Optional(Type.Integer({ minimum: 0 })),
  /** Bytes added to the store so far. */
  bytesNew: Type.Optional(Type.Integer({ minimum: 0 })),
  /** Bytes a second. */
  rate: Type.Integer({ minimum: 0 }),
  etaMs: Type.Optional(Type.Integer({ minimum: 0 })),
  elapsedMs: Type.Integer({ minimum: 0 }),
});
export const OpProgress = Type.Union([OpStep, OpDetail, OpNote, OpDone, OpCheck, OpCounts]);
export type OpProgress = Static<typeof OpProgress>;
/** How a piece of work reports as it goes: each call is one progress line of its answer, in order. */
export type OpReport = (p: OpProgress) => void;

/** The last line when the work failed: the error body every route answers with, tagged. */
export const OpError = line("error", {
  error: Type.Object({
    code: Type.Union(Object.keys(ErrorCodes).map((c) => Type.Literal(c as keyof typeof ErrorCodes))),
    message: Type.String(),
    hint: Type.Optional(Type.String()),
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  }),
});
export type OpError = Static<typeof OpError>;

/** The last line when the work succeeded. */
export const OpResult = <S extends TSchema>(value: S) => line("result", { value });

/** Every line an op with this result can send. */
export const OpLine = <S extends TSchema>(value: S) => Type.Union([OpProgress, OpResult(value), OpError]);
/** A line OpLine(schema) passed, for a result of type T (Static of the union does not resolve while T is generic). */
export type OpLine<T> = OpProgress | OpError | { type: "result"; value: T };

// POST /v1/doctor
export const DoctorReport = Type.Object({ ok: Type.Boolean(), checks: Type.Array(DoctorCheck) }, { additionalProperties: false });
export type DoctorReport = Static<typeof DoctorReport>;

// POST /v1/images/build
export const ImageName = Type.String({
  pattern: "^[a-z0-9][a-z0-9-]{0,62}$",
  title: "image name",
  description: "lowercase letters, digits and dashes",
  rule: "use lowercase letters, digits and '-', starting with a letter or digit (at most 63)",
});
export const ImageBuildBody = Type.Object(
  {
    name: Type.Optional(ImageName),
    force: Type.Optional(Type.Boolean({ description: "rebuild even if an image with the same recipe exists" })),
    noCache: Type.Optional(
      Type.Boolean({
        description: "make the root filesystem again (debootstrap, updates) instead of copying the one an earlier build kept",
      }),
    ),
    /** What goes in besides the base packages: "desktop" adds Chromium, Xvfb, xdotool, xterm and fonts. */
    profile: Type.Optional(Type.Union([Type.Literal("base"), Type.Literal("desktop")])),
  },
  { additionalProperties: false },
);
export type ImageBuildBody = Static<typeof ImageBuildBody>;

export const MANIFEST_FORMAT = 1;
const FileInfo = Type.Object({
  bytes: Type.Integer({ minimum: 0 }),
  sha256: Type.String({ pattern: "^[0-9a-f]{64}$", rule: "64 lowercase hex digits" }),
});
/** An image's manifest.json (image/BOOT.md): what it was built from, and every file's size and sha256. */
export const ImageManifest = Type.Object({
  format: Type.Literal(MANIFEST_FORMAT),
  name: ImageName,
  hutchVersion: Type.String(),
  builtAt: Type.String(),
  buildSeconds: Type.Number({ minimum: 0 }),
  recipeHash: Type.String({ pattern: "^[0-9a-f]{64}$", rule: "64 lowercase hex digits" }),
  kernel: Type.Object({ package: Type.String(), version: Type.String(), release: Type.String() }),
  busybox: Type.String(),
  modules: Type.Array(Type.String()),
  suite: Type.String(),
  mirror: Type.String(),
  /** The suites the root disk's packages come from (the release, its updates, its security updates), each with its lists' publication date; null: its mirror could not be read. Absent in images built before. */
  sources: Type.Optional(
    Type.Array(
      Type.Object(
        { suite: Type.String(), uri: Type.String(), date: Type.Union([Type.String(), Type.Null()]) },
        { additionalProperties: false },
      ),
    ),
  ),
  /** "name=version" of every package the updates changed. */
  upgraded: Type.Optional(Type.Array(Type.String())),
  packages: Type.Array(Type.String()),
  root: Type.Object({ contentBytes: Type.Integer({ minimum: 0 }), virtualBytes: Type.Integer({ minimum: 0 }) }),
  files: Type.Object({ vmlinuz: FileInfo, "initramfs.img": FileInfo, "root.qcow2": FileInfo }),
});
export type ImageManifest = Static<typeof ImageManifest>;
/** `cached`: an image with the same recipe was there, and nothing was built. */
export const ImageBuildResult = Type.Object({ manifest: ImageManifest, cached: Type.Boolean() }, { additionalProperties: false });
export type ImageBuildResult = Static<typeof ImageBuildResult>;

// GET /v1/agents, POST /v1/agents/install
export const AgentInfo = Type.Object(
  {
    agent: AgentName,
    package: Type.Union([Type.String(), Type.Null()]),
    pinned: Type.Union([Type.String(), Type.Null()]),
    /** The installed version, "built in" for the shell, null when missing. */
    installed: Type.Union([Type.String(), Type.Null()]),
    path: Type.String(),
    bindings: Type.Array(Type.String()),
  },
  { additionalProperties: false },
);
export type AgentInfo = Static<typeof AgentInfo>;
/** Names are checked by the daemon, so an unknown one is refused with the list of agents. */
export const AgentInstallBody = Type.Object(
  { names: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 16 })) },
  { additionalProperties: false },
);
export type AgentInstallBody = Static<typeof AgentInstallBody>;
/** `fresh`: npm ran; otherwise the pinned version was already there. */
export const AgentInstalled = Type.Object(
  {
    agent: AgentName,
    package: Type.Union([Type.String(), Type.Null()]),
    version: Type.Union([Type.String(), Type.Null()]),
    path: Type.String(),
    fresh: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type AgentInstalled = Static<typeof AgentInstalled>;
export const AgentInstallResult = Type.Array(AgentInstalled);
