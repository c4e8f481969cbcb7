import { Duration } from 'aws-cdk-lib';
import type { RestApi } from 'aws-cdk-lib/aws-apigateway';
import {
  Alarm,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  Metric,
  SearchExpression,
  TextWidget,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { StateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import {
  HOST_DIMENSION,
  HOST_METRICS,
  METRICS_NAMESPACE,
  sqsSearchExpression,
} from '../../lambdas/shared/aws-env.ts';

export interface AlarmThresholds {
  /** Messages waiting in dead-letter queues of active consumers. @default 1 */
  readonly deadLetterMessages?: number;
  /** Oldest message age over the Host's queues, in seconds. @default 900 */
  readonly oldestMessageAgeSeconds?: number;
  /** Worker batches that threw or were cut off, per 5 minutes. @default 1 */
  readonly workerBatchFailures?: number;
  /** Errors of the Host's own functions, per 5 minutes. @default 1 */
  readonly hostFunctionErrors?: number;
  /** Dispatcher executions failed, timed out or aborted, per 5 minutes. @default 1 */
  readonly dispatcherFailures?: number;
  /** Operations in `reconciling` for more than 15 minutes. @default 1 */
  readonly operationsStuckReconciling?: number;
  /** API 5xx answers per 5 minutes. @default 1 */
  readonly api5xx?: number;
}

export interface HostObservabilityProps {
  readonly api: RestApi;
  readonly hostFunctions: Record<string, IFunction>;
  readonly stateMachine: StateMachine;
  /** The Express dispatcher, beside the Standard one. */
  readonly expressStateMachine?: StateMachine;
  /** The Host's name: the `host` dimension of its metrics, and the stem of its alarm and dashboard names. */
  readonly hostName: string;
  /** The Host's queue name prefix, `<hostName>_`. */
  readonly queueNamePrefix: string;
  /** Alarm and OK notifications go here. @default no actions */
  readonly alarmTopic?: ITopic;
  readonly thresholds?: AlarmThresholds;
}

const FIVE_MINUTES = Duration.minutes(5);

/** A Host metric as Powertools emits it: namespace Takoform, dimensions `service` and `host`. */
function hostMetric(host: string, name: string, service: string, statistic: string): Metric {
  return new Metric({
    namespace: METRICS_NAMESPACE,
    metricName: name,
    dimensionsMap: { service, [HOST_DIMENSION]: host },
    statistic,
    period: Duration.minutes(1),
  });
}

/**
 * What an operator must see (OPS-04): one dashboard and an alarm each for dead-letter depth,
 * oldest message age, worker handler failures, Host function errors, dispatcher failures,
 * Operations stuck in `reconciling` and API 5xx. Queue-level graphs use SEARCH expressions over
 * the queue name prefix; alarms cannot watch a SEARCH, so the supervisor republishes the two
 * queue aggregates (dead-letter depth, oldest age) as Host metrics every minute.
 */
export class HostObservability extends Construct {
  readonly dashboard: Dashboard;
  readonly alarms: Record<string, Alarm> = {};

  constructor(scope: Construct, id: string, props: HostObservabilityProps) {
    super(scope, id);
    const t = props.thresholds ?? {};
    const host = props.hostName;
    const supervisor = 'takoform-supervisor';
    const deadLetter = hostMetric(host, HOST_METRICS.deadLetterMessages, supervisor, 'Maximum');
    // Republished every 5 minutes (GetMetricData is billed per queue): a 5-minute period.
    const oldest = hostMetric(host, HOST_METRICS.oldestMessageAgeSeconds, supervisor, 'Maximum').with({
      period: FIVE_MINUTES,
    });
    const backlog = hostMetric(host, HOST_METRICS.backlogMessages, supervisor, 'Maximum');
    const batchFailures = hostMetric(
      host,
      HOST_METRICS.workerBatchFailures,
      'takoform-batch-host',
      'Sum',
    ).with({
      period: FIVE_MINUTES,
    });
    const deadLettered = hostMetric(host, HOST_METRICS.messagesDeadLettered, 'takoform-batch-host', 'Sum');
    const stuck = hostMetric(host, HOST_METRICS.operationsStuckReconciling, 'takoform-executor', 'Maximum');
    const reconciling = hostMetric(host, HOST_METRICS.operationsReconciling, 'takoform-executor', 'Maximum');

    const functionErrors: Record<string, IMetric> = {};
    for (const [i, fn] of Object.values(props.hostFunctions).entries()) {
      functionErrors[`e${i}`] = fn.metricErrors({ period: FIVE_MINUTES, statistic: 'Sum' });
    }
    const hostErrors = new MathExpression({
      expression: `SUM([${Object.keys(functionErrors).join(',')}])`,
      usingMetrics: functionErrors,
      period: FIVE_MINUTES,
      label: 'Host function errors',
    });
    // Both dispatchers' lanes (Standard and Express) together.
    const machines = [props.stateMachine, ...(props.expressStateMachine ? [props.expressStateMachine] : [])];
    const machineMetrics: Record<string, IMetric> = {};
    for (const [i, sm] of machines.entries()) {
      machineMetrics[`failed${i}`] = sm.metricFailed({ period: FIVE_MINUTES, statistic: 'Sum' });
      machineMetrics[`timedOut${i}`] = sm.metricTimedOut({ period: FIVE_MINUTES, statistic: 'Sum' });
      machineMetrics[`aborted${i}`] = sm.metricAborted({ period: FIVE_MINUTES, statistic: 'Sum' });
    }
    const dispatcherFailures = new MathExpression({
      expression: Object.keys(machineMetrics).join(' + '),
      usingMetrics: machineMetrics,
      period: FIVE_MINUTES,
      label: 'Dispatcher executions failed, timed out or aborted',
    });
    const api5xx = props.api.metricServerError({ period: FIVE_MINUTES, statistic: 'Sum' });

    const alarm = (name: string, metric: IMetric, threshold: number, description: string) => {
      const a = new Alarm(this, name, {
        alarmName: `${props.queueNamePrefix}${name}`,
        metric,
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription: description,
      });
      if (props.alarmTopic) {
        a.addAlarmAction(new SnsAction(props.alarmTopic));
        a.addOkAction(new SnsAction(props.alarmTopic));
      }
      this.alarms[name] = a;
      return a;
    };
    alarm(
      'DeadLetterDepth',
      deadLetter,
      t.deadLetterMessages ?? 1,
      'Messages wait in a dead-letter queue of an active consumer.',
    );
    alarm(
      'OldestMessageAge',
      oldest,
      t.oldestMessageAgeSeconds ?? 900,
      'A message has waited too long in one of the Host queues (SQS ApproximateAgeOfOldestMessage).',
    );
    alarm(
      'WorkerHandlerFailures',
      batchFailures,
      t.workerBatchFailures ?? 1,
      'Worker queue handlers threw or were cut off.',
    );
    alarm(
      'HostFunctionErrors',
      hostErrors,
      t.hostFunctionErrors ?? 1,
      'A Takoform Host Lambda function failed.',
    );
    alarm(
      'DispatcherFailures',
      dispatcherFailures,
      t.dispatcherFailures ?? 1,
      'Dispatcher executions failed.',
    );
    alarm(
      'OperationsStuckReconciling',
      stuck,
      t.operationsStuckReconciling ?? 1,
      'Operations have been reconciling for more than 15 minutes.',
    );
    alarm('Api5xx', api5xx, t.api5xx ?? 1, 'The Host API answered 5xx.');

    const search = (metric: string, stat: string, label: string) =>
      new SearchExpression({
        expression: sqsSearchExpression(props.queueNamePrefix, metric, stat, 300),
        label,
        period: FIVE_MINUTES,
      });
    this.dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: `${props.queueNamePrefix}host`,
      defaultInterval: Duration.hours(3),
    });
    this.dashboard.addWidgets(
      new TextWidget({
        markdown: `# Takoform Host ${host}\nQueues: \`${props.queueNamePrefix}*\`. Alarms: dead-letter depth, oldest message age, handler failures, Host errors, dispatcher failures, stuck Operations, API 5xx.`,
        width: 24,
        height: 2,
      }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Queues: visible messages (per queue)',
        left: [search('ApproximateNumberOfMessagesVisible', 'Maximum', '')],
        width: 12,
      }),
      new GraphWidget({
        title: 'Queues: oldest message age, s (per queue)',
        left: [search('ApproximateAgeOfOldestMessage', 'Maximum', '')],
        width: 12,
      }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Backlog and dead letters',
        left: [backlog, deadLetter],
        right: [deadLettered],
        width: 8,
      }),
      new GraphWidget({ title: 'Worker batch failures', left: [batchFailures], width: 8 }),
      new GraphWidget({ title: 'Operations reconciling / stuck', left: [reconciling, stuck], width: 8 }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({ title: 'Host function errors', left: [hostErrors], width: 8 }),
      new GraphWidget({
        title: 'Dispatcher executions',
        left: machines.flatMap((sm) => [
          sm.metricStarted({ period: FIVE_MINUTES }),
          sm.metricSucceeded({ period: FIVE_MINUTES }),
        ]),
        right: [dispatcherFailures],
        width: 8,
      }),
      new GraphWidget({
        title: 'API',
        left: [props.api.metricCount({ period: FIVE_MINUTES }), api5xx],
        right: [props.api.metricLatency({ period: FIVE_MINUTES, statistic: 'p99' })],
        width: 8,
      }),
    );
  }
}
