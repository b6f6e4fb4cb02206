/** Test images made with sharp: kitchen-like scenes drawn in SVG, and noise. */
import sharp, { type Sharp } from 'sharp';

/**
 * How a kitchen is drawn:
 * - `classic`: one fixed kitchen (cream wall, brown floor, blue cabinets, grey counter, a window and
 *   a red block), so styles have colour and structure to change; the seed is ignored.
 * - `tinted`: a wall, a floor, a window and a counter in one hue picked by the seed.
 * - `mosaic`: coloured blocks and a lamp whose colours and positions all vary with the seed.
 */
export type KitchenLook = 'classic' | 'tinted' | 'mosaic';

/** Options of {@link kitchenImage}. */
export interface KitchenImageOptions {
  /** @default 'classic' */
  look?: KitchenLook;
  /** Picks the colours (and, for `mosaic`, the layout). @default 0 */
  seed?: number;
  /** @default 640 */
  width?: number;
  /** @default 480 */
  height?: number;
  /** @default 'jpeg' (quality 85, flattened onto white) */
  format?: 'jpeg' | 'png';
  /** A half-transparent wall (`classic` only): kept in a PNG, flattened onto white in a JPEG. */
  alpha?: boolean;
}

/** The SVG of a kitchen; see {@link KitchenLook}. */
function kitchenSvg(look: KitchenLook, n: number, width: number, height: number, alpha: boolean): string {
  let body: string;
  if (look === 'classic') {
    body =
      `<rect width="100%" height="100%" fill="${alpha ? 'rgba(240,230,210,0.6)' : '#f0e6d2'}"/>` +
      `<rect x="0" y="${height * 0.7}" width="${width}" height="${height * 0.3}" fill="#8b5a2b"/>` +
      `<rect x="${width * 0.05}" y="${height * 0.45}" width="${width * 0.9}" height="${height * 0.25}" fill="#2e6b8a"/>` +
      `<rect x="${width * 0.05}" y="${height * 0.42}" width="${width * 0.9}" height="${height * 0.04}" fill="#d9d9d9"/>` +
      `<rect x="${width * 0.35}" y="${height * 0.08}" width="${width * 0.3}" height="${height * 0.25}" fill="#a8d8ff"/>` +
      `<rect x="${width * 0.05}" y="${height * 0.05}" width="${width * 0.25}" height="${height * 0.3}" fill="#c0392b"/>`;
  } else if (look === 'tinted') {
    const hue = (n * 47) % 360;
    body =
      `<rect width="100%" height="100%" fill="hsl(${hue},30%,85%)"/>` +
      `<rect x="0" y="${height * 0.55}" width="${width}" height="${height * 0.45}" fill="hsl(${(hue + 30) % 360},35%,45%)"/>` +
      `<rect x="${width * 0.1}" y="${height * 0.1}" width="${width * 0.3}" height="${height * 0.3}" fill="#cde"/>` +
      `<rect x="${width * 0.5}" y="${height * 0.45}" width="${width * 0.4}" height="${height * 0.08}" fill="#333"/>`;
  } else {
    const hue = (k: number) =>
      `hsl(${(n * 47 + k * 83) % 360},${40 + ((n * 13) % 40)}%,${35 + ((n * 7 + k * 11) % 40)}%)`;
    body =
      `<rect width="100%" height="100%" fill="${hue(0)}"/>` +
      `<rect x="0" y="${height * 0.7}" width="${width}" height="${height * 0.3}" fill="${hue(1)}"/>` +
      `<rect x="${width * 0.05}" y="${height * (0.4 + (n % 5) * 0.02)}" width="${width * 0.9}" height="${height * 0.25}" fill="${hue(2)}"/>` +
      `<rect x="${width * ((n % 4) * 0.15 + 0.1)}" y="${height * 0.08}" width="${width * 0.3}" height="${height * 0.25}" fill="${hue(3)}"/>` +
      `<circle cx="${width * 0.8}" cy="${height * 0.2}" r="${10 + (n % 6) * 4}" fill="${hue(4)}"/>`;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">${body}</svg>`;
}

/** A synthetic kitchen photo as JPEG (default) or PNG bytes; see {@link KitchenImageOptions}. */
export async function kitchenImage(options: KitchenImageOptions = {}): Promise<Buffer> {
  const svg = kitchenSvg(
    options.look ?? 'classic',
    options.seed ?? 0,
    options.width ?? 640,
    options.height ?? 480,
    options.alpha ?? false,
  );
  const image = sharp(Buffer.from(svg));
  if (options.format === 'png') return image.png().toBuffer();
  return image.flatten({ background: '#ffffff' }).jpeg({ quality: 85 }).toBuffer();
}

/** A small kitchen JPEG, distinct per seed (`mosaic` unless another look is asked for). */
export function kitchenJpeg(
  seed: number,
  width = 320,
  height = 240,
  look: KitchenLook = 'mosaic',
): Promise<Buffer> {
  return kitchenImage({ look, seed, width, height });
}

/** Random pixels (a 2000×2000 RGB PNG is ~12 MB), the same on every call when `seed` is given. */
export function noise(
  width: number,
  height: number,
  options: { channels?: 3 | 4; seed?: number } = {},
): Sharp {
  const channels = options.channels ?? 3;
  const data = Buffer.alloc(width * height * channels);
  if (options.seed === undefined) {
    for (let i = 0; i < data.length; i++) data[i] = (Math.random() * 256) | 0;
  } else {
    let s = options.seed * 2_654_435_761;
    for (let i = 0; i < data.length; i++) {
      s = (s * 1_103_515_245 + 12_345) >>> 0;
      data[i] = s >>> 24;
    }
  }
  return sharp(data, { raw: { width, height, channels } });
}
