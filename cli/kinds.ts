import { FORM_URLS } from '../lambdas/forms/form-urls.ts';

/** The CLI's short names for the three Forms (host-profile §6), in dependency order. */
export const KINDS = {
  queue: FORM_URLS.atLeastOnceQueue,
  worker: FORM_URLS.moduleWorker,
  consumer: FORM_URLS.queueConsumer,
} as const;

export type Kind = keyof typeof KINDS;

export const KIND_NAMES = Object.keys(KINDS) as Kind[];

export function isKind(value: string): value is Kind {
  return Object.hasOwn(KINDS, value);
}

/** The kind of a Form URL; undefined for Forms this CLI does not know. */
export function kindOf(form: string): Kind | undefined {
  return KIND_NAMES.find((k) => KINDS[k] === form);
}
