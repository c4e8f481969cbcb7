/**
 * An integration test in the CDK's own form (@aws-cdk/integ-tests-alpha), for a team with an AWS
 * account to run before production with `npm run integ` (integ-runner deploys, asserts, destroys).
 * It deploys a Host and two workers, applies two queues pairs and their consumers through the Host
 * API, sends a message to each, and asserts that the echo worker received its message (its log)
 * and that the failing worker's message was moved to the dead-letter queue with the Host's record
 * of the move (a peek). `npm test` synthesizes it (test/infra/integ-apps.test.ts); it deploys
 * nothing there.
 */
import { createHash, randomBytes } from 'node:crypto';
import { ExpectedResult, type IApiCall, IntegTest, Match } from '@aws-cdk/integ-tests-alpha';
import { App, Duration, RemovalPolicy } from 'aws-cdk-lib';
import { FORM_URLS } from '../../lambdas/forms/form-urls.ts';
import { TABLE_KEYS } from '../../lambdas/shared/table-schema.ts';
import { ModuleWorkerFunction, TakoformHostStack } from '../../lib/index.ts';

const SPACE = 'integ';
const API = 'apis/forms.takoform.com/v2';
const WAIT = { totalTimeout: Duration.minutes(10), interval: Duration.seconds(10) };

const app = new App();
const stack = new TakoformHostStack(app, 'TakoformIntegDelivery', { removalPolicy: RemovalPolicy.DESTROY });
const host = stack.host;
const echo = new ModuleWorkerFunction(stack, 'Echo', {
  host: host.workerBinding,
  entry: new URL('../../examples/workers/default/echo.mjs', import.meta.url),
  space: SPACE,
  name: 'echo',
});
new ModuleWorkerFunction(stack, 'Failing', {
  host: host.workerBinding,
  entry: new URL('./workers/failing.mjs', import.meta.url),
  space: SPACE,
  name: 'failing',
});

const integ = new IntegTest(app, 'TakoformDelivery', {
  testCases: [stack],
  cdkCommandOptions: { destroy: { args: { force: true } } },
});
const a = integ.assertions;

// The test's API key: a fresh token for each synth (TAKOFORM_INTEG_KEY to choose one). Its hash
// goes into the Host table as `npm run admin -- keys create` writes it; the token itself is in
// the assertion stack's template, which the run destroys with the Host.
const token = process.env.TAKOFORM_INTEG_KEY ?? `tfk_integ_${randomBytes(24).toString('base64url')}`;
const keyHash = createHash('sha256').update(token, 'utf8').digest('hex');
const key = a.awsApiCall('DynamoDB', 'putItem', {
  TableName: host.table.tableName,
  Item: {
    [TABLE_KEYS.pk]: { S: `KEY#${keyHash}` },
    [TABLE_KEYS.sk]: { S: '_' },
    keyHash: { S: keyHash },
    principal: { S: 'integ' },
    spaces: { M: { [SPACE]: { S: 'write' } } },
  },
});

let last: IApiCall = key;
/** Runs after the previous step, so the steps run in the order written. */
function step<T extends IApiCall>(call: T): T {
  last.next(call);
  last = call;
  return call;
}

/** A request to the deployed Host with the test's key. */
function hostCall(path: string, o: { method?: string; body?: unknown; idempotent?: string } = {}): IApiCall {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  if (o.idempotent) headers['idempotency-key'] = o.idempotent;
  return a.httpApiCall(`${host.url}${path}`, {
    method: o.method ?? 'GET',
    headers,
    ...(o.body === undefined ? {} : { body: stack.toJsonString(o.body) }),
  });
}

/** POST /resources, then the Operation polled until it succeeded; answers the Resource uid. */
function create(kind: keyof typeof FORM_URLS, name: string, spec: Record<string, unknown>): string {
  const accepted = step(
    hostCall(`${API}/resources`, {
      method: 'POST',
      body: { form: FORM_URLS[kind], space: SPACE, name, spec },
      idempotent: `integ-create-${name}`,
    }),
  );
  accepted.expect(ExpectedResult.objectLike({ status: 202 }));
  step(hostCall(`${API}/operations/${accepted.getAttString('apiCallResponse.body.id')}`))
    .expect(ExpectedResult.objectLike({ body: { status: 'succeeded' } }))
    .waitForAssertions(WAIT);
  return accepted.getAttString('apiCallResponse.body.resourceUid');
}

const ref = (resourceUid: string) => ({ resourceUid });
const consumer = (queue: string, worker: string, more: Record<string, unknown>) => ({
  queue: ref(queue),
  worker: ref(worker),
  maxBatchSize: 10,
  maxBatchTimeoutSeconds: 0,
  maxConcurrency: 2,
  maxRetries: 0,
  retryDelaySeconds: 0,
  ...more,
});
const send = (queueUid: string, text: string) =>
  step(
    hostCall(`ext/queues/v1/queues/${queueUid}/messages`, {
      method: 'POST',
      body: { messages: [{ body: Buffer.from(text).toString('base64') }] },
    }),
  ).expect(ExpectedResult.objectLike({ status: 200 }));

// Apply: what `takoform apply` would do with a file of these seven Resources.
const orders = create('atLeastOnceQueue', 'orders', { messageRetentionSeconds: 3600 });
const jobs = create('atLeastOnceQueue', 'jobs', { messageRetentionSeconds: 3600 });
const jobsDlq = create('atLeastOnceQueue', 'jobs-dlq', { messageRetentionSeconds: 3600 });
const echoUid = create('moduleWorker', 'echo', {});
const failingUid = create('moduleWorker', 'failing', {});
create('queueConsumer', 'orders-echo', consumer(orders, echoUid, {}));
create('queueConsumer', 'jobs-failing', consumer(jobs, failingUid, { deadLetterQueue: ref(jobsDlq) }));

// Delivery: the echo worker logs the message it received.
send(orders, 'integ-hello');
const delivered = step(
  a.awsApiCall('CloudWatchLogs', 'filterLogEvents', {
    logGroupName: echo.function.logGroup.logGroupName,
    filterPattern: '"integ-hello"',
  }),
);
delivered.provider.addToRolePolicy({ Effect: 'Allow', Action: ['logs:FilterLogEvents'], Resource: ['*'] });
delivered
  .assertAtPath('events.0.message', ExpectedResult.stringLikeRegexp('"text":"integ-hello"'))
  .waitForAssertions(WAIT);

// A dead-letter move: the failing worker's message, out of retries, is in jobs-dlq as a new message.
send(jobs, 'integ-poison');
step(hostCall(`ext/queues/v1/queues/${jobsDlq}/peek`, { method: 'POST', body: { limit: 10 } }))
  .expect(
    ExpectedResult.objectLike({
      status: 200,
      body: {
        messages: Match.arrayWith([
          Match.objectLike({
            preview: 'integ-poison',
            deadLetter: Match.objectLike({ sourceQueueName: 'jobs', attempts: 1, lastOutcome: 'threw' }),
          }),
        ]),
      },
    }),
  )
  .waitForAssertions(WAIT);

app.synth();
