/**
 * Where a worker's secrets are read from: the references ModuleWorkerFunction writes into the
 * function's environment (never a value). Shared by the construct and the worker runtime, so it
 * imports no AWS SDK.
 */
import { z } from 'zod';

/** The names a secret may have in `env` (ModuleWorker's `requiredSensitiveVars` grammar). */
export const SECRET_NAME_PATTERN = /^[A-Z][A-Z0-9_]{0,63}$/;

export const secretRefSchema = z.union([
  /** A Secrets Manager secret's ARN or name; its `SecretString` is the value. */
  z.strictObject({ secretsManager: z.string().min(1) }),
  /** An SSM parameter's name (String or SecureString, decrypted). */
  z.strictObject({ ssmParameter: z.string().min(1) }),
]);
export type SecretRef = z.infer<typeof secretRefSchema>;

export const secretRefsSchema = z.record(z.string().regex(SECRET_NAME_PATTERN), secretRefSchema);
export type SecretRefs = z.infer<typeof secretRefsSchema>;
