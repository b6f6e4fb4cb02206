/**
 * "How to fix" hints shown under an item's error, keyed by error code. Codes a rerun resolves say
 * so; `status:<status>` keys are the fallback for codes not listed (e.g. a service's own codes).
 */
export const ERROR_HINTS: Readonly<Record<string, string>> = {
  // Rejections (contract): the manifest row or the image must change before a rerun helps.
  file_not_found:
    "Check the image path in the manifest: relative paths start at the manifest's folder, and globs must match at least one file.",
  unsupported_format: 'Convert the image to JPEG, PNG or WebP, then rerun.',
  corrupt_image: 'The file could not be decoded. Re-export or replace the image, then rerun.',
  too_large: "Resize or recompress the image to within the service's size limits, then rerun.",
  unknown_style: 'Use a style key listed by "kitchen-batch styles" (separate several with | in CSV).',
  invalid_configuration:
    'Give kitchen-configurator a configuration that is a JSON object the service accepts (in CSV: a JSON string).',
  invalid_item: 'Fix the manifest row: check the module name, the style and the fields that module needs.',
  source_forbidden:
    'The source refused to serve the image (401/403, AccessDenied). A pre-signed URL may have expired: sign it again. For S3, check the credentials and the bucket policy; no credentials are ever sent to an http(s) source.',
  source_blocked:
    'The address guard refused this source (a loopback, private, link-local or metadata address, a URL with user:password, or an https → http redirect). For an internal image server, run with --allow-private-sources.',
  // Incomplete: nothing to fix by hand; the rerun picks the item up.
  submit_unknown:
    'The service may or may not have accepted this job. Rerun the same command to continue; it submits the item again, and the report then counts it as a possible duplicate.',
  job_timeout:
    'Rerun the same command to continue: the accepted job is polled, not submitted again. Raise --job-timeout if jobs often take this long.',
  download_failed: 'Rerun the same command to continue: the result is downloaded again, not regenerated.',
  max_submissions:
    'Rerun the same command to continue (the --max-submissions cost guard stopped this run before this item).',
  interrupted: 'Rerun the same command to continue where the run stopped.',
  source_unavailable:
    'The source could not be read (timeouts, resets, 5xx or 429 after retries). Rerun the same command to continue: the source is fetched again.',
  'status:failed': 'The service ended this job as failed. Rerun with --retry-failed to submit it again.',
  'status:incomplete': 'Rerun the same command to continue.',
  'status:rejected': 'Fix the manifest row or the image, then rerun.',
};

/**
 * The hints of a worker run's report (`report --redis`): there the rerun is `enqueue` again and the
 * work is done by workers, so the advice says that instead of "rerun the same command".
 */
export const WORKER_HINTS: Readonly<Record<string, string>> = {
  ...ERROR_HINTS,
  submit_unknown:
    'The service may or may not have accepted this job. Enqueue the manifest again (kitchen-batch enqueue) and a worker submits it again; the report then counts it as a possible duplicate.',
  job_timeout:
    "Enqueue the manifest again (kitchen-batch enqueue): a worker polls the accepted job, it is not submitted again. Raise the workers' --job-timeout if jobs often take this long.",
  download_failed:
    'Enqueue the manifest again (kitchen-batch enqueue): a worker downloads the result again, it is not regenerated.',
  not_submitted: 'No worker has reached this item yet: start a worker (kitchen-batch worker --redis URL).',
  interrupted: 'A worker hands this item back to the queue; another worker goes on with it.',
  source_unavailable:
    'The source could not be read (timeouts, resets, 5xx or 429 after retries). Enqueue the manifest again (kitchen-batch enqueue) and a worker fetches it again.',
  'status:failed':
    'The service ended this job as failed. Enqueue the manifest again with --retry-failed (kitchen-batch enqueue <manifest> --retry-failed) and a worker submits it again.',
  'status:incomplete': 'Enqueue the manifest again (kitchen-batch enqueue) and run a worker to continue.',
  'status:rejected': 'Fix the manifest row or the image, then enqueue the manifest again.',
};
