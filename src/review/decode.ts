/**
 * Small JPEGs, decoded for the review in this process by libjpeg compiled to WebAssembly (MozJPEG's
 * decoder, packaged by `@jsquash/jpeg`), not by sharp. On a small image sharp's fixed cost per call
 * is most of its cost: a 240×180 JPEG decoded and shrunk to the review's rendition measured 1.8 to
 * 2.3 ms of CPU, against 0.4 ms to decode it here (and about 0.35 ms more to shrink it in JavaScript).
 * A large image is not decoded here: without libjpeg's shrink on load (which sharp uses) its whole
 * decode costs more than sharp's call, and its pixels would stay in the WebAssembly memory, which
 * never shrinks.
 *
 * Only what this decoder reads exactly as sharp would is decoded here: 8-bit Huffman-coded
 * (baseline or progressive) JPEGs of one or three components, no embedded ICC profile (sharp
 * converts those to sRGB), up to {@link SMALL_PIXELS} pixels. Its EXIF orientation is applied, as
 * sharp's `autoOrient`. Anything else, or anything libjpeg warns about (a truncated file, corrupt
 * data) or fails on, is left to sharp (`decodeSmallJpeg` returns null), whose verdict (pixels or
 * an error) stands.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import factory from '@jsquash/jpeg/codec/dec/mozjpeg_dec.js';
import { jpegFrame } from '../image/format.js';

/**
 * Largest image (width × height) decoded here. CPU per signature (decode, rendition, measures),
 * measured here against sharp's decode and shrink: 240×180 1.0 ms against 2.2, 320×240 1.3
 * against 2.2, 400×300 (this limit) 2.0 against 2.5; beyond it sharp's shrink on load wins.
 */
export const SMALL_PIXELS = 120_000;

/** Decoded pixels: 8-bit RGBA, upright. */
export interface Pixels {
  data: Uint8Array;
  width: number;
  height: number;
  channels: 4;
}

/** What the decoder returns (an `ImageData`, which the module defines in Node.js). */
interface Decoded {
  data: Uint8ClampedArray;
  width: number;
  height: number;
}

/** The decoder: its `decode(bytes, applyOrientation)` returns null or throws when libjpeg fails. */
interface Decoder {
  decode(bytes: Uint8Array, applyOrientation: boolean): Decoded | null;
}

let wasm: Promise<Buffer> | undefined;
/** The decoder's instance; a new one after a failure (libjpeg's exit leaves memory behind). */
let decoder: Promise<Decoder> | undefined;
/** libjpeg printed a message (a warning: corrupt or truncated data) during the current decode. */
let warned = false;

function instance(): Promise<Decoder> {
  wasm ??= readFile(createRequire(import.meta.url).resolve('@jsquash/jpeg/codec/dec/mozjpeg_dec.wasm'));
  decoder ??= wasm.then(
    (wasmBinary) =>
      factory({
        noInitialRun: true,
        wasmBinary,
        print: () => {},
        printErr: () => {
          warned = true;
        },
      } as Parameters<typeof factory>[0]) as unknown as Promise<Decoder>,
  );
  return decoder;
}

/**
 * The JPEG's pixels, if it is one this decoder reads as sharp would (see the module comment);
 * null leaves it to sharp.
 */
export async function decodeSmallJpeg(bytes: Uint8Array): Promise<Pixels | null> {
  const header = jpegHeader(bytes);
  if (!header || header.width * header.height > SMALL_PIXELS) return null;
  const module = await instance();
  warned = false;
  let image: Decoded | null;
  try {
    // `true`: apply the EXIF orientation (the decoder's flag is named the other way round).
    image = module.decode(bytes, true);
  } catch {
    // libjpeg gave up (exit() under Emscripten): start a fresh instance for the next image.
    decoder = undefined;
    return null;
  }
  if (!image || warned) return null;
  return {
    data: new Uint8Array(image.data.buffer, image.data.byteOffset, image.data.byteLength),
    width: image.width,
    height: image.height,
    channels: 4,
  };
}

/** What {@link jpegHeader} reads from a JPEG's markers up to its frame header. */
interface JpegHeader {
  width: number;
  height: number;
}

/**
 * The frame's size if the bytes are a JPEG this decoder reads as sharp would: SOF0, SOF1 or SOF2
 * (Huffman, sequential or progressive) at 8 bits, one or three components, no ICC profile before
 * it; null otherwise (not a JPEG, another coding, a malformed marker).
 */
export function jpegHeader(bytes: Uint8Array): JpegHeader | null {
  const frame = jpegFrame(bytes);
  if (!frame || frame.sof > 2 || frame.precision !== 8 || frame.iccProfile) return null;
  if ((frame.components !== 1 && frame.components !== 3) || frame.width === 0 || frame.height === 0)
    return null;
  return { width: frame.width, height: frame.height };
}
