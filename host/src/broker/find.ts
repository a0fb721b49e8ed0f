// Where stored secret values turn up in text that is leaving (a transcript
// written home): each value as it is and as base64 (standard and URL-safe,
// padded or not, as an Authorization header or a config file would carry
// it). Only positions and names are returned; a value never is, and never
// reaches a log.
import { SECRET_FIND_MIN, type SecretFound } from "@hutch/shared";

/** The spellings of a value looked for: itself and its base64 forms. */
export function secretForms(value: string): string[] {
  const b64 = Buffer.from(value, "utf8").toString("base64");
  const url = b64.replace(/\+/g, "-").replace(/\//g, "_");
  return [...new Set([value, b64, b64.replace(/=+$/, ""), url, url.replace(/=+$/, "")])].filter((f) => f.length >= SECRET_FIND_MIN);
}

/** Every occurrence of every secret's forms in every text; overlaps are the caller's to resolve. */
export function findSecrets(texts: string[], secrets: { name: string; value: string }[]): SecretFound[] {
  const forms = secrets
    .filter((s) => s.value.length >= SECRET_FIND_MIN)
    .flatMap((s) => secretForms(s.value).map((f) => ({ name: s.name, form: f })))
    .sort((a, b) => b.form.length - a.form.length);
  const found: SecretFound[] = [];
  texts.forEach((t, i) => {
    for (const { name, form } of forms)
      for (let at = t.indexOf(form); at >= 0; at = t.indexOf(form, at + 1)) found.push({ text: i, at, length: form.length, secret: name });
  });
  return found;
}
