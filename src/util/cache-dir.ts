/**
 * kitchen-batch's folder in the user's cache directory (`$XDG_CACHE_HOME`, else `~/.cache`): what a
 * run keeps between runs that can be deleted at any time (bucket outputs' working copies, the rates
 * `plan` estimates from).
 */
import os from 'node:os';
import path from 'node:path';

/** `$XDG_CACHE_HOME/kitchen-batch`, else `~/.cache/kitchen-batch`. */
export function kitchenCacheDir(env: Readonly<Record<string, string | undefined>>): string {
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'kitchen-batch');
}
