/** The user's worker module, bound at bundling time (see module-worker-entry.ts). */
declare module 'takoform-worker-module' {
  const worker: unknown;
  export default worker;
}
