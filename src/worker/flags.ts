/**
 * The worker mode's flags for naming the Redis and the queue of a run, declared here beside the
 * queues they name and listed in the commands' tables (commands/command-table.ts), which keeps the
 * table under its size limit. Loads nothing: the help must not pull in BullMQ.
 */

/** The Redis of a worker run, as `status` and `worker` take it. */
export const RUN_REDIS = {
  type: 'string',
  value: 'URL',
  help: 'the Redis of the run (or KITCHEN_REDIS_URL)',
} as const;

/** The queue of a worker run, as `enqueue` takes it. */
const QUEUE_FLAG = {
  type: 'string',
  value: 'NAME',
  help: 'the queue of the run: one run per queue, many on one Redis (letters, digits, . _ -; or KITCHEN_QUEUE)',
  shown: 'kitchen-batch',
} as const;

/**
 * `--queue NAME` of each worker-mode command (docs/contract.md#worker-mode): any number of runs on
 * one Redis, one queue each; the name is checked by `queueName` (worker/queue.ts).
 */
export const QUEUE_FLAGS = {
  enqueue: QUEUE_FLAG,
  worker: { ...QUEUE_FLAG, help: 'the queue to work on (or KITCHEN_QUEUE)' },
  report: { ...QUEUE_FLAG, help: 'with --redis: the queue of the run (or KITCHEN_QUEUE)' },
  // Without it, the queues the Redis holds: no default to show.
  status: {
    type: 'string',
    value: 'NAME',
    help: 'the queue to show (or KITCHEN_QUEUE); without it, the queues this Redis holds with their counts',
  },
} as const;
