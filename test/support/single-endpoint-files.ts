/** The integration files `npm run test:moto` runs in single-endpoint mode (see the README). */
export const SINGLE_ENDPOINT_FILES: readonly string[] = [
  'test/integration/single-endpoint/backend-in-use.test.ts',
  'test/integration/host-api/lifecycle.test.ts',
];
