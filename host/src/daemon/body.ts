// Request bodies, before any schema sees them: JSON objects only, bounded in
// size and in depth (API_LIMITS). The bounds are checked on the text, so a
// hostile body is refused without being parsed, and neither TypeBox nor
// Elysia's error formatting ever recurses through a deeply nested value.
import { API_LIMITS, HutchError, tooDeep } from "@hutch/shared";

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/i;
/** How much of a too-deep field's path a message shows. */
const PATH_SHOWN = 6;

const invalid = (message: string, hint: string) => new HutchError("invalid", message, hint);

/**
 * Reads and parses a request body; an empty body is an empty object (so a
 * missing required field is named). Throws HutchError("invalid") naming what
 * is wrong.
 */
export async function readJsonBody(request: Request, contentType: string): Promise<Record<string, unknown>> {
  if (contentType && !JSON_TYPE.test(contentType)) {
    throw invalid(`content-type: ${contentType} is not JSON`, "send the body as JSON with content-type: application/json");
  }
  const declared = Number(request.headers.get("content-length") ?? 0);
  if (declared > API_LIMITS.bodyBytes) throw tooLarge();
  const text = await request.text();
  if (text === "") return {};
  if (text.length > API_LIMITS.bodyBytes) throw tooLarge();
  return parseJsonBody(text);
}

/** A body's text as a JSON object, refused (naming the field) when deeper than API_LIMITS.depth. */
export function parseJsonBody(text: string): Record<string, unknown> {
  const deep = tooDeep(text, API_LIMITS.depth);
  if (deep !== null) {
    const parts = deep.split(".");
    const field = deep === "" ? "body" : parts.length > PATH_SHOWN ? `${parts.slice(0, PATH_SHOWN).join(".")}…` : deep;
    throw invalid(`${field}: nested deeper than ${API_LIMITS.depth} levels`, "send flatter JSON");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalid(`body: not valid JSON (${(err as Error).message})`, "send a JSON body");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalid(
      `body: expected a JSON object, got ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`,
      "send a JSON object",
    );
  }
  return value as Record<string, unknown>;
}

const tooLarge = () =>
  invalid(`body: larger than ${API_LIMITS.bodyBytes} bytes`, "send less per request (events can be appended in several batches)");
