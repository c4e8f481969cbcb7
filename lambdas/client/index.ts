/** The package entry for AWS-native producers (host-profile §3). */
export { MESSAGE_LIMITS, type ProducerErrorName } from '../delivery/limits.ts';
export { lambdaWake, type QueueWake } from './lambda-wake.ts';
export {
  createQueueProducerClient,
  type QueueProducerClient,
  type QueueProducerClientOptions,
} from './queue-producer-client.ts';
