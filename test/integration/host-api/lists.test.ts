import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, FORMS, type TestHost, type TestPrincipal } from '../../support/host-harness.ts';
import { expectProblem } from './helpers.ts';

const mw = (name: string, space = 'team') => ({ form: FORMS.moduleWorker, space, name, spec: {} });
type Item = { uid: string; name: string; space: string; form: string };

describe('lists and cursors (HA-11)', () => {
  let host: TestHost;
  let uids: string[];
  let deletedUid: string;

  beforeAll(async () => {
    host = await createTestHost();
    // Created concurrently, so creation order and uid order need not agree.
    const created = await Promise.all(Array.from({ length: 7 }, (_, i) => host.create(mw(`item-${i}`))));
    uids = created.map((c) => c.body.resourceUid as string);
    const bobs = await host.create(mw('bob-item', 'other'), host.principals.bob);
    expect(bobs.status).toBe(202);
    const doomed = await host.create(mw('doomed'));
    deletedUid = doomed.body.resourceUid;
    await host.settle();
    const del = await host.request({
      method: 'DELETE',
      path: `/resources/${deletedUid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(del.status).toBe(202);
    await host.settle();
  });

  const list = (query: string, as?: TestPrincipal) => host.request({ path: '/resources', query, as });

  async function walk(filters: string, limit: number, as?: TestPrincipal) {
    const seen: Item[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string[] = [`limit=${limit}`];
      if (filters) q.push(filters);
      if (cursor) q.push(`cursor=${encodeURIComponent(cursor)}`);
      const res = await list(q.join('&'), as);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['items', 'nextCursor']);
      expect(res.body.items.length).toBeLessThanOrEqual(limit);
      seen.push(...res.body.items);
      cursor = res.body.nextCursor;
      expect(cursor === null || typeof cursor === 'string').toBe(true);
      pages++;
      expect(pages).toBeLessThan(50);
    } while (cursor !== null);
    return { seen, pages };
  }

  it('HA-11 limit=1 walks every page in ascending uid order, without repeats', async () => {
    const { seen, pages } = await walk('space=team', 1);
    const got = seen.map((r) => r.uid);
    expect(got).toEqual([...uids].sort());
    expect(new Set(got).size).toBe(got.length);
    expect(pages).toBeGreaterThanOrEqual(7);
    // Ordered by ASCII code units, not locale.
    expect([...got].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(got);
  });

  it('HA-11 other page sizes see the same sequence; the default page holds everything', async () => {
    const one = (await walk('space=team', 1)).seen.map((r) => r.uid);
    const three = await walk('space=team', 3);
    expect(three.seen.map((r) => r.uid)).toEqual(one);
    expect(three.pages).toBe(3);
    const all = await list('space=team');
    expect(all.body.items.map((r: Item) => r.uid)).toEqual(one);
    expect(all.body.nextCursor).toBeNull();
    const max = await list('limit=100');
    expect(max.status).toBe(200);
  });

  it('HA-11 deleted Resources are never listed, with or without filters', async () => {
    for (const q of [
      '',
      'space=team',
      'name=doomed',
      'space=team&name=doomed',
      `form=${encodeURIComponent(FORMS.moduleWorker)}`,
    ]) {
      const { seen } = await walk(q, 2);
      expect(seen.map((r) => r.uid)).not.toContain(deletedUid);
    }
    expect((await list('name=doomed')).body).toEqual({ items: [], nextCursor: null });
  });

  it('HA-11 filters are exact and combine with AND', async () => {
    const byName = await list('name=item-3');
    expect(byName.body.items.map((r: Item) => r.name)).toEqual(['item-3']);
    expect((await list('name=item')).body.items).toEqual([]);
    expect((await list('name=ITEM-3')).body.items).toEqual([]);
    expect((await list('space=team&name=item-3')).body.items).toHaveLength(1);
    expect((await list('space=other&name=item-3')).body.items).toEqual([]);
    const enc = encodeURIComponent(FORMS.moduleWorker);
    expect((await list(`form=${enc}&space=team`)).body.items).toHaveLength(7);
    // The Form URL is compared as an exact string: no trailing-slash or case normalisation.
    const noSlash = encodeURIComponent(FORMS.moduleWorker.slice(0, -1));
    expect((await list(`form=${noSlash}`)).body.items).toEqual([]);
    expect((await list(`form=${enc.toUpperCase()}`)).body.items).toEqual([]);
    for (const item of (await list('space=team')).body.items as Item[]) {
      expect(item.space).toBe('team');
      expect(item.form).toBe(FORMS.moduleWorker);
    }
  });

  it("HA-11 lists never show another principal's Resources", async () => {
    const alices = (await walk('', 2)).seen.map((r) => r.uid);
    expect(alices).toHaveLength(7);
    const bobs = (await walk('', 2, host.principals.bob)).seen;
    expect(bobs.map((r) => r.name)).toEqual(['bob-item']);
    expect(bobs.map((r) => r.uid).some((u) => alices.includes(u))).toBe(false);
    expect((await list('space=team', host.principals.reader)).body).toEqual({ items: [], nextCursor: null });
  });

  it('HA-11 pages, counts and cursors never reveal Resources in Spaces the key cannot read', async () => {
    // One principal, two keys: a writer on `team`, and a narrow key that reads only `shared`.
    const writer: TestPrincipal = {
      id: 'carol',
      token: `carol-${randomUUID()}`,
      spaces: { team: 'write', shared: 'write' },
    };
    const narrow: TestPrincipal = {
      id: 'carol',
      token: `carol-n-${randomUUID()}`,
      spaces: { shared: 'read' },
    };
    const h = await createTestHost({ principals: [writer, narrow] });
    const teamUids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const c = await h.create(mw(`hidden-${i}`), writer);
      teamUids.push(c.body.resourceUid);
    }
    const visible = await h.create(mw('visible', 'shared'), writer);
    expect(visible.status).toBe(202);
    const seen: string[] = [];
    const cursors: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = `limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const res = await h.request({ path: '/resources', query: q, as: narrow });
      expect(res.status).toBe(200);
      // No empty page that still says "there is more": that would count hidden Resources.
      if (res.body.nextCursor !== null) expect(res.body.items).toHaveLength(1);
      seen.push(...res.body.items.map((r: Item) => r.uid));
      cursor = res.body.nextCursor;
      if (cursor) cursors.push(cursor);
      pages++;
      expect(pages).toBeLessThan(10);
    } while (cursor !== null);
    expect(seen).toEqual([visible.body.resourceUid]);
    for (const c of cursors)
      for (const uid of teamUids)
        expect(Buffer.from(c.split('.')[1] ?? '', 'base64url').toString()).not.toContain(uid);
    // A filter on the unreadable Space: nothing, and no cursor.
    const team = await h.request({ path: '/resources', query: 'space=team&limit=1', as: narrow });
    expect(team.body).toEqual({ items: [], nextCursor: null });
    // The writer key still sees all five.
    expect((await h.request({ path: '/resources', as: writer })).body.items).toHaveLength(5);
  });

  it('HA-11 a tampered cursor is 400', async () => {
    const first = await list('space=team&limit=2');
    const cursor: string = first.body.nextCursor;
    expect(typeof cursor).toBe('string');
    const [v, payload, mac] = cursor.split('.') as [string, string, string];
    const forgedPayload = Buffer.from(JSON.stringify({ after: '' }), 'utf8').toString('base64url');
    const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
    const tampered = [
      `${v}.${forgedPayload}.${mac}`,
      `${v}.${payload}.${flip(mac)}`,
      `${v}.${flip(payload)}.${mac}`,
      `v2.${payload}.${mac}`,
      `${cursor}x`,
      cursor.slice(0, -1),
      'garbage',
      '',
      `${v}.${payload}`,
    ];
    for (const c of tampered) {
      expectProblem(await list(`space=team&limit=2&cursor=${encodeURIComponent(c)}`), 400, 'invalid_request');
    }
    // The genuine cursor still works.
    expect((await list(`space=team&limit=2&cursor=${encodeURIComponent(cursor)}`)).status).toBe(200);
  });

  it("HA-11 another principal's cursor is 400", async () => {
    const first = await list('limit=1');
    const cursor = encodeURIComponent(first.body.nextCursor);
    for (const who of [host.principals.bob, host.principals.reader]) {
      expectProblem(await list(`limit=1&cursor=${cursor}`, who), 400, 'invalid_request');
    }
  });

  it('HA-11 a cursor reused with different filters is 400', async () => {
    const first = await list('space=team&limit=1');
    const cursor = encodeURIComponent(first.body.nextCursor);
    const enc = encodeURIComponent(FORMS.moduleWorker);
    for (const filters of ['', 'space=other', 'space=team&name=item-1', `space=team&form=${enc}`]) {
      const q = [filters, 'limit=1', `cursor=${cursor}`].filter(Boolean).join('&');
      expectProblem(await list(q), 400, 'invalid_request');
    }
    // A different limit is not a filter: the cursor continues.
    expect((await list(`space=team&limit=3&cursor=${cursor}`)).status).toBe(200);
  });

  it('HA-11 limit outside 1..100 or not canonical digits is 400; so are repeated or unknown parameters', async () => {
    for (const q of [
      'limit=0',
      'limit=101',
      'limit=01',
      'limit=-1',
      'limit=1.0',
      'limit=1e1',
      'limit=',
      'limit= 1',
      'limit=abc',
      'limit=1&limit=1',
      'limit=1&limit=2',
      'space=team&space=team',
      'name=a&name=b',
      'cursor=a&cursor=b',
      'sort=uid',
      'space=not%20an%20id',
      'space=%zz',
    ]) {
      expectProblem(await list(q), 400, 'invalid_request');
    }
    for (const q of ['limit=1', 'limit=100', 'limit=99']) expect((await list(q)).status).toBe(200);
  });
});
