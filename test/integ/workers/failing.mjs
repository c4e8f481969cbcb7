// Throws on every batch: with maxRetries 0 each message is moved to the dead-letter queue at once.
export default {
  async queue() {
    throw new Error('integ: this worker always fails');
  },
};
