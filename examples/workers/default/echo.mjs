// An example ModuleWorker (ModuleWorker 0.3.0 runtime ABI): logs every message and acknowledges
// it. Deployed by `npx cdk deploy -c exampleWorker=true` as ModuleWorker `default/echo`.
export default {
  async queue(batch) {
    for (const message of batch.messages) {
      const text = new TextDecoder().decode(message.body);
      console.log(
        JSON.stringify({
          worker: 'echo',
          queue: batch.queue,
          id: message.id,
          attempts: message.attempts,
          text,
        }),
      );
      await batch.acknowledge(message.id);
    }
  },
};
