import type { Execution, Form, Outcome } from '../../engine/forms.ts';
import type { JsonObject } from '../../engine/model.ts';
import { FORM_URLS } from '../form-urls.ts';
import { parseSpec, specObject } from '../shared/spec-fields.ts';
import type { WorkerRegistry } from './worker-registry.ts';

/** ModuleWorker 0.3.0 spec (MW-01): exactly `{}`; the code comes from the registry, not the spec. */
export const workerSpecSchema = specObject({});

const exactlyEmpty = (spec: unknown): JsonObject => parseSpec(workerSpecSchema, spec);

/**
 * ModuleWorker 0.3.0 (MW-01): spec is exactly {}. The Resource only names a worker; its code
 * comes from the registry, and `observed` says whether it is there and loads.
 */
export function createModuleWorkerForm(registry: WorkerRegistry): Form {
  const observe = async (exec: Execution): Promise<Outcome> => {
    if (exec.action === 'delete') return { kind: 'complete', observed: {} };
    const code = await registry.lookup(exec.space, exec.name);
    return {
      kind: 'complete',
      observed: { activeDeploymentUid: code?.deploymentUid ?? null, ready: code !== undefined },
      output: {},
    };
  };
  return {
    url: FORM_URLS.moduleWorker,
    validateCreate: exactlyEmpty,
    validateUpdate: (spec) => exactlyEmpty(spec),
    // Nothing is provisioned: executing and reconciling are the same read-only observation.
    backend: { execute: observe, reconcile: observe },
    observe: async (r) => {
      const code = await registry.lookup(r.space, r.name).catch(() => null);
      if (code === null) return undefined;
      return { activeDeploymentUid: code?.deploymentUid ?? null, ready: code !== undefined };
    },
  };
}
