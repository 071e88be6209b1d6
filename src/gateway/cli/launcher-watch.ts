/** Drains `floodgate serve` when the npm process that launched it (npx, npm exec, npm start) goes away. */
/**
 * `npx floodgate serve` is npm → `sh -c` → node. A SIGTERM to npx (docker stop, a process manager, a test
 * harness) makes npm forward it to the shell, which dies without passing it on: the gateway was left
 * running, re-parented, holding its port. Under npm the gateway watches its parent instead, and treats
 * its going away as the SIGTERM it was meant to get.
 */

/** How often the parent is looked at, ms: a drain starts at most this long after the launcher went. */
const POLL_MS = 500;

/**
 * When this process runs under npm (npm sets `npm_lifecycle_event` for `npx` and for scripts), sends
 * it SIGTERM once its parent process exits, so serve's own SIGTERM handler drains and exits. Outside
 * npm nothing is watched: a gateway started with `nohup … &` or by a supervisor outlives its shell on
 * purpose. Returns a function that stops the watch.
 */
export function drainWhenLauncherExits(env: NodeJS.ProcessEnv = process.env): () => void {
  if (env.npm_lifecycle_event === undefined) return () => undefined;
  const parent = process.ppid;
  const timer = setInterval(() => {
    // process.ppid is read anew each time: a re-parented process reports its new parent (init or a subreaper).
    if (process.ppid === parent) return;
    clearInterval(timer);
    process.kill(process.pid, 'SIGTERM');
  }, POLL_MS);
  // The watch alone never keeps the process alive.
  timer.unref();
  return () => clearInterval(timer);
}
