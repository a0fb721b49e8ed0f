// Durable sessions, driven through dist/hutch and the daemon's socket.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { makeHome, onTerminal, pidAlive, waitFor, type Home } from "../helpers.ts";
import { fixtureEvent } from "../fixtures/events.ts";
import { Events } from "../../shared/src/index.ts";

let h: Home;
let sock: string;
beforeAll(async () => {
  h = makeHome();
  sock = join(h.home, "hutch.sock");
  expect((await h.run(["box", "create", "sb", "--start"])).code).toBe(0);
});
afterAll(() => h.cleanup());

type Ev = { session: string; seq: number; kind: string; actor: { kind: string; id: string }; data: Record<string, unknown> };

async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`http://localhost${path}`, {
    method,
    unix: sock,
    headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: a test reads whatever JSON the route answered, field by field
  return { status: res.status, body: (await res.json()) as any };
}

async function newSession(label: string): Promise<string> {
  const r = await h.run(["run", "sb", "--detach", "--label", label]);
  expect(r.code).toBe(0);
  return r.stdout.trim();
}

async function allEvents(sid: string): Promise<Ev[]> {
  const out: Ev[] = [];
  let from = 1;
  for (;;) {
    const page = (await api("GET", `/v1/sessions/${sid}/events?from=${from}&limit=10000`)).body as {
      events: Ev[];
      next: number;
      last: number;
    };
    out.push(...page.events);
    if (page.events.length === 0 || page.next > page.last) return out;
    from = page.next;
  }
}

/** Appends annotations until the session holds exactly `total` events. */
async function fillTo(sid: string, total: number): Promise<void> {
  const last = (await api("GET", `/v1/sessions/${sid}`)).body.lastSeq as number;
  const events = Array.from({ length: total - last }, (_, i) => fixtureEvent(Events.annotationAdded, { text: `fill ${i}` }));
  const r = await api("POST", `/v1/sessions/${sid}/events`, { events });
  expect(r.status).toBe(200);
  expect((await api("GET", `/v1/sessions/${sid}`)).body.lastSeq).toBe(total);
}

/** Runs `hutch session subscribe` and collects its NDJSON lines. */
/** Everything the session's terminal printed so far, from its output events. */
async function outputText(sid: string): Promise<string> {
  let text = "";
  for (const e of (await allEvents(sid)).filter((e) => e.kind === "output.appended")) {
    text += await (await fetch(`http://localhost/v1/sessions/${sid}/output/${e.data.chunk}`, { unix: sock })).text();
  }
  return text;
}

/** The shell's first prompt is on the screen (and in the log): nothing more arrives until something is typed. */
const promptShown = (sid: string) => waitFor("the shell's first prompt", async () => (await outputText(sid)).includes("$ "));

function subscriber(sid: string, from: number) {
  const lines: Ev[] = [];
  const proc = h.spawn(["session", "subscribe", sid, "--from", String(from)]);
  void (async () => {
    let buf = "";
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
      buf += new TextDecoder().decode(chunk);
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        lines.push(JSON.parse(buf.slice(0, i)));
        buf = buf.slice(i + 1);
      }
    }
  })();
  return { lines, proc };
}

describe("the log", () => {
  test("subscribe replays 1,000 events in order, then delivers a new one live; --from 900 starts at 900", async () => {
    const sid = await newSession("thousand");
    // Let the shell's first prompt land before counting.
    await promptShown(sid);
    await fillTo(sid, 1000);

    const all = subscriber(sid, 1);
    const tail = subscriber(sid, 900);
    await waitFor("1,000 replayed events", () => all.lines.length >= 1000);
    await waitFor("101 replayed events", () => tail.lines.length >= 101);
    expect(all.lines.map((e) => e.seq)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    expect(tail.lines.map((e) => e.seq)).toEqual(Array.from({ length: 101 }, (_, i) => 900 + i));

    // Delivered live to both open subscribers (how fast is scripts/bench/sessions.ts's to measure, not a test's:
    // a bound of 1 s here failed once in CI with the annotate call itself slow on a loaded machine).
    expect((await h.run(["session", "annotate", sid, "live one"])).code).toBe(0);
    await waitFor("the live event", () => all.lines.length === 1001 && tail.lines.length === 102, 10_000);
    expect(all.proc.exitCode).toBeNull();
    expect(tail.proc.exitCode).toBeNull();
    expect(all.lines[1000]).toMatchObject({ seq: 1001, kind: "annotation.added", data: { text: "live one" } });
    expect(tail.lines[101]!.seq).toBe(1001);
    all.proc.kill();
    tail.proc.kill();
  });

  test("--from beyond the end waits for live events without an error", async () => {
    const sid = await newSession("beyond");
    const last = (await api("GET", `/v1/sessions/${sid}`)).body.lastSeq as number;
    const sub = subscriber(sid, last + 5);
    for (let i = 0; i < 5; i++) await h.run(["session", "annotate", sid, `n${i}`]);
    await waitFor("the event at the asked seq", () => sub.lines.length >= 1);
    // Delivery is in order, so the first line arriving at last + 5 shows none before it was sent, and the subscriber waited.
    expect(sub.lines[0]!.seq).toBe(last + 5);
    expect(sub.proc.exitCode).toBeNull();
    sub.proc.kill();
    const code = await sub.proc.exited;
    expect([0, 143]).toContain(code);
  });

  test("two subscribers see the same events in the same order", async () => {
    const sid = await newSession("two");
    const a = subscriber(sid, 1);
    const b = subscriber(sid, 1);
    for (let i = 0; i < 20; i++) await api("POST", `/v1/sessions/${sid}/annotations`, { text: `x${i}` });
    const last = (await api("GET", `/v1/sessions/${sid}`)).body.lastSeq as number;
    await waitFor("both caught up", () => a.lines.length >= last && b.lines.length >= last);
    expect(a.lines.map((e) => `${e.seq}:${e.kind}`)).toEqual(b.lines.map((e) => `${e.seq}:${e.kind}`));
    a.proc.kill();
    b.proc.kill();
  });
});

describe("actors and the driver slot", () => {
  test("a second actor's send is refused naming the driver; it may annotate; steal is logged with both", async () => {
    const sid = await newSession("drive");
    expect((await h.run(["session", "driver", "acquire", sid])).code).toBe(0);
    const mine = await h.run(["session", "send", sid, "echo from-the-driver"]);
    expect(mine.code).toBe(0);

    const agent = { HUTCH_CLIENT: "agent" };
    const refused = await h.run(["session", "send", sid, "echo intruder"], { env: agent });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("is driven by root (user)");
    expect(refused.stderr).toContain(`hutch session driver steal ${sid}`);

    expect((await h.run(["session", "annotate", sid, "looks fine", "--anchor", "src/a.ts:12"], { env: agent })).code).toBe(0);
    const stole = await h.run(["session", "driver", "steal", sid, "--json"], { env: agent });
    expect(stole.code).toBe(0);
    expect(JSON.parse(stole.stdout).driver.actor).toEqual({ kind: "agent", id: "root/agent" });
    expect((await h.run(["session", "send", sid, "echo agent-now"], { env: agent })).code).toBe(0);
    const back = await h.run(["session", "send", sid, "echo nope"]);
    expect(back.code).toBe(1);
    expect(back.stderr).toContain("is driven by root/agent (agent)");

    const events = await allEvents(sid);
    const stolen = events.find((e) => e.kind === "session.driver.stolen")!;
    expect(stolen.data).toEqual({ from: { kind: "user", id: "root" }, to: { kind: "agent", id: "root/agent" } });
    expect(stolen.actor).toEqual({ kind: "agent", id: "root/agent" });
    const note = events.find((e) => e.kind === "annotation.added")!;
    expect(note).toMatchObject({
      actor: { kind: "agent", id: "root/agent" },
      data: { text: "looks fine", anchor: { path: "src/a.ts", line: 12 } },
    });
    const inputs = events.filter((e) => e.kind === "input.sent").map((e) => [e.actor.id, e.data.text]);
    expect(inputs).toEqual([
      ["root", "echo from-the-driver\n"],
      ["root/agent", "echo agent-now\n"],
    ]);
    // The typed command really ran in the terminal: its output is in the log.
    await waitFor("the command's output", async () => {
      const evs = await allEvents(sid);
      const chunks = evs.filter((e) => e.kind === "output.appended" && !e.data.snapshot);
      let text = "";
      for (const c of chunks)
        text += await (await fetch(`http://localhost/v1/sessions/${sid}/output/${c.data.chunk}`, { unix: sock })).text();
      return text.includes("agent-now\r\n");
    });
  });

  test("a lease lapses without heartbeats and frees the slot", async () => {
    const sid = await newSession("lease");
    expect((await h.run(["session", "driver", "acquire", sid, "--lease", "300ms"])).code).toBe(0);
    await waitFor("the lapse", async () => (await allEvents(sid)).some((e) => e.kind === "session.driver.lapsed"));
    const info = JSON.parse((await h.run(["session", "info", sid, "--json"])).stdout);
    expect(info.driver).toBeUndefined();
    expect((await h.run(["session", "driver", "acquire", sid], { env: { HUTCH_CLIENT: "agent" } })).code).toBe(0);
  });
});

describe("durability", () => {
  test("500 keyed appends while the daemon is SIGKILLed three times: exactly 500, gapless, no repeats", async () => {
    const sid = await newSession("durable");
    const base = (await api("GET", `/v1/sessions/${sid}`)).body.lastSeq as number;
    let kills = 0;
    let appending = true;
    const killer = (async () => {
      while (appending && kills < 3) {
        await Bun.sleep(20 + Math.random() * 60);
        const pid = h.daemonPid();
        if (pid && pidAlive(pid)) {
          process.kill(pid, "SIGKILL");
          kills++;
        }
      }
    })();
    for (let i = 0; i < 500; i++) {
      for (;;) {
        try {
          const res = await fetch(`http://localhost/v1/sessions/${sid}/events`, {
            method: "POST",
            unix: sock,
            headers: { "content-type": "application/json", "idempotency-key": `k${i}` },
            body: JSON.stringify({ events: [fixtureEvent(Events.annotationAdded, { text: `e${i}` })] }),
          });
          if (res.status === 200) break;
        } catch {
          // the daemon is gone: bring it back (any verb starts one) and retry with the same key
        }
        await h.run(["box", "list"]);
      }
    }
    appending = false;
    await killer;
    expect(kills).toBe(3);
    // The last kill may have come after the last append: bring the daemon back before reading.
    expect((await h.run(["box", "list"])).code).toBe(0);
    const events = await allEvents(sid);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: events.length }, (_, i) => i + 1));
    const texts = events.filter((e) => e.seq > base && e.kind === "annotation.added").map((e) => e.data.text);
    expect(texts).toEqual(Array.from({ length: 500 }, (_, i) => `e${i}`));
  }, 180_000);

  test("100 `session annotate` commands while the daemon is killed at random: each one that exited 0 is there once", async () => {
    const sid = await newSession("annotate-kill");
    let running = true;
    let kills = 0;
    const killer = (async () => {
      while (running) {
        await Bun.sleep(200 + Math.random() * 600);
        const pid = h.daemonPid();
        if (running && pid && pidAlive(pid)) {
          process.kill(pid, "SIGKILL");
          kills++;
        }
      }
    })();
    const ok: string[] = [];
    for (let i = 0; i < 100; i++) {
      const r = await h.run(["session", "annotate", sid, `note-${i}`]);
      if (r.code === 0) ok.push(`note-${i}`);
    }
    running = false;
    await killer;
    expect(kills).toBeGreaterThan(0);
    // The last kill may have come after the last command: bring the daemon back before reading.
    expect((await h.run(["box", "list"])).code).toBe(0);
    const texts = (await allEvents(sid)).filter((e) => e.kind === "annotation.added").map((e) => e.data.text as string);
    for (const t of ok) expect(texts.filter((x) => x === t).length).toBe(1);
    // The CLI retries through a restart, so in practice every command succeeds.
    expect(ok.length).toBe(100);
    const seqs = (await allEvents(sid)).map((e) => e.seq);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
  }, 180_000);
});

describe("slow consumers", () => {
  test("a subscriber that stops reading is closed with a resume seq; resuming yields every event once", async () => {
    const sid = await newSession("slow");
    await promptShown(sid);
    const base = (await api("GET", `/v1/sessions/${sid}`)).body.lastSeq as number;
    const got: number[] = [];
    let closeInfo: { code: number; reason: string } | null = null;
    const ws = new WebSocket(`ws+unix://${sock}:/v1/sessions/${sid}/subscribe?from=1`);
    ws.onmessage = (e) => {
      for (const line of String(e.data).split("\n")) {
        const m = JSON.parse(line);
        if (m.seq !== undefined && m.kind) got.push(m.seq);
      }
    };
    ws.onclose = (e) => (closeInfo = { code: e.code, reason: e.reason });
    await waitFor("the replay", () => got.length >= base);
    ws.pause();
    // 50,000 events appended while the consumer reads nothing.
    for (let b = 0; b < 50; b++) {
      const events = Array.from({ length: 1000 }, (_, i) =>
        fixtureEvent(Events.annotationAdded, { text: `slow ${b * 1000 + i} ${"x".repeat(200)}` }),
      );
      expect((await api("POST", `/v1/sessions/${sid}/events`, { events })).status).toBe(200);
    }
    ws.resume();
    await waitFor("the slow-consumer close", () => closeInfo, 30_000);
    expect(closeInfo!.code).toBe(4000);
    const resumeFrom = JSON.parse(closeInfo!.reason).resumeFrom as number;
    expect(resumeFrom).toBe(got[got.length - 1]! + 1);
    // Whatever else the session logged meanwhile counts too: every event, once, in order.
    const total = (await api("GET", `/v1/sessions/${sid}`)).body.lastSeq as number;
    expect(total).toBeGreaterThanOrEqual(base + 50_000);
    expect(resumeFrom).toBeLessThanOrEqual(total);

    const ws2 = new WebSocket(`ws+unix://${sock}:/v1/sessions/${sid}/subscribe?from=${resumeFrom}`);
    ws2.onmessage = (e) => {
      for (const line of String(e.data).split("\n")) {
        const m = JSON.parse(line);
        if (m.seq !== undefined && m.kind) got.push(m.seq);
      }
    };
    await waitFor("the rest", () => got.length >= total, 30_000);
    ws2.close();
    expect(got).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  }, 120_000);
});

describe("bad input", () => {
  test("an unknown kind, a field of the wrong type: 400 naming it, nothing stored", async () => {
    // Off-schema on purpose: what the daemon's own check must refuse.
    const sid = await newSession("bad");
    const a = await api("POST", `/v1/sessions/${sid}/events`, { events: [{ kind: "made.up", data: {} }] });
    expect(a.status).toBe(400);
    expect(a.body.error.message).toContain('unknown event kind "made.up"');
    const b = await api("POST", `/v1/sessions/${sid}/events`, { events: [{ kind: "annotation.added", data: { text: 42 } }] });
    expect(b.status).toBe(400);
    expect(b.body.error.message).toStartWith("data.text");
    const c = await api("POST", `/v1/sessions/${sid}/events`, { events: [{ kind: "session.driver.stolen", data: {} }] });
    expect(c.status).toBe(400);
    expect(c.body.error.message).toContain("written by the daemon");
    // A batch is all or nothing.
    const d = await api("POST", `/v1/sessions/${sid}/events`, {
      events: [fixtureEvent(Events.annotationAdded, { text: "ok" }), { kind: "annotation.added", data: {} }],
    });
    expect(d.status).toBe(400);
    expect(d.body.error.message).toStartWith("events.1.data.text");
    // Nothing from any refused request was stored (the shell's own output may still arrive).
    expect((await allEvents(sid)).filter((e) => !["session.created", "exec.started", "output.appended"].includes(e.kind))).toEqual([]);
  });

  test("a session that does not exist: exit 4 with a hint", async () => {
    for (const verb of [["info"], ["log"], ["subscribe"], ["annotate", "x"]]) {
      const r = await h.run(["session", verb[0]!, "ses_00000000000000000000", ...verb.slice(1)]);
      expect(r.code).toBe(4);
      expect(r.stderr).toContain('no session "ses_00000000000000000000"');
      expect(r.stderr).toContain("hutch session list");
    }
  });

  test("an idempotency key repeated returns the first seq and stores nothing", async () => {
    const sid = await newSession("idem");
    const a = await api("POST", `/v1/sessions/${sid}/annotations`, { text: "once" }, { "idempotency-key": "same" });
    const b = await api("POST", `/v1/sessions/${sid}/annotations`, { text: "once" }, { "idempotency-key": "same" });
    expect(b.body.seq).toBe(a.body.seq);
    expect((await allEvents(sid)).filter((e) => e.kind === "annotation.added").length).toBe(1);
  });
});

describe("attach", () => {
  test("run attaches; detach and attach again: the screen is back, the command kept running, its output is in the log", async () => {
    const a = onTerminal(h, ["run", "sb", "--label", "attach"]);
    await a.until(/session (ses_[0-9a-z]{20})/);
    const sid = /session (ses_[0-9a-z]{20})/.exec(a.text())![1]!;
    await a.until("$ ");
    a.type("i=0; while true; do i=$((i+1)); echo beat-$i; sleep 0.3; done\n");
    await a.until("beat-2");
    // Attaching took the driver slot; a second actor is refused, an attach by it too.
    const s = JSON.parse((await h.run(["session", "info", sid, "--json"])).stdout);
    expect(s.driver.actor).toEqual({ kind: "user", id: "root" });
    const other = await h.run(["session", "attach", sid], { env: { HUTCH_CLIENT: "agent" } });
    expect(other.code).toBe(1);
    expect(other.stderr).toContain("is driven by root (user)");
    // The refusal closes the attach stream; its next step arrives as the close's own hint field.
    expect(other.stderr).toContain(`next: take it over: hutch session driver steal ${sid}`);

    a.type("\x01d");
    expect(await a.proc.exited).toBe(0);
    expect(a.text()).toContain(`reattach: hutch session attach ${sid}`);
    expect(a.text()).toContain(`what was recorded: hutch session log ${sid}`);
    // Detaching gave the slot back.
    expect(JSON.parse((await h.run(["session", "info", sid, "--json"])).stdout).driver).toBeUndefined();
    const seenBefore = Math.max(...[...a.text().matchAll(/beat-(\d+)/g)].map((m) => Number(m[1])));
    // While nobody is attached the loop goes on, and the log records it.
    await waitFor("beats logged while detached", async () => (await outputText(sid)).includes(`beat-${seenBefore + 4}`));

    const b = onTerminal(h, ["session", "attach", sid]);
    await b.until("while true; do");
    await b.until(new RegExp(`beat-(${seenBefore + 4}|${seenBefore + 5}|${seenBefore + 6}|${seenBefore + 7})`));
    // What was printed while nobody was attached is in the log.
    const texts: string[] = [];
    for (const e of await allEvents(sid)) {
      if (e.kind !== "output.appended" || e.data.snapshot) continue;
      texts.push(await (await fetch(`http://localhost/v1/sessions/${sid}/output/${e.data.chunk}`, { unix: sock })).text());
    }
    const logged = texts.join("");
    expect(logged).toContain(`beat-${seenBefore + 1}\r\n`);
    expect(logged).toContain(`beat-${seenBefore + 2}\r\n`);
    // Typed input is in the log, attributed to who typed it.
    const typed = (await allEvents(sid))
      .filter((e) => e.kind === "input.sent")
      .map((e) => e.data.text)
      .join("");
    expect(typed).toContain("echo beat-$i");
    b.type("\x03");
    b.type("exit 0\n");
    expect(await b.proc.exited).toBe(0);
    const final = JSON.parse((await h.run(["session", "info", sid, "--json"])).stdout);
    expect(final.state).toBe("closed");
  });

  test("Ctrl-A Ctrl-A sends one literal Ctrl-A", async () => {
    const sid = await newSession("ctrl-a");
    const a = onTerminal(h, ["session", "attach", sid]);
    await a.until("$ ");
    // Once the marker prints, the shell has left its line editor: what is typed next is cat's.
    a.type("echo cat-$((6*7)); cat -v\n");
    await a.until("cat-42");
    a.type("\x01\x01x\n");
    await a.until("^Ax");
    a.type("\x03");
    a.type("\x01d");
    expect(await a.proc.exited).toBe(0);
  });

  test("--steal takes the slot from another driver and logs it", async () => {
    const sid = await newSession("steal");
    expect((await h.run(["session", "driver", "acquire", sid], { env: { HUTCH_CLIENT: "agent" } })).code).toBe(0);
    const a = onTerminal(h, ["session", "attach", sid, "--steal"]);
    await a.until("$ ");
    a.type("\x01d");
    expect(await a.proc.exited).toBe(0);
    const stolen = (await allEvents(sid)).find((e) => e.kind === "session.driver.stolen")!;
    expect(stolen.data).toEqual({ from: { kind: "agent", id: "root/agent" }, to: { kind: "user", id: "root" } });
  });
});

describe("reading", () => {
  test("run without a box creates one; log prints the log for people and as NDJSON; watch follows it", async () => {
    const r = await h.run(["run", "--detach", "--json"]);
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.boxName).toMatch(/^run-[0-9a-z]{6}$/);
    const sid = s.id as string;
    expect((await h.run(["session", "driver", "acquire", sid])).code).toBe(0);
    expect((await h.run(["session", "send", sid, "echo marker-$((6*7))"])).code).toBe(0);
    expect((await h.run(["session", "annotate", sid, "checked", "--anchor", "README.md:3"])).code).toBe(0);
    await waitFor("the command's output in the log", async () => (await h.run(["session", "log", sid])).stdout.includes("marker-42"));
    const human = (await h.run(["session", "log", sid])).stdout;
    expect(human).toContain("session.created");
    expect(human).toContain('> "echo marker-$((6*7))\\n"');
    expect(human).toContain("✎ checked @ README.md:3");
    const nd = (await h.run(["session", "log", sid, "--json", "--from", "2"])).stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(nd[0].seq).toBe(2);
    expect(nd.map((e) => e.seq)).toEqual(nd.map((_, i) => i + 2));

    const w = h.spawn(["session", "watch", sid]);
    let seen = "";
    const reader = (async () => {
      for await (const c of w.stdout as ReadableStream<Uint8Array>) seen += new TextDecoder().decode(c);
    })();
    await waitFor("watch to replay", () => seen.includes("marker-42"));
    expect((await h.run(["session", "annotate", sid, "live note"])).code).toBe(0);
    await waitFor("watch to show the live note", () => seen.includes("✎ live note"));
    w.kill();
    await reader.catch(() => undefined);
    const list = JSON.parse((await h.run(["session", "list", "--json"])).stdout) as { id: string }[];
    expect(list.map((x) => x.id)).toContain(sid);
  });
});
