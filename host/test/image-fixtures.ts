// Image fixtures the image tests share: a manifest vouching for given files,
// and a qcow2 header naming no other file, as qemu-img writes one.
import { MANIFEST_FORMAT, type Manifest } from "../src/image/manifest.ts";

export const sha = (s: string | Uint8Array) => new Bun.CryptoHasher("sha256").update(s).digest("hex");

export function manifestFor(name: string, files: Record<string, string | Uint8Array>): Manifest {
  const info = (f: string) => ({ bytes: Buffer.byteLength(files[f]!), sha256: sha(files[f]!) });
  return {
    format: MANIFEST_FORMAT,
    name,
    hutchVersion: "0.1.0",
    builtAt: "2025-01-01T00:00:00.000Z",
    buildSeconds: 90.5,
    recipeHash: "a".repeat(64),
    kernel: { package: "linux-image-6.1.0-57-amd64", version: "6.1.192-3", release: "6.1.0-57-amd64" },
    busybox: "busybox-static=1:1.35.0-4+deb12u1+b1",
    modules: ["virtio_ring.ko"],
    suite: "bookworm",
    mirror: "http://deb.debian.org/debian",
    packages: ["git=1:2.39.5-0+deb12u3"],
    root: { contentBytes: 1, virtualBytes: 2 },
    files: { vmlinuz: info("vmlinuz"), "initramfs.img": info("initramfs.img"), "root.qcow2": info("root.qcow2") },
  };
}

/** A qcow2 version 3 header naming no other file, as qemu-img writes one. */
export function qcow2Header(): Uint8Array {
  const b = new Uint8Array(112);
  const v = new DataView(b.buffer);
  v.setUint32(0, 0x514649fb);
  v.setUint32(4, 3);
  v.setUint32(20, 16); // cluster bits
  v.setUint32(100, 112); // header length
  return b;
}
