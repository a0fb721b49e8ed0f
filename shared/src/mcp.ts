// The tools `hutch mcp` serves, as TypeBox schemas (which are JSON Schema, so
// they are what tools/list sends). The browser and desktop tools are the ones
// an agent inside a box gets (./protocol/mcp-tools.ts), each with a `box`
// field in front; their fields come from the guest tool schemas in
// ./protocol/tools.ts, so an MCP call and a guest call cannot disagree.
import { Type, type Static, type TComposite, type TObject } from "@sinclair/typebox";
import { BoxName, EngineName } from "./api.ts";
import { BoxMcpTools, type BoxMcpToolName } from "./protocol/mcp-tools.ts";
import { ExecOpen } from "./protocol/tools.ts";

const Box = Type.String({ minLength: 1, maxLength: 128, description: "the box, by name or id (hutch box list)" });
const Path = Type.String({ minLength: 1, maxLength: 4096, description: "an absolute path in the box (/workspace/...)" });

const BoxField = Type.Object({ box: Box });
type OnBox<T extends TObject> = TComposite<[typeof BoxField, T]>;

/** An in-box tool's fields with `box` in front. */
function onBox<T extends TObject>(schema: T): OnBox<T> {
  return Type.Composite([BoxField, schema], { additionalProperties: false }) as OnBox<T>;
}

/** Every browser and desktop tool, as the host serves it. */
const boxTools = Object.fromEntries(
  Object.entries(BoxMcpTools).map(([name, t]) => [name, { description: t.description, input: onBox(t.input) }]),
) as unknown as {
  [N in BoxMcpToolName]: { description: (typeof BoxMcpTools)[N]["description"]; input: OnBox<(typeof BoxMcpTools)[N]["input"]> };
};

export const McpTools = {
  box_list: { description: "List the boxes: name, id, engine, state.", input: Type.Object({}, { additionalProperties: false }) },
  box_create: {
    description: "Create a box (process engine unless named) and start it.",
    input: Type.Object({ name: BoxName, engine: Type.Optional(EngineName) }, { additionalProperties: false }),
  },
  box_start: { description: "Start a stopped box.", input: Type.Object({ box: Box }, { additionalProperties: false }) },
  box_stop: { description: "Stop a running box.", input: Type.Object({ box: Box }, { additionalProperties: false }) },
  exec: {
    description:
      "Run a command in a box (argv, no shell unless you run one) and return its exit code, stdout and stderr (each cut at 64 KiB).",
    input: Type.Object(
      {
        box: Box,
        argv: ExecOpen.properties.argv,
        cwd: ExecOpen.properties.cwd,
        timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 600_000, description: "kill it after this long (default 120000)" })),
      },
      { additionalProperties: false },
    ),
  },
  file_read: {
    description: "Read a text file in a box (at most 1 MiB).",
    input: Type.Object({ box: Box, path: Path }, { additionalProperties: false }),
  },
  file_write: {
    description: "Write a text file in a box atomically (replacing it).",
    input: Type.Object({ box: Box, path: Path, content: Type.String({ maxLength: 8 * 1024 * 1024 }) }, { additionalProperties: false }),
  },
  file_list: { description: "List a directory in a box.", input: Type.Object({ box: Box, path: Path }, { additionalProperties: false }) },
  port_list: { description: "The TCP ports listening in a box.", input: Type.Object({ box: Box }, { additionalProperties: false }) },
  ...boxTools,
} as const;

export type McpToolName = keyof typeof McpTools;
export type McpInput<N extends McpToolName> = Static<(typeof McpTools)[N]["input"]>;
