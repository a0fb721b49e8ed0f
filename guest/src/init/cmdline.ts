// What the host tells a box on the kernel command line: hutch.box=<name>
// (the hostname) and hutch.id=<box id> (HUTCH_BOX_ID).
import { idPattern } from "@hutch/shared/wire";

export interface BootParams {
  /** Box name, valid as a hostname. */
  box?: string;
  /** Box id (shared's id pattern for `box`). */
  boxId?: string;
  /** Parameters present but refused, with the reason (for the log). */
  refused: string[];
}

const HOSTNAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const BOX_ID = new RegExp(idPattern("box"));

/** Splits like the kernel does: on whitespace, double quotes group. */
export function splitCmdline(text: string): string[] {
  const words: string[] = [];
  for (const m of text.matchAll(/(?:[^\s"]+|"[^"]*")+/g)) words.push(m[0].replaceAll('"', ""));
  return words;
}

export function parseCmdline(text: string): BootParams {
  const params: BootParams = { refused: [] };
  for (const word of splitCmdline(text)) {
    const eq = word.indexOf("=");
    if (eq < 0) continue;
    const key = word.slice(0, eq);
    const value = word.slice(eq + 1);
    if (key === "hutch.box") {
      if (HOSTNAME.test(value)) params.box = value;
      else params.refused.push(`hutch.box: ${JSON.stringify(value)} is not lower-case letters, digits and inner dashes (at most 63)`);
    } else if (key === "hutch.id") {
      if (BOX_ID.test(value)) params.boxId = value;
      else params.refused.push(`hutch.id: ${JSON.stringify(value)} does not match ${BOX_ID.source}`);
    }
  }
  return params;
}
