/** Under `--workers`: a worker's side of the admin API, answering the primary's calls over IPC. */
/**
 * The worker runs each request on its own rules exactly as one process would; the primary puts the workers' answers
 * together. A worker that starts first takes its siblings' admin-set overrides.
 */
import { AdminRoutes, type AdminApiSource } from '../admin/admin-api.js';
import { bodyTooLarge, parseJsonBody, type AdminRequest } from '../admin/admin-http.js';
import type { OverrideAdmin } from '../admin/admin-overrides.js';
import { answerCalls, IpcCaller, primaryPort } from '../runtime/ipc.js';
import type { WorkerAdmin } from '../serve/gateway.js';
import { ADMIN_STATE_TAG, ADMIN_TAG, type AdminCall, type AdminState, type ApiCall } from './admin-calls.js';

/** How long a starting worker waits for its siblings' admin state before it starts without. */
const STATE_TIMEOUT_MS = 5_000;

/** In a worker with the admin API on: answers the primary's admin calls from `admin`. */
export function answerAdminCalls(admin: WorkerAdmin): void {
  const lead = new AdminRoutes(admin.source);
  const other = new AdminRoutes(followerSource(admin.source));
  answerCalls(ADMIN_TAG, primaryPort(), (value) => {
    const call = value as AdminCall;
    if (call.op === 'stats') return admin.stats();
    if (call.op === 'state') return stateOf(admin.source);
    return (call.lead ? lead : other).answer(requestOf(call), call.path, new URLSearchParams(call.query));
  });
}

/**
 * In a worker that starts: takes the admin state of the workers already
 * serving (see {@link AdminState}), before it listens, so a worker started
 * in place of one that died applies what the operator set.
 * @throws Error when the primary does not answer in time
 */
export async function takeSiblingsAdminState(admin: WorkerAdmin): Promise<number> {
  const state = (await new IpcCaller(ADMIN_STATE_TAG, primaryPort(), STATE_TIMEOUT_MS, 'the primary').call()) as AdminState | null;
  let taken = 0;
  for (const { rule, pattern, value } of state?.overrides ?? []) {
    const overrides = admin.source.rules().find((r) => r.settings.name === rule)?.overrides;
    try {
      overrides?.put(pattern, value, 'admin');
      if (overrides !== undefined) taken += 1;
    } catch {
      // The sibling's rules were checked with the same config: a value this worker refuses was refused there too.
    }
  }
  return taken;
}

/** The request of `call`: its method, and its body read as the primary received it. */
function requestOf(call: ApiCall): AdminRequest {
  return {
    method: call.method,
    json: async () => {
      if (call.body === null) throw bodyTooLarge();
      return parseJsonBody(call.body);
    },
  };
}

/**
 * `source` for a worker other than the lead: it announces nothing on Redis
 * (the lead did, once for the host), and an override on a Redis hash, which
 * the lead wrote before this worker is asked, is applied here as it would be
 * on hearing the lead's announcement, without writing it again.
 */
function followerSource(source: AdminApiSource): AdminApiSource {
  const overrides: OverrideAdmin = {
    plans: () => source.overrides?.plans() ?? new Map(),
    write: (hash, pattern, value) => {
      for (const rule of source.rules()) {
        if (rule.overrides?.redisHash !== hash) continue;
        try {
          if (value === undefined) rule.overrides.remove(pattern);
          else rule.overrides.put(pattern, value, 'redis');
        } catch {
          // Another rule on the same hash may refuse the value (a policy it lacks); it keeps its entry out, as on Redis.
        }
      }
      return Promise.resolve();
    },
  };
  return { rules: () => source.rules(), limited: source.limited, overrides };
}

/** The overrides set through the admin API on this worker's rules (those without a Redis hash). */
function stateOf(source: AdminApiSource): AdminState {
  return {
    overrides: source
      .rules()
      .flatMap((r) =>
        (r.overrides?.list() ?? [])
          .filter((e) => e.source === 'admin')
          .map((e) => ({ rule: r.settings.name, pattern: e.pattern, value: e.value })),
      ),
  };
}
