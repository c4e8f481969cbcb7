// An example ModuleWorker (ModuleWorker 0.3.0 runtime ABI): logs every message and acknowledges
// it. ModuleWorker `default/echo`: locally with `npm start -- --workers-dir examples/workers`,
// on AWS deployed by `npm run cdk -- deploy -c exampleWorker=true`.
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
