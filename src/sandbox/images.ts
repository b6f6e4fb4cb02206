/**
 * Result images of the sandbox: real, visibly styled and deterministic per (input, module, style),
 * so end-to-end tests can decode what they downloaded and tell two styles apart.
 */
import type { OverlayOptions, Sharp } from 'sharp';
import { FORMAT_CONTENT_TYPE, FORMAT_EXTENSION, sniffImage } from '../image/format.js';
import { loadSharp } from '../image/sharp.js';
import type { ModuleId } from '../types.js';
import type { BadResult } from './faults.js';

/** A rendered result held in memory. */
export interface RenderedImage {
  data: Buffer;
  ext: 'jpg' | 'png' | 'webp';
  contentType: 'image/jpeg' | 'image/png' | 'image/webp';
}

/**
 * How the sandbox makes results: styled renders; styled renders made once per upload and style and
 * kept (a repeated job costs no image work: a benchmark's warm-up renders them, its measured runs
 * get restyles as a real service returns them); or the upload itself (no image work at all).
 */
export type ResultMode = 'render' | 'render-once' | 'echo';

/**
 * The upload itself as the result: no sharp work at all, so a benchmark's emulator does not eat the
 * CPU of the client it measures. The format is the upload's (the create checked its magic bytes).
 */
export async function echoResult(input: Uint8Array): Promise<RenderedImage> {
  const format = sniffImage(input) ?? 'jpeg';
  return {
    data: Buffer.from(input),
    ext: FORMAT_EXTENSION[format],
    contentType: FORMAT_CONTENT_TYPE[format],
  };
}

/** Longest side of a result; the service answers with web-sized images. */
const MAX_SIDE = 1024;

type Matrix = [[number, number, number], [number, number, number], [number, number, number]];

/** How one look is made; each style differs in several dimensions so results are clearly apart. */
interface Look {
  brightness: number;
  saturation: number;
  hue: number;
  /** Contrast slope and offset (`linear(a, b)`). */
  contrast: [number, number];
  /** Colour cast. */
  recomb: Matrix;
  sharpen?: number;
  vignette?: boolean;
}

const IDENTITY: Matrix = [
  [1, 0, 0],
  [0, 1, 0],
  [0, 0, 1],
];

const LOOKS: Record<string, Look> = {
  // Airy and pale: lifted shadows, washed-out colour.
  scandinavian: { brightness: 1.15, saturation: 0.55, hue: 0, contrast: [0.85, 34], recomb: IDENTITY },
  // Steel grey, hard contrast.
  industrial: {
    brightness: 0.95,
    saturation: 0.15,
    hue: 0,
    contrast: [1.4, -45],
    recomb: [
      [0.9, 0.05, 0.05],
      [0.05, 0.9, 0.1],
      [0.05, 0.1, 1.0],
    ],
  },
  // Warm beige, muted.
  japandi: {
    brightness: 1.05,
    saturation: 0.6,
    hue: 0,
    contrast: [0.95, 10],
    recomb: [
      [1.05, 0.1, 0],
      [0.05, 0.95, 0.05],
      [0, 0.1, 0.8],
    ],
  },
  // Sepia-leaning vintage warmth.
  farmhouse: {
    brightness: 1.0,
    saturation: 0.9,
    hue: 0,
    contrast: [1.05, 0],
    recomb: [
      [0.6, 0.45, 0.1],
      [0.3, 0.6, 0.1],
      [0.2, 0.3, 0.4],
    ],
  },
  // Punchy and cool.
  modern: {
    brightness: 1.0,
    saturation: 1.5,
    hue: 200,
    contrast: [1.25, -25],
    recomb: IDENTITY,
  },
  // Sea-blue cast.
  coastal: {
    brightness: 1.08,
    saturation: 1.1,
    hue: 0,
    contrast: [1.0, 8],
    recomb: [
      [0.75, 0.05, 0.05],
      [0.05, 0.95, 0.15],
      [0.1, 0.2, 1.15],
    ],
  },
  // Terracotta warmth.
  mediterranean: {
    brightness: 1.02,
    saturation: 1.25,
    hue: 15,
    contrast: [1.1, -5],
    recomb: [
      [1.15, 0.1, 0],
      [0.05, 0.9, 0],
      [0, 0.05, 0.7],
    ],
  },
  // Near-white and flat.
  minimalist: { brightness: 1.3, saturation: 0.25, hue: 0, contrast: [0.7, 60], recomb: IDENTITY },
};

/** The configurator's "photoreal pass": sharper, warmer, richer, with a vignette. */
const PHOTOREAL: Look = {
  brightness: 1.03,
  saturation: 1.3,
  hue: 0,
  contrast: [1.1, -8],
  recomb: [
    [1.08, 0.02, 0],
    [0, 1.0, 0],
    [0, 0, 0.9],
  ],
  sharpen: 1.4,
  vignette: true,
};

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The small corner mark, so nobody mistakes a sandbox result for a real one. */
function markSvg(label: string, width: number, height: number): Buffer {
  const w = Math.min(width, 230);
  const h = Math.min(height, 26);
  return Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}">` +
      `<rect width="${w}" height="${h}" rx="4" fill="#000" fill-opacity="0.55"/>` +
      `<text x="8" y="${Math.round(h * 0.7)}" font-family="sans-serif" font-size="14" fill="#fff">` +
      `${escapeXml(label)}</text></svg>`,
  );
}

function vignetteSvg(width: number, height: number): Buffer {
  return Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">` +
      '<defs><radialGradient id="v" cx="50%" cy="50%" r="72%">' +
      '<stop offset="55%" stop-color="#000" stop-opacity="0"/>' +
      '<stop offset="100%" stop-color="#000" stop-opacity="0.6"/>' +
      '</radialGradient></defs>' +
      `<rect width="${width}" height="${height}" fill="url(#v)"/></svg>`,
  );
}

/**
 * Renders the result for one job. Throws when sharp cannot decode the input (a file that passed
 * the magic-byte check but is corrupt); the caller turns that into a failed job, as a real
 * service would.
 */
export async function renderResult(
  input: Uint8Array,
  module: ModuleId,
  style: string | null,
): Promise<RenderedImage> {
  const look = module === 'kitchen-configurator' ? PHOTOREAL : (LOOKS[style ?? ''] ?? PHOTOREAL);
  const sharp = await loadSharp();
  const base = await sharp(input)
    .rotate()
    .resize({ width: MAX_SIDE, height: MAX_SIDE, fit: 'inside', withoutEnlargement: true })
    .raw()
    .toBuffer({ resolveWithObject: true });
  const { width, height, channels } = base.info;
  const hasAlpha = channels === 4 || channels === 2;
  const overlays: OverlayOptions[] = [];
  if (look.vignette) overlays.push({ input: vignetteSvg(width, height), top: 0, left: 0 });
  const label = `sandbox · ${module === 'kitchen-configurator' ? 'photoreal' : (style ?? '')}`;
  overlays.push({ input: markSvg(label, width, height), gravity: 'southeast' });

  let pipeline = sharp(base.data, { raw: { width, height, channels } })
    .modulate({ brightness: look.brightness, saturation: look.saturation, hue: look.hue })
    .linear(look.contrast[0], look.contrast[1])
    .recomb(look.recomb)
    .composite(overlays);
  if (look.sharpen) pipeline = pipeline.sharpen({ sigma: look.sharpen });
  if (hasAlpha) {
    return { data: await pipeline.png().toBuffer(), ext: 'png', contentType: 'image/png' };
  }
  return {
    data: await pipeline.jpeg({ quality: 85, mozjpeg: false }).toBuffer(),
    ext: 'jpg',
    contentType: 'image/jpeg',
  };
}

/**
 * A bad result on purpose (issue 15's review is tested with these): the styled render turned,
 * mirrored or cropped to another aspect; a uniform grey image; another scene; or the upload itself.
 */
export async function badResult(
  kind: BadResult,
  input: Uint8Array,
  module: ModuleId,
  style: string | null,
  rng: () => number,
): Promise<RenderedImage> {
  const jpeg = async (image: Sharp): Promise<RenderedImage> => ({
    data: await image.jpeg({ quality: 85 }).toBuffer(),
    ext: 'jpg',
    contentType: 'image/jpeg',
  });
  if (kind === 'unchanged') return echoResult(input);
  const sharp = await loadSharp();
  const meta = await sharp(input).rotate().metadata();
  const swap = (meta.orientation ?? 1) >= 5;
  const scale = Math.min(1, MAX_SIDE / Math.max(meta.width ?? 1, meta.height ?? 1));
  const width = Math.max(16, Math.round(((swap ? meta.height : meta.width) ?? 640) * scale));
  const height = Math.max(16, Math.round(((swap ? meta.width : meta.height) ?? 480) * scale));
  if (kind === 'blank') {
    return jpeg(sharp({ create: { width, height, channels: 3, background: { r: 205, g: 200, b: 195 } } }));
  }
  if (kind === 'unrelated') {
    // Another scene: bands and discs at random places, nothing where the kitchen's edges were.
    const shapes: string[] = [];
    for (let i = 0; i < 14; i++) {
      const [x, y, r] = [rng() * width, rng() * height, 10 + rng() * Math.min(width, height) * 0.2];
      const fill = `hsl(${Math.floor(rng() * 360)},55%,${30 + Math.floor(rng() * 40)}%)`;
      shapes.push(
        i % 2
          ? `<circle cx="${x.toFixed(0)}" cy="${y.toFixed(0)}" r="${r.toFixed(0)}" fill="${fill}"/>`
          : `<rect x="0" y="${y.toFixed(0)}" width="${width}" height="${(r / 2).toFixed(0)}" fill="${fill}" transform="rotate(${Math.floor(rng() * 60 - 30)} ${width / 2} ${height / 2})"/>`,
      );
    }
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="#c9c2b8"/>${shapes.join('')}</svg>`;
    return jpeg(sharp(Buffer.from(svg)));
  }
  const styled = sharp((await renderResult(input, module, style)).data);
  if (kind === 'rotated') return jpeg(styled.rotate(90));
  if (kind === 'mirrored') return jpeg(styled.flop());
  // cropped: the middle of the image at another aspect (a landscape kept at its height, made square;
  // a square or portrait one halved in height).
  const info = await styled.clone().metadata();
  const [w, h] = [info.width ?? width, info.height ?? height];
  const region = w > h * 1.1 ? { width: h, height: h } : { width: w, height: Math.round(h / 2) };
  return jpeg(
    styled.extract({
      left: Math.floor((w - region.width) / 2),
      top: Math.floor((h - region.height) / 2),
      ...region,
    }),
  );
}
