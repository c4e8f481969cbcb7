/**
 * The integration files `npm run test:moto` runs in single-endpoint mode (docs/single-endpoint.md):
 * those whose subject is what DynamoDB and SQS answer — the engine and its store, queue creation
 * and settings, the AWS Lambda entries over the AWS composition, SQS's
 * limits, a batch's sealed slot and its hand-over (the slot map's conditional writes) and the
 * message paths that finish in seconds — under two minutes on 2 cores, moto's start and stop
 * included, so `.ci/run` stays near 12 minutes with `npm test`.
 * Left out: the local Host as a child process (it starts its own stand-ins), the chaos schedules
 * and the fault-injection proofs (our middleware is their subject, not the service), and the
 * delivery and QueueConsumer files whose timers and message volumes take minutes each on moto.
 */
export const SINGLE_ENDPOINT_FILES: readonly string[] = [
  'test/integration/single-endpoint/backend-in-use.test.ts',
  'test/integration/single-endpoint/moto-gaps.test.ts',
  'test/integration/aws/aws-entries.test.ts',
  'test/integration/aws/aws-host-secrets.test.ts',
  'test/integration/aws/iam-recorded-calls.test.ts',
  'test/integration/aws/lambda-cut-off.test.ts',
  'test/integration/aws/queue-settings.test.ts',
  'test/integration/aws/synthesized-dispatcher.test.ts',
  'test/integration/aws/worker-scope.test.ts',
  'test/integration/host-api/auth.test.ts',
  'test/integration/host-api/executor.test.ts',
  'test/integration/host-api/generations.test.ts',
  'test/integration/host-api/hygiene.test.ts',
  'test/integration/host-api/idempotency.test.ts',
  'test/integration/host-api/lifecycle.test.ts',
  'test/integration/host-api/names.test.ts',
  'test/integration/host-api/problems.test.ts',
  'test/integration/host-api/recovery-partial.test.ts',
  'test/integration/forms/at-least-once-queue.test.ts',
  'test/integration/faults/strict-sqs-limits.test.ts',
  'test/integration/delivery/bodies.test.ts',
  'test/integration/delivery/env.test.ts',
  'test/integration/delivery/inherited-lanes.test.ts',
  'test/integration/delivery/producers.test.ts',
  'test/integration/delivery/recent-batches.test.ts',
  'test/integration/delivery/settle-many-store.test.ts',
  'test/integration/delivery/sealed-slots.test.ts',
  'test/integration/delivery/slot-map-store.test.ts',
];
