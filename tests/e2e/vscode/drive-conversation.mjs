// Drives the conversation view of the hutch extension in a real VS Code
// (code-server) through Debian's Chromium with playwright-core: a Claude Code
// session (against the fake model API) in a box this folder was offloaded to.
// Run by tests/e2e/vscode-conversation.test.ts under Node 24; prints
// "ok <step>" per step and exits non-zero on the first failure.
// env: BASE, WS, HUTCH, HUTCH_HOME, SHOT, SID (the session, one CLI turn in), GUEST_DIR (the box's copy of WS),
//      BUN and ACP_TURN (bun and tests/e2e/vscode/acp-turn.ts, an ACP editor)
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { drive, env, hutchCli, norm, ok, openPage, run, workbench } from "./rig.mjs";

const T = 30_000;
const TURN = 180_000;
const hutch = hutchCli();
const sid = env.SID;
const notes = `${env.GUEST_DIR}/notes.md`;
const editAsk = `in ${notes} replace old with new`;
const { browser, page } = await openPage({ timeoutMs: T });
const { command, logFrame: frame, pane, openHutch } = workbench(page);
const view = pane(/Boxes and sessions/i);
const row = (text) => view.locator('.monaco-list-row[role="treeitem"]', { hasText: text }).first();

/** The prompts the conversation shows, in order: [text, who]. */
const shownPrompts = async () =>
  (
    await frame()
      .locator(".item.prompt")
      .evaluateAll((els) => els.map((e) => [e.querySelector(".text")?.textContent ?? "", e.querySelector(".who")?.textContent ?? ""]))
  ).map(([t, w]) => [norm(t).trim(), norm(w).trim()]);

/** Picks the row of the open quick pick that `text` filters to: Enter only once that row is the focused one (the filter applied). */
const pick = async (text) => {
  const input = page.locator(".quick-input-widget .quick-input-box input");
  await input.waitFor({ state: "visible" });
  await input.fill(text);
  await page.locator(".quick-input-widget .monaco-list-row.focused", { hasText: text }).first().waitFor();
  await page.keyboard.press("Enter");
};

/** Types a prompt into the conversation's box and sends it with Enter. */
const ask = async (text) => {
  const box = frame().locator("#prompt");
  await box.fill(text);
  await box.press("Enter");
};

/** Waits for the agent's turn to end: the header no longer says busy, and a "turn ended" line follows the prompt. */
const turnEnds = async (after) => {
  const ends = () => frame().locator(".item.turn");
  const deadline = Date.now() + TURN;
  while ((await ends().count()) <= after) {
    if (Date.now() > deadline) throw new Error(`the turn did not end within ${TURN / 1000} s`);
    await page.waitForTimeout(250);
  }
};

await drive(browser, page, async () => {
  await openHutch(90_000);
  await view.waitFor();
  const sessionRow = row("create first.txt containing one");
  await sessionRow.waitFor();
  // The tree redraws its rows as the session's events arrive; on a loaded machine a click can land on a row as it is
  // replaced (a CI run once saw no tab 30 s after it). Clicked again then, and said so.
  const tab = page.locator(".tab", { hasText: "chat: create first.txt containing one" }).first();
  for (let attempt = 1; ; attempt++) {
    await sessionRow.hover();
    await sessionRow.locator('.actions .action-label[aria-label^="Open Conversation"]').click();
    try {
      await tab.waitFor({ timeout: 15_000 });
      break;
    } catch (err) {
      if (attempt === 3) throw err;
      console.log(`note: no conversation tab 15 s after click ${attempt} on Open Conversation; clicking again`);
    }
  }
  await frame().locator(".item.prompt", { hasText: "create first.txt containing one" }).waitFor();
  await frame().locator(".item.message", { hasText: 'Created first.txt containing "one".' }).waitFor();
  ok("the sidebar row's Open Conversation shows the CLI's turn: its prompt and the fake model's answer");

  // A prompt typed in VS Code: Claude Code reads the file and edits it; the tool call folds with its diff.
  const turns0 = await frame().locator(".item.turn").count();
  await ask(editAsk);
  await frame().locator(".item.prompt", { hasText: editAsk }).waitFor();
  await turnEnds(turns0);
  const edit = frame().locator('.item.tool[data-kind="edit"]', { hasText: "Edit" }).first();
  await edit.waitFor();
  if ((await edit.getAttribute("data-status")) !== "ok")
    throw new Error(`the Edit tool call ended ${await edit.getAttribute("data-status")}`);
  await edit.locator(".diff .del", { hasText: "- old" }).waitFor();
  await edit.locator(".diff .add", { hasText: "+ new" }).waitFor();
  await frame().locator(".item.tool", { hasText: "Read" }).first().waitFor();
  // The answer is Markdown: `old` is code and **new** is bold, not the raw marks.
  const answer = frame().locator(".item.message", { hasText: "Replaced" }).last();
  await answer.locator("code", { hasText: "old" }).waitFor();
  await answer.locator("strong", { hasText: "new" }).waitFor();
  if (/\*\*|`/.test(await answer.textContent())) throw new Error(`the answer shows raw Markdown: ${await answer.textContent()}`);
  const usage = norm(await frame().locator("#usage").textContent());
  if (!/tokens: \d+ in, \d+ out/.test(usage)) throw new Error(`no usage in the header: "${usage}"`);
  const inBox = await hutch("exec", "conv-box", "--", "cat", notes);
  if (!inBox.includes("new") || inBox.includes("old")) throw new Error(`notes.md in the box holds: ${inBox}`);
  ok(`a prompt typed in VS Code: the fake model's Read and Edit tool calls, the edit as a diff, the answer as Markdown (${usage})`);

  // Open Diff: VS Code's diff editor, the local file (this folder was offloaded to the box) against the agent's edit.
  await edit.locator("button.open-diff").first().click();
  await page
    .locator(".tab", { hasText: /notes\.md \(local\) ↔ Edit in the box/ })
    .first()
    .waitFor();
  const diff = page.locator(".monaco-diff-editor").first();
  await diff.waitFor();
  await diff.locator(".editor.original .view-lines", { hasText: "old" }).waitFor();
  await diff.locator(".editor.modified .view-lines", { hasText: "new" }).waitFor();
  if (!readFileSync(join(env.WS, "notes.md"), "utf8").includes("old")) throw new Error("the local notes.md was changed by opening a diff");
  ok("Open Diff shows the local notes.md (still old) against the agent's edit (new) in VS Code's diff editor");
  await page.locator(".tab", { hasText: "chat: create first.txt containing one" }).first().click();

  // Stop during a slow turn: the fake model takes 300 s to answer this prompt; Stop interrupts the turn long before.
  const turns1 = await frame().locator(".item.turn").count();
  await ask("take 300 seconds to answer");
  await frame().locator(".item.prompt", { hasText: "take 300 seconds to answer" }).waitFor();
  await frame().locator("#state", { hasText: "busy" }).waitFor();
  await frame().locator("#stop:not([disabled])").waitFor();
  await page.waitForTimeout(2000);
  if ((await frame().locator(".item.turn").count()) !== turns1) throw new Error("the slow turn ended before Stop");
  const stopAt = Date.now();
  await frame().locator("#stop").click();
  await turnEnds(turns1);
  const stopped = Date.now() - stopAt;
  if (stopped > 60_000) throw new Error(`the turn ended ${stopped} ms after Stop`);
  const state = norm(await frame().locator("#state").textContent());
  if (state === "busy") throw new Error("the header still says busy after Stop");
  // Said as a stop by this editor, not as the agent's error.
  await frame()
    .locator(".item.stop", { hasText: /stopped by .*\(ide\)/ })
    .last()
    .waitFor();
  await frame().locator(".item.turn", { hasText: "turn stopped" }).last().waitFor();
  if (await frame().locator(".item.error").count()) throw new Error("the stopped turn shows the agent's error");
  ok(`Stop during a slow turn (a model taking 300 s) ends it ${stopped} ms later, shown as stopped by this editor; the agent is ${state}`);

  // An ACP editor's turn, then the CLI's: VS Code shows them as they happen, each with its sender.
  const acp = JSON.parse((await run(env.BUN, [env.ACP_TURN, sid, "create acp.txt containing a"], { env })).stdout.trim().split("\n").pop());
  if (acp.stopReason !== "end_turn") throw new Error(`the ACP turn ended ${acp.stopReason}`);
  await frame().locator(".item.prompt", { hasText: "create acp.txt containing a" }).waitFor();
  await hutch("session", "driver", "acquire", sid);
  await hutch("session", "send", sid, "create cli.txt containing c");
  await hutch("session", "driver", "release", sid);
  await hutch("session", "wait", sid);
  await frame().locator(".item.prompt", { hasText: "create cli.txt containing c" }).waitFor();
  await frame().locator(".item.message", { hasText: 'Created cli.txt containing "c".' }).waitFor();

  const want = [
    "create first.txt containing one",
    editAsk,
    "take 300 seconds to answer",
    "create acp.txt containing a",
    "create cli.txt containing c",
  ];
  const vsc = await shownPrompts();
  if (JSON.stringify(vsc.map(([t]) => t)) !== JSON.stringify(want)) throw new Error(`VS Code shows the prompts ${JSON.stringify(vsc)}`);
  const kinds = vsc.map(([, w]) => (/ide:acp\./.test(w) ? "acp" : /\(ide\)/.test(w) ? "vscode" : /\(user\)/.test(w) ? "cli" : w));
  if (JSON.stringify(kinds) !== JSON.stringify(["cli", "vscode", "vscode", "acp", "cli"]))
    throw new Error(`VS Code names the senders ${JSON.stringify(vsc)}`);
  // The ACP editor, loading the session again, and the CLI's log: the same prompts, order and senders.
  const again = JSON.parse((await run(env.BUN, [env.ACP_TURN, sid], { env })).stdout.trim().split("\n").pop());
  const acpKinds = again.prompts.map(([, k, id]) => (/ide:acp\./.test(id) ? "acp" : k === "ide" ? "vscode" : k === "user" ? "cli" : id));
  if (JSON.stringify(again.prompts.map(([t]) => t)) !== JSON.stringify(want) || JSON.stringify(acpKinds) !== JSON.stringify(kinds))
    throw new Error(`the ACP editor shows ${JSON.stringify(again.prompts)}`);
  const cli = (await hutch("session", "log", sid, "--json"))
    .split("\n")
    .map((l) => JSON.parse(l))
    .filter((e) => e.kind === "input.sent");
  const cliKinds = cli.map((e) =>
    /ide:acp\./.test(e.actor.id) ? "acp" : e.actor.kind === "ide" ? "vscode" : e.actor.kind === "user" ? "cli" : e.actor.id,
  );
  if (JSON.stringify(cli.map((e) => e.data.text.trim())) !== JSON.stringify(want) || JSON.stringify(cliKinds) !== JSON.stringify(kinds))
    throw new Error(`the CLI's log holds ${JSON.stringify(cli.map((e) => [e.data.text, e.actor]))}`);
  ok(`VS Code, an ACP editor and the CLI show the same ${want.length} turns in the same order, senders ${kinds.join(", ")}`);
  await page.screenshot({ path: env.SHOT });

  // A reload of the window: the conversation comes back from the daemon's log, whole.
  await command("Developer: Reload Window");
  await page.locator(".monaco-workbench").waitFor();
  await page.locator(".tab", { hasText: "chat: create first.txt containing one" }).first().waitFor({ timeout: 90_000 });
  await page.locator(".tab", { hasText: "chat: create first.txt containing one" }).first().click();
  await frame()
    .locator(".item.prompt", { hasText: "create cli.txt containing c" })
    .waitFor({ timeout: 60_000 })
    .catch(async (e) => {
      const status = await frame()
        .locator("#status")
        .textContent()
        .catch(() => "(no view)");
      const items = await frame()
        .locator(".item")
        .count()
        .catch(() => -1);
      const got = await frame()
        .locator("body")
        .getAttribute("data-received")
        .catch(() => "?");
      const tabs = await page.locator(".tab").allTextContents();
      throw new Error(
        `after the reload the conversation shows ${items} items from ${got} events, status "${status}", tabs ${JSON.stringify(tabs)}: ${e.message}`,
      );
    });
  const after = await shownPrompts();
  if (JSON.stringify(after) !== JSON.stringify(vsc)) throw new Error(`after the reload the conversation shows ${JSON.stringify(after)}`);
  await frame().locator('.item.tool[data-kind="edit"] .diff .add', { hasText: "+ new" }).first().waitFor();
  await frame().locator(".item.message strong", { hasText: "new" }).first().waitFor();
  ok("after a window reload the whole conversation is back: every prompt, sender, tool call, diff and answer");

  // A new conversation from the palette: a headless Claude Code in the box, prompted from the view (no terminal).
  await command("hutch: New Conversation…");
  await pick("conv-box");
  await pick("claude");
  await page.locator(".tab", { hasText: "chat: claude, no prompt yet" }).first().waitFor({ timeout: 90_000 });
  await page.locator(".tab", { hasText: "chat: claude, no prompt yet" }).first().click();
  const turns2 = await frame().locator(".item.turn").count();
  await ask("create fresh.txt containing f");
  await turnEnds(turns2);
  await frame().locator(".item.message", { hasText: 'Created fresh.txt containing "f".' }).waitFor();
  const fresh = await hutch("exec", "conv-box", "--", "cat", `${env.GUEST_DIR}/fresh.txt`);
  if (fresh !== "f") throw new Error(`fresh.txt in the box holds "${fresh}"`);
  const made = JSON.parse(await hutch("session", "list", "--json")).filter((x) => x.agent === "claude" && x.id !== sid);
  if (made.length !== 1 || made[0].headless !== true) throw new Error(`the new conversation's session: ${JSON.stringify(made)}`);
  ok("New Conversation starts a headless Claude Code in the chosen box, prompted from the view; the file is written");
});
