// The admin side of a test gateway: the config block that gives it an admin listener with a token, and requests to that listener with the token.

/** The `admin:` config block: a listener on a free port of 127.0.0.1, guarded by `token`. */
export const adminBlock = (token: string): string => `admin:\n  listen: 127.0.0.1:0\n  token: ${token}\n`;

/** One request to the admin listener at `base` with `token` as bearer and a JSON content type; `body` is sent as written. */
export function adminFetch(base: string, token: string, method: string, path: string, body?: string): Promise<Response> {
  return fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body }),
  });
}

/** {@link adminFetch}, answered with its status and its parsed JSON body (none for HEAD, which has no body). */
export async function adminJson(
  base: string,
  token: string,
  method: string,
  path: string,
  body?: string,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the answer is read field by field
): Promise<{ status: number; json: any }> {
  const res = await adminFetch(base, token, method, path, body);
  return { status: res.status, json: method === 'HEAD' ? undefined : await res.json() };
}
