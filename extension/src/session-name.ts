// How the sidebar names a session: what it is about, not its id. The label
// when it has one, else its first prompt or command (the summary's first
// line); the agent and the age beside it; the id only in the tooltip (and
// Copy Id). Pure, so it is unit-tested; the tree escapes what it shows.

/** What a session row needs to be named (a SessionView has it all). */
export interface Nameable {
  id: string;
  agent: string;
  label?: string;
  first?: string;
  createdAt: string;
}

const TITLE_MAX = 60;

/** "just now", "5m ago", "3h ago", "2d ago", "5w ago": how old, at a glance. */
export function age(createdAt: string, now: number): string {
  const s = Math.max(0, Math.floor((now - Date.parse(createdAt)) / 1000));
  if (!Number.isFinite(s)) return "";
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  if (s < 14 * 86_400) return `${Math.floor(s / 86_400)}d ago`;
  return `${Math.floor(s / (7 * 86_400))}w ago`;
}

/** One line of at most TITLE_MAX characters. */
const line = (s: string) => {
  const t = s.replace(/\s+/g, " ").trim();
  return t.length > TITLE_MAX ? `${t.slice(0, TITLE_MAX - 1)}…` : t;
};

/** The row's title: label, else first prompt or command, else what it runs. */
export function sessionTitle(s: Nameable): string {
  if (s.label?.trim()) return line(s.label);
  if (s.first?.trim()) return line(s.first);
  return s.agent === "shell" ? "shell, nothing typed yet" : `${s.agent}, no prompt yet`;
}

/** The row's description: the agent (when the title does not say it) and the age. */
export function sessionDescription(s: Nameable, now: number): string {
  const parts = [...(s.label?.trim() || s.first?.trim() ? [s.agent] : []), age(s.createdAt, now)];
  return parts.filter(Boolean).join(" · ");
}
