// Drives the hutch extension in a real VS Code (code-server) through Debian's
// Chromium with playwright-core, while the hutch CLI acts on the same daemon.
// Run by tests/e2e/vscode.test.ts under Node 24 (playwright needs Node);
// prints "ok <step>" per step and exits non-zero on the first failure.
// env: BASE (code-server URL), WS (workspace folder), HUTCH (CLI binary),
//      HUTCH_HOME, SHOT (screenshot path), PLAYWRIGHT_CORE, CHROMIUM,
//      OLD_HUTCH (a binary claiming an old version)
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { drive, env, hutchCli, norm, ok, openPage, workbench } from "./rig.mjs";

const T = 30_000;
const hutch = hutchCli();
const { browser, page } = await openPage({ timeoutMs: T });
const { command, notification, palette, logFrame, pane, openHutch, quickInput } = workbench(page);
const view = pane(/Boxes and sessions/i);
const row = (text) => view.locator('.monaco-list-row[role="treeitem"]', { hasText: text }).first();
/** Sets hutch.path through the Settings editor, as a user would (opened once, kept open). */
const setHutchPath = async (value) => {
  const editor = page.locator(".settings-editor");
  if (!(await editor.isVisible())) {
    await command("Preferences: Open User Settings");
    await editor.waitFor();
    await page.keyboard.press("Control+A");
    await page.keyboard.type("hutch.path");
  }
  const input = editor.locator(".setting-item-contents", { hasText: "Path to the" }).locator("input").first();
  await input.waitFor();
  await input.fill(value);
  await page.keyboard.press("Tab");
};

/** The daemon's API on its unix socket (Node's fetch has no unix sockets). */
const api = (method, path, body) =>
  new Promise((resolve, reject) => {
    const req = request(
      { socketPath: `${env.HUTCH_HOME}/hutch.sock`, path, method, headers: { "content-type": "application/json" } },
      (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => (res.statusCode < 300 ? resolve(JSON.parse(text)) : reject(new Error(`${path}: ${res.statusCode} ${text}`))));
      },
    );
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });

await drive(browser, page, async () => {
  await openHutch(90_000);
  await view.waitFor();
  ok("workbench open with the hutch sidebar");

  await hutch("box", "create", "e2e-box", "--start");
  await row("e2e-box").waitFor();
  await row(/running/).waitFor();
  ok("a box created from the CLI appears in the sidebar, running");

  const sid = await hutch("run", "e2e-box", "--detach", "--label", "e2e-session");
  await row("e2e-session").waitFor();
  ok(`session ${sid} appears under its box`);

  // A session row's inline Show Log, clicked over and over while a box appears and starts (its row
  // changes with each state). A refresh of the whole tree makes VS Code forget every row's node until
  // it has fetched them again, and a click that lands then reaches the command without its session,
  // which then asks for one: each click must open (or reveal) this session's log, never a picker.
  // The clicks start once the new box's row is shown: adding a row to the root refetches the root
  // whatever the extension does (the tree API has no insert); every change after it is the test.
  const sessionRow = row("e2e-session");
  const showLog = sessionRow.locator('.actions .action-label[aria-label^="Show Log"]');
  const picker = page.locator(".quick-input-widget:visible");
  let clicks = 0;
  for (let k = 0; k < 4; k++) {
    const name = `e2e-race-${k}`;
    const creating = hutch("box", "create", name, "--start");
    await row(name).waitFor();
    // New boxes sort below e2e-box, so the button stays where it is: click it as fast as the mouse can.
    await sessionRow.hover();
    const at = await showLog.boundingBox();
    const started = Date.now();
    while (Date.now() - started < 1500) {
      await page.mouse.click(at.x + at.width / 2, at.y + at.height / 2);
      clicks++;
    }
    await creating;
    if (await picker.count())
      throw new Error(`Show Log on e2e-session, clicked while box ${name} was starting, opened a picker instead of the log`);
    await page.locator(".tab", { hasText: "log: e2e-session" }).first().waitFor();
  }
  for (let k = 0; k < 4; k++) await hutch("box", "delete", `e2e-race-${k}`);
  ok(`the inline Show Log clicked ${clicks} times while 4 boxes appeared and started opens the session's log every time`);

  await command("hutch: Show Log");
  await quickInput("e2e-session");
  await logFrame().locator('.row[data-kind="session.created"]').waitFor();
  ok("the session's log opens and replays");

  const note = `from the cli ${Date.now()}`;
  const sent = Date.now();
  await hutch("session", "annotate", sid, note);
  const appended = Date.now();
  await logFrame().locator(".row", { hasText: note }).waitFor({ timeout: 5000 });
  const seen = Date.now();
  if (seen - sent > 2000) throw new Error(`the annotation took ${seen - sent} ms to appear (limit 2000)`);
  ok(`an annotation from the CLI appears in the log ${seen - appended} ms after it was appended (${seen - sent} ms after the CLI started)`);

  await palette("main.ts");
  await page.locator(".quick-input-widget .monaco-list-row", { hasText: "main.ts" }).first().waitFor();
  await page.keyboard.press("Enter");
  await page.locator(".editor-instance .view-lines").first().waitFor();
  await palette(":3");
  await page.keyboard.press("Enter");
  const mine = `from the editor ${Date.now()}`;
  await command("hutch: Annotate Selection");
  await quickInput(mine);
  await page.locator(".editor-instance .squiggly-info").first().waitFor();
  await page.keyboard.press("Control+Shift+M");
  await page.locator(".markers-panel", { hasText: mine }).first().waitFor();
  const logged = JSON.parse((await hutch("session", "log", sid, "--json")).split("\n").filter(Boolean).pop());
  if (
    logged.data.text !== mine ||
    logged.data.anchor.path !== "src/main.ts" ||
    logged.data.anchor.line !== 3 ||
    logged.actor.kind !== "ide"
  ) {
    throw new Error(`the editor's annotation was logged as ${JSON.stringify(logged)}`);
  }
  ok("annotating line 3 from the editor logs src/main.ts:3 as the ide and shows the diagnostic on it");

  await command("hutch: Attach");
  const term = page.locator(".terminal-wrapper .xterm-rows").first();
  await page.waitForFunction(
    () =>
      [...document.querySelectorAll(".terminal-wrapper .xterm-rows")].some((el) => /\$\s*$/m.test(el.textContent.replace(/\u00a0/g, " "))),
    null,
    { timeout: T },
  );
  const tab = await page
    .locator(".terminal-tabs-entry, .single-terminal-tab, .terminal-tab")
    .allTextContents()
    .catch(() => []);
  ok(
    `attach shows the shell prompt: "${norm(await term.textContent())
      .trim()
      .slice(-60)}" (terminal: ${norm(tab.join(" ")).trim().slice(0, 60) || "?"})`,
  );

  await command("hutch: Show Log");
  await quickInput("e2e-session");
  await logFrame().locator(".row", { hasText: mine }).waitFor();
  await page.screenshot({ path: env.SHOT });
  ok(`screenshot saved to ${env.SHOT}`);

  // Cursor to line 1 first, so landing on line 3 is the anchor's doing.
  await page.locator(".tab", { hasText: "main.ts" }).first().click();
  await palette(":1");
  await page.keyboard.press("Enter");
  await page
    .locator(".statusbar-item", { hasText: /Ln 1, Col 1/ })
    .first()
    .waitFor();
  await page.locator(".tab", { hasText: "log: e2e-session" }).first().click();
  await logFrame().locator(".anchor", { hasText: "src/main.ts:3" }).click();
  await page.locator(".tab.active", { hasText: "main.ts" }).waitFor();
  await page
    .locator(".statusbar-item", { hasText: /Ln 3, Col 1/ })
    .first()
    .waitFor();
  ok("an annotation's anchor in the log opens its file at its line");

  // A shell session with no label: the sidebar names it by the command typed first, with no raw id, and its
  // log shows the text the command printed (not "output N bytes"). The printed line differs from the typed
  // one ($((6*7)) is 42 only once the shell ran it), so it cannot be the echo of the input.
  const shell = await hutch("run", "e2e-box", "--detach");
  await hutch("session", "driver", "acquire", shell);
  await hutch("session", "send", shell, "echo printed-$((6*7))-here");
  await hutch("session", "driver", "release", shell);
  const shellRow = row("echo printed-$((6*7))-here");
  await shellRow.waitFor();
  const shown = norm(await shellRow.textContent());
  if (/ses_/.test(shown)) throw new Error(`the sidebar row shows a raw session id: "${shown}"`);
  if (!/shell/.test(shown)) throw new Error(`the sidebar row does not name its agent: "${shown}"`);
  ok(`a shell session's row is named by its first command, agent and age, with no id: "${shown.trim()}"`);
  await shellRow.hover();
  await shellRow.locator('.actions .action-label[aria-label^="Show Log"]').click();
  // The printed line is a row's first line, or in the rest of its text (unfold it): either way, text.
  const outputRows = logFrame().locator('.row[data-kind="output.appended"]');
  const printed = logFrame().locator('.row[data-kind="output.appended"]', { hasText: "printed-42-here" });
  await outputRows.first().waitFor();
  for (let i = 0; i < 20 && (await printed.count()) === 0; i++) {
    const folded = logFrame().locator('.row[data-kind="output.appended"] .toggle', { hasText: "▸" });
    if (await folded.count()) await folded.first().click();
    else await page.waitForTimeout(250);
  }
  await printed.first().waitFor();
  if (
    await logFrame()
      .locator('.row[data-kind="output.appended"]', { hasText: /output \d+ bytes?$/ })
      .count()
  )
    throw new Error("an output row still shows its size instead of its text");
  ok("a shell session's log view shows the text a command printed");

  const big = await hutch("run", "e2e-box", "--detach", "--label", "big-log");
  for (let i = 0; i < 100; i++) {
    await api("POST", `/v1/sessions/${big}/events`, {
      events: Array.from({ length: 1000 }, (_, j) => ({ kind: "annotation.added", data: { text: `bulk ${i * 1000 + j}` } })),
    });
  }
  const loadStart = Date.now();
  await command("hutch: Show Log");
  await quickInput("big-log");
  const count = logFrame().locator("#count");
  for (;;) {
    const total = Number(((await count.textContent()) || "").split("/")[1]?.replace(/[^0-9]/g, "") || 0);
    if (total >= 100_000) break;
    if (Date.now() - loadStart > 60_000) throw new Error(`the big log reached only ${total} events in 60 s`);
    await page.waitForTimeout(100);
  }
  const loaded = Date.now() - loadStart;
  const scroller = logFrame().locator("#scroller");
  const jumps = [];
  for (let k = 0; k <= 20; k++) {
    const t = Date.now();
    const seq = await scroller.evaluate(async (el, frac) => {
      el.scrollTop = (el.scrollHeight - el.clientHeight) * frac;
      for (let i = 0; i < 200; i++) {
        await new Promise((r) => requestAnimationFrame(r));
        const rows = [...el.querySelectorAll(".row")].map((r) => Number(r.dataset.seq));
        const top = el.scrollTop;
        const inView = [...el.querySelectorAll(".row")].filter((r) => r.offsetTop >= top - 1 && r.offsetTop < top + el.clientHeight);
        if (inView.length > 0) return { seq: Math.min(...inView.map((r) => Number(r.dataset.seq))), rows: rows.length };
      }
      return null;
    }, k / 20);
    if (!seq) throw new Error(`no rows rendered after scrolling to ${k * 5}%`);
    if (seq.rows > 300) throw new Error(`${seq.rows} rows in the DOM: the log is not virtualized`);
    jumps.push(Date.now() - t);
  }
  jumps.sort((a, b) => a - b);
  // Virtualization is asserted above (rows in the DOM stay bounded); the times are reported. This bound only
  // catches a stall (rendering every row takes far longer), not a busy machine.
  if (jumps[jumps.length - 1] > 5000) throw new Error(`a scroll jump took ${jumps[jumps.length - 1]} ms to render`);
  ok(`100,000 events: loaded in ${loaded} ms; 21 scroll jumps rendered in median ${jumps[10]} ms, max ${jumps[20]} ms`);

  // Claude Code asks (run --permissions ask) before the fake model's rm -rf; the notification's Deny answers it.
  await hutch("exec", "perm-box", "--", "sh", "-c", "mkdir -p /workspace/data && echo k > /workspace/data/keep.txt");
  const turn = hutch("run", "perm-box", "--agent", "claude", "--permissions", "ask", "--prompt", "run exactly: rm -rf data", "--json");
  const toast = page.locator(".notifications-toasts .notification-list-item", {
    hasText: /box perm-box asks: the agent wants to use Bash to run: rm -rf data/,
  });
  await toast.first().waitFor({ timeout: 120_000 });
  await toast
    .first()
    .locator(".monaco-button", { hasText: /^Deny$/ })
    .click();
  const result = JSON.parse(await turn);
  if (!result.ok) throw new Error(`the denied turn did not end well: ${JSON.stringify(result)}`);
  // Still there (exec exits 1, and execFile throws, when it is not).
  await hutch("exec", "perm-box", "--", "test", "-e", "/workspace/data/keep.txt");
  const decided = (await hutch("session", "log", result.session, "--json"))
    .split("\n")
    .map((l) => JSON.parse(l))
    .filter((e) => e.kind === "approval.decided");
  if (decided.length !== 1 || decided[0].data.decision !== "reject_once" || decided[0].data.reason !== "denied in VS Code")
    throw new Error(`the decision logged: ${JSON.stringify(decided)}`);
  ok("the agent's approval, denied in VS Code: the data is kept and the decision logged once");

  await command("hutch: Show Log");
  await quickInput("Another session id");
  const idInput = page.locator('.quick-input-widget .quick-input-box input[placeholder="ses_…"]');
  await idInput.waitFor({ state: "visible" });
  await idInput.fill("ses_0000000000000000000a");
  await page.keyboard.press("Enter");
  await notification(/no session "ses_0000000000000000000a"/).waitFor();
  await page.waitForFunction(
    () => ![...document.querySelectorAll(".tab")].some((t) => t.textContent.includes("ses_0000000000000000000a")),
    null,
    { timeout: T },
  );
  ok("a session id that does not exist closes its log view with a message");

  const pid = Number(readFileSync(`${env.HUTCH_HOME}/daemon.lock`, "utf8").split(" ")[0]);
  process.kill(pid, "SIGTERM");
  await view.locator(".welcome-view-content", { hasText: "daemon is not reachable" }).waitFor();
  await view.locator(".welcome-view-content a, .welcome-view-content .monaco-button", { hasText: "Run hutch doctor" }).first().waitFor();
  ok("with the daemon stopped the sidebar shows the welcome view with hutch doctor");
  await hutch("box", "list");
  await row("e2e-box").waitFor();
  ok("the sidebar recovers when the daemon is back");

  await setHutchPath("/nonexistent/hutch");
  await notification(/hutch binary not found: \/nonexistent\/hutch.*Fix:/).waitFor();
  ok("a missing hutch binary is named with the fix");
  await setHutchPath(env.OLD_HUTCH);
  await notification(/too old for this extension.*Fix: update hutch/).waitFor();
  ok("a too old hutch binary is named with the fix");
  await setHutchPath(env.HUTCH);
  await row("e2e-box").waitFor();
  ok("pointing the setting at a good hutch brings the sidebar back");
});
