// Text for people: untrusted text made safe for a terminal (terminal.ts), and
// counts that agree with their nouns (count.ts).
export * from "./terminal.ts";
export * from "./count.ts";
