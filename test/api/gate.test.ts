import { describe, expect, it } from 'vitest';
import { httpError, transportError } from '../../src/api/errors.js';
import { ServiceGate } from '../../src/api/gate.js';
import { RateGovernor } from '../../src/api/governor.js';
import { type RequestKind, retryBudget } from '../../src/api/policy.js';
import { ResultDecodeError } from '../../src/errors.js';
import { createRunLogger } from '../../src/util/logger.js';

const POST = { method: 'POST', path: '/v1/modules/change-style' };
const noBody = { code: null, message: null };

function gate(retry = { retries: 3, baseMs: 1, capMs: 2, pollAttempts: 4 }) {
  const lines: string[] = [];
  const logger = createRunLogger({ stream: { write: (l) => lines.push(l) }, level: 'info' });
  const governor = new RateGovernor({ initialRate: 1000 });
  return { gate: new ServiceGate(governor, logger, { retry }), governor, lines };
}

/** Runs a call whose attempts fail with `errors` in turn (then succeed), and counts the attempts. */
async function attempts(
  kind: RequestKind,
  errors: unknown[],
  extra: { beforeAttempt?: () => Promise<void> } = {},
) {
  const { gate: g, governor } = gate();
  let n = 0;
  const result = await g
    .call(
      kind,
      async () => {
        const error = errors[n++];
        if (error) throw error;
        return 'ok';
      },
      extra,
    )
    .catch((error: unknown) => error);
  governor.close(new Error('done'));
  return { result, attempts: n, stats: g.stats };
}

describe('the gate: one retry layer, decided by the kind of request', () => {
  const e500 = () => httpError(POST, 500, noBody, undefined);
  const e503 = () => httpError(POST, 503, noBody, undefined);

  it('a submission is resent only when no job can exist; --retry-ambiguous resends any transient failure', async () => {
    expect(await attempts('submit', [e503(), e503()])).toMatchObject({ result: 'ok', attempts: 3 });
    const unknown = await attempts('submit', [e500()]);
    expect(unknown.attempts).toBe(1);
    expect(unknown.result).toMatchObject({ status: 500 });
    expect(await attempts('submit-ambiguous', [e500(), e500()])).toMatchObject({ result: 'ok', attempts: 3 });
  });

  it('4xx other than 429 are never retried', async () => {
    for (const kind of ['submit', 'submit-ambiguous', 'poll', 'download', 'styles'] as RequestKind[]) {
      const { attempts: n } = await attempts(kind, [httpError(POST, 422, noBody, undefined)]);
      expect(n, kind).toBe(1);
    }
  });

  it('a download is retried on a result that does not decode; no other kind treats it as transient', async () => {
    expect(await attempts('download', [new ResultDecodeError('cut short')])).toMatchObject({
      result: 'ok',
      attempts: 2,
    });
    expect((await attempts('poll', [new ResultDecodeError('cut short')])).attempts).toBe(1);
  });

  it('budgets: retries (+1 attempts) for most kinds; pollAttempts for polls, with no time limit', async () => {
    const reset = () => transportError(POST, 'ECONNRESET', undefined, null);
    expect((await attempts('styles', Array.from({ length: 10 }, reset))).attempts).toBe(4);
    expect((await attempts('poll', Array.from({ length: 10 }, reset))).attempts).toBe(4);
    expect(retryBudget('poll', { pollAttempts: 10 })).toEqual({ retries: 9, maxRetryTime: Infinity });
    expect(retryBudget('submit', {})).toEqual({ retries: 6, maxRetryTime: 600_000 });
  });

  it('runs beforeAttempt before every attempt, before the rate slot is taken', async () => {
    const order: string[] = [];
    const { gate: g, governor } = gate();
    let n = 0;
    await g.call(
      'poll',
      async () => {
        order.push(`attempt ${++n}`);
        if (n < 3) throw transportError(POST, 'ECONNRESET', undefined, null);
      },
      { beforeAttempt: async () => void order.push('before') },
    );
    governor.close(new Error('done'));
    expect(order).toEqual(['before', 'attempt 1', 'before', 'attempt 2', 'before', 'attempt 3']);
    expect(g.stats).toMatchObject({ requests: 3, retries: 2, successes: 1 });
  });

  it('a 429 does not use up the budget and pauses every caller for its Retry-After', async () => {
    const e429 = () => httpError(POST, 429, noBody, 150);
    const started = performance.now();
    const { result, attempts: n, stats } = await attempts('submit', [e429(), e429(), e429(), e429(), e429()]);
    expect(result).toBe('ok');
    expect(n).toBe(6); // 5 × 429 with a budget of 3 retries
    expect(stats.rateLimited).toBe(5);
    expect(performance.now() - started).toBeGreaterThanOrEqual(5 * 150 - 20);
  });

  it('stops retrying once the soft stop aborts', async () => {
    const { gate: g, governor } = gate();
    const stop = new AbortController();
    let n = 0;
    const error = await g
      .call(
        'poll',
        async () => {
          n++;
          stop.abort(new Error('stop'));
          throw transportError(POST, 'ECONNRESET', undefined, null);
        },
        { signal: stop.signal },
      )
      .catch((e: unknown) => e);
    governor.close(new Error('done'));
    expect(n).toBe(1);
    expect(error).toMatchObject({ code: 'network_error' });
  });

  it('tells when the service has not answered at all (unreachable)', async () => {
    const { gate: g, governor } = gate();
    expect(g.unreachable).toBe(true); // nothing answered yet
    await g.call('styles', async () => 'ok');
    expect(g.unreachable).toBe(false);
    governor.close(new Error('done'));
  });
});
