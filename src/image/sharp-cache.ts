/**
 * Whether libvips keeps its operation cache in this process. The executable turns it off
 * (launch.ts); a library caller's process keeps its own setting. Apart from image/sharp.ts so that
 * launch.ts can ask for it without loading sharp: a command that decodes no image
 * (`report --no-html`, `status`) never loads libvips.
 */
let keep = true;
let turnOff: (() => void) | undefined;

/** Turns libvips' cache off: now if sharp is loaded, else when image/sharp.ts loads it. */
export function dropSharpCache(): void {
  keep = false;
  turnOff?.();
}

/** Called once by image/sharp.ts with what turns the cache off; applies it at once if asked for. */
export function onSharpLoaded(off: () => void): void {
  turnOff = off;
  if (!keep) off();
}
