// Files Bun embeds as text (import … with { type: "text" }), so a compiled hutch carries them.
declare module "*/image/initramfs/init" {
  const text: string;
  export default text;
}
