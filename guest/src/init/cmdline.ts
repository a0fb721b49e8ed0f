// What the host tells a box on the kernel command line: hutch.box=<name>
// (the hostname), hutch.id=<box id> (HUTCH_BOX_ID), and hutch.agents=<a,b,…>
// with hutch.agentdev=<pmem|blk>: the agent CLI disks attached, in device order.
import { idPattern } from "@hutch/shared/wire";

export interface BootParams {
  /** Box name, valid as a hostname. */
  box?: string;
  /** Box id (shared's id pattern for `box`). */
  boxId?: string;
  /** Agent CLI disks, in the order QEMU attached them (image/BOOT.md). */
  agents: string[];
  /** How they are attached: pmem1.. after the guest disk, or virtio-blk disks with serials agent0... */
  agentDev: "pmem" | "blk";
  /** Parameters present but refused, with the reason (for the log). */
  refused: string[];
}

/** An agent CLI's directory name as the cache names it (host/src/harness/install.ts): never a path. */
const AGENT = /^[a-z0-9]+-[0-9A-Za-z.+-]{1,64}$/;

const HOSTNAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const BOX_ID = new RegExp(idPattern("box"));

/** Splits like the kernel does: on whitespace, double quotes group. */
export function splitCmdline(text: string): string[] {
  const words: string[] = [];
  for (const m of text.matchAll(/(?:[^\s"]+|"[^"]*")+/g)) words.push(m[0].replaceAll('"', ""));
  return words;
}

export function parseCmdline(text: string): BootParams {
  const params: BootParams = { agents: [], agentDev: "blk", refused: [] };
  for (const word of splitCmdline(text)) {
    const eq = word.indexOf("=");
    if (eq < 0) continue;
    const key = word.slice(0, eq);
    const value = word.slice(eq + 1);
    if (key === "hutch.box") {
      if (HOSTNAME.test(value)) params.box = value;
      else params.refused.push(`hutch.box: ${JSON.stringify(value)} is not lowercase letters, digits and inner dashes (at most 63)`);
    } else if (key === "hutch.agents") {
      for (const name of value.split(",").filter(Boolean)) {
        if (AGENT.test(name) && !name.includes("..")) params.agents.push(name);
        else params.refused.push(`hutch.agents: ${JSON.stringify(name)} is not an agent CLI's name`);
      }
    } else if (key === "hutch.agentdev") {
      if (value === "pmem" || value === "blk") params.agentDev = value;
      else params.refused.push(`hutch.agentdev: ${JSON.stringify(value)} is neither pmem nor blk`);
    } else if (key === "hutch.id") {
      if (BOX_ID.test(value)) params.boxId = value;
      else params.refused.push(`hutch.id: ${JSON.stringify(value)} does not match ${BOX_ID.source}`);
    }
  }
  return params;
}
