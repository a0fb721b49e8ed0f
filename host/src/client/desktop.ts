// The desktop tools of a box, for the CLI and `hutch mcp`. Input is refused
// by the box while another actor holds it; the daemon names the caller.
import { DesktopInfo, DesktopInputResult, DesktopScreenshotResult, DesktopWindowsResult, HutchError, type Static } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { SCREENSHOT_MAX_BYTES } from "./browser.ts";
import { callTool, callToolBytes } from "./tool.ts";

export type DesktopInputArgs = {
  action: "move" | "click" | "drag" | "key" | "type";
  x?: number;
  y?: number;
  toX?: number;
  toY?: number;
  button?: number;
  keys?: string[];
  text?: string;
  steal?: boolean;
};

export class BoxDesktop {
  constructor(
    private readonly d: DaemonClient,
    readonly box: string,
  ) {}

  start(size: { width?: number; height?: number } = {}): Promise<DesktopInfo> {
    return callTool(this.d, this.box, { tool: "desktop.start", ...size }, DesktopInfo);
  }

  async screenshot(): Promise<{ info: Static<typeof DesktopScreenshotResult>; png: Uint8Array }> {
    const { value, bytes } = await callToolBytes(
      this.d,
      this.box,
      { tool: "desktop.screenshot" },
      DesktopScreenshotResult,
      SCREENSHOT_MAX_BYTES,
    );
    if (bytes.length !== value.size)
      throw new HutchError("failed", `box ${this.box} announced ${value.size} bytes of screenshot and sent ${bytes.length}`);
    return { info: value, png: bytes };
  }

  windows(): Promise<Static<typeof DesktopWindowsResult>> {
    return callTool(this.d, this.box, { tool: "desktop.windows" }, DesktopWindowsResult);
  }

  input(args: DesktopInputArgs): Promise<Static<typeof DesktopInputResult>> {
    return callTool(this.d, this.box, { tool: "desktop.input", ...args }, DesktopInputResult);
  }

  release(): Promise<Static<typeof DesktopInputResult>> {
    return callTool(this.d, this.box, { tool: "desktop.release" }, DesktopInputResult);
  }
}
