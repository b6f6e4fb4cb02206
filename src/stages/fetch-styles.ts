import type { StageContext } from './context.js';
import { stylesFailure } from './outcomes.js';

/**
 * `GET /v1/styles` once, through the gate: the valid keys, or null when the service's answer is not
 * understood or it refuses the request (styles are then not checked, with a warning: the service
 * judges each one). A refused key or an unreachable service stops the run (docs/faults.md H.40).
 * @param onWarning told of the warning, after it is logged
 */
export async function fetchStyleKeys(
  ctx: Pick<StageContext, 'client' | 'gate' | 'logger' | 'stop' | 'abort'>,
  onWarning: (message: string) => void,
): Promise<ReadonlySet<string> | null> {
  const warn = (message: string) => {
    ctx.logger.warn({ event: 'warning' }, message);
    onWarning(message);
  };
  let styles: Awaited<ReturnType<StageContext['client']['listStyles']>>;
  try {
    styles = await ctx.gate.call('styles', () => ctx.client.listStyles({ signal: ctx.abort }), {
      signal: ctx.stop,
    });
  } catch (error) {
    const outcome = stylesFailure(error, ctx.client.baseUrl);
    if (outcome.kind === 'fatal') throw outcome.error;
    warn(outcome.message);
    return null;
  }
  if (styles === null) {
    warn(
      'the service answered GET /v1/styles in a shape this tool does not understand; styles are not checked before submitting',
    );
    return null;
  }
  return new Set(styles.map((s) => s.key));
}
