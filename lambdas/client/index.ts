/** The package entry for AWS-native producers (host-profile §3). */
export { MESSAGE_LIMITS, type ProducerErrorName } from '../delivery/limits.ts';
export {
  createQueueProducerClient,
  type QueueProducerClient,
  type QueueProducerClientOptions,
} from './queue-producer-client.ts';
