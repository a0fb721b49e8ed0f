// Annotations anchored to a file and line become diagnostics on that file.
// Anchor paths name files in the box's workspace: relative, or under
// /workspace; the IDE's first workspace folder is that workspace.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { anchorInWorkspace, type Anchor, type AnchoredAnnotation } from "@hutch/shared";
import { terminalText } from "@hutch/shared/text";

/** Editors clamp a range to the line's length, so this spans the whole line. */
const LINE_END = 10_000;

/** The file URI an anchor names, or null when it points outside the workspace (shared's anchorInWorkspace decides). */
export function anchorUri(root: string | null, anchor: Anchor): string | null {
  const rel = anchorInWorkspace(root, anchor.path);
  return root !== null && rel !== null ? pathToFileURL(join(root, rel)).href : null;
}

export interface AnnotationDiagnostic {
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  severity: 3;
  source: "hutch";
  code: string;
  message: string;
}

/** The diagnostic for a session's anchored annotation, or null when it points outside the workspace. */
export function annotationDiagnostic(
  root: string | null,
  session: string,
  a: AnchoredAnnotation,
  sessionName: string,
): { uri: string; diagnostic: AnnotationDiagnostic } | null {
  const uri = anchorUri(root, a.anchor);
  if (!uri) return null;
  const line = (a.anchor.line ?? 1) - 1;
  return {
    uri,
    diagnostic: {
      range: { start: { line, character: 0 }, end: { line, character: LINE_END } },
      severity: 3,
      source: "hutch",
      code: `${session}#${a.seq}`,
      // Another user's words in the editor's Problems view and hovers: a bidi override there is Trojan Source.
      message: `${terminalText(a.text)} (${terminalText(`${a.actor.id}, ${sessionName}`, { oneLine: true })})`,
    },
  };
}
