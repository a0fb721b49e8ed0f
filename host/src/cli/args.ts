// The command line: a declared tree of commands, parsed here rather than by a
// library. yargs cost about 19 ms of every run (its import ~9 ms, one parse
// 5–7 ms), more than the whole budget of `hutch exec B true`
// (scripts/bench/README.md, cli.ts). A top-level verb's module is loaded
// only when it runs or its help or completions are asked for (`load`); the
// verb table in ./main.ts holds what `hutch --help` needs.
//
// The rules, yargs' where they overlap:
// - Options are looked up among the globals and those of the commands named
//   so far, so a verb's options come after the verb (`hutch box create x
//   --engine qemu`); globals go anywhere. Anything after `--` is positional.
// - `--name value`, `--name=value`, `-n value`, `-n=value`; booleans take no
//   value (`--flag`, `--no-flag`, `--flag=false`), and one-letter booleans
//   bundle (`-tf`). A repeatable option (`array`) takes one value each time.
// - The first positional of a group names its subcommand; the rest fill the
//   command's `<required>`, `[optional]` and last `<variadic..>` positionals.
// - Anything unknown, missing or not among the choices is a usage error
//   (exit 2) naming it and the help to read.
import { HutchError } from "@hutch/shared/base";

export interface OptionSpec {
  type: "string" | "number" | "boolean";
  /** One letter, used as -x. */
  alias?: string;
  /** Repeatable: each occurrence adds a value. */
  array?: boolean;
  default?: string | number | boolean | string[];
  defaultDescription?: string;
  choices?: readonly string[];
  describe?: string;
  hidden?: boolean;
}

export interface PositionalSpec {
  describe?: string;
  choices?: readonly string[];
}

/** What a verb's module supplies: everything but its name and one-line description. */
export interface CommandBody {
  options?: Record<string, OptionSpec>;
  positionals?: Record<string, PositionalSpec>;
  examples?: [string, string][];
  /** A group's subcommands; naming none is an error saying `demand`. */
  commands?: Command[];
  demand?: string;
  run?(args: Args): Promise<void> | void;
}

export interface Command extends CommandBody {
  /** Its name and positionals: "create <name>", "exec <box> [cmd..]", "box <command>" for a group. */
  command: string;
  aliases?: string[];
  describe: string;
  hidden?: boolean;
  /** The body, loaded when this command runs or its help or completions are needed. */
  load?: () => Promise<CommandBody>;
}

export type Args = Record<string, unknown>;

/** The options every command takes (declared on the root in ./main.ts). */
export interface GlobalArgs {
  json: boolean;
  home: string;
}

/** A command whose handler reads its arguments as A (what it declares, plus the globals). */
export function command<A>(c: Omit<Command, "run"> & { run?(args: A): Promise<void> | void }): Command {
  return c as Command;
}

/** The body of a lazily loaded verb, typed like command(). */
export function body<A>(c: Omit<CommandBody, "run"> & { run?(args: A): Promise<void> | void }): CommandBody {
  return c as CommandBody;
}

interface Positional {
  name: string;
  required: boolean;
  variadic: boolean;
}

const nameOf = (c: Command) => c.command.split(" ")[0]!;

function positionalsOf(c: Command): Positional[] {
  return c.command
    .split(" ")
    .slice(1)
    .map((t) => ({
      name: t.slice(1, -1).replace(/\.\.$/, ""),
      required: t.startsWith("<"),
      variadic: t.endsWith("..>") || t.endsWith("..]"),
    }));
}

const isGroup = (c: Command) => (c.commands?.length ?? 0) > 0;

async function resolved(c: Command): Promise<Command> {
  if (!c.load) return c;
  const loaded = { ...c, ...(await c.load()) };
  delete loaded.load;
  return loaded;
}

function find(cmds: Command[], word: string): Command | undefined {
  return cmds.find((c) => nameOf(c) === word || c.aliases?.includes(word));
}

export interface Parsed {
  /** The commands named, outermost first (the root included). */
  path: Command[];
  args: Args;
  /** --help was given: show the help of the last command in path. */
  help: boolean;
  version: boolean;
}

const usage = (message: string, path: Command[]) => new HutchError("invalid", message, `see: ${path.map(nameOf).join(" ")} --help`);

/** Parses argv against the tree under root (whose options are the globals). */
export async function parse(root: Command, argv: string[]): Promise<Parsed> {
  const path: Command[] = [root];
  const opts = new Map<string, [string, OptionSpec]>();
  const addOptions = (c: Command) => {
    for (const [name, o] of Object.entries(c.options ?? {})) {
      opts.set(name, [name, o]);
      if (o.alias) opts.set(o.alias, [name, o]);
    }
  };
  addOptions(root);
  const values: Args = {};
  const positional: string[] = [];
  let help = false;
  let version = false;
  let rest = false;
  let leafReached = !isGroup(root);

  const set = (name: string, o: OptionSpec, raw: string | boolean) => {
    let v: unknown = raw;
    if (o.type === "number") {
      v = Number(raw);
      if (typeof raw !== "string" || raw.trim() === "" || !Number.isFinite(v)) throw usage(`--${name} ${raw}: expected a number`, path);
    }
    if (o.choices && !o.choices.includes(String(v))) throw usage(`--${name} ${raw}: expected one of ${o.choices.join(", ")}`, path);
    if (o.array) values[name] = [...((values[name] as unknown[] | undefined) ?? []), v];
    else values[name] = v;
  };

  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i]!;
    if (rest || tok === "-" || !tok.startsWith("-")) {
      const current = path.at(-1)!;
      if (!rest && !leafReached && positional.length === 0) {
        const here = await resolved(current);
        path[path.length - 1] = here;
        const sub = find(here.commands ?? [], tok);
        if (!sub) throw usage(`unknown command "${tok}"`, path);
        const next = await resolved(sub);
        path.push(next);
        addOptions(next);
        leafReached = !isGroup(next);
        continue;
      }
      positional.push(tok);
      continue;
    }
    if (tok === "--") {
      rest = true;
      continue;
    }
    const long = tok.startsWith("--");
    const eq = tok.indexOf("=");
    const key = tok.slice(long ? 2 : 1, eq >= 0 ? eq : undefined);
    const inline = eq >= 0 ? tok.slice(eq + 1) : undefined;
    if (key === "help" || key === "h") {
      help = true;
      continue;
    }
    if (long && key === "version") {
      version = true;
      continue;
    }
    const known = opts.get(key);
    if (!long && !known && inline === undefined && [...key].every((k) => opts.get(k)?.[1].type === "boolean")) {
      for (const k of key) set(opts.get(k)![0], opts.get(k)![1], true);
      continue;
    }
    if (!known && long && key.startsWith("no-") && opts.get(key.slice(3))?.[1].type === "boolean" && inline === undefined) {
      const [name, o] = opts.get(key.slice(3))!;
      set(name, o, false);
      continue;
    }
    if (!known || (long && known[0] !== key) || (!long && key.length !== 1))
      throw usage(`unknown option ${tok.slice(0, eq >= 0 ? eq : undefined)}`, path);
    const [name, o] = known;
    if (o.type === "boolean") {
      if (inline !== undefined && inline !== "true" && inline !== "false") throw usage(`${tok}: expected true or false`, path);
      set(name, o, inline !== "false");
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw usage(`${tok} needs a value`, path);
    set(name, o, value);
  }

  const leaf = path.at(-1)!;
  if (help || version) return { path, args: values, help, version };
  if (isGroup(leaf)) throw usage(leaf.demand ?? "name a command", path);

  const decl = positionalsOf(leaf);
  for (const [i, p] of decl.entries()) {
    const spec = leaf.positionals?.[p.name];
    const taken = p.variadic ? positional.slice(i) : positional.slice(i, i + 1);
    if (p.required && taken.length === 0) throw usage(`missing <${p.name}>`, path);
    for (const v of taken)
      if (spec?.choices && !spec.choices.includes(v)) throw usage(`${p.name} ${v}: expected one of ${spec.choices.join(", ")}`, path);
    values[p.name] = p.variadic ? taken : taken[0];
  }
  const extra = decl.some((p) => p.variadic) ? [] : positional.slice(decl.length);
  if (extra.length > 0) throw usage(`unexpected argument${extra.length > 1 ? "s" : ""}: ${extra.join(" ")}`, path);

  for (const c of path) {
    for (const [name, o] of Object.entries(c.options ?? {})) {
      if (values[name] === undefined && o.default !== undefined) values[name] = Array.isArray(o.default) ? [...o.default] : o.default;
    }
  }
  return { path, args: values, help: false, version: false };
}

function columns(rows: [string, string][], width: number): string {
  const left = Math.min(Math.max(...rows.map(([l]) => l.length), 0), 40);
  return rows
    .map(([l, r]) => {
      const pad = l.length > left ? `\n${" ".repeat(left + 4)}` : " ".repeat(left - l.length + 2);
      return `  ${l}${pad}${wrap(r, width - left - 4, left + 4)}`.trimEnd();
    })
    .join("\n");
}

function wrap(text: string, width: number, indent: number): string {
  if (width < 20 || text.length <= width) return text;
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.join(`\n${" ".repeat(indent)}`);
}

function optionRows(options: Record<string, OptionSpec>): [string, string][] {
  return Object.entries(options)
    .filter(([, o]) => !o.hidden)
    .map(([name, o]) => {
      const flags = `${o.alias ? `-${o.alias}, ` : "    "}--${name}`;
      const notes = [
        `[${o.array ? "array" : o.type}]`,
        ...(o.choices ? [`[choices: ${o.choices.join(", ")}]`] : []),
        ...(o.defaultDescription
          ? [`[default: ${o.defaultDescription}]`]
          : o.default !== undefined && !(Array.isArray(o.default) && o.default.length === 0)
            ? [`[default: ${JSON.stringify(o.default)}]`]
            : []),
      ];
      return [flags, `${o.describe ?? ""}  ${notes.join(" ")}`.trim()];
    });
}

/** The help of the last command in path (its body loaded). */
export function helpText(path: Command[], width: number): string {
  const c = path.at(-1)!;
  const root = path[0]!;
  const prefix = path.slice(1, -1).map(nameOf);
  const full = [nameOf(root), ...prefix, ...(path.length > 1 ? [c.command] : [])].join(" ");
  const out: string[] = [path.length > 1 ? `${full}\n\n${c.describe}` : c.describe];
  if (isGroup(c)) {
    const base = [nameOf(root), ...path.slice(1).map(nameOf)].join(" ");
    out.push(
      `Commands:\n${columns(
        c
          .commands!.filter((s) => !s.hidden)
          .map((s) => [`${base} ${s.command}`, `${s.describe}${s.aliases?.length ? `  [aliases: ${s.aliases.join(", ")}]` : ""}`]),
        width,
      )}`,
    );
  }
  const pos = positionalsOf(c).filter(() => path.length > 1);
  if (pos.length > 0 && !isGroup(c))
    out.push(
      `Positionals:\n${columns(
        pos.map((p) => [p.name, `${c.positionals?.[p.name]?.describe ?? ""}${p.required ? "  [required]" : ""}`.trim()]),
        width,
      )}`,
    );
  const own = path.length > 1 ? optionRows(Object.assign({}, ...path.slice(1).map((x) => x.options ?? {}))) : [];
  if (own.length > 0) out.push(`Options:\n${columns(own, width)}`);
  const globals: [string, string][] = [
    ...optionRows(root.options ?? {}),
    ["-h, --help", "show help  [boolean]"],
    ["    --version", "show the version  [boolean]"],
  ];
  out.push(`${path.length > 1 ? "Global options" : "Options"}:\n${columns(globals, width)}`);
  if (c.examples?.length)
    out.push(
      `Examples:\n${columns(
        c.examples.map(([cmd, what]) => [cmd.replace("$0", nameOf(root)), what]),
        width,
      )}`,
    );
  return `${out.join("\n\n")}\n`;
}

/**
 * Completion candidates for the words typed so far (the last is the one
 * being completed, maybe empty): subcommands, options, or an option's
 * choices.
 */
export async function completions(root: Command, words: string[]): Promise<string[]> {
  const current = words.at(-1) ?? "";
  const path: Command[] = [root];
  const opts = new Map<string, OptionSpec>();
  const addOptions = (c: Command) => {
    for (const [k, o] of Object.entries(c.options ?? {})) {
      opts.set(k, o);
      if (o.alias) opts.set(o.alias, o);
    }
  };
  addOptions(root);
  let positional = 0;
  for (let i = 0; i < words.length - 1; i++) {
    const w = words[i]!;
    if (w === "--") return [];
    if (w.startsWith("-")) {
      const o = opts.get(w.replace(/^--?/, ""));
      if (o && o.type !== "boolean" && !w.includes("=")) i++;
      continue;
    }
    const here = await resolved(path.at(-1)!);
    path[path.length - 1] = here;
    const sub = isGroup(here) && positional === 0 ? find(here.commands!, w) : undefined;
    if (sub) {
      const next = await resolved(sub);
      path.push(next);
      addOptions(next);
    } else positional++;
  }
  const prev = words.at(-2);
  const prevOpt = prev?.startsWith("--") ? opts.get(prev.slice(2)) : undefined;
  if (prevOpt && prevOpt.type !== "boolean") return (prevOpt.choices ?? []).filter((c) => c.startsWith(current));
  if (current.startsWith("-")) {
    return [...opts.entries(), ["help", { type: "boolean" } as OptionSpec] as const]
      .filter(([k, o]) => !o.hidden && k.length > 1)
      .map(([k]) => `--${k}`)
      .filter((k) => k.startsWith(current));
  }
  const here = await resolved(path.at(-1)!);
  if (!isGroup(here) || positional > 0) return [];
  return here
    .commands!.filter((c) => !c.hidden)
    .flatMap((c) => [nameOf(c), ...(c.aliases ?? [])])
    .filter((n) => n.startsWith(current));
}

/** The shell side of completion: asks `hutch __complete WORDS...` (bash, and zsh through bashcompinit). */
export function completionScript(name: string): string {
  return `###-begin-${name}-completions-###
#
# ${name} command completion script (bash and zsh)
#
# Installation: ${name} completion >> ~/.bashrc
#    or ${name} completion >> ~/.zshrc
#
if [ -n "\${ZSH_VERSION:-}" ]; then autoload -U +X bashcompinit && bashcompinit; fi
_${name}_completions() {
  local IFS=$'\\n'
  COMPREPLY=( $(${name} __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) )
  [ \${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=()
}
complete -o bashdefault -o default -F _${name}_completions ${name}
###-end-${name}-completions-###
`;
}

/** KEY=VALUE labels (`box create --on`, `serve --label`). */
export function parseLabels(items: string[], flag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of items) {
    const m = /^([a-z0-9][a-z0-9._-]{0,62})=(.{0,128})$/.exec(item);
    if (!m) throw new HutchError("invalid", `${flag} ${item}: expected KEY=VALUE (a lowercase key)`, `e.g. ${flag} gpu=yes`);
    out[m[1]!] = m[2]!;
  }
  return out;
}
