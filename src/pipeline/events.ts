import type { ItemStatus } from '../types.js';

/** Where items stand in the flow, for the progress display. */
export interface FlowCounts {
  /** Waiting for preflight or a job slot. */
  pending: number;
  /** Submitted (or being submitted), not yet ended. */
  running: number;
  /** Ended at the service, result being fetched. */
  downloading: number;
  /** Finished by an earlier run. */
  skipped: number;
}

/** Counts by where items stand, for progress displays. */
export interface ProgressCounts {
  total: number;
  /** Waiting for preflight or a job slot. */
  pending: number;
  /** Submitted, not yet ended. */
  running: number;
  /** Ended at the service, result being fetched. */
  downloading: number;
  succeeded: number;
  failed: number;
  rejected: number;
  incomplete: number;
  /** Items skipped because an earlier run finished them. */
  skipped: number;
  requests: number;
  rateLimited: number;
  retries: number;
  /** Current request rate the governor allows, per second. */
  rate: number;
  elapsedMs: number;
}

/** What a run reports while it goes, to the CLI's progress display or an embedding program. */
export type RunEvent =
  | { type: 'start'; outDir: string; items: number; resumed: boolean }
  | {
      type: 'item';
      id: string;
      status: ItemStatus | 'submitted' | 'skipped';
      jobId?: string;
      error?: { code: string; message: string };
    }
  | { type: 'progress'; counts: ProgressCounts }
  | { type: 'warning'; message: string }
  | { type: 'rate'; rate: number; pauseMs?: number }
  /** One attempt's answer from the service: for metrics (`submit` includes resent submissions). */
  | {
      type: 'request';
      endpoint: 'styles' | 'submit' | 'poll' | 'download';
      status: '2xx' | '4xx' | '5xx' | 'network';
    };
