// What every VS Code drive script shares: Debian's Chromium through
// playwright-core on the code-server page, the hutch CLI with the drive's
// environment, step output ("ok <step> [s]"), and the workbench's command
// palette, notifications and views. Each drive script (drive*.mjs, run by a
// tests/e2e/vscode*.test.ts under Node 24) keeps only its own steps.
// env: PLAYWRIGHT_CORE, CHROMIUM, HUTCH (CLI binary), and the script's own.
import { createRequire } from "node:module";
import { execFile } from "node:child_process";
import { promisify } from "node:util";

export const env = process.env;
export const run = promisify(execFile);
const t0 = Date.now();

/** One step done, with the seconds since the script started. */
export const ok = (msg) => console.log(`ok ${msg} [${((Date.now() - t0) / 1000).toFixed(1)}s]`);
/** VS Code's labels hold non-breaking spaces. */
export const norm = (s) => (s || "").replace(/\u00a0/g, " ");

/** The hutch CLI as the drive's user; `prefix` goes before each call's arguments (e.g. `--remote NAME`). */
export const hutchCli =
  (prefix = []) =>
  async (...args) => {
    const { stdout } = await run(env.HUTCH, [...prefix, ...args], { env });
    return stdout.trim();
  };

/** A headless Chromium with one page of the given size; every wait on the page defaults to timeoutMs. */
export async function openPage({ timeoutMs, viewport = { width: 1400, height: 900 } }) {
  const { chromium } = createRequire(import.meta.url)(env.PLAYWRIGHT_CORE);
  const browser = await chromium.launch({
    executablePath: env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-dev-shm-usage",
    ],
  });
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.setDefaultTimeout(timeoutMs);
  return { browser, context, page };
}

/** The workbench's parts every drive uses. */
export function workbench(page) {
  const palette = async (text) => {
    const input = page.locator(".quick-input-widget .quick-input-box input");
    // A closing editor or overlay can take focus back and hide the palette just opened: try again.
    for (let attempt = 0; ; attempt++) {
      await page.keyboard.press("Escape");
      await page.waitForTimeout(200);
      await page.keyboard.press("F1");
      try {
        await input.waitFor({ state: "visible", timeout: 5000 });
        await input.fill(text, { timeout: 5000 });
        return input;
      } catch (e) {
        if (attempt === 2) throw e;
      }
    }
  };
  return {
    palette,
    /**
     * Opens the workspace folder and the hutch container in the activity bar. The first load of the
     * workbench and extension host is the slow part on a busy machine: its wait is `iconTimeoutMs`.
     */
    openHutch: async (iconTimeoutMs) => {
      await page.goto(`${env.BASE}/?folder=${encodeURIComponent(env.WS)}`, { waitUntil: "domcontentloaded" });
      await page.locator(".monaco-workbench").waitFor();
      const icon = page.locator(".activitybar .action-item").filter({ has: page.locator('a.action-label[aria-label^="hutch" i]') });
      await icon.waitFor({ timeout: iconTimeoutMs });
      if (!/\bchecked\b/.test((await icon.getAttribute("class")) || "")) await icon.locator("a.action-label").click();
    },
    /**
     * Types an answer into the open quick input and accepts it, then waits for
     * that prompt to go (the widget hides or shows another prompt), so the
     * next answer never lands in this one.
     */
    quickInput: async (text) => {
      const input = page.locator(".quick-input-widget .quick-input-box input");
      await input.waitFor({ state: "visible" });
      const prompt = await page.evaluate(() => {
        const w = document.querySelector(".quick-input-widget");
        return (
          ["title", "message"].map((c) => w?.querySelector(`.quick-input-${c}`)?.textContent ?? "").join("|") +
          `|${w?.querySelector(".quick-input-box input")?.getAttribute("placeholder") ?? ""}`
        );
      });
      await input.fill(text);
      await page.keyboard.press("Enter");
      await page
        .waitForFunction(
          (before) => {
            const w = document.querySelector(".quick-input-widget");
            if (!w || w.style.display === "none" || w.offsetParent === null) return true;
            const now =
              ["title", "message"].map((c) => w.querySelector(`.quick-input-${c}`)?.textContent ?? "").join("|") +
              `|${w.querySelector(".quick-input-box input")?.getAttribute("placeholder") ?? ""}`;
            return now !== before;
          },
          prompt,
          { timeout: 10_000 },
        )
        .catch(() => undefined);
    },
    /** Runs a command by its title from the palette. */
    command: async (title) => {
      await palette(`>${title}`);
      await page.locator(".quick-input-widget .monaco-list-row", { hasText: title }).first().waitFor();
      await page.keyboard.press("Enter");
    },
    notification: (re) => page.locator(".notifications-toasts .notification-list-item-message", { hasText: re }).first(),
    pane: (title) => page.locator(".pane", { has: page.locator(".pane-header", { hasText: title }) }),
    /** Hidden log views keep their webview (retainContextWhenHidden): the one on screen. */
    logFrame: () => page.frameLocator("iframe.webview.ready >> visible=true").frameLocator("#active-frame"),
  };
}

/** Runs a drive script's steps: "PASS" at the end, or "FAIL: why" with a screenshot beside SHOT; the browser closes either way. */
export async function drive(browser, page, steps) {
  try {
    await steps();
    console.log("PASS");
  } catch (e) {
    await page.screenshot({ path: env.SHOT.replace(/\.png$/, "-fail.png") }).catch(() => {});
    console.error(`FAIL: ${e.message}`);
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}
