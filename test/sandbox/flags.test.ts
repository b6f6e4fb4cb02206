import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { SANDBOX_FLAGS, sandboxOptionsFromFlags } from '../../src/sandbox/index.js';

function parse(args: string[]) {
  return parseArgs({ args, options: SANDBOX_FLAGS, strict: true, allowPositionals: false }).values;
}

describe('sandbox flags', () => {
  it('turns flags into options and fault knobs', () => {
    const options = sandboxOptionsFromFlags(
      parse([
        '--port=8080',
        '--processing-ms=200',
        '--jitter-ms=0',
        '--rate-limit=2',
        '--burst=4',
        '--retry-after=date',
        '--error-rate=0.1',
        '--error-statuses=502,503',
        '--reset-rate=0.2',
        '--reset-when=mid-upload',
        '--result-fault=truncated',
        '--result-ttl-ms=1000',
        '--fail-create-with=403:forbidden',
        '--styles-shape=strings',
      ]),
      { KITCHEN_API_KEY: 'sk_env' },
    );
    expect(options).toEqual({
      port: 8080,
      apiKey: 'sk_env',
      processingMs: 200,
      jitterMs: 0,
      stylesShape: 'strings',
      faults: {
        rateLimit: { rps: 2, burst: 4 },
        retryAfter: 'date',
        errorRate: 0.1,
        errorStatuses: [502, 503],
        resetRate: 0.2,
        resetWhen: 'mid-upload',
        resultFault: 'truncated',
        resultTtlMs: 1000,
        failCreateWith: { status: 403, code: 'forbidden' },
      },
    });
    expect(sandboxOptionsFromFlags(parse(['--any-key']), { KITCHEN_API_KEY: 'k' }).apiKey).toBeNull();
    expect(sandboxOptionsFromFlags({})).toEqual({});
  });

  it('refuses bad values with a UsageError naming the flag and what was expected', () => {
    const cases: Array<[string[], RegExp]> = [
      [['--port=70000'], /--port: expected a port number 0\.\.65535, got "70000"/],
      [['--error-rate=2'], /--error-rate: expected a probability between 0 and 1, got "2"/],
      [['--processing-ms=-1'], /--processing-ms: expected a number of milliseconds >= 0/],
      [['--retry-after=later'], /--retry-after: expected one of seconds, date, none, garbage, got "later"/],
      [['--result-fault=boom'], /--result-fault: expected one of not-found/],
      [['--error-statuses=404'], /--error-statuses: expected comma-separated 5xx statuses/],
      [['--fail-create-with=forbidden'], /--fail-create-with: expected STATUS:CODE/],
      [['--burst=3'], /--burst: only makes sense with --rate-limit/],
      [['--styles-shape=xml'], /--styles-shape: expected one of/],
    ];
    for (const [args, message] of cases) {
      let thrown: unknown;
      try {
        sandboxOptionsFromFlags(parse(args));
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(UsageError);
      expect((thrown as Error).message).toMatch(message);
    }
  });
});
