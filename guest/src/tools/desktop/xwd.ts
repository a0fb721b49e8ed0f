// X window dumps (what `xwd -root` writes) to PNG, in the guest, so a box
// needs no ImageMagick. Only what Xvfb produces is read: a ZPixmap of a
// TrueColor visual at 24 or 32 bits per pixel; anything else is refused
// rather than guessed at. Sizes come from the header and are checked against
// the bytes there are before a pixel is read.
import { deflateSync } from "node:zlib";

/** The most pixels converted (a 4K screen); a bigger header is refused. */
const MAX_PIXELS = 3840 * 2160;

export interface Image {
  width: number;
  height: number;
  /** RGB, row by row. */
  rgb: Uint8Array;
}

export function decodeXwd(buf: Uint8Array): Image {
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  if (buf.byteLength < 100) throw new Error("xwd: short header");
  const f = (i: number) => v.getUint32(i * 4, false);
  const headerSize = f(0);
  const [version, format, , width, height] = [f(1), f(2), f(3), f(4), f(5)];
  const byteOrder = f(7);
  const bpp = f(11);
  const bytesPerLine = f(12);
  const visualClass = f(13);
  const [redMask, greenMask, blueMask] = [f(14), f(15), f(16)];
  const ncolors = f(19);
  if (version !== 7 || format !== 2 || (visualClass !== 4 && visualClass !== 5))
    throw new Error(`xwd: not a TrueColor ZPixmap (version ${version}, format ${format}, class ${visualClass})`);
  if (bpp !== 32 && bpp !== 24) throw new Error(`xwd: ${bpp} bits per pixel`);
  if (width * height > MAX_PIXELS || width === 0 || height === 0) throw new Error(`xwd: ${width}x${height} is out of range`);
  const start = headerSize + ncolors * 12;
  if (bytesPerLine < (width * bpp) / 8 || start + bytesPerLine * height > buf.byteLength)
    throw new Error("xwd: pixel data is shorter than its header says");
  const shift = (mask: number) => 31 - Math.clz32(mask & -mask);
  const [rs, gs, bs] = [shift(redMask), shift(greenMask), shift(blueMask)];
  const step = bpp / 8;
  const rgb = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const row = start + y * bytesPerLine;
    for (let x = 0; x < width; x++) {
      const at = row + x * step;
      const px =
        step === 4
          ? v.getUint32(at, byteOrder === 0)
          : byteOrder === 0
            ? (buf[at] ?? 0) | ((buf[at + 1] ?? 0) << 8) | ((buf[at + 2] ?? 0) << 16)
            : ((buf[at] ?? 0) << 16) | ((buf[at + 1] ?? 0) << 8) | (buf[at + 2] ?? 0);
      const o = (y * width + x) * 3;
      rgb[o] = (px & redMask) >>> rs;
      rgb[o + 1] = (px & greenMask) >>> gs;
      rgb[o + 2] = (px & blueMask) >>> bs;
    }
  }
  return { width, height, rgb };
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const v = new DataView(out.buffer);
  v.setUint32(0, data.length);
  out.set(new TextEncoder().encode(type), 4);
  out.set(data, 8);
  v.setUint32(8 + data.length, Bun.hash.crc32(out.subarray(4, 8 + data.length)) >>> 0);
  return out;
}

export function encodePng(img: Image): Uint8Array {
  const ihdr = new Uint8Array(13);
  const hv = new DataView(ihdr.buffer);
  hv.setUint32(0, img.width);
  hv.setUint32(4, img.height);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const stride = img.width * 3;
  const raw = new Uint8Array((stride + 1) * img.height);
  for (let y = 0; y < img.height; y++) raw.set(img.rgb.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  const sig = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([sig, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw, { level: 6 })), chunk("IEND", new Uint8Array(0))]);
}
