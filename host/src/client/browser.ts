// The browser tools of a box, for the CLI and `hutch mcp`: each call is one
// tool stream through the daemon, its answer checked against the schema in
// shared. A call that names no tab uses the box's last opened one.
import {
  BrowserConsoleResult,
  BrowserNetworkResult,
  BrowserScreenshotResult,
  BrowserSnapshotWire,
  BrowserTabsResult,
  SNAPSHOT_MAX_BYTES,
  type BrowserSnapshotResult,
  BrowserWaitResult,
  HutchError,
  TabInfo,
  type BrowserAct,
  type BrowserScreenshot,
  type BrowserSnapshot,
  type BrowserWait,
  type Static,
  type TSchema,
} from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { callTool, callToolBytes } from "./tool.ts";

/** A PNG larger than this from a box is refused (a 1280×16,000 full page is ~10 MB). */
export const SCREENSHOT_MAX_BYTES = 64 * 1024 * 1024;

/** A tool's arguments as the CLI and `hutch mcp` pass them: its schema's, less the tool's name and the tab (given apart, or the last one). */
type Args<S extends TSchema> = Omit<Static<S>, "tool" | "tab">;

export class BoxBrowser {
  constructor(
    private readonly d: DaemonClient,
    readonly box: string,
  ) {}

  open(url?: string): Promise<TabInfo> {
    return callTool(this.d, this.box, { tool: "browser.open", ...(url ? { url } : {}) }, TabInfo);
  }

  tabs(): Promise<Static<typeof BrowserTabsResult>> {
    return callTool(this.d, this.box, { tool: "browser.tabs" }, BrowserTabsResult);
  }

  /** The tab named, or the last one opened; an error naming the next command when there is none. */
  async tab(tab?: string): Promise<string> {
    if (tab) return tab;
    const last = (await this.tabs()).at(-1);
    if (!last)
      throw new HutchError("not_found", `no browser tab is open in box ${this.box}`, `open one: hutch browser open ${this.box} URL`);
    return last.tab;
  }

  async navigate(url: string, tab?: string): Promise<TabInfo> {
    return callTool(this.d, this.box, { tool: "browser.navigate", tab: await this.tab(tab), url }, TabInfo);
  }

  async close(tab?: string): Promise<TabInfo> {
    return callTool(this.d, this.box, { tool: "browser.close", tab: await this.tab(tab) }, TabInfo);
  }

  async snapshot(opts: Args<typeof BrowserSnapshot> & { tab?: string } = {}): Promise<BrowserSnapshotResult> {
    const { tab, ...rest } = opts;
    const { value, bytes } = await callToolBytes(
      this.d,
      this.box,
      { tool: "browser.snapshot", tab: await this.tab(tab), ...rest },
      BrowserSnapshotWire,
      SNAPSHOT_MAX_BYTES + 65536,
    );
    if (bytes.length !== value.size)
      throw new HutchError("failed", `box ${this.box} announced ${value.size} bytes of snapshot and sent ${bytes.length}`);
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      throw new HutchError(
        "failed",
        `box ${this.box} sent a snapshot that is not UTF-8`,
        `the guest may be broken: hutch box info ${this.box}`,
      );
    }
    const { size: _size, ...rest2 } = value;
    return { ...rest2, text };
  }

  async act(args: Args<typeof BrowserAct>, tab?: string): Promise<TabInfo> {
    return callTool(this.d, this.box, { tool: "browser.act", tab: await this.tab(tab), ...args }, TabInfo);
  }

  async wait(args: Args<typeof BrowserWait>, tab?: string): Promise<Static<typeof BrowserWaitResult>> {
    return callTool(this.d, this.box, { tool: "browser.wait", tab: await this.tab(tab), ...args }, BrowserWaitResult);
  }

  async screenshot(args: Args<typeof BrowserScreenshot>, tab?: string): Promise<{ info: BrowserScreenshotResult; png: Uint8Array }> {
    const { value, bytes } = await callToolBytes(
      this.d,
      this.box,
      { tool: "browser.screenshot", tab: await this.tab(tab), ...args },
      BrowserScreenshotResult,
      SCREENSHOT_MAX_BYTES,
    );
    if (bytes.length !== value.size)
      throw new HutchError("failed", `box ${this.box} announced ${value.size} bytes of screenshot and sent ${bytes.length}`);
    return { info: value, png: bytes };
  }

  async console(tab?: string): Promise<Static<typeof BrowserConsoleResult>> {
    return callTool(this.d, this.box, { tool: "browser.console", tab: await this.tab(tab) }, BrowserConsoleResult);
  }

  async network(tab?: string): Promise<Static<typeof BrowserNetworkResult>> {
    return callTool(this.d, this.box, { tool: "browser.network", tab: await this.tab(tab) }, BrowserNetworkResult);
  }
}
