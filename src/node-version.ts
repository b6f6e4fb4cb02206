/**
 * The Node.js versions kitchen-batch runs on (`engines.node` in package.json). Checked by `bin.ts`
 * before anything else is loaded, so this module imports nothing and uses nothing that an older
 * Node cannot parse: on Node 20 the CLI must get far enough to say what it needs.
 */

/** The oldest supported Node.js, as `engines.node` says (`>=22.12.0`). */
export const MIN_NODE = { major: 22, minor: 12 } as const;

/** The supported Node.js versions in words, for messages and the README. */
export const SUPPORTED_NODE = 'Node.js 22.12 or later (the LTS lines 22, 24 and 26)';

/**
 * Why `version` (as in `process.versions.node`, e.g. `20.20.2`) cannot run kitchen-batch, or `null`
 * when it can. A version that cannot be read is let through: the engines check is a courtesy.
 */
export function unsupportedNode(version: string): string | null {
  const match = /^v?(\d+)\.(\d+)\./.exec(version);
  if (!match) return null;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  if (major > MIN_NODE.major || (major === MIN_NODE.major && minor >= MIN_NODE.minor)) return null;
  return `Node.js ${version} is not supported: kitchen-batch needs ${SUPPORTED_NODE}; see "Install" in the README for how to get one`;
}
