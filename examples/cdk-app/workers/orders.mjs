// The team's worker (ModuleWorker 0.3.0): logs each message with the configured greeting and
// whether its API token arrived (never the token itself), then acknowledges the batch.
export default {
  async queue(batch, env) {
    for (const message of batch.messages) {
      console.log(
        JSON.stringify({
          worker: 'orders-example',
          greeting: env.GREETING,
          tokenPresent: typeof env.API_TOKEN === 'string',
          id: message.id,
          text: new TextDecoder().decode(message.body),
        }),
      );
    }
    await batch.acknowledgeAll();
  },
};
