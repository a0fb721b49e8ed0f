// Drives the hutch extension in code-server whose hutch.remote setting names a
// remote (server mode), while the hutch CLI acts on the same remote with
// --remote. Run by tests/e2e/vscode-remote.test.ts under Node 24; prints
// "ok <step>" per step and exits non-zero on the first failure.
// env: BASE, WS, HUTCH, REMOTE (the remote's name), SHOT, PLAYWRIGHT_CORE, CHROMIUM
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { drive, env, hutchCli, ok, openPage, workbench } from "./rig.mjs";

const T = 30_000;
/** The CLI, on the remote as the extension is (the flag, not the environment: code-server has no HUTCH_REMOTE). */
const hutch = hutchCli(["--remote", env.REMOTE]);
const { browser, page } = await openPage({ timeoutMs: T });
const { command, logFrame, pane, openHutch, quickInput } = workbench(page);
const view = pane(/Boxes and sessions/i);
const row = (text) => view.locator('.monaco-list-row[role="treeitem"]', { hasText: text }).first();

await drive(browser, page, async () => {
  await openHutch(90_000);
  await view.waitFor();
  await page
    .locator(".statusbar-item", { hasText: `hutch: ${env.REMOTE}` })
    .first()
    .waitFor();
  ok(`workbench open with the hutch sidebar; the status bar names the remote "${env.REMOTE}"`);

  await row("rbox").waitFor();
  await row(/running/).waitFor();
  ok("the remote's box, made from the CLI with --remote, is in the sidebar, running");

  const sid = await hutch("run", "rbox", "--detach", "--label", "remote-session");
  await row("remote-session").waitFor();
  ok(`the remote's session ${sid} appears under its box`);

  await command("hutch: Show Log");
  await quickInput("remote-session");
  await logFrame().locator('.row[data-kind="session.created"]').waitFor();
  ok("the remote session's log opens and replays");

  const note = `from a remote cli ${Date.now()}`;
  const sent = Date.now();
  await hutch("session", "annotate", sid, note);
  await logFrame().locator(".row", { hasText: note }).waitFor({ timeout: 5000 });
  ok(`an annotation made on the remote appears in the live log ${Date.now() - sent} ms after the CLI started`);

  await command("hutch: Attach");
  await page.waitForFunction(
    () =>
      [...document.querySelectorAll(".terminal-wrapper .xterm-rows")].some((el) => /\$\s*$/m.test(el.textContent.replace(/\u00a0/g, " "))),
    null,
    { timeout: T },
  );
  ok("attach to the remote session shows the shell prompt");
  // Offload the workspace (a git repository with one unstaged change) to the remote, chosen in the picker.
  await command("hutch: Offload Workspace to Box…");
  await page.locator(".quick-input-widget .monaco-list-row", { hasText: env.REMOTE }).first().waitFor();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector(".quick-input-widget .quick-input-box input")?.value === "ws", null, {
    timeout: T,
  });
  await quickInput("roff");
  await quickInput("no agent");
  // Enter accepts the active row: wait until the confirm row is it (a press while the list is still being set up is not taken).
  await page.locator(".quick-input-widget .monaco-list-row.focused", { hasText: `to box roff` }).first().waitFor();
  if (!(await page.locator(".quick-input-widget .monaco-list-row", { hasText: `${env.REMOTE}:/workspace/ws` }).count()))
    throw new Error("the dry-run list does not name the remote as the target");
  await page.keyboard.press("Enter");
  const toasts = page.locator(".notifications-toasts .notification-list-item-message");
  await toasts
    .filter({ hasText: /offloaded 1 file .* to box roff:\/workspace\/ws/ })
    .first()
    .waitFor({ timeout: 120_000 });
  if (!(await hutch("box", "list", "--json")).includes('"roff"')) throw new Error("box roff is not on the remote");
  ok("offload to the remote chosen in the picker made box roff there");
  await hutch("exec", "roff", "-w", "/workspace/ws", "--", "sh", "-c", "echo remote-work > remote.txt");
  await command("hutch: Bring Back…");
  await toasts
    .filter({ hasText: /brought back from box roff: fast-forward/ })
    .first()
    .waitFor({ timeout: 120_000 });
  if (readFileSync(join(env.WS, "remote.txt"), "utf8") !== "remote-work\n") throw new Error("remote.txt did not come home");
  ok("bring back from the remote's box: fast-forward, the file is home");

  await page.screenshot({ path: env.SHOT });
  ok(`screenshot saved to ${env.SHOT}`);
});
