// Drives offload, bring back and ports in the hutch extension in a real VS
// Code (code-server) through Debian's Chromium with playwright-core, while
// the hutch CLI acts in the box. Run by tests/e2e/vscode-workspace.test.ts
// under Node 24; prints "ok <step>" per step and exits non-zero on the first
// failure.
// env: BASE (code-server URL), WS (the workspace folder, a git repository with
//      a staged and an unstaged change), HUTCH (CLI binary), HUTCH_HOME, SHOT,
//      PLAYWRIGHT_CORE, CHROMIUM
import { existsSync, readFileSync, appendFileSync } from "node:fs";
import { join } from "node:path";
import { drive, env, hutchCli, norm, ok, openPage, run, workbench } from "./rig.mjs";

const T = 60_000;
const BOX = "e2e-off";
const hutch = hutchCli();
const { browser, context, page } = await openPage({ timeoutMs: T, viewport: { width: 1400, height: 1000 } });
const { command, notification, pane, openHutch } = workbench(page);
const quickInput = page.locator(".quick-input-widget .quick-input-box input");
const quickRow = (text) => page.locator(".quick-input-widget .monaco-list-row", { hasText: text }).first();
const boxes = pane(/Boxes and sessions/i);
const workspaces = pane(/Offloaded workspaces/i);
const ports = pane(/^\s*Ports/i);
const row = (view, text) => view.locator('.monaco-list-row[role="treeitem"]', { hasText: text }).first();
const inline = (r, label) => r.locator(`.actions .action-label[aria-label^="${label}"]`);
const fetchText = (url) =>
  fetch(url).then(
    (r) => r.text(),
    () => undefined,
  );

await drive(browser, page, async () => {
  await openHutch(120_000);
  await workspaces.waitFor();
  await ports.waitFor();
  await workspaces.locator(".welcome-view-content", { hasText: "Nothing offloaded" }).waitFor();
  ok("workbench open with the offloaded-workspaces and ports views");

  await command("hutch: Offload Workspace to Box…");
  // The dry run names the default box (the folder's name) in the box prompt.
  await page.waitForFunction(() => document.querySelector(".quick-input-widget .quick-input-box input")?.value === "ws", null, {
    timeout: T,
  });
  await quickInput.fill(BOX);
  await page.keyboard.press("Enter");
  // The shell agent: started in the box after the offload (an agent CLI would first ask for a hand-over note).
  await quickRow("no agent").waitFor();
  await quickInput.fill("shell");
  await quickRow(/^\s*shell/).waitFor();
  await page.keyboard.press("Enter");
  await quickRow(`Offload 2 files`).waitFor();
  const list = norm(await page.locator(".quick-input-widget .monaco-list").first().textContent());
  for (const want of ["goes (2)", "notes.txt", "src/main.ts", "held back (1)", ".env", "default deny list"]) {
    if (!list.includes(want)) throw new Error(`the dry-run list lacks "${want}": ${list}`);
  }
  if ((await hutch("box", "list", "--json")).includes(BOX)) throw new Error("the dry run made the box before the offload was confirmed");
  ok("the dry-run list shows what goes (notes.txt, src/main.ts) and what is held back (.env) before anything is sent");
  // Enter on a file row does nothing; the confirm row (first) offloads, once it is the active row.
  await page.locator(".quick-input-widget .monaco-list-row.focused", { hasText: "Offload 2 files" }).first().waitFor();
  await page.keyboard.press("Enter");
  await notification(new RegExp(`hutch: offloading to box ${BOX}`)).waitFor();
  await notification(new RegExp(`offloaded 2 files .* to box ${BOX}:/workspace/ws; shell runs in session ses_`)).waitFor({
    timeout: 180_000,
  });
  await row(workspaces, BOX).waitFor();
  await workspaces.locator('.monaco-list-row[role="treeitem"]', { hasText: "offloaded · main" }).first().waitFor();
  ok("offload ran with progress and the box shows in the sidebar as offloaded");
  await row(boxes, "offload main").waitFor();
  ok("the chosen agent (shell) runs in a session in the box, under it in the sidebar");

  const status = await hutch("exec", BOX, "-w", "/workspace/ws", "--", "git", "status", "--porcelain");
  if (!/^A {2}notes\.txt$/m.test(status) || !/^ M src\/main\.ts$/m.test(status) || /\.env/.test(status))
    throw new Error(`the box's git status is not the local split: ${status}`);
  ok(`the box holds the staged and unstaged split without .env: ${status.replace(/\n/g, ", ")}`);

  await hutch("exec", BOX, "-w", "/workspace/ws", "--", "sh", "-c", "echo from-the-box >> src/main.ts && echo box-file > box.txt");
  await command("hutch: Bring Back…");
  await notification(new RegExp(`brought back from box ${BOX}: fast-forward`)).waitFor({ timeout: 180_000 });
  const main = readFileSync(join(env.WS, "src/main.ts"), "utf8");
  if (!main.trimEnd().endsWith("from-the-box") || readFileSync(join(env.WS, "box.txt"), "utf8") !== "box-file\n")
    throw new Error(
      `the box's work did not come home: src/main.ts ends ${JSON.stringify(main.slice(-40))}, box.txt ${existsSync(join(env.WS, "box.txt"))}`,
    );
  await page
    .locator(".tab", { hasText: `brought back from ${BOX}` })
    .first()
    .waitFor();
  const diff = page.locator(".multiDiffEditor, .monaco-diff-editor").first();
  await diff.waitFor();
  await page.waitForFunction(
    () => [...document.querySelectorAll(".multiDiffEditor, .monaco-diff-editor")].some((e) => e.textContent.includes("from-the-box")),
    null,
    {
      timeout: T,
    },
  );
  await workspaces.locator('.monaco-list-row[role="treeitem"]', { hasText: "brought back" }).first().waitFor();
  ok("bring back says fast-forward, the files came home, a diff view shows what came back, and the sidebar says brought back");

  // Both sides change the same file: the box's work is kept apart on a branch, named with the commands to merge it.
  await hutch("exec", BOX, "-w", "/workspace/ws", "--", "sh", "-c", "echo box-again >> src/main.ts");
  appendFileSync(join(env.WS, "src/main.ts"), "mine-too\n");
  await command("hutch: Bring Back…");
  const branchMsg = notification(new RegExp(`brought back from box ${BOX}: kept apart on a branch.*Branch hutch/${BOX}.*git`));
  await branchMsg.waitFor({ timeout: 180_000 });
  if (readFileSync(join(env.WS, "src/main.ts"), "utf8").includes("box-again")) throw new Error("the branch case wrote into the work tree");
  const branches = (await run("git", ["branch", "--list", `hutch/${BOX}`], { cwd: env.WS })).stdout;
  if (!branches.includes(`hutch/${BOX}`)) throw new Error(`no branch hutch/${BOX}: ${branches}`);
  ok(`an overlapping change is kept on branch hutch/${BOX}, named in the message with the commands; the work tree is untouched`);

  // Collapsed by default (it polls the boxes while visible): opened as a user would.
  const portsHeader = ports.locator(".pane-header").first();
  if ((await portsHeader.getAttribute("aria-expanded")) !== "true") await portsHeader.click();
  const serve = `cd /workspace/ws && (setsid python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &)`;
  await hutch("exec", BOX, "--", "sh", "-c", serve);
  const portRow = row(ports, "8765");
  await portRow.waitFor({ timeout: T });
  await ports
    .locator('.monaco-list-row[role="treeitem"]', { hasText: new RegExp(`${BOX} · 127\\.0\\.0\\.1 · python3 \\(\\d+\\) · not forwarded`) })
    .first()
    .waitFor();
  ok("the box's http.server shows in the Ports view with its process (python3), not forwarded");

  await portRow.hover();
  await inline(portRow, "Forward Port").click();
  const forwarded = ports.locator('.monaco-list-row[role="treeitem"]', { hasText: /→ 127\.0\.0\.1:\d+/ }).first();
  await forwarded.waitFor();
  const local = Number(/→ 127\.0\.0\.1:(\d+)/.exec(norm(await forwarded.textContent()))[1]);
  const body = await fetchText(`http://127.0.0.1:${local}/box.txt`);
  if (body !== "box-file\n") throw new Error(`fetching through 127.0.0.1:${local} gave ${JSON.stringify(body)}`);
  ok(`Forward Port: 127.0.0.1:${local} reaches the box's server (box.txt fetched)`);

  const popup = context.waitForEvent("page", { timeout: 15_000 }).catch(() => null);
  await forwarded.hover();
  await inline(forwarded, "Open in Browser").click();
  const opened = await popup;
  if (!opened) throw new Error("Open in Browser opened no page");
  await opened.waitForURL(/./, { timeout: 15_000 }).catch(() => undefined);
  if (!new RegExp(`:${local}|/proxy/${local}`).test(opened.url())) throw new Error(`Open in Browser opened ${opened.url()}`);
  ok(`Open in Browser opens ${opened.url()}`);
  await opened.close();

  await page.screenshot({ path: env.SHOT });
  await forwarded.hover();
  await inline(forwarded, "Stop Forwarding").click();
  await ports.locator('.monaco-list-row[role="treeitem"]', { hasText: "not forwarded" }).first().waitFor();
  for (let i = 0; (await fetchText(`http://127.0.0.1:${local}/box.txt`)) !== undefined; i++) {
    if (i > 50) throw new Error(`127.0.0.1:${local} still answers after Stop Forwarding`);
    await page.waitForTimeout(100);
  }
  ok("Stop Forwarding closes the local port");

  await run(env.HUTCH, ["offload", "--box", "cli-off"], { env, cwd: env.WS });
  await workspaces
    .locator('.monaco-list-row[role="treeitem"]', { hasText: /cli-off\s*offloaded/ })
    .first()
    .waitFor();
  ok("an offload made from the CLI shows in the sidebar by itself");
});
