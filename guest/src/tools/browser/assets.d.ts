// Files Bun embeds as text (import … with { type: "text" }), so a compiled hutch-guest carries them.
declare module "*/in-page.js" {
  const source: string;
  export default source;
}
