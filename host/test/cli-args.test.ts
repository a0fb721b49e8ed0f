// The command line (host/src/cli/args.ts), on the real verb tree: what each
// form of argument means, what is refused and how, help, and completion.
import { describe, expect, test } from "bun:test";
import { HutchError } from "@hutch/shared";
import { completions, helpText, parse } from "../src/cli/args.ts";
import { ROOT } from "../src/cli/main.ts";

const args = async (argv: string[]) => {
  const p = await parse(ROOT, argv);
  return { path: p.path.map((c) => c.command.split(" ")[0]).join(" "), ...p.args };
};
const refused = async (argv: string[]) => {
  const err = await parse(ROOT, argv).then(
    () => null,
    (e) => e,
  );
  expect(err, argv.join(" ")).toBeInstanceOf(HutchError);
  return { code: (err as HutchError).code, message: (err as HutchError).message, hint: (err as HutchError).hint };
};

describe("parsing", () => {
  test.each([
    // argv, what it means
    [
      ["exec", "web", "--", "sh", "-c", "make test"],
      { path: "hutch exec", box: "web", cmd: ["sh", "-c", "make test"], tty: false, json: false },
    ],
    [["exec", "-t", "web", "--", "bash"], { box: "web", cmd: ["bash"], tty: true }],
    [
      ["exec", "--json", "-e", "A=hi there", "-w", "/tmp", "b", "--", "env"],
      { json: true, env: ["A=hi there"], workdir: "/tmp", box: "b", cmd: ["env"] },
    ],
    [["exec", "b", "-e", "A=1", "--env=B=2", "--", "--json"], { env: ["A=1", "B=2"], cmd: ["--json"], json: false }],
    [["exec", "b", "echo", "hi"], { cmd: ["echo", "hi"] }],
    [["--json", "box", "list"], { path: "hutch box list", json: true }],
    [["box", "ls", "--json"], { path: "hutch box list", json: true }],
    [["box", "rm", "a", "b"], { path: "hutch box delete", names: ["a", "b"] }],
    [
      ["box", "create", "x", "--engine", "qemu", "--memory", "2G", "--cpus", "4", "--start"],
      { name: "x", engine: "qemu", memory: "2G", cpus: 4, start: true },
    ],
    // No engine yet: the verb makes it process, or qemu when --image names an image.
    [["box", "create", "x"], { name: "x", start: false }],
    [
      ["box", "create", "x", "--allow", "a.com", "--allow", "b.com:8443", "--secret", "anthropic"],
      { allow: ["a.com", "b.com:8443"], secret: ["anthropic"] },
    ],
    [["box", "policy", "v", "--no-secret", "github"], { "no-secret": ["github"] }],
    [["session", "send", "ses_00000000000000000000", "ls", "--no-newline"], { id: "ses_00000000000000000000", text: "ls", newline: false }],
    [["session", "send", "ses_00000000000000000000", "ls"], { newline: true }],
    [["session", "log", "ses_00000000000000000000", "-f", "--from=3"], { follow: true, from: 3 }],
    [
      ["session", "driver", "acquire", "ses_00000000000000000000", "--lease", "30s"],
      { path: "hutch session driver acquire", lease: "30s" },
    ],
    [
      ["run", "--agent", "claude", "-p", "hello", "-d"],
      { path: "hutch run", agent: "claude", prompt: "hello", detach: true, box: undefined },
    ],
    [["run", "sb", "--detach=false"], { box: "sb", detach: false }],
    [["agent", "install"], { names: [] }],
    [["pty", "kill", "b", "pty_1"], { signal: "TERM", box: "b", id: "pty_1" }],
    [["--home", "/tmp/h", "--log-level", "debug", "doctor"], { path: "hutch doctor", home: "/tmp/h", "log-level": "debug" }],
    [["box", "create", "f", "--from", "snap_01m8rmtn4gzdahzrdk6a"], { name: "f", from: "snap_01m8rmtn4gzdahzrdk6a", start: false }],
    [["session", "fork", "ses_1", "--at", "12", "--name", "w2"], { path: "hutch session fork", id: "ses_1", at: 12, name: "w2" }],
    [["exec", "-tw", "/x", "b", "--", "sh"], null],
  ] as const)("%j", async (argv, want) => {
    if (want === null) return void expect((await refused([...argv])).message).toContain("unknown option -tw");
    expect(await args([...argv])).toMatchObject(want);
  });

  test.each([
    [["frob"], 'unknown command "frob"', "see: hutch --help"],
    [["box", "frob"], 'unknown command "frob"', "see: hutch box --help"],
    [[], "name a command", "see: hutch --help"],
    [["box"], "name a box command", "see: hutch box --help"],
    [["session", "driver"], "name a driver command", "see: hutch session driver --help"],
    [["box", "create"], "missing <name>", "see: hutch box create --help"],
    [["box", "create", "x", "y"], "unexpected argument: y", "see: hutch box create --help"],
    [["box", "create", "x", "--bogus"], "unknown option --bogus", "see: hutch box create --help"],
    [["box", "create", "x", "--engine", "vmware"], "--engine vmware: expected one of process, qemu", "see: hutch box create --help"],
    [["box", "create", "x", "--cpus", "many"], "--cpus many: expected a number", "see: hutch box create --help"],
    [["box", "create", "x", "--cpus"], "--cpus needs a value", "see: hutch box create --help"],
    [["box", "create", "x", "--start=maybe"], "--start=maybe: expected true or false", "see: hutch box create --help"],
    [["--engine", "qemu", "box", "create", "x"], "unknown option --engine", "see: hutch --help"],
    [["exec", "b", "ls", "-la"], "unknown option -la", "see: hutch exec --help"],
    [["--t", "exec"], "unknown option --t", "see: hutch --help"],
  ] as const)("%j is refused: %s", async (argv, message, hint) => {
    expect(await refused([...argv])).toEqual({ code: "invalid", message, hint });
  });

  test("an option not given and without a default is absent, not false", async () => {
    const a = await args(["box", "create", "x"]);
    expect("cpus" in a || "allow" in a || "image" in a).toBe(false);
  });

  test("--help and --version, anywhere before --, win over everything else", async () => {
    for (const argv of [["--help"], ["box", "--help"], ["box", "create", "-h"], ["exec", "--help", "b"]]) {
      const p = await parse(ROOT, argv);
      expect(p.help, argv.join(" ")).toBe(true);
    }
    expect((await parse(ROOT, ["box", "create", "--help"])).path.at(-1)!.command).toBe("create <name>");
    expect((await parse(ROOT, ["--version"])).version).toBe(true);
    expect((await parse(ROOT, ["exec", "b", "--", "x", "--help"])).help).toBe(false);
  });
});

describe("dispatch", () => {
  test("flags parse: -k, --agents, repeatable --protect; the task after -- keeps its words and dashes", async () => {
    const a = (
      await parse(ROOT, [
        "dispatch",
        "--here",
        "-k",
        "3",
        "--agents",
        "claude,codex",
        "--check",
        "bun test",
        "--protect",
        "a/**",
        "--protect",
        "b",
        "--",
        "fix",
        "--it",
      ])
    ).args;
    expect(a).toMatchObject({
      here: true,
      k: 3,
      agents: "claude,codex",
      check: "bun test",
      protect: ["a/**", "b"],
      args: ["fix", "--it"],
      pick: "first",
    });
    await expect(parse(ROOT, ["dispatch", "--pick", "worst", "--", "x"])).rejects.toThrow("expected one of first, best");
  });
});

describe("offload and bring-back", () => {
  test("flags parse: --box, --dry-run, repeatable --include; the box of bring-back is required", async () => {
    const off = (await parse(ROOT, ["offload", "--box", "w", "--dry-run", "--include", ".env", "--include", "k.pem"])).args;
    expect([off.box, off["dry-run"], off.include]).toEqual(["w", true, [".env", "k.pem"]]);
    const back = (await parse(ROOT, ["bring-back", "w", "--into", "/r", "--json"])).args;
    expect([back.box, back.into, back["dry-run"], back.json]).toEqual(["w", "/r", false, true]);
    await expect(parse(ROOT, ["bring-back"])).rejects.toThrow();
  });
});

describe("help", () => {
  test("the top lists every verb; a group its subcommands with aliases; a verb its positionals, options and examples", async () => {
    const top = helpText((await parse(ROOT, ["--help"])).path, 100);
    for (const v of ["run [box]", "session <command>", "box <command>", "exec <box> [cmd..]", "doctor", "completion"])
      expect(top).toContain(`hutch ${v}`);
    expect(top).not.toContain("__complete");
    const box = helpText((await parse(ROOT, ["box", "--help"])).path, 100);
    expect(box).toContain("hutch box delete <names..>");
    expect(box).toContain("[aliases: rm]");
    const exec = helpText((await parse(ROOT, ["exec", "--help"])).path, 100);
    expect(exec).toStartWith("hutch exec <box> [cmd..]\n");
    expect(exec).toContain("-t, --tty");
    expect(exec).toContain("hutch exec web -- sh -c 'make test'");
    expect(exec).toContain("Global options:");
    expect(helpText((await parse(ROOT, ["daemon", "--help"])).path, 100)).not.toContain("image-build");
  });
});

describe("completion", () => {
  test.each([
    [
      [""],
      [
        "run",
        "session",
        "agent",
        "box",
        "exec",
        "cp",
        "offload",
        "bring-back",
        "dispatch",
        "schedule",
        "pty",
        "doctor",
        "serve",
        "service",
        "cluster",
        "fleet",
        "node",
        "pool",
        "user",
        "token",
        "remote",
        "daemon",
        "image",
        "snapshot",
        "port",
        "browser",
        "desktop",
        "secret",
        "approvals",
        "approve",
        "deny",
        "mcp",
        "acp",
        "ide",
        "completion",
      ],
    ],
    [["bo"], ["box"]],
    [
      ["box", "s"],
      ["set", "start", "stop", "sleep", "share"],
    ],
    [
      ["--home", "/tmp", "se"],
      ["session", "serve", "service", "secret"],
    ],
    [
      ["box", "create", "x", "--engine", ""],
      ["process", "qemu"],
    ],
    [["box", "create", "x", "--e"], ["--engine"]],
    [["exec", "-e", "A=1", "b", "--w"], ["--workdir"]],
    [
      ["session", "driver", ""],
      ["acquire", "release", "steal", "heartbeat"],
    ],
    [["box", "rm", ""], []],
    [["exec", "b", "--", ""], []],
  ] as const)("%j -> %j", async (words, want) => {
    expect(await completions(ROOT, [...words])).toEqual([...want]);
  });
});
