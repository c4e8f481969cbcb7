import { API_ROOT } from './origin.ts';

/** The limits this Host advertises (host-profile §5). */
export const LIMITS = {
  maxRequestBytes: 1_048_576,
  maxPageSize: 100,
  replayWindowSeconds: 86_400,
} as const;

export interface Discovery {
  api: 'forms.takoform.com/v2';
  baseUrl: string;
  documentation: string;
  authentication: { schemes: string[]; documentation: string };
  capabilities: { offerings: false; previews: false; privateInputs: false };
  limits: typeof LIMITS;
}

/** The discovery document for a public origin (HA-01). Documentation is served by the Host itself. */
export function discoveryDocument(origin: string): Discovery {
  return {
    api: 'forms.takoform.com/v2',
    baseUrl: `${origin}${API_ROOT}`,
    documentation: `${origin}/docs/host-api`,
    authentication: { schemes: ['Bearer'], documentation: `${origin}/docs/authentication` },
    capabilities: { offerings: false, previews: false, privateInputs: false },
    limits: LIMITS,
  };
}
