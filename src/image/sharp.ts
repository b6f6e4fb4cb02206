/**
 * sharp as this package's modules load it: the same module, with libvips' operation cache off when
 * the executable asked for that (image/sharp-cache.ts). libvips keeps recent operations (up to
 * 50 MB of pixels) in case the same image is processed again; a batch reads every image once, so
 * the cache only holds memory.
 */
import sharp from 'sharp';
import { onSharpLoaded } from './sharp-cache.js';

onSharpLoaded(() => sharp.cache(false));

export default sharp;
