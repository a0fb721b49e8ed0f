// The user's layer of configuration: $HUTCH_HOME/config.json (HOME_FILES.config),
// validated whole against shared's HutchConfig. More than one service reads it
// (the broker its bindings and pins, the snapshot service what a snapshot
// takes), each at the moment it needs it, so an edit needs no daemon restart;
// none of them reaches into another's folder for it.
import { existsSync, readFileSync } from "node:fs";
import { HutchConfig, HutchError, check, firstError } from "@hutch/shared";

/** Reads config.json (absent is fine), refusing unknown keys and bad values by name. */
export function loadConfig(path: string): HutchConfig {
  if (!existsSync(path)) return {};
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new HutchError("config", `${path} is not valid JSON: ${(err as Error).message}`, `fix or remove it: ${path}`);
  }
  if (!check(HutchConfig, raw)) throw new HutchError("config", `${path}: ${firstError(HutchConfig, raw)}`, `fix it: ${path}`);
  return raw;
}
