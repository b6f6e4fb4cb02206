/**
 * Helpers shared by the engine and resume benchmarks: drawn kitchen images, temp folders, timing,
 * small statistics, sandbox request counts and a compact table printer.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { createRng } from '../src/sandbox/faults.js';
import type { SandboxRequestRecord } from '../src/sandbox/index.js';

/** A deterministic PRNG (the sandbox's mulberry32), so the same seed draws the same kitchen. */
export const rng = createRng;

function colour(random: () => number, lo: number, hi: number): string {
  const c = () => Math.round(lo + random() * (hi - lo));
  return `rgb(${c()},${c()},${c()})`;
}

/** An SVG kitchen: wall, floor, a window, wall and base cabinets with handles, worktop and an island. */
function kitchenSvg(width: number, height: number, seed: number): string {
  const random = rng(seed);
  const wall = colour(random, 170, 240);
  const floor = colour(random, 90, 170);
  const cabinet = colour(random, 30, 230);
  const worktop = colour(random, 40, 220);
  const handle = colour(random, 0, 80);
  const horizon = Math.round(height * (0.62 + random() * 0.08));
  const parts: string[] = [
    `<rect width="${width}" height="${horizon}" fill="${wall}"/>`,
    `<rect y="${horizon}" width="${width}" height="${height - horizon}" fill="${floor}"/>`,
  ];
  const winX = Math.round(width * (0.3 + random() * 0.3));
  parts.push(
    `<rect x="${winX}" y="${Math.round(height * 0.08)}" width="${Math.round(width * 0.18)}" height="${Math.round(height * 0.22)}" fill="rgb(200,225,250)" stroke="#fff" stroke-width="6"/>`,
  );
  const doors = 5 + Math.floor(random() * 4);
  const doorW = width / doors;
  for (let i = 0; i < doors; i++) {
    const x = Math.round(i * doorW) + 3;
    const w = Math.round(doorW) - 6;
    if (x + w < winX || x > winX + width * 0.18) {
      parts.push(
        `<rect x="${x}" y="${Math.round(height * 0.06)}" width="${w}" height="${Math.round(height * 0.24)}" fill="${cabinet}" stroke="${handle}" stroke-width="2"/>`,
      );
    }
    parts.push(
      `<rect x="${x}" y="${Math.round(horizon - height * 0.24)}" width="${w}" height="${Math.round(height * 0.24)}" fill="${cabinet}" stroke="${handle}" stroke-width="2"/>`,
      `<rect x="${x + w / 2 - 12}" y="${Math.round(horizon - height * 0.2)}" width="24" height="4" fill="${handle}"/>`,
    );
  }
  parts.push(
    `<rect y="${Math.round(horizon - height * 0.27)}" width="${width}" height="${Math.round(height * 0.03)}" fill="${worktop}"/>`,
    `<rect x="${Math.round(width * 0.25)}" y="${Math.round(horizon + height * 0.05)}" width="${Math.round(width * 0.5)}" height="${Math.round(height * 0.2)}" fill="${cabinet}"/>`,
    `<rect x="${Math.round(width * 0.23)}" y="${Math.round(horizon + height * 0.03)}" width="${Math.round(width * 0.54)}" height="${Math.round(height * 0.03)}" fill="${worktop}"/>`,
  );
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">${parts.join('')}</svg>`;
}

/** Options of {@link drawKitchen}. */
export interface KitchenImageOptions {
  /** @default 800 */
  width?: number;
  /** @default 600 */
  height?: number;
  /** Amplitude of the grain, 0..255: it is what brings a flat drawing to a photo's file size. @default 31 */
  grain?: number;
  /** JPEG quality. @default 85 */
  quality?: number;
}

/**
 * Draws a distinct kitchen as a JPEG: an SVG scene rasterised by sharp, with grain added so it
 * compresses like a photo (about 100 KB at the defaults).
 */
export async function drawKitchen(seed: number, options: KitchenImageOptions = {}): Promise<Buffer> {
  const width = options.width ?? 800;
  const height = options.height ?? 600;
  const grain = options.grain ?? 31;
  const { data, info } = await sharp(Buffer.from(kitchenSvg(width, height, seed)))
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const random = rng(seed ^ 0x9e3779b9);
  for (let i = 0; i < data.length; i++) {
    const v = (data[i] ?? 0) + (random() - 0.5) * grain;
    data[i] = Math.max(0, Math.min(255, v));
  }
  return sharp(data, { raw: { width: info.width, height: info.height, channels: info.channels } })
    .jpeg({ quality: options.quality ?? 85 })
    .toBuffer();
}

/** Writes `count` distinct kitchens as `<prefix><i>.jpg` into `dir`; resolves with their paths and mean size. */
export async function writeKitchens(
  dir: string,
  count: number,
  options: KitchenImageOptions & { prefix?: string; seed?: number } = {},
): Promise<{ files: string[]; meanBytes: number }> {
  const files: string[] = [];
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const data = await drawKitchen((options.seed ?? 1) * 100_003 + i, options);
    const file = path.join(dir, `${options.prefix ?? 'k'}${String(i).padStart(4, '0')}.jpg`);
    await writeFile(file, data);
    files.push(file);
    bytes += data.length;
  }
  return { files, meanBytes: count > 0 ? bytes / count : 0 };
}

/** A fresh folder under the OS temp folder, removed by the returned `cleanup`. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Seconds `task` took, with its result. */
export async function timed<T>(task: () => Promise<T>): Promise<{ seconds: number; value: T }> {
  const started = performance.now();
  const value = await task();
  return { seconds: (performance.now() - started) / 1000, value };
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

/** The `p`-quantile (0..1) by nearest rank. */
export function quantile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? Number.NaN;
}

/** Requests the sandbox saw, by kind. */
export interface RequestCounts {
  /** Every `/v1/*` request (the service's rate limit applies to these). */
  service: number;
  /** `POST /v1/modules/*`. */
  creates: number;
  /** `GET /v1/jobs/*`. */
  polls: number;
  /** `GET /v1/styles`. */
  styles: number;
  /** `/storage/*` (result downloads; not rate limited). */
  storage: number;
  /** 429 answers. */
  rateLimited: number;
}

/** Counts the sandbox's request records by kind. */
export function countRequests(records: readonly SandboxRequestRecord[]): RequestCounts {
  const c: RequestCounts = { service: 0, creates: 0, polls: 0, styles: 0, storage: 0, rateLimited: 0 };
  for (const r of records) {
    if (r.path.startsWith('/storage/')) {
      c.storage++;
      continue;
    }
    if (!r.path.startsWith('/v1/')) continue;
    c.service++;
    if (r.status === 429) c.rateLimited++;
    if (r.method === 'POST' && r.path.startsWith('/v1/modules/')) c.creates++;
    else if (r.method === 'GET' && r.path.startsWith('/v1/jobs/')) c.polls++;
    else if (r.path === '/v1/styles') c.styles++;
  }
  return c;
}

/** Prints rows under a header, each column padded to its widest cell (numbers right-aligned). */
export function printTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const numeric = header.map((_, i) =>
    rows.every((r) => /^[-+]?[\d.,]+(\s?[×%s])?$|^n\/a$/.test(r[i] ?? '')),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (numeric[i] && i > 0 ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  console.log(`  ${line(header)}`);
  console.log(`  ${widths.map((w) => '-'.repeat(w)).join('  ')}`);
  for (const row of rows) console.log(`  ${line(row)}`);
}

/** A number with `digits` decimals. */
export function fmt(value: number, digits = 1): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

/** `PASS`/`MISS` and the target, for a figure beside its target. */
export function verdict(ok: boolean): string {
  return ok ? 'PASS' : 'MISS';
}
