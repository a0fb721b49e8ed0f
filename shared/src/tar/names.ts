// Entry names from an untrusted archive, checked before they touch a path join.
import { TarError } from "./error.ts";

/**
 * Splits an archive name into safe components: refuses absolute names, `..`,
 * NUL and names that are empty once `.` and repeated slashes are dropped.
 * Backslash stays an ordinary character, as it is on the POSIX hosts we run on.
 */
export function entryParts(name: string): string[] {
  const shown = JSON.stringify(name);
  if (name.includes("\0")) throw new TarError(`entry ${shown}: name contains NUL`);
  if (name.startsWith("/")) throw new TarError(`entry ${shown}: absolute names are not allowed`);
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw new TarError(`entry ${shown}: ".." components are not allowed`);
  if (parts.length === 0) throw new TarError(`entry ${shown}: empty name`);
  return parts;
}

/** A single path component we may create: the `topName` rename target. */
export function checkComponent(name: string, what: string): void {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
    throw new TarError(`${what} ${JSON.stringify(name)} must be a single path component`);
  }
}

/** Links may point anywhere (they are stored, never followed), but must be non-empty text. */
export function checkLinkTarget(entry: string, target: string): void {
  if (target === "") throw new TarError(`entry "${entry}": symlink with an empty target`);
  if (target.includes("\0")) throw new TarError(`entry "${entry}": symlink target contains NUL`);
}
