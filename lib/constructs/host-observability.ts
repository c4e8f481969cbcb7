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

/** The metrics the alarms watch and the dashboard graphs, built once for both. */
interface WatchedMetrics {
  readonly deadLetter: Metric;
  readonly oldest: Metric;
  readonly backlog: Metric;
  readonly batchFailures: Metric;
  readonly deadLettered: Metric;
  readonly stuck: Metric;
  readonly reconciling: Metric;
  readonly hostErrors: MathExpression;
  /** Both dispatchers (Standard and Express), whose lanes are watched together. */
  readonly machines: readonly StateMachine[];
  readonly dispatcherFailures: MathExpression;
  readonly api5xx: Metric;
}

function watchedMetrics(props: HostObservabilityProps): WatchedMetrics {
  const host = props.hostName;
  const supervisor = 'takoform-supervisor';
  const machines = [props.stateMachine, ...(props.expressStateMachine ? [props.expressStateMachine] : [])];
  return {
    deadLetter: hostMetric(host, HOST_METRICS.deadLetterMessages, supervisor, 'Maximum'),
    // Republished every 5 minutes (GetMetricData is billed per queue): a 5-minute period.
    oldest: hostMetric(host, HOST_METRICS.oldestMessageAgeSeconds, supervisor, 'Maximum').with({
      period: FIVE_MINUTES,
    }),
    backlog: hostMetric(host, HOST_METRICS.backlogMessages, supervisor, 'Maximum'),
    batchFailures: hostMetric(host, HOST_METRICS.workerBatchFailures, 'takoform-batch-host', 'Sum').with({
      period: FIVE_MINUTES,
    }),
    deadLettered: hostMetric(host, HOST_METRICS.messagesDeadLettered, 'takoform-batch-host', 'Sum'),
    stuck: hostMetric(host, HOST_METRICS.operationsStuckReconciling, 'takoform-executor', 'Maximum'),
    reconciling: hostMetric(host, HOST_METRICS.operationsReconciling, 'takoform-executor', 'Maximum'),
    hostErrors: hostFunctionErrors(props.hostFunctions),
    machines,
    dispatcherFailures: dispatcherFailures(machines),
    api5xx: props.api.metricServerError({ period: FIVE_MINUTES, statistic: 'Sum' }),
  };
}

/** The sum of the Host functions' errors, per 5 minutes. */
function hostFunctionErrors(hostFunctions: Record<string, IFunction>): MathExpression {
  const functionErrors: Record<string, IMetric> = {};
  for (const [i, fn] of Object.values(hostFunctions).entries()) {
    functionErrors[`e${i}`] = fn.metricErrors({ period: FIVE_MINUTES, statistic: 'Sum' });
  }
  return new MathExpression({
    expression: `SUM([${Object.keys(functionErrors).join(',')}])`,
    usingMetrics: functionErrors,
    period: FIVE_MINUTES,
    label: 'Host function errors',
  });
}

/** Dispatcher executions failed, timed out or aborted, over every dispatcher, per 5 minutes. */
function dispatcherFailures(machines: readonly StateMachine[]): MathExpression {
  const machineMetrics: Record<string, IMetric> = {};
  for (const [i, sm] of machines.entries()) {
    machineMetrics[`failed${i}`] = sm.metricFailed({ period: FIVE_MINUTES, statistic: 'Sum' });
    machineMetrics[`timedOut${i}`] = sm.metricTimedOut({ period: FIVE_MINUTES, statistic: 'Sum' });
    machineMetrics[`aborted${i}`] = sm.metricAborted({ period: FIVE_MINUTES, statistic: 'Sum' });
  }
  return new MathExpression({
    expression: Object.keys(machineMetrics).join(' + '),
    usingMetrics: machineMetrics,
    period: FIVE_MINUTES,
    label: 'Dispatcher executions failed, timed out or aborted',
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
    const metrics = watchedMetrics(props);
    this.createAlarms(props, metrics);
    this.dashboard = this.createDashboard(props, metrics);
  }

  /** One alarm per watched metric, named `<queueNamePrefix><name>`, notifying the alarm topic. */
  private createAlarms(props: HostObservabilityProps, m: WatchedMetrics): void {
    const t = props.thresholds ?? {};
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
      m.deadLetter,
      t.deadLetterMessages ?? 1,
      'Messages wait in a dead-letter queue of an active consumer.',
    );
    alarm(
      'OldestMessageAge',
      m.oldest,
      t.oldestMessageAgeSeconds ?? 900,
      'A message has waited too long in one of the Host queues (SQS ApproximateAgeOfOldestMessage).',
    );
    alarm(
      'WorkerHandlerFailures',
      m.batchFailures,
      t.workerBatchFailures ?? 1,
      'Worker queue handlers threw or were cut off.',
    );
    alarm(
      'HostFunctionErrors',
      m.hostErrors,
      t.hostFunctionErrors ?? 1,
      'A Takoform Host Lambda function failed.',
    );
    alarm(
      'DispatcherFailures',
      m.dispatcherFailures,
      t.dispatcherFailures ?? 1,
      'Dispatcher executions failed.',
    );
    alarm(
      'OperationsStuckReconciling',
      m.stuck,
      t.operationsStuckReconciling ?? 1,
      'Operations have been reconciling for more than 15 minutes.',
    );
    alarm('Api5xx', m.api5xx, t.api5xx ?? 1, 'The Host API answered 5xx.');
  }

  /** The Host's dashboard: queues per queue (SEARCH), delivery, Operations, functions, dispatchers, API. */
  private createDashboard(props: HostObservabilityProps, m: WatchedMetrics): Dashboard {
    const search = (metric: string, stat: string, label: string) =>
      new SearchExpression({
        expression: sqsSearchExpression(props.queueNamePrefix, metric, stat, 300),
        label,
        period: FIVE_MINUTES,
      });
    const dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: `${props.queueNamePrefix}host`,
      defaultInterval: Duration.hours(3),
    });
    dashboard.addWidgets(
      new TextWidget({
        markdown: `# Takoform Host ${props.hostName}\nQueues: \`${props.queueNamePrefix}*\`. Alarms: dead-letter depth, oldest message age, handler failures, Host errors, dispatcher failures, stuck Operations, API 5xx.`,
        width: 24,
        height: 2,
      }),
    );
    dashboard.addWidgets(
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
    dashboard.addWidgets(
      new GraphWidget({
        title: 'Backlog and dead letters',
        left: [m.backlog, m.deadLetter],
        right: [m.deadLettered],
        width: 8,
      }),
      new GraphWidget({ title: 'Worker batch failures', left: [m.batchFailures], width: 8 }),
      new GraphWidget({ title: 'Operations reconciling / stuck', left: [m.reconciling, m.stuck], width: 8 }),
    );
    dashboard.addWidgets(
      new GraphWidget({ title: 'Host function errors', left: [m.hostErrors], width: 8 }),
      new GraphWidget({
        title: 'Dispatcher executions',
        left: m.machines.flatMap((sm) => [
          sm.metricStarted({ period: FIVE_MINUTES }),
          sm.metricSucceeded({ period: FIVE_MINUTES }),
        ]),
        right: [m.dispatcherFailures],
        width: 8,
      }),
      new GraphWidget({
        title: 'API',
        left: [props.api.metricCount({ period: FIVE_MINUTES }), m.api5xx],
        right: [props.api.metricLatency({ period: FIVE_MINUTES, statistic: 'p99' })],
        width: 8,
      }),
    );
    return dashboard;
  }
}
