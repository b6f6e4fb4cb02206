/**
 * `run`'s monitoring flags, declared here beside the exports they drive and listed in `run`'s table
 * (commands/command-table.ts), which keeps the table under its size limit.
 */
import type { FlagTable } from '../util/flags.js';

/** `run`'s exports for monitoring (docs/contract.md#metrics): none of them can fail a run. */
export const METRICS_FLAGS = {
  'metrics-file': {
    type: 'string',
    value: 'PATH',
    help: "write the run's Prometheus metrics to PATH (text format, for node_exporter's textfile collector) every 60 s and at the end (or KITCHEN_METRICS_FILE)",
  },
  pushgateway: {
    type: 'string',
    value: 'URL',
    help: 'push the metrics to a Prometheus pushgateway (job="kitchen-batch") every 60 s and at the end (or KITCHEN_PUSHGATEWAY)',
  },
  'metrics-label': {
    type: 'string',
    value: 'NAME=VALUE',
    multiple: true,
    help: "add a label to the pushgateway's grouping key (repeatable)",
  },
  'ping-url': {
    type: 'string',
    value: 'URL',
    help: 'GET URL/start when the run starts and URL/<exit code> when it ends (healthchecks.io style; or KITCHEN_PING_URL)',
  },
} as const satisfies FlagTable;

/**
 * The metrics endpoint of `run` and `worker` (docs/contract.md#monitoring): `/metrics`, `/livez`,
 * `/readyz` on one port, for Prometheus and Kubernetes' probes.
 */
export const ENDPOINT_FLAGS = {
  'metrics-port': {
    type: 'string',
    value: 'PORT',
    help: 'serve /metrics, /livez and /readyz on PORT while working (0: a free port, printed; or KITCHEN_METRICS_PORT)',
  },
  'metrics-host': {
    type: 'string',
    value: 'HOST',
    help: 'the address --metrics-port listens on (or KITCHEN_METRICS_HOST)',
    shown: '127.0.0.1',
  },
} as const satisfies FlagTable;
