import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import { Certificate } from 'aws-cdk-lib/aws-certificatemanager';
import { Key } from 'aws-cdk-lib/aws-kms';
import { HostedZone } from 'aws-cdk-lib/aws-route53';
import type { Construct } from 'constructs';
import type { ControlPlaneApi } from './constructs/control-plane-api.ts';
import type { HostTable } from './constructs/host-table.ts';
import { deriveQueueNamePrefix, TakoformHost, type TakoformHostProps } from './constructs/takoform-host.ts';

export { deriveQueueNamePrefix };

export interface TakoformHostStackProps extends StackProps, TakoformHostProps {
  /** The ACM certificate of `domainName` by ARN (instead of `certificate`). @default none */
  readonly certificateArn?: string;
  /** `hostedZone` by id and name (both, instead of `hostedZone`). @default none */
  readonly hostedZoneId?: string;
  readonly hostedZoneName?: string;
  /** `tableEncryptionKey` by ARN (instead of the key). @default none */
  readonly tableEncryptionKeyArn?: string;
  /** `queueEncryptionKey` by ARN (instead of the key). @default none */
  readonly queueEncryptionKeyArn?: string;
}

/** The Takoform Host on AWS. Composes constructs only; resource details live in lib/constructs. */
export class TakoformHostStack extends Stack {
  readonly host: TakoformHost;

  constructor(scope: Construct, id: string, props: TakoformHostStackProps = {}) {
    super(scope, id, props);
    const certificate =
      props.certificate ??
      (props.certificateArn
        ? Certificate.fromCertificateArn(this, 'Certificate', props.certificateArn)
        : undefined);
    if ((props.hostedZoneId === undefined) !== (props.hostedZoneName === undefined)) {
      throw new Error('TakoformHostStack: hostedZoneId and hostedZoneName go together');
    }
    const hostedZone =
      props.hostedZone ??
      (props.hostedZoneId && props.hostedZoneName
        ? HostedZone.fromHostedZoneAttributes(this, 'HostedZone', {
            hostedZoneId: props.hostedZoneId,
            zoneName: props.hostedZoneName,
          })
        : undefined);
    const key = (id: string, arn: string | undefined) => (arn ? Key.fromKeyArn(this, id, arn) : undefined);
    this.host = new TakoformHost(this, 'Host', {
      ...props,
      certificate,
      hostedZone,
      tableEncryptionKey: props.tableEncryptionKey ?? key('TableKey', props.tableEncryptionKeyArn),
      queueEncryptionKey: props.queueEncryptionKey ?? key('QueueKey', props.queueEncryptionKeyArn),
    });

    new CfnOutput(this, 'ApiUrl', {
      value: this.host.url,
      description: 'Base URL of the Host (origin root)',
    });
    new CfnOutput(this, 'TableName', {
      value: this.host.table.tableName,
      description: 'The Host DynamoDB table',
    });
    new CfnOutput(this, 'StateMachineArn', {
      value: this.host.delivery.stateMachine.stateMachineArn,
      description: 'The dispatcher state machine (Standard lanes)',
    });
    new CfnOutput(this, 'ExpressStateMachineArn', {
      value: this.host.delivery.expressStateMachine.stateMachineArn,
      description: 'The Express dispatcher (lanes whose batches fit its five minutes)',
    });
    new CfnOutput(this, 'DashboardName', {
      value: this.host.observability.dashboard.dashboardName,
      description: 'The operator dashboard',
    });
  }

  get queueNamePrefix(): string {
    return this.host.queueNamePrefix;
  }

  get table(): HostTable {
    return this.host.table;
  }

  get api(): ControlPlaneApi {
    return this.host.api;
  }
}
