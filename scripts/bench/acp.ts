// `hutch acp` against the agent's own ACP adapter on the host, in the same run:
//   first update   ms from sending `session/prompt` to the first
//                  `session/update` from the agent (a message, thought or tool
//                  call chunk; hutch's echo of the prompt itself is not
//                  counted), through `hutch acp --agent claude` (Claude Code in
//                  a process box, through the broker) against
//                  `@zed-industries/claude-code-acp` (npm) running the same
//                  pinned Claude Code on the host. Both against the same fake
//                  model API, both driven by the ACP SDK's own client, one
//                  session each, one prompt after another. Goal: at most 1.2x.
//
//   bun scripts/bench/acp.ts [--json] [--runs 5]
// Needs the agent CLIs installed (bash scripts/setup-tests), and npm for the peer (installed once into $BENCH_DIR).
import { parseArgs } from "node:util";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { client, methods, ndJsonStream, PROTOCOL_VERSION, type ClientConnection } from "@agentclientprotocol/sdk";
import { HutchHome, describeFailure, log, requireHutch, run } from "./lib/env.ts";
import { median, round, table } from "./lib/stats.ts";
import { HARNESSES } from "../../host/src/harness/index.ts";
import { agentCommand } from "../../host/src/harness/install.ts";
import { startFakeModel, type FakeModel } from "../../tests/fixtures/fake-model/index.ts";
import { fakeBindings } from "../../tests/agent-turns.ts";

const { values: flags } = parseArgs({
  options: { json: { type: "boolean", default: false }, runs: { type: "string", default: "5" } },
});
const RUNS = Number(flags.runs);
const GOAL_RATIO = 1.2;
const AGENTS_DIR = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";
const BENCH_DIR = process.env.BENCH_DIR || "/tmp/hutch-bench";
const PEER = { name: "@zed-industries/claude-code-acp", version: "0.16.2" };
const AGENT_UPDATES = new Set(["agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"]);

requireHutch();

async function installPeer(): Promise<string> {
  const dir = join(BENCH_DIR, "claude-code-acp");
  const cli = join(dir, "node_modules", "@zed-industries", "claude-code-acp", "dist", "index.js");
  if (!(await Bun.file(cli).exists())) {
    mkdirSync(dir, { recursive: true });
    log(`installing ${PEER.name}@${PEER.version} into ${dir}`);
    const r = await run(["npm", "i", "--no-audit", "--no-fund", "--prefix", dir, `${PEER.name}@${PEER.version}`], { timeoutMs: 300_000 });
    if (r.code !== 0) throw new Error(describeFailure(r, `npm i ${PEER.name}`));
  }
  return cli;
}

/** An ACP editor on a spawned agent's stdio; `first()` resolves at the agent's next own update. */
function editor(argv: string[], env: Record<string, string | undefined>) {
  const proc = Bun.spawn(argv, { env, stdin: "pipe", stdout: "pipe", stderr: "ignore" });
  let waiting: (() => void) | null = null;
  const output = new WritableStream<Uint8Array>({
    async write(chunk) {
      proc.stdin.write(chunk);
      await proc.stdin.flush();
    },
  });
  const conn: ClientConnection = client({ name: "bench" })
    .onNotification(methods.client.session.update, ({ params }) => {
      if (waiting && AGENT_UPDATES.has(params.update.sessionUpdate)) {
        waiting();
        waiting = null;
      }
    })
    // The peer asks before it runs a tool; an editor's user would allow it.
    .onRequest(methods.client.session.requestPermission, ({ params }) => ({
      outcome: {
        outcome: "selected",
        optionId: params.options.find((o) => o.kind.startsWith("allow"))?.optionId ?? params.options[0]!.optionId,
      },
    }))
    .connect(ndJsonStream(output, proc.stdout as ReadableStream<Uint8Array>));
  return {
    conn,
    async start(cwd: string): Promise<string> {
      await conn.agent.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "bench", version: "1" },
      });
      return (await conn.agent.request(methods.agent.session.new, { cwd, mcpServers: [] })).sessionId;
    },
    /** ms from sending the prompt to the agent's first update; the turn is then run to its end. */
    async firstUpdate(sessionId: string, text: string): Promise<number> {
      const first = new Promise<number>((res) => {
        waiting = () => res(performance.now());
      });
      const t0 = performance.now();
      const done = conn.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
      const at = await Promise.race([first, done.then(() => Number.NaN)]);
      const r = await done;
      if (Number.isNaN(at)) throw new Error(`the turn ended (${r.stopReason}) without an update from the agent`);
      return at - t0;
    },
    async stop() {
      conn.close();
      proc.kill();
      await proc.exited;
    },
  };
}

const home = new HutchHome();
home.env.HUTCH_AGENTS_DIR = AGENTS_DIR;
let fake: FakeModel | undefined;
const sides: ReturnType<typeof editor>[] = [];
let exit = 0;
try {
  const peerCli = await installPeer();
  fake = await startFakeModel();
  writeFileSync(join(home.dir, "config.json"), JSON.stringify({ bindings: { anthropic: fakeBindings(fake).bindings.anthropic } }));
  const set = Bun.spawnSync([home.bin, "secret", "set", "anthropic"], { env: home.env, stdin: new TextEncoder().encode("sk-ant-bench") });
  if (set.exitCode !== 0) throw new Error(`hutch secret set: ${set.stderr.toString()}`);

  const hutch = editor([home.bin, "acp", "--agent", "claude"], home.env);
  sides.push(hutch);
  const peerHome = mkdtempSync(join(tmpdir(), "hutch-bench-acp-peer-"));
  const peer = editor(["node", peerCli], {
    PATH: process.env.PATH,
    HOME: peerHome,
    CLAUDE_CODE_EXECUTABLE: agentCommand(HARNESSES.claude, AGENTS_DIR),
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: "sk-ant-bench",
    NODE_EXTRA_CA_CERTS: fake.ca.caFile,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    IS_SANDBOX: "1",
  });
  sides.push(peer);
  const hutchSession = await hutch.start(mkdtempSync(join(tmpdir(), "hutch-bench-acp-")));
  const peerSession = await peer.start(mkdtempSync(join(tmpdir(), "hutch-bench-acp-peer-work-")));
  log(`hutch session ${hutchSession}, peer session ${peerSession}`);

  const ms = { hutch: [] as number[], peer: [] as number[] };
  const cold = { hutch: 0, peer: 0 };
  // Alternating, one warm-up each (the first turn starts the box's side of things and the CLI's caches).
  for (let i = 0; i <= RUNS; i++) {
    const text = `create f${i}.txt containing ${i}`;
    const h = await hutch.firstUpdate(hutchSession, text);
    const p = await peer.firstUpdate(peerSession, text);
    if (i === 0) {
      Object.assign(cold, { hutch: h, peer: p });
      log(`first turn: hutch acp ${round(h, 0)} ms, ${PEER.name} ${round(p, 0)} ms`);
      continue;
    }
    ms.hutch.push(h);
    ms.peer.push(p);
    log(`run ${i}: hutch acp ${round(h, 0)} ms, ${PEER.name} ${round(p, 0)} ms`);
  }
  const ratio = median(ms.hutch) / median(ms.peer);
  const report = {
    build: await home.buildId(),
    runs: RUNS,
    hutchMs: round(median(ms.hutch), 0),
    peerMs: round(median(ms.peer), 0),
    ratio: round(ratio, 2),
    firstTurn: { hutchMs: round(cold.hutch, 0), peerMs: round(cold.peer, 0), ratio: round(cold.hutch / cold.peer, 2) },
    goal: GOAL_RATIO,
    met: ratio <= GOAL_RATIO,
  };
  if (flags.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else
    process.stdout.write(
      table(
        ["first update after session/prompt", "hutch acp (box)", `${PEER.name} (host)`, "ratio", "goal"],
        [
          [
            "follow-up prompts, median ms",
            String(report.hutchMs),
            String(report.peerMs),
            String(report.ratio),
            `≤ ${GOAL_RATIO}${report.met ? "" : " (missed)"}`,
          ],
          [
            "the session's first prompt, ms",
            String(report.firstTurn.hutchMs),
            String(report.firstTurn.peerMs),
            String(report.firstTurn.ratio),
            "",
          ],
        ],
      ),
    );
} catch (err) {
  log(`broken: ${(err as Error).message}`);
  exit = 1;
} finally {
  for (const s of sides) await s.stop().catch(() => undefined);
  await fake?.stop();
  await home.dispose();
}
process.exit(exit);
