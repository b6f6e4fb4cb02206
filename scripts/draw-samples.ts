/**
 * Draws the synthetic kitchens of `manifests/images/` (run: `npx tsx scripts/draw-samples.ts`).
 * They are SVG drawings rendered with sharp: real JPEG/PNG files small enough to commit, with
 * enough colour and structure that the sandbox's styles visibly change them.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

const W = 800;
const H = 600;

/** One kitchen's look and layout. */
interface Kitchen {
  name: string;
  format: 'jpeg' | 'png';
  wall: string;
  floor: string;
  floorTile: string;
  cabinet: string;
  handle: string;
  counter: string;
  /** Upper cabinets on the left and right of the window, or open shelves. */
  uppers: 'cabinets' | 'shelves' | 'none';
  /** Window position (x of its left edge) and width. */
  window: { x: number; width: number };
  fridge: 'left' | 'right' | 'none';
  island: boolean;
  pendants: number;
}

const KITCHENS: Kitchen[] = [
  {
    name: 'k1-white-shaker',
    format: 'jpeg',
    wall: '#efe9df',
    floor: '#b08a5a',
    floorTile: '#9c774a',
    cabinet: '#f7f7f4',
    handle: '#555',
    counter: '#3b3b3b',
    uppers: 'cabinets',
    window: { x: 320, width: 160 },
    fridge: 'right',
    island: false,
    pendants: 0,
  },
  {
    name: 'k2-navy-island',
    format: 'jpeg',
    wall: '#dfe6ea',
    floor: '#d6d1c8',
    floorTile: '#c4beb3',
    cabinet: '#263f5e',
    handle: '#c9a44c',
    counter: '#eeeeee',
    uppers: 'shelves',
    window: { x: 80, width: 200 },
    fridge: 'none',
    island: true,
    pendants: 3,
  },
  {
    name: 'k3-green-galley',
    format: 'jpeg',
    wall: '#f4efe4',
    floor: '#6f5238',
    floorTile: '#5e452f',
    cabinet: '#6d8a62',
    handle: '#222',
    counter: '#c9b79c',
    uppers: 'cabinets',
    window: { x: 520, width: 180 },
    fridge: 'left',
    island: false,
    pendants: 1,
  },
  {
    name: 'k4-wood-modern',
    format: 'jpeg',
    wall: '#e8e8e8',
    floor: '#9a9a9a',
    floorTile: '#8a8a8a',
    cabinet: '#a0683a',
    handle: '#111',
    counter: '#fafafa',
    uppers: 'none',
    window: { x: 250, width: 300 },
    fridge: 'right',
    island: true,
    pendants: 2,
  },
  {
    name: 'k5-red-retro',
    format: 'png',
    wall: '#fff6e6',
    floor: '#e9e2d0',
    floorTile: '#2d2d2d',
    cabinet: '#b83a32',
    handle: '#ddd',
    counter: '#f0f0f0',
    uppers: 'cabinets',
    window: { x: 360, width: 140 },
    fridge: 'left',
    island: false,
    pendants: 0,
  },
];

function floorSvg(k: Kitchen): string {
  const top = 430;
  let tiles = '';
  // Checker tiles in rough perspective: narrower rows towards the wall.
  for (let row = 0; row < 5; row++) {
    const y0 = top + row * row * 7 + row * 14;
    const y1 = top + (row + 1) * (row + 1) * 7 + (row + 1) * 14;
    for (let col = 0; col < 10; col++) {
      if ((row + col) % 2 === 0) continue;
      tiles += `<rect x="${col * 80}" y="${y0}" width="80" height="${y1 - y0}" fill="${k.floorTile}" opacity="0.6"/>`;
    }
  }
  return `<rect x="0" y="${top}" width="${W}" height="${H - top}" fill="${k.floor}"/>${tiles}`;
}

function windowSvg(k: Kitchen): string {
  const { x, width } = k.window;
  return (
    `<rect x="${x - 8}" y="72" width="${width + 16}" height="156" fill="#ffffff"/>` +
    `<rect x="${x}" y="80" width="${width}" height="140" fill="#9fd3f5"/>` +
    `<ellipse cx="${x + width * 0.3}" cy="110" rx="${width * 0.18}" ry="12" fill="#ffffff" opacity="0.8"/>` +
    `<rect x="${x}" y="170" width="${width}" height="50" fill="#7cb36b"/>` +
    `<rect x="${x + width / 2 - 3}" y="80" width="6" height="140" fill="#ffffff"/>`
  );
}

function baseCabinets(k: Kitchen, from: number, to: number): string {
  let s = `<rect x="${from}" y="300" width="${to - from}" height="130" fill="${k.cabinet}"/>`;
  const doors = Math.max(1, Math.round((to - from) / 90));
  const dw = (to - from) / doors;
  for (let i = 0; i < doors; i++) {
    const x = from + i * dw;
    s += `<rect x="${x + 6}" y="308" width="${dw - 12}" height="114" fill="none" stroke="#000" stroke-opacity="0.25" stroke-width="3"/>`;
    s += `<rect x="${x + dw / 2 - 12}" y="318" width="24" height="5" rx="2" fill="${k.handle}"/>`;
  }
  // Counter and plinth.
  s += `<rect x="${from - 6}" y="288" width="${to - from + 12}" height="14" fill="${k.counter}"/>`;
  s += `<rect x="${from}" y="422" width="${to - from}" height="8" fill="#000" opacity="0.3"/>`;
  return s;
}

function uppersSvg(k: Kitchen, from: number, to: number): string {
  const { x, width } = k.window;
  const spans: Array<[number, number]> = [
    [from, x - 30],
    [x + width + 30, to],
  ];
  let s = '';
  for (const [a, b] of spans) {
    if (b - a < 60) continue;
    if (k.uppers === 'cabinets') {
      s += `<rect x="${a}" y="60" width="${b - a}" height="140" fill="${k.cabinet}"/>`;
      const doors = Math.max(1, Math.round((b - a) / 90));
      const dw = (b - a) / doors;
      for (let i = 0; i < doors; i++) {
        s += `<rect x="${a + i * dw + 6}" y="68" width="${dw - 12}" height="124" fill="none" stroke="#000" stroke-opacity="0.25" stroke-width="3"/>`;
        s += `<rect x="${a + i * dw + dw / 2 - 3}" y="176" width="6" height="12" fill="${k.handle}"/>`;
      }
    } else if (k.uppers === 'shelves') {
      for (const y of [110, 180]) {
        s += `<rect x="${a}" y="${y}" width="${b - a}" height="8" fill="#8b6b47"/>`;
        for (let px = a + 14; px < b - 24; px += 46) {
          s += `<rect x="${px}" y="${y - 30}" width="22" height="30" rx="4" fill="#f2f2f2" stroke="#999"/>`;
        }
      }
    }
  }
  return s;
}

function kitchenSvg(k: Kitchen): string {
  const left = k.fridge === 'left' ? 130 : 0;
  const right = k.fridge === 'right' ? W - 130 : W;
  let fridge = '';
  if (k.fridge !== 'none') {
    const fx = k.fridge === 'left' ? 10 : W - 125;
    fridge =
      `<rect x="${fx}" y="60" width="115" height="370" rx="6" fill="#c7ccd1"/>` +
      `<rect x="${fx}" y="190" width="115" height="4" fill="#8d9399"/>` +
      `<rect x="${k.fridge === 'left' ? fx + 98 : fx + 10}" y="110" width="6" height="60" fill="#6b7075"/>` +
      `<rect x="${k.fridge === 'left' ? fx + 98 : fx + 10}" y="220" width="6" height="80" fill="#6b7075"/>`;
  }
  const sinkX = k.window.x + k.window.width / 2;
  const sink =
    `<rect x="${sinkX - 50}" y="286" width="100" height="6" fill="#9aa3ab"/>` +
    `<path d="M${sinkX} 286 v-40 h22 v10" stroke="#9aa3ab" stroke-width="6" fill="none"/>`;
  const island = k.island
    ? `<rect x="220" y="400" width="360" height="150" fill="${k.cabinet}"/>` +
      `<rect x="210" y="388" width="380" height="16" fill="${k.counter}"/>` +
      `<rect x="220" y="540" width="360" height="10" fill="#000" opacity="0.3"/>`
    : '';
  let pendants = '';
  for (let i = 0; i < k.pendants; i++) {
    const px = 260 + (i + 0.5) * (280 / k.pendants);
    pendants +=
      `<line x1="${px}" y1="0" x2="${px}" y2="120" stroke="#222" stroke-width="2"/>` +
      `<path d="M${px - 24} 150 L${px - 10} 120 L${px + 10} 120 L${px + 24} 150 Z" fill="#222"/>` +
      `<ellipse cx="${px}" cy="152" rx="16" ry="5" fill="#ffe9a8"/>`;
  }
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">` +
    `<rect width="${W}" height="${H}" fill="${k.wall}"/>` +
    `<rect x="0" y="200" width="${W}" height="88" fill="#ffffff" opacity="0.35"/>` +
    floorSvg(k) +
    windowSvg(k) +
    uppersSvg(k, left + 10, right - 10) +
    baseCabinets(k, left + 10, right - 10) +
    sink +
    fridge +
    island +
    pendants +
    '</svg>'
  );
}

async function main(): Promise<void> {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const outDir = path.join(root, 'manifests', 'images');
  await mkdir(outDir, { recursive: true });
  for (const k of KITCHENS) {
    // A touch of blur softens the vector edges, so the files look less like clip art.
    const image = sharp(Buffer.from(kitchenSvg(k))).blur(0.6);
    const data =
      k.format === 'png'
        ? await image.png({ compressionLevel: 9, palette: true, quality: 90 }).toBuffer()
        : await image.jpeg({ quality: 82, mozjpeg: true }).toBuffer();
    const file = path.join(outDir, `${k.name}.${k.format === 'png' ? 'png' : 'jpg'}`);
    await writeFile(file, data);
    process.stdout.write(`${path.relative(root, file)}  ${data.length} bytes\n`);
  }
}

await main();
