/** "How each figure is measured": one bullet per kind of figure, so a reader can judge each number. */
import type { BenchConfig } from '../results-model.ts';

const sentences = (...list: string[]) => list.join(' ');

const THROUGHPUT = sentences(
  '- **Throughput (drain)**: one Host per run' +
    ' (its own table, queue, worker and consumer, composed by `composeHost` as `npm start` does),' +
    ' the queue pre-filled through the producer (`sendBatch` of 100),' +
    " then the delivery side started as the local Host runs it (the control loop's lanes:" +
    ' the production dispatcher definition under the local Step Functions stand-in, and its supervisor)' +
    ' with a no-op worker in the worker-thread pool (threads started before the runs).',
  "Timed from the start until the last message's batch is finalised.",
  'Baseline in the same run, right after: a fresh queue on the same SQS server filled with bodies of the same size,' +
    ' drained by `concurrency` loops that receive ≤10 per call (WaitTimeSeconds 0)' +
    ' until they hold `batchSize` messages and delete them with DeleteMessageBatch.',
  'Ratio per run pair, then the median.',
);

function steadyStream(steady: BenchConfig['steady']): string {
  if (!steady) return '- **Steady stream**: not measured in this run.';
  return sentences(
    '- **Steady stream**: a producer sends `sendBatch` through the Host every 50 ms at the stated rate' +
      ` (so sends wake the consumer, as on AWS) for ${steady.timing.warmupSeconds} s of warm-up and a ${steady.timing.seconds} s window;` +
      ' achieved throughput counts messages whose handler started in the window,' +
      " send → handler is each message's send time (its envelope) to its handler's start, for messages sent in the window;" +
      " per-batch counts are the window's calls per batch finalised in it.",
    'Baseline right after on the same SQS server: the same producer straight to SQS (`SendMessageBatch` of 10)' +
      ' and `concurrency` raw loops that form batches as the runner does' +
      ' (a 1 s long poll for the first message, then up to maxBatchTimeoutSeconds for the rest), then delete them;' +
      ' its latency ends when the batch is formed.',
  );
}

const UTILISATION = sentences(
  '- **Utilisation**: a worker that sleeps 50 ± 40 ms (uniform) and records its start and end;' +
    ' integrated from the first handler start to the last (after that the backlog is gone).',
  'Held slots are read through the delivery service every 25 ms over the same window.',
);

const SETTLEMENT = sentences(
  '- **acknowledge() / acknowledgeAll()**: timed inside the worker around each call (`performance.now()`):' +
    ' worker thread → Host thread → DeliveryService.settle → DynamoDB Local → back;' +
    ' each on a consumer with maxConcurrency 1 on a Host of its own.',
  'Bare write: conditional UpdateItems on one item of the same table from the Host thread,' +
    ' one at a time 5 ms apart, during the same phase; only those that started while a handler was running are kept.',
  'The control-plane rows use bare writes measured right after their phase.',
);

const ARRIVAL = sentences(
  '- **Send → handler, idle consumer**: `producer.send()` through the Host to a consumer with nothing to do,' +
    ' one message at a time after a random pause of 0.2–4 s, until the handler records its start.',
  'The lane long-polls for idleWaitSeconds 3 and ends when nothing arrives;' +
    ' a send wakes the consumer (a new lane) when no lane is receiving; no supervisor round runs during these runs.',
  'The after-idle row sends once more after every lane ended and the consumer sat idle for the stated time.',
  'These runs run side by side, one Host each.',
);

const CONTROL_PLANE = sentences(
  '- **Operation create → succeeded**: POST /resources (an AtLeastOnceQueue, which creates an SQS queue)' +
    " through the Host's HTTP core in process, then GET /operations/{id} every 5 ms while the executor loop runs as in `npm start`.",
  '**Resource GET**: GET /resources/{uid} in sequence.',
);

const COUNTS = sentences(
  "- **Cost and counts**: SDK middleware on the Host's DynamoDB and SQS clients counts every call by service, operation," +
    ' the calling part of the Host (AsyncLocalStorage) and the kinds of item it names,' +
    ' and adds `ReturnConsumedCapacity: TOTAL` to every DynamoDB command that supports it;' +
    ' request units are the ones DynamoDB Local reports, plus 2 WRU for each `ConditionCheck` of a transaction,' +
    ' which AWS bills as a transactional write and DynamoDB Local reports as none.',
  'State transitions are the `StateEntered` (and `StateRetried`) events of each lane execution,' +
    ' billed for lanes on the Standard dispatcher;' +
    " a lane on the Express dispatcher (every cell here: the bench's worker bound of 30 s fits its window)" +
    ' is billed as one request and its duration from start to its last event, rounded up to 100 ms, at 64 MB;' +
    ' Lambda invocations are the Task handlers (AcquireSlot, InvokeWorker, RecoverBatch, HandOver)' +
    ' plus each batch-host call of the runner (acquire, register, settle, finalize, deadLetter), each one Lambda invoke on AWS.',
  'Durations are measured locally.',
  "The supervisor's rounds are not counted as per-message cost.",
  "Receipt handles are as long as SQS's (392 characters; the SQS stand-in lengthens fauxqs's 36-character ones," +
    " `sqs-receipt-handles.ts`), so the Host's records of them are AWS's size.",
);

export function methodSection(steady: BenchConfig['steady']): string[] {
  return [
    '## How each figure is measured',
    '',
    THROUGHPUT,
    steadyStream(steady),
    UTILISATION,
    SETTLEMENT,
    ARRIVAL,
    CONTROL_PLANE,
    COUNTS,
    '',
  ];
}
