/**
 * sharp as this package's modules load it: once, when the first image is decoded, with libvips'
 * operation cache off when the executable asked for that (image/sharp-cache.ts). libvips keeps
 * recent operations (up to 50 MB of pixels) in case the same image is processed again; a batch
 * reads every image once, so the cache only holds memory.
 *
 * Loaded on first use, not on import: libvips costs a process about 20 MB of RSS (measured on
 * Node 26: 43 MB for a bare process, 63 MB once sharp is required), which a command that decodes
 * nothing does not pay (the rerun of a finished run, `report --no-html`, `status`).
 */
import type Sharp from 'sharp';
import { onSharpLoaded } from './sharp-cache.js';

/** sharp's default export. */
export type SharpModule = typeof Sharp;

let loading: Promise<SharpModule> | undefined;

/** sharp, loaded on the first call (every later call gets the same module). */
export function loadSharp(): Promise<SharpModule> {
  loading ??= import('sharp').then(({ default: sharp }) => {
    onSharpLoaded(() => sharp.cache(false));
    return sharp;
  });
  return loading;
}
