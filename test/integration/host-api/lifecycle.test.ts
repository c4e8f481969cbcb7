import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';

describe('Host API v2 lifecycle on DynamoDB Local', () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await createTestHost();
    host.workers.set('team', 'w1');
  });

  it('HA-07 HA-09 creates (202, queued), executes in the background, then updates and deletes', async () => {
    const created = await host.create({ form: FORMS.moduleWorker, space: 'team', name: 'w1', spec: {} });
    expect(created.status).toBe(202);
    expect(created.headers['retry-after']).toBe('1');
    expect(created.headers.location).toBe(
      `https://host.test/apis/forms.takoform.com/v2/operations/${created.body.id}`,
    );
    expect(created.body).toMatchObject({ action: 'create', generation: 1, status: 'queued', effect: 'none' });
    const uid = created.body.resourceUid;

    const pending = await host.request({ path: `/resources/${uid}` });
    expect(pending.body).toMatchObject({
      phase: 'pending',
      generation: 1,
      observedGeneration: 0,
      observedAt: null,
    });

    await host.settle();
    const op = await host.request({ path: `/operations/${created.body.id}` });
    expect(op.body).toMatchObject({ status: 'succeeded', effect: 'complete' });
    expect(Date.parse(op.body.retainUntil) - Date.parse(op.body.updatedAt)).toBeGreaterThanOrEqual(
      86_400_000,
    );
    const idle = await host.request({ path: `/resources/${uid}` });
    expect(idle.body).toMatchObject({
      phase: 'idle',
      observedGeneration: 1,
      observed: { activeDeploymentUid: 'dep-team-w1', ready: true },
      output: {},
    });

    const updated = await host.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: {} },
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(updated.status).toBe(202);
    expect(updated.body).toMatchObject({ action: 'update', generation: 2 });
    await host.settle();

    const deleted = await host.request({
      method: 'DELETE',
      path: `/resources/${uid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '2' },
    });
    expect(deleted.body).toMatchObject({ action: 'delete', generation: 3 });
    await host.settle();
    const gone = await host.request({ path: `/resources/${uid}` });
    expect([404, 410]).toContain(gone.status);
    const list = await host.request({ path: '/resources', query: 'space=team&name=w1' });
    expect(list.body).toEqual({ items: [], nextCursor: null });
  });
});
