/** The API root under the public origin (host-profile §1). */
export const API_ROOT = '/apis/forms.takoform.com/v2';
export const DISCOVERY_PATH = '/.well-known/takoform/v2';

/**
 * Validates a public origin: an absolute http(s) URL with no path, userinfo, query or fragment.
 * Returns it in ASCII-serialized form without a trailing slash.
 */
export function parsePublicOrigin(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`public origin ${JSON.stringify(value)} is not an absolute URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new Error(`public origin must use https (or http for local use), got ${url.protocol}`);
  }
  if (
    url.username ||
    url.password ||
    url.search ||
    url.hash ||
    url.pathname !== '/' ||
    /[?#\\]/.test(value)
  ) {
    throw new Error(`public origin must be scheme://host[:port] only, got ${JSON.stringify(value)}`);
  }
  return url.origin;
}
