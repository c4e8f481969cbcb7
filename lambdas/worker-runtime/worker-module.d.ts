/** The user's worker module, bound at bundling time (see entries/module-worker.ts). */
declare module 'takoform-worker-module' {
  const worker: unknown;
  export default worker;
}
